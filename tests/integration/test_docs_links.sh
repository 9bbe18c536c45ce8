#!/usr/bin/env bash
# ctest: LABELS=quick
# The README and the guides in docs/ hold together: every relative link names
# a file of the tree, every #anchor a heading of its page (as GitHub makes
# anchors), and the README's index links every guide in docs/.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
lib_init "$@"

"$PY" - "$SRC" >"$TMP/out" 2>&1 <<'PYEOF' || fail "$(cat "$TMP/out")"
import os, re, sys
src = sys.argv[1]
pages = ["README.md"] + sorted("docs/" + f for f in os.listdir(os.path.join(src, "docs")) if f.endswith(".md"))

def anchors(path):
    seen, out, fence = {}, set(), False
    for line in open(path, encoding="utf-8"):
        if line.startswith("```"):
            fence = not fence
        m = None if fence else re.match(r"^#{1,6} +(.*?)\s*$", line)
        if m:
            slug = re.sub(r"[^\w\- ]", "", m.group(1).lower()).replace(" ", "-")
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            out.add(slug if n == 0 else f"{slug}-{n}")
    return out

bad = []
for page in pages:
    text = open(os.path.join(src, page), encoding="utf-8").read()
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"^[a-z]+:", target):
            continue
        path, _, frag = target.partition("#")
        full = os.path.normpath(os.path.join(src, os.path.dirname(page), path)) if path else os.path.join(src, page)
        if not os.path.exists(full):
            bad.append(f"{page}: link to {target}: no such file")
        elif frag and full.endswith(".md") and frag not in anchors(full):
            bad.append(f"{page}: link to {target}: no heading makes #{frag}")
readme = open(os.path.join(src, "README.md"), encoding="utf-8").read()
for page in pages[1:]:
    if f"]({page})" not in readme:
        bad.append(f"README.md: no link to the guide {page}")
if bad:
    print("\n".join(bad))
    sys.exit(1)
print(f"{len(pages)} pages checked")
PYEOF
log "$(cat "$TMP/out")"
pass
