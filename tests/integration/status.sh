#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# status: brmrctl status (text and JSON) against the client's and the
# members' control sockets; brmrctl inspect (the dirty-map area between the
# metadata and the data); a member's control socket switches fault injection
# ("fault on|off") and refuses unknown commands; bad command lines of
# brmrctl, brmr-server and nbd-brmr give a short error and a non-zero exit;
# an unreachable control socket gives a non-zero exit.
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

need timeout
need_bins

pool_up --members 2 --size 128M --name stat0

valid_json() { "$PY" -c 'import json,sys; json.load(sys.stdin)'; }

for sock in client.ctl m1.ctl m2.ctl; do
	log "brmrctl status --socket $sock (text, then --json)"
	out=$(timeout 10 "$BRMRCTL" status --socket "$PDIR/$sock") ||
		fail "brmrctl status --socket $sock failed"
	[[ -n $out ]] || fail "brmrctl status --socket $sock printed nothing"
	grep -q stat0 <<<"$out" || fail "status of $sock does not name the pool: $out"
	printf '%s\n' "$out" | sed 's/^/    /'
	json=$(timeout 10 "$BRMRCTL" status --socket "$PDIR/$sock" --json) ||
		fail "brmrctl status --socket $sock --json failed"
	valid_json <<<"$json" || fail "status --json of $sock is not valid JSON: $json"
	grep -q '"stat0"' <<<"$json" || fail "JSON status of $sock does not name the pool: $json"
done
out=$(timeout 10 "$BRMRCTL" status --socket "$PDIR/client.ctl")
[[ $(grep -c normal <<<"$out") -ge 2 ]] || fail "client status does not show 2 normal members: $out"
for id in 1 2; do
	[[ $(member_state "$id") == normal ]] || fail "member $id is '$(member_state "$id")' in JSON"
done

log "pid files match the started processes"
for id in 1 2; do
	[[ $(cat "$PDIR/m$id.pidfile") == "$(cat "$PDIR/m$id.pid")" ]] ||
		fail "member $id: --pid-file holds $(cat "$PDIR/m$id.pidfile"), process is $(cat "$PDIR/m$id.pid")"
done
[[ $(cat "$PDIR/client.pidfile") == "$(cat "$PDIR/client.pid")" ]] ||
	fail "nbd-brmr: --pid-file holds $(cat "$PDIR/client.pidfile"), process is $(cat "$PDIR/client.pid")"

log "local-pool status, text and JSON"
"$POOL" status --dir "$PDIR" >"$WORK/lp.txt" || fail "local-pool status failed"
"$POOL" status --dir "$PDIR" --json | valid_json || fail "local-pool status --json is not valid JSON"

log "brmrctl inspect of a store, text and JSON"
timeout 10 "$BRMRCTL" inspect --store "$PDIR/m1.store" >"$WORK/inspect.txt" ||
	fail "brmrctl inspect failed"
timeout 10 "$BRMRCTL" inspect --store "$PDIR/m1.store" --json | "$PY" -c '
import json, sys
d = json.load(sys.stdin)
s = json.dumps(d)
assert "data_offset" in s, "no data_offset in inspect --json"
assert d["map_offset"] >= d["meta_offset"] + d["meta_size"], "map area overlaps the metadata"
assert d["map_offset"] % 4096 == 0 and d["map_size"] % 4096 == 0, "map area not 4K aligned"
# 128 MiB in 128 KiB chunks: 1024 chunks, 128 bytes a bitmap, 4 KiB for each of the
# 63 possible member ids, then the activity log.
assert d["map_size"] == 63 * 4096 + 2 * 32768, "map_size %d" % d["map_size"]
assert d["data_offset"] >= d["map_offset"] + d["map_size"], "data overlaps the map area"
' || fail "brmrctl inspect --json is not valid or its layout is wrong"
grep -qx "map_offset [0-9]*" "$WORK/inspect.txt" || fail "no map_offset in brmrctl inspect"
grep -qx "map_size 323584" "$WORK/inspect.txt" || fail "no map_size 323584 in brmrctl inspect"

