#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# kv_damaged: bad bytes on a member's disk give a clear error, never a
# crash, and the pool recovers from them. A store with a corrupt superblock
# is refused at start with the reason. A bucket page that fails its checksum
# (as a write torn by a crash leaves it) is named by the offline digest and
# kept damaged when the member starts; the member missed writes to it, so
# it is copied in from a peer and healed. Then the member's disk is
# "replaced": a blank store served with --replace copies every bucket from
# its peer, and the members agree again.
# shellcheck source-path=SCRIPTDIR source=kv_lib.sh
. "$(dirname "$0")/kv_lib.sh"

kv_up --members 2 --buckets 16
# shellcheck source=/dev/null
. "$KDIR/pool.env" # UUID, BUCKETS, BUCKET_SIZE
args=()
for i in $(seq 1 200); do args+=("key:$i" "value-$i"); done
expect_reply OK mset "${args[@]}"
check_digests_equal 2

log "member 2 stops; writes to every bucket go on without it"
"$KV" stop --dir "$KDIR" 2
wait_for 15 member_state_is 2 failed || fail "the front shows member 2 as '$(info_member 2 state)'"
args=()
for i in $(seq 1 200); do args+=("key:$i" "second-$i"); done
expect_reply OK mset "${args[@]}"
[[ $(dirty_for 2 1) == 16 ]] || fail "member 1 records $(dirty_for 2 1) buckets missed by member 2, not 16"

log "a corrupt superblock: refused with the reason"
cp "$KDIR/m2.kv" "$WORK/sb.kv"
printf 'X' | dd of="$WORK/sb.kv" bs=1 seek=40 conv=notrunc status=none
rc=0
"$MEMBER_BIN" serve --store "$WORK/sb.kv" --listen 127.0.0.1:9 2>"$WORK/sb.err" || rc=$?
((rc == 1)) || fail "serving a store with a corrupt superblock exited $rc, not 1"
grep -q 'superblock checksum mismatch' "$WORK/sb.err" || fail "no clear reason: $(cat "$WORK/sb.err")"
rc=0
"$MEMBER_BIN" digest --store "$WORK/sb.kv" 2>"$WORK/sb.err" || rc=$?
if ((rc != 1)) || ! grep -q 'superblock checksum mismatch' "$WORK/sb.err"; then
	fail "digest of a corrupt superblock: exit $rc, $(cat "$WORK/sb.err")"
fi
log "refused: $(cat "$WORK/sb.err")"

log "a bucket page with a bad byte: named offline, healed from the peer"
BAD=$("$PY" - "$KDIR/m2.kv" <<'EOF'
import struct, sys
with open(sys.argv[1], "r+b") as f:
    sb = f.read(4096)
    nbuckets, = struct.unpack_from("<Q", sb, 104)
    bsize, = struct.unpack_from("<I", sb, 100)
    data, = struct.unpack_from("<Q", sb, 144)
    for b in range(nbuckets):
        f.seek(data + b * bsize)
        if f.read(4) != b"\0\0\0\0":
            # A byte of the first entry's value: its checksum no longer matches.
            f.seek(data + b * bsize + 64 + 24 + 4)
            c = f.read(1)
            f.seek(-1, 1)
            f.write(bytes([c[0] ^ 0x20]))
            print(b)
            break
EOF
)
[[ $BAD =~ ^[0-9]+$ ]] || fail "found no bucket to damage in member 2's store"
rc=0
"$KV" digest --dir "$KDIR" 2 >/dev/null 2>"$WORK/digest.err" || rc=$?
((rc == 3)) || fail "offline digest of a damaged store exited $rc, not 3"
grep -q "bucket $BAD is damaged: entry at byte 64: checksum mismatch" "$WORK/digest.err" ||
	fail "the offline digest does not name bucket $BAD: $(cat "$WORK/digest.err")"
"$KV" start --dir "$KDIR" 2
grep -q "bucket $BAD is damaged" "$KDIR/m2.log" || fail "member 2 did not report bucket $BAD damaged"
wait_for 60 healed 2 || fail "member 2 did not heal"
grep -q "bucket $BAD: damaged page replaced by a peer's copy" "$KDIR/m2.log" ||
	fail "member 2 healed without replacing bucket $BAD"
check_digests_equal 2
expect_reply '"second-77"' get key:77

log "member 2's disk is replaced by a blank one: --replace copies every bucket"
"$KV" stop --dir "$KDIR" 2
"$MEMBER_BIN" create --store "$KDIR/m2.kv" --force --pool kv --uuid "$UUID" --id 2 \
	--buckets "$BUCKETS" --bucket-size "$BUCKET_SIZE" >/dev/null
KV_MEMBER_ARGS=--replace "$KV" start --dir "$KDIR" 2
wait_for 15 member_state_is 2 normal || fail "the replacement is '$(info_member 2 state)'"
# librmr starts a replacement's copy at its first request: one write.
expect_reply OK set after-replace 1
before=$(digest 1)
wait_for 60 healed 2 || fail "the replacement did not finish its copy"
check_digests_equal 2
[[ $(digest 2) == "$before" ]] || fail "the data changed across the replacement"
[[ $(member_json 2 'p["resync"]["total"]') == 16 ]] || fail "the replacement did not copy all 16 buckets"
for id in 1 2; do
	[[ $(info_member "$id" resync_bytes) == 0 ]] || fail "the front carried resync bytes for member $id"
done
log "PASS"
