#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# maintenance: the operator takes member 2 out of I/O with `brmrctl
# maintenance on` in the middle of a verified fio random-write run, and puts
# it back with `maintenance off`. While it is out the client sends it nothing
# and the others record what it misses; once back it takes the dirty maps,
# copies exactly those chunks from its peers and is NORMAL again, with all
# three members identical and no resync byte through the client.
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

need fio
need_bins

pool_up --members 3 --size 512M
CTL=$PDIR/client.ctl

log "refused actions give one-line errors and a non-zero exit"
if out=$("$BRMRCTL" maintenance on --socket "$CTL" --member 9 2>&1); then
	fail "maintenance of a member that does not exist succeeded: $out"
fi
[[ $out == *"no member 9"* ]] || fail "unexpected error text: $out"
if out=$("$BRMRCTL" maintenance off --socket "$CTL" --member 2 2>&1); then
	fail "maintenance off of a member in service succeeded: $out"
fi
[[ $out == *"not in maintenance"* ]] || fail "unexpected error text: $out"
if "$BRMRCTL" maintenance sideways --socket "$CTL" --member 2 >/dev/null 2>&1; then
	fail "a bad verb argument was accepted"
fi

log "fio: 64 MiB random writes with crc32c verification, in the background"
fio --name=maint --ioengine=nbd --uri="$URI" --rw=randwrite --bs=4k --iodepth=32 \
	--offset=64M --size=64M --randrepeat=1 --rate_iops=3000 \
	--verify=crc32c --verify_fatal=1 --verify_state_save=0 --do_verify=1 --verify_backlog=1024 \
	--output-format=json --output="$WORK/fio.json" >"$WORK/fio.out" 2>&1 &
FIO=$!
sleep 1
pid_alive "$FIO" || fail "fio ended before the maintenance; the test would prove nothing"

"$BRMRCTL" maintenance on --socket "$CTL" --member 2 || fail "maintenance on failed"
state_in 2 maintenance || fail "member 2 is '$(member_state 2)', expected maintenance"
W0=$(member_field 2 writes)
sleep 2
W1=$(member_field 2 writes)
((W1 == W0)) || fail "member 2 got $((W1 - W0)) writes while in maintenance"
for id in 1 3; do
	state_in "$id" normal || fail "member $id is '$(member_state "$id")'"
done
# fio holds still while the count is taken and member 2 comes back, so
# that the count is what member 2 missed (a write in between would dirty one
# chunk more than counted). A slow build may see fio done already.
kill -STOP "$FIO" 2>/dev/null || log "fio finished before member 2 came back"
wait_for 10 no_inflight 1 || fail "writes still in flight with fio stopped"
DIRTY=$(dirty_for 2 1)
((DIRTY > 0)) || fail "member 1 records no chunk missed by member 2"
log "member 2 out for 2 s: no writes reached it, $DIRTY chunks recorded as missed"

"$BRMRCTL" maintenance off --socket "$CTL" --member 2 || fail "maintenance off failed"
wait_for 30 state_in 2 normal || fail "member 2 is '$(member_state 2)' after maintenance off"
kill -CONT "$FIO" 2>/dev/null || true
log "member 2 is normal again"

rc=0
wait "$FIO" || rc=$?
[[ -s $WORK/fio.json ]] || fail "fio wrote no JSON; output: $(cat "$WORK/fio.out")"
fio_check "$WORK/fio.json" || fail "fio job reported an error (see above)"
((rc == 0)) || fail "fio exited with status $rc: $(cat "$WORK/fio.out")"

wait_for 60 healed 3 || fail "member 2 did not finish its resync"
# fio kept writing after member 2 came back, so it may have missed more than
# DIRTY chunks only if it left again: it must not have.
[[ $(member_field 2 map_updates) == 1 ]] || fail "member 2 took the maps $(member_field 2 map_updates) times"
check_healed 3 2 "$DIRTY"
log "PASS"
