#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# link_cut: network links cut, not processes killed. Members 1 and 2 run in
# network namespaces of their own, each joined by a veth pair to a bridge in
# the root namespace; member 3 and nbd-brmr run in the root namespace, member
# 3 on the bridge's address:
#
#   root ns: bridge S.1 (member 3, nbd-brmr) --veth-- ns1: S.11 (member 1)
#                                            --veth-- ns2: S.12 (member 2)
#
# A. Under a verified fio random-write run, member 2's veth goes down: the
#    client fails member 2 (heartbeats only: nothing is closed), members 1
#    and 3 stay normal and fio finishes without an error. The link comes
#    back: member 2 heals by itself, copying only what it missed.
# B. Member 2 is cut off again while 256 MiB are written, its link is slowed
#    (tbf) so that its resync lasts seconds, and while it copies from both
#    peers the path between members 1 and 2 alone is cut (blackhole routes in
#    both namespaces; the client reaches every member as before). The resync
#    goes on from member 3 and finishes; the members end identical, and
#    once the path is back no member records a dirty chunk.
# Needs root (network namespaces, veth, a bridge, tc); skips otherwise.
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

need fio ip tc
need_bins
((EUID == 0)) || skip "network namespaces need root"

# ---- the network -------------------------------------------------------------

# A random-ish private /24 and names of its own, so that parallel or stale
# runs do not collide (device names stay within 15 characters).
S="" BR="" NS1="" NS2="" H1="" H2="" NET_MADE=""
for ((try = 0; try < 20; try++)); do
	x=$(random_octet) || exit 1
	[[ -z $(ip -4 -o addr show to "10.231.$x.0/24" 2>/dev/null) ]] || continue
	ip link show "lcbr$x" >/dev/null 2>&1 && continue
	[[ -e /run/netns/lc$x-m1 || -e /run/netns/lc$x-m2 ]] && continue
	S=10.231.$x BR=lcbr$x NS1=lc$x-m1 NS2=lc$x-m2 H1=lch$x-1 H2=lch$x-2
	break
done
[[ -n $S ]] || skip "no free 10.231.X.0/24 subnet found"

net_down() {
	[[ -n $NET_MADE ]] || return 0
	# Deleting one end of a veth pair deletes both, even while processes
	# still hold the namespace of the other end.
	ip link del "$H1" 2>/dev/null
	ip link del "$H2" 2>/dev/null
	ip link del "$BR" 2>/dev/null
	ip netns del "$NS1" 2>/dev/null
	ip netns del "$NS2" 2>/dev/null
	return 0
}

# lib.sh's cleanup (pool down, diagnostics on failure, WORK removed) ends in
# exit: run it in a subshell that sees the exit status, then the network's.
link_cut_exit() {
	local rc=$?
	set +e
	trap - EXIT
	[[ -z ${FIO:-} ]] || kill "$FIO" 2>/dev/null
	(exit "$rc")
	(cleanup)
	rc=$?
	net_down
	exit "$rc"
}
trap link_cut_exit EXIT

NET_MADE=1
ip link add "$BR" type bridge 2>/dev/null || skip "cannot create a bridge (ip link add type bridge)"
ip addr add "$S.1/24" dev "$BR" || fail "cannot address $BR"
ip link set "$BR" up || fail "cannot bring $BR up"
for i in 1 2; do
	# Member i: namespace lcX-mi, veth lchX-i (bridge port) <-> lcnX-i (in it).
	ns=lc$x-m$i host=lch$x-$i
	ip netns add "$ns" 2>/dev/null || skip "cannot create a network namespace (ip netns add)"
	ip link add "$host" type veth peer name "lcn$x-$i" netns "$ns" 2>/dev/null ||
		skip "cannot create a veth pair"
	ip link set "$host" master "$BR" up || fail "cannot attach $host to $BR"
	ip -n "$ns" addr add "$S.1$i/24" dev "lcn$x-$i" || fail "cannot address member $i's veth"
	ip -n "$ns" link set "lcn$x-$i" up || fail "cannot bring member $i's veth up"
	ip -n "$ns" link set lo up || fail "cannot bring lo up in $ns"
