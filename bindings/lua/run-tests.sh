#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Tests of the Lua binding and the OpenResty helper:
#   1. busted specs in plain LuaJIT (bindings/lua/spec): module API, exact
#      pass/block sequences on an injected clock, errors, per-key registry,
#      keyed tables (libsw/keyed.lua), segments shared by two LuaJIT
#      processes, resty.libsw with a stand-in ngx, and a check that the hot
#      paths are JIT-compiled;
#   2. nginx (bindings/lua/t/nginx.lua): Debian's nginx + lua-nginx-module,
#      2 workers, an exact burst, Retry-After, reloads (state kept / reset),
#      3000 clients keyed on a request header;
#   3. nginx (bindings/lua/t/breaker_nginx.lua): resty.libsw.breaker in front
#      of a failing upstream across 2 workers: opens, one probe, closes.
#
# Usage: SW_LIB=/path/to/libsw.so sh bindings/lua/run-tests.sh
# Without SW_LIB it uses _build/plain/libsw/.libs/libsw.so or
# libsw/.libs/libsw.so of this tree. As root it installs the Debian packages
# it needs when they are missing.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)

# ------------------------------------------------------------ packages
need_pkgs="luajit2 lua-busted nginx-core libnginx-mod-http-lua lua-resty-core lua-nginx-redis redis-server curl procps"
missing=""
for p in $need_pkgs; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing="$missing $p"
  fi
done
if [ -n "$missing" ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "run-tests.sh: missing Debian packages:$missing (install them, or run as root)" >&2
    exit 1
  fi
  echo "run-tests.sh: installing$missing"
  # Do not let the nginx package start the system's nginx service on port 80.
  policy=/usr/sbin/policy-rc.d
  made_policy=""
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod 755 "$policy"
    made_policy=1
  fi
  rc=0
  { sh "$top/tools/apt-get.sh" update -qq &&
    DEBIAN_FRONTEND=noninteractive sh "$top/tools/apt-get.sh" install -y -qq --no-install-recommends $missing; } || rc=$?
  if [ -n "$made_policy" ]; then rm -f "$policy"; fi
  [ "$rc" -eq 0 ] || { echo "run-tests.sh: apt-get failed ($rc)" >&2; exit "$rc"; }
fi

# ------------------------------------------------------------ libsw.so
if [ -z "${SW_LIB:-}" ]; then
  for c in "$top/_build/plain/libsw/.libs/libsw.so" "$top/libsw/.libs/libsw.so"; do
    if [ -f "$c" ]; then SW_LIB=$c; break; fi
  done
fi
if [ -z "${SW_LIB:-}" ]; then
  echo "run-tests.sh: set SW_LIB to the full path of libsw.so (build libsw first)" >&2
  exit 1
fi
# absolute: relative to the caller's directory, else to the top of the tree
case "$SW_LIB" in
/*) ;;
*)
  if [ -f "$SW_LIB" ]; then
    SW_LIB="$(cd "$(dirname "$SW_LIB")" && pwd)/$(basename "$SW_LIB")"
  else
    SW_LIB="$top/$SW_LIB"
  fi
  ;;
esac
if [ ! -f "$SW_LIB" ]; then
  echo "run-tests.sh: SW_LIB=$SW_LIB does not exist" >&2
  exit 1
fi
export SW_LIB
echo "run-tests.sh: SW_LIB=$SW_LIB"

cd "$top"
status=0

echo "== busted (plain LuaJIT): bindings/lua/spec"
busted --lua=luajit -o utfTerminal bindings/lua/spec || status=1

echo "== nginx integration: bindings/lua/t/nginx.lua"
luajit bindings/lua/t/nginx.lua || status=1

echo "== nginx integration: bindings/lua/t/breaker_nginx.lua (a failing upstream)"
luajit bindings/lua/t/breaker_nginx.lua || status=1

if [ "$status" -eq 0 ]; then
  echo "run-tests.sh: all Lua tests passed"
else
  echo "run-tests.sh: FAILED" >&2
fi
exit "$status"
