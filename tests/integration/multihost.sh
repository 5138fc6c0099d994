#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# multihost: docs/operations.md's "One pool, several hosts", step by step,
# on four hosts made of network namespaces joined by a bridge: members 1, 2
# and 3 on hosts h1..h3 (S.1..S.3, port 7000), the client on host c (S.10).
# Each host has its own pool file directory ($BRMR_CONFIG_DIR) holding the
# same vol1.conf:
#
#   h1: brmrctl create --pool vol1 --member 1     (makes vol1.key, 0600)
#   copy vol1.key to every other host
#   h2, h3: brmrctl create --pool vol1 --member N (keeps the key it finds)
#   h1..h3: brmr-server --pool vol1 --member N    (what brmr-server@vol1 runs)
#   c: nbd-brmr --pool vol1                       (NBD on the file's socket)
#
# Then what the operator sees and does (the "Failures" section): data
# written through NBD reads back; host 2 is cut off and its server killed,
# the client fails it, member 1 records what it misses, writes go on; the
# host comes back, its server restarts, takes the maps and copies what it
# missed from its peers, never through the client; the three stores end
# byte-identical (a client or member with another key: auth.sh). The hosts
# share one filesystem here, so each names its member (BRMR_MEMBER=N in the
# unit's env file) rather than relying on `auto`, which would find all three
# stores.
# Needs root (network namespaces, veth, a bridge); skips otherwise.
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

need ip nbdcopy nbdinfo cmp
need_bins
((EUID == 0)) || skip "network namespaces need root"

# ---- four hosts --------------------------------------------------------------

S="" BR="" X="" NET_MADE=""
for ((try = 0; try < 20; try++)); do
	x=$(random_octet) || exit 1
	[[ -z $(ip -4 -o addr show to "10.232.$x.0/24" 2>/dev/null) ]] || continue
	ip link show "mhbr$x" >/dev/null 2>&1 && continue
	[[ -e /run/netns/mh$x-c ]] && continue
	S=10.232.$x BR=mhbr$x X=$x
	break
done
[[ -n $S ]] || skip "no free 10.232.X.0/24 subnet found"
HOSTS=(h1 h2 h3 c)
declare -A ADDR=([h1]=$S.1 [h2]=$S.2 [h3]=$S.3 [c]=$S.10)
declare -A PID=()
ns() { echo "mh$X-$1"; }
veth() { echo "mhv$X-$1"; }

net_down() {
	local h
	[[ -n $NET_MADE ]] || return 0
	for h in "${HOSTS[@]}"; do
		ip link del "$(veth "$h")" 2>/dev/null
		ip netns del "$(ns "$h")" 2>/dev/null
	done
	ip link del "$BR" 2>/dev/null
	return 0
}

multihost_exit() {
	local rc=$? h
	set +e
	trap - EXIT
	if ((rc != 0 && rc != 77)); then
		for h in "${!PID[@]}"; do
			echo "---- $h.log"
			tail -n 30 "$RUN/$h.log" 2>/dev/null
		done
	fi
	for h in "${!PID[@]}"; do kill "${PID[$h]}" 2>/dev/null; done
	# What ignores SIGTERM for 10 s (a daemon stuck on the way out) gets
	# SIGKILL: none may outlive the test.
	for h in "${!PID[@]}"; do
		wait_for 10 eval '! pid_alive '"${PID[$h]}" || kill -9 "${PID[$h]}" 2>/dev/null
		wait "${PID[$h]}" 2>/dev/null
	done
	if grep -l -E 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$RUN"/*.log >/dev/null 2>&1; then
		log "sanitizer reports:"
		grep -h -A12 -E 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$RUN"/*.log | head -n 60
		((rc != 0 && rc != 77)) || rc=1
	fi
	net_down
	(exit "$rc")
	cleanup
}
trap multihost_exit EXIT