# expect_error DESC CMD...: non-zero exit (not a crash, not a timeout) and
# a one-line error on stderr (a second line may only point at --help).
expect_error() {
	local desc=$1 rc=0 lines
	shift
	timeout 10 "$@" >"$WORK/out" 2>"$WORK/err" </dev/null || rc=$?
	((rc != 0)) || fail "$desc: exit status 0 for: $*"
	((rc != 124)) || fail "$desc: still running after 10 s: $*"
	((rc < 128)) || fail "$desc: killed by signal $((rc - 128)): $*"
	lines=$(grep -c . "$WORK/err" || true)
	((lines >= 1)) || fail "$desc: no error message on stderr: $*"
	if ((lines > 2)) || { ((lines == 2)) && ! sed -n 2p "$WORK/err" | grep -qi help; }; then
		fail "$desc: error is not one line: $* -> $(cat "$WORK/err")"
	fi
	log "  ok ($rc): $desc: $(head -n1 "$WORK/err")"
}

# expect_usage DESC CMD...: no arguments at all may print the whole usage,
# but on stderr and with a non-zero exit.
expect_usage() {
	local desc=$1 rc=0
	shift
	timeout 10 "$@" >"$WORK/out" 2>"$WORK/err" </dev/null || rc=$?
	((rc != 0 && rc != 124 && rc < 128)) || fail "$desc: exit status $rc for: $*"
	[[ -s $WORK/err ]] || fail "$desc: nothing on stderr: $*"
	log "  ok ($rc): $desc: $(head -n1 "$WORK/err")"
}

log "bad command lines"
expect_usage "brmrctl without a command" "$BRMRCTL"
expect_usage "brmr-server without arguments" "$SERVER"
expect_usage "nbd-brmr without arguments" "$CLIENT"
expect_error "brmrctl unknown command" "$BRMRCTL" frobnicate
expect_error "brmrctl status without --socket" "$BRMRCTL" status
expect_error "brmrctl status unknown option" "$BRMRCTL" status --socket "$PDIR/client.ctl" --bogus
expect_error "brmrctl status --watch 0" "$BRMRCTL" status --socket "$PDIR/client.ctl" --watch 0
expect_error "brmrctl status --watch=x" "$BRMRCTL" status --socket "$PDIR/client.ctl" --watch=x
# --watch repeats until interrupted: at least two snapshots before the
# timeout, and SIGTERM ends it (timeout's 124; 137 means it had to be killed).
rc=0
timeout -k 5 5 "$BRMRCTL" status --socket "$PDIR/m1.ctl" --watch 0.1 >"$WORK/watch" || rc=$?
n=$(grep -c "^member server" "$WORK/watch") || true
((n >= 2)) || fail "brmrctl status --watch 0.1 printed $n snapshots in 5 s"
((rc == 124)) || fail "brmrctl status --watch did not end on SIGTERM (timeout exit status $rc)"
expect_error "brmrctl maintenance without on|off" "$BRMRCTL" maintenance --socket "$PDIR/client.ctl" --member 2
expect_error "brmrctl maintenance --member 0" "$BRMRCTL" maintenance on --socket "$PDIR/client.ctl" --member 0
expect_error "brmrctl create without --size" "$BRMRCTL" create --name x --member "1,127.0.0.1:1,$WORK/x1"
expect_error "brmrctl create bad size" "$BRMRCTL" create --name x --size lots --member "1,127.0.0.1:1,$WORK/x1"
expect_error "brmrctl create bad member" "$BRMRCTL" create --name x --size 64M --member "nonsense"
expect_error "brmrctl create member id 0" "$BRMRCTL" create --name x --size 64M --member "0,127.0.0.1:1,$WORK/x1"
expect_error "brmrctl create chunk not a power of two" "$BRMRCTL" create --name x --size 64M --chunk 300000 --member "1,127.0.0.1:1,$WORK/x1"
expect_error "brmrctl create over an existing store without --force" "$BRMRCTL" create --name stat0 --size 128M --member "1,127.0.0.1:1,$PDIR/m1.store"
"$BRMRCTL" create --name other --size 64M --member "1,127.0.0.1:1,$WORK/o1.store" >/dev/null ||
	fail "brmrctl create of a scratch store failed"
