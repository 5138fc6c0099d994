#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# basic: 3 members + nbd-brmr, driven by every real NBD client we have:
# nbdinfo (size, flags), qemu-img (convert + compare), nbdcopy (64 MiB
# round trip, a connection per CPU), nbdsh (write/read/FUA/flush/zero/trim,
# errors; a write on one connection flushed and read on another), fio (random
# writes verified with crc32c, and a negative control proving that a single
# wrong byte fails the verification). Finally the members' data regions
# must be byte-identical.
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

need nbdinfo nbdcopy nbdsh qemu-img fio cmp
need_bins

SIZE=$((512 << 20))
pool_up --members 3 --size 512M

log "nbdinfo: size and advertised flags"
nbdinfo --json "$URI" >"$WORK/info.json" || fail "nbdinfo --json $URI failed"
"$PY" - "$WORK/info.json" "$SIZE" <<'EOF' || fail "nbdinfo output is wrong"
import json, sys
doc = json.load(open(sys.argv[1]))
ex = doc["exports"][0]
ok = True
if ex["export-size"] != int(sys.argv[2]):
    print("export-size %s, expected %s" % (ex["export-size"], sys.argv[2])); ok = False
for k in ("can_flush", "can_fua", "can_trim", "can_zero", "can_multi_conn"):
    if ex.get(k) is not True:
        print("%s is %s, expected true" % (k, ex.get(k))); ok = False
if ex.get("is_read_only") is not False:
    print("is_read_only is %s" % ex.get("is_read_only")); ok = False
print("nbdinfo: size %d, protocol %s, flush/fua/trim/zero/multi-conn %s" % (
    ex["export-size"], doc.get("protocol"), "ok" if ok else "WRONG"))
sys.exit(0 if ok else 1)
EOF

log "qemu-img convert -n of a 32 MiB raw image, then qemu-img compare"
random_file "$WORK/img.raw" 32
qemu-img convert -n -f raw -O raw "$WORK/img.raw" "$URI" || fail "qemu-img convert failed"
# The rest of the fresh export reads as zeros, which compare accepts.
qemu-img compare -f raw -F raw "$WORK/img.raw" "$URI" || fail "qemu-img compare: images differ"

log "nbdcopy a 64 MiB random file in and out (a connection per CPU: the export allows multi-conn)"
random_file "$WORK/rand.bin" 64
nbdcopy_roundtrip "$WORK/rand.bin"

log "nbdsh: pwrite/pread, FUA, flush, zero, trim, out-of-range errors"
nbdsh -u "$URI" -c "
import os
size = $SIZE
assert h.get_size() == size, h.get_size()
assert h.can_flush() and h.can_fua() and h.can_trim() and h.can_zero()
base = 200 << 20
buf = os.urandom(1 << 20)
h.pwrite(buf, base)
assert h.pread(len(buf), base) == buf, 'pwrite/pread mismatch'
fua = b'\xab' * 65536
h.pwrite(fua, base + (1 << 20), nbd.CMD_FLAG_FUA)
h.flush()
assert h.pread(len(fua), base + (1 << 20)) == fua, 'FUA write mismatch'
h.zero(1 << 20, base)
assert h.pread(1 << 20, base) == bytes(1 << 20), 'zeroed range not zero'
h.zero(4096, base + (1 << 20) + 4096, nbd.CMD_FLAG_NO_HOLE)
got = h.pread(65536, base + (1 << 20))
assert got == fua[:4096] + bytes(4096) + fua[8192:], 'NO_HOLE zero mismatch'
h.pwrite(b'\xcd' * (1 << 20), base + (2 << 20))
h.trim(1 << 20, base + (2 << 20))
h.flush()
h.pwrite(b'after trim', base + (2 << 20) + 5)
assert h.pread(10, base + (2 << 20) + 5) == b'after trim'
odd = os.urandom(12345)
h.pwrite(odd, base + (3 << 20) + 7)
assert h.pread(len(odd), base + (3 << 20) + 7) == odd, 'unaligned write mismatch'
tail = os.urandom(4096)
h.pwrite(tail, size - 4096, nbd.CMD_FLAG_FUA)
assert h.pread(4096, size - 4096) == tail, 'last block mismatch'
# Let the requests reach the server: libnbd would refuse them itself.
h.set_strict_mode(0)
for what, fn in (('read', lambda: h.pread(4096, size - 2048)),
                 ('write', lambda: h.pwrite(bytes(4096), size)),
                 ('zero', lambda: h.zero(4096, size)),
                 ('trim', lambda: h.trim(4096, size))):
    try:
        fn()
    except nbd.Error as e:
        continue
    raise AssertionError(what + ' beyond the end succeeded')
h.flush()
print('nbdsh round trips ok')
" || fail "nbdsh round trips failed"

log "two connections: a write completed on one is flushed and read on the other"
nbdsh -c "
import os
a = nbd.NBD()
a.connect_uri('$URI')
b = nbd.NBD()
b.connect_uri('$URI')
assert a.can_multi_conn() and b.can_multi_conn()
base = 400 << 20
for i in range(16):
    buf = os.urandom(65536)
    a.pwrite(buf, base + i * 65536)
    b.flush()
    assert b.pread(len(buf), base + i * 65536) == buf, 'the other connection does not see write %d' % i
a.shutdown()
b.shutdown()
print('two connections: 16 writes on one, each flushed and read back on the other')
" || fail "nbdsh with two connections failed"

FIO_JOB=(--name=basic --ioengine=nbd --uri="$URI" --rw=randwrite --bs=4k --iodepth=32
	--offset=256M --size=64M --randrepeat=1 --verify=crc32c --verify_fatal=1 --verify_state_save=0)

log "fio: 64 MiB random 4k writes at QD32, verified while writing and at the end"
fio "${FIO_JOB[@]}" --do_verify=1 --verify_backlog=1024 \
	--output-format=json --output="$WORK/fio-write.json" ||
	fail "fio randwrite+verify failed: $(cat "$WORK/fio-write.json")"
fio_check "$WORK/fio-write.json" || fail "fio reported an error"

log "fio: verify-only pass over the same blocks"
fio "${FIO_JOB[@]}" --verify_only --output-format=json --output="$WORK/fio-verify.json" ||
	fail "fio verify-only failed: $(cat "$WORK/fio-verify.json")"
fio_check "$WORK/fio-verify.json" || fail "fio verify-only reported an error"

log "negative control: flip one byte in fio's region, verify-only must fail"
nbdsh -u "$URI" -c "
off = (256 << 20) + 12345 * 4096 + 100
b = h.pread(1, off)
h.pwrite(bytes([b[0] ^ 0xff]), off, nbd.CMD_FLAG_FUA)
" || fail "nbdsh corrupt failed"
if fio "${FIO_JOB[@]}" --verify_only --output-format=json \
	--output="$WORK/fio-neg.json" >/dev/null 2>&1; then
	fail "fio verify passed over a corrupted block: the verification would not catch bad data"
fi
log "fio caught the corrupted byte (as it must)"

log "compare the members' data regions"
"$POOL" compare --dir "$PDIR" || fail "members' data regions differ"
log "PASS"
