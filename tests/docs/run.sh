#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Every marked code block of README.md and docs/*.md, run as written, in the
# order a reader follows them: README.md's build, install and Python steps in
# a fresh copy of the tree, then each page (tests/docs/doctest.py; the
# marking convention is in docs/reliability.md, "Examples that run").
#
# Usage, as root: sh tests/docs/run.sh [docs/PAGE.md ...]   (README.md always runs)
#
# The blocks run in private namespaces (unshare): a mount namespace in which
# /usr/local, /etc, /var/log and /run are overlays and /dev/shm an empty
# tmpfs (so `make install`, `ldconfig`, nginx and the segments the examples
# make touch nothing of the machine), a network namespace with only its own
# loopback (servers are reachable on 127.0.0.1 alone, and a port taken
# outside does not matter), and a PID namespace (everything a block started
# dies with the test). The whole run is bounded by a timeout.
set -eu
cd "$(dirname "$0")/../.."
py=/usr/bin/python3
$py tests/docs/doctest.py --check "$@"
if [ "$(id -u)" != 0 ]; then
  echo "tests/docs/run.sh: run as root (the examples install into /usr/local, in a private overlay)" >&2
  exit 1
fi
. tools/deps.sh
# What the runner needs, and every package the pages' apt-get lines name (a
# page's apt-get is checked, not run: tests/docs/apt-get).
sw_need $SW_C_PKGS util-linux iproute2 curl prometheus luajit2 nginx-core libnginx-mod-http-lua \
  $($py tests/docs/doctest.py --packages)

work=$(mktemp -d /tmp/sw-doctest.XXXXXX)
trap 'rm -rf "$work"' EXIT
rc=0
SW_DOCTEST_SANDBOX=1 SW_DOCTEST_WORK="$work" \
  timeout -k 10 1200 unshare --mount --propagation private --net --pid --fork --kill-child \
  --mount-proc $py tests/docs/doctest.py --run "$@" || rc=$?
[ "$rc" -ne 124 ] || echo "tests/docs/run.sh: stopped after 1200 s" >&2
exit "$rc"
