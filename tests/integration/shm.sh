#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# shm: the basic nbdcopy round trip and member comparison over libfabric's
# shm provider, and no shm regions left behind once the pool is down.
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

need nbdcopy cmp
need_bins
command -v fi_info >/dev/null 2>&1 && ! fi_info -p shm >/dev/null 2>&1 &&
	skip "libfabric has no shm provider here"

pool_up --members 3 --size 256M --provider shm

log "nbdcopy a 64 MiB random file in and out over shm"
random_file "$WORK/rand.bin" 64
nbdcopy_roundtrip "$WORK/rand.bin"

log "compare the members' data regions"
"$POOL" compare --dir "$PDIR" || fail "members' data regions differ"

log "take the pool down; none of its shm regions may remain"
prefix=$(sed -n 's/^SHM_PREFIX=//p' "$PDIR/pool.env")
pids=$(cat "$PDIR"/*.pid)
"$POOL" down --dir "$PDIR" || fail "local-pool down failed"
left=""
for f in /dev/shm/*; do
	n=${f#/dev/shm/}
	[[ -n $prefix && $n == "$prefix"* ]] && left+=" $n"
	for p in $pids; do
		[[ $n == "$p:"* || $n == *"_$p" || $n == *"-$p" ]] && left+=" $n"
	done
done
[[ -z $left ]] || fail "left in /dev/shm after down:$left"
log "PASS"
