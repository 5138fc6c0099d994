#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# power_loss: member 3's host loses power. A member acknowledges a write once
# its store applied it, from the page cache; only a flush makes it durable.
# The power loss is played for real on the store file: pattern A is written
# through NBD and flushed (NBD_CMD_FLUSH), member 3's data area is saved (with
# no write since the flush, the file holds what its disk would hold), pattern
# B is written over several places of A without a flush and acknowledged by
# member 3 too, then member 3's brmr-server is SIGKILLed and the saved data
# area written back over its store: B is gone from member 3, as after a power
# loss, and member 3 cannot tell. Pattern C is written while it is away. Once
# restarted and healed, the pool must read B where B was written (through the
# pool's round-robin and through each member alone), every member's data area
# must equal the expected image, and the members must be identical: the
# writes member 3 acknowledged but no flush covered must have been recorded
# as missed by it and copied back to it.
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

need nbdsh cmp dd
need_bins

SIZE=$((64 << 20))
pool_up --members 3 --size 64M
CTL=$PDIR/client.ctl
INFO=$("$BRMRCTL" inspect --store "$PDIR/m3.store" --json) || fail "brmrctl inspect of member 3's store failed"
# The data area: pool byte X is at data_offset + X (docs/disk-format.md).
# Only it is saved and written back; the superblock, metadata and dirty maps
# are written synchronously by the member, so they are on disk already.
DOFF=$("$PY" -c 'import json, sys; print(json.load(sys.stdin)["data_offset"])' <<<"$INFO")
CHUNK=$("$PY" -c 'import json, sys; print(json.load(sys.stdin)["chunk_size"])' <<<"$INFO")
[[ $DOFF =~ ^[0-9]+$ && $CHUNK =~ ^[0-9]+$ ]] || fail "no data_offset/chunk_size in: $INFO"

# The pieces each pattern is written in, "OFFSET LENGTH" in bytes; pattern X
# at pool offset O is byte O of the random file $WORK/X, so any 4 KiB read
# back tells which pattern it holds. A covers 48 MiB. B, over four places of
# A, is what the power loss takes: one chunk-aligned piece and three that
# start and end inside a chunk (a chunk is partly B, partly A); each spans at
# least 3 chunks, so the round-robin read below asks member 3 for part of
# each. C is written while member 3 is away: over A, and past A.
A_PIECES=("0 $((48 << 20))")
B_PIECES=("$((3 << 20)) $((1 << 20))"
	"$(((10 << 20) + (68 << 10))) $(((1 << 20) + (8 << 10)))"
	"$(((23 << 20) + (4 << 10))) $((512 << 10))"
	"$(((40 << 20) - (200 << 10))) $((2 << 20))")
C_PIECES=("$((30 << 20)) $((1 << 20))" "$((52 << 20)) $((2 << 20))")
for p in A B C; do random_file "$WORK/$p" $((SIZE >> 20)); done

# py_list PIECE...: the pieces as a Python list of (offset, length).
py_list() {
	local p s="["
	for p in "$@"; do s+="(${p% *}, ${p#* }), "; done
	echo "$s]"
}

# The expected image: zeros (the store is created sparse), then A, B and C
# in the order they are written.
"$PY" - "$WORK" "$SIZE" <<EOF || fail "cannot build the expected image"
import sys
work, size = sys.argv[1], int(sys.argv[2])
img = bytearray(size)
for name, pieces in (("A", $(py_list "${A_PIECES[@]}")), ("B", $(py_list "${B_PIECES[@]}")),
                     ("C", $(py_list "${C_PIECES[@]}"))):
    pat = open("%s/%s" % (work, name), "rb").read()
    for off, n in pieces:
        img[off:off + n] = pat[off:off + n]
open(work + "/expect", "wb").write(img)
EOF

# nbd_write NAME PIECE...: write pattern NAME's pieces through NBD, in
# requests of at most 4 MiB, plain writes (no FUA: FUA would make them
# durable). Each pwrite returns only once the write was acknowledged.
nbd_write() {
	local name=$1
	shift
	nbdsh -u "$URI" -c "
pat = open('$WORK/$name', 'rb').read()
n = 0
for off, length in $(py_list "$@"):
    pos, end = off, off + length
    while pos < end:
        k = min(4 << 20, end - pos)
        h.pwrite(pat[pos:pos + k], pos)
        pos += k
        n += 1
print('pattern $name: %d writes acknowledged' % n)
"
}

