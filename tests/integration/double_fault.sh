#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# double_fault: a second member fails while the first one still resyncs, all
# under fio verify load. Member 2 is SIGKILLed and misses writes; it comes
# back with a slow resync (8 MiB/s); while it is copying, member 3 is
# SIGKILLed too. Member 2 finishes from member 1 alone, member 3 comes back
# and catches up as well; all members end byte-identical, fio's verification
# passes and the client carried no resync bytes.
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

need fio
need_bins

pool_up --members 3 --size 512M

# fio_bg NAME OFFSET: 64 MiB of verified random writes at <= 3000 IOPS from
# OFFSET, in the background.
fio_bg() {
	fio --name="$1" --ioengine=nbd --uri="$URI" --rw=randwrite --bs=4k --iodepth=32 \
		--offset="$2" --size=64M --randrepeat=1 --randseed="$RANDOM" --rate_iops=3000 \
		--verify=crc32c --verify_fatal=1 --verify_state_save=0 --do_verify=1 \
		--verify_backlog=1024 --output-format=json --output="$WORK/$1.json" \
		>"$WORK/$1.out" 2>&1 &
	FIO=$!
}
fio_wait() {
	local rc=0
	wait "$FIO" || rc=$?
	[[ -s $WORK/$1.json ]] || fail "fio $1 wrote no JSON: $(cat "$WORK/$1.out")"
	fio_check "$WORK/$1.json" || fail "fio $1 reported an error (see above)"
	((rc == 0)) || fail "fio $1 exited with status $rc: $(cat "$WORK/$1.out")"
}

log "member 2 down while fio writes"
"$POOL" kill --dir "$PDIR" 2
wait_for 15 state_in 2 failed || fail "client shows member 2 as '$(member_state 2)'"
fio_bg first 64M
fio_wait first
DIRTY2=$(dirty_for 2 1)
((DIRTY2 > 0)) || fail "member 1 records no chunk missed by member 2"
log "member 2 missed $DIRTY2 chunks; it comes back with a resync limited to 8 MiB/s"

BRMR_SERVER_ARGS="--resync-rate 8M" "$POOL" start --dir "$PDIR" 2
wait_for 30 state_in 2 normal || fail "member 2 is '$(member_state 2)', expected normal"
# Elsewhere than what member 2 misses: I/O to a missed chunk copies it at once.
fio_bg second 256M
sleep 1
running=$(server_field 2 'p["resync"]["running"] and p["dirty_chunks"].get("2", 0) > 0')
[[ $running == True ]] || fail "member 2 is not resyncing any more; the second fault would prove nothing"
log "member 2 resyncs ($(server_field 2 'p["resync"]["done"]')/$(server_field 2 'p["resync"]["total"]') chunks): SIGKILL member 3"
"$POOL" kill --dir "$PDIR" 3
wait_for 15 state_in 3 failed || fail "client shows member 3 as '$(member_state 3)'"
fio_wait second
state_in 1 normal || fail "member 1 is '$(member_state 1)'"
state_in 2 normal || fail "member 2 is '$(member_state 2)' after member 3 died"
DIRTY3=$(dirty_for 3 1)
((DIRTY3 > 0)) || fail "member 1 records no chunk missed by member 3"
log "fio finished cleanly with member 3 dead; member 3 missed $DIRTY3 chunks"

"$POOL" start --dir "$PDIR" 3
wait_for 120 healed 3 || fail "the pool did not heal: 2 is '$(member_state 2)', 3 is '$(member_state 3)'"
check_healed 3 2 "$DIRTY2"
check_healed 3 3 "$DIRTY3"
log "PASS"
