#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# multi_pool: one brmr-server per host serving several pools, as an operator
# runs it (`brmr-server --pool pool1 --member N --pool pool2 --member N`).
# Two hosts on loopback, A (member 1 of every pool) and B (member 2), three
# pools, an nbd-brmr per pool. Each member's control socket is the one its
# pool file names (`brmrctl --pool pool2 --member 1` reaches it, shows
# pool2 first, and a command there that names no pool acts on pool2).
# Each pool gets its own data through NBD; then host B's server is
# SIGKILLed while fio writes to two of the pools (the third idles): every
# client fails its member 2 and goes on. B's server restarts: each pool
# heals on its own (member 2 takes the maps and copies what it missed from
# member 1; the idle pool copies nothing), the stores of each pool end
# identical and hold that pool's data, not another's, and fio verifies.
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

need fio nbdsh cmp
need_bins
# shellcheck source=scripts/ports.sh
. "$SRC_DIR/scripts/ports.sh"
DIR=$WORK # for pick_port's record of the ports it handed out
die() { fail "$*"; }

ETC=$WORK/etc
mkdir -p "$ETC"
export BRMR_CONFIG_DIR=$ETC
PORT_A=$(pick_port)
PORT_B=$(pick_port)
POOLS=(pool1 pool2 pool3)
declare -A PID=()

for p in "${POOLS[@]}"; do
	cat >"$ETC/$p.conf" <<EOF
[pool]
name = $p
uuid = $("$PY" -c 'import uuid; print(uuid.uuid4())')
size = 64M
[member 1]
address = 127.0.0.1:$PORT_A
store = $WORK/$p-m1.store
control = $WORK/$p-m1.ctl
[member 2]
address = 127.0.0.1:$PORT_B
store = $WORK/$p-m2.store
control = $WORK/$p-m2.ctl
[client]
socket = $WORK/$p.sock
control = $WORK/$p-c.ctl
EOF
	"$BRMRCTL" create --pool "$p" >"$WORK/create-$p.log" 2>&1 ||
		fail "brmrctl create --pool $p failed: $(cat "$WORK/create-$p.log")"
done

# server HOST ID: the brmr-server of host HOST, member ID of every pool.
server() {
	local args=() p
	for p in "${POOLS[@]}"; do args+=(--pool "$p" --member "$2"); done
	"$SERVER" "${args[@]}" >>"$WORK/server-$1.log" 2>&1 &
	PID[server-$1]=$!
}
server A 1
server B 2
for p in "${POOLS[@]}"; do
	"$CLIENT" --pool "$p" >"$WORK/client-$p.log" 2>&1 &
	PID[client-$p]=$!
done

# state POOL ID: the state of member ID as pool POOL's client sees it.
state() {
	CTL_DIR=$WORK/ctl-$1 member_state "$2" 2>/dev/null
}
# Each pool's control sockets under the names the status helpers read.
for p in "${POOLS[@]}"; do
	mkdir -p "$WORK/ctl-$p"
	ln -s "$WORK/$p-c.ctl" "$WORK/ctl-$p/client.ctl"
	ln -s "$WORK/$p-m1.ctl" "$WORK/ctl-$p/m1.ctl"
	ln -s "$WORK/$p-m2.ctl" "$WORK/ctl-$p/m2.ctl"
done
state_is() { [[ $(state "$1" "$2") == "$3" ]]; }
both_normal() { [[ $(state "$1" 1) == normal && $(state "$1" 2) == normal ]]; }
# healed POOL: both members normal, neither records a dirty chunk.
pool_healed() { CTL_DIR=$WORK/ctl-$1 healed 2; }
for p in "${POOLS[@]}"; do
	wait_for 30 both_normal "$p" || fail "pool $p did not come up: member 2 is '$(state "$p" 2)'"
done
log "host A serves member 1 and host B member 2 of ${POOLS[*]}; a client per pool"

uri() { echo "nbd+unix:///?socket=$WORK/$1.sock"; }
for p in "${POOLS[@]}"; do
	head -c 64M /dev/urandom >"$WORK/$p.data"
	nbdsh -u "$(uri "$p")" -c "
