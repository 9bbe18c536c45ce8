# Checks a dlaunch --events file: every line is JSON and valid against the
# schema, and the counts asked for hold.
#
# usage: check_events.py SCHEMA FILE [KEY=COUNT | KEY>=COUNT ...]
#   KEY is an event name (how many lines of that event), or EVENT.FIELD:VALUE
#   (how many lines of that event whose FIELD, as str(), is VALUE); `=` asks
#   for exactly COUNT, `>=` for at least COUNT.
# Prints one line a problem and exits 1 when there is one; exits 0 and prints
# nothing otherwise. The integration tests that write events files share it, so
# a field the code renames or adds fails every one of them the same way.
import collections
import json
import sys

import jsonschema

schema = json.load(open(sys.argv[1]))
validator = jsonschema.Draft202012Validator(schema)
problems = []
events = []
for n, line in enumerate(open(sys.argv[2]), 1):
    try:
        e = json.loads(line)
    except ValueError as ex:
        problems.append(f"line {n} is not JSON ({ex}): {line!r}")
        continue
    for err in validator.iter_errors(e):
        problems.append(f"line {n} ({e.get('event')}): {err.message}")
    events.append(e)
names = collections.Counter(e.get("event") for e in events)
for want in sys.argv[3:]:
    key, _, count = want.rpartition("=")
    at_least = key.endswith(">")
    key = key.removesuffix(">")
    if "." in key:
        event, _, rest = key.partition(".")
        field, _, value = rest.partition(":")
        got = sum(1 for e in events if e.get("event") == event and str(e.get(field)) == value)
    else:
        got = names[key]
    if got < int(count) if at_least else got != int(count):
        problems.append(f"{key}: {got}, expected {'at least ' if at_least else ''}{count}")
for p in problems:
    print(p)
sys.exit(1 if problems else 0)
