# HTTP for the metrics tests (test_metrics_*.sh), with the standard library only.
#   http_get.py URL SECONDS          prints the status line's code, then the body;
#                                    "timeout" (exit 3) when no answer within SECONDS,
#                                    "refused" (exit 4) when nothing listens
#   http_get.py --prom BASE EXPR     Prometheus's /api/v1/query of EXPR: prints the
#                                    value of each result, one a line, sorted by its
#                                    labels ("none" when there are none)
import json
import socket
import sys
import urllib.error
import urllib.parse
import urllib.request


def get(url, seconds):
    try:
        with urllib.request.urlopen(url, timeout=seconds) as r:
            return r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")


def main():
    if sys.argv[1] == "--prom":
        base, expr = sys.argv[2], sys.argv[3]
        code, body = get(f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": expr}), 5)
        if code != 200:
            print(f"prometheus: {code} {body}", file=sys.stderr)
            return 1
        results = json.loads(body)["data"]["result"]
        if not results:
            print("none")
        for r in sorted(results, key=lambda r: sorted(r["metric"].items())):
            v = float(r["value"][1])
            print(int(v) if v == int(v) else v)
        return 0
    try:
        code, body = get(sys.argv[1], float(sys.argv[2]))
    except (socket.timeout, TimeoutError):
        print("timeout")
        return 3
    except urllib.error.URLError as e:
        if isinstance(e.reason, (socket.timeout, TimeoutError)):
            print("timeout")
            return 3
        print("refused")
        return 4
    except (ConnectionError, OSError):
        print("refused")
        return 4
    print(code)
    sys.stdout.write(body)
    return 0


sys.exit(main())
