#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# tools/check-versions.sh passes on this tree and fails, naming the file, on
# a copy of it in which one version (or one name of the ABI) was changed.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
check="$top/tools/check-versions.sh"
sh "$check"
V=$(sed -n 's/^AC_INIT(\[libsw\], *\[\([0-9.]*\)\].*/\1/p' "$top/configure.ac")
work=$(mktemp -d /tmp/sw-versions.XXXXXX)
trap 'rm -rf "$work"' EXIT
files="configure.ac NEWS debian/changelog debian/control debian/libsw0.symbols
  bindings/lua/libsw-$V-1.rockspec bindings/lua/libsw.lua bindings/lua/resty/libsw.lua
  bindings/python/pyproject.toml bindings/python/setup.py man/swctl.1 man/libsw.3
  docs/observability.md docs/openresty.md tests/exported-symbols.txt tests/abi/libsw.abi"
fresh() {
  rm -rf "$work/t"
  for f in $files; do mkdir -p "$work/t/$(dirname "$f")" && cp "$top/$f" "$work/t/$f"; done
}
ran=0
fails() { # fails WHAT MUST_NAME [--release]: the check fails and names MUST_NAME
  ran=$((ran + 1))
  if SW_TOP="$work/t" sh "$check" ${3:-} > "$work/out" 2>&1; then
    cat "$work/out"; echo "FAIL: $1: check-versions.sh passed" >&2; exit 1
  fi
  grep "<--" "$work/out" | grep -qF "$2" ||
    { cat "$work/out"; echo "FAIL: $1: check-versions.sh did not name $2" >&2; exit 1; }
  echo "ok   $1: fails, naming $2"
}
edit() { sed -i "$2" "$work/t/$1"; }

fresh; edit configure.ac "s/\[$V\]/[9.9.9]/"; fails "configure.ac bumped alone" "debian/changelog"
fresh; edit debian/changelog "1s/($V)/(9.9.9)/"; fails "debian/changelog" "debian/changelog"
fresh; edit NEWS "s/^\* libsw $V /* libsw 9.9.9 /"; fails "NEWS" "NEWS"
fresh; edit "bindings/lua/libsw-$V-1.rockspec" "s/^version = \"$V-1\"/version = \"9.9.9-1\"/"
fails "the rockspec's version" "libsw-$V-1.rockspec"
fresh; edit "bindings/lua/libsw-$V-1.rockspec" "s/tag = \"v$V\"/tag = \"v9.9.9\"/"
fails "the rockspec's tag" "libsw-$V-1.rockspec (tag)"
fresh; mv "$work/t/bindings/lua/libsw-$V-1.rockspec" "$work/t/bindings/lua/libsw-9.9.9-1.rockspec"
fails "the rockspec's name" "libsw-9.9.9-1.rockspec (name)"
fresh; edit bindings/lua/libsw.lua "s/_VERSION = \"$V\"/_VERSION = \"9.9.9\"/"; fails "libsw.lua" "bindings/lua/libsw.lua"
fresh; edit bindings/lua/resty/libsw.lua "s/_VERSION = \"$V\"/_VERSION = \"9.9.9\"/"
fails "resty/libsw.lua" "bindings/lua/resty/libsw.lua"
fresh; edit bindings/python/pyproject.toml "s/^dynamic = .*/version = \"9.9.9\"/"; fails "pyproject.toml" "bindings/python"
fresh; edit man/swctl.1 "1s/libsw $V/libsw 9.9.9/"; fails "swctl(1)" "man/swctl.1"
fresh; edit docs/observability.md "s/swctl (libsw) $V/swctl (libsw) 9.9.9/"; fails "docs/observability.md" "docs/observability.md"
fresh; edit configure.ac "s/^SW_LT_CURRENT=.*/SW_LT_CURRENT=1/"; fails "libtool's current, not the package" "debian/control"
fresh; edit debian/libsw0.symbols "3d"; fails "a symbol left out of the symbols file" "libsw0.symbols"
fresh; echo "sw_zzz_new" >> "$work/t/tests/exported-symbols.txt"; fails "a new export without its symbol line" "libsw0.symbols"
fresh; echo "sw_zzz_new" >> "$work/t/tests/exported-symbols.txt"; echo " sw_zzz_new@Base 9.9.9" >> "$work/t/debian/libsw0.symbols"
fails "a symbol of a later version" "libsw0.symbols"
fresh; edit tests/abi/libsw.abi "s/<elf-symbol name='sw_version'/<elf-symbol name='sw_gone'/"
fails "a symbol of the ABI baseline gone" "libsw0.symbols"
fresh; touch "$work/libsw-9.9.9.tar.gz"
ran=$((ran + 1))
if SW_TOP="$work/t" sh "$check" "$work/libsw-9.9.9.tar.gz" > "$work/out" 2>&1; then
  cat "$work/out"; echo "FAIL: an sdist of another version passed" >&2; exit 1
fi
echo "ok   an artefact of another version: fails"

# a release: the ABI baseline refreshed (its symbols, as abidw writes them)
release_ready() {
  fresh
  sed "s/.*/<elf-symbol name='&' type='func-type'\/>/" "$top/tests/exported-symbols.txt" > "$work/t/tests/abi/libsw.abi"
}
release_ready
SW_TOP="$work/t" sh "$check" --release > "$work/out" 2>&1 || { cat "$work/out"; echo "FAIL: a release-ready copy fails --release" >&2; exit 1; }
echo "ok   a copy ready for release passes --release"
release_ready; edit debian/changelog "1s/) unstable;/) UNRELEASED;/"
fails "an UNRELEASED changelog, for a release" "debian/changelog distribution" --release
release_ready; edit NEWS "s/^\(\* libsw $V\) (.*)/\1 (unreleased)/"; fails "NEWS undated, for a release" "NEWS date" --release
fresh; fails "an ABI baseline older than the exports, for a release" "tests/abi/libsw.abi" --release
echo "tests/check-versions.sh: $ran disagreements found by tools/check-versions.sh"
