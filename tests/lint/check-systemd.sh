#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# check-systemd.sh SRC_DIR BRMR_SERVER: systemd-analyze verify finds nothing
# to say about brmr-server@.service (an instance of it, with ExecStart
# pointing at the built binary).
set -euo pipefail
src=$1 server=$2
dir=$(mktemp -d "${TMPDIR:-/tmp}/brmr-unit.XXXXXX")
trap 'rm -rf -- "$dir"' EXIT
sed "s|@BINDIR@|$(dirname "$(realpath "$server")")|" "$src/tools/brmr-server@.service.in" \
	>"$dir/brmr-server@check.service"
out=$(cd "$dir" && systemd-analyze verify --man=no ./brmr-server@check.service 2>&1) || {
	echo "systemd-analyze verify failed: $out"
	exit 1
}
if [[ -n $out ]]; then
	echo "systemd-analyze verify warns about brmr-server@.service:"
	echo "$out"
	exit 1
fi
echo "brmr-server@.service: systemd-analyze verify is silent"
