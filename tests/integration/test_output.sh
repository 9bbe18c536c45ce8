#!/usr/bin/env bash
# ctest: PROCESSORS=2
# Output under load: 8 ranks each write 20 MB of numbered lines in odd-sized
# chunks (plus some stderr). Every line must arrive whole, tagged `[R]: `, in
# order within its rank, none lost or duplicated; a final line without a
# newline is kept.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"
require_python

N=8
export PER_RANK_BYTES=${PER_RANK_BYTES:-20000000}

cat >"$TMP/lines.py" <<'PYEOF'
import os, random, re, sys

PER_RANK = int(os.environ["PER_RANK_BYTES"])
LAST_RANK = 7          # this rank ends with a line that has no newline
STDERR_EVERY = 4000    # a stderr line after every this many stdout lines

def stdout_lines(r):
    """The payload lines of rank r, without newlines."""
    total, i = 0, 0
    while total < PER_RANK:
        n = (r * 7919 + i * 31) % 200 + (6000 if i % 1009 == 0 else 0)
        line = f"{r}:{i}:" + chr(ord("a") + (r + i) % 26) * n
        total += len(line) + 1
        yield line
        i += 1
    if r == LAST_RANK:
        yield f"{r}:END:unterminated"

def count_stdout(r):
    return sum(1 for _ in stdout_lines(r))

def stderr_lines(r):
    for k in range(count_stdout(r) // STDERR_EVERY + 1):
        yield f"{r}:err:{k}"

def write_all(fd, b):
    while b:
        n = os.write(fd, b)
        b = b[n:]

def gen():
    r = int(os.environ["RANK"])
    lines = list(stdout_lines(r))
    data = "\n".join(lines).encode()
    if r != LAST_RANK:
        data += b"\n"
    errs = [(e + "\n").encode() for e in stderr_lines(r)]
    # Stderr line k goes out once stdout has passed line k*STDERR_EVERY.
    marks, off = [], 0
    for i, line in enumerate(lines):
        if i % STDERR_EVERY == 0:
            marks.append(off)
        off += len(line) + 1
    rng = random.Random(r)
    pos, k = 0, 0
    while pos < len(data):
        while k < len(errs) and k < len(marks) and marks[k] <= pos:
            write_all(2, errs[k]); k += 1
        n = rng.choice((1, 7, 100, 4095, 4096, 4097, 65535, 65536, 65537, 200000)) \
            if rng.random() < 0.3 else rng.randint(1, 40000)
        write_all(1, data[pos:pos + n])   # chunks split lines anywhere
        pos += n
    for e in errs[k:]:
        write_all(2, e)

def verify(path, stream, n):
    want = {r: (stdout_lines(r) if stream == "out" else stderr_lines(r)) for r in range(n)}
    got_count = {r: 0 for r in range(n)}
    problems = []
    tag = re.compile(rb"^\[(\d+)\]: (.*)$", re.S)
    with open(path, "rb") as f:
        data = f.read()
    if data.endswith(b"\n"):
        data = data[:-1]
    for lineno, raw in enumerate(data.split(b"\n") if data else [], 1):
        m = tag.match(raw)
        if not m:
            if stream == "err" and raw.startswith(b"dlaunch"):
                continue   # dlaunch's own notices
            problems.append(f"line {lineno}: not tagged '[R]: ': {raw[:120]!r}")
        else:
            r, payload = int(m.group(1)), m.group(2).decode("utf-8", "replace")
            if r not in want:
                problems.append(f"line {lineno}: unknown rank tag [{r}]: {raw[:120]!r}")
            else:
                exp = next(want[r], None)
                if payload != exp:
                    problems.append(f"line {lineno}: rank {r} line #{got_count[r]}: expected "
                                    f"{(exp or '<end of output>')[:60]!r}..., got {payload[:60]!r}..."
                                    f" ({len(payload)} vs {len(exp or '')} bytes)")
                    # Resynchronise on the line's own number so one tear is one error.
                    num = re.match(r"^\d+:(?:err:)?(\d+):?", payload)
                    if num:
                        got_count[r] = int(num.group(1))
                    want[r] = (stdout_lines(r) if stream == "out" else stderr_lines(r))
                    for _ in range(got_count[r] + 1):
                        next(want[r], None)
                got_count[r] += 1
        if len(problems) >= 10:
            problems.append("... (stopping after 10 problems)")
            break
    for r in range(n):
        rest = sum(1 for _ in want[r])
        if rest and len(problems) < 10:
            problems.append(f"rank {r}: {rest} line(s) missing (got {got_count[r]})")
    for p in problems:
        print(f"{stream}: {p}")
    return not problems

if __name__ == "__main__":
    if sys.argv[1] == "gen":
        gen()
    else:
        ok_out = verify(sys.argv[2], "out", int(sys.argv[4]))
        ok_err = verify(sys.argv[3], "err", int(sys.argv[4]))
        sys.exit(0 if ok_out and ok_err else 1)
PYEOF

run_dl 100 --nproc-per-node "$N" -- "$PY" "$TMP/lines.py" gen
expect_rc 0 "$N ranks writing ${PER_RANK_BYTES} bytes each"
log "dlaunch relayed $(stat -c %s "$OUT") bytes of stdout in ${ELAPSED}s"
out=$(timeout 100 "$PY" "$TMP/lines.py" verify "$OUT" "$ERR" "$N" 2>&1) || {
  echo "$out" | head -n 25 >&2
  fail "output was torn, lost, reordered or untagged (see above)"
}
# The unterminated last line of rank 7 is there, as a whole line of its own.
grep -qx '\[7\]: 7:END:unterminated' "$OUT" ||
  fail "rank 7's final line without a newline is missing or not on a line of its own"

# Tag variants: one worker is untagged, --no-tag turns tags off, a custom format.
# shellcheck disable=SC2016  # $RANK expands in the worker
hello=(bash -c 'echo "hello $RANK"; echo "oops $RANK" >&2' "$MARK")
run_dl 30 --nproc-per-node 1 -- "${hello[@]}"
expect_rc 0 "one worker"
assert_eq "$(cat "$OUT")" "hello 0" "one worker's stdout (untagged)"
run_dl 30 --nproc-per-node 2 --no-tag -- "${hello[@]}"
expect_rc 0 "--no-tag"
assert_eq "$(sort "$OUT" | tr '\n' ',')" "hello 0,hello 1," "stdout with --no-tag"
assert_eq "$(grep -v '^dlaunch' "$ERR" | sort | tr '\n' ',')" "oops 0,oops 1," "stderr with --no-tag"
run_dl 30 --nproc-per-node 2 '--tag-output={rank}|{local_rank}|' -- "${hello[@]}"
expect_rc 0 "--tag-output={rank}|{local_rank}|"
assert_eq "$(sort "$OUT" | tr '\n' ',')" "0|0|hello 0,1|1|hello 1," "stdout with --tag-output={rank}|{local_rank}|"
run_dl 30 --nproc-per-node 2 '--tag-output={host}:{rank}|' -- "${hello[@]}"
expect_rc 0 "--tag-output={host}:{rank}|"
assert_eq "$(sort "$OUT" | tr '\n' ',')" "$(hostname):0|hello 0,$(hostname):1|hello 1," "stdout with --tag-output={host}:{rank}|"

wait_for 5 no_marked_processes
assert_no_leftovers "after the output test"
pass
