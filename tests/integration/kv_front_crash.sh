#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# kv_front_crash: the key-value store's front (the pool's writer) is
# SIGKILLed while redis-benchmark writes through it, with writes in flight
# to the members. 2000 keys written and acknowledged before must survive;
# the front starts again, the members settle the writes of unknown outcome
# among themselves (the crashed writer's activity log), and every member
# ends with the same digest. The new front serves reads and writes at once.
# shellcheck source-path=SCRIPTDIR source=kv_lib.sh
. "$(dirname "$0")/kv_lib.sh"

kv_up --members 3 --buckets 64

log "2000 keys, each SET acknowledged"
for ((i = 0; i < 2000; i++)); do
	printf 'SET known:%d value-%d-%d\n' "$i" "$i" $((i * 7919 % 10007))
done | timeout 60 redis-cli -p "$PORT" >"$WORK/set.out" || fail "redis-cli SETs failed"
[[ $(grep -c '^OK$' "$WORK/set.out") == 2000 ]] ||
	fail "not every SET was acknowledged: $(sort "$WORK/set.out" | uniq -c | head -3)"

log "redis-benchmark SETs and LPUSHes over 10000 keys; SIGKILL the front under it"
W0=$(writes_of 1)
bench_start -t set,lpush -r 10000 -P 16 -c 20
wait_for 60 writes_at_least 1 $((W0 + 1000)) ||
	fail "the benchmark's writes did not reach member 1: $(writes_of 1) writes; $(tail -c 300 "$WORK/bench.out")"
"$KV" kill --dir "$KDIR" front
kill "$BENCH" 2>/dev/null || true
wait "$BENCH" 2>/dev/null || true

log "the front starts again"
"$KV" start --dir "$KDIR" front
wait_for 60 healed 3 || fail "the pool did not heal after the front's restart: members " \
	"$(info_member 1 state) $(info_member 2 state) $(info_member 3 state)"
grep -q "the last writer exited uncleanly; members converge" "$KDIR/front.log" ||
	fail "the new front did not take the pool as left by a crashed writer"
check_digests_equal 3

log "every acknowledged key reads back"
for ((i = 0; i < 2000; i++)); do
	printf 'GET known:%d\n' "$i"
done | timeout 60 redis-cli -p "$PORT" >"$WORK/get.out" || fail "redis-cli GETs failed"
for ((i = 0; i < 2000; i++)); do
	printf 'value-%d-%d\n' "$i" $((i * 7919 % 10007))
done | cmp -s - "$WORK/get.out" || fail "an acknowledged key is lost or wrong: $(
	diff <(for ((i = 0; i < 2000; i++)); do printf 'value-%d-%d\n' "$i" $((i * 7919 % 10007)); done) \
		"$WORK/get.out" | head -4)"

expect_reply OK set after-crash yes
expect_reply '"yes"' get after-crash
check_digests_equal 3
log "PASS"
