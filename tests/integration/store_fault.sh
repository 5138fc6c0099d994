#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# store_fault: member 2's store starts failing every data request with EIO
# (fault injection switched on through its control socket) in the middle of
# a verified fio random-write run. The client fails member 2 and goes on with
# members 1 and 3; member 2 reconnects but cannot prove its store works, so
# it stays out of I/O. Once the fault is cleared it takes the dirty maps,
# copies exactly what it missed from its peers, and all three members end
# byte-identical; a verify pass through the pool then reads every block fio
# wrote, round-robin over all three members.
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

need fio
need_bins

pool_up --members 3 --size 512M
FIO_ARGS=(--name=fault --ioengine=nbd --uri="$URI" --rw=randwrite --bs=4k --iodepth=32
	--offset=64M --size=64M --randrepeat=1 --verify=crc32c --verify_fatal=1
	--verify_state_save=0 --output-format=json)

log "fio: 64 MiB random writes with crc32c verification, in the background"
fio "${FIO_ARGS[@]}" --rate_iops=3000 --do_verify=1 --verify_backlog=1024 \
	--output="$WORK/fio.json" >"$WORK/fio.out" 2>&1 &
FIO=$!
sleep 1
pid_alive "$FIO" || fail "fio ended before the fault; the test would prove nothing"

[[ $(ctl "$PDIR/m2.ctl" "fault on") == ok ]] || fail "member 2 did not take 'fault on'"
log "member 2's store fails every data request now"
wait_for 15 state_in 2 failed || fail "client shows member 2 as '$(member_state 2)', expected failed"
log "client failed member 2"
# It reconnects, but must not come back while its store fails: it may cycle
# between failed and reconnecting, never normal; 1 and 3 stay normal.
end=$((SECONDS + 3)) samples=0
while ((SECONDS < end || samples < 5)); do
	s=$(member_state 2) || fail "cannot read the client's status"
	[[ $s == failed || $s == reconnecting ]] || fail "member 2 is '$s' while its store fails"
	for id in 1 3; do
		state_in "$id" normal || fail "member $id is '$(member_state "$id")'"
	done
	samples=$((samples + 1))
	sleep 0.2
done
log "member 2 stays out of I/O over $samples samples ($(member_state 2): $(member_field 2 reason))"

rc=0
wait "$FIO" || rc=$?
[[ -s $WORK/fio.json ]] || fail "fio wrote no JSON; output: $(cat "$WORK/fio.out")"
fio_check "$WORK/fio.json" || fail "fio job reported an error (see above)"
((rc == 0)) || fail "fio exited with status $rc: $(cat "$WORK/fio.out")"
state_in 2 normal && fail "member 2 is normal while its store fails"
DIRTY=$(dirty_for 2 1)
((DIRTY > 0)) || fail "member 1 records no chunk missed by member 2"
log "fio finished cleanly; member 2 missed $DIRTY chunks"

[[ $(ctl "$PDIR/m2.ctl" "fault off") == ok ]] || fail "member 2 did not take 'fault off'"
log "fault cleared: member 2 must heal by itself"
wait_for 60 healed 3 || fail "no heal after the fault was cleared: member 2 is '$(member_state 2)'"
check_healed 3 2 "$DIRTY"

log "verify pass: fio reads back every block it wrote, through all three members"
declare -A READS0 WRITES0
for id in 1 2 3; do
	READS0[$id]=$(member_field "$id" reads)
	WRITES0[$id]=$(member_field "$id" writes)
done
fio "${FIO_ARGS[@]}" --verify_only=1 --output="$WORK/verify.json" >"$WORK/verify.out" 2>&1 ||
	fail "fio verify pass failed: $(cat "$WORK/verify.out")"
fio_check "$WORK/verify.json" || fail "fio verify pass reported an error"
# verify_only writes nothing (fio still counts the write ios it skipped);
# every member, member 2 included, must have served reads of this pass.
served=()
for id in 1 2 3; do
	reads=$(($(member_field "$id" reads) - READS0[$id]))
	writes=$(($(member_field "$id" writes) - WRITES0[$id]))
	((writes == 0)) || fail "member $id took $writes writes during the verify pass"
	((reads > 0)) || fail "member $id served no read of the verify pass"
	served+=("$id:$reads")
done
log "verify pass reads per member: ${served[*]}"
log "PASS"
