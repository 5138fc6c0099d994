#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# verify: bytes changed behind the pool's back in member 3's store file are
# found by an online verify on member 1 (storage to storage, while fio
# writes elsewhere), exactly those chunks and only on member 3; `verify
# --repair` has member 3 copy them again, and all members end identical.
# Also `brmrctl resync stop|start|rate` against a live member, and the
# errors of both verbs.
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

need fio
need_bins

pool_up --members 3 --size 64M
M1=$PDIR/m1.ctl

log "fill the first 16 MiB through NBD"
fio --name=fill --ioengine=nbd --uri="$URI" --rw=write --bs=1M --size=16M \
	--output="$WORK/fill.out" >/dev/null 2>&1 || fail "fio fill failed: $(cat "$WORK/fill.out")"
wait_for 30 healed 3 || fail "the pool is not healthy before the test"

log "a verify of a healthy pool finds nothing"
"$BRMRCTL" verify --socket "$M1" || fail "brmrctl verify failed"
verify_done() { [[ $(server_field 1 'p["verify"]["running"]') == False ]]; }
wait_for 60 verify_done || fail "the verify did not end"
TOTAL=$(server_field 1 'p["verify"]["total"]')
((TOTAL == 512)) || fail "the verify covered $TOTAL chunks, expected 512"
[[ $(server_field 1 'p["verify"]["done"]') == 512 ]] || fail "the verify did not compare every chunk"
[[ $(server_field 1 'p["verify"]["mismatches"]') == 0 ]] || fail "a healthy pool has mismatches"

log "change chunks 3, 7 and 100 of member 3 behind the pool's back"
DOFF=$("$BRMRCTL" inspect --store "$PDIR/m3.store" --json | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["data_offset"])')
CHUNK=$(server_field 1 'p["chunk_size"]')
for c in 3 7 100; do
	head -c 4096 /dev/urandom |
		dd of="$PDIR/m3.store" bs=4096 seek=$(((DOFF + c * CHUNK + 8192) / 4096)) \
			conv=notrunc,fsync status=none || fail "cannot change chunk $c"
done
if "$POOL" compare --dir "$PDIR" 1 3 >/dev/null 2>&1; then
	fail "members 1 and 3 compare equal after the change: the test would prove nothing"
fi

log "verify under load: fio writes chunks 256.. while member 1 compares"
fio --name=load --ioengine=nbd --uri="$URI" --rw=randwrite --bs=4k --iodepth=8 \
	--offset=32M --size=16M --time_based --runtime=60 --rate_iops=500 \
	--output="$WORK/load.out" >/dev/null 2>&1 &
FIO=$!
"$BRMRCTL" verify --socket "$M1" || fail "brmrctl verify failed"
if out=$("$BRMRCTL" verify --socket "$M1" 2>&1); then
	fail "a second verify while one runs succeeded"
fi
[[ $out == *"runs already"* ]] || fail "unexpected error text: $out"
wait_for 60 verify_done || fail "the verify did not end"
# The status lists them in chunk order.
FOUND=$(server_field 1 '" ".join("%d:%s" % (f["chunk"], ",".join(map(str, f["members"]))) for f in p["verify"]["found"])')
[[ $FOUND == "3:3 7:3 100:3" ]] || fail "the verify found '$FOUND', expected '3:3 7:3 100:3'"
[[ $(server_field 1 'p["verify"]["mismatches"]') == 3 ]] || fail "mismatch count is not 3"
"$BRMRCTL" status --socket "$M1" | grep -q "chunk 100 differs on member 3" ||
	fail "brmrctl status does not show the chunks found"
log "found exactly chunks 3, 7 and 100 on member 3"

log "verify --repair: member 3 copies them again from member 1"
"$BRMRCTL" verify --repair --socket "$M1" || fail "brmrctl verify --repair failed"
wait_for 60 verify_done || fail "the repairing verify did not end"
[[ $(server_field 1 'p["verify"]["repaired"]') == 3 ]] ||
	fail "repaired $(server_field 1 'p["verify"]["repaired"]') chunks, expected 3"
kill "$FIO" 2>/dev/null || true
wait "$FIO" 2>/dev/null || true
wait_for 60 healed 3 || fail "the repaired chunks were not copied"
"$POOL" compare --dir "$PDIR" 1 2 3 || fail "members differ after the repair"
[[ $(member_field 3 resync_bytes) == 0 ]] || fail "the client carried resync bytes"
log "all members identical after the repair; the client carried nothing"

log "resync stop|start|rate and the errors"
if out=$("$BRMRCTL" verify --stop --socket "$M1" 2>&1); then
	fail "verify --stop with no verify running succeeded"
fi
[[ $out == *"no verify runs"* ]] || fail "unexpected error text: $out"
"$BRMRCTL" resync stop --socket "$M1" || fail "resync stop failed"
[[ $(server_field 1 'p["resync"]["paused"]') == True ]] || fail "the status does not show the pause"
if out=$("$BRMRCTL" resync stop --socket "$M1" 2>&1); then
	fail "a second resync stop succeeded"
fi
[[ $out == *"already paused"* ]] || fail "unexpected error text: $out"
"$BRMRCTL" resync start --socket "$M1" || fail "resync start failed"
[[ $(server_field 1 'p["resync"]["paused"]') == False ]] || fail "the resync is still paused"
"$BRMRCTL" resync rate 20M --socket "$M1" || fail "resync rate failed"
[[ $(server_field 1 'p["resync"]["rate_limit"]') == 20971520 ]] || fail "the rate limit is not 20 MiB/s"
rc=0
"$BRMRCTL" resync rate fast --socket "$M1" >/dev/null 2>&1 || rc=$?
((rc == 2)) || fail "a bad rate exited $rc, expected 2"
rc=0
"$BRMRCTL" resync sideways --socket "$M1" >/dev/null 2>&1 || rc=$?
((rc == 2)) || fail "a bad resync action exited $rc, expected 2"
rc=0
"$BRMRCTL" verify --repair --stop --socket "$M1" >/dev/null 2>&1 || rc=$?
((rc == 2)) || fail "contradicting verify options exited $rc, expected 2"
log "PASS"
