#!/usr/bin/env bash
# ctest: PROCESSORS=2
# Output under load: 8 ranks each write 20 MB of numbered lines in odd-sized
# chunks (plus some stderr). Every line must arrive whole, tagged `[R]: `, in
# order within its rank, none lost or duplicated; a final line without a
# newline is kept. Untagged output is passed on byte for byte.
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

# Untagged output is the workers' bytes exactly: binary with NULs, lines longer
# than every buffer (the 1 MiB line cap, the 256 KiB reads, the pipes), and no
# final newline. one.bin is a line of 2,988,294 bytes with no newline at all;
# r0.bin holds bytes 0x00-0x7f, r1.bin bytes 0x80-0xff and newlines, so that
# each rank's bytes can be picked out of a console both wrote to.
cat >"$TMP/bytes.py" <<'PYEOF'
import hashlib, os, random, sys

def make(path, seed, alphabet, size):
    """Random bytes of `alphabet` (newlines where it has them), with runs of
    1.2 to 2.6 MB that have none, and no final newline."""
    rng = random.Random(seed)
    table = bytes(alphabet[i % len(alphabet)] for i in range(256))
    solid = [b for b in alphabet if b != 10]
    no_nl = bytes(solid[i % len(solid)] for i in range(256))
    out = bytearray()
    while len(out) < size:
        if rng.random() < 0.3:
            out += rng.randbytes(rng.randint(1_200_000, 2_600_000)).translate(no_nl)
        else:
            out += rng.randbytes(rng.randint(1, 400_000)).translate(table)
    with open(path, "wb") as f:
        f.write(bytes(out[:size - 1]) + bytes([solid[0]]))

def write(path):
    """Writes the file to stdout in odd-sized chunks (the copying path)."""
    data = open(path, "rb").read()
    rng, pos = random.Random(len(data)), 0
    while pos < len(data):
        n = rng.choice((1, 4095, 4097, 65537, 300000)) if rng.random() < 0.3 else rng.randint(1, 40000)
        pos += os.write(1, data[pos:pos + n])

def picked(got, r0, r1):
    """What is wrong with `got` as an interleaving of r0's and r1's bytes."""
    if len(got) != len(r0) + len(r1):
        return f"{len(got)} bytes, expected {len(r0)} + {len(r1)}"
    lines = [x.count(b"\n") for x in (got, r0, r1)]
    if lines[0] != lines[1] + lines[2]:
        return f"{lines[0]} newlines, expected {lines[1]} + {lines[2]}"
    low = bytes(b for b in got if b < 0x80 and b != 10)
    if low != r0.replace(b"\n", b""):
        return "rank 0's bytes (0x00-0x7f) are changed or out of order"
    if bytes(b for b in got if b >= 0x80) != r1.replace(b"\n", b""):
        return "rank 1's bytes (0x80-0xff) are changed or out of order"
    return ""

if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "make":
        d = args[0]
        make(f"{d}/one.bin", 1, [b for b in range(256) if b != 10], 2_988_294)
        make(f"{d}/r0.bin", 2, list(range(0x80)), 3_000_000)
        make(f"{d}/r1.bin", 3, list(range(0x80, 0x100)) + [10], 3_000_000)
    elif cmd == "write":
        write(args[0])
    elif cmd == "pick":
        got, r0, r1 = (open(p, "rb").read() for p in args)
        problem = picked(got, r0, r1)
        print(problem)
        sys.exit(1 if problem else 0)
PYEOF
"$PY" "$TMP/bytes.py" make "$TMP" || fail "could not make the binary test files"
sum_of() { sha256sum <"$1" | cut -d' ' -f1; }
# same_bytes WHAT FILE EXPECTED: FILE holds exactly EXPECTED's bytes.
same_bytes() {
  [[ $(sum_of "$2") == "$(sum_of "$3")" ]] && return 0
  log "exit code $RC; dlaunch's lines: $(grep -a '^dlaunch: ' "$ERR" | head -n 3 | cut -c1-200)"
  fail "$1: $(stat -c %s "$2") bytes arrived where $(stat -c %s "$3") were written, or they differ"
}
# No notice of dlaunch's own on stderr: rank 1's bytes go there.
export OMP_NUM_THREADS=1

# One rank: exact, to a file (spliced), through a pipe, and written in odd chunks (copied).
run_dl 60 --nproc-per-node 1 -- cat "$TMP/one.bin"
expect_rc 0 "one untagged rank writing a 2,988,294-byte line"
same_bytes "one rank's line of 2,988,294 bytes without a newline, to a file" "$OUT" "$TMP/one.bin"
timeout -k 5 60 "$DLAUNCH" --nproc-per-node 1 -- cat "$TMP/one.bin" </dev/null 2>"$TMP/piped.err" |
  cat >"$TMP/piped.out"
same_bytes "the same line through a pipe" "$TMP/piped.out" "$TMP/one.bin"
run_dl 60 --nproc-per-node 1 -- "$PY" "$TMP/bytes.py" write "$TMP/r0.bin"
expect_rc 0 "one untagged rank writing binary in odd chunks"
same_bytes "one rank's binary written in odd chunks" "$OUT" "$TMP/r0.bin"
# Two ranks, --no-tag, one on stdout and one on stderr: each stream exact.
# shellcheck disable=SC2016  # $RANK expands in the worker
run_dl 60 --nproc-per-node 2 --no-tag -- sh -c \
  'if [ "$RANK" = 0 ]; then exec cat "$1/r0.bin"; else exec "$2" "$1/bytes.py" write "$1/r1.bin" >&2; fi' \
  "$MARK" "$TMP" "$PY"
expect_rc 0 "--no-tag, rank 0 on stdout and rank 1 on stderr"
same_bytes "rank 0's stdout with --no-tag" "$OUT" "$TMP/r0.bin"
same_bytes "rank 1's stderr with --no-tag" "$ERR" "$TMP/r1.bin"
# Two ranks, --no-tag, both on stdout: the streams interleave, at line ends or
# at the 1 MiB cut of a longer line, and each rank's bytes arrive, in order.
for writer in cat write; do
  # shellcheck disable=SC2016
  run_dl 60 --nproc-per-node 2 --no-tag -- sh -c \
    'if [ "$2" = cat ]; then exec cat "$1/r$RANK.bin"; fi; exec "$3" "$1/bytes.py" write "$1/r$RANK.bin"' \
    "$MARK" "$TMP" "$writer" "$PY"
  expect_rc 0 "--no-tag, two ranks on stdout ($writer)"
  problem=$("$PY" "$TMP/bytes.py" pick "$OUT" "$TMP/r0.bin" "$TMP/r1.bin") ||
    fail "--no-tag, two ranks on stdout ($writer): $problem"
done
unset OMP_NUM_THREADS

wait_for 5 no_marked_processes
assert_no_leftovers "after the output test"
pass
