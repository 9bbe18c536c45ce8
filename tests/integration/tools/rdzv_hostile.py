#!/usr/bin/env python3
"""A hostile crowd for a rendezvous coordinator (issue 9's fault suite).

Holds IDLE idle TCP connections to the coordinator (reopening those it closes,
within a budget) and, on other connections, sends mutated frames: valid
messages of every type, encoded as rendezvous/codec.hpp describes, then bit
flips, truncations, lying lengths and counts, wrong types and versions,
spliced frames. It never knows the job's token, so it can never join.

Bounded: stops after --seconds, after --frames mutated frames (0: none, idle
connections only), when --stop-file appears, or when the coordinator has refused connections for 2 s (it ended).
Prints one status line when the idle connections are open ("idle: N open") and
a summary at the end. Exits 0 unless it could not open a single connection.
Standard library only.
"""
import argparse
import collections
import errno
import os
import random
import re
import selectors
import socket
import struct
import sys
import time

MAGIC = b"DLRV"
TYPES = ["hello", "challenge", "proof", "join", "assignment", "heartbeat",
         "worker-failed", "abort", "done", "leave", "refused", "query", "report", "standby"]


def protocol_version(src):
    """kProtocolVersion from rendezvous/codec.hpp, so the fuzzer follows the code."""
    try:
        with open(os.path.join(src, "rendezvous", "codec.hpp")) as f:
            m = re.search(r"kProtocolVersion\s*=\s*(\d+)", f.read())
            if m:
                return int(m.group(1))
    except OSError:
        pass
    return 2


def u32(v):
    return struct.pack(">I", v & 0xFFFFFFFF)


def s(b):
    if isinstance(b, str):
        b = b.encode()
    return u32(len(b)) + b


def lst(items, enc):
    return u32(len(items)) + b"".join(enc(x) for x in items)


class Frames:
    """Valid frames of every message type, with plausible random fields."""

    def __init__(self, rng, version, run_id):
        self.rng, self.version, self.run_id = rng, version, run_id

    def rid(self):
        r = self.rng.random()
        if r < 0.5:
            return self.run_id
        if r < 0.8:
            return "job%d" % self.rng.randrange(1000)
        return self.rng.randbytes(self.rng.randrange(0, 64))

    def i(self):
        return self.rng.choice([0, 1, 2, -1, 3, 65535, 2**31 - 1, -2**31, self.rng.randrange(-5, 100)])

    def payload(self, t):
        rng, i = self.rng, self.i
        if t == 1:  # hello
            return (u32(rng.choice([self.version, self.version - 1, self.version + 1]))
                    + s(self.rid()) + s(rng.randbytes(rng.choice([0, 16, 32, 33])))
                    + u32(i()) + u32(i()) + u32(i())
                    + (u32(i()) + u32(i()) if self.version >= 4 else b"")  # hang_timeout_ms, hang_stop
                    # spares, max_no_progress_restarts, backoff_min_ms, backoff_max_ms
                    + (u32(i()) + u32(i()) + u32(i()) + u32(i()) if self.version >= 5 else b""))
        if t == 2:  # challenge (with the field protocol 3 adds, sometimes)
            p = s(rng.randbytes(rng.choice([0, 32])))
            return p + s(rng.randbytes(32)) if rng.random() < 0.5 else p
        if t == 3:  # proof
            return s(rng.randbytes(rng.choice([0, 32, 64])))
        if t == 4:  # join
            return (s(self.rid()) + s("evil") + lst(["127.0.0.1", "::1"][: rng.randrange(0, 3)], s)
                    + u32(i()) + u32(i()) + u32(i()) + u32(i()) + u32(i())
                    + lst([i() for _ in range(rng.randrange(0, 4))], u32) + u32(i()))
        if t == 5:  # assignment
            node = lambda _: s("h") + s("127.0.0.1") + u32(i()) + lst([], u32)
            return (u32(i()) + u32(i()) + lst(range(rng.randrange(0, 3)), node) + s("127.0.0.1")
                    + u32(i()) + s(self.rid()) + u32(i()) + u32(i()) + u32(i()) + u32(i()))
        if t == 6:  # heartbeat (silent_ms from protocol 4, progress from 5)
            if self.version < 4:
                return b""
            progress = lst([rng.randrange(-2**63, 2**63) for _ in range(rng.randrange(0, 4))],
                           lambda v: v.to_bytes(8, "big", signed=True)) if self.version >= 5 else b""
            return u32(i()) + progress
        if t == 7:  # worker-failed
            return u32(i()) + u32(i()) + u32(i()) + u32(i()) + s("boom")
        if t == 8:  # abort
            return s("abort from a stranger") + u32(i())
        if t == 9:  # done
            return u32(i()) + u32(i()) + u32(i())
        if t == 10:  # leave
            return u32(i())
        if t == 12:  # query
            return u32(i()) + s(rng.choice(["stacks", "status", "", "x" * 5000]))
        if t == 14:  # standby (from protocol 5; only the coordinator's to send)
            return u32(i()) + s("stand by")
        if t == 13:  # report
            return u32(i()) + u32(i()) + lst([rng.choice(["{}", '{"rank":0}', "junk", "x" * 5000])
                                              for _ in range(rng.randrange(0, 5))], s)
        return s("refused by a stranger")  # 11

    def frame(self, t=None, version=None):
        t = t or self.rng.randrange(1, 15 if self.version >= 5 else 14 if self.version >= 4 else 12)
        p = self.payload(t)
        return MAGIC + bytes([version or self.version, t]) + b"\0\0" + u32(len(p)) + p


