#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# resync_path: a returning member copies what it missed from its peer, never
# through the client. Member 2 is killed, 64 MiB are written through NBD
# without it, the client goes idle, and member 2 comes back: while it copies
# those chunks (at least 64 MiB), the bytes on the client's sessions (its
# byte counters, headers included, every member) grow by a small fraction
# of that (hello, map pull, heartbeats). Then both members are identical.
# This is what the client's resync_bytes column ("always 0") promises,
# measured on the bytes the client really sent and received.
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

need nbdsh
need_bins

pool_up --members 2 --size 128M

# client_bytes: bytes on the client's sessions to every member, both ways.
client_bytes() {
	local j
	j=$("$BRMRCTL" status --socket "$PDIR/client.ctl" --json) || return 1
	"$PY" -c '
import json, sys
print(sum(m["tx_bytes"] + m["rx_bytes"] for m in json.load(sys.stdin)["members"]))
' <<<"$j"
}

"$POOL" kill --dir "$PDIR" 2
wait_for 15 state_in 2 failed || fail "client shows member 2 as '$(member_state 2)', expected failed"
log "member 2 killed; writing 64 MiB without it"
nbdsh -u "$URI" -c "
import os
data = os.urandom(64 << 20)
for off in range(0, len(data), 4 << 20):
    h.pwrite(data[off:off + (4 << 20)], (32 << 20) + off)
h.flush()
" || fail "writing through NBD failed"
DIRTY=$(dirty_for 2 1)
CHUNK=$(server_field 1 'p["chunk_size"]')
((DIRTY * CHUNK >= 64 << 20)) || fail "member 1 records $DIRTY chunks missed by member 2, expected 64 MiB of them"

BEFORE=$(client_bytes) || fail "no client status"
log "member 2 returns; the client is idle ($BEFORE bytes on its sessions so far)"
"$POOL" start --dir "$PDIR" 2
wait_for 60 healed 2 || fail "member 2 did not heal: $(member_state 2)"
AFTER=$(client_bytes) || fail "no client status"
COPIED=$(server_field 2 'p["resync"]["bytes"]')
[[ $COPIED =~ ^[0-9]+$ && $BEFORE =~ ^[0-9]+$ && $AFTER =~ ^[0-9]+$ ]] ||
	fail "unreadable counters: copied '$COPIED', client '$BEFORE' then '$AFTER'"
((COPIED >= 64 << 20)) || fail "member 2 copied $COPIED bytes, expected at least 64 MiB"
# Hello, maps pull, heartbeats: a few KiB. 2 % of the copy would already be
# 1.3 MiB, ten 128 KiB chunks' worth.
((AFTER - BEFORE < COPIED / 50)) ||
	fail "the client's sessions carried $((AFTER - BEFORE)) bytes while member 2 copied $COPIED"
log "member 2 copied $COPIED bytes from member 1; the client's sessions carried $((AFTER - BEFORE))"
"$POOL" compare --dir "$PDIR" 1 2 || fail "members 1 and 2 differ after the resync"
log "PASS"
