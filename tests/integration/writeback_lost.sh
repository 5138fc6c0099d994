#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# writeback_lost: member 3's store is a loop device whose backing file lies
# on a tmpfs too small for it, so the kernel's write-back of member 3's
# writes fails for real (ENOSPC/EIO from the loop device) after the writes
# were acknowledged from the page cache. The first FLUSH reports it; Linux
# then marks the pages clean, so a later flush would pass. The member must
# not be taken back as holding that data: its requests keep failing, the
# client keeps it out while members 1 and 3 serve, its superblock says
# DATA_LOST (brmrctl inspect), a restarted brmr-server refuses the store
# with a clear reason, and a replacement heals the pool with every written
# block intact on every member.
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

need fio
need losetup
need_bins
((EUID == 0)) || skip "a loop device and a tmpfs of its own need root"

TINY="" LOOP=""
# Lazily: a member still running holds the loop device; the kernel lets go
# of both once it is gone (cleanup stops it).
disk_down() {
	[[ -z $LOOP ]] || losetup -d "$LOOP" 2>/dev/null
	[[ -z $TINY ]] || umount -l "$TINY" 2>/dev/null
	return 0
}
# lib.sh's cleanup ends in exit (and removes WORK, the tmpfs's mount point
# too): the disk goes first, then cleanup runs in a subshell.
writeback_exit() {
	local rc=$?
	set +e
	trap - EXIT
	disk_down
	(exit "$rc")
	(cleanup)
	exit $?
}
trap writeback_exit EXIT

pool_up --members 3 --size 64M
# 16 MiB of room for a 64 MiB pool: member 3's data area fills it first.
TINY=$WORK/tiny
mkdir -p "$TINY"
mount -t tmpfs -o size=16M brmr-wb "$TINY" || { TINY=""; skip "cannot mount a tmpfs"; }
"$POOL" kill --dir "$PDIR" 3
truncate -s "$(stat -c %s "$PDIR/m3.store")" "$TINY/m3.img"
LOOP=$(losetup -f --show "$TINY/m3.img") || { LOOP=""; skip "no loop device (losetup)"; }
dd if="$PDIR/m3.store" of="$LOOP" bs=1M conv=sparse,fsync status=none ||
	fail "cannot copy member 3's store onto $LOOP"
rm -f "$PDIR/m3.store"
ln -s "$LOOP" "$PDIR/m3.store"
"$POOL" start --dir "$PDIR" 3
wait_for 30 healed 3 || fail "member 3 on $LOOP did not come back: '$(member_state 3)'"
log "member 3 serves from $LOOP (backing file on a 16 MiB tmpfs)"

FIO_ARGS=(--name=wb --ioengine=nbd --uri="$URI" --rw=write --bs=1M --iodepth=4
	--size=48M --verify=crc32c --verify_fatal=1 --verify_state_save=0
	--output-format=json)
fio "${FIO_ARGS[@]}" --do_verify=0 --output="$WORK/fio.json" >"$WORK/fio.out" 2>&1 ||
	fail "fio failed: $(cat "$WORK/fio.out")"
fio_check "$WORK/fio.json" || fail "fio reported an error"
log "48 MiB written; now a flush: member 3's write-back cannot land"
nbdsh -u "$URI" -c 'h.flush()' || fail "the pool's flush failed (members 1 and 2 hold the data)"

wait_for 30 eval '! state_in 3 normal' || fail "member 3 is still normal after its write-back failed"
"$BRMRCTL" inspect --store "$LOOP" | grep -qx "data_lost yes.*" ||
	fail "member 3's superblock does not say DATA_LOST: $("$BRMRCTL" inspect --store "$LOOP")"
# Reconnecting, it refuses the client: its store may have lost data.
refuses() { [[ $(member_field 3 reason) == *"may have lost data"* ]]; }
wait_for 30 refuses ||
	fail "member 3 does not refuse the client: '$(member_state 3)' ($(member_field 3 reason))"
log "member 3 marked its store and refuses the client: $(member_field 3 reason)"
# It may reconnect; it must never be normal again, and the pool serves.
end=$((SECONDS + 3))
while ((SECONDS < end)); do
	state_in 3 normal && fail "member 3 is normal again with a store that lost writes"
	for id in 1 2; do
		state_in "$id" normal || fail "member $id is '$(member_state "$id")'"
	done
	sleep 0.3
done
fio "${FIO_ARGS[@]}" --verify_only=1 --output="$WORK/verify1.json" >"$WORK/verify1.out" 2>&1 ||
	fail "reading back through members 1 and 2 failed: $(cat "$WORK/verify1.out")"

log "a restarted member 3 refuses its store"
"$POOL" kill --dir "$PDIR" 3
if "$POOL" start --dir "$PDIR" 3 --timeout 15 >"$WORK/start3.out" 2>&1; then
	fail "brmr-server served a store whose write-back failed"
fi
grep -q "cannot serve: a write-back to it failed before" "$PDIR/m3.log" ||
	fail "the refusal did not say why: $(tail -n 3 "$PDIR/m3.log")"

log "replaced by a blank store, member 3 copies everything back"
"$POOL" replace --dir "$PDIR" 3
wait_for 90 healed 3 || fail "the replacement did not heal: '$(member_state 3)'"
"$POOL" compare --dir "$PDIR" 1 2 3 || fail "members differ after the replacement"
fio "${FIO_ARGS[@]}" --verify_only=1 --output="$WORK/verify2.json" >"$WORK/verify2.out" 2>&1 ||
	fail "verify after the replacement failed: $(cat "$WORK/verify2.out")"
log "ok"
