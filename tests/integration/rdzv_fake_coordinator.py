#!/usr/bin/env python3
"""A fake rendezvous coordinator that does not hold the token, for test_rdzv_trust.sh.

Speaks the frame format of rendezvous/codec.hpp (12-byte header, big-endian) on
127.0.0.1 only. It serves one agent: answers its Hello as MODE says, then hands
out an Assignment whose MASTER_ADDR is 127.66.66.66 (loopback, never routed), and
answers Done with Done so that an agent that believed it ends quickly.

  MODE empty     : an empty Challenge (no nonce, no proof), as without a token
  MODE wrongproof: a Challenge with a fresh nonce and a random "proof"
  MODE nochallenge: no Challenge at all, the Assignment straight away

usage: rdzv_fake_coordinator.py PORTFILE MODE   (writes the port it listens on)
"""
import os
import socket
import struct
import sys

HELLO, CHALLENGE, ASSIGNMENT, DONE = 1, 2, 5, 9


def s(b):
    return struct.pack(">I", len(b)) + b


def i(v):
    return struct.pack(">i", v)


def frame(version, mtype, payload):
    return b"DLRV" + bytes([version, mtype]) + b"\0\0" + struct.pack(">I", len(payload)) + payload


def read_frame(conn):
    head = b""
    while len(head) < 12:
        chunk = conn.recv(12 - len(head))
        if not chunk:
            return None
        head += chunk
    length = struct.unpack(">I", head[8:12])[0]
    body = b""
    while len(body) < length:
        chunk = conn.recv(length - len(body))
        if not chunk:
            return None
        body += chunk
    return head[4], head[5], body


def main():
    portfile, mode = sys.argv[1], sys.argv[2]
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    srv.settimeout(30)
    with open(portfile + ".tmp", "w") as f:
        f.write(str(srv.getsockname()[1]))
    os.rename(portfile + ".tmp", portfile)
    conn, _ = srv.accept()
    conn.settimeout(30)
    got = read_frame(conn)
    if got is None or got[1] != HELLO:
        return 1
    version = got[0]
    if mode == "empty":
        payload = s(b"") + (s(b"") if version >= 3 else b"")
        conn.sendall(frame(version, CHALLENGE, payload))
    elif mode == "wrongproof":
        payload = s(os.urandom(32)) + (s(os.urandom(32)) if version >= 3 else b"")
        conn.sendall(frame(version, CHALLENGE, payload))
    row = s(b"fake") + s(b"127.0.0.1") + i(1) + struct.pack(">I", 0)
    assignment = (i(1) + i(0) + struct.pack(">I", 1) + row + s(b"127.66.66.66") + i(29999) + s(b"x") +
                  i(0) + i(2) + i(0) + i(2))
    # An agent that proves itself after a Challenge sends Proof and Join first;
    # the Assignment goes out either way.
    try:
        conn.sendall(frame(version, ASSIGNMENT, assignment))
        while True:
            got = read_frame(conn)
            if got is None:
                return 0
            if got[1] == DONE:
                conn.sendall(frame(version, DONE, i(1) + i(0) + i(0)))
    except OSError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