# nbd_flush: a real NBD_CMD_FLUSH, which makes every NORMAL member sync its
# store.
nbd_flush() {
	nbdsh -u "$URI" -c "
assert h.can_flush(), 'the export does not offer FLUSH'
h.flush()
"
}

# check_reads LABEL: read the whole export in chunk-sized requests, one at a
# time, and compare with the expected image. The client reads round-robin
# over the NORMAL members (librmr/core/client_io.c, dispatch_read), so with
# three of them every third chunk comes from each. A difference is told in
# runs of 4 KiB blocks: which pattern was read, which was expected.
check_reads() {
	nbdsh -u "$URI" -c "
import sys
label, size, req = '$1', $SIZE, $CHUNK
exp = open('$WORK/expect', 'rb').read()
pats = [(n, open('$WORK/' + n, 'rb').read()) for n in 'ABC']
def what(off, blk):
    for n, p in pats:
        if blk == p[off:off + len(blk)]:
            return n
    return 'zeros' if blk == bytes(len(blk)) else 'other bytes'
bad, runs = 0, []
for off in range(0, size, req):
    got = h.pread(req, off)
    if got == exp[off:off + req]:
        continue
    bad += 1
    for b in range(off, off + req, 4096):
        g, e = got[b - off:b - off + 4096], exp[b:b + 4096]
        if g == e:
            continue
        k = (what(b, g), what(b, e))
        if runs and runs[-1][1] == b and runs[-1][2] == k:
            runs[-1][1] = b + 4096
        else:
            runs.append([b, b + 4096, k])
if bad:
    for lo, hi, (g, e) in runs[:12]:
        print('%s: pool bytes %d..%d (%d KiB): read %s, expected %s'
              % (label, lo, hi, (hi - lo) >> 10, g, e), file=sys.stderr)
    sys.exit('%s: %d of %d reads returned wrong bytes (%d runs)' % (label, bad, size // req, len(runs)))
print('%s: all %d reads as expected' % (label, size // req))
"
}

# chunks_of PIECE...: how many distinct chunks the pieces touch.
chunks_of() {
	"$PY" -c "
s = set()
for off, n in $(py_list "$@"):
    s.update(range(off // $CHUNK, (off + n - 1) // $CHUNK + 1))
print(len(s))
"
}

# data_area STORE OUT: copy a store's data area to OUT.
data_area() {
	dd if="$1" of="$2" bs=1M iflag=skip_bytes,count_bytes skip="$DOFF" count="$SIZE" \
		status=none || fail "cannot read the data area of $1"
}

log "write pattern A (48 MiB), then an NBD flush"
nbd_write A "${A_PIECES[@]}" || fail "writing pattern A failed"
nbd_flush || fail "the NBD flush failed"
for id in 1 2 3; do
	state_in "$id" normal || fail "member $id is '$(member_state "$id")' before the power loss"
done
# No write since the flush returned: member 3's data area in the file is
# what its disk holds durably.
data_area "$PDIR/m3.store" "$WORK/m3.durable"
log "member 3's data area saved as its disk holds it (store bytes $DOFF.., $SIZE bytes)"

# The client counts the bytes of the writes each member acknowledged: all
# of B must have been acknowledged by member 3 itself.
B_BYTES=0
for p in "${B_PIECES[@]}"; do B_BYTES=$((B_BYTES + ${p#* })); done
W0=$(member_field 3 write_bytes)
log "write pattern B over ${#B_PIECES[@]} places of A ($B_BYTES bytes), no flush"
nbd_write B "${B_PIECES[@]}" || fail "writing pattern B failed"
W1=$(member_field 3 write_bytes)
((W1 - W0 == B_BYTES)) ||
	fail "member 3 acknowledged $((W1 - W0)) bytes of writes during pattern B, expected $B_BYTES"
state_in 3 normal || fail "member 3 is '$(member_state 3)' after pattern B"
# The test has teeth only if member 3 holds B now (in its page cache) and
# the saved data area does not: writing it back then takes B away.
"$PY" - "$PDIR/m3.store" "$DOFF" "$WORK/m3.durable" "$WORK" <<EOF ||
import sys
store, doff, durable, work = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
a, b = open(work + "/A", "rb").read(), open(work + "/B", "rb").read()
with open(store, "rb") as s, open(durable, "rb") as d:
    for off, n in $(py_list "${B_PIECES[@]}"):
        s.seek(doff + off)
        d.seek(off)
        if s.read(n) != b[off:off + n]:
            sys.exit("member 3's store does not hold B at %d" % off)
        if d.read(n) != a[off:off + n]:
            sys.exit("the saved data area does not hold A at %d" % off)
EOF
	fail "the power loss would take nothing away; the test would prove nothing"
log "member 3 acknowledged all of B; its store holds B, its disk still A"

log "power loss of member 3's host: SIGKILL, and its data area back to the flushed state"
"$POOL" kill --dir "$PDIR" 3
dd if="$WORK/m3.durable" of="$PDIR/m3.store" bs=1M oflag=seek_bytes seek="$DOFF" \
	conv=notrunc,fsync status=none || fail "cannot write member 3's saved data area back"
cmp -s -n "$SIZE" -i "$DOFF:0" "$PDIR/m3.store" "$WORK/m3.durable" ||
	fail "member 3's data area is not the saved one after writing it back"
wait_for 15 state_in 3 failed || fail "client shows member 3 as '$(member_state 3)', expected failed"

log "write pattern C while member 3 is away, and flush"
nbd_write C "${C_PIECES[@]}" || fail "writing pattern C failed"
nbd_flush || fail "the NBD flush with member 3 away failed"
NB=$(chunks_of "${B_PIECES[@]}")
NC=$(chunks_of "${C_PIECES[@]}")
D1=$(dirty_for 3 1)
D2=$(dirty_for 3 2)
# Informative here: what decides is the data read back below. For member 3
# to get B back, its peers must record B's chunks too, not only C's.
log "members 1, 2 record $D1, $D2 chunks missed by member 3 (C touches $NC chunks, the lost B $NB)"

log "restart member 3 from its store in a new boot of its host, and wait for the pool to heal"
# A power loss reboots the host: its kernel's boot_id changes, and with it
# the boot the member reports (a record made in the old one stands).
"$PY" -c 'import uuid; print(uuid.uuid4())' >"$WORK/boot_id" ||
	fail "cannot make a boot id for member 3's new boot"
BRMR_BOOT_ID_FILE=$WORK/boot_id "$POOL" start --dir "$PDIR" 3
wait_for 60 healed 3 ||
	fail "the pool did not heal: member 3 '$(member_state 3)', dirty for it on 1: $(dirty_for 3 1)"
# Nothing is left unflushed: the maintenance below must take no record.
nbd_flush || fail "the NBD flush after the heal failed"

log "read the whole export through the pool (round-robin over the 3 members)"
check_reads "pool read" ||
	fail "the pool reads stale bytes after member 3's power loss (peers recorded $D1 chunks for it; B touches $NB, C $NC)"

log "each member alone: the other two in maintenance"
for id in 1 2 3; do
	others=()
	for o in 1 2 3; do ((o == id)) || others+=("$o"); done
	for o in "${others[@]}"; do
		"$BRMRCTL" maintenance on --socket "$CTL" --member "$o" >/dev/null ||
			fail "maintenance on for member $o failed"
	done
	state_in "$id" normal || fail "member $id is '$(member_state "$id")' while it serves alone"
	check_reads "member $id alone" || fail "member $id alone reads wrong bytes"
	for o in "${others[@]}"; do
		"$BRMRCTL" maintenance off --socket "$CTL" --member "$o" >/dev/null ||
			fail "maintenance off for member $o failed"
	done
	wait_for 30 healed 3 || fail "the pool did not heal after maintenance of ${others[*]}"
done

log "the members' data areas: identical and equal to the expected image"
"$POOL" compare --dir "$PDIR" 1 2 3 || fail "members 1, 2, 3 differ after member 3's power loss"
for id in 1 2 3; do
	out=$(cmp -n "$SIZE" -i "$DOFF:0" "$PDIR/m$id.store" "$WORK/expect" 2>&1) ||
		fail "member $id's data area is not the expected image (cmp counts pool bytes from 1): $out"
done
# The copy went member to member: none through the client.
for id in 1 2 3; do
	[[ $(member_field "$id" resync_bytes) == 0 ]] || fail "the client carried resync bytes for member $id"
done
# Member 3 copies what it missed (C) and what it lost (B), not the pool.
COPIED=$(server_field 3 'p["resync"]["bytes"]')
NBC=$(chunks_of "${B_PIECES[@]}" "${C_PIECES[@]}")
((COPIED <= NBC * CHUNK)) || fail "member 3 copied $COPIED bytes, more than the $NBC chunks B and C touch"
log "member 3 copied $COPIED bytes from its peers (B and C touch $NBC chunks)"
log "PASS"
