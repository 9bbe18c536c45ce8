#!/usr/bin/env bash
# ctest: LABELS=quick
# dlaunch linked by lld (cmake/DlaunchTextOrder.cmake) has the functions its
# start runs, cmake/dlaunch.symbol-order, together at the front of its text:
#   1. every listed function the binary has lies within twice the listed
#      functions' size of the text's start; a default link spreads them over all
#      of it;
#   2. the list still names the code: most of its functions are in the binary,
#      and most of what the start runs now is in it (scripts/symbol-order.sh,
#      where valgrind is installed), or that script must be run again;
#   3. a start faults in at most half of the text's 64 KiB windows.
# Skipped where the build had no lld.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"
[[ -z ${DLAUNCH_SANITIZED:-} ]] || skip "the sanitizer build links with the default linker"
command -v readelf >/dev/null && command -v nm >/dev/null || skip "binutils (readelf, nm) is not installed"
readelf -p .comment "$DLAUNCH" 2>/dev/null | grep -q 'LLD' || skip "dlaunch was not linked by lld (apt-get install lld)"
order=$SRC/cmake/dlaunch.symbol-order
[[ -s $order ]] || fail "no $order"

# The text section's start and size, and every function's address and size.
read -r text_start text_size < <(readelf -SW "$DLAUNCH" | awk '$2 == ".text" {print "0x" $4, "0x" $6}')
[[ -n ${text_start:-} ]] || fail "no .text section in $DLAUNCH"
text_bytes=$((text_size))
nm -S "$DLAUNCH" | awk '$3 ~ /^[tTwW]$/ {print $4, $1, $2}' >"$TMP/text"
report=$(python3 - "$order" "$TMP/text" "$text_start" <<'PY'
import sys
order = [l.strip() for l in open(sys.argv[1]) if l.strip() and not l.startswith("#")]
where = {}
for line in open(sys.argv[2]):
    name, addr, size = line.split()
    where.setdefault(name, (int(addr, 16), int(size, 16)))
start = int(sys.argv[3], 16)
found = [where[n] for n in order if n in where]
listed_bytes = sum(s for _, s in found)
span = max(a + s for a, s in found) - start if found else 0
print(len(order), len(found), listed_bytes, span)
PY
) || fail "could not read the symbols of $DLAUNCH"
read -r listed found listed_bytes span <<<"$report"
log "$found of $listed listed functions in the binary, $listed_bytes bytes, within $span bytes of the text's start (of $text_bytes)"

# 1. Together at the front. lld moves a whole input section for its first
#    listed function, and a C library or OpenSSL object holds several functions
#    in one, so what comes along is allowed for up to the listed size again.
limit=$((2 * listed_bytes + 65536))
((span <= limit)) || fail "1: the start's functions reach $span bytes into the text, more than $limit"
((limit < text_bytes / 2)) || fail "1: the listed functions are a quarter of the text ($listed_bytes of $text_bytes bytes): the check says nothing"

# 2. The list names the code still.
((found * 10 >= listed * 8)) ||
  fail "2: only $found of the $listed functions in $order are in dlaunch: run scripts/symbol-order.sh again"

if command -v valgrind >/dev/null; then
  SYMBOL_ORDER_PORTS="$(free_port) $(free_port)" \
    bash "$SRC/scripts/symbol-order.sh" "$DLAUNCH" "$TMP/fresh.order" >/dev/null 2>"$TMP/order.err" ||
    fail "2: scripts/symbol-order.sh failed: $(tail -n 3 "$TMP/order.err")"
  grep -v '^#' "$order" | sort -u >"$TMP/committed"
  grep -v '^#' "$TMP/fresh.order" | sort -u >"$TMP/fresh"
  runs=$(wc -l <"$TMP/fresh")
  missing=$(comm -13 "$TMP/committed" "$TMP/fresh" | wc -l)
  log "2: the start runs $runs functions; $missing of them are not in $order"
  ((runs > 100)) || fail "2: scripts/symbol-order.sh found only $runs functions"
  ((missing * 10 <= runs)) ||
    fail "2: $missing of the $runs functions the start runs are not in $order: run scripts/symbol-order.sh again"
else
  log "2: valgrind is not installed; the list's freshness is not checked"
fi

# 3. A one-worker job's start faults in at most half the text's 64 KiB
#    windows (the kernel maps 16 pages around each fault it takes there; the
#    default link took 54 faults in the 62 windows).
if command -v perf >/dev/null &&
  perf record -q -e page-faults -c 1 -d -o "$TMP/probe.data" -- true >/dev/null 2>"$TMP/perf.err"; then
  perf record -q -e page-faults -c 1 -d -i -o "$TMP/faults.data" -- "$DLAUNCH" --nproc-per-node 1 -- true \
    >/dev/null 2>"$TMP/perf.err" || fail "3: a one-worker job under perf record failed: $(head -n 3 "$TMP/perf.err")"
  # The text's mapping (r-xp) and every fault's address.
  perf script -i "$TMP/faults.data" --show-mmap-events -F addr 2>/dev/null >"$TMP/faults.txt"
  text_faults=$(python3 - "$DLAUNCH" "$TMP/faults.txt" <<'PY'
import re, sys
exe, lo, hi, n = sys.argv[1], None, None, 0
for line in open(sys.argv[2]):
    m = re.search(r"PERF_RECORD_MMAP2 .*\[(0x[0-9a-f]+)\((0x[0-9a-f]+)\).* r-xp (.*)$", line)
    if m and m.group(3).strip() == exe:
        lo = int(m.group(1), 16); hi = lo + int(m.group(2), 16)
    elif lo is not None and re.fullmatch(r"\s*[0-9a-f]+\s*", line):
        n += lo <= int(line, 16) < hi
print(n if lo is not None else "none")
PY
  )
  windows=$(((text_bytes + 65535) / 65536))
  log "3: a one-worker job: $text_faults page faults in dlaunch's text of $windows windows"
  [[ $text_faults =~ ^[0-9]+$ ]] || fail "3: no mapping of $DLAUNCH's text in perf's record"
  ((text_faults > 0 && text_faults * 2 <= windows)) ||
    fail "3: $text_faults page faults in the text, not at most half its $windows windows"
else
  log "3: perf cannot record page faults here ($(head -n 1 "$TMP/perf.err")); not checked"
fi
echo "PASS: $TEST_NAME"
