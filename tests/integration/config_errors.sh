#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# config_errors: bad pool files and bad pool-file arguments to brmr-server,
# nbd-brmr and brmrctl give the documented one-line error ("FILE:LINE:
# reason" for the file's mistakes) and exit status 2; a store that is not
# the member the file names is refused (exit 1); every verb answers --help.
# No pool runs: nothing here needs one.
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

need timeout
need_bins

ETC=$WORK/pools.d
mkdir -p "$ETC"
export BRMR_CONFIG_DIR=$ETC
UUID=1b4e28ba-2fa1-41d2-883f-0016d3cca427

# good NAME [EXTRA...]: a valid two-member pool file NAME.conf in $ETC.
good() {
	local name=$1
	shift
	{
		printf '[pool]\nname = %s\nuuid = %s\nsize = 64M\n' "$name" "$UUID"
		printf '[member 1]\naddress = 127.0.0.1:1\nstore = %s/%s-m1.store\ncontrol = %s/%s-m1.ctl\n' \
			"$WORK" "$name" "$WORK" "$name"
		printf '[member 2]\naddress = 127.0.0.1:2\nstore = %s/%s-m2.store\ncontrol = %s/%s-m2.ctl\n' \
			"$WORK" "$name" "$WORK" "$name"
		printf '[client]\nsocket = %s/%s.sock\ncontrol = %s/%s-c.ctl\n' "$WORK" "$name" \
			"$WORK" "$name"
		printf '%s\n' "$@"
	} >"$ETC/$name.conf"
}

# expect STATUS PATTERN CMD...: exit status STATUS, one line on stderr that
# matches the extended regular expression PATTERN.
expect() {
	local want=$1 pattern=$2 rc=0 lines
	shift 2
	timeout 10 "$@" >"$WORK/out" 2>"$WORK/err" </dev/null || rc=$?
	((rc == want)) || fail "exit status $rc (want $want) for: $* -> $(cat "$WORK/err")"
	lines=$(grep -c . "$WORK/err" || true)
	((lines == 1)) || fail "not one line on stderr for: $* -> $(cat "$WORK/err")"
	grep -qE -- "$pattern" "$WORK/err" || fail "for: $*: want /$pattern/, got: $(cat "$WORK/err")"
	log "  ok ($rc): $(cat "$WORK/err")"
}

log "a bad file: the same FILE:LINE error from every program"
good bad 'colour = red'
for cmd in "$SERVER --config $ETC/bad.conf --member 1" "$SERVER --pool bad --member 1" \
	"$CLIENT --config $ETC/bad.conf" "$CLIENT --pool bad" \
	"$BRMRCTL create --config $ETC/bad.conf" "$BRMRCTL create --pool bad --member 1" \
	"$BRMRCTL status --pool bad" "$BRMRCTL metrics --config $ETC/bad.conf --member 2" \
	"$BRMRCTL events --pool bad" "$BRMRCTL maintenance on --pool bad --member 1"; do
	# shellcheck disable=SC2086 # each entry is a command line
	expect 2 "^[a-z-]+: $ETC/bad.conf:16: unknown key 'colour' in \[client\]$" $cmd
done

log "each kind of mistake, with its line"
check_file() {
	local line=$1 pattern=$2
	shift 2
	good bad "$@"
	expect 2 "$ETC/bad.conf:$line: $pattern" "$BRMRCTL" status --pool bad
}
check_file 16 "'socket' is set twice in this section \(first on line 14\)" 'socket = /x'
check_file 16 "a second \[pool\] section \(the first is on line 1\)" '[pool]'
check_file 16 "a second \[member 1\] section \(the first is on line 5\)" '[member 1]'
check_file 16 "unknown section \[volume\]" '[volume]'
check_file 16 "expected 'key = value' or a \[section\]" 'just words'
check_file 16 "key 'address' belongs in a \[member ID\] section, not in \[client\]" 'address = a:1'
printf '[pool]\nname = bad\nuuid = %s\nsize = 1X\n' "$UUID" >"$ETC/bad.conf"
expect 2 "$ETC/bad.conf:4: size: '1X' is not a size" "$BRMRCTL" status --pool bad
printf '[pool]\nname = bad\nuuid = %s\nsize = 65537\n' "$UUID" >"$ETC/bad.conf"
expect 2 "$ETC/bad.conf:4: size: 65537 is not a multiple of 4096 bytes" "$BRMRCTL" status --pool bad
printf '[pool]\nname = bad\nuuid = not-a-uuid\n' >"$ETC/bad.conf"
expect 2 "$ETC/bad.conf:3: uuid: 'not-a-uuid' is not a UUID" "$BRMRCTL" status --pool bad
printf '[pool]\nname = bad\nuuid = %s\nchunk_size = 192K\n' "$UUID" >"$ETC/bad.conf"
expect 2 "$ETC/bad.conf:4: chunk_size: '192K' is not a power of two in 128K..1M" \
	"$BRMRCTL" status --pool bad
printf '[pool]\nname = bad\nuuid = %s\nsize = 1G\n[member 99]\n' "$UUID" >"$ETC/bad.conf"
expect 2 "$ETC/bad.conf:5: \[member 99\]: the member id must be 1..63" "$BRMRCTL" status --pool bad
printf '[pool]\nname = bad\nuuid = %s\nsize = 1G\n' "$UUID" >"$ETC/bad.conf"
expect 2 "$ETC/bad.conf:1: the pool has no members" "$BRMRCTL" status --pool bad
printf '[pool]\nname = bad\nuuid = %s\nsize = 1G\nmin_legs = 3\n[member 1]\naddress = a:1\nstore = /s\n' \
	"$UUID" >"$ETC/bad.conf"
