#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# check-doxygen.sh SRC_DIR: run doxygen over the public headers into a
# temporary folder and fail on any warning (an undocumented function, type,
# member or enum value, or a malformed comment).
set -euo pipefail
src=$1
out=$(mktemp -d "${TMPDIR:-/tmp}/brmr-doxygen.XXXXXX")
trap 'rm -rf -- "$out"' EXIT
sed -e "s|@VERSION@|check|" -e "s|@SRCDIR@|$src|" -e "s|@OUTDIR@|$out|" \
	"$src/docs/Doxyfile.in" >"$out/Doxyfile"
doxygen "$out/Doxyfile"
if [[ -s $out/warnings.log ]]; then
	echo "doxygen warnings in the public headers:"
	cat "$out/warnings.log"
	exit 1
fi
echo "public headers: no doxygen warnings"