def mutate(rng, frames):
    """One mutated byte string, built from one to three valid frames."""
    data = bytearray(b"".join(frames.frame() for _ in range(rng.randrange(1, 4))))
    if rng.random() < 0.3:  # a valid Hello first, so the mutation meets a later state
        data = bytearray(frames.frame(1)) + data
    for _ in range(rng.randrange(1, 5)):
        op = rng.randrange(9)
        n = len(data)
        if op == 0 and n:  # flip bits
            k = rng.randrange(n)
            data[k] ^= 1 << rng.randrange(8)
        elif op == 1 and n:  # random byte
            data[rng.randrange(n)] = rng.randrange(256)
        elif op == 2 and n > 1:  # truncate
            del data[rng.randrange(1, n):]
        elif op == 3:  # insert junk
            k = rng.randrange(n + 1)
            data[k:k] = rng.randbytes(rng.randrange(1, 16))
        elif op == 4 and n >= 12:  # lie in the header's length
            data[8:12] = u32(rng.choice([0, 1, 11, 2**20, 2**20 + 1, 2**31, 2**32 - 1, rng.randrange(2**32)]))
        elif op == 5 and n >= 12:  # another type or version
            data[5] = rng.randrange(256) if rng.random() < 0.3 else rng.randrange(0, 13)
            if rng.random() < 0.3:
                data[4] = rng.randrange(256)
        elif op == 6 and n >= 16:  # a lying string/list count inside the payload
            k = rng.randrange(12, n - 3)
            data[k:k + 4] = u32(rng.choice([2**32 - 1, 4097, 65537, 2**20, rng.randrange(2**32)]))
        elif op == 7 and n:  # duplicate a slice
            a = rng.randrange(n)
            b = rng.randrange(a, min(n, a + 64) + 1)
            data[b:b] = data[a:b]
        elif op == 8 and n >= 12:  # reserved bits
            data[6:8] = rng.randbytes(2)
    return bytes(data)


