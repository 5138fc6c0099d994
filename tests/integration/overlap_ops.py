# SPDX-License-Identifier: LGPL-2.1-or-later
"""Overlapping requests in flight, through NBD (tests/integration/overlap.sh).

  overlap_ops.py URI STATE OPS SEED

Sends OPS random requests, 64 in flight, into a 4 MiB region: writes (a
third with FUA), trims, write-zeroes (with and without NBD_CMD_FLAG_NO_HOLE)
and flushes, at 512-byte granularity, so that most of them overlap others
in flight. NBD leaves the order of overlapping requests in flight to the
server, so a sector that two of them covered at once holds either: it is
left out of the model until a request alone on it decides it again. Every
request must succeed. The model (bytes, and which sectors it decides) is
kept in STATE across runs; `check` reads the region back against it.

  overlap_ops.py URI STATE check
"""
import os
import pickle
import random
import sys

import nbd

BASE = 16 << 20
REGION = 4 << 20
SECTOR = 512
QD = 64


def load(path):
    if os.path.exists(path):
        with open(path, "rb") as f:
            return pickle.load(f)
    return bytearray(REGION), bytearray(REGION // SECTOR)  # bytes, decided


def check(h, state):
    model, decided = state
    data = h.pread(REGION, BASE)
    bad = [s for s in range(len(decided))
           if decided[s] and data[s * SECTOR:(s + 1) * SECTOR] != model[s * SECTOR:(s + 1) * SECTOR]]
    if bad:
        sys.exit("%d sectors differ from the model, the first at byte %d"
                 % (len(bad), BASE + bad[0] * SECTOR))
    print("overlap_ops: %d of %d sectors decided, all as the model says"
          % (sum(decided), len(decided)))


def run(h, state, nops, rng):
    model, decided = state
    busy = [0] * (REGION // SECTOR)  # requests in flight over each sector
    inflight = {}  # cookie -> [first sector, sectors, bytes or None, raced]
    counts = {}
    sent = 0
    while sent < nops or inflight:
        while sent < nops and len(inflight) < QD:
            kind = rng.choice(("write", "write", "fua", "trim", "zero", "zero-nohole", "flush"))
            counts[kind] = counts.get(kind, 0) + 1
            sent += 1
            if kind == "flush":
                inflight[h.aio_flush()] = [0, 0, None, False]
                continue
            first = rng.randrange(REGION // SECTOR)
            n = rng.randint(1, min(128, REGION // SECTOR - first))
            off, length = BASE + first * SECTOR, n * SECTOR
            if kind in ("write", "fua"):
                data = rng.randbytes(length)
                cookie = h.aio_pwrite(nbd.Buffer.from_bytearray(bytearray(data)), off,
                                      flags=nbd.CMD_FLAG_FUA if kind == "fua" else 0)
            elif kind == "trim":
                data = bytes(length)  # nbd-brmr punches a hole: zeros (resync_path.sh)
                cookie = h.aio_trim(length, off)
            else:
                data = bytes(length)
                cookie = h.aio_zero(length, off,
                                    flags=nbd.CMD_FLAG_NO_HOLE if kind == "zero-nohole" else 0)
            raced = any(busy[s] for s in range(first, first + n))
            if raced:
                for other in inflight.values():
                    if other[1] and other[0] < first + n and first < other[0] + other[1]:
                        other[3] = True
            for s in range(first, first + n):
                busy[s] += 1
            inflight[cookie] = [first, n, data, raced]
        h.poll(-1)
        for cookie in [c for c in inflight if h.aio_command_completed(c)]:
            first, n, data, raced = inflight.pop(cookie)
            for s in range(first, first + n):
                busy[s] -= 1
            if n:
                model[first * SECTOR:(first + n) * SECTOR] = data
                decided[first:first + n] = (b"\0" if raced else b"\1") * n
    h.flush()
    print("overlap_ops: %d requests: %s" % (nops, ", ".join(
        "%d %s" % (v, k) for k, v in sorted(counts.items()))))


def main():
    uri, path = sys.argv[1], sys.argv[2]
    h = nbd.NBD()
    h.connect_uri(uri)
    state = load(path)
    if sys.argv[3] == "check":
        check(h, state)
    else:
        run(h, state, int(sys.argv[3]), random.Random(int(sys.argv[4])))
        with open(path + ".new", "wb") as f:
            pickle.dump(state, f)
        os.replace(path + ".new", path)
    h.shutdown()


if __name__ == "__main__":
    main()
