#!/usr/bin/env bash
# torch.distributed.launch compatibility: --legacy-launch appends --local-rank=N
# (or --local_rank=N), --use-env turns that off, and without --legacy-launch a
# worker's argv is exactly what the user wrote.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"
require_python

# Records argv and what argparse makes of --local-rank in DIR/RANK.json (DIR from $ARGDUMP_DIR).
cat >"$TMP/argdump.py" <<'PYEOF'
import argparse, json, os, sys
p = argparse.ArgumentParser(add_help=False)
p.add_argument("--local-rank", "--local_rank", dest="local_rank", type=int, default=None)
known, _ = p.parse_known_args()
rec = {"argv": sys.argv[1:], "parsed_local_rank": known.local_rank,
       "LOCAL_RANK": os.environ.get("LOCAL_RANK"), "RANK": os.environ.get("RANK"),
       "executable": sys.executable}
with open(os.path.join(os.environ["ARGDUMP_DIR"], os.environ.get("RANK", "norank") + ".json"), "w") as f:
    json.dump(rec, f)
PYEOF

# check.py DIR NPROC APPENDED EXPECTED_ARGS_FILE [EXECUTABLE]
#   APPENDED: "none", or the flag spelling ("--local-rank" / "--local_rank").
cat >"$TMP/check.py" <<'PYEOF'
import glob, json, os, sys
d, n, appended, args_file = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
exe = sys.argv[5] if len(sys.argv) > 5 else None
with open(args_file, "rb") as f:
    raw = f.read()
user = [a.decode("utf-8", "surrogateescape") for a in raw.split(b"\0")[:-1]] if raw else []
problems = []
recs = []
for p in sorted(glob.glob(os.path.join(d, "*.json"))):
    with open(p) as f:
        recs.append(json.load(f))
if len(recs) != n:
    problems.append(f"expected {n} ranks to report, got {len(recs)}")
for rec in recs:
    r, argv = rec["RANK"], rec["argv"]
    if rec["LOCAL_RANK"] != r:
        problems.append(f"rank {r}: LOCAL_RANK {rec['LOCAL_RANK']!r}, expected {r!r}")
    if exe and rec["executable"] != exe:
        problems.append(f"rank {r}: interpreter {rec['executable']!r}, expected {exe!r} (PYTHON_EXEC)")
    if appended == "none":
        if argv != user:
            problems.append(f"rank {r}: argv[1:] is {argv!r}, expected exactly {user!r}")
        continue
    flag = f"{appended}={r}"
    hits = [i for i, a in enumerate(argv) if a == flag]
    # Right after the script, before its own arguments, where
    # torch.distributed.launch and DeepSpeed put it: a script that forwards the
    # rest of its command line, or takes trailing positionals, needs that.
    rest = [a for a in argv if a != flag]
    if len(hits) != 1 or hits[0] != 0 or rest != user:
        problems.append(f"rank {r}: argv[1:] is {argv!r}, expected '{flag}' right after the script, then {user!r}")
    other = "--local_rank" if appended == "--local-rank" else "--local-rank"
    if any(a.startswith(other + "=") for a in argv):
        problems.append(f"rank {r}: got the {other} spelling in {argv!r}")
    if rec["parsed_local_rank"] != int(r):
        problems.append(f"rank {r}: argparse read --local-rank {rec['parsed_local_rank']!r}, expected {r}")
for p in problems:
    print(p)
sys.exit(1 if problems else 0)
PYEOF

CASE=0
# check_case NPROC APPENDED EXECUTABLE -- USER-ARGS... (after a run into $ARGDUMP_DIR)
check_case() {
  local n=$1 appended=$2 exe=$3
  shift 4
  if (($#)); then printf '%s\0' "$@" >"$TMP/expected.$CASE"; else : >"$TMP/expected.$CASE"; fi
  local out
  out=$(timeout 30 "$PY" "$TMP/check.py" "$ARGDUMP_DIR" "$n" "$appended" "$TMP/expected.$CASE" "$exe" 2>&1) || {
    show_run
    fail "$WHAT: $(echo "$out" | head -n 12)"
  }
}
new_case() {
  CASE=$((CASE + 1))
  WHAT=$1
  export ARGDUMP_DIR=$TMP/case$CASE
  mkdir -p "$ARGDUMP_DIR"
}

# 1. --legacy-launch: script path, interpreter from PYTHON_EXEC, --local-rank=N added.
new_case "--legacy-launch"
PYTHON_EXEC=$PY run_dl 30 --legacy-launch --nproc-per-node 3 "$TMP/argdump.py" --foo bar
expect_rc 0 "$WHAT"
check_case 3 --local-rank "$PY" -- --foo bar

# 2. --legacy-launch --local-rank-underscore: the PyTorch 1.x spelling.
new_case "--legacy-launch --local-rank-underscore"
PYTHON_EXEC=$PY run_dl 30 --legacy-launch --local-rank-underscore --nproc_per_node=2 "$TMP/argdump.py" --foo bar
expect_rc 0 "$WHAT"
check_case 2 --local_rank "$PY" -- --foo bar

# 3. --use-env / --use_env: nothing appended.
for spelling in --use-env --use_env; do
  new_case "--legacy-launch $spelling"
  PYTHON_EXEC=$PY run_dl 30 --legacy-launch "$spelling" --nproc-per-node 2 "$TMP/argdump.py" --foo bar
  expect_rc 0 "$WHAT"
  check_case 2 none "$PY" -- --foo bar
done

# 4. No --legacy-launch: argv passes through untouched, with or without `--`.
# shellcheck disable=SC2016  # literal $HOME on purpose
tricky=("a b" "it's" '"double quoted"' "--local-rank=9" "" "--" '$HOME' '*' $'tab\there'
  $'two\nlines' "--nproc-per-node=5" "-m" "back\\slash" 'x;y|z&&w' "ünïcødé" "--local_rank" "7")
new_case "argv pass-through after --"
run_dl 30 --nproc-per-node 2 -- "$PY" "$TMP/argdump.py" "${tricky[@]}"
expect_rc 0 "$WHAT"
check_case 2 none "$PY" -- "${tricky[@]}"

new_case "argv pass-through after a script path (torchrun form)"
PYTHON_EXEC=$PY run_dl 30 --nproc-per-node 2 "$TMP/argdump.py" "${tricky[@]}"
expect_rc 0 "$WHAT"
check_case 2 none "$PY" -- "${tricky[@]}"

# 5. The DDP example itself runs under --legacy-launch.
if "$PY" -c 'import torch.distributed' 2>/dev/null && [[ -f $SRC/examples/ddp_train.py ]]; then
  cp "$SRC/examples/ddp_train.py" "$TMP/ddp_train.py"
  PYTHON_EXEC=$PY run_dl 90 --legacy-launch --nproc-per-node 2 "$TMP/ddp_train.py" --epochs 1 --steps 3
  expect_rc 0 "examples/ddp_train.py under --legacy-launch"
  assert_file_matches "$OUT" '^\[1\]: rank 1: params in sync' "ddp_train.py under --legacy-launch"
fi

wait_for 5 no_marked_processes
assert_no_leftovers "after the argv dumps"
pass
