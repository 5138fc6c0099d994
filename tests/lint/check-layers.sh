#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# check-layers.sh SRC_DIR: the include rules that keep the layers visible.
#
#  1. <rdma/...> (libfabric) is included only under librmr/transport/fabric/.
#  2. librmr/core/ and librmr/proto/ include no transport header: nothing
#     from librmr/transport/ and no transport source. The core reaches
#     transports through include/rmr/transport.h and the registry in
#     core/transport_registry.c, the one file allowed "transports.h".
#  3. examples/ and tools/ include only public headers (<rmr/...>), system
#     headers, and their own headers next to them — never an internal header
#     of librmr or libbrmr.
#
# Prints every offending line as FILE:LINE: TEXT (rule) and exits 1.
#
# check-layers.sh --self-test: runs the checks on a small tree with one
# violation of each rule and on a clean one, to show the checks bite.
set -euo pipefail

# Files to check: C sources and headers, without build trees and scratch.
c_files() {
	(cd "$1" && find . \( -path ./.git -o -path ./scratch -o -path './build*' \
		-o -path ./_build -o -path ./subprojects \) -prune -o \
		-type f \( -name '*.c' -o -name '*.h' -o -name '*.cc' -o -name '*.cpp' \) -print |
		sed 's|^\./||' | LC_ALL=C sort)
}

# Lines "LINENO<TAB>KIND<TAB>TARGET<TAB>TEXT" for each #include of FILE;
# KIND is < or ".
includes() {
	awk '
	/^[ \t]*#[ \t]*include[ \t]*[<"]/ {
		line = $0
		sub(/^[ \t]*#[ \t]*include[ \t]*/, "", line)
		kind = substr(line, 1, 1)
		close_ch = (kind == "<") ? ">" : "\""
		rest = substr(line, 2)
		n = index(rest, close_ch)
		if (n == 0)
			next
		printf "%d\t%s\t%s\t%s\n", NR, kind, substr(rest, 1, n - 1), $0
	}' "$1"
}

