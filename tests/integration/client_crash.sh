#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# client_crash: SIGKILL nbd-brmr in the middle of a verified fio random-write
# run, start it again, and check that
#  - the members reconcile before any I/O (the last writer exited uncleanly:
#    the source's activity log becomes dirty marks for the others, each
#    other member adds its own), and end byte-identical;
#  - every write fio saw acknowledged reads back intact: fio replays the run
#    from its saved verify state, and no block that differs is one whose
#    write completed (fio's per-request completion log, --write_lat_log);
#    only writes in flight when the client died may have either content.
# Round 2 does the same and also SIGKILLs member 3 before the client comes
# back: the new client does not open without it (members 1 and 2 cannot
# show it holds nothing newer) until --open-without 3 gives it up; member 3
# returns later and converges too.
# CRASH_ROUNDS=N adds N rounds whose fault is drawn at random (seeded by
# CRASH_SEED; scripts/crash-campaign runs many, outside CI): the client
# alone, or with a member killed before it comes back, or a member killed
# under the writes, or every process of the pool at once; each round is
# checked like the two above.
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

need fio
need_bins

pool_up --members 3 --size 256M

writes_of() { member_field "$1" writes; }
writes_at_least() { local n; n=$(writes_of "$1") && [[ -n $n ]] && ((n >= $2)); }

# fio_args NAME OFFSET [URI]: one 64 MiB random-write job with crc32c headers.
fio_args() {
	echo --name="$1" --ioengine=nbd --uri="${3:-$URI}" --rw=randwrite --bs=4k --iodepth=32 \
		--offset="$2" --size=64M --randrepeat=1 --verify=crc32c
}

fio_gone() { ! pid_alive "$1"; }

# fio 3.33's nbd engine, when the connection is reset rather than closed
# (the killed server left requests unread), may poll the dead libnbd handle
# ("nothing to poll for in state DEAD") forever, ignoring SIGTERM and
# logging each try, and saves no verify state. Under load that was most
# runs (CI, 2026-12-06: three tries in a row). So fio talks to nbd-brmr
# through unix_relay.py, which turns the reset into an orderly end of
# stream; replies still come only from nbd-brmr. If fio spins all the same
# it gets 30 s, then SIGKILL, and the run is tried again: without a verify
# state it proves nothing.
fio_stuck() { grep -q 'nothing to poll for in state DEAD' "$WORK/$1.write.out"; }
is_socket() { [[ -S $1 ]]; }

# crash_writes NAME OFFSET: run the job, SIGKILL the client in its middle.
# Leaves the offsets of the writes that failed in $WORK/NAME.failed.
# Returns 1 if fio got stuck and saved no verify state; the client is down then.
# $WATCH: the member whose write count paces the kill (default 1); $AFTER:
# the writes it sees before (default 4000); $UNDER: a member to SIGKILL once
# half of those went by (none by default).
WATCH=1 AFTER=4000 UNDER=""
crash_writes() {
	local name=$1 off=$2 base fio before relay="$WORK/$1.relay.sock" relay_pid
	before=$(writes_of "$WATCH")
	rm -f "$WORK/local-$name-0-verify.state" "$relay"
	"$PY" "$(dirname "$0")/unix_relay.py" "$relay" "${URI#*socket=}" >"$WORK/$name.relay.out" 2>&1 &
	relay_pid=$!
	wait_for 10 is_socket "$relay" || fail "$name: the relay did not start: $(cat "$WORK/$name.relay.out")"
	# shellcheck disable=SC2046 # fio_args is a word list
	# (Its output is capped: see fio_stuck.)
	fio $(fio_args "$name" "$off" "nbd+unix:///?socket=$relay") --rate_iops=3000 --do_verify=0 \
		--verify_state_save=1 \
		--write_lat_log="$WORK/$name" --log_offset=1 \
		> >(head -c 16000000 >"$WORK/$name.write.out") 2>&1 &
	fio=$!
	if [[ -n $UNDER ]]; then
		wait_for 60 writes_at_least "$WATCH" $((before + AFTER / 2)) || fail "$name: writes did not start"
		"$POOL" kill --dir "$PDIR" "$UNDER"
		UNDER="" # (a second try finds it dead)
	fi
	wait_for 60 writes_at_least "$WATCH" $((before + AFTER)) || fail "$name: writes did not start"
	pid_alive "$fio" || fail "$name: fio ended before the kill; the test would prove nothing"
	"$POOL" kill --dir "$PDIR" client
	wait_for 30 fio_gone "$fio" || kill -9 "$fio" 2>/dev/null || true
	wait "$fio" && fail "$name: fio did not notice the client's death"
	kill "$relay_pid" 2>/dev/null || true
	if [[ ! -s $WORK/local-$name-0-verify.state ]] && fio_stuck "$name"; then
		log "$name: fio's nbd engine spun on the dead connection (reset, not closed); again"
		return 1
	fi
	# Writes that completed with an error; those still in flight when fio
	# gave up are in its verify state, and it skips them.
	{ grep -o 'write offset=[0-9]*' "$WORK/$name.write.out" || true; } | cut -d= -f2 | sort -u \
		>"$WORK/$name.failed"
	base=$(wc -l <"$WORK/$name.failed")
	log "$name: client killed; fio saw $base writes fail (never acknowledged)"
	[[ -s $WORK/local-$name-0-verify.state ]] || fail "$name: fio saved no verify state"
}

