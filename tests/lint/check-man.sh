#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# check-man.sh SRC_DIR BRMR_SERVER BRMRCTL NBD_BRMR: every long option that
# a program's --help lists (a help line starting with it) is in its manual
# page, and each brmrctl verb's options are in that verb's section; the
# pages format without a groff warning.
set -euo pipefail
src=$1 server=$2 ctl=$3 nbd=$4
man=$src/docs/man
bad=0

# Long options that start a help line ("  --opt", "  -p, --opt").
help_options() {
	sed -n -E 's/^ {1,8}(-[a-zA-Z], )?(--[a-z][a-z0-9-]*).*/\2/p' | sort -u
}

# The page as plain text: troff's \- becomes -, requests stay.
page_text() { sed 's/\\-/-/g' "$1"; }

# The part of a page from ".SS NAME" to the next .SS or .SH.
section_text() {
	page_text "$1" | awk -v name="$2" '
		/^\.S[SH] / { on = ($1 == ".SS" && $2 == name) ; next }
		on { print }'
}

check() {
	local what=$1 text=$2 opt
	shift 2
	for opt in "$@"; do
		if ! grep -qE -- "${opt}([^a-z0-9-]|$)" <<<"$text"; then
			echo "$what: $opt is in --help but not in the manual page"
			bad=1
		fi
	done
}

for page in "$man"/*.[58]; do
	if out=$(groff -man -Tutf8 -ww -z "$page" 2>&1) && [[ -z $out ]]; then
		:
	else
		echo "$page: groff warnings: $out"
		bad=1
	fi
done

mapfile -t opts < <("$server" --help | help_options)
check "brmr-server.8" "$(page_text "$man/brmr-server.8")" "${opts[@]}"
mapfile -t opts < <("$nbd" --help | help_options)
check "nbd-brmr.8" "$(page_text "$man/nbd-brmr.8")" "${opts[@]}"

verbs=$("$ctl" --help | sed -n -E 's/^  ([a-z][a-z-]*) .*/\1/p')
[[ -n $verbs ]] || { echo "brmrctl --help lists no verbs"; exit 1; }
for verb in $verbs; do
	text=$(section_text "$man/brmrctl.8" "$verb")
	if [[ -z $text ]]; then
		echo "brmrctl.8: no section .SS $verb"
		bad=1
		continue
	fi
	mapfile -t opts < <("$ctl" "$verb" --help | help_options)
	check "brmrctl.8 ($verb)" "$text" "${opts[@]}"
done

((bad == 0)) && echo "manual pages: every --help option documented, no groff warnings"
exit "$bad"
