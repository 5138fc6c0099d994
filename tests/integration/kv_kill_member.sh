#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# kv_kill_member: SIGKILL member 2 of 3 while redis-benchmark writes, keep
# writing, then restart it while writes go on. The survivors must record the
# buckets it missed; its store, read offline, must differ from theirs (or
# hold a page torn by the kill); back, it takes the dirty maps and copies
# those buckets from a peer (never through the front, whose resync byte
# counters stay 0), copies no more than they hold, and ends with the same
# digest as the others. The benchmark never sees an error.
# shellcheck source-path=SCRIPTDIR source=kv_lib.sh
. "$(dirname "$0")/kv_lib.sh"

# 64 buckets: few enough that every bucket sees writes while member 2 is away.
kv_up --members 3 --buckets 64
BUCKET=$(member_json 1 'p["chunk_size"]')

log "redis-benchmark SETs over 10000 keys, in the background"
bench_start -t set -r 10000 -P 4 -c 20
wait_for 60 writes_at_least 2 3000 || fail "writes did not reach member 2"
pid_alive "$BENCH" || fail "redis-benchmark ended early: $(cat "$WORK/bench.out")"
log "SIGKILL member 2 with $(writes_of 2) writes sent to it"
"$KV" kill --dir "$KDIR" 2
wait_for 15 member_state_is 2 failed || fail "the front shows member 2 as '$(info_member 2 state)'"
w1=$(writes_of 1)
wait_for 60 writes_at_least 1 $((w1 + 5000)) || fail "writes stopped after member 2 died"
pid_alive "$BENCH" || fail "redis-benchmark ended while member 2 was down"
bench_stop
log "benchmark stopped without an error; $(writes_of 1) writes on member 1"

for id in 1 3; do
	d=$(dirty_for 2 "$id")
	((d > 0 && d <= 64)) || fail "member $id records $d buckets missed by member 2, expected 1..64"
done
DIRTY=$(dirty_for 2 1)
log "members 1 and 3 record $DIRTY buckets missed by member 2"
check_digests_equal 1
[[ $(digest 1) == "$(digest 3)" ]] || fail "the survivors differ: $(digest 1) / $(digest 3)"
LIVE=$(digest 1)
# Teeth: member 2's own store must really be behind.
rc=0
offline=$("$KV" digest --dir "$KDIR" 2 2>"$WORK/offline.err") || rc=$?
if ((rc == 3)); then
	log "member 2's store holds a page torn by the kill: $(cat "$WORK/offline.err")"
elif ((rc == 0)); then
	[[ ${offline%% *} != "${LIVE%% *}" ]] || fail "member 2's store already matches the survivors; the resync check would prove nothing"
	log "member 2's store, offline: ${offline%% bucket*}; the survivors: $LIVE"
else
	fail "offline digest of member 2 failed ($rc): $(cat "$WORK/offline.err")"
fi

log "writes go on; member 2 restarts from its stale store"
bench_start -t set,get -r 10000 -P 4 -c 20
"$KV" start --dir "$KDIR" 2
wait_for 60 member_state_is 2 normal || fail "member 2 did not come back: $(info_member 2 state)"
w2=$(writes_of 2)
wait_for 60 writes_at_least 2 $((w2 + 2000)) || fail "member 2 takes no writes since it came back"
bench_stop
wait_for 60 healed 3 || fail "member 2 did not finish its resync"
check_digests_equal 3
for id in 1 2 3; do
	[[ $(info_member "$id" resync_bytes) == 0 ]] || fail "the front carried resync bytes for member $id"
done
copied=$(member_json 2 'p["resync"]["bytes"]')
# Writes went on until member 2 was back: its own count of missed buckets is the bound.
total=$(member_json 2 'p["resync"]["total"]')
((total >= DIRTY)) || fail "member 2 counts $total missed buckets, fewer than the $DIRTY recorded"
((copied > 0)) || fail "member 2 copied nothing from its peers"
((copied <= total * BUCKET)) ||
	fail "member 2 copied $copied bytes, more than its $total missed buckets of $BUCKET bytes"
log "member 2 copied $copied bytes from its peers for $total missed buckets; the front none"
log "PASS"
