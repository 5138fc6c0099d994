#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# big_pool: a 16 GiB sparse pool on 2 members. Writes at and across the
# 4 GiB boundary, far above it and at the very end (qemu-io, with pattern
# verification), a check that offsets do not alias modulo 2^32, then the
# members' data regions are compared.
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

need qemu-io nbdsh
need_bins

SIZE=$((16 << 30))
pool_up --members 2 --size 16G

G4=$((4 << 30))
END1M=$((SIZE - (1 << 20)))
log "qemu-io: writes at 4 GiB, across it, at 8 GiB+, 12 GiB (zeroes) and the last MiB"
qemu-io -f raw \
	-c "write -P 0xa1 $G4 1M" \
	-c "write -P 0xa2 $((G4 - 65536)) 128k" \
	-c "write -P 0xa3 $(((8 << 30) + 12345 * 4096)) 64k" \
	-c "write -P 0xa5 $((12 << 30)) 2M" \
	-c "write -z $(((12 << 30) + 512 * 1024)) 1M" \
	-c "write -f -P 0xa4 $END1M 1M" \
	-c "flush" \
	"$URI" >"$WORK/qemu-io-write.log" 2>&1 || fail "qemu-io writes failed: $(cat "$WORK/qemu-io-write.log")"
log "qemu-io: read everything back with pattern checks"
qemu-io -f raw \
	-c "read -P 0xa2 $((G4 - 65536)) 128k" \
	-c "read -P 0xa1 $((G4 + 65536)) $(((1 << 20) - 65536))" \
	-c "read -P 0xa3 $(((8 << 30) + 12345 * 4096)) 64k" \
	-c "read -P 0xa5 $((12 << 30)) 512k" \
	-c "read -P 0x00 $(((12 << 30) + 512 * 1024)) 1M" \
	-c "read -P 0xa5 $(((12 << 30) + 1536 * 1024)) 512k" \
	-c "read -P 0xa4 $END1M 1M" \
	-c "read -P 0x00 $((G4 - (2 << 20))) 1M" \
	"$URI" >"$WORK/qemu-io-read.log" 2>&1 || fail "qemu-io read-back failed"
if grep -qi "pattern verification failed\|error" "$WORK/qemu-io-read.log"; then
	fail "qemu-io read-back mismatch: $(cat "$WORK/qemu-io-read.log")"
fi

log "nbdsh: offsets X and X + 4 GiB, X + 8 GiB must not alias"
nbdsh -u "$URI" -c "
import os
a, b, c = os.urandom(65536), os.urandom(65536), os.urandom(65536)
x = 3 << 20
h.pwrite(a, x)
h.pwrite(b, x + (4 << 30))
h.pwrite(c, x + (8 << 30))
h.flush()
assert h.pread(65536, x) == a, 'offset x was overwritten by a write 4 GiB higher'
assert h.pread(65536, x + (4 << 30)) == b
assert h.pread(65536, x + (8 << 30)) == c
last = os.urandom(512)
h.pwrite(last, $SIZE - 512)
assert h.pread(512, $SIZE - 512) == last
print('no aliasing')
" || fail "nbdsh aliasing check failed"

log "compare the members' data regions (16 GiB, sparse)"
"$POOL" compare --dir "$PDIR" || fail "members' data regions differ"
log "PASS"