def connect_nb(addr):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setblocking(False)
    err = sock.connect_ex(addr)
    if err not in (0, errno.EINPROGRESS):
        sock.close()
        raise OSError(err, os.strerror(err))
    return sock


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--idle", type=int, default=2000)
    ap.add_argument("--reopen-budget", type=int, default=20000)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--frames", type=int, default=20000, help="0: idle connections only")
    ap.add_argument("--run-id", default="job")
    ap.add_argument("--src", default=".")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--stop-file", default=None)
    ap.add_argument("mark", nargs="?", help="ignored: lets the test find this process")
    a = ap.parse_args()

    seed = a.seed if a.seed is not None else random.randrange(2**32)
    rng = random.Random(seed)
    version = protocol_version(a.src)
    frames = Frames(rng, version, a.run_id)
    addr = (a.host, a.port)
    deadline = time.monotonic() + a.seconds
    print(f"hostile: seed {seed}, protocol {version}, {a.idle} idle connections, up to {a.frames} frames "
          f"or {a.seconds:.0f}s", flush=True)

    sel = selectors.DefaultSelector()
    idle_opened = idle_closed = connect_errors = 0

    def open_idle():
        nonlocal idle_opened, connect_errors
        try:
            sock = connect_nb(addr)
        except OSError:
            connect_errors += 1
            return False
        sel.register(sock, selectors.EVENT_READ)
        idle_opened += 1
        return True

    for _ in range(a.idle):
        if not open_idle() and idle_opened == 0 and connect_errors > 50:
            print("hostile: cannot connect at all", flush=True)
            return 1
    print(f"idle: {len(sel.get_map())} open ({connect_errors} connect errors)", flush=True)

    sent = fuzz_conns = 0
    fuzz_sel = selectors.DefaultSelector()
    in_flight = collections.deque()
    closed_by_peer = 0
    refused_since = None
    stop = "time"
    while True:
        now = time.monotonic()
        if now >= deadline:
            break
        if a.frames and sent >= a.frames:
            stop = "frames"
            break
        if a.stop_file and os.path.exists(a.stop_file):
            stop = "stop file"
            break
        # Idle connections the coordinator closed (it may drop idle peers): reopen.
        for key, _ in sel.select(0):
            sock = key.fileobj
            try:
                data = sock.recv(4096)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                data = b""
            if not data:
                sel.unregister(sock)
                sock.close()
                idle_closed += 1
                if idle_opened < a.idle + a.reopen_budget:
                    open_idle()
        if not a.frames:
            time.sleep(0.05)
            continue
        # Fuzz connections older than 0.3 s (or over 64 in flight) are closed by us.
        while in_flight and (now - in_flight[0][1] > 0.3 or len(in_flight) > 64):
            old, _ = in_flight.popleft()
            if old.fileno() >= 0:
                fuzz_sel.unregister(old)
                old.close()
        for key, _ in fuzz_sel.select(0):
            sock = key.fileobj
            try:
                data = sock.recv(65536)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                data = b""
            if not data:
                closed_by_peer += 1
                fuzz_sel.unregister(sock)
                sock.close()
        # One more fuzz connection.
        try:
            conn = socket.create_connection(addr, timeout=1)
            refused_since = None
        except OSError:
            if refused_since is None:
                refused_since = now
            elif now - refused_since > 2:
                stop = "coordinator gone"
                break
            time.sleep(0.05)
            continue
        fuzz_conns += 1
        try:
            conn.sendall(mutate(rng, frames))
            sent += 1
            if rng.random() < 0.3:
                conn.shutdown(socket.SHUT_WR)  # then end of stream mid-handshake
            conn.setblocking(False)
            fuzz_sel.register(conn, selectors.EVENT_READ)
            in_flight.append((conn, now))
        except OSError:
            closed_by_peer += 1
            conn.close()
        if sent % 20 == 0:
            time.sleep(0.01)  # a crowd, not a single-core denial of service
    print(f"hostile: stopped ({stop}): {sent} mutated sends on {fuzz_conns} connections "
          f"({closed_by_peer} closed by the coordinator within 0.3s); idle: {idle_opened} opened, "
          f"{idle_closed} closed by the coordinator, {len(sel.get_map())} still open, "
          f"{connect_errors} connect errors; seed {seed}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
