#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# membership: an 8-member pool shrinks and grows while fio writes with
# verification. `brmrctl remove-member 8` deletes member 8 (the others
# forget it), `remove-member 7 --detach` takes member 7 out while the others
# keep recording what it misses; `add-member 7` attaches it again (it copies
# only what it missed) and `add-member 8 ADDR` adds member 8 back as a new
# member (it copies everything). fio's verify passes and all eight members
# end byte-identical, with no resync byte through the client.
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

need fio
need_bins

pool_up --members 8 --size 64M
CTL=$PDIR/client.ctl
ADDR8=$(member_field 8 addr)
[[ -n $ADDR8 ]] || fail "no address for member 8 in the client's status"

members_of() { server_field "$1" '",".join(map(str, p["members"]))'; }

log "refused changes give one-line errors and a non-zero exit"
if out=$("$BRMRCTL" add-member 3 "$ADDR8" --socket "$CTL" 2>&1); then
	fail "adding member 3 twice succeeded: $out"
fi
[[ $out == *"in the pool already"* ]] || fail "unexpected error text: $out"
if out=$("$BRMRCTL" remove-member 9 --socket "$CTL" 2>&1); then
	fail "removing a member that does not exist succeeded: $out"
fi
[[ $out == *"no member 9"* ]] || fail "unexpected error text: $out"
rc=0
"$BRMRCTL" add-member 12 not-an-address --socket "$CTL" >/dev/null 2>&1 || rc=$?
((rc == 2)) || fail "a bad address exited $rc, expected 2"
[[ $(members_of 1) == 1,2,3,4,5,6,7,8 ]] || fail "member 1 lists members $(members_of 1)"

log "fio: 32 MiB random writes with crc32c verification, in the background"
fio --name=grow --ioengine=nbd --uri="$URI" --rw=randwrite --bs=4k --iodepth=16 \
	--size=32M --randrepeat=1 --rate_iops=800 \
	--verify=crc32c --verify_fatal=1 --verify_state_save=0 --do_verify=1 --verify_backlog=1024 \
	--output-format=json --output="$WORK/fio.json" >"$WORK/fio.out" 2>&1 &
FIO=$!
sleep 1
pid_alive "$FIO" || fail "fio ended before the changes; the test would prove nothing"

"$BRMRCTL" remove-member 8 --socket "$CTL" || fail "remove-member 8 failed"
[[ -z $(member_field 8 state) ]] || fail "the client still shows member 8: $(member_field 8 state)"
for id in 1 4 7; do
	[[ $(members_of "$id") == 1,2,3,4,5,6,7 ]] || fail "member $id lists members $(members_of "$id")"
done
log "member 8 deleted: the pool has 7 members"

"$BRMRCTL" remove-member 7 --detach --socket "$CTL" || fail "remove-member 7 --detach failed"
state_in 7 detached || fail "member 7 is '$(member_state 7)', expected detached"
# fio goes on writing; its writes reach member 1 once they are no longer
# held (a busy host may take a while to settle the change).
missed_by_7() { (($(dirty_for 7 1) > 0)); }
wait_for 30 missed_by_7 || fail "member 1 records no chunk missed by detached member 7"
DIRTY=$(dirty_for 7 1)
if out=$("$BRMRCTL" remove-member 7 --detach --socket "$CTL" 2>&1); then
	fail "detaching member 7 twice succeeded: $out"
fi
[[ $out == *"detached already"* ]] || fail "unexpected error text: $out"
log "member 7 detached; $DIRTY chunks recorded as missed by it"

"$BRMRCTL" add-member 7 --socket "$CTL" || fail "add-member 7 (attach) failed"
wait_for 60 state_in 7 normal || fail "member 7 is '$(member_state 7)' after attaching"
log "member 7 attached again"

"$BRMRCTL" add-member 8 "$ADDR8" --socket "$CTL" || fail "add-member 8 failed"
wait_for 60 state_in 8 normal || fail "member 8 is '$(member_state 8)' after adding it"
[[ $(members_of 1) == 1,2,3,4,5,6,7,8 ]] || fail "member 1 lists members $(members_of 1)"
log "member 8 added back: 8 members"

rc=0
wait "$FIO" || rc=$?
[[ -s $WORK/fio.json ]] || fail "fio wrote no JSON; output: $(cat "$WORK/fio.out")"
fio_check "$WORK/fio.json" || fail "fio job reported an error (see above)"
((rc == 0)) || fail "fio exited with status $rc: $(cat "$WORK/fio.out")"

wait_for 120 healed 8 || fail "the members did not finish their resyncs"
"$POOL" compare --dir "$PDIR" 1 2 3 4 5 6 7 8 || fail "members differ after the changes"
for id in 7 8; do
	[[ $(member_field "$id" resync_bytes) == 0 ]] || fail "the client carried resync bytes for $id"
done
log "PASS"
