#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Install libsw into a temporary prefix and build a program outside the tree
# with `cc prog.c $(pkg-config --cflags --libs libsw)`, then run it.
set -eu
build=$1
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
# Staged install: the .pc file names the configured prefix, which the
# sysroot prepends to, as a packager's build would see it.
make -C "$build" -s install DESTDIR="$prefix" >/dev/null 2>&1
libdir=$(make -C "$build" -s --no-print-directory print-libdir 2>/dev/null || echo /usr/local/lib)
# make install puts the manual pages and the licence there too
mandir=$(find "$prefix" -path '*/man1/swctl.1' | head -1)
[ -n "$mandir" ] && find "$prefix" -path '*/man3/libsw.3' | grep -q . ||
  { echo "make install did not install swctl.1 and libsw.3" >&2; exit 1; }
find "$prefix" -path '*/doc/libsw/LICENSE' | grep -q . || { echo "no LICENSE installed" >&2; exit 1; }
cp examples/consumer.c "$prefix/prog.c"
cd "$prefix"
export PKG_CONFIG_PATH="$prefix$libdir/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$prefix"
# The public headers include no dependency's: --cflags brings libsw's own
# directory and nothing else (no hiredis -I or -D for every consumer).
cflags=$(echo $(pkg-config --cflags libsw)) # trimmed
case "$cflags" in
*hiredis* | *-D*) echo "pkg-config --cflags libsw leaks a dependency's flags: $cflags" >&2; exit 1 ;;
esac
[ "$cflags" = "-I$prefix$(PKG_CONFIG_SYSROOT_DIR= pkg-config --variable=includedir libsw)" ] ||
  { echo "pkg-config --cflags libsw: want only libsw's -I, got: $cflags" >&2; exit 1; }
grep -q '^URL: https://' "$prefix$libdir/pkgconfig/libsw.pc" &&
  ! grep -q 'example.invalid' "$prefix$libdir/pkgconfig/libsw.pc" ||
  { echo "libsw.pc has no real URL" >&2; exit 1; }
cc prog.c $(pkg-config --cflags --libs libsw) -o prog
LD_LIBRARY_PATH="$prefix$libdir" ./prog
# Static linking pulls the private libraries from Libs.private.
cc -static prog.c $(pkg-config --static --cflags --libs libsw) -o prog-static 2>/dev/null &&
  ./prog-static >/dev/null || echo "(static link not available here)"
