#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# One version number for every artefact (docs/releasing.md): fails, naming
# the file, when any of them disagrees with configure.ac's AC_INIT.
#
#   tools/check-versions.sh [--release] [ARTEFACT...]
#
# Checked: debian/changelog's top entry, NEWS's top entry, the rockspec's
# name, version and tag, the Lua modules' _VERSION, the manual pages, the
# versions the docs quote, the Python package's (taken from configure.ac by
# setup.py), and the ABI's names: the Debian library package and its
# symbols file against libtool's -version-info, the symbols file against
# tests/exported-symbols.txt and the ABI baseline (tests/abi/libsw.abi).
# ARTEFACT: built files whose names or fields carry the version (.deb,
# .dsc, .changes, .whl, .tar.gz sdist, .rockspec, .rock).
# --release: also that the changelogs are dated and not UNRELEASED, and that
# the ABI baseline holds exactly the exported symbols.
# SW_TOP: the tree to check (default: this script's).
set -eu
top=${SW_TOP:-$(cd "$(dirname "$0")/.." && pwd)}
release=""
if [ "${1:-}" = "--release" ]; then release=1; shift; fi
bad=0
say() { printf '  %-40s %s\n' "$1" "$2"; }
mismatch() { # mismatch WHERE FOUND
  say "$1" "$2  <-- not $V"
  bad=$((bad + 1))
}
same() { # same WHERE FOUND
  if [ "$2" = "$V" ]; then say "$1" "$2"; else mismatch "$1" "${2:-(none found)}"; fi
}
wrong() { # wrong WHERE WHY
  say "$1" "$2  <-- wrong"
  bad=$((bad + 1))
}
first() { sed -n "$1" "$2" | head -n 1; }

V=$(first 's/^AC_INIT(\[libsw\], *\[\([0-9][0-9.]*\)\].*/\1/p' "$top/configure.ac")
[ -n "$V" ] || { echo "check-versions: no AC_INIT([libsw], [X.Y.Z]) in $top/configure.ac" >&2; exit 1; }
echo "check-versions: configure.ac says $V"

# --------------------------------------------------------------- changelogs
cl="$top/debian/changelog"
same "debian/changelog" "$(first 's/^libsw (\([^)]*\)).*/\1/p' "$cl")"
news=$(first 's/^\* libsw \([0-9][0-9.]*\) (\(.*\))$/\1 \2/p' "$top/NEWS")
same "NEWS" "${news%% *}"
if [ -n "$release" ]; then
  dist=$(first 's/^libsw ([^)]*) \([^;]*\);.*/\1/p' "$cl")
  [ "$dist" != UNRELEASED ] || wrong "debian/changelog distribution" "UNRELEASED"
  case "${news#* }" in
  [0-9][0-9][0-9][0-9]-[0-1][0-9]-[0-3][0-9]) ;;
  *) wrong "NEWS date" "${news#* }" ;;
  esac
fi

