#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# kv_auth: the kvstore pool key. kv-local makes one (kvstore-member
# create-key, mode 0600) and every member and the front prove it. A front
# with another key and a front with none cannot open the pool; a member
# with another key claiming member 2's id is refused by member 1, which logs
# the reason and counts it; a key file others may read stops a member at
# start-up; create-key never overwrites. The pool serves throughout.
# shellcheck source-path=SCRIPTDIR source=kv_lib.sh
. "$(dirname "$0")/kv_lib.sh"

kv_up --members 2 --buckets 16
KEY=$KDIR/pool.key
# shellcheck source=/dev/null
. "$KDIR/pool.env"
[[ $(stat -c %a "$KEY") == 600 ]] || fail "the pool key is mode $(stat -c %a "$KEY"), not 600"
[[ $(cli info replication | tr -d '\r' | sed -n 's/^keyed://p') == 1 ]] ||
	fail "the front's INFO does not say it holds a key"
expect_reply OK set before auth

"$MEMBER_BIN" create-key --key-file "$WORK/other.key" >/dev/null || fail "create-key failed"
cmp -s "$WORK/other.key" "$KEY" && fail "two keys came out the same"
cp "$KEY" "$WORK/keep.key"
"$MEMBER_BIN" create-key --key-file "$KEY" >/dev/null 2>&1 && fail "create-key overwrote a key"
cmp -s "$KEY" "$WORK/keep.key" || fail "a refused create-key changed the key"

FRONT_BIN=$BUILD_DIR/examples/kvstore/kvstore-front
m1=$(sed -n 's/^1 //p' "$KDIR/member-ports")
m2=$(sed -n 's/^2 //p' "$KDIR/member-ports")
# A port the kernel just handed out and took back: free, and on loopback.
free_port() { "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
refused_by_1() { ctl "$KDIR/m1.ctl" "status json" | "$PY" -c 'import json, sys; print(json.load(sys.stdin)["auth_refused"])'; }
r0=$(refused_by_1)

log "a front with another key and a front with none: both cannot open the pool"
# Were either let in, it would serve until the timeout: exit 124, not 1.
timeout 40 "$FRONT_BIN" --pool "$NAME" --member "127.0.0.1:$m1" --member "127.0.0.1:$m2" \
	--listen "127.0.0.1:$(free_port)" --key-file "$WORK/other.key" >"$WORK/wrong.log" 2>&1 &
wrong=$!
timeout 40 "$FRONT_BIN" --pool "$NAME" --member "127.0.0.1:$m1" --member "127.0.0.1:$m2" \
	--listen "127.0.0.1:$(free_port)" >"$WORK/none.log" 2>&1 &
none=$!
wrong_rc=0 none_rc=0
wait "$wrong" || wrong_rc=$?
wait "$none" || none_rc=$?
((wrong_rc == 1)) || fail "a front with another key exited $wrong_rc: $(tail -3 "$WORK/wrong.log")"
((none_rc == 1)) || fail "a front without a key exited $none_rc: $(tail -3 "$WORK/none.log")"
grep -q "did not prove the pool key (wrong key)" "$WORK/wrong.log" ||
	fail "the wrong-key front does not say the members failed its key check: $(tail -3 "$WORK/wrong.log")"
grep -q "cannot open the pool" "$WORK/wrong.log" || fail "the wrong-key front gave no reason"
grep -q "it wants a pool key, this client has none" "$WORK/none.log" ||
	fail "the keyless front does not say the pool wants a key: $(tail -3 "$WORK/none.log")"
grep -q "refusing client claiming id 0: no pool key" "$KDIR/m1.log" ||
	fail "member 1 did not log the keyless front's refusal"

log "a member with another key claiming member 2's id"
"$MEMBER_BIN" create --store "$WORK/imp.kv" --pool "$NAME" --uuid "$UUID" --id 2 \
	--buckets 16 >/dev/null || fail "cannot create the impostor's store"
imp_port=$(free_port)
"$MEMBER_BIN" serve --store "$WORK/imp.kv" --listen "127.0.0.1:$imp_port" --peer "1=127.0.0.1:$m1" \
	--key-file "$WORK/other.key" >"$WORK/imp.log" 2>&1 &
imp=$!
wait_for 20 grep -q "refusing member claiming id 2" "$KDIR/m1.log" ||
	fail "member 1 logged no refusal of the impostor: $(tail -5 "$KDIR/m1.log")"
kill "$imp" 2>/dev/null || true
wait "$imp" 2>/dev/null || true
r1=$(refused_by_1)
((r1 >= r0 + 2)) || fail "member 1's auth_refused went from $r0 to $r1, expected 2 or more refusals"
log "member 1 refused $((r1 - r0)) sessions"

log "a key file others may read stops a member at start-up"
cp "$WORK/other.key" "$WORK/open.key"
chmod 644 "$WORK/open.key"
rc=0
"$MEMBER_BIN" serve --store "$WORK/imp.kv" --listen "127.0.0.1:$imp_port" --key-file "$WORK/open.key" \
	>"$WORK/open.log" 2>&1 || rc=$?
((rc == 1)) || fail "a member with a 0644 key exited $rc"
grep -q "mode 0644 lets group or others read it" "$WORK/open.log" ||
	fail "no reason for the refused key file: $(cat "$WORK/open.log")"

log "the pool served throughout"
expect_reply '"auth"' get before
expect_reply OK set after auth
wait_for 20 healed 2 || fail "the pool did not stay healthy"
check_digests_equal 2
