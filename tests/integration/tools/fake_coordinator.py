#!/usr/bin/env python3
"""A fake rendezvous coordinator that does not hold the token (issue 9, finding 3).

Listens on 127.0.0.1:PORT, serves one agent: answers its Hello with a Challenge
that proves nothing (--mode empty: no nonce, no proof, as a coordinator without
a token would; --mode bogus: a random nonce and, from protocol 3 on, a random
proof), then answers a Join with an Assignment that points MASTER_ADDR at
--master, heartbeats with heartbeats and Done with Done (exit 0). Logs each
frame it gets ("fake: got join") and each it sends, one line each, on stdout.
Bounded: ends when the agent closes or after --seconds. Standard library only.
"""
import argparse
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rdzv_hostile import MAGIC, TYPES, lst, protocol_version, s, u32  # noqa: E402


def frame(version, t, payload):
    return MAGIC + bytes([version, t]) + b"\0\0" + u32(len(payload)) + payload


def read_str(p, pos):
    n = int.from_bytes(p[pos:pos + 4], "big")
    return p[pos + 4:pos + 4 + n], pos + 4 + n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--mode", choices=["empty", "bogus"], default="empty")
    ap.add_argument("--master", default="10.66.66.66")
    ap.add_argument("--src", default=".")
    ap.add_argument("--seconds", type=float, default=25)
    ap.add_argument("mark", nargs="?", help="ignored: lets the test find this process")
    a = ap.parse_args()
    version = protocol_version(a.src)
    say = lambda msg: print(f"fake: {msg}", flush=True)

    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", a.port))
    srv.listen(4)
    srv.settimeout(a.seconds)
    say(f"listening on 127.0.0.1:{a.port} (protocol {version}, mode {a.mode})")
    deadline = time.monotonic() + a.seconds
    try:
        conn, _ = srv.accept()
    except socket.timeout:
        say("no agent came")
        return 1
    conn.settimeout(0.5)
    buf = b""
    run_id = b"none"
    t0 = time.monotonic()
    while time.monotonic() < deadline:
        try:
            chunk = conn.recv(65536)
        except socket.timeout:
            continue
        except OSError as e:
            say(f"agent connection failed after {time.monotonic() - t0:.2f}s ({e})")
            break
        if not chunk:
            say(f"agent closed after {time.monotonic() - t0:.2f}s")
            break
        buf += chunk
        while len(buf) >= 12:
            n = int.from_bytes(buf[8:12], "big")
            if len(buf) < 12 + n:
                break
            t, p, buf = buf[5], buf[12:12 + n], buf[12 + n:]
            name = TYPES[t - 1] if 1 <= t <= len(TYPES) else f"type {t}"
            say(f"got {name}")
            out = None
            if t == 1:  # hello -> a challenge that proves nothing
                run_id, _ = read_str(p, 4)
                if a.mode == "empty":
                    body = s(b"") + (s(b"") if version >= 3 else b"")
                else:
                    body = s(os.urandom(32)) + (s(os.urandom(32)) if version >= 3 else b"")
                out = ("challenge", frame(version, 2, body))
            elif t == 4:  # join -> an assignment to the attacker's master
                row = s("evil") + s(a.master) + u32(1) + lst([], u32)
                body = (u32(1) + u32(0) + u32(1) + row + s(a.master) + u32(29500) + s(run_id)
                        + u32(0) + u32(2) + u32(0) + u32(2))
                out = (f"assignment (master {a.master})", frame(version, 5, body))
            elif t == 6:
                out = ("heartbeat", frame(version, 6, (u32(0) if version >= 4 else b"") + (u32(0) if version >= 5 else b"")))
            elif t == 9:  # done -> done, exit 0
                out = ("done", frame(version, 9, u32(1) + u32(0) + u32(0)))
            if out:
                try:
                    conn.sendall(out[1])
                    say(f"sent {out[0]}")
                except OSError as e:
                    say(f"cannot send {out[0]} ({e})")
    conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
