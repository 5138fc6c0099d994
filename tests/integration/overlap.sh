#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# overlap: overlapping writes, FUA writes, trims and write-zeroes in flight
# together (overlap_ops.py, 64 at a time at 512-byte granularity) on three
# members whose stores are files on a disk file system, where FUA writes,
# trims and zeroes run on the store's worker threads and so may complete
# out of order with the plain writes the event loop applies. The members
# must still apply overlapping requests in one order: they end identical.
# Round 1 with every member up; round 2 while member 3 is killed; round 3
# while member 3 copies back what it missed (its resync rate held low so
# that the copy and the requests meet on the same chunks). Every request
# succeeds, a read of the region agrees with the model wherever one request
# alone decided a sector, and all members are identical.
#
# The pool lives under TMPDIR, or in the build directory if TMPDIR is tmpfs:
# there a store is mapped and runs everything on the event loop.
if [[ $(stat -f -c %T "${TMPDIR:-/tmp}" 2>/dev/null) == tmpfs && -n ${BUILD_DIR:-} ]]; then
	export TMPDIR=$BUILD_DIR
fi
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

need_bins
"$PY" -c 'import nbd' 2>/dev/null || skip "python3-libnbd is not installed"
[[ $(stat -f -c %T "$WORK") != tmpfs ]] || skip "$WORK and $BUILD_DIR are on tmpfs; set TMPDIR to a disk"
# 24 MiB dirty at 24 MiB/s: member 3 copies for about a second after it returns.
export BRMR_SERVER_ARGS="--resync-rate 24M"
pool_up --members 3 --size 64M

OPS=$SRC_DIR/tests/integration/overlap_ops.py
STATE=$WORK/model
ops() { "$PY" "$OPS" "$URI" "$STATE" "$@"; }

log "round 1: 3000 requests, every member up"
ops 3000 1 || fail "round 1 failed"

log "round 2: 3000 requests; member 3 is killed meanwhile"
ops 3000 2 >"$WORK/round2.out" 2>&1 &
OPS_PID=$!
sleep 0.3
"$POOL" kill --dir "$PDIR" 3
wait "$OPS_PID" || fail "round 2 failed: $(cat "$WORK/round2.out")"
cat "$WORK/round2.out"
wait_for 15 state_in 3 failed || fail "client shows member 3 as '$(member_state 3)', expected failed"
# More for it to copy back, around the region (at 16 MiB) and elsewhere.
nbdsh -u "$URI" -c "
import os
h.pwrite(os.urandom(8 << 20), 8 << 20)
h.pwrite(os.urandom(12 << 20), 24 << 20)
h.flush()
" || fail "writing through NBD failed"
DIRTY=$(dirty_for 3 1)
log "member 1 records $DIRTY chunks missed by member 3"

log "round 3: member 3 returns; 3000 requests while it copies"
"$POOL" start --dir "$PDIR" 3
wait_for 30 state_in 3 normal || fail "member 3 is '$(member_state 3)', expected normal"
COPIED_AT_START=$(server_field 3 'p["resync"]["bytes"]')
ops 3000 3 || fail "round 3 failed"
COPIED_AT_END=$(server_field 3 'p["resync"]["bytes"]')
log "member 3 had copied $COPIED_AT_START bytes when round 3 began, $COPIED_AT_END when it ended"
((COPIED_AT_START < DIRTY * $(server_field 1 'p["chunk_size"]'))) ||
	fail "member 3 had copied everything before round 3 began: the rounds did not meet"

wait_for 60 healed 3 || fail "the pool did not heal: member 3 is $(member_state 3)"
"$POOL" compare --dir "$PDIR" 1 2 3 || fail "the members differ after overlapping requests"
ops check || fail "the region does not read as the model says"
log "PASS"