done
# Case B slows member 2's link with a token bucket; make sure there is one.
tc qdisc add dev "$H2" root tbf rate 320mbit burst 256k latency 100ms 2>/dev/null ||
	skip "cannot add a tbf qdisc (tc qdisc add ... tbf)"
tc qdisc del dev "$H2" root || fail "cannot remove the tbf qdisc of $H2"
log "network: bridge $BR $S.1/24 (member 3, client), $NS1 $S.11 (member 1), $NS2 $S.12 (member 2)"

pool_up --members 3 --size 512M --addr 1="$S.11" --addr 2="$S.12" --addr 3="$S.1" \
	--netns 1="$NS1" --netns 2="$NS2"

# peer_field ID PEER KEY: member ID's view of its session to member PEER
# ("connected", "sync_bytes", "reason", ...).
peer_field() { server_field "$1" "[q[\"$3\"] for q in p[\"peers\"] if q[\"id\"] == $2][0]"; }
peer_is() { [[ $(peer_field "$1" "$2" connected) == "$3" ]]; }
resync_running() { [[ $(server_field 2 'p["resync"]["running"]') == True ]]; }
# Member 2 holds every chunk again (whatever its peers still record).
resync_finished() {
	[[ $(server_field 2 'p["resync"]["running"] or p["resync"]["done"] != p["resync"]["total"]') == False ]]
}
copied_from() { local n; n=$(peer_field 2 "$1" sync_bytes) && ((n > $2)); }
others_normal() {
	local id
	for id in "$@"; do
		state_in "$id" normal || fail "member $id is '$(member_state "$id")', expected normal"
	done
}

# ---- A: member 2's link goes down under fio ------------------------------------

log "A: fio, 64 MiB of random writes with crc32c verification, in the background"
fio --name=linkcut --ioengine=nbd --uri="$URI" --rw=randwrite --bs=4k --iodepth=32 \
	--offset=64M --size=64M --randrepeat=1 --rate_iops=3000 \
	--verify=crc32c --verify_fatal=1 --verify_state_save=0 --do_verify=1 --verify_backlog=1024 \
	--output-format=json --output="$WORK/fio.json" >"$WORK/fio.out" 2>&1 &
FIO=$!
sleep 1 # let the writes get going; the assertions below do not depend on it
pid_alive "$FIO" || fail "fio ended before the link went down; the test would prove nothing"
log "A: link of member 2 ($H2) down"
ip link set "$H2" down
T_CUT=$SECONDS
wait_for 6 state_in 2 failed ||
	fail "client shows cut-off member 2 as '$(member_state 2)' after 6 s, expected failed"
log "A: client failed member 2 after about $((SECONDS - T_CUT)) s"
others_normal 1 3
pid_alive "$FIO" || log "warning: fio finished right after the cut"

rc=0
wait "$FIO" || rc=$?
FIO=""
[[ -s $WORK/fio.json ]] || fail "fio wrote no JSON; output: $(cat "$WORK/fio.out")"
fio_check "$WORK/fio.json" || fail "fio job reported an error (see above)"
((rc == 0)) || fail "fio exited with status $rc: $(cat "$WORK/fio.out")"
state_in 2 failed || fail "member 2 is '$(member_state 2)' while its link is down"
others_normal 1 3
DIRTY_A=$(dirty_for 2 1)
((DIRTY_A > 0)) || fail "member 1 records no chunk missed by member 2"
log "A: fio finished cleanly; member 2 missed $DIRTY_A chunks; link up again"
ip link set "$H2" up
wait_for 60 healed 3 || fail "no heal after the link came back: member 2 is '$(member_state 2)'"
check_healed 3 2 "$DIRTY_A"

# ---- B: the path between members 1 and 2 is cut during member 2's resync -------

