# Reads the straggler events of a dlaunch --events file and says whether the
# detector did what a case expects (tests/integration/test_straggler.sh,
# bench/straggler.sh).
#
# usage: straggler_verdict.py EVENTS named --ranks 2[,3] [--scope rank|node]
#            [--node-rank N] [--frame TEXT] [--within W] [--decided]
#        straggler_verdict.py EVENTS none --windows N [--decided]
#
# Windows are counted by the `window` field of the straggler_window events,
# from the first one in which the ranks met: some rank spent time at the
# synchronisation point (its sync_pct above 0). The windows before it hold
# ranks still starting (importing torch, setting up the process group), with
# nothing to compare, and how many there are depends on the machine's load.
# "named": the first `straggler` event names exactly RANKS (with that scope,
# node rank, and a frame containing TEXT), in a window at most W after that
# first one (default 3). "none": at least N windows went by, all counted, and
# no `straggler` event came.
#
# Without --decided: prints one line saying what happened and exits 0 when it
# is what was expected, 1 when not. With --decided: prints nothing, and exits 0
# once the outcome is known (a straggler event, or enough windows), 1 while it
# is not (for a test's bounded wait).
import argparse
import json
import sys

p = argparse.ArgumentParser()
p.add_argument("events")
p.add_argument("expect", choices=["named", "none"])
p.add_argument("--ranks", default="")
p.add_argument("--scope")
p.add_argument("--node-rank", type=int)
p.add_argument("--frame")
p.add_argument("--within", type=int, default=3)
p.add_argument("--windows", type=int, default=4)
p.add_argument("--decided", action="store_true")
a = p.parse_args()

windows = []  # the window numbers, in order
met = None  # the first window in which some rank waited at the synchronisation point
named = None  # the first "named" straggler event
other = []  # straggler events before it that are not "named"
try:
    lines = open(a.events, encoding="utf-8", errors="replace").read().splitlines()
except OSError:
    lines = []
for line in lines:
    try:
        e = json.loads(line)
    except ValueError:
        continue  # a line being written
    if e.get("event") == "straggler_window":
        windows.append(e.get("window"))
        if met is None and any(v > 0 for v in (e.get("sync_pct") or {}).values()):
            met = e.get("window")
    elif e.get("event") == "straggler" and named is None:
        if e.get("state") == "named":
            named = e
        else:
            other.append(e)

first = met
seen = len(windows)
if a.decided:
    if a.expect == "named":
        done = named is not None or other or (first is not None and windows[-1] - first > a.within)
    else:
        done = named is not None or other or seen >= a.windows
    sys.exit(0 if done else 1)


def describe(e):
    what = "node %s" % e.get("node") if e.get("scope") == "node" else "rank"
    frame = e.get("frame")
    return "%s %s named in window %s (%s after the first in which the ranks met, %s); frame %s, sync share %s against %s" % (
        what, e.get("ranks"), e.get("window"), e.get("window", 0) - (first or 0), first,
        repr(frame) if frame is not None else "none", e.get("sync_pct"), e.get("others_sync_pct"))


problems = []
if other:
    problems.append("a straggler event before any rank was named: %s" % json.dumps(other[0]))
if a.expect == "none":
    if named is not None:
        problems.append("a false report: " + describe(named))
    if seen < a.windows:
        problems.append("only %d straggler_window events, expected at least %d" % (seen, a.windows))
    said = "%d windows, no straggler named" % seen
else:
    want = [int(r) for r in a.ranks.split(",") if r]
    if named is None:
        problems.append("no rank named in %d windows (expected ranks %s)" % (seen, want))
        said = "none named"
    else:
        said = describe(named)
        if sorted(named.get("ranks", [])) != want:
            problems.append("named ranks %s, expected %s" % (named.get("ranks"), want))
        if a.scope and named.get("scope") != a.scope:
            problems.append("scope %r, expected %r" % (named.get("scope"), a.scope))
        if a.node_rank is not None and named.get("node") != a.node_rank:
            problems.append("node %r, expected %d" % (named.get("node"), a.node_rank))
        if a.frame and a.frame not in (named.get("frame") or ""):
            problems.append("frame %r, expected one containing %r" % (named.get("frame"), a.frame))
        if first is None:
            problems.append("named before any window in which the ranks met")
        elif named.get("window", first) - first > a.within:
            problems.append("named in window %s, more than %d after the first (%s)" %
                            (named.get("window"), a.within, first))
print(said + ("" if not problems else ": " + "; ".join(problems)))
sys.exit(1 if problems else 0)
