#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# crash_same_boot: member 2's process is SIGKILLed right after writes that
# no flush covered (its host keeps power). The others record those chunks
# as ones it may have lost, with the boot of its host (libbrmr hashes the
# kernel's boot_id); it comes back in that same boot, so its page cache
# kept them: it copies nothing, the records are cleared on every member,
# and all three end identical. (Before records carried their boot, it
# copied every recorded chunk again from a peer.) Then the same with a
# write it missed while away: it copies that chunk, and only that.
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

need fio nbdsh
need_bins

pool_up --members 3 --size 256M

# records_of ID ON: chunks member ON records member ID may have lost.
records_of() { server_field "$2" "p[\"record_chunks\"].get(\"$1\", 0)"; }
recorded() { (($(records_of 2 1) > 0)) && (($(records_of 2 3) > 0)); }
copied_by() { server_field "$1" 'p["resync"]["bytes"]'; }

log "fio: 32 MiB of random 4k writes, no flush"
fio --name=unflushed --ioengine=nbd --uri="$URI" --rw=randwrite --bs=4k --iodepth=16 \
	--offset=32M --size=32M --randrepeat=1 --number_ios=2048 \
	--output-format=json --output="$WORK/fio.json" >"$WORK/fio.out" 2>&1 ||
	fail "fio failed: $(cat "$WORK/fio.out")"
fio_check "$WORK/fio.json" || fail "fio job reported an error (see above)"
UNFLUSHED=$(member_field 2 unflushed_chunks)
((UNFLUSHED > 0)) || fail "the client shows no unflushed chunk on member 2; the test would prove nothing"
log "member 2 holds $UNFLUSHED chunks no flush covered"

"$POOL" kill --dir "$PDIR" 2
wait_for 15 state_in 2 failed || fail "client shows member 2 as '$(member_state 2)', expected failed"
wait_for 15 recorded || fail "members 1 and 3 record no chunk member 2 may have lost"
log "member 2 SIGKILLed: members 1 and 3 record $(records_of 2 1) chunks it may have lost"
"$POOL" compare --dir "$PDIR" 1 3 || fail "members 1 and 3 differ"

"$POOL" start --dir "$PDIR" 2
wait_for 30 state_in 2 normal || fail "member 2 is '$(member_state 2)' after its restart"
wait_for 60 healed 3 || fail "the records of member 2 were not cleared: $(records_of 2 1) on member 1"
COPIED=$(copied_by 2)
((COPIED == 0)) || fail "member 2 copied $COPIED bytes of chunks its page cache kept"
for id in 1 3; do
	(($(records_of 2 "$id") == 0)) || fail "member $id still records $(records_of 2 "$id") chunks of member 2"
done
"$POOL" compare --dir "$PDIR" 1 2 3 || fail "members differ after member 2 came back"
log "back in the same boot: member 2 copied nothing, its records are cleared, members identical"

log "again, with a write member 2 misses while it is away"
fio --name=again --ioengine=nbd --uri="$URI" --rw=randwrite --bs=4k --iodepth=16 \
	--offset=96M --size=32M --randrepeat=0 --number_ios=1024 \
	--output-format=json --output="$WORK/fio2.json" >"$WORK/fio2.out" 2>&1 ||
	fail "fio failed: $(cat "$WORK/fio2.out")"
"$POOL" kill --dir "$PDIR" 2
wait_for 15 state_in 2 failed || fail "client shows member 2 as '$(member_state 2)', expected failed"
wait_for 15 recorded || fail "members 1 and 3 record no chunk member 2 may have lost"
nbdsh -u "$URI" -c "
pat = bytes([0x6b]) * (128 << 10)
h.pwrite(pat, 200 << 20)
assert h.pread(len(pat), 200 << 20) == pat
" || fail "the write while member 2 is away failed"
MISSED=$(server_field 1 'p["dirty_chunks"].get("2", 0) - p["record_chunks"].get("2", 0)')
((MISSED >= 1)) || fail "member 1 records no chunk missed by member 2"
"$POOL" start --dir "$PDIR" 2
wait_for 30 state_in 2 normal || fail "member 2 is '$(member_state 2)' after its restart"
wait_for 60 healed 3 || fail "member 2 did not finish its resync"
CHUNK=$(server_field 2 'p["chunk_size"]')
COPIED=$(copied_by 2)
((COPIED <= MISSED * CHUNK)) ||
	fail "member 2 copied $COPIED bytes for $MISSED missed chunks of $CHUNK bytes"
((COPIED > 0)) || fail "member 2 copied nothing, yet it missed a write"
"$POOL" compare --dir "$PDIR" 1 2 3 || fail "members differ after member 2 came back"
nbdsh -u "$URI" -c "
assert h.pread(128 << 10, 200 << 20) == bytes([0x6b]) * (128 << 10)
" || fail "the write member 2 missed does not read back"
log "member 2 copied $COPIED bytes for the $MISSED chunks it missed, none for its records"
log "PASS"
