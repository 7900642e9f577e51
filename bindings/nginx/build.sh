#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Build ngx_http_libsw_module.so for the nginx installed from Debian, the
# Debian way: nginx's own configure, from nginx-dev's copy of its build
# files (/usr/share/nginx/src) with the flags Debian built nginx with
# (conf_flags: --with-compat among them), then `make modules`.
#
# Usage: build.sh OUT_DIR [INCLUDE_DIR...] [-L LIB_DIR]
#   OUT_DIR       where the build happens and the .so lands
#   INCLUDE_DIR   directories holding sw/sw.h and sw/version.h
#   -L LIB_DIR    directory holding libsw.so (default: the installed one)
# NGINX_SRC overrides /usr/share/nginx/src.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=$1; shift
incs=""
libs=""
while [ $# -gt 0 ]; do
  case "$1" in
  -L) libs="-L$2 -lsw"; shift 2 ;;
  *) incs="$incs $1"; shift ;;
  esac
done
src=${NGINX_SRC:-/usr/share/nginx/src}
if [ ! -x "$src/configure" ] || [ ! -f "$src/conf_flags" ]; then
  echo "build.sh: $src/configure not found: install nginx-dev (apt-get install nginx-dev)" >&2
  exit 1
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -rf "$out/nginx-src"
cp -R "$src" "$out/nginx-src"
# conf_flags is a bash array: NGX_CONF_FLAGS=( --a --b ... ); its words have no spaces
flags=$(sed -n 's/^NGX_CONF_FLAGS=( *\(.*\) *)$/\1/p' "$src/conf_flags")
[ -n "$flags" ] || { echo "build.sh: cannot read $src/conf_flags" >&2; exit 1; }
SW_NGX_INCS="${incs# }" SW_NGX_LIBS="${libs:-}"
export SW_NGX_INCS SW_NGX_LIBS
cd "$out/nginx-src"
# shellcheck disable=SC2086 # the flags are words
# SW_NGX_LD_OPT: link flags for the module (debian/rules: dpkg's, bindnow included)
./configure $flags ${SW_NGX_LD_OPT:+"--with-ld-opt=$SW_NGX_LD_OPT"} --add-dynamic-module="$here" \
  >"$out/configure.log" 2>&1 ||
  { tail -20 "$out/configure.log" >&2; exit 1; }
make -f objs/Makefile modules >"$out/make.log" 2>&1 || { grep -v '^cc \|^\s*-' "$out/make.log" | tail -40 >&2; exit 1; }
cp objs/ngx_http_libsw_module.so "$out/ngx_http_libsw_module.so"
echo "build.sh: $out/ngx_http_libsw_module.so"
