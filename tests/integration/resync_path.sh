#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# resync_path: a returning member copies what it missed from its peer, never
# through the client. 64 MiB are written through NBD with both members up;
# member 2 is killed, 32 MiB of them are written again and places in the
# other 32 MiB trimmed and zeroed (chunk-aligned and not), the client goes
# idle, and member 2 comes back: while it copies those chunks (at least 32
# MiB), the bytes on the client's sessions (its byte counters, headers
# included, every member) grow by a small fraction of that (hello, map
# pull, heartbeats). Then both members are identical, and the trimmed and
# zeroed ranges read as zeros (member 2 held data there before).
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

# write_random MIB: that many MiB of new random bytes at 32 MiB.
write_random() {
	nbdsh -u "$URI" -c "
import os
data = os.urandom($1 << 20)
for off in range(0, len(data), 4 << 20):
    h.pwrite(data[off:off + (4 << 20)], (32 << 20) + off)
h.flush()
"
}
# With both members first: member 2 then holds data where the trims and
# zeroes below go, which it must not keep.
write_random 64 || fail "writing through NBD failed"
"$POOL" kill --dir "$PDIR" 2
wait_for 15 state_in 2 failed || fail "client shows member 2 as '$(member_state 2)', expected failed"
log "member 2 killed; writing 32 MiB, trimming and zeroing without it"
write_random 32 || fail "writing through NBD failed"
# Whole chunks and parts of them, where only the first writes went.
nbdsh -u "$URI" -c "
h.trim(1 << 20, 70 << 20)
h.trim(36 << 10, (80 << 20) + (4 << 10))
h.zero(2 << 20, 84 << 20)
h.zero(8 << 10, (90 << 20) + (100 << 10))
h.flush()
" || fail "trimming or zeroing through NBD failed"
DIRTY=$(dirty_for 2 1)
CHUNK=$(server_field 1 'p["chunk_size"]')
((DIRTY * CHUNK >= 32 << 20)) || fail "member 1 records $DIRTY chunks missed by member 2, expected 32 MiB of them"

BEFORE=$(client_bytes) || fail "no client status"
log "member 2 returns; the client is idle ($BEFORE bytes on its sessions so far)"
"$POOL" start --dir "$PDIR" 2
wait_for 60 healed 2 || fail "member 2 did not heal: $(member_state 2)"
AFTER=$(client_bytes) || fail "no client status"
COPIED=$(server_field 2 'p["resync"]["bytes"]')
[[ $COPIED =~ ^[0-9]+$ && $BEFORE =~ ^[0-9]+$ && $AFTER =~ ^[0-9]+$ ]] ||
	fail "unreadable counters: copied '$COPIED', client '$BEFORE' then '$AFTER'"
((COPIED >= 32 << 20)) || fail "member 2 copied $COPIED bytes, expected at least 32 MiB"
# Hello, maps pull, heartbeats: a few KiB. 2 % of the copy would already be
# 0.6 MiB, five 128 KiB chunks' worth.
((AFTER - BEFORE < COPIED / 50)) ||
	fail "the client's sessions carried $((AFTER - BEFORE)) bytes while member 2 copied $COPIED"
log "member 2 copied $COPIED bytes from member 1; the client's sessions carried $((AFTER - BEFORE))"
"$POOL" compare --dir "$PDIR" 1 2 || fail "members 1 and 2 differ after the resync"
# Identical members, so the pool's reads show what each holds there.
nbdsh -u "$URI" -c "
for length, off in ((1 << 20, 70 << 20), (36 << 10, (80 << 20) + (4 << 10)),
                    (2 << 20, 84 << 20), (8 << 10, (90 << 20) + (100 << 10))):
    assert h.pread(length, off) == bytes(length), 'range at %d is not zeros' % off
    assert h.pread(4096, off + length) != bytes(4096), 'the write after %d is gone' % off
" || fail "a trimmed or zeroed range does not read as zeros after the resync"
log "PASS"
