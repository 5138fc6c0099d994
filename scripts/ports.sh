# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
#
# Loopback ports for the pools scripts/local-pool and kv-local run, sourced
# by both. pick_port records what it hands out in $DIR/ports and calls the
# caller's die() when the range is exhausted.

port_free() {
	local p=$1
	if command -v ss >/dev/null 2>&1; then
		[[ -z $(ss -Htan "sport = :$p" 2>/dev/null) ]]
	else
		if (: <"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then return 1; fi
		return 0
	fi
}

# The ports to pick from: BRMR_PORT_RANGE=LOW-HIGH (environment), by default
# 20000-31999, below the ephemeral range. Runs side by side (CI runs two
# test suites at once) give each its own range.
port_range() {
	local r=${BRMR_PORT_RANGE:-20000-31999}
	if ! [[ $r =~ ^([0-9]+)-([0-9]+)$ ]] || ((BASH_REMATCH[1] < 1024 ||
		BASH_REMATCH[1] > BASH_REMATCH[2] || BASH_REMATCH[2] > 65535)); then
		die "BRMR_PORT_RANGE='$r' is not LOW-HIGH within 1024-65535"
	fi
	PORT_LOW=${BASH_REMATCH[1]} PORT_HIGH=${BASH_REMATCH[2]}
}

# A free loopback port of the range, not used by another local-pool member
# (their ports are recorded in .ports files).
pick_port() {
	local p tries=0 PORT_LOW PORT_HIGH
	port_range
	while ((tries++ < 500)); do
		p=$((PORT_LOW + (RANDOM * 32768 + RANDOM) % (PORT_HIGH - PORT_LOW + 1)))
		if port_free "$p" && ! grep -qxs "$p" "$DIR/ports"; then
			echo "$p" >>"$DIR/ports"
			echo "$p"
			return 0
		fi
	done
	die "no free loopback port found in $PORT_LOW-$PORT_HIGH"
}