NET_MADE=1
ip link add "$BR" type bridge 2>/dev/null || skip "cannot create a bridge (ip link add type bridge)"
ip link set "$BR" up || fail "cannot bring $BR up"
for h in "${HOSTS[@]}"; do
	ip netns add "$(ns "$h")" 2>/dev/null || skip "cannot create a network namespace (ip netns add)"
	ip link add "$(veth "$h")" type veth peer name eth0 netns "$(ns "$h")" 2>/dev/null ||
		skip "cannot create a veth pair"
	ip link set "$(veth "$h")" master "$BR" up || fail "cannot attach $(veth "$h") to $BR"
	ip -n "$(ns "$h")" addr add "${ADDR[$h]}/24" dev eth0 || fail "cannot address host $h"
	ip -n "$(ns "$h")" link set eth0 up || fail "cannot bring host $h's eth0 up"
	ip -n "$(ns "$h")" link set lo up || fail "cannot bring lo up on host $h"
done
log "hosts: h1 $S.1, h2 $S.2, h3 $S.3 (members), c $S.10 (client), bridge $BR"

# on HOST CMD...: run CMD on HOST, with that host's pool file directory.
on() {
	local h=$1
	shift
	ip netns exec "$(ns "$h")" env BRMR_CONFIG_DIR="$WORK/$h/etc" "$@"
}

# on_bg HOST LOG CMD...: the same in the background, its pid in PID[HOST].
# Not `on ... &`: that forks a subshell for the function, and killing the
# subshell would leave CMD running (ip netns exec and env exec CMD itself).
on_bg() {
	local h=$1 log=$2
	shift 2
	ip netns exec "$(ns "$h")" env BRMR_CONFIG_DIR="$WORK/$h/etc" "$@" >>"$log" 2>&1 &
	PID[$h]=$!
}

# ---- the pool file, the same on every host -----------------------------------

RUN=$WORK/run # control and NBD sockets, logs (the hosts' /run/brmr)
mkdir -p "$RUN"
UUID=$(cat /proc/sys/kernel/random/uuid)
for h in "${HOSTS[@]}"; do mkdir -p "$WORK/$h/etc"; done
for i in 1 2 3; do truncate -s 128M "$WORK/h$i/store.img"; done
{
	printf '[pool]\nname = vol1\nuuid = %s\nsize = 128M\nchunk_size = 128K\n' "$UUID"
	printf 'transport = fabric\nprovider = tcp\n'
	for i in 1 2 3; do
		printf '\n[member %d]\naddress = %s:7000\nstore = %s\ncontrol = %s\n' \
			"$i" "$S.$i" "$WORK/h$i/store.img" "$RUN/m$i.ctl"
	done
	printf '\n[client]\nsocket = %s\ncontrol = %s\n' "$RUN/vol1.nbd.sock" "$RUN/client.ctl"
} >"$WORK/vol1.conf"
for h in "${HOSTS[@]}"; do cp "$WORK/vol1.conf" "$WORK/$h/etc/vol1.conf"; done

# ---- deploy, as operations.md shows ------------------------------------------

on h1 "$BRMRCTL" create --pool vol1 --member 1 >"$RUN/create.log" 2>&1 ||
	fail "h1: brmrctl create failed: $(cat "$RUN/create.log")"
KEY=$WORK/h1/etc/vol1.key
[[ -f $KEY && $(stat -c %a "$KEY") == 600 ]] || fail "h1: no vol1.key of mode 600 next to the pool file"
for h in h2 h3 c; do cp -p "$KEY" "$WORK/$h/etc/vol1.key"; done
for i in 2 3; do
	on "h$i" "$BRMRCTL" create --pool vol1 --member "$i" >>"$RUN/create.log" 2>&1 ||
		fail "h$i: brmrctl create failed: $(tail -3 "$RUN/create.log")"
	cmp -s "$KEY" "$WORK/h$i/etc/vol1.key" || fail "h$i: brmrctl create changed the key it found"
done
log "stores formatted on h1..h3, one key everywhere"

# serve N: start member N's brmr-server on host hN, as brmr-server@vol1 would.
serve() { on_bg "h$1" "$RUN/h$1.log" "$SERVER" --pool vol1 --member "$1"; }
status_of() { "$BRMRCTL" status --socket "$1" --json >/dev/null 2>&1; }
for i in 1 2 3; do serve "$i"; done
for i in 1 2 3; do
	wait_for 20 status_of "$RUN/m$i.ctl" || fail "h$i: brmr-server did not start: $(tail -5 "$RUN/h$i.log")"
