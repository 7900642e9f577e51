#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Every source file carries the licence's SPDX line in its first lines
# (after a shebang or a doctype): C, headers, Python, shell, Lua, JS, HTML.
set -eu
top=${SW_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$top"
# the tracked files in a git tree (an in-tree build generates some, such
# as config.h); a release tarball holds only sources
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  files=$(git ls-files libsw tools tests bench examples bindings)
else
  files=$(find libsw tools tests bench examples bindings -type f 2>/dev/null || true)
fi
missing=0
for f in $(printf '%s\n' $files | grep -E '\.(c|h|py|pyi|sh|lua|js|html)$' |
           grep -v -e '/fixtures/' -e '^tests/abi/'); do
  if ! head -n 3 "$f" | grep -q 'SPDX-License-Identifier: Apache-2.0'; then
    echo "$f: no SPDX-License-Identifier line in its first lines" >&2
    missing=$((missing + 1))
  fi
done
[ "$missing" -eq 0 ] || { echo "$missing source files without the licence's SPDX line" >&2; exit 1; }