expect 2 "$ETC/bad.conf:5: min_legs 3 is more than the 1 member of the pool" \
	"$BRMRCTL" status --pool bad
good bad
sed -i 's/127.0.0.1:2$/127.0.0.1:1/' "$ETC/bad.conf"
expect 2 "$ETC/bad.conf:10: members 1 and 2 have the same address 127.0.0.1:1" \
	"$BRMRCTL" status --pool bad
good bad 'tcp = 127.0.0.1:10809'
expect 2 "$ETC/bad.conf:16: \[client\] has both 'socket' and 'tcp' \(line 14\)" "$CLIENT" --pool bad

log "missing and misnamed files"
expect 2 "cannot read $ETC/nosuch.conf: No such file or directory" "$SERVER" --pool nosuch --member 1
expect 2 "cannot read $ETC/nosuch.conf: No such file or directory" "$CLIENT" --pool nosuch
expect 2 "cannot read $WORK/x.conf: No such file or directory" "$BRMRCTL" events --config "$WORK/x.conf"
expect 2 "'\.\./x' is not a pool name" "$BRMRCTL" status --pool ../x
good other
cp "$ETC/other.conf" "$ETC/renamed.conf"
expect 2 "$ETC/renamed.conf:1: the file is for pool 'renamed' but names pool 'other'" \
	"$SERVER" --pool renamed --member 1

log "arguments that contradict the file, or each other"
good pool1
expect 2 "$ETC/pool1.conf:1: pool pool1 has no member 9 \(members: 1, 2\)" \
	"$SERVER" --pool pool1 --member 9
expect 2 "needs a --member ID\|auto after it" "$SERVER" --pool pool1
expect 2 "--member '1' follows no --config or --pool" "$SERVER" --member 1 --pool pool1
expect 2 "bad --member 'x'" "$SERVER" --pool pool1 --member x
expect 2 "a second --member for" "$SERVER" --pool pool1 --member 1 --member 2
good pool2
sed -i 's/127.0.0.1:2$/127.0.0.1:3/' "$ETC/pool2.conf"
expect 2 "pool2.conf:9: member 2 of pool pool2 listens on 127.0.0.1:3, but member 1 of pool pool1 \(.*pool1.conf:5\) on 127.0.0.1:1: one brmr-server listens on one address" \
	"$SERVER" --pool pool1 --member 1 --pool pool2 --member 2
expect 2 "--member auto: no member's store of pool pool1 is on this host" \
	"$SERVER" --pool pool1 --member auto
expect 2 "--pool other contradicts .*pool1.conf:1, which is pool 'pool1'" \
	"$CLIENT" --config "$ETC/pool1.conf" --pool other
expect 2 "--name, --size, --chunk and --uuid contradict the pool file" \
	"$BRMRCTL" create --pool pool1 --size 1G
expect 2 "with a pool file, one --member ID at most" \
	"$BRMRCTL" create --pool pool1 --member 1 --member 2
expect 2 "--member: '1,a:1,/x' is not a member id" "$BRMRCTL" create --pool pool1 --member 1,a:1,/x
expect 2 "pool1.conf:1: pool pool1 has no member 7" "$BRMRCTL" create --pool pool1 --member 7
expect 2 "--member and --client exclude each other" "$BRMRCTL" status --pool pool1 --member 1 --client
expect 2 "--socket, --config and --pool exclude each other" \
	"$BRMRCTL" status --pool pool1 --config "$ETC/pool1.conf"
expect 2 "--member and --client pick a socket from a pool file" \
	"$BRMRCTL" events --socket "$WORK/x.ctl" --member 1
expect 2 "--socket, --config or --pool is required" "$BRMRCTL" metrics
expect 1 "cannot reach $WORK/pool1-c.ctl" "$BRMRCTL" status --pool pool1
expect 1 "cannot reach $WORK/pool1-m2.ctl" "$BRMRCTL" events --pool pool1 --member 2 --now

log "a store that is not the member the file names"
"$BRMRCTL" create --pool pool1 >/dev/null || fail "brmrctl create --pool pool1 failed"
"$BRMRCTL" inspect --store "$WORK/pool1-m2.store" | grep -qx "pool_uuid $UUID" ||
	fail "the store does not carry the file's UUID"
expect 1 "member 2: $WORK/pool1-m2.store already holds member 2 of pool pool1" \
	"$BRMRCTL" create --pool pool1 --member 2
expect 2 "--member auto: the stores of members 1 .* and 2 .* are both on this host" \
	"$SERVER" --pool pool1 --member auto --transport mem
sed -i "s|$WORK/pool1-m1.store|$WORK/pool1-m2.store|" "$ETC/pool1.conf"
expect 1 "store $WORK/pool1-m2.store holds member 2 of pool pool1 \(uuid $UUID\), but .*pool1.conf:5 names it the store of member 1" \
	"$SERVER" --pool pool1 --member 1 --transport mem

log "--help of every program and verb: exit 0, on stdout"
for cmd in "$SERVER" "$CLIENT" "$BRMRCTL"; do
	"$cmd" --help >"$WORK/out" || fail "$cmd --help failed"
	[[ -s $WORK/out ]] || fail "$cmd --help printed nothing"
done
for verb in $("$BRMRCTL" --help | sed -n -E 's/^  ([a-z][a-z-]*) .*/\1/p'); do
	"$BRMRCTL" "$verb" --help >"$WORK/out" || fail "brmrctl $verb --help failed"
	grep -q "usage: brmrctl $verb" "$WORK/out" || fail "brmrctl $verb --help: $(head -1 "$WORK/out")"
done
log "PASS"