done
on_bg c "$RUN/c.log" "$CLIENT" --pool vol1
wait_for 30 test -S "$RUN/vol1.nbd.sock" || fail "c: nbd-brmr did not start: $(tail -5 "$RUN/c.log")"
URI="nbd+unix:///?socket=$RUN/vol1.nbd.sock"

# lib.sh's status helpers read the sockets in RUN.
CTL_DIR=$RUN
all_normal() { local i; for i in 1 2 3; do state_in "$i" normal || return 1; done; }
wait_for 20 all_normal || fail "not every member is normal: $(on c "$BRMRCTL" status --pool vol1)"
on c "$BRMRCTL" status --pool vol1 | sed 's/^/    /'
for i in 1 2 3; do
	[[ $(member_field "$i" addr) == "$S.$i:7000" ]] ||
		fail "the client reaches member $i at '$(member_field "$i" addr)', not $S.$i:7000"
done

# ---- I/O through NBD ---------------------------------------------------------

size=$(nbdinfo --size "$URI") || fail "nbdinfo failed"
((size == 128 << 20)) || fail "the export has $size bytes, not 128 MiB"
head -c 32M /dev/urandom >"$WORK/a.bin"
nbdcopy "$WORK/a.bin" "$URI" || fail "nbdcopy to the pool failed"
nbdcopy "$URI" "$WORK/back.bin" || fail "nbdcopy from the pool failed"
cmp -n $((32 << 20)) "$WORK/a.bin" "$WORK/back.bin" || fail "32 MiB read back differ"
rm -f "$WORK/back.bin"
log "32 MiB written and read back over NBD"

# ---- host 2 fails: cut off, its server killed --------------------------------

ip link set "$(veth h2)" down
kill -KILL "${PID[h2]}"
wait "${PID[h2]}" 2>/dev/null || true
unset 'PID[h2]'
wait_for 10 state_in 2 failed || fail "the client shows member 2 as '$(member_state 2)'"
log "h2 down: the client failed member 2 ($(member_field 2 reason))"
head -c 16M /dev/urandom >"$WORK/b.bin"
cat "$WORK/a.bin" >"$WORK/want.bin"
dd if="$WORK/b.bin" of="$WORK/want.bin" bs=1M seek=8 conv=notrunc status=none
nbdcopy "$WORK/want.bin" "$URI" || fail "writes failed with member 2 down"
missed=$(dirty_for 2 1)
((missed > 0)) || fail "member 1 records no chunk missed by member 2"
on c "$BRMRCTL" status --pool vol1 --member 1 | sed 's/^/    /'
log "written around member 2; member 1 records $missed chunks it missed"

# ---- host 2 returns ----------------------------------------------------------

ip link set "$(veth h2)" up
serve 2
wait_for 60 healed 3 || fail "the pool did not heal: $(on c "$BRMRCTL" status --pool vol1)"
on c "$BRMRCTL" status --pool vol1 | sed 's/^/    /'
for i in 1 2 3; do
	[[ $(member_field "$i" resync_bytes) == 0 ]] || fail "the client carried resync bytes for member $i"
done
copied=$(server_field 2 'p["resync"]["bytes"]')
((copied > 0 && copied <= missed * 131072)) ||
	fail "member 2 copied $copied bytes for $missed missed chunks of 128 KiB"
log "member 2 copied $copied bytes from its peers for $missed missed chunks"

nbdcopy "$URI" "$WORK/back.bin" || fail "nbdcopy from the healed pool failed"
cmp -n $((32 << 20)) "$WORK/want.bin" "$WORK/back.bin" || fail "the data read back after the heal differ"

# The three stores: the same bytes from each one's data offset on.
data_offset() {
	"$BRMRCTL" inspect --store "$1" --json | "$PY" -c '
import json, sys
d = json.load(sys.stdin)
def find(o):
    if isinstance(o, dict):
        if "data_offset" in o:
            return o["data_offset"]
        for v in o.values():
            r = find(v)
            if r is not None:
                return r
print(find(d))
'
}
o1=$(data_offset "$WORK/h1/store.img")
for i in 2 3; do
	oi=$(data_offset "$WORK/h$i/store.img")
	cmp -n $((128 << 20)) -i "$o1:$oi" "$WORK/h1/store.img" "$WORK/h$i/store.img" ||
		fail "the stores of members 1 and $i differ"
done
log "the three stores hold the same 128 MiB"
