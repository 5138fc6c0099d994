#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# hang_member: SIGSTOP member 2 in the middle of a verified fio random-write
# run. A hung member sends nothing and closes nothing, so only heartbeats can
# tell: the client must fail it within the failure timeout (2 s by default;
# the test allows 6 s for a loaded machine) and fio must finish without an
# error. After SIGCONT the member is reconnected automatically, takes the
# dirty maps, copies what it missed from its peers and is NORMAL again: all
# three members identical, the client carrying no resync data.
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

need fio
need_bins

pool_up --members 3 --size 512M

PID2=$(cat "$PDIR/m2.pidfile") || fail "no pid file for member 2"
pid_alive "$PID2" || fail "member 2 is not running"
# Never leave a stopped process behind, whatever happens.
resume() { kill -CONT "$PID2" 2>/dev/null || true; }

log "fio: 64 MiB random writes with crc32c verification, in the background"
fio --name=hang --ioengine=nbd --uri="$URI" --rw=randwrite --bs=4k --iodepth=32 \
	--offset=64M --size=64M --randrepeat=1 --rate_iops=3000 \
	--verify=crc32c --verify_fatal=1 --verify_state_save=0 --do_verify=1 --verify_backlog=1024 \
	--output-format=json --output="$WORK/fio.json" >"$WORK/fio.out" 2>&1 &
FIO=$!

sleep 1 # let the writes get going; the assertions below do not depend on it
pid_alive "$FIO" || fail "fio ended before the hang; the test would prove nothing"
log "SIGSTOP member 2"
kill -STOP "$PID2"
T_STOP=$SECONDS
if ! wait_for 6 state_in 2 failed; then
	resume
	fail "client shows hung member 2 as '$(member_state 2)' after 6 s, expected failed"
fi
log "client failed the hung member after about $((SECONDS - T_STOP)) s"
for id in 1 3; do
	state_in "$id" normal || { resume; fail "member $id is '$(member_state "$id")'"; }
done

rc=0
wait "$FIO" || rc=$?
DIRTY=$(dirty_for 2 1) || { resume; fail "cannot read member 1's status"; }
resume
[[ -s $WORK/fio.json ]] || fail "fio wrote no JSON; output: $(cat "$WORK/fio.out")"
fio_check "$WORK/fio.json" || fail "fio job reported an error (see above)"
((rc == 0)) || fail "fio exited with status $rc: $(cat "$WORK/fio.out")"
log "fio finished cleanly while member 2 hung"

((DIRTY > 0)) || fail "member 1 records no chunk missed by member 2"
log "member 2 was resumed with $DIRTY chunks missed: it must heal by itself"
wait_for 60 healed 3 || fail "no heal after SIGCONT: member 2 is '$(member_state 2)'"
check_healed 3 2 "$DIRTY"
log "PASS"
