#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""unix_relay.py LISTEN TARGET: relay each connection to the unix socket
LISTEN to the unix socket TARGET, byte for byte, one after the other (fio's
nbd engine opens one to learn the size, then one for the job); exits when
TARGET cannot be reached.

Why (client_crash): when nbd-brmr is SIGKILLed with requests still unread,
the kernel resets the client's connection instead of closing it, and fio
3.33's nbd engine then polls the dead handle forever without saving its
verify state. Behind this relay the client sees an orderly end instead: the
relay reads everything promptly, and when the server's side ends (closed or
reset) it forwards what it had, sends end-of-stream (FIN), and reads what
the client still sends until it closes. Nothing is changed or made up: a
reply reaches the client only if the server sent it."""
import os
import selectors
import socket
import sys
import time

DRAIN_S = 30  # how long to wait for the client to close after our FIN


def relay(cli, srv):
    sel = selectors.DefaultSelector()
    sel.register(cli, selectors.EVENT_READ, srv)
    sel.register(srv, selectors.EVENT_READ, cli)
    server_gone = False
    while not server_gone:
        for key, _ in sel.select():
            src, dst = key.fileobj, key.data
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            if not data:
                if src is cli:  # the client finished: pass its end on
                    srv.shutdown(socket.SHUT_WR)
                    sel.unregister(cli)
                    continue
                server_gone = True
                break
            try:
                dst.sendall(data)
            except OSError:
                if dst is srv:
                    server_gone = True
                    break
                return  # the client is gone: nothing left to do
    # The server ended: an orderly end for the client, then drain it.
    srv.close()
    try:
        cli.shutdown(socket.SHUT_WR)
    except OSError:
        return
    cli.settimeout(1)
    end = time.monotonic() + DRAIN_S
    while time.monotonic() < end:
        try:
            if not cli.recv(65536):
                break
        except socket.timeout:
            continue
        except OSError:
            break


def main():
    listen_path, target_path = sys.argv[1], sys.argv[2]
    try:
        os.unlink(listen_path)
    except FileNotFoundError:
        pass
    lst = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    lst.bind(listen_path)
    lst.listen(4)
    while True:
        cli, _ = lst.accept()
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            srv.connect(target_path)
        except OSError:
            cli.close()
            return
        relay(cli, srv)
        cli.close()


if __name__ == "__main__":
    main()
