#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# backpressure: nbd-brmr with librmr's queue depth at 2 (pool.conf), so that
# almost every request meets a full queue: 4k writes at QD32 find no slot
# for their first piece (the reader parks the request and stops reading that
# connection until a completion), 1 MiB writes of 8 pieces run out part-way
# (libbrmr queues the rest), and nbdcopy's connections compete for the two
# slots. Everything written must read back, fio's verification must pass,
# and the members' data regions must be byte-identical.
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

need nbdcopy fio cmp
need_bins

BRMR_POOL_SETTINGS="queue_depth = 2" pool_up --members 2 --size 256M
grep -q '^queue_depth = 2$' "$PDIR/pool.conf" || fail "pool.conf has no queue_depth = 2"

log "nbdcopy a 48 MiB random file in and out (a connection per CPU, 2 slots in all)"
random_file "$WORK/rand.bin" 48
nbdcopy_roundtrip "$WORK/rand.bin"

for job in "randwrite 4k 32 64M" "write 1M 8 128M" "randwrite 1M 8 192M"; do
	read -r rw bs qd off <<<"$job"
	log "fio: $rw of $bs blocks at QD$qd over 32 MiB, verified while writing and after"
	fio --name=bp --ioengine=nbd --uri="$URI" --rw="$rw" --bs="$bs" --iodepth="$qd" \
		--offset="$off" --size=32M --randrepeat=1 --verify=crc32c --verify_fatal=1 \
		--verify_state_save=0 --do_verify=1 --output-format=json \
		--output="$WORK/fio-$rw-$bs.json" ||
		fail "fio $rw $bs failed: $(cat "$WORK/fio-$rw-$bs.json")"
	fio_check "$WORK/fio-$rw-$bs.json" || fail "fio $rw $bs reported an error"
	fio --name=bp --ioengine=nbd --uri="$URI" --rw="$rw" --bs="$bs" --iodepth="$qd" \
		--offset="$off" --size=32M --randrepeat=1 --verify=crc32c --verify_fatal=1 \
		--verify_state_save=0 --verify_only --output-format=json \
		--output="$WORK/fio-$rw-$bs-v.json" ||
		fail "fio verify-only $rw $bs failed: $(cat "$WORK/fio-$rw-$bs-v.json")"
	fio_check "$WORK/fio-$rw-$bs-v.json" || fail "fio verify-only $rw $bs reported an error"
done

log "compare the members' data regions"
"$POOL" compare --dir "$PDIR" || fail "members' data regions differ"
log "OK"