# crash_round NAME OFFSET: crash_writes until fio notices the client's death
# (3 tries); the client starts again (and reconciles) between tries.
crash_round() {
	local try
	for try in 1 2 3; do
		crash_writes "$1" "$2" && return 0
		"$POOL" start --dir "$PDIR" client
		URI=$("$POOL" uri --dir "$PDIR")
	done
	fail "$1: fio got stuck on the dead connection $try times"
}

# verify_acked NAME OFFSET [MIN]: every acknowledged write of the job reads
# back, and at least MIN (default 4000) were.
verify_acked() {
	local name=$1 off=$2 min=${3:-4000}
	# shellcheck disable=SC2046 # fio_args is a word list
	fio $(fio_args "$name" "$off") --verify_only=1 --verify_state_load=1 --verify_state_save=0 --verify_fatal=0 \
		--verify_dump=0 --output-format=json --output="$WORK/$name.verify.json" \
		>"$WORK/$name.verify.out" 2>&1 || true
	"$PY" - "$WORK/$name.verify.json" "$WORK/$name.verify.out" "$WORK/${name}_clat.1.log" "$min" <<'EOF' ||
import json, re, sys
text = open(sys.argv[1]).read()
job = json.loads(text[text.index("{"):])["jobs"][0]
bad = {int(m) for m in re.findall(r"verify: bad .* offset (\d+), length", open(sys.argv[2]).read())}
# time, latency, direction, block size, offset: one line per completed write
acked = set()
for line in open(sys.argv[3]):
    f = [x.strip() for x in line.split(",")]
    if len(f) >= 5 and f[2] == "1":
        acked.add(int(f[4]))
reads = job["read"]["total_ios"]
if reads < int(sys.argv[4]) or len(acked) < int(sys.argv[4]):
    sys.exit("only %d blocks verified, %d writes acknowledged" % (reads, len(acked)))
lost = sorted(bad & acked)
if lost:
    sys.exit("%d acknowledged writes did not read back, e.g. at %s" % (len(lost), lost[:5]))
print("%d blocks verified, %d writes acknowledged; %d differ, none of them acknowledged"
      % (reads, len(acked), len(bad)))
EOF
		fail "$name: an acknowledged write was lost"
}

log "round 1: the client dies under fio"
crash_round crash1 0
"$POOL" start --dir "$PDIR" client
URI=$("$POOL" uri --dir "$PDIR")
grep -q "exited uncleanly" "$PDIR"/m*.log || fail "no member reconciled the crashed writer's activity log"
grep -q "members converge on this one" "$PDIR/client.log" ||
	fail "the new client did not reconcile the members before I/O"