with open('$WORK/$p.data', 'rb') as f:
    data = f.read()
for off in range(0, len(data), 4 << 20):
    h.pwrite(data[off:off + (4 << 20)], off)
h.flush()
" || fail "writing pool $p failed"
done
log "each pool holds 64 MiB of its own"

for p in "${POOLS[@]}"; do
	name=$(CTL_DIR=$WORK/ctl-$p server_field 1 'p["pool"]') || fail "no status on $p-m1.ctl"
	[[ $name == "$p" ]] || fail "$p-m1.ctl shows pool '$name' first"
done
"$BRMRCTL" status --pool pool2 --member 1 | grep -q "pool1" ||
	fail "brmrctl status --pool pool2 --member 1 does not show the server's other pools"
answer=$(ctl "$WORK/pool2-m1.ctl" "verify stop")
[[ $answer == "error: no verify runs" ]] ||
	fail "'verify stop' on pool2's socket: '$answer', expected it to act on pool2"
log "each pool's control socket answers for it; status lists every pool the server serves"

log "fio on pool1 and pool2; SIGKILL host B's server under it"
for p in pool1 pool2; do
	fio --name="$p" --ioengine=nbd --uri="$(uri "$p")" --rw=randwrite --bs=4k --iodepth=16 \
		--offset=16M --size=32M --randrepeat=1 --rate_iops=2000 --runtime=6 --time_based \
		--verify=crc32c --verify_fatal=1 --verify_state_save=0 --do_verify=1 \
		--verify_backlog=512 --output="$WORK/fio-$p.out" >/dev/null 2>&1 &
	PID[fio-$p]=$!
done
sleep 2
kill -9 "${PID[server-B]}"
wait "${PID[server-B]}" 2>/dev/null || true
for p in pool1 pool2; do
	wait_for 15 state_is "$p" 2 failed ||
		fail "pool $p: member 2 is '$(state "$p" 2)', expected failed"
done
log "every client holds member 2 failed"
for p in pool1 pool2; do
	wait "${PID[fio-$p]}" || fail "fio on $p failed: $(tail -n 20 "$WORK/fio-$p.out")"
done
log "fio finished and verified on pool1 and pool2"

[[ $(state pool3 2) == failed ]] || fail "pool3: member 2 is '$(state pool3 2)', expected failed"

server B 2
for p in "${POOLS[@]}"; do
	wait_for 60 pool_healed "$p" || fail "pool $p did not heal: member 2 is '$(state "$p" 2)'"
done
for p in "${POOLS[@]}"; do
	copied=$(CTL_DIR=$WORK/ctl-$p server_field 2 'p["resync"]["bytes"]')
	[[ $p == pool3 ]] && ((copied != 0)) && fail "idle pool3's member 2 copied $copied bytes"
	[[ $p != pool3 ]] && ((copied == 0)) && fail "$p's member 2 copied nothing"
	log "$p: member 2 copied $copied bytes"
done
log "host B back: every pool healed on its own"

for p in "${POOLS[@]}"; do
	"$BRMRCTL" inspect --store "$WORK/$p-m1.store" >/dev/null ||
		fail "the store of member 1 of $p does not inspect"
	off=$("$BRMRCTL" inspect --store "$WORK/$p-m1.store" | sed -n 's/^data_offset //p')
	[[ $off =~ ^[0-9]+$ ]] || fail "no data_offset for $p"
	cmp -s <(tail -c +$((off + 1)) "$WORK/$p-m1.store" | head -c 64M) \
		<(tail -c +$((off + 1)) "$WORK/$p-m2.store" | head -c 64M) ||
		fail "the members of $p differ"
	# The first 16 MiB are only this pool's own data (fio wrote above).
	cmp -s -n $((16 << 20)) "$WORK/$p.data" <(tail -c +$((off + 1)) "$WORK/$p-m2.store") ||
		fail "member 2 of $p does not hold $p's data"
done
log "the members of each pool are identical and hold that pool's data"
log "PASS"
