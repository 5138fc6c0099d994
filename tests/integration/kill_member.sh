#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# kill_member: SIGKILL member 2 in the middle of a verified fio random-write
# run. fio must finish without an error, the client must report member 2
# failed, and the survivors must hold identical data. Then member 2 comes
# back from its (stale) store: it takes the dirty maps, copies exactly what
# it missed from its peers (never through the client) and is NORMAL again;
# reads never return the stale data it held, and all members end identical. PROVIDER=shm runs the same over libfabric's shm provider, where a
# dead peer is noticed only by missing heartbeats.
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

need fio nbdsh
need_bins
PROVIDER=${PROVIDER:-tcp}

pool_up --members 3 --size 512M --provider "$PROVIDER"

# writes_of ID: write requests member ID applied, as the client counts them.
writes_of() { member_field "$1" writes; }
writes_at_least() { local n; n=$(writes_of "$1") && [[ -n $n ]] && ((n >= $2)); }

# 32768 writes of 4 KiB at <= 4000 IOPS: at least 8 s of writing, so the
# kill (after ~2000 writes) lands early in the run. Every block is verified
# during the run (backlog) and once more at the end.
log "fio: 128 MiB random writes with crc32c verification, in the background"
fio --name=kill --ioengine=nbd --uri="$URI" --rw=randwrite --bs=4k --iodepth=32 \
	--offset=64M --size=128M --randrepeat=1 --rate_iops=4000 \
	--verify=crc32c --verify_fatal=1 --verify_state_save=0 --do_verify=1 --verify_backlog=1024 \
	--output-format=json --output="$WORK/fio.json" >"$WORK/fio.out" 2>&1 &
FIO=$!

wait_for 60 writes_at_least 2 2000 || fail "writes did not reach member 2"
pid_alive "$FIO" || fail "fio ended before the kill; the test would prove nothing"
log "SIGKILL member 2 with $(writes_of 2) writes sent to it"
"$POOL" kill --dir "$PDIR" 2
wait_for 15 state_in 2 failed || fail "client shows member 2 as '$(member_state 2)', expected failed"
log "client reports member 2 failed"
pid_alive "$FIO" || log "warning: fio finished right after the kill"

rc=0
wait "$FIO" || rc=$?
[[ -s $WORK/fio.json ]] || fail "fio wrote no JSON; output: $(cat "$WORK/fio.out")"
fio_check "$WORK/fio.json" || fail "fio job reported an error (see above)"
((rc == 0)) || fail "fio exited with status $rc: $(cat "$WORK/fio.out")"
state_in 2 failed || fail "member 2 is '$(member_state 2)' while it is dead"
for id in 1 3; do
	state_in "$id" normal || fail "member $id is '$(member_state "$id")': killing member 2 hurt a survivor"
done
log "fio finished cleanly with member 2 dead"

log "the survivors (1, 3) must record that member 2 missed writes"
for id in 1 3; do
	"$BRMRCTL" status --socket "$PDIR/m$id.ctl" --json | "$PY" -c '
import json, sys
d = json.load(sys.stdin)
pool = d["pools"][0]
if 2 not in pool["missed"]:
    sys.exit("member %s: missed=%s, expected 2 in it" % (sys.argv[1], pool["missed"]))
# fio wrote bytes 64 MiB..192 MiB: 1024 chunks of 128 KiB at most, and some.
dirty = int(pool["dirty_chunks"].get("2", 0))
if not 0 < dirty <= 1024:
    sys.exit("member %s: %d chunks recorded dirty for member 2, expected 1..1024" % (sys.argv[1], dirty))
print("member %s: member 2 missed %d chunks" % (sys.argv[1], dirty))
' "$id" || fail "member $id does not record what member 2 missed"
done

log "the survivors (1, 3) must be identical"
"$POOL" compare --dir "$PDIR" 1 3 || fail "members 1 and 3 differ"

log "write a new pattern while member 2 is down"
nbdsh -u "$URI" -c "
pat = bytes([0x5a, 0xa5, 0x3c, 0xc3]) * (1 << 20)   # 4 MiB
h.pwrite(pat, 300 << 20, nbd.CMD_FLAG_FUA)
h.flush()
assert h.pread(len(pat), 300 << 20) == pat
" || fail "writing the pattern failed"

# The check below has teeth only if member 2's store really is stale there.
"$PY" - "$PDIR/m2.store" "$("$BRMRCTL" inspect --store "$PDIR/m2.store" --json)" <<'EOF' ||
import json, sys
off = json.loads(sys.argv[2])["data_offset"] + (300 << 20)
with open(sys.argv[1], "rb") as f:
    f.seek(off)
    got = f.read(4 << 20)
pat = bytes([0x5a, 0xa5, 0x3c, 0xc3]) * (1 << 20)
sys.exit("member 2's store already holds the pattern" if got == pat else 0)
EOF
	fail "member 2's store is not stale; the stale-read check would prove nothing"

DIRTY=$(dirty_for 2 1)
log "restart member 2 from its stale store ($DIRTY chunks missed)"
"$POOL" start --dir "$PDIR" 2
"$POOL" wait --dir "$PDIR" --member 2 --state normal --timeout 30 ||
	fail "member 2 did not come back to normal: $(member_state 2)"
log "member 2 is normal again; reading the pattern back 50 times"
nbdsh -u "$URI" -c "
pat = bytes([0x5a, 0xa5, 0x3c, 0xc3]) * (1 << 20)
bad = 0
for i in range(50):
    # Whole range, then one 64 KiB piece: two requests per round, so the
    # round-robin reaches every NORMAL member.
    if h.pread(len(pat), 300 << 20) != pat:
        bad += 1
    off = (i * 65536) % len(pat)
    if h.pread(65536, (300 << 20) + off) != pat[off:off + 65536]:
        bad += 1
assert bad == 0, '%d of 100 reads returned stale data' % bad
print('50 rounds: the new pattern every time')
" || fail "stale reads after member 2 returned"
wait_for 60 healed 3 || fail "member 2 did not finish its resync"
check_healed 3 2 "$DIRTY"
log "status after the restart:"
"$POOL" status --dir "$PDIR" || fail "local-pool status failed"
log "PASS"
