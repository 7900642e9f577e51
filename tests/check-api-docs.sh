#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Every exported function and every public SW_* macro of <sw/sw.h> must be
# described in docs/api.md: a public name nobody can look up is a bug.
set -eu
list=${SW_SYMBOLS:?SW_SYMBOLS must name the checked-in export list}
top=$(dirname "$list")/..
doc="$top/docs/api.md"
macros=$(sed -n 's/^#define \(SW_[A-Z0-9_]*\).*/\1/p' "$top/libsw/sw/sw.h" "$top/libsw/sw/plugin.h" |
         grep -v -e '^SW__' -e '^SW_SW_H$' -e '^SW_PLUGIN_H$' -e '^SW_API$' -e '^SW_ERRNO_GEN$')
missing=0
for name in $(cat "$list") $macros; do
  if ! grep -q -w -- "$name" "$doc"; then
    echo "docs/api.md does not mention $name" >&2
    missing=$((missing + 1))
  fi
done
[ "$missing" -eq 0 ] || { echo "$missing public names undocumented" >&2; exit 1; }
