#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The rockspec (bindings/lua/libsw-*.rockspec) with Debian's luarocks, for
# LuaJIT (--lua-version=5.1), as root into its default tree: every Lua
# module of bindings/lua installed, `require` finds them from LuaJIT and
# from nginx's lua-nginx-module with no lua_package_path line
# (debian/tests/lua-nginx with SW_LUA_DIR), and `luarocks remove` takes
# them away again.
#
# It needs libsw's library installed (the rockspec's external dependency,
# and what the modules load): tests/packages/run.sh runs it while the
# packages are. It runs in a mount namespace of its own where /usr/local/lib
# and /usr/local/share are empty (tmpfs), so that the default tree is the
# test's alone and whatever `make install` left there is neither used nor
# touched, and where lua-libsw's modules, if installed, are hidden.
#
# Usage, as root: sh tests/packages/luarocks.sh
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
if [ "${SW_ROCKS_NS:-}" != 1 ]; then
  [ "$(id -u)" = 0 ] || { echo "luarocks.sh: run as root" >&2; exit 1; }
  exec env SW_ROCKS_NS=1 unshare --mount --propagation private sh "$0" "$@"
fi
mount -t tmpfs tmpfs /usr/local/lib
mount -t tmpfs tmpfs /usr/local/share
work=$(mktemp -d /tmp/sw-rocks.XXXXXX)
trap 'rm -rf "$work"' EXIT
export HOME="$work/home"
mkdir -p "$HOME"
luarocks() { command luarocks --lua-version=5.1 "$@"; }

spec=$(cd "$top/bindings/lua" && ls libsw-*.rockspec)
[ "$(printf '%s\n' "$spec" | wc -l)" = 1 ] || { echo "one rockspec expected: $spec" >&2; exit 1; }
(cd "$top/bindings/lua" && luarocks make "$spec") > "$work/make.log" 2>&1 ||
  { cat "$work/make.log" >&2; exit 1; }
grep "is now installed" "$work/make.log"

# every module of bindings/lua is in the rock, and nothing else
dir=/usr/local/share/lua/5.1
(cd "$top/bindings/lua" && find libsw.lua libsw resty -name '*.lua' | sort) > "$work/want"
(cd "$dir" && find . -name '*.lua' | sed 's|^\./||' | sort) > "$work/got"
diff -u "$work/want" "$work/got" || { echo "the rock's modules differ from bindings/lua's" >&2; exit 1; }
echo "luarocks: $(wc -l < "$work/got") modules in $dir"

# LuaJIT and nginx find them there (a copy of debian/tests outside the
# tree). Debian's lua-nginx-module puts /usr/share/lua/5.1 first on its
# path: lua-libsw's copy, when installed, is hidden here.
if [ -e /usr/share/lua/5.1/resty/libsw.lua ]; then
  cp -a /usr/share/lua/5.1 "$work/lua"
  rm -r "$work/lua/libsw.lua" "$work/lua/libsw" "$work/lua/resty/libsw.lua" "$work/lua/resty/libsw"
  mount --bind "$work/lua" /usr/share/lua/5.1
fi
cp -r "$top/debian/tests" "$work/tests"
mkdir -p "$work/tmp"
(cd "$work" && AUTOPKGTEST_TMP="$work/tmp" SW_LUA_DIR=$dir sh "$work/tests/lua-nginx")

luarocks remove libsw > "$work/remove.log" 2>&1 || { cat "$work/remove.log" >&2; exit 1; }
left=$(find /usr/local/share /usr/local/lib -type f ! -name manifest)
[ -z "$left" ] || { echo "luarocks remove left:" >&2; echo "$left" >&2; exit 1; }
echo "luarocks: removed, nothing left"