expect_error "brmrctl create over an idle store without --force" "$BRMRCTL" create --name other2 --size 64M --member "1,127.0.0.1:1,$WORK/o1.store"
"$BRMRCTL" inspect --store "$WORK/o1.store" | grep -q other || fail "the idle store was overwritten without --force"
expect_error "brmrctl inspect of a missing store" "$BRMRCTL" inspect --store "$WORK/none.store"
head -c 1M /dev/urandom >"$WORK/junk.store"
expect_error "brmrctl inspect of a junk file" "$BRMRCTL" inspect --store "$WORK/junk.store"
expect_error "brmr-server unknown option" "$SERVER" --bogus
expect_error "brmr-server missing store" "$SERVER" --listen 127.0.0.1:0 --store "$WORK/none.store"
expect_error "brmr-server junk store" "$SERVER" --listen 127.0.0.1:0 --store "$WORK/junk.store"
expect_error "brmr-server bad provider" "$SERVER" --listen 127.0.0.1:0 --store "$PDIR/m1.store" --provider nosuch
for v in 0 257 abc -1 8x ""; do
	expect_error "brmr-server --sync-queue-depth '$v'" "$SERVER" --listen 127.0.0.1:0 --store "$WORK/none.store" --sync-queue-depth "$v"
	grep -q -- "bad --sync-queue-depth" "$WORK/err" || fail "--sync-queue-depth '$v': $(cat "$WORK/err")"
done
for v in 10X -1 1.5M 10MB " 1" "" 99999999999999999999 20000000000G; do
	expect_error "brmr-server --resync-rate '$v'" "$SERVER" --listen 127.0.0.1:0 --store "$WORK/none.store" --resync-rate "$v"
	grep -q -- "bad --resync-rate" "$WORK/err" || fail "--resync-rate '$v': $(cat "$WORK/err")"
done
expect_error "nbd-brmr unknown option" "$CLIENT" --bogus
expect_error "nbd-brmr without --member" "$CLIENT" --pool stat0 --socket "$WORK/n.sock"
expect_error "nbd-brmr bad provider" "$CLIENT" --pool stat0 --member 127.0.0.1:1 --provider nosuch --socket "$WORK/n.sock"
expect_error "nbd-brmr bad --tcp address" "$CLIENT" --pool stat0 --member 127.0.0.1:1 --tcp "not-an-address"

log "unreachable control sockets"
expect_error "status of a missing socket" "$BRMRCTL" status --socket "$WORK/none.ctl"
: >"$WORK/plain.ctl"
expect_error "status of a regular file" "$BRMRCTL" status --socket "$WORK/plain.ctl"
"$PY" -c '
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1])
s.close()
' "$WORK/dead.ctl"
expect_error "status of a socket nobody listens on" "$BRMRCTL" status --socket "$WORK/dead.ctl"

log "brmr-server: good --sync-queue-depth and --resync-rate; fault on|off on every store"
"$BRMRCTL" create --name other3 --size 64M --member "1,127.0.0.1:1,$WORK/o3.store" >/dev/null ||
	fail "brmrctl create of a second scratch store failed"
"$SERVER" --transport mem --listen stat-scratch --store "$WORK/o1.store" --store "$WORK/o3.store" \
	--sync-queue-depth 256 --resync-rate 512K --control "$WORK/s.ctl" \
	--ready-file "$WORK/s.ready" >"$WORK/s.log" 2>&1 &
spid=$!
wait_for 10 test -e "$WORK/s.ready" || fail "scratch brmr-server not ready: $(cat "$WORK/s.log")"
[[ $(ctl "$WORK/s.ctl" "fault on") == ok ]] || fail "'fault on' was not answered 'ok'"
grep -q "fault injection switched on for 2 store(s)" "$WORK/s.log" ||
	fail "no 'fault injection switched on' in the log: $(cat "$WORK/s.log")"
[[ $(ctl "$WORK/s.ctl" "fault off") == ok ]] || fail "'fault off' was not answered 'ok'"
grep -q "fault injection switched off for 2 store(s)" "$WORK/s.log" ||
	fail "no 'fault injection switched off' in the log: $(cat "$WORK/s.log")"
for bad in "fault" "fault maybe" "frobnicate"; do
	out=$(ctl "$WORK/s.ctl" "$bad")
	[[ $out == "error: unknown command" ]] || fail "'$bad' answered '$out'"
done
grep -q '"other3"' <<<"$(ctl "$WORK/s.ctl" "status json")" || fail "scratch server does not serve other3"
kill "$spid"
wait "$spid" || fail "scratch brmr-server exited with $? after SIGTERM"

log "the pool is still fine"
"$POOL" wait --dir "$PDIR" --state normal --timeout 5 || fail "members not normal at the end"
log "PASS"
