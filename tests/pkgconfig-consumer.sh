#!/bin/sh
# Install libsw into a temporary prefix and build a program outside the tree
# with `cc prog.c $(pkg-config --cflags --libs libsw)`, then run it.
set -eu
build=$1
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
make -C "$build" -s install prefix="$prefix" >/dev/null
cp examples/consumer.c "$prefix/prog.c"
cd "$prefix"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
cc prog.c $(pkg-config --cflags --libs libsw) -o prog
LD_LIBRARY_PATH="$prefix/lib" ./prog
# Static linking pulls the private libraries from Libs.private.
cc -static prog.c $(pkg-config --static --cflags --libs libsw) -o prog-static 2>/dev/null &&
  ./prog-static >/dev/null || echo "(static link not available here)"
