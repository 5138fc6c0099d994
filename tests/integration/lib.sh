# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
#
# Shared helpers of the integration tests. Source it first thing:
#   . "$(dirname "$0")/lib.sh"
# It sets BUILD_DIR, SRC_DIR, POOL (scripts/local-pool) and WORK (a private
# directory), and installs an EXIT trap that takes the pool down and removes
# WORK, on success and on failure alike. Exit 77 means "skipped".

set -euo pipefail

SRC_DIR=${SRC_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
BUILD_DIR=${BUILD_DIR:-$SRC_DIR/build}
POOL=$SRC_DIR/scripts/local-pool
TEST=$(basename "$0" .sh)
# Debian's interpreter has the nbd module; a pyenv python3 first in PATH has not.
PY=/usr/bin/python3
[[ -x $PY ]] || PY=python3
export BUILD_DIR SRC_DIR

T0=$SECONDS
PDIR=""
KEEP=${KEEP:-}

log() { printf '[%s +%ds] %s\n' "$TEST" $((SECONDS - T0)) "$*"; }
FAIL_MSG=""
fail() {
	FAIL_MSG=$(printf '[%s +%ds] FAIL: %s' "$TEST" $((SECONDS - T0)) "$*")
	printf '%s\n' "$FAIL_MSG" >&2
	exit 1
}
skip() {
	printf '[%s] SKIP: %s\n' "$TEST" "$*"
	exit 77
}

# need TOOL...: skip the test when a client tool is truly missing.
need() {
	local t
	for t in "$@"; do
		command -v "$t" >/dev/null 2>&1 || skip "$t is not installed"
	done
}

need_bins() {
	local b
	for b in tools/brmrctl tools/brmr-server examples/nbd-brmr/nbd-brmr; do
		[[ -x $BUILD_DIR/$b ]] || fail "$BUILD_DIR/$b was not built"
	done
	BRMRCTL=$BUILD_DIR/tools/brmrctl
	# shellcheck disable=SC2034 # used by the tests that source this file
	SERVER=$BUILD_DIR/tools/brmr-server
	# shellcheck disable=SC2034
	CLIENT=$BUILD_DIR/examples/nbd-brmr/nbd-brmr
}

# wait_for TIMEOUT_SEC CMD...: poll CMD every 0.1 s until it succeeds;
# non-zero after the timeout.
wait_for() {
	local timeout=$1 end
	shift
	end=$((SECONDS + timeout))
	while ! "$@"; do
		((SECONDS < end)) || return 1
		sleep 0.1
	done
}

pid_alive() {
	local stat
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	stat=${stat##*) }
	[[ ${stat%% *} != [ZX] ]]
}

# dump_stacks PIDFILE...: each live process's threads, innermost frames
# first (gdb, when installed), one line a thread.
dump_stacks() {
	local f pid
	command -v gdb >/dev/null || return 0
	for f in "$@"; do
		pid=$(cat "$f" 2>/dev/null) || continue
		[[ $pid =~ ^[0-9]+$ && -d /proc/$pid ]] || continue
		echo "---- threads of $(basename "$f" .pid) (pid $pid), innermost frame first"
		timeout 30 gdb -p "$pid" -batch -nx -ex 'set pagination off' \
			-ex 'thread apply all bt 12' 2>/dev/null |
			awk '/^Thread /{if (t) print t; n = $NF; gsub(/[":)]/, "", n); t = n ":"; next}
			     /^#[0-9]+ /{f = ($2 ~ /^0x/) ? $4 : $2
				 if (f !~ /^(__|\?\?|start_thread|clone)/) t = t " " f}
			     END{if (t) print t}' | sort | uniq -c || true
	done
}

cleanup() {
	local rc=$? j
	trap - EXIT
	# Background clients (fio, nbdsh) of this test first; what ignores
	# SIGTERM for 2 s gets SIGKILL (fio stuck on a dead connection does).
	for j in $(jobs -p); do
		kill "$j" 2>/dev/null || true
		kill -CONT "$j" 2>/dev/null || true # a stopped one takes the signal now
	done
	for j in $(jobs -p); do
		wait_for 2 eval '! pid_alive '"$j" || kill -9 "$j" 2>/dev/null || true
	done
	if [[ -n $PDIR && -d $PDIR ]]; then
		if ((rc != 0 && rc != 77)); then
			log "failed (exit $rc); status and log tails of $PDIR:"
			"$POOL" status --dir "$PDIR" 2>&1 | sed 's/^/    /' || true
			for f in "$PDIR"/*.log; do
				[[ -s $f ]] || continue
				# Every state change and failure (the tail may not reach back to them).
				if grep -q -E ' -> |failed|refused|timed out' "$f"; then
					echo "---- $f: state changes and failures (the first 60)"
					grep -E ' -> |failed|refused|timed out' "$f" | head -n 60
				fi
				echo "---- $f"
				tail -n 30 "$f"
			done
			# A daemon that stopped answering shows where it waits.
			dump_stacks "$PDIR"/*.pid
			[[ -z $FAIL_MSG ]] || printf '%s\n' "$FAIL_MSG"
		fi
		"$POOL" down --dir "$PDIR" || true
		# In a sanitizer build, a report from any process fails the test.
		if grep -l -E 'ERROR: (Address|Leak)Sanitizer|runtime error:' \
			"$PDIR"/*.log >/dev/null 2>&1; then
			log "sanitizer reports in $PDIR:"
			grep -A12 -E 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$PDIR"/*.log |
				head -n 60 | sed 's/^/    /'
			((rc != 0 && rc != 77)) || rc=1
		fi
	fi
	if [[ -n $KEEP ]]; then
		log "KEEP set: leaving $WORK"
	else
		rm -rf -- "$WORK"
	fi
	exit "$rc"
}

WORK=$(mktemp -d "${TMPDIR:-/tmp}/brmr-it-$TEST.XXXXXX")
trap cleanup EXIT

# libfabric's tcp provider (1.17) sometimes leaks 376 bytes (336 + 40) in a
# member, allocated in its listener's path right after accept() (both inside
# libfabric.so, no librmr frame; a connection half accepted when the process
# stops, it seems; seen in kv_* and membership.sh): left out of the leak
# check. Any other leak still fails the test.
printf 'leak:libfabric.so\n' >"$WORK/lsan.supp"
export LSAN_OPTIONS="suppressions=$WORK/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
# Clients drop files in the working directory (fio's verify state): keep
# them in WORK.
cd "$WORK"
trap 'exit 143' TERM
trap 'exit 130' INT

# pool_up ARGS...: local-pool up in $WORK/pool; sets PDIR and URI.
pool_up() {
	local out
	PDIR=$WORK/pool
	out=$("$POOL" up --dir "$PDIR" --build "$BUILD_DIR" "$@") || fail "local-pool up $* failed"
	URI=$(sed -n 's/^NBD_URI=//p' <<<"$out")
	[[ -n $URI ]] || fail "local-pool up printed no NBD_URI: $out"
	log "pool up: $* -> $URI"
}

nbdsh() { PATH=/usr/bin:$PATH command nbdsh "$@"; }

# random_octet: a third octet for a test network of its own (10.23X.N.0/24),
# at random from BRMR_TEST_SUBNETS=LOW-HIGH (default 2-251): suites run side
# by side (CI) each get their own range, as they get their ports
# (BRMR_PORT_RANGE, scripts/ports.sh).
random_octet() {
	local r=${BRMR_TEST_SUBNETS:-2-251}
	if ! [[ $r =~ ^([0-9]+)-([0-9]+)$ ]] || ((BASH_REMATCH[1] < 1 ||
		BASH_REMATCH[1] > BASH_REMATCH[2] || BASH_REMATCH[2] > 254)); then
		fail "BRMR_TEST_SUBNETS='$r' is not LOW-HIGH within 1-254"
	fi
	echo $((BASH_REMATCH[1] + RANDOM % (BASH_REMATCH[2] - BASH_REMATCH[1] + 1)))
}

# md5 of LEN bytes at OFF of the export.
nbd_md5() {
	local off=$1 len=$2
	nbdsh -u "$URI" -c "
import hashlib
m = hashlib.md5()
pos, end = $off, $off + $len
while pos < end:
    n = min(8 << 20, end - pos)
    m.update(h.pread(n, pos))
    pos += n
print(m.hexdigest())
"
}

# Random file of SIZE MiB.
random_file() {
	head -c "$(($2 << 20))" /dev/urandom >"$1"
}

# nbdcopy FILE in, back out, and compare byte for byte.
nbdcopy_roundtrip() {
	local f=$1 back=$WORK/back.$RANDOM
	nbdcopy --flush "$f" "$URI" || fail "nbdcopy $f -> $URI failed"
	nbdcopy "$URI" "$back" || fail "nbdcopy $URI -> $back failed"
	# The export is larger than the file: compare the file's length only.
	cmp -n "$(stat -c %s "$f")" "$f" "$back" || fail "data read back differs from $f"
	rm -f "$back"
}

# fio_check JSON: fio's JSON must show no job error.
fio_check() {
	"$PY" - "$1" <<'EOF'
import json, sys
text = open(sys.argv[1]).read()
doc = json.loads(text[text.index("{"):])
bad = 0
for j in doc.get("jobs", []):
    err = j.get("error", 0)
    w, r = j.get("write", {}), j.get("read", {})
    print("fio job %s: error=%s write %d ios %.0f IOPS, read %d ios %.0f IOPS"
          % (j.get("jobname"), err, w.get("total_ios", 0), w.get("iops", 0),
             r.get("total_ios", 0), r.get("iops", 0)))
    if err:
        bad = 1
sys.exit(bad)
EOF
}

# member_field ID FIELD: a field of member ID in the client's status ("state",
# "writes", ...). The status helpers read the control sockets of a local-pool
# directory, PDIR, or those of CTL_DIR (client.ctl, mN.ctl) when set.
member_field() {
	local j # brmrctl says why it failed; no JSON traceback after it
	j=$("$BRMRCTL" status --socket "${CTL_DIR:-$PDIR}/client.ctl" --json) || return 1
	"$PY" -c '
import json, sys
for m in json.load(sys.stdin)["members"]:
    if str(m.get("id")) == sys.argv[1]:
        print(m.get(sys.argv[2], ""))
' "$1" "$2" <<<"$j"
}

# no_inflight ID: the client has no request in flight to member ID.
no_inflight() { [[ $(member_field "$1" inflight) == 0 ]]; }

# member_state ID: the client's view of member ID ("normal", "failed", ...).
member_state() { member_field "$1" state; }

# state_in ID STATES: member ID is in one of the comma-separated STATES.
state_in() { local s; s=$(member_state "$1") && [[ ",$2," == *",$s,"* ]]; }

# server_field ID EXPR: a value from member ID's own status (its first pool),
# EXPR a Python expression over `p`, e.g. 'p["resync"]["bytes"]'.
server_field() {
	local j
	j=$("$BRMRCTL" status --socket "${CTL_DIR:-$PDIR}/m$1.ctl" --json) || return 1
	"$PY" -c '
import json, sys
p = json.load(sys.stdin)["pools"][0]
print(eval(sys.argv[1]))
' "$2" <<<"$j"
}

# dirty_for ID ON: chunks member ON records as missed by member ID.
dirty_for() { server_field "$2" "p[\"dirty_chunks\"].get(\"$1\", 0)"; }

# healed N: the client holds members 1..N normal, and no member records a
# dirty chunk for anyone (every resync finished and was told to the peers).
healed() {
	local id
	for ((id = 1; id <= $1; id++)); do
		state_in "$id" normal || return 1
		[[ $(server_field "$id" 'sum(p["dirty_chunks"].values())') == 0 ]] || return 1
	done
}

# check_healed N ID DIRTY: after member ID returned with DIRTY chunks to
# copy, members 1..N hold identical data, the client carried no resync
# bytes, and ID copied at most DIRTY chunks.
check_healed() {
	local n=$1 id=$2 dirty=$3 ids=() i copied chunk max
	for ((i = 1; i <= n; i++)); do ids+=("$i"); done
	"$POOL" compare --dir "$PDIR" "${ids[@]}" || fail "members ${ids[*]} differ after the resync"
	for ((i = 1; i <= n; i++)); do
		[[ $(member_field "$i" resync_bytes) == 0 ]] ||
			fail "the client carried resync bytes for member $i"
	done
	copied=$(server_field "$id" 'p["resync"]["bytes"]')
	chunk=$(server_field "$id" 'p["chunk_size"]')
	max=$((dirty * chunk))
	((copied <= max)) || fail "member $id copied $copied bytes, more than $dirty dirty chunks"
	log "member $id copied $copied bytes for $dirty dirty chunks (at most $max); the client none"
}

# ctl SOCKET LINE: send one line to a control socket, print the answer.
ctl() {
	timeout 10 "$PY" -c '
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
s.sendall(sys.argv[2].encode() + b"\n")
out = b""
while True:
    b = s.recv(4096)
    if not b:
        break
    out += b
sys.stdout.write(out.decode())
' "$@"
}
