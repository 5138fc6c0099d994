#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# auth: authenticated membership with real daemons. brmrctl create makes the
# pool key (mode 0600) next to the pool file and the pool works as before
# (nbdcopy, fio) with every session proving it. Then, each refused with a log
# line naming the reason and the claimed id, counted in the member's status
# and metrics, and told as an auth_refused event:
#  - an nbd-brmr with another key;
#  - a brmr-server for member 2's id with another key (a store of its own);
#  - the same with the right key while the real member 2 is up (a spoofed id);
#  - a key file of mode 0644, refused at start with a clear error.
# The pool stays healthy through all of it.
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

need nbdcopy fio timeout
need_bins

pool_up --members 2 --size 64M --name authpool
KEY=$PDIR/authpool.key

log "brmrctl create made the key: mode 0600, 64 hex digits"
[[ -f $KEY ]] || fail "no key file $KEY after brmrctl create"
[[ $(stat -c %a "$KEY") == 600 ]] || fail "key file mode $(stat -c %a "$KEY"), not 600"
grep -qxE '[0-9a-f]{64}' "$KEY" || fail "key file does not hold 64 hex digits"
grep -q "key proven" "$PDIR/m1.log" || fail "member 1 logged no proven key: $(tail "$PDIR/m1.log")"
if grep -q "no pool key" "$PDIR"/*.log; then
	fail "a daemon runs an open pool: $(grep -h "no pool key" "$PDIR"/*.log)"
fi

# refused ID: member ID's auth_refused counter.
refused() {
	"$BRMRCTL" status --socket "$PDIR/m$1.ctl" --json |
		"$PY" -c 'import json, sys; print(json.load(sys.stdin)["auth_refused"])'
}
# refused_above ID N: member ID counted more than N refusals.
refused_above() { (($(refused "$1") > $2)); }
# logged FILE TEXT: FILE has a line with TEXT.
logged() { grep -qF -- "$2" "$1"; }

log "I/O as before: nbdcopy and fio through the keyed pool"
random_file "$WORK/data" 8
nbdcopy_roundtrip "$WORK/data"
fio --name=auth --ioengine=nbd --uri="$URI" --rw=randwrite --bs=4k --iodepth=16 \
	--offset=16M --size=16M --randrepeat=1 --verify=crc32c --verify_fatal=1 \
	--verify_state_save=0 --do_verify=1 --output-format=json --output="$WORK/fio.json" ||
	fail "fio randwrite+verify failed: $(cat "$WORK/fio.json")"
fio_check "$WORK/fio.json" || fail "fio saw errors"
for id in 1 2; do
	[[ $(refused "$id") == 0 ]] || fail "member $id refused sessions of the pool's own daemons"
done

"$BRMRCTL" events --socket "$PDIR/m1.ctl" >"$WORK/m1.ev" 2>"$WORK/m1.ev.err" &
wait_for 10 grep -q exists-done "$WORK/m1.ev" || fail "no event stream from member 1"

# A key that is not the pool's: 64 random hex digits, mode 0600.
( umask 077 && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$WORK/wrong.key" &&
	echo >>"$WORK/wrong.key" )

log "an nbd-brmr with another key: refused by every member, open fails"
before=$(refused 1)
rc=0
timeout 60 "$CLIENT" --config "$PDIR/pool.conf" --key-file "$WORK/wrong.key" \
	--socket "$WORK/bad.sock" --control "$WORK/bad.ctl" >"$WORK/bad-client.log" 2>&1 || rc=$?
((rc != 0)) || fail "nbd-brmr with a wrong key started"
logged "$WORK/bad-client.log" "did not prove the pool key" ||
	fail "nbd-brmr did not say why: $(tail -n 5 "$WORK/bad-client.log")"
wait_for 10 refused_above 1 "$before" || fail "member 1 did not count the refused client"
logged "$PDIR/m1.log" "refusing client claiming id 0: it holds another pool key" ||
	fail "member 1 logged no refusal of the client: $(tail -n 5 "$PDIR/m1.log")"
log "  member 1 counts $(refused 1) refused sessions"

# An impostor's pool file: the pool's, with member 2 on a store, address and
# control socket of its own, in a directory of its own (so its key too).
IMP=$WORK/imp
mkdir -p "$IMP"
port=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
m2_addr=$(sed -n 's/^ADDR=//p' "$PDIR/m2.env")
sed -e "s|$PDIR/m2.store|$IMP/m2.store|" -e "s|$PDIR/m2.ctl|$IMP/m2.ctl|" \
	-e "s|^address = $m2_addr\$|address = 127.0.0.1:$port|" "$PDIR/pool.conf" >"$IMP/pool.conf"
grep -q "127.0.0.1:$port" "$IMP/pool.conf" || fail "cannot rewrite member 2's address ($m2_addr)"
"$BRMRCTL" create --config "$IMP/pool.conf" --member 2 >"$IMP/create.log" 2>&1 ||
	fail "brmrctl create of the impostor's store failed: $(cat "$IMP/create.log")"
[[ -f $IMP/authpool.key ]] || fail "no key made for the impostor"
cmp -s "$IMP/authpool.key" "$KEY" && fail "two creates made the same key"

# impostor LOG: run a brmr-server as member 2 from the impostor's file for a while.
impostor() {
	timeout 6 "$SERVER" --config "$IMP/pool.conf" --member 2 >"$1" 2>&1 || true
}

log "a brmr-server as member 2 with another key: refused both ways"
before=$(refused 1)
impostor "$IMP/wrong.log"
logged "$IMP/wrong.log" "it did not prove the pool key" ||
	fail "the impostor did not refuse member 1's proof: $(tail -n 5 "$IMP/wrong.log")"
wait_for 10 refused_above 1 "$before" || fail "member 1 did not count the impostor"
logged "$PDIR/m1.log" "refusing member claiming id 2" ||
	fail "member 1 logged no refusal of member id 2: $(tail -n 5 "$PDIR/m1.log")"

log "a brmr-server as member 2 with the right key, while member 2 is up: a spoofed id"
cp "$KEY" "$IMP/authpool.key"
before=$(refused 1)
impostor "$IMP/spoof.log"
wait_for 10 refused_above 1 "$before" || fail "member 1 did not count the spoofed id"
logged "$PDIR/m1.log" "refusing member claiming id 2: member id 2 is held by a live session" ||
	fail "member 1 logged no spoofed id: $(grep -i refus "$PDIR/m1.log" | tail -n 5)"
logged "$IMP/spoof.log" "our member id" ||
	fail "the impostor did not hear why: $(tail -n 5 "$IMP/spoof.log")"

log "the refusals are in the metrics and the event stream"
"$BRMRCTL" metrics --socket "$PDIR/m1.ctl" >"$WORK/m1.prom"
n=$(sed -n 's/^rmr_server_auth_refused_total //p' "$WORK/m1.prom")
if [[ -z $n ]] || ((n < 3)); then
	fail "rmr_server_auth_refused_total is '$n', expected >= 3"
fi
wait_for 10 grep -q '"kind":"auth_refused"' "$WORK/m1.ev" ||
	fail "no auth_refused event: $(cat "$WORK/m1.ev")"
grep '"kind":"auth_refused"' "$WORK/m1.ev" | grep -q '"claimed_id":2' ||
	fail "no auth_refused event for member id 2: $(grep auth_refused "$WORK/m1.ev")"

log "a key file of mode 0644: refused at start, naming the file and why"
cp "$KEY" "$WORK/open.key"
chmod 644 "$WORK/open.key"
rc=0
"$SERVER" --config "$IMP/pool.conf" --member 2 --key-file "$WORK/open.key" \
	>"$WORK/open.log" 2>&1 || rc=$?
((rc == 2)) || fail "brmr-server with a 0644 key exited $rc, not 2: $(cat "$WORK/open.log")"
logged "$WORK/open.log" "$WORK/open.key: mode 0644" ||
	fail "no clear error for the 0644 key: $(cat "$WORK/open.log")"
rc=0
"$CLIENT" --config "$PDIR/pool.conf" --key-file "$WORK/open.key" --socket "$WORK/x.sock" \
	>"$WORK/open-client.log" 2>&1 || rc=$?
((rc == 2)) || fail "nbd-brmr with a 0644 key exited $rc, not 2"
logged "$WORK/open-client.log" "mode 0644" || fail "nbd-brmr: $(cat "$WORK/open-client.log")"

log "the pool is unharmed: both members normal, data intact"
for id in 1 2; do
	state_in "$id" normal || fail "member $id is $(member_state "$id")"
done
nbdcopy_roundtrip "$WORK/data"
log "ok"
