#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Tests of ngx_http_libsw_module (bindings/nginx/t, pytest): Debian's nginx
# with 2 workers on 127.0.0.1 (free ports, every wait bounded, stopped by
# PID), and the module under valgrind memcheck (master_process off).
#
# Usage: sh bindings/nginx/run-tests.sh [BUILD_DIR] [pytest args]
# BUILD_DIR (default _build/plain) is a configured libsw build with the
# module (configure found nginx-dev). As root it installs the Debian
# packages it needs when they are missing.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
build=${1:-_build/plain}
[ $# -gt 0 ] && shift
case "$build" in /*) ;; *) build="$top/$build" ;; esac
cd "$top"
. tools/deps.sh
# nginx's package would start a system nginx on port 80: not here
policy=/usr/sbin/policy-rc.d
made_policy=""
if [ "$(id -u)" = 0 ] && [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && made_policy=1
fi
rc=0
sw_need nginx-core nginx-dev python3-pytest valgrind procps || rc=$?
[ -z "$made_policy" ] || rm -f "$policy"
[ "$rc" = 0 ] || exit "$rc"

# a build configured before nginx-dev was there: configure it again
if ! grep -q 'BUILD_NGINX_MODULE_TRUE"\]=""' "$build/config.status" 2>/dev/null; then
  (cd "$build" && ./config.status --recheck >/dev/null && ./config.status >/dev/null)
fi
make -C "$build" -s bindings/nginx/build/ngx_http_libsw_module.so tools/swctl >/dev/null
SW_NGX_MODULE="$build/bindings/nginx/build/ngx_http_libsw_module.so"
SW_LIB="$build/libsw/.libs/libsw.so"
SWCTL="$build/tools/swctl"
export SW_NGX_MODULE SW_LIB SWCTL
[ -f "$SW_NGX_MODULE" ] || { echo "run-tests.sh: no $SW_NGX_MODULE (configure without nginx-dev?)" >&2; exit 1; }
PYTHONDONTWRITEBYTECODE=1 exec /usr/bin/python3 -m pytest -q -p no:cacheprovider "$here/t" "$@"
