#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The library must export exactly the sw_* functions listed in
# tests/exported-symbols.txt (one per line, sorted). After adding a public
# function, regenerate the list with:
#   SW_LIB=libsw/.libs/libsw.so SW_SYMBOLS=tests/exported-symbols.txt tests/check-exports.sh --update
set -eu
lib=${SW_LIB:?SW_LIB must name libsw.so}
list=${SW_SYMBOLS:?SW_SYMBOLS must name the checked-in list}
actual=$(nm -D --defined-only "$lib" | awk '{print $3}' | sort)
if [ "${1:-}" = "--update" ]; then
  printf '%s\n' "$actual" > "$list"
  exit 0
fi
if ! printf '%s\n' "$actual" | diff -u "$list" - ; then
  echo "exported symbols differ from $list (lines with + are new exports)" >&2
  exit 1
fi
