#!/usr/bin/env bash
# ctest: LABELS=quick
# Another local user (`nobody`) against root's --log-dir: nobody plants a
# symlink in /tmp to a directory of root's; root runs `dlaunch --log-dir
# /tmp/LINK`. Refused in one line, exit 2, nothing written there, whatever
# fs.protected_symlinks says (it may be 0).
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"
require_python

if ! [[ $(id -u) == 0 ]] || ! id nobody >/dev/null 2>&1 || ! command -v setpriv >/dev/null; then
  skip "needs root, a 'nobody' user and setpriv"
fi
as_nobody=(setpriv --reuid=nobody --regid="$(id -gn nobody)" --clear-groups)
NOBODY=$(id -u nobody)
chmod 711 "$TMP"  # nobody may pass through, and no further
TMP=$(realpath "$TMP")
LINK=/tmp/dlaunch-it-link-$$
at_exit "rm -f $LINK"
mkdir -m 700 "$TMP/roots"
"${as_nobody[@]}" ln -s "$TMP/roots" "$LINK" || fail "nobody could not plant $LINK"
log "fs.protected_symlinks is $(cat /proc/sys/fs/protected_symlinks 2>/dev/null || echo unknown)"
refusal="dlaunch: --log-dir $LINK: refused (the symbolic link $LINK is owned by uid $NOBODY in a directory others can write)"
run_dl 30 --log-dir "$LINK" --rdzv-id job2 --nproc-per-node 1 -- echo written
expect_rc 2 "dlaunch --log-dir through nobody's link"
assert_eq "$(cat "$ERR")" "$refusal" "the refusal"
in_time "$ELAPSED" 2 || fail "the refusal took ${ELAPSED}s"
[[ -z $(ls -A "$TMP/roots") ]] || fail "something was written through the link: $(ls -A "$TMP/roots")"
# Below it too.
run_dl 30 --log-dir "$LINK/below" --rdzv-id job2 --nproc-per-node 1 -- echo written
expect_rc 2 "--log-dir below nobody's link"
[[ -z $(ls -A "$TMP/roots") ]] || fail "something was made through the link: $(ls -A "$TMP/roots")"
# root's own link there is followed.
rm -f "$LINK"
ln -s "$TMP/roots" "$LINK"
run_dl 30 --log-dir "$LINK" --rdzv-id job3 --nproc-per-node 1 -- echo fine
expect_rc 0 "--log-dir through root's own link"
[[ -d $TMP/roots/job3 ]] || fail "the run directory is not where root's link leads"

wait_for 10 no_marked_processes || assert_no_leftovers "at the end"
pass
