#!/usr/bin/env bash
# ctest: LABELS=quick
# What a user reads: `dlaunch --help` lists the subcommands first, each
# subcommand's --help ends with one example, `dlaunch --version` names the
# version, commit, build type and rendezvous protocol, and the bash completion
# the build wrote (build/generated/, installed by the .deb) completes flags,
# values, subcommands and files in plain bash. test_package checks the
# installed copies.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"

run_dl 10 --help
expect_rc 0 "dlaunch --help"
assert_eq "$(head -n 1 "$OUT")" "usage: dlaunch [flags] -- COMMAND [ARGS...]" "--help's first line"
# The subcommands, one line each, come before the first flag.
subs=$(sed -n '/^Subcommands:$/,/^$/p' "$OUT" | awk 'NF && !/:$/ {print $1}' | tr '\n' ' ')
assert_eq "$subs" "job status stacks coordinator " "the subcommands --help lists"
[[ $(grep -n '^Subcommands:' "$OUT" | cut -d: -f1) -lt $(grep -n -- '--nproc-per-node' "$OUT" | head -n 1 | cut -d: -f1) ]] ||
  fail_run "--help lists flags before the subcommands"
for sub in job status stacks coordinator; do
  run_dl 10 "$sub" --help
  expect_rc 0 "dlaunch $sub --help"
  assert_file_matches "$OUT" "^example: dlaunch $sub " "dlaunch $sub --help's example"
  assert_eq "$(grep -c '^example:' "$OUT")" 1 "examples in dlaunch $sub --help"
  assert_eq "$(tail -n 1 "$OUT" | cut -d' ' -f1)" "example:" "the last line of dlaunch $sub --help"
done

run_dl 10 --version
expect_rc 0 "dlaunch --version"
assert_file_matches "$OUT" \
  '^dlaunch [0-9]+\.[0-9]+\.[0-9]+ \(commit ([0-9a-f]{12}(-dirty)?|unknown), [A-Za-z]+ build, rendezvous protocol [0-9]+\)$' \
  "dlaunch --version"
protocol=$(sed -nE 's/^inline constexpr std::uint8_t kProtocolVersion = ([0-9]+);.*/\1/p' "$SRC/rendezvous/codec.hpp")
assert_contains "$(cat "$OUT")" "rendezvous protocol $protocol)" "the protocol --version names"
if commit=$(git -C "$SRC" rev-parse --short=12 HEAD 2>/dev/null); then
  assert_contains "$(cat "$OUT")" "(commit $commit" "the commit --version names"
fi

completion=$(dirname "$DLAUNCH")/generated/dlaunch.bash-completion
[[ -f $completion ]] || fail "the build wrote no $completion"
mkdir -p "$TMP/cwd"
touch "$TMP/cwd/hosts.txt" "$TMP/cwd/spec.yaml" "$TMP/cwd/train.py"
mkdir "$TMP/cwd/logs"
# complete_words WORD... : what _dlaunch offers for the last WORD, sorted, one a line.
complete_words() {
  (cd "$TMP/cwd" && bash --norc --noprofile -c '
    source "$0"
    COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
    _dlaunch
    printf "%s\n" "${COMPREPLY[@]}" | sort' "$completion" "$@" 2>/dev/null)
}
assert_eq "$(complete_words dlaunch --bind-to '')" $'core\nnone\nnuma' "Tab after --bind-to"
assert_eq "$(complete_words dlaunch --launch-mode = per-n)" "per-node" "Tab in --launch-mode=per-n"
assert_eq "$(complete_words dlaunch -H localh)" "localhost" "Tab after -H (host names)"
assert_eq "$(complete_words dlaunch --log-dir l)" "logs" "Tab after --log-dir (directories)"
assert_eq "$(complete_words dlaunch --hostfile h)" "hosts.txt" "Tab after --hostfile (files)"
assert_eq "$(complete_words dlaunch --tag)" "--tag-output" "Tab in --tag"
assert_eq "$(complete_words dlaunch c)" "coordinator" "Tab in the subcommand c"
assert_eq "$(complete_words dlaunch job s)" "spec.yaml" "Tab after dlaunch job"
assert_eq "$(complete_words dlaunch status --w)" "--watch" "Tab in dlaunch status --w"
assert_eq "$(complete_words dlaunch stacks --dir l)" "logs" "Tab after dlaunch stacks --dir"
assert_eq "$(complete_words dlaunch coordinator --l)" "--listen" "Tab in dlaunch coordinator --l"
# Past the script or `--` the words are the command's: dlaunch offers nothing of its own.
assert_eq "$(complete_words dlaunch train.py --nproc)" "" "Tab among the script's arguments"
assert_eq "$(complete_words dlaunch --nproc-per-node 2 -- --nproc)" "" "Tab after --"
pass
