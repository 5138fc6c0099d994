#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Feed nbd-brmr malformed and borderline NBD traffic over raw sockets.

Checks that the server answers every invalid request the way the NBD spec
asks (error replies, or a clean disconnect where nothing else is safe), that
it never dies on it, and that after all of it a fresh connection still does
a correct write + read round trip.

Uses the standard library only. Run it with Debian's /usr/bin/python3.
The export (at least 64 MiB) is written to, a few MiB from offset 1 MiB:
point it at a scratch pool. Exit status: 0 all passed, 1 a check failed, 2 usage.
"""

import argparse
import errno
import os
import socket
import struct
import sys
import threading
import time

# ---- wire constants (doc/proto.md) ---------------------------------------

NBDMAGIC = 0x4E42444D41474943
IHAVEOPT = 0x49484156454F5054
REP_MAGIC = 0x0003E889045565A9
REQUEST_MAGIC = 0x25609513
SIMPLE_REPLY_MAGIC = 0x67446698

FLAG_FIXED_NEWSTYLE = 1 << 0
FLAG_NO_ZEROES = 1 << 1
FLAG_C_FIXED_NEWSTYLE = 1 << 0
FLAG_C_NO_ZEROES = 1 << 1

OPT_EXPORT_NAME = 1
OPT_ABORT = 2
OPT_LIST = 3
OPT_STARTTLS = 5
OPT_INFO = 6
OPT_GO = 7
OPT_STRUCTURED_REPLY = 8

REP_ACK = 1
REP_SERVER = 2
REP_INFO = 3
REP_ERR_UNSUP = 2**31 + 1
REP_ERR_INVALID = 2**31 + 3
REP_ERR_UNKNOWN = 2**31 + 6

INFO_EXPORT = 0
INFO_NAME = 1
INFO_DESCRIPTION = 2
INFO_BLOCK_SIZE = 3

TF_HAS_FLAGS = 1 << 0
TF_READ_ONLY = 1 << 1
TF_SEND_FLUSH = 1 << 2
TF_SEND_FUA = 1 << 3
TF_SEND_TRIM = 1 << 5
TF_SEND_WRITE_ZEROES = 1 << 6
TF_CAN_MULTI_CONN = 1 << 8

CMD_READ = 0
CMD_WRITE = 1
CMD_DISC = 2
CMD_FLUSH = 3
CMD_TRIM = 4
CMD_CACHE = 5
CMD_WRITE_ZEROES = 6
CMD_BLOCK_STATUS = 7

CMD_FLAG_FUA = 1 << 0
CMD_FLAG_NO_HOLE = 1 << 1
CMD_FLAG_DF = 1 << 2

EPERM, EIO, ENOMEM, EINVAL, ENOSPC, EOVERFLOW, ESHUTDOWN = 1, 5, 12, 22, 28, 75, 108
ERRNAMES = {0: "OK", 1: "EPERM", 5: "EIO", 12: "ENOMEM", 22: "EINVAL",
            28: "ENOSPC", 75: "EOVERFLOW", 95: "ENOTSUP", 108: "ESHUTDOWN"}

MAX_PAYLOAD = 32 * 1024 * 1024  # what nbd-brmr advertises
TIMEOUT = 10.0                  # seconds for any single exchange
BASE = 1024 * 1024              # offset of the region the tests write


class Failure(Exception):
    """A check failed; the message says which and why."""


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def errname(e):
    return ERRNAMES.get(e, str(e))


# ---- connection helpers --------------------------------------------------

class Conn:
    """One raw NBD connection."""

    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(TIMEOUT)
        try:
            self.s.connect(path)
        except OSError as e:
            raise Failure("cannot connect to %s: %s" % (path, e))
        self.size = None
        self.tflags = None
        self.block = {}

    def close(self):
        self.s.close()

    def send(self, data):
        self.s.sendall(data)

    def recv(self, n):
        buf = bytearray()
        while len(buf) < n:
            try:
                chunk = self.s.recv(n - len(buf))
            except socket.timeout:
                raise Failure("timed out waiting for %d bytes from the server" % (n - len(buf)))
            if not chunk:
                raise Failure("server closed the connection unexpectedly "
                              "(got %d of %d bytes)" % (len(buf), n))
            buf += chunk
        return bytes(buf)

    def expect_closed(self, what):
        """The server must close the connection (EOF or reset) in time."""
        deadline = time.monotonic() + TIMEOUT
        while True:
            left = deadline - time.monotonic()
            check(left > 0, "%s: server did not close the connection" % what)
            self.s.settimeout(left)
            try:
                data = self.s.recv(65536)
            except socket.timeout:
                continue
            except ConnectionResetError:
                return
            except OSError as e:
                if e.errno in (errno.ECONNRESET, errno.EPIPE):
                    return
                raise
            if not data:
                return
            # Replies to earlier requests may still come first; drain them.

    # -- handshake --

    def greeting(self, cflags=FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES):
        magic, opt, hflags = struct.unpack(">QQH", self.recv(18))
        check(magic == NBDMAGIC, "bad NBDMAGIC 0x%x" % magic)
        check(opt == IHAVEOPT, "not newstyle: 0x%x" % opt)
        check(hflags & FLAG_FIXED_NEWSTYLE, "server does not offer fixed newstyle")
        self.send(struct.pack(">I", cflags))
        return hflags

    def send_opt(self, opt, data=b""):
        self.send(struct.pack(">QII", IHAVEOPT, opt, len(data)) + data)

    def recv_opt_reply(self, opt):
        magic, ropt, rtype, rlen = struct.unpack(">QIII", self.recv(20))
        check(magic == REP_MAGIC, "bad option reply magic 0x%x" % magic)
        check(ropt == opt, "option reply for %d, expected %d" % (ropt, opt))
        check(rlen <= 65536, "option reply of %d bytes" % rlen)
        return rtype, self.recv(rlen)

    def info_go(self, opt, name=b"", infos=(INFO_BLOCK_SIZE,)):
        """Send INFO or GO; return the list of (type, data) replies, the
        last being ACK or an error."""
        data = struct.pack(">I", len(name)) + name + struct.pack(">H", len(infos))
        data += b"".join(struct.pack(">H", i) for i in infos)
        self.send_opt(opt, data)
        replies = []
        while True:
            rtype, rdata = self.recv_opt_reply(opt)
            replies.append((rtype, rdata))
            if rtype != REP_INFO:
                break
            itype = struct.unpack(">H", rdata[:2])[0]
            if itype == INFO_EXPORT:
                check(len(rdata) == 12, "NBD_INFO_EXPORT of %d bytes" % len(rdata))
                self.size, self.tflags = struct.unpack(">QH", rdata[2:])
            elif itype == INFO_BLOCK_SIZE:
                check(len(rdata) == 14, "NBD_INFO_BLOCK_SIZE of %d bytes" % len(rdata))
                mn, pref, mx = struct.unpack(">III", rdata[2:])
                self.block = {"min": mn, "preferred": pref, "max": mx}
        return replies

    def go(self, name=b""):
        replies = self.info_go(OPT_GO, name)
        check(replies[-1][0] == REP_ACK,
              "NBD_OPT_GO answered 0x%x, expected ACK" % replies[-1][0])
        check(self.size is not None, "no NBD_INFO_EXPORT before ACK")
        return self

    # -- transmission --

    def request(self, cmd, cookie, offset, length, flags=0, payload=b""):
        self.send(struct.pack(">IHHQQI", REQUEST_MAGIC, flags, cmd, cookie, offset, length)
                  + payload)

    def reply(self, read_len=0):
        """Return (error, cookie, data); data only for a successful read."""
        magic, err, cookie = struct.unpack(">IIQ", self.recv(16))
        check(magic == SIMPLE_REPLY_MAGIC, "bad reply magic 0x%x" % magic)
        data = self.recv(read_len) if err == 0 and read_len else b""
        return err, cookie, data

    def do(self, cmd, offset, length, flags=0, payload=b"", cookie=0x1234, read=False):
        self.request(cmd, cookie, offset, length, flags, payload)
        err, rcookie, data = self.reply(length if read else 0)
        check(rcookie == cookie, "reply cookie 0x%x, expected 0x%x" % (rcookie, cookie))
        return err, data

    def disc(self):
        self.request(CMD_DISC, 0, 0, 0)
        self.expect_closed("after NBD_CMD_DISC")
        self.close()


def connect_go(path):
    c = Conn(path)
    c.greeting()
    return c.go()


def expect_err(c, what, want, cmd, offset, length, flags=0, payload=b"", read=False):
    err, _ = c.do(cmd, offset, length, flags, payload, read=read)
    check(err == want, "%s: got %s, expected %s" % (what, errname(err), errname(want)))


def pattern(n, seed):
    return bytes((seed + i * 7) & 0xFF for i in range(n))


def roundtrip(path, seed, what):
    """Fresh connection, write, read back, compare."""
    c = connect_go(path)
    data = pattern(65536, seed)
    err, _ = c.do(CMD_WRITE, BASE, len(data), payload=data)
    check(err == 0, "%s: write failed with %s" % (what, errname(err)))
    err, back = c.do(CMD_READ, BASE, len(data), read=True)
    check(err == 0, "%s: read failed with %s" % (what, errname(err)))
    check(back == data, "%s: read back different data" % what)
    c.disc()


# ---- the tests -----------------------------------------------------------

def t_handshake(path):
    c = Conn(path)
    hflags = c.greeting()
    check(hflags & FLAG_NO_ZEROES, "server does not offer NO_ZEROES")
    replies = c.info_go(OPT_INFO, b"", (INFO_NAME, INFO_DESCRIPTION, INFO_BLOCK_SIZE))
    check(replies[-1][0] == REP_ACK, "NBD_OPT_INFO answered 0x%x" % replies[-1][0])
    types = [struct.unpack(">H", d[:2])[0] for t, d in replies if t == REP_INFO]
    check(INFO_EXPORT in types and INFO_BLOCK_SIZE in types,
          "NBD_OPT_INFO infos %s lack EXPORT or BLOCK_SIZE" % types)
    want = (TF_HAS_FLAGS | TF_SEND_FLUSH | TF_SEND_FUA | TF_SEND_TRIM | TF_SEND_WRITE_ZEROES |
            TF_CAN_MULTI_CONN)
    check(c.tflags & want == want, "transmission flags 0x%x lack 0x%x" % (c.tflags, want))
    check(not c.tflags & TF_READ_ONLY, "export is read-only")
    check(c.block.get("max") == MAX_PAYLOAD, "max payload %s" % c.block.get("max"))
    check(c.size >= 64 * 1024 * 1024, "export too small for the tests: %d bytes "
          "(needs 64 MiB)" % c.size)
    # LIST: at least one SERVER reply, then ACK.
    c.send_opt(OPT_LIST)
    names = []
    while True:
        t, d = c.recv_opt_reply(OPT_LIST)
        if t != REP_SERVER:
            break
        n = struct.unpack(">I", d[:4])[0]
        names.append(d[4:4 + n])
    check(t == REP_ACK and names, "NBD_OPT_LIST: reply 0x%x, names %s" % (t, names))
    # The listed name is accepted too, then ABORT ends haggling politely.
    replies = c.info_go(OPT_INFO, names[0])
    check(replies[-1][0] == REP_ACK, "NBD_OPT_INFO with the listed name %r failed" % names[0])
    c.send_opt(OPT_ABORT)
    t, _ = c.recv_opt_reply(OPT_ABORT)
    check(t == REP_ACK, "NBD_OPT_ABORT answered 0x%x" % t)
    c.expect_closed("after NBD_OPT_ABORT")
    c.close()


def t_unknown_options(path):
    c = Conn(path)
    c.greeting()
    for opt, data in ((0x1234, b"hello"), (OPT_STRUCTURED_REPLY, b""),
                      (OPT_STARTTLS, b""), (0x7FFFFFFF, b"")):
        c.send_opt(opt, data)
        t, _ = c.recv_opt_reply(opt)
        check(t == REP_ERR_UNSUP, "option %d answered 0x%x, expected ERR_UNSUP" % (opt, t))
    # Unknown export names and malformed INFO data are errors, not hangs.
    replies = c.info_go(OPT_INFO, b"no-such-export")
    check(replies[-1][0] == REP_ERR_UNKNOWN,
          "unknown export answered 0x%x, expected ERR_UNKNOWN" % replies[-1][0])
    c.send_opt(OPT_GO, struct.pack(">I", 100) + b"x")  # name length beyond the data
    t, _ = c.recv_opt_reply(OPT_GO)
    check(t == REP_ERR_INVALID, "inconsistent GO answered 0x%x, expected ERR_INVALID" % t)
    c.send_opt(OPT_INFO, struct.pack(">IH", 0, 3) + b"\0\0")  # 3 infos, 1 sent
    t, _ = c.recv_opt_reply(OPT_INFO)
    check(t == REP_ERR_INVALID, "short INFO answered 0x%x, expected ERR_INVALID" % t)
    c.send_opt(OPT_LIST, b"junk")
    t, _ = c.recv_opt_reply(OPT_LIST)
    check(t == REP_ERR_INVALID, "LIST with data answered 0x%x, expected ERR_INVALID" % t)
    # After all that, the same connection still gets in.
    c.go()
    err, _ = c.do(CMD_READ, 0, 512, read=True)
    check(err == 0, "read after option errors failed: %s" % errname(err))
    c.disc()


def t_export_name_fallback(path):
    c = Conn(path)
    c.greeting()
    c.send_opt(OPT_EXPORT_NAME, b"")
    size, tflags = struct.unpack(">QH", c.recv(10))  # NO_ZEROES: no padding
    check(size > 0 and tflags & TF_HAS_FLAGS, "EXPORT_NAME reply size %d flags 0x%x"
          % (size, tflags))
    c.size = size
    err, _ = c.do(CMD_READ, 0, 4096, read=True)
    check(err == 0, "read after EXPORT_NAME failed: %s" % errname(err))
    c.disc()
    # Without NO_ZEROES the 124 bytes of padding follow.
    c = Conn(path)
    c.greeting(FLAG_C_FIXED_NEWSTYLE)
    c.send_opt(OPT_EXPORT_NAME, b"")
    c.recv(10 + 124)
    err, _ = c.do(CMD_READ, 0, 512, read=True)
    check(err == 0, "read after padded EXPORT_NAME failed: %s" % errname(err))
    c.disc()
    # An unknown name has no error path: the server hangs up.
    c = Conn(path)
    c.greeting()
    c.send_opt(OPT_EXPORT_NAME, b"no-such-export")
    c.expect_closed("EXPORT_NAME with an unknown name")
    c.close()


def t_garbage_haggling(path):
    # Unknown client flags: the spec says drop.
    c = Conn(path)
    c.greeting(0x80000000 | FLAG_C_FIXED_NEWSTYLE)
    c.expect_closed("unknown client flags")
    c.close()
    # Garbage instead of an option header.
    c = Conn(path)
    c.greeting()
    c.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    c.expect_closed("garbage instead of an option")
    c.close()
    # An option announcing gigabytes of data.
    c = Conn(path)
    c.greeting()
    c.send(struct.pack(">QII", IHAVEOPT, OPT_GO, 0xFFFFFFF0) + b"\0" * 64)
    c.expect_closed("option with a huge length")
    c.close()
    # Hang-ups in the middle of the greeting and of an option.
    for partial in (b"\0\0", struct.pack(">QI", IHAVEOPT, OPT_GO),
                    struct.pack(">QII", IHAVEOPT, OPT_GO, 100) + b"\0" * 10):
        c = Conn(path)
        if len(partial) > 2:
            c.greeting()
        else:
            c.recv(18)  # greeting only; then half of the client flags
        c.send(partial)
        c.close()


def t_bad_request_magic(path):
    c = connect_go(path)
    c.send(struct.pack(">IHHQQI", 0xDEADBEEF, 0, CMD_READ, 1, 0, 512))
    c.expect_closed("bad request magic")
    c.close()
    roundtrip(path, 1, "new connection after bad request magic")


def zero_region(c, length):
    err, _ = c.do(CMD_WRITE_ZEROES, BASE, length)
    check(err == 0, "WRITE_ZEROES of the test region failed: %s" % errname(err))


def t_unknown_commands(path):
    c = connect_go(path)
    zero_region(c, 4096)
    expect_err(c, "unknown command 42", EINVAL, 42, 0, 512)
    expect_err(c, "unknown command 0xffff", EINVAL, 0xFFFF, 0, 0)
    expect_err(c, "NBD_CMD_CACHE (not advertised)", EINVAL, CMD_CACHE, 0, 4096)
    expect_err(c, "NBD_CMD_BLOCK_STATUS (no meta context)", EINVAL, CMD_BLOCK_STATUS, 0, 4096)
    expect_err(c, "READ with unknown flag", EINVAL, CMD_READ, 0, 512, flags=1 << 9, read=True)
    expect_err(c, "READ with DF (no structured replies)", EINVAL, CMD_READ, 0, 512,
               flags=CMD_FLAG_DF, read=True)
    # A refused WRITE's payload must still be consumed...
    expect_err(c, "WRITE with NO_HOLE", EINVAL, CMD_WRITE, BASE, 4096,
               flags=CMD_FLAG_NO_HOLE, payload=b"\xee" * 4096)
    expect_err(c, "TRIM with NO_HOLE", EINVAL, CMD_TRIM, BASE, 4096, flags=CMD_FLAG_NO_HOLE)
    expect_err(c, "FLUSH with a length", EINVAL, CMD_FLUSH, 0, 4096)
    # ...so the stream is still in sync, and nothing was written.
    err, data = c.do(CMD_READ, BASE, 4096, read=True)
    check(err == 0 and data == b"\0" * 4096, "stream out of sync after refused WRITE")
    expect_err(c, "FUA on READ (allowed once SEND_FUA is advertised)", 0, CMD_READ, 0, 512,
               flags=CMD_FLAG_FUA, read=True)
    c.disc()


def t_out_of_range(path):
    c = connect_go(path)
    size = c.size
    expect_err(c, "READ across the end", EINVAL, CMD_READ, size - 512, 1024, read=True)
    expect_err(c, "READ beyond the end", EINVAL, CMD_READ, size, 512, read=True)
    expect_err(c, "READ with 64-bit wrap", EINVAL, CMD_READ, 2**64 - 512, 1024, read=True)
    expect_err(c, "WRITE across the end", ENOSPC, CMD_WRITE, size - 512, 1024,
               payload=b"\0" * 1024)
    expect_err(c, "WRITE beyond the end", ENOSPC, CMD_WRITE, size + 4096, 512,
               payload=b"\0" * 512)
    expect_err(c, "TRIM across the end", EINVAL, CMD_TRIM, size - 512, 1024)
    expect_err(c, "WRITE_ZEROES across the end", ENOSPC, CMD_WRITE_ZEROES, size - 512, 1024)
    expect_err(c, "zero-length READ past the end", EINVAL, CMD_READ, size + 1, 0, read=True)
    # Zero-length requests inside the device are no-ops; the last byte works.
    expect_err(c, "zero-length READ", 0, CMD_READ, BASE, 0, read=True)
    expect_err(c, "zero-length WRITE", 0, CMD_WRITE, BASE, 0)
    expect_err(c, "zero-length TRIM", 0, CMD_TRIM, size, 0)
    expect_err(c, "READ of the last byte", 0, CMD_READ, size - 1, 1, read=True)
    c.disc()


def t_oversized(path):
    c = connect_go(path)
    zero_region(c, 4096)
    # No payload follows a READ: refused, connection kept.
    expect_err(c, "READ above max payload", EINVAL, CMD_READ, 0, MAX_PAYLOAD + 4096, read=True)
    # A WRITE slightly above the maximum is read, dropped and refused.
    big = MAX_PAYLOAD + 4096
    c.request(CMD_WRITE, 77, BASE, big)
    chunk = b"\xab" * (1024 * 1024)
    sent = 0
    while sent < big:
        n = min(len(chunk), big - sent)
        c.send(chunk[:n])
        sent += n
    err, cookie, _ = c.reply()
    check(cookie == 77 and err == EINVAL, "oversized WRITE: got %s cookie %d, expected "
          "EINVAL" % (errname(err), cookie))
    err, data = c.do(CMD_READ, BASE, 4096, read=True)
    check(err == 0 and data == b"\0" * 4096, "oversized WRITE was written or desynced")
    # The maximum itself is fine.
    err, _ = c.do(CMD_READ, 0, MAX_PAYLOAD, read=True)
    check(err == 0, "READ of exactly max payload failed: %s" % errname(err))
    # A WRITE announcing ~4 GiB: the server cannot sensibly skip it.
    c.request(CMD_WRITE, 78, 0, 0xFFFFFFF0, payload=b"\0" * 4096)
    c.expect_closed("WRITE of ~4 GiB")
    c.close()


def t_truncated(path):
    hdr = struct.pack(">IHHQQI", REQUEST_MAGIC, 0, CMD_WRITE, 5, BASE, 65536)
    for tail in (hdr[:10], hdr, hdr + b"\1" * 1000):
        c = connect_go(path)
        c.send(tail)
        c.close()
    # Pipelined requests left unanswered when the client hangs up.
    c = connect_go(path)
    for i in range(32):
        c.request(CMD_READ, i, BASE, 65536)
    c.close()
    roundtrip(path, 2, "new connection after truncated requests")


def t_pipelined(path):
    """Many requests in flight on two connections, replies matched by cookie."""
    a, b = connect_go(path), connect_go(path)
    n, bs = 64, 16384
    for i in range(n):
        a.request(CMD_WRITE, 1000 + i, BASE + i * bs, bs, payload=pattern(bs, i))
    seen = set()
    for _ in range(n):
        err, cookie, _ = a.reply()
        check(err == 0, "pipelined write %d failed: %s" % (cookie, errname(err)))
        seen.add(cookie)
    check(seen == set(range(1000, 1000 + n)), "pipelined writes: wrong cookies")
    err, _ = a.do(CMD_FLUSH, 0, 0)
    check(err == 0, "FLUSH failed: %s" % errname(err))
    for i in range(n):
        b.request(CMD_READ, 2000 + i, BASE + i * bs, bs)
    for _ in range(n):
        err, cookie, data = b.reply(bs)
        i = cookie - 2000
        check(err == 0 and 0 <= i < n, "pipelined read: %s cookie %d" % (errname(err), cookie))
        check(data == pattern(bs, i), "pipelined read %d: wrong data" % i)
    a.disc()
    b.disc()


def slow_reader(path, rs):
    """Reads of @rs bytes and 4 KiB writes mixed while the client lets the
    replies pile up: whatever path each reply takes, none may interleave
    with another, get lost or come twice."""
    c = connect_go(path)
    n, ws = 48, 4096
    for i in range(n // 2):
        err, _ = c.do(CMD_WRITE, BASE + i * rs, rs, payload=pattern(rs, 50 + i))
        check(err == 0, "slow reader: setup write %d failed: %s" % (i, errname(err)))
    reqs = {}
    for i in range(n):
        if i % 2:
            reqs[3000 + i] = (CMD_WRITE, BASE + 16 * 1024 * 1024 + i * ws, ws)
        else:
            reqs[3000 + i] = (CMD_READ, BASE + (i // 2) * rs, rs)
    failed = []

    def sender():
        try:
            for cookie, (cmd, off, ln) in reqs.items():
                c.request(cmd, cookie, off, ln,
                          payload=pattern(ln, cookie) if cmd == CMD_WRITE else b"")
        except OSError as e:
            failed.append(e)
    t = threading.Thread(target=sender)
    t.start()
    time.sleep(1)  # replies pile up: the server's sends block and return EAGAIN
    seen = set()
    for _ in range(n):
        magic, err, cookie = struct.unpack(">IIQ", c.recv(16))
        check(magic == SIMPLE_REPLY_MAGIC, "slow reader: bad reply magic 0x%x" % magic)
        check(cookie in reqs and cookie not in seen, "slow reader: cookie %d unexpected" % cookie)
        seen.add(cookie)
        cmd, off, ln = reqs[cookie]
        check(err == 0, "slow reader: request %d failed: %s" % (cookie, errname(err)))
        if cmd == CMD_READ:
            i = (cookie - 3000) // 2
            check(c.recv(ln) == pattern(ln, 50 + i), "slow reader: read %d: wrong data" % cookie)
    t.join()
    check(not failed, "slow reader: sending failed: %s" % failed)
    c.disc()


def t_slow_reader(path):
    """Large reads: their data goes out by nbd-brmr's writer thread, the
    write replies from its event loop."""
    slow_reader(path, 256 * 1024)


def t_slow_reader_small_reads(path):
    """Reads up to 64 KiB go out from the event loop too, gathered per loop
    turn: 24 of 60 KiB overflow the socket, so a batch is cut mid-reply and
    the writer must finish it first."""
    slow_reader(path, 60 * 1024)


def t_final_roundtrip(path):
    c = connect_go(path)
    data = pattern(1024 * 1024, 99)
    err, _ = c.do(CMD_WRITE, BASE, len(data), flags=CMD_FLAG_FUA, payload=data)
    check(err == 0, "FUA write failed: %s" % errname(err))
    err, _ = c.do(CMD_WRITE_ZEROES, BASE + 4096, 8192, flags=CMD_FLAG_NO_HOLE)
    check(err == 0, "WRITE_ZEROES failed: %s" % errname(err))
    err, _ = c.do(CMD_TRIM, BASE + 3 * 1024 * 1024, 65536)
    check(err == 0, "TRIM failed: %s" % errname(err))
    err, _ = c.do(CMD_FLUSH, 0, 0)
    check(err == 0, "FLUSH failed: %s" % errname(err))
    err, back = c.do(CMD_READ, BASE, len(data), read=True)
    check(err == 0, "read back failed: %s" % errname(err))
    want = data[:4096] + b"\0" * 8192 + data[4096 + 8192:]
    check(back == want, "read back different data after write + write-zeroes")
    c.disc()


TESTS = [
    ("handshake, INFO, LIST, ABORT", t_handshake),
    ("unknown options and bad option data", t_unknown_options),
    ("NBD_OPT_EXPORT_NAME fallback", t_export_name_fallback),
    ("garbage during option haggling", t_garbage_haggling),
    ("bad request magic", t_bad_request_magic),
    ("unknown commands and flags", t_unknown_commands),
    ("out-of-range and zero-length requests", t_out_of_range),
    ("oversized requests", t_oversized),
    ("truncated requests", t_truncated),
    ("pipelined requests on two connections", t_pipelined),
    ("replies piling up at a slow reader", t_slow_reader),
    ("small read replies piling up at a slow reader", t_slow_reader_small_reads),
    ("final write + read round trip", t_final_roundtrip),
]


def main():
    global TIMEOUT
    ap = argparse.ArgumentParser(
        description="Send malformed and borderline NBD traffic to nbd-brmr over its "
                    "unix socket and check every answer. Needs an export of at least "
                    "64 MiB; writes a few MiB from offset 1 MiB of it.",
        epilog="Exit status: 0 passed, 1 a check failed, 2 usage error.")
    ap.add_argument("--socket", required=True, metavar="PATH",
                    help="the nbd-brmr unix socket (nbd-brmr --socket PATH)")
    ap.add_argument("--timeout", type=float, default=TIMEOUT, metavar="SECONDS",
                    help="limit for each exchange with the server (default %(default)s)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print each test")
    args = ap.parse_args()

    TIMEOUT = args.timeout
    if not os.path.exists(args.socket):
        print("nbd_malformed: %s does not exist" % args.socket, file=sys.stderr)
        return 1
    for name, fn in TESTS:
        t0 = time.monotonic()
        try:
            fn(args.socket)
        except Failure as e:
            print("nbd_malformed: FAIL: %s: %s" % (name, e), file=sys.stderr)
            return 1
        except (OSError, struct.error) as e:
            print("nbd_malformed: FAIL: %s: unexpected %s: %s"
                  % (name, type(e).__name__, e), file=sys.stderr)
            return 1
        if args.verbose:
            print("ok   %-45s %.2fs" % (name, time.monotonic() - t0))
    print("nbd_malformed: all %d tests passed" % len(TESTS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
