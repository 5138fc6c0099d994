#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# kv_basic: a kvstore pool of 3 members and its front on loopback. Every
# command round-trips through redis-cli with the reply Redis gives;
# malformed frames get a RESP error and lose their connection, an oversized
# frame loses its connection, and the other clients are served throughout;
# redis-benchmark -t set,get (plain, pipelined, random keys) runs without an
# error; the members' digests agree; and the data survives a restart of
# every process.
# shellcheck source-path=SCRIPTDIR source=kv_lib.sh
. "$(dirname "$0")/kv_lib.sh"

KV_FRONT_ARGS="--max-frame 64K" kv_up --members 3 --buckets 128

log "every command, with the reply Redis gives"
expect_reply PONG ping
expect_reply '"hello"' ping hello
expect_reply '"a b"' echo "a b"
expect_reply OK select 0
expect_reply "(error) ERR DB index is out of range" select 1
expect_reply OK set k v
expect_reply '"v"' get k
expect_reply "(nil)" get missing
expect_reply "(nil)" set k v2 nx
expect_reply OK set k2 v nx
expect_reply "(nil)" set k3 v xx
expect_reply OK set k v3 xx
expect_reply '"v3"' get k
expect_reply OK set t v ex 1000
expect_reply OK set k v4 keepttl
expect_reply "(error) ERR syntax error" set k v nx xx
expect_reply "(error) ERR invalid expire time in 'set' command" set k v ex 0
expect_reply "(error) ERR value is not an integer or out of range" set k v px abc
expect_reply OK set short v px 1
wait_for 10 reply_is "(nil)" get short || fail "a key set with PX 1 did not expire"
expect_reply "(integer) 3" exists k k2 t
expect_reply "(integer) 0" exists short missing
expect_reply "(integer) 2" del k k2 missing
expect_reply "(integer) 0" exists k
expect_reply "(integer) 1" incr n
expect_reply "(integer) 42" incrby n 41
expect_reply "(integer) 41" decr n
expect_reply "(integer) 31" decrby n 10
expect_reply '"31"' get n
expect_reply OK set s abc
expect_reply "(error) ERR value is not an integer or out of range" incr s
expect_reply OK set big 9223372036854775807
expect_reply "(error) ERR increment or decrement would overflow" incr big
expect_reply OK mset a 1 b 2 c 3
expect_reply $'1) "1"\n2) "2"\n3) "3"\n4) (nil)' mget a b c nope
expect_reply "(error) ERR wrong number of arguments for 'mset' command" mset a 1 b
expect_reply "(error) ERR wrong number of arguments for 'get' command" get
expect_reply "(error) ERR unknown command 'foo', with args beginning with: 'x' " foo x
expect_reply "(integer) 7" dbsize
expect_reply "(integer) 19" command count
cli command info get | grep -q '"get"' || fail "COMMAND INFO get does not describe GET"
cli info replication | grep -q '^members:3' || fail "INFO replication does not list 3 members"
for id in 1 2 3; do
	member_state_is "$id" normal || fail "INFO replication shows member $id as '$(info_member "$id" state)'"
done
check_digests_equal 3
expect_reply OK flushall
expect_reply "(integer) 0" dbsize
expect_reply "(nil)" get a

log "malformed and oversized frames close their own connection only"
"$PY" - "$PORT" <<'EOF' || fail "frame checks failed"
import socket, sys, time
port = int(sys.argv[1])

def conn():
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    return s

def roundtrip(s, data):
    s.sendall(data)
    return s.recv(1024)

def closed_after(s, data):
    """Send data; read until the server closes; return what came."""
    try:
        s.sendall(data)
    except (BrokenPipeError, ConnectionResetError):
        pass
    got = b""
    while True:
        try:
            b = s.recv(65536)
        except ConnectionResetError:
            break  # closed with our bytes unread: a reset, maybe before its error line
        if not b:
            break
        got += b
    return got

bystander = conn()
assert roundtrip(bystander, b"PING\r\n") == b"+PONG\r\n"
# Malformed: the error first, then the connection goes.
for frame, word in ((b"*1\r\n$x\r\n", b"invalid bulk length"),
                    (b"*1\r\n:3\r\n", b"expected '$'"),
                    (b"*zz\r\n", b"invalid multibulk length")):
    got = closed_after(conn(), frame)
    assert got.startswith(b"-ERR Protocol error") and word in got, (frame, got)
