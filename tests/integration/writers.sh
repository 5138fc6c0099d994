#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# writers: one writer per pool, and failover to another one.
#  - A second nbd-brmr on the same pool is refused ("another writer holds
#    it") and exits; the first one goes on writing.
#  - A second nbd-brmr with --takeover serves the pool; the members fence
#    the first one: its writes and reads fail, nothing it sends after the
#    takeover reaches a store, and its status says FENCED.
#  - The new writer's data is what every member holds.
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

need nbdsh
need_bins

pool_up --members 3 --size 64M
CLIENT=$BUILD_DIR/examples/nbd-brmr/nbd-brmr
MEMBERS=()
for id in 1 2 3; do
	MEMBERS+=(--member "$(sed -n 's/^ADDR=//p' "$PDIR/m$id.env")")
done

# second_writer NAME ARGS...: start another nbd-brmr on the pool (members
# named on the command line, so the pool key too), in the background; sets
# SECOND (its pid).
second_writer() {
	local name=$1
	shift
	"$CLIENT" --pool local "${MEMBERS[@]}" --key-file "$PDIR/local.key" \
		--socket "$WORK/$name.sock" \
		--control "$WORK/$name.ctl" --ready-file "$WORK/$name.ready" "$@" \
		>"$WORK/$name.log" 2>&1 &
	SECOND=$!
}

log "write A through the first writer"
nbdsh -u "$URI" -c "
h.pwrite(b'A' * 65536, 1 << 20, nbd.CMD_FLAG_FUA)
" || fail "the first writer cannot write"

log "a second writer is refused"
second_writer refused
wait_for 30 eval "! pid_alive $SECOND" || fail "the second writer did not give up"
rc=0
wait "$SECOND" || rc=$?
((rc != 0)) || fail "the second writer exited 0"
grep -q "another writer holds it" "$WORK/refused.log" ||
	fail "the refusal does not say why: $(tail -n 3 "$WORK/refused.log")"
log "refused: $(grep -o 'cannot open the pool: .*' "$WORK/refused.log")"
nbdsh -u "$URI" -c "
h.pwrite(b'B' * 65536, 1 << 20, nbd.CMD_FLAG_FUA)
assert h.pread(65536, 1 << 20) == b'B' * 65536
" || fail "the first writer was hurt by the refused second one"
for id in 1 2 3; do
	state_in "$id" normal || fail "member $id is '$(member_state "$id")' after the refusal"
done

log "a second writer takes the pool over"
second_writer takeover --takeover
wait_for 30 test -s "$WORK/takeover.ready" || fail "the taking-over writer did not start: $(tail -n 5 "$WORK/takeover.log")"
NEW_URI=$(head -n1 "$WORK/takeover.ready")
PATH=/usr/bin:$PATH command nbdsh -u "$NEW_URI" -c "
assert h.pread(65536, 1 << 20) == b'B' * 65536
h.pwrite(b'C' * 65536, 2 << 20, nbd.CMD_FLAG_FUA)
" || fail "the new writer cannot read the first one's data or write"

log "the first writer is fenced: its write and read fail"
nbdsh -u "$URI" -c "
try:
    h.pwrite(b'X' * 65536, 3 << 20, nbd.CMD_FLAG_FUA)
except nbd.Error as e:
    print('write refused:', e)
else:
    raise SystemExit('a fenced write succeeded')
try:
    h.pread(4096, 1 << 20)
except nbd.Error as e:
    print('read refused:', e)
else:
    raise SystemExit('a fenced read succeeded')
" || fail "the first writer was not fenced"
"$BRMRCTL" status --socket "$PDIR/client.ctl" | grep -q FENCED ||
	fail "the first writer's status does not say FENCED"
for id in 1 2 3; do
	epoch=$(server_field "$id" 'p["writer_epoch"]')
	((epoch >= 2)) || fail "member $id grants writer epoch $epoch, expected a new one"
done

log "nothing the fenced writer sent reached a store"
PATH=/usr/bin:$PATH command nbdsh -u "$NEW_URI" -c "
assert h.pread(65536, 3 << 20) == bytes(65536), 'the fenced write is on the pool'
assert h.pread(65536, 2 << 20) == b'C' * 65536
h.flush()
"  || fail "the fenced writer's data reached the pool"
"$POOL" compare --dir "$PDIR" 1 2 3 || fail "members differ after the takeover"
kill "$SECOND"
wait "$SECOND" || true
log "ok"
