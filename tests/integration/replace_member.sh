#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# replace_member: member 2's disk is lost in the middle of a verified fio
# random-write run. A blank store is formatted under its id (brmrctl
# replace-member) and served with --replace: it serves at once, copies every
# chunk from its peers, and the pool never reads stale data from it (fio's
# verify passes, during the run and over the whole area afterwards). At the
# end all members are byte-identical, the client carried no resync bytes, and
# a second --replace on the now used store is refused.
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

need fio
need_bins

pool_up --members 3 --size 128M

writes_of() { member_field "$1" writes; }
writes_at_least() { local n; n=$(writes_of "$1") && [[ -n $n ]] && ((n >= $2)); }

log "fill 64 MiB with verifiable data"
fio --name=fill --ioengine=nbd --uri="$URI" --rw=write --bs=1M --iodepth=8 --size=64M \
	--verify=crc32c --do_verify=0 --output-format=json --output="$WORK/fill.json" \
	>"$WORK/fill.out" 2>&1 || fail "fio fill failed: $(tail -n 3 "$WORK/fill.out")"

log "fio: random writes with verification; member 2's disk dies under it"
fio --name=run --ioengine=nbd --uri="$URI" --rw=randwrite --bs=4k --iodepth=16 \
	--offset=64M --size=32M --randrepeat=1 --rate_iops=2000 \
	--verify=crc32c --verify_fatal=1 --verify_state_save=0 --do_verify=1 --verify_backlog=512 \
	--output-format=json --output="$WORK/run.json" >"$WORK/run.out" 2>&1 &
FIO=$!
wait_for 60 writes_at_least 2 1500 || fail "writes did not reach member 2"
# 4 MiB/s: the copy-in would take some 30 s, so the I/O below meets it
# unfinished however slow the machine; the limit is lifted for the rest.
BRMR_SERVER_ARGS="--resync-rate 4M" "$POOL" replace --dir "$PDIR" 2 ||
	fail "local-pool replace 2 failed"
grep -q "blank replacement" "$PDIR/m2.log" || fail "member 2 did not start as a replacement"
# The copy-in may have begun already: count what is left plus what is done.
total=$(server_field 2 'p["resync"]["total"]')
((total == 1024)) || fail "the replacement records $total of 1024 chunks to copy in"
log "member 2 is blank: $total chunks to copy in, $(dirty_for 2 2) of them left"

rc=0
wait "$FIO" || rc=$?
fio_check "$WORK/run.json" || fail "fio reported an error during the replacement"
((rc == 0)) || fail "fio exited with status $rc: $(tail -n 5 "$WORK/run.out")"

left=$(dirty_for 2 2)
((left > 0)) || fail "member 2 holds every chunk already; the read-back would prove nothing"
log "read everything back through the pool while member 2 still lacks $left chunks"
fio --name=fill --ioengine=nbd --uri="$URI" --rw=write --bs=1M --iodepth=8 --size=64M \
	--verify=crc32c --verify_only=1 --verify_fatal=1 --output-format=json \
	--output="$WORK/fill2.json" >"$WORK/fill2.out" 2>&1 ||
	fail "stale or wrong data read back: $(tail -n 5 "$WORK/fill2.out")"
"$BRMRCTL" resync rate 0 --socket "$PDIR/m2.ctl" >/dev/null || fail "cannot lift member 2's resync limit"
wait_for 120 healed 3 || fail "member 2 did not finish copying in"
check_healed 3 2 1024

log "a second --replace on the store that now served the pool is refused"
"$POOL" kill --dir "$PDIR" 2
STORE=$(sed -n 's/^STORE=//p' "$PDIR/m2.env")
ADDR=$(sed -n 's/^ADDR=//p' "$PDIR/m2.env")
if "$BUILD_DIR/tools/brmr-server" --listen "$ADDR" --store "$STORE" --replace \
	>"$WORK/again.log" 2>&1; then
	fail "brmr-server --replace accepted a used store"
fi
grep -q "has served the pool before" "$WORK/again.log" ||
	fail "no clear reason for the refusal: $(tail -n 3 "$WORK/again.log")"
"$POOL" start --dir "$PDIR" 2
wait_for 60 healed 3 || fail "member 2 did not come back"
log "ok"