check_tree() {
	local src=$1 bad=0 f lineno kind target text base resolved root
	local -A internal=() transport=()

	# Builtins, not basename/dirname, per line: the tree has thousands of includes.
	root=$(realpath -m "$src")

	# Internal headers (by base name) of the libraries, and transport files.
	while IFS= read -r f; do
		case $f in
		librmr/* | libbrmr/*) internal[${f##*/}]=$f ;;
		esac
		case $f in
		librmr/transport/*) transport[${f##*/}]=$f ;;
		esac
	done < <(c_files "$src")

	report() {
		printf '%s:%s: %s   <- %s\n' "$1" "$2" "$3" "$4"
		bad=1
	}

	while IFS= read -r f; do
		while IFS=$'\t' read -r lineno kind target text; do
			base=${target##*/}
			# Rule 1
			if [[ $kind == '<' && $target == rdma/* && $f != librmr/transport/fabric/* ]]; then
				report "$f" "$lineno" "$text" "<rdma/...> outside librmr/transport/fabric/"
			fi
			# Rule 2
			if [[ $f == librmr/core/* || $f == librmr/proto/* ]]; then
				if [[ $kind == '<' && $target == rdma/* ]]; then
					: # reported by rule 1
				elif [[ $target == */transport/* || $target == transport/* ||
					$target == *fabric* || -n ${transport[$base]:-} ]]; then
					if [[ $f == librmr/core/transport_registry.c && $base == transports.h ]]; then
						:
					elif [[ $kind == '<' && $target == rmr/transport.h ]]; then
						:
					else
						report "$f" "$lineno" "$text" "transport header in the core (use <rmr/transport.h>)"
					fi
				fi
			fi
			# Rule 3
			if [[ $f == examples/* || $f == tools/* ]]; then
				if [[ $kind == '<' ]]; then
					if [[ $target == rmr/* ]]; then
						[[ -f $src/include/$target ]] ||
							report "$f" "$lineno" "$text" "no such public header include/$target"
					elif [[ -n ${internal[$base]:-} && $target != */* ]]; then
						report "$f" "$lineno" "$text" "internal header ${internal[$base]} in ${f%/*}/ (only <rmr/...> and system headers)"
					elif [[ $target == librmr/* || $target == libbrmr/* ]]; then
						report "$f" "$lineno" "$text" "internal header in ${f%/*}/"
					fi
				else
					resolved=$(realpath -m "$src/${f%/*}/$target")
					if [[ ! -f $resolved && -n ${internal[$base]:-} ]]; then
						report "$f" "$lineno" "$text" "internal header ${internal[$base]} (only <rmr/...>, system headers and its own headers)"
					elif [[ ! -f $resolved ]]; then
						report "$f" "$lineno" "$text" "\"$target\" is not a header next to it"
					elif [[ $resolved != "$root"/examples/* && $resolved != "$root"/tools/* ]]; then
						report "$f" "$lineno" "$text" "reaches outside examples/ and tools/"
					fi
				fi
			fi
		done < <(includes "$src/$f")
	done < <(c_files "$src")
	return "$bad"
}

self_test() {
	local t rc=0 out
	t=$(mktemp -d)
	SELFTEST_DIR=$t
	trap 'rm -rf -- "$SELFTEST_DIR"' EXIT
	mkdir -p "$t"/include/rmr "$t"/librmr/{core,proto,util,transport/fabric} \
		"$t"/libbrmr "$t"/tools "$t"/examples/nbd
	touch "$t"/include/rmr/{rmr.h,transport.h} "$t"/librmr/util/log.h \
		"$t"/librmr/transport/transports.h "$t"/librmr/transport/fabric/fabric_common.h \
		"$t"/libbrmr/crc32c.h "$t"/examples/nbd/local.h
	printf '#include <rdma/fabric.h>\n#include "fabric_common.h"\n' >"$t"/librmr/transport/fabric/fabric.c
	printf '#include <rmr/transport.h>\n#include "transports.h"\n' >"$t"/librmr/core/transport_registry.c
	printf '#include <stdio.h>\n#include <rmr/rmr.h>\n#include "local.h"\n' >"$t"/examples/nbd/main.c
	printf '#include <stdlib.h>\n#include <rmr/rmr.h>\n' >"$t"/tools/ctl.c
	printf '#include "log.h"\n#include <rmr/transport.h>\n' >"$t"/librmr/core/client.c
	if ! out=$(check_tree "$t"); then
		echo "self-test: the clean tree was flagged:"
		echo "$out"
		return 1
	fi
	# One violation of each rule.
	printf '#include <rdma/fi_domain.h>\n' >"$t"/librmr/core/loop.c
	printf '#include "transports.h"\n' >"$t"/librmr/core/client_io.c
	printf '#include "../transport/fabric/fabric_common.h"\n' >"$t"/librmr/proto/wire.c
	printf '#include "crc32c.h"\n' >"$t"/tools/srv.c
	printf '#  include <log.h>\n' >"$t"/examples/nbd/conn.c
	printf '#include "../../librmr/util/log.h"\n' >"$t"/examples/nbd/x.c
	out=$(check_tree "$t") && rc=1
	for want in librmr/core/loop.c:1 librmr/core/client_io.c:1 librmr/proto/wire.c:1 \
		tools/srv.c:1 examples/nbd/conn.c:1 examples/nbd/x.c:1; do
		grep -q "^$want:" <<<"$out" || {
			echo "self-test: $want was not flagged"
			rc=1
		}
	done
	n=$(grep -c . <<<"$out" || true)
	[[ $n == 6 ]] || {
		echo "self-test: expected 6 findings, got $n:"
		echo "$out"
		rc=1
	}
	((rc == 0)) && echo "self-test: ok (clean tree passes; 6 planted violations found)"
	return "$rc"
}

if [[ ${1:-} == --self-test ]]; then
	self_test
	exit
fi
SRC=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
if out=$(check_tree "$SRC"); then
	echo "layers: ok ($(c_files "$SRC" | wc -l) files checked)"
else
	echo "layers: include rules broken:"
	echo "$out"
	exit 1
fi