log "B: member 2's link slowed to 320 Mbit/s and down; 256 MiB of sequential writes"
tc qdisc add dev "$H2" root tbf rate 320mbit burst 256k latency 100ms || fail "tc qdisc add failed"
ip link set "$H2" down
wait_for 6 state_in 2 failed || fail "client shows cut-off member 2 as '$(member_state 2)', expected failed"
fio --name=linkcut-seq --ioengine=nbd --uri="$URI" --rw=write --bs=1M --iodepth=8 \
	--offset=128M --size=256M --output-format=json --output="$WORK/fio-seq.json" \
	>"$WORK/fio-seq.out" 2>&1 || fail "fio (sequential) failed: $(cat "$WORK/fio-seq.out")"
fio_check "$WORK/fio-seq.json" || fail "fio (sequential) reported an error"
others_normal 1 3
DIRTY_B=$(dirty_for 2 1)
((DIRTY_B >= 2048)) || fail "member 1 records $DIRTY_B chunks missed by member 2, expected 2048 or more"
B1=$(peer_field 2 1 sync_bytes) || fail "no status from member 2"
B3=$(peer_field 2 3 sync_bytes) || fail "no status from member 2"
log "B: member 2 missed $DIRTY_B chunks; link up again"
ip link set "$H2" up
wait_for 30 resync_running || fail "member 2 did not start its resync (client: '$(member_state 2)')"
# Both peers hold every chunk: a resync that copies from member 1 too is
# what the cut must interrupt, or the case would prove nothing.
if ! wait_for 10 copied_from 1 "$B1"; then
	fail "member 2 resyncs but copied nothing from member 1 ($(peer_field 2 1 sync_bytes) bytes;" \
		"$(($(peer_field 2 3 sync_bytes) - B3)) bytes from member 3): the cut would prove nothing"
fi
resync_running || fail "member 2's resync ended before the cut; the cut would prove nothing"
ip -n "$NS2" route add blackhole "$S.11/32"
ip -n "$NS1" route add blackhole "$S.12/32"
CUT1=$(peer_field 2 1 sync_bytes)
CUT3=$(peer_field 2 3 sync_bytes)
log "B: path 1<->2 cut at $(server_field 2 '"%d/%d chunks" % (p["resync"]["done"], p["resync"]["total"])')" \
	"(copied from member 1: $((CUT1 - B1)) bytes, from member 3: $((CUT3 - B3)) bytes)"
wait_for 10 peer_is 2 1 False || fail "member 2 still has a session to member 1 through the cut"
wait_for 10 peer_is 1 2 False || fail "member 1 still has a session to member 2 through the cut"
log "B: members 1 and 2 lost their sessions to each other; the client keeps all three"
others_normal 1 2 3
wait_for 60 resync_finished || fail "member 2's resync did not finish without member 1:" \
	"$(server_field 2 'p["resync"]')"
others_normal 1 2 3
END3=$(peer_field 2 3 sync_bytes)
((END3 > CUT3)) || fail "member 2 copied nothing from member 3 after the cut"
log "B: resync finished through the cut; member 3 provided $((END3 - CUT3)) bytes after it"
"$POOL" compare --dir "$PDIR" 1 2 3 || fail "members differ after the resync through the cut"

log "B: path 1<->2 back; member 1 must learn that member 2 holds every chunk"
ip -n "$NS2" route del blackhole "$S.11/32"
ip -n "$NS1" route del blackhole "$S.12/32"
tc qdisc del dev "$H2" root || fail "tc qdisc del failed"
wait_for 15 peer_is 2 1 True || fail "member 2's session to member 1 did not come back"
if ! wait_for 20 healed 3; then
	fail "not healed with the path back: dirty chunks recorded by members 1..3:" \
		"$(server_field 1 'p["dirty_chunks"]') $(server_field 2 'p["dirty_chunks"]')" \
		"$(server_field 3 'p["dirty_chunks"]')"
fi
# p["resync"]["bytes"] counts both episodes: allow both episodes' chunks.
check_healed 3 2 $((DIRTY_A + DIRTY_B))
log "PASS"
