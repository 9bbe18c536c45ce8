# Hostile HTTP clients for test_metrics_probes.sh, against HOST:PORT:
#   hostile_http.py slowloris HOST PORT SECONDS   a header a byte a second
#   hostile_http.py big_header HOST PORT          a 1 MiB header
#   hostile_http.py idle HOST PORT N SECONDS      N connections that send nothing
#   hostile_http.py junk HOST PORT                binary junk
# Each prints one line saying what the server did ("closed after 10.0s", ...).
import resource
import socket
import sys
import time


def connect(host, port):
    return socket.create_connection((host, port), timeout=30)


def answer(s):
    s.settimeout(30)
    try:
        data = s.recv(4096)
    except (ConnectionResetError, BrokenPipeError):
        return "reset"
    except socket.timeout:
        return "no answer"
    return data.split(b"\r\n", 1)[0].decode("latin-1") if data else "closed"


def main():
    what, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    t0 = time.monotonic()
    if what == "slowloris":
        s = connect(host, port)
        req = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 1000
        for b in req:
            try:
                s.send(bytes([b]))
            except (BrokenPipeError, ConnectionResetError):
                break
            if time.monotonic() - t0 > float(sys.argv[4]):
                break
            time.sleep(1)
        print(f"slowloris: {answer(s)} after {time.monotonic() - t0:.1f}s")
    elif what == "big_header":
        s = connect(host, port)
        try:
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (1 << 20) + b"\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        print(f"big_header: {answer(s)}")
    elif what == "idle":
        n = int(sys.argv[4])
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, n + 100)), hard))
        conns = []
        for _ in range(n):
            try:
                conns.append(connect(host, port))
            except OSError as e:
                print(f"idle: connect failed after {len(conns)}: {e}")
                break
        time.sleep(float(sys.argv[5]))
        print(f"idle: opened {len(conns)}")
    elif what == "junk":
        s = connect(host, port)
        s.sendall(bytes(range(256)) * 4 + b"\r\n\r\n")
        print(f"junk: {answer(s)}")


main()