# ----------------------------------------------------------------- the Lua side
n=0
for spec in "$top"/bindings/lua/libsw-*.rockspec; do
  [ -f "$spec" ] || continue
  n=$((n + 1))
  name=$(basename "$spec" .rockspec)
  sv=$(first 's/^version *= *"\([^"]*\)".*/\1/p' "$spec")
  same "$(basename "$spec") (name)" "$(echo "$name" | sed 's/^libsw-\(.*\)-[0-9]*$/\1/')"
  [ "libsw-$sv" = "$name" ] || wrong "$(basename "$spec") version" "\"$sv\" is not its name's"
  same "$(basename "$spec") (version)" "${sv%-*}"
  same "$(basename "$spec") (tag)" "$(first 's/^ *tag *= *"v\([^"]*\)".*/\1/p' "$spec")"
done
[ "$n" = 1 ] || wrong "bindings/lua/libsw-*.rockspec" "$n rockspecs, not 1"
for f in bindings/lua/libsw.lua bindings/lua/resty/libsw.lua; do
  same "$f (_VERSION)" "$(first 's/.*_VERSION *= *"\([^"]*\)".*/\1/p' "$top/$f")"
done

# ----------------------------------------------------------- the Python side
py="$top/bindings/python"
grep -q '^dynamic *= *\[.*"version"' "$py/pyproject.toml" &&
  grep -q 'version=libsw_version()' "$py/setup.py" &&
  say "bindings/python" "$V (setup.py reads configure.ac)" ||
  wrong "bindings/python" "the version is not configure.ac's (pyproject.toml dynamic, setup.py libsw_version())"

# ------------------------------------------------------------ pages and docs
for m in "$top"/man/*.[1-8]; do
  same "man/$(basename "$m")" "$(first 's/^\.TH .*"libsw \([0-9][0-9.]*\)".*/\1/p' "$m")"
done
# the versions docs quote (a page's output): FILE and the sed expression
while read -r f expr; do
  same "$f" "$(first "$expr" "$top/$f")"
done <<'EOF'
docs/observability.md s/.*expect="swctl (libsw) \([0-9][0-9.]*\)".*/\1/p
docs/openresty.md s/.*"\([0-9][0-9.]*\)" (of the loaded library).*/\1/p
EOF

# ------------------------------------------------------------------ the ABI
lt() { first "s/^SW_LT_$1=\([0-9]*\)$/\1/p" "$top/configure.ac"; }
major=$(($(lt CURRENT) - $(lt AGE)))
syms="$top/debian/libsw$major.symbols"
if ! grep -q "^Package: libsw$major\$" "$top/debian/control" || [ ! -f "$syms" ]; then
  wrong "debian/control" "no package libsw$major with debian/libsw$major.symbols (libtool: libsw.so.$major)"
else
  head -n 1 "$syms" | grep -q "^libsw\.so\.$major libsw$major " ||
    wrong "$(basename "$syms")" "its first line is not 'libsw.so.$major libsw$major ...'"
  sed -n 's/^ \([a-z_0-9]*\)@Base .*/\1/p' "$syms" | sort > "${TMPDIR:-/tmp}/sw-syms.$$"
  trap 'rm -f "${TMPDIR:-/tmp}/sw-syms.$$" "${TMPDIR:-/tmp}/sw-abi.$$"' EXIT
  differ=""
  if ! diff -u "$top/tests/exported-symbols.txt" "${TMPDIR:-/tmp}/sw-syms.$$" > /dev/null; then
    differ=1
    diff -u "$top/tests/exported-symbols.txt" "${TMPDIR:-/tmp}/sw-syms.$$" | sed -n 's/^\([-+]sw_\)/    \1/p'
    wrong "$(basename "$syms")" "not the symbols of tests/exported-symbols.txt (- missing, + extra; add new ones as 'NAME@Base $V')"
  fi
  newer=$(sed -n 's/^ \([a-z_0-9]*\)@Base \([^ ]*\).*/\1 \2/p' "$syms" |
    while read -r s v; do dpkg --compare-versions "$v" le "$V" 2>/dev/null || echo "$s $v"; done)
  [ -z "$newer" ] || wrong "$(basename "$syms")" "symbols of a version after $V: $newer"
  sed -n "s/.*<elf-symbol name='\([^']*\)'.*/\1/p" "$top/tests/abi/libsw.abi" | sort -u > "${TMPDIR:-/tmp}/sw-abi.$$"
  gone=$(comm -23 "${TMPDIR:-/tmp}/sw-abi.$$" "${TMPDIR:-/tmp}/sw-syms.$$")
  [ -z "$gone" ] || wrong "$(basename "$syms")" "lacks symbols of the ABI baseline: $gone"
  if [ -n "$release" ] && ! cmp -s "${TMPDIR:-/tmp}/sw-abi.$$" "$top/tests/exported-symbols.txt"; then
    wrong "tests/abi/libsw.abi" "not the exported symbols: refresh it (tests/abi-check.sh BUILD --update)"
  fi
  [ -n "$differ$gone$newer" ] ||
    say "$(basename "$syms")" "libsw.so.$major: the $(wc -l < "${TMPDIR:-/tmp}/sw-syms.$$") exported symbols, the ABI baseline's among them"
fi

# ------------------------------------------------------------- built artefacts
for a in "$@"; do
  b=$(basename "$a")
  case "$b" in
  *.deb) same "$b" "$(dpkg-deb -f "$a" Version)" ;;
  *.dsc | *.changes) same "$b" "$(first 's/^Version: //p' "$a")" ;;
  *.whl | *.tar.gz) same "$b" "$(echo "$b" | sed -n 's/^libsw-\([0-9][0-9.]*[0-9]\)[-.].*/\1/p')" ;;
  *.rockspec | *.rock) same "$b" "$(echo "$b" | sed -n 's/^libsw-\([0-9][0-9.]*\)-[0-9]*\..*/\1/p')" ;;
  *) wrong "$b" "not an artefact this script knows" ;;
  esac
done

if [ "$bad" -ne 0 ]; then
  echo "check-versions: $bad disagreement(s) (marked above; configure.ac says $V; docs/releasing.md)" >&2
  exit 1
fi
echo "check-versions: every version is $V"
