# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
#
# Helpers of the kvstore integration tests (kv_*.sh). Source it first thing:
#   . "$(dirname "$0")/kv_lib.sh"
# It takes log, fail, skip, need, wait_for, pid_alive, ctl and WORK from
# lib.sh, and installs its own EXIT trap: it stops the kvstore pool (and any
# background job), prints the front's INFO and every log tail on failure,
# fails the test on a sanitizer report in any process's log, and removes WORK.

# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

KV=$SRC_DIR/examples/kvstore/kv-local
KDIR=""
PORT=""

kv_cleanup() {
	local rc=$? j f
	trap - EXIT
	for j in $(jobs -p); do
		kill "$j" 2>/dev/null || true
	done
	if [[ -n $KDIR && -f $KDIR/pool.env ]]; then
		if ((rc != 0 && rc != 77)); then
			log "failed (exit $rc); INFO replication and log tails of $KDIR:"
			timeout 5 redis-cli -p "$PORT" info replication 2>&1 | sed 's/^/    /' || true
			for f in "$KDIR"/*.log; do
				[[ -s $f ]] || continue
				echo "---- $f"
				tail -n 30 "$f"
			done
		fi
		"$KV" down --dir "$KDIR" || true
		if grep -l -E 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$KDIR"/*.log \
			>/dev/null 2>&1; then
			log "sanitizer reports in $KDIR:"
			grep -A12 -E 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$KDIR"/*.log |
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
trap kv_cleanup EXIT

need redis-cli redis-benchmark
for b in kvstore-member kvstore-front; do
	[[ -x $BUILD_DIR/examples/kvstore/$b ]] || fail "$BUILD_DIR/examples/kvstore/$b was not built"
done
# shellcheck disable=SC2034 # used by the tests that source this file
MEMBER_BIN=$BUILD_DIR/examples/kvstore/kvstore-member

# kv_up ARGS...: kv-local up in $WORK/kv; sets KDIR and PORT.
kv_up() {
	local out
	KDIR=$WORK/kv
	out=$("$KV" up --dir "$KDIR" --build "$BUILD_DIR" "$@") || fail "kv-local up $* failed"
	PORT=$(sed -n 's/^FRONT_PORT=//p' <<<"$out")
	[[ -n $PORT ]] || fail "kv-local up printed no FRONT_PORT: $out"
	log "pool up: $* -> front on 127.0.0.1:$PORT"
}

# cli ARGS...: one command through redis-cli, typed output ("(integer) 1", "(nil)").
cli() { timeout 20 redis-cli --no-raw -p "$PORT" "$@"; }

# reply_is WANT ARGS...: the command's reply is exactly WANT.
reply_is() {
	local want=$1 got
	shift
	got=$(cli "$@" 2>&1) && [[ $got == "$want" ]]
}

# expect_reply WANT ARGS...: the command's reply must be exactly WANT.
expect_reply() {
	local want=$1 got
	shift
	got=$(cli "$@" 2>&1) || fail "redis-cli $* failed: $got"
	[[ $got == "$want" ]] || fail "$*: expected '$want', got '$got'"
}

# info_member ID FIELD: FIELD of member ID in the front's INFO replication.
info_member() {
	cli info replication | tr -d '\r' | sed -n "s/^member[0-9]*:id=$1,//p" | tr ',' '\n' |
		sed -n "s/^$2=//p"
}

member_state_is() { [[ $(info_member "$1" state) == "$2" ]]; }

# member_json ID EXPR: a value from member ID's own status (its control
# socket), EXPR a Python expression over `p`, its pool, e.g. 'p["writes"]'.
member_json() {
	ctl "$KDIR/m$1.ctl" "status json" | "$PY" -c '
import json, sys
p = json.load(sys.stdin)["pools"][0]
print(eval(sys.argv[1]))
' "$2"
}

# dirty_for ID ON: buckets member ON records as missed by member ID.
dirty_for() { member_json "$2" "p[\"dirty_chunks\"].get(\"$1\", 0)"; }

# healed N: the front holds members 1..N normal, and none of them records a
# dirty bucket for anyone or still resyncs.
healed() {
	local id
	for ((id = 1; id <= $1; id++)); do
		member_state_is "$id" normal || return 1
		[[ $(member_json "$id" 'sum(p["dirty_chunks"].values()) + p["resync"]["running"] + p["resync"]["waiting"]') == 0 ]] ||
			return 1
	done
}

# digest ID: member ID's digest through the front ("HEX keys=N").
digest() { cli kvdigest "$1" | tr -d '"'; }

# check_digests_equal N: members 1..N hold the same data.
check_digests_equal() {
	local id d first
	first=$(digest 1)
	[[ $first =~ ^[0-9a-f]{64}\ keys=[0-9]+$ ]] || fail "member 1 gives no digest: $first"
	for ((id = 2; id <= $1; id++)); do
		d=$(digest "$id")
		[[ $d == "$first" ]] || fail "member $id's digest '$d' differs from member 1's '$first'"
	done
	log "members 1..$1 hold the same data: $first"
}

# bench_start ARGS...: redis-benchmark ARGS in a loop, in the background; sets BENCH.
bench_start() {
	redis-benchmark -p "$PORT" -l -q "$@" >"$WORK/bench.out" 2>&1 &
	BENCH=$!
}

# bench_stop: stop the background benchmark; it must not have seen an error.
bench_stop() {
	kill "$BENCH" 2>/dev/null || true
	wait "$BENCH" 2>/dev/null || true
	if grep -q -i 'error' "$WORK/bench.out"; then
		fail "redis-benchmark saw errors: $(tr '\r' '\n' <"$WORK/bench.out" | grep -i error | head -3)"
	fi
}

# writes_of ID: writes the front counts for member ID.
writes_of() { info_member "$1" writes; }
writes_at_least() { local n; n=$(writes_of "$1") && [[ -n $n ]] && ((n >= $2)); }
