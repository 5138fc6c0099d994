#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# events: brmrctl events against live daemons. Two listeners on the client
# (by --socket and by --pool) and one on member 1 get the current state
# first, then see member 2 killed (its session fails, writes made meanwhile
# are tracked dirty for it on member 1) and healed (it returns, takes the
# dirty maps, member 1 holds no dirty chunk for it any more); both client
# listeners get the same changes; every line is one JSON object; --now
# prints the state and exits.
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

need nbdsh timeout
need_bins

pool_up --members 2 --size 64M --name evpool
mkdir -p "$WORK/pools.d"
ln -s "$PDIR/pool.conf" "$WORK/pools.d/evpool.conf"
export BRMR_CONFIG_DIR=$WORK/pools.d

# ev_has FILE EXPR: a line of FILE is a JSON object e for which the Python
# expression EXPR holds (a key e lacks makes it false).
ev_has() {
	"$PY" -c '
import json, sys
for line in open(sys.argv[1]):
    e = json.loads(line)
    try:
        if eval(sys.argv[2]):
            sys.exit(0)
    except KeyError:
        pass
sys.exit(1)
' "$1" "$2"
}

# await FILE EXPR WHAT: wait (bounded) until FILE has such a line.
await() {
	wait_for 30 ev_has "$1" "$2" || fail "no event in $(basename "$1") for: $3; got: $(cat "$1")"
	log "  seen in $(basename "$1"): $3"
}

log "three listeners: two on the client, one on member 1"
"$BRMRCTL" events --socket "$PDIR/client.ctl" >"$WORK/c1.ev" 2>"$WORK/c1.err" &
"$BRMRCTL" events --pool evpool >"$WORK/c2.ev" 2>"$WORK/c2.err" &
"$BRMRCTL" events --pool evpool --member 1 >"$WORK/m1.ev" 2>"$WORK/m1.err" &
for f in c1 c2 m1; do
	await "$WORK/$f.ev" 'e["type"] == "exists-done"' "the initial state"
done
for id in 1 2; do
	ev_has "$WORK/c1.ev" "e['type'] == 'exists' and e['kind'] == 'member_state' and e['member'] == $id and e['state'] == 'normal' and e['pool'] == 'evpool'" ||
		fail "no 'exists' line for member $id: $(cat "$WORK/c1.ev")"
done
ev_has "$WORK/m1.ev" 'e["type"] == "exists" and e["kind"] == "pool" and e["member"] == 1 and e["role"] == "member"' ||
	fail "member 1 does not describe its pool: $(cat "$WORK/m1.ev")"

log "--now: the state, then exit"
timeout 10 "$BRMRCTL" events --socket "$PDIR/client.ctl" --now >"$WORK/now.ev" ||
	fail "brmrctl events --now failed"
tail -n 1 "$WORK/now.ev" | grep -q '"type":"exists-done"' || fail "--now did not end with exists-done"
ev_has "$WORK/now.ev" 'e["type"] == "change"' && fail "--now printed a change"

log "kill member 2, write 4 MiB while it is away"
"$POOL" kill --dir "$PDIR" 2
await "$WORK/c1.ev" 'e["type"] == "change" and e["kind"] == "member_state" and e["member"] == 2 and e["from"] == "normal" and e["state"] == "failed"' \
	"member 2 normal -> failed"
nbdsh -u "$URI" -c 'h.pwrite(b"\x5a" * (4 << 20), 8 << 20); h.flush()' || fail "writing while member 2 is away failed"
await "$WORK/c1.ev" 'e["kind"] == "dirty_tracking" and e["member"] == 2 and e["tracking"]' \
	"member 2's misses tracked"
await "$WORK/m1.ev" 'e["type"] == "change" and e["kind"] == "dirty_tracking" and e["member"] == 1 and e["peer"] == 2 and e["dirty"]' \
	"member 1 records chunks missed by member 2"
timeout 10 "$BRMRCTL" events --socket "$PDIR/m1.ctl" --now >"$WORK/m1now.ev" || fail "events --now on member 1 failed"
ev_has "$WORK/m1now.ev" 'e["type"] == "exists" and e["kind"] == "dirty_tracking" and e["peer"] == 2 and e["chunks"] >= 32' ||
	fail "member 1's state does not show member 2's 32 dirty chunks: $(cat "$WORK/m1now.ev")"

log "restart member 2: it takes the maps and heals"
"$POOL" start --dir "$PDIR" 2
await "$WORK/c1.ev" 'e["type"] == "change" and e["kind"] == "member_state" and e["member"] == 2 and e["state"] == "normal"' \
	"member 2 normal again"
await "$WORK/c1.ev" 'e["kind"] == "map_update" and e["member"] == 2 and e["status"] == 0 and e["error"] is None' \
	"member 2 took the dirty maps"
await "$WORK/c1.ev" 'e["kind"] == "dirty_tracking" and e["member"] == 2 and not e["tracking"]' \
	"member 2 no longer tracked"
await "$WORK/m1.ev" 'e["kind"] == "dirty_tracking" and e["peer"] == 2 and not e["dirty"]' \
	"member 1 holds no dirty chunk for member 2"
wait_for 30 healed 2 || fail "the pool did not heal"

log "both client listeners saw the same changes; every line is JSON with time, role, type"
"$PY" - "$WORK/c1.ev" "$WORK/c2.ev" "$WORK/m1.ev" <<'EOF' || fail "the event streams differ or are malformed"
import json, re, sys
streams = []
for path in sys.argv[1:]:
    evs = [json.loads(l) for l in open(path)]
    for e in evs:
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", e["time"]), e
        assert e["role"] in ("client", "member"), e
        assert e["type"] in ("exists", "exists-done", "change"), e
    streams.append(evs)
def changes(evs):
    return [{k: v for k, v in e.items() if k != "time"} for e in evs if e["type"] == "change"]
a, b = changes(streams[0]), changes(streams[1])
# The second listener attached a moment later; both saw everything after that.
n = min(len(a), len(b))
assert n >= 5 and a[-n:] == b[-n:], "client listeners differ:\n%s\n%s" % (a, b)
print("%d, %d and %d events, the client's two streams agree" % tuple(len(s) for s in streams))
EOF
grep -q "events listener attached (3 connected)\|events listener attached (2 connected)" "$PDIR/client.log" ||
	fail "nbd-brmr did not log its listeners"
for f in c1 c2 m1; do
	[[ ! -s $WORK/$f.err ]] || fail "brmrctl events ($f) wrote errors: $(cat "$WORK/$f.err")"
done

log "a stream ends when its daemon stops: brmrctl events exits 1"
"$BRMRCTL" events --socket "$PDIR/m2.ctl" >"$WORK/m2.ev" 2>"$WORK/m2.err" &
m2ev=$!
wait_for 10 ev_has "$WORK/m2.ev" 'e["type"] == "exists-done"' || fail "no initial state from member 2"
"$POOL" kill --dir "$PDIR" 2
rc=0
wait "$m2ev" || rc=$?
((rc == 1)) || fail "brmrctl events exited $rc when member 2 died"
grep -q "the event stream ended" "$WORK/m2.err" || fail "no message on the ended stream: $(cat "$WORK/m2.err")"
"$POOL" start --dir "$PDIR" 2
wait_for 30 healed 2 || fail "the pool did not heal after the second restart"
log "PASS"
