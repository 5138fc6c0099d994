#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# planned_restart: nbd-brmr is restarted (a clean stop, then a start) while
# member 3 is away and has missed writes. An open needs every member to
# answer, since a member cannot tell by itself that it missed writes, unless
# the writer's last clean close recorded which members were current then
# (nbd-brmr's close record, next to its control socket): the restart then
# opens without member 3, and member 3 takes the maps when it returns.
# Checked here: the record names members 1 and 2; with it the start opens
# and serves every acknowledged write; without it, or with a damaged one,
# the start is refused and says why; a record that a later writer made
# stale opens nothing; member 3 back heals and the members end identical.
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

need nbdsh
need_bins

pool_up --members 3 --size 64M
RECORD=$PDIR/client.closed

# nbd_write PATTERN OFFSET LENGTH: PATTERN's bytes written through NBD.
nbd_write() {
	nbdsh -u "$URI" -c "
pat = open('$WORK/$1', 'rb').read()
for off in range($2, $2 + $3, 1 << 20):
    h.pwrite(pat[off:off + (1 << 20)], off)
"
}

# nbd_check PATTERN OFFSET LENGTH: the export holds PATTERN's bytes there.
nbd_check() {
	nbdsh -u "$URI" -c "
pat = open('$WORK/$1', 'rb').read()
for off in range($2, $2 + $3, 1 << 20):
    assert h.pread(1 << 20, off) == pat[off:off + (1 << 20)], 'pattern $1 differs at %d' % off
" || fail "the export does not hold pattern $1 at $2+$3"
}

start_client() {
	"$POOL" start --dir "$PDIR" client "$@"
	URI=$("$POOL" uri --dir "$PDIR")
}

# refused WHY: a client start must fail, its log saying the open waited for
# member 3.
refused() {
	: >"$PDIR/client.log"
	! "$POOL" start --dir "$PDIR" client --timeout 60 >"$WORK/refused.out" 2>&1 ||
		fail "the client opened without member 3 ($1)"
	grep -q "not opened: no answer from member 3" "$PDIR/client.log" ||
		fail "the refused open ($1) did not say why: $(tail -n 3 "$PDIR/client.log")"
	log "refused without member 3: $1"
}

for p in A B C; do random_file "$WORK/$p" 64; done
nbd_write A 0 $((32 << 20))
"$POOL" kill --dir "$PDIR" 3
wait_for 20 state_in 3 failed || fail "the client did not fail member 3"
nbd_write B $((8 << 20)) $((8 << 20))
missed_by_3() { (($(dirty_for 3 1) > 0)); }
wait_for 20 missed_by_3 || fail "member 1 records nothing missed by member 3"

log "a clean stop records members 1 and 2 as current"
"$POOL" stop --dir "$PDIR" client
[[ -f $RECORD ]] || fail "the clean stop wrote no close record"
grep -qx "current_ids 0x6" "$RECORD" || fail "the record does not name members 1 and 2: $(cat "$RECORD")"
grep -q "recorded the clean close in $RECORD: members 1, 2 current" "$PDIR/client.log" ||
	fail "the client did not log its record"
cp "$RECORD" "$WORK/record.first"

rm -f "$RECORD"
refused "no record"
# A damaged record is ignored, with a word in the log: no open without member 3.
sed 's/^writer_epoch .*/writer_epoch twelve/' "$WORK/record.first" >"$RECORD"
refused "a record that does not parse"
grep -q "ignoring $RECORD: not a close record" "$PDIR/client.log" ||
	fail "the damaged record was not reported: $(tail -n 3 "$PDIR/client.log")"
cp "$WORK/record.first" "$RECORD"
start_client
grep -q "opening without member 3: behind at this writer's last clean close" "$PDIR/client.log" ||
	fail "the client did not say why it opened without member 3: $(tail -n 3 "$PDIR/client.log")"
[[ ! -e $RECORD ]] || fail "the record stayed after the open that used it"
nbd_check A 0 $((8 << 20))
nbd_check B $((8 << 20)) $((8 << 20))
nbd_check A $((16 << 20)) $((16 << 20))
nbd_write C $((40 << 20)) $((4 << 20))

log "a record from before the last writer opens nothing"
"$POOL" kill --dir "$PDIR" client
cp "$WORK/record.first" "$RECORD"
refused "a stale record"
start_client --open-without 3
nbd_check C $((40 << 20)) $((4 << 20))

log "member 3 returns"
"$POOL" start --dir "$PDIR" 3
wait_for 60 healed 3 || fail "the pool did not heal after member 3 came back"
"$POOL" compare --dir "$PDIR" 1 2 3 || fail "members differ after member 3 came back"
nbd_check B $((8 << 20)) $((8 << 20))
nbd_check C $((40 << 20)) $((4 << 20))
log "ok"