# Unknown commands are answered, and the connection stays.
c = conn()
assert roundtrip(c, b"*1\r\n$5\r\nBOGUS\r\n").startswith(b"-ERR unknown command 'BOGUS'")
assert roundtrip(c, b"PING\r\n") == b"+PONG\r\n"
# Oversized (limit 64 KiB): decided on the declared length, the rest never
# read; the connection goes (its error line may be lost to the reset).
got = closed_after(conn(), b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$100000\r\n" + b"x" * 1000)
assert got in (b"", b"-ERR Protocol error: frame larger than the limit\r\n"), got
got = closed_after(conn(), b"PING" + b" x" * 40000)
assert got in (b"", b"-ERR Protocol error: too big inline request\r\n"), got
# QUIT answers and closes: nothing after it on the connection runs.
got = closed_after(conn(), b"SET q 1\r\nQUIT\r\nSET q 2\r\n")
assert got == b"+OK\r\n+OK\r\n", got
# A value at the limit's edge still works.
v = b"y" * 60000
c.sendall(b"*3\r\n$3\r\nSET\r\n$2\r\nbv\r\n$%d\r\n%s\r\n" % (len(v), v))
assert c.recv(100) == b"+OK\r\n"
# Pipelined: 100 commands in one write, 100 answers in order.
c.sendall(b"".join(b"*2\r\n$4\r\nECHO\r\n$%d\r\n%d\r\n" % (len(str(i)), i) for i in range(100)))
want = b"".join(b"$%d\r\n%d\r\n" % (len(str(i)), i) for i in range(100))
got = b""
while len(got) < len(want):
    got += c.recv(65536)
assert got == want
# The bystander never noticed.
assert roundtrip(bystander, b"PING\r\n") == b"+PONG\r\n"
print("frames: malformed and oversized closed, bystander and pipelining fine")
EOF
info=$(cli info stats)
grep -q '^protocol_errors:3' <<<"${info//$'\r'/}" || fail "INFO stats does not count 3 protocol errors: $info"
grep -q '^oversized_frames:2' <<<"${info//$'\r'/}" || fail "INFO stats does not count 2 oversized frames: $info"
expect_reply '"1"' get q

log "redis-benchmark -t set,get against 3 members"
expect_reply OK flushall # the 60 KB value above leaves its bucket no room
for args in "-n 20000" "-n 50000 -P 16" "-n 20000 -r 10000 -P 4"; do
	# shellcheck disable=SC2086 # args is a list of options
	out=$(timeout 120 redis-benchmark -p "$PORT" -t set,get -q $args 2>&1) ||
		fail "redis-benchmark $args failed: $out"
	out=$(tr '\r' '\n' <<<"$out")
	if grep -qi error <<<"$out"; then
		fail "redis-benchmark $args saw errors: $(grep -i error <<<"$out" | head -3)"
	fi
	grep -q '^SET: .* requests per second' <<<"$out" || fail "no SET result for $args: $out"
	grep -q '^GET: .* requests per second' <<<"$out" || fail "no GET result for $args: $out"
	log "redis-benchmark $args: $(grep 'requests per second' <<<"$out" | sed 's/, p50.*//' | tr '\n' ' ')"
done
log "random-key SETs share requests: writes to many buckets go as one"
pool_requests() { cli info stats | tr -d '\r' | sed -n 's/^pool_requests://p'; }
before=$(pool_requests)
out=$(timeout 120 redis-benchmark -p "$PORT" -t set -q -n 20000 -r 100000 -P 16 2>&1) ||
	fail "redis-benchmark of random-key SETs failed: $out"
grep -qi error <<<"$out" && fail "redis-benchmark of random-key SETs saw errors: $out"
requests=$(($(pool_requests) - before))
# Here (128 buckets, 800 SETs outstanding): ~250 requests; ~3200 with one bucket's writes per request.
((requests > 0 && requests <= 1000)) ||
	fail "20000 random-key SETs took $requests pool requests, expected 1..1000"
log "20000 random-key SETs in $requests pool requests"
expect_reply OK mset marker here counter 31
check_digests_equal 3
before=$(digest 1)

log "every process stops and starts again: the data is still there"
"$KV" down --dir "$KDIR"
"$KV" start --dir "$KDIR" 1 2 3 front || fail "the restart failed"
expect_reply $'1) "here"\n2) "31"' mget marker counter
check_digests_equal 3
[[ $(digest 1) == "$before" ]] || fail "the data changed across the restart: $before -> $(digest 1)"
log "PASS"
