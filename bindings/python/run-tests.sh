#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Build, install and test the libsw Python binding, offline, on Debian 12.
#   bindings/python/run-tests.sh [pytest arguments]
# Installs the Debian packages it needs when they are missing (as root), makes
# <repo>/.venv with Debian's /usr/bin/python3 (system site packages: cffi,
# pytest, ... come from Debian), installs ./bindings/python into it and runs
# pytest on bindings/python/tests.
set -eu

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PY=/usr/bin/python3 # Debian's, whatever python3 comes first in PATH
unset PYTHONHOME PYTHONPATH PIP_REQUIRE_VIRTUALENV || true

DEBS="python3 python3-venv python3-dev python3-cffi python3-pytest python3-pytest-asyncio \
python3-hypothesis python3-limits python3-greenlet python3-setuptools python3-wheel gcc libc6-dev libjansson-dev pkgconf"
# libsw.web's tests serve real applications (test_web_servers.py); libsw
# itself depends on none of these.
DEBS="$DEBS python3-flask python3-flask-limiter python3-django python3-fastapi python3-starlette \
python3-uvicorn gunicorn python3-httpx python3-requests"

missing=""
for p in $DEBS; do
  dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q "install ok installed" ||
    missing="$missing $p"
done
if [ -n "$missing" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "run-tests.sh: installing$missing"
    export DEBIAN_FRONTEND=noninteractive
    sh "$ROOT/tools/apt-get.sh" update -q # waits for another apt; never fails
    # shellcheck disable=SC2086
    sh "$ROOT/tools/apt-get.sh" install -y -q --no-install-recommends $missing
  else
    echo "run-tests.sh: missing Debian packages:$missing (apt-get install them as root)" >&2
    exit 1
  fi
fi

cd "$ROOT"
# A venv made by another interpreter (e.g. pyenv's) or without the system
# site packages is made again.
if [ -x .venv/bin/python ] && ! grep -qx "home = /usr/bin" .venv/pyvenv.cfg 2>/dev/null; then
  echo "run-tests.sh: .venv was not made by $PY: making it again"
  rm -rf .venv
fi
if [ -x .venv/bin/python ] && ! grep -qx "include-system-site-packages = true" .venv/pyvenv.cfg; then
  rm -rf .venv
fi
if [ ! -x .venv/bin/python ]; then
  /usr/bin/python3 -m venv --system-site-packages .venv
fi

# --no-deps: cffi comes from Debian; --force-reinstall would otherwise try to
# reinstall it from the (absent) index.
.venv/bin/pip install -q --no-build-isolation --no-index --force-reinstall --no-deps ./bindings/python

exec .venv/bin/python -m pytest bindings/python/tests "$@"