verify_acked crash1 0
wait_for 60 healed 3 || fail "the pool did not heal after the client crash"
"$POOL" compare --dir "$PDIR" 1 2 3 || fail "members differ after the client crash"
for id in 1 2 3; do
	[[ $(member_field "$id" resync_bytes) == 0 ]] || fail "the client carried resync bytes"
done

log "round 2: the client dies under fio, then member 3 dies too"
crash_round crash2 64M
"$POOL" kill --dir "$PDIR" 3
# Members 1 and 2 cannot show that member 3 holds nothing they lack (a
# member cannot tell by itself that it missed writes), so the new writer
# does not open without it unless the operator gives it up.
! "$POOL" start --dir "$PDIR" client --timeout 60 >"$WORK/start-without-3.out" 2>&1 ||
	fail "the client opened without member 3, which may hold writes the others lack"
grep -q "not opened: no answer from member 3, which may hold writes the others lack" "$PDIR/client.log" ||
	fail "the refused open did not say why: $(tail -n 3 "$PDIR/client.log")"
"$POOL" start --dir "$PDIR" client --open-without 3
URI=$("$POOL" uri --dir "$PDIR")
verify_acked crash2 64M
"$POOL" start --dir "$PDIR" 3
wait_for 60 healed 3 || fail "the pool did not heal after member 3 came back"
"$POOL" compare --dir "$PDIR" 1 2 3 || fail "members differ after the client and member 3 crashed"
verify_acked crash1 0

ROUNDS=${CRASH_ROUNDS:-0} SEED=${CRASH_SEED:-$$}
[[ $ROUNDS =~ ^[0-9]+$ && $SEED =~ ^[0-9]+$ ]] || fail "CRASH_ROUNDS and CRASH_SEED must be numbers"
((ROUNDS == 0)) || log "$ROUNDS rounds more, faults drawn with CRASH_SEED=$SEED"
RANDOM=$SEED
for ((r = 1; r <= ROUNDS; r++)); do
	name=round$r off=$(((r % 4) * 64))M victim=$((1 + RANDOM % 3))
	WATCH=$((victim % 3 + 1)) AFTER=$((1000 + RANDOM % 8000)) UNDER=""
	fault=$((RANDOM % 4))
	case $fault in
	0) log "round $r: the client dies after $AFTER writes" ;;
	1) log "round $r: the client dies after $AFTER writes, member $victim before it returns" ;;
	2) log "round $r: member $victim dies under the writes, the client after $AFTER"
	   UNDER=$victim ;;
	3) log "round $r: the client dies after $AFTER writes, then every member" ;;
	esac
	# fio's verify_only checks a block's offset and checksum, not which run
	# wrote it: an earlier round's block where a write got lost would pass.
	nbdsh -u "$URI" -c "h.zero(64 << 20, ${off%M} << 20)" || fail "round $r: zeroing $off failed"
	crash_round "$name" "$off"
	case $fault in
	1) "$POOL" kill --dir "$PDIR" "$victim" ;;
	3) for id in 1 2 3; do "$POOL" kill --dir "$PDIR" "$id"; done
	   for id in 1 2 3; do "$POOL" start --dir "$PDIR" "$id"; done ;;
	esac
	# Away when the client returns, the victim is given up by the operator
	# (round 2 shows the open waits otherwise); it returns below.
	if ((fault == 1 || fault == 2)); then
		"$POOL" start --dir "$PDIR" client --open-without "$victim"
	else
		"$POOL" start --dir "$PDIR" client
	fi
	URI=$("$POOL" uri --dir "$PDIR")
	verify_acked "$name" "$off" $((AFTER / 2))
	((fault != 1 && fault != 2)) || "$POOL" start --dir "$PDIR" "$victim"
	wait_for 60 healed 3 || fail "round $r: the pool did not heal"
	"$POOL" compare --dir "$PDIR" 1 2 3 || fail "round $r: members differ"
done
log "ok"
