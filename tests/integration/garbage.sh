#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# garbage: hostile bytes at every socket of a running pool. Random data and
# a truncated RMR header at a member's TCP port, a flood of connect+close,
# random bytes at the control sockets, then nbd_malformed.py at nbd-brmr's
# NBD socket. Afterwards every process must still run, every member must
# still be NORMAL, and data must still round-trip.
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

need nbdcopy cmp timeout
need_bins
MALFORMED=$SRC_DIR/tests/integration/nbd_malformed.py
[[ -f $MALFORMED ]] || fail "$MALFORMED is missing"

pool_up --members 3 --size 256M
# shellcheck source=/dev/null
PORT=$(. "$PDIR/m1.env" && echo "$PORT")
PIDS=$(cat "$PDIR/client.pid" "$PDIR"/m[0-9]*.pid)
log "member 1 listens on 127.0.0.1:$PORT; processes: $(echo "$PIDS" | tr '\n' ' ')"

all_alive() {
	local p
	for p in $PIDS; do
		pid_alive "$p" || { log "process $p is gone"; return 1; }
	done
}

log "1 MiB of random bytes at member 1's port"
# The member may close early (EPIPE/ECONNRESET): only its survival matters.
# shellcheck disable=SC2016 # $1 is for the inner shell
timeout 10 bash -c 'head -c 1M /dev/urandom >"/dev/tcp/127.0.0.1/$1"' _ "$PORT" 2>/dev/null || true

log "truncated and bogus RMR headers, then 300 quick connect+close"
"$PY" - "$PORT" "$PDIR" <<'EOF'
import os, socket, struct, sys, time
port, pdir = int(sys.argv[1]), sys.argv[2]

def send(data, linger=0.05):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=2)
        s.sendall(data)
        time.sleep(linger)
        s.close()
    except OSError as e:
        print("  (connection: %s)" % e)

# magic "RMR1", version 1, type HELLO, then nothing more
half = struct.pack("<IHH", 0x31524D52, 1, 1) + bytes(20)
send(half)
# a whole 80-byte header announcing a 4 GiB payload, then close
hdr = struct.pack("<IHH16sHHIIIQQIIQiI", 0x31524D52, 1, 1, bytes(16), 0, 0, 0, 0, 0,
                  0, 0, 0, 0xFFFFFFFF, 0, 0, 0)
send(hdr)
# right magic, unknown version and type
send(struct.pack("<IHH", 0x31524D52, 0xFFFF, 0xFFFF) + os.urandom(72))
# a libfabric-tcp-like control header full of garbage
send(bytes([3, 1, 0, 0]) + os.urandom(300))
# byte by byte, slowly
try:
    s = socket.create_connection(("127.0.0.1", port), timeout=2)
    for b in half:
        s.send(bytes([b]))
    s.close()
except OSError as e:
    print("  (slow connection: %s)" % e)
for _ in range(300):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except OSError as e:
        print("  (connect: %s)" % e)
        break

# control sockets: random bytes, a half line, a very long line
for name in sorted(os.listdir(pdir)):
    if not name.endswith(".ctl"):
        continue
    for data in (os.urandom(4096), b"stat", b"x" * 100000 + b"\n"):
        try:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(2)
            s.connect(os.path.join(pdir, name))
            s.sendall(data)
            s.close()
        except OSError as e:
            print("  (%s: %s)" % (name, e))
print("garbage sent")
EOF
all_alive || fail "a process died from garbage at member 1 or a control socket"
"$POOL" wait --dir "$PDIR" --state normal --timeout 15 ||
	fail "members are not all NORMAL after the garbage"

# A control client that trickles a byte at a time, never a line end: the
# daemon reads one command line within its control timeout (1-2 s), so it
# answers a status while the trickler still trickles (it did not, when
# each byte restarted the timeout: 255 bytes took minutes).
log "a trickling control client does not hold nbd-brmr or a member"
for ctl in client.ctl m1.ctl; do
	"$PY" -c '
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
end = time.monotonic() + 40
while time.monotonic() < end:
    try:
        s.send(b"s")
    except OSError:
        pass
    time.sleep(0.3)
' "$PDIR/$ctl" &
	trickler=$!
	sleep 1
	"$BRMRCTL" status --socket "$PDIR/$ctl" >"$WORK/trickle-status.out" 2>&1 ||
		fail "status through $ctl failed while a client trickled: $(cat "$WORK/trickle-status.out")"
	pid_alive "$trickler" || fail "the trickler ended before the status came back: the test would prove nothing"
	kill "$trickler" 2>/dev/null
	wait "$trickler" 2>/dev/null || true
done

log "nbd_malformed.py against nbd-brmr's socket"
"$PY" "$MALFORMED" --socket "$PDIR/nbd.sock" || fail "nbd_malformed.py failed"
all_alive || fail "a process died from malformed NBD traffic"

log "nbdcopy round trip still works"
random_file "$WORK/rand.bin" 32
nbdcopy_roundtrip "$WORK/rand.bin"
"$POOL" wait --dir "$PDIR" --state normal --timeout 5 || fail "members are not all NORMAL"
"$POOL" compare --dir "$PDIR" || fail "members' data regions differ"
all_alive || fail "a process died"
log "PASS"
