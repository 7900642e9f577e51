#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# tools/deps.sh waits for another apt or dpkg instead of failing (issue 13,
# item 9). As root on Debian: sh tests/apt-lock.sh
#
# While a stand-in for unattended-upgrades holds the dpkg frontend lock
# (/var/lib/dpkg/lock-frontend) and the package lists' lock
# (/var/lib/apt/lists/lock) for HOLD seconds, it calls sw_need for a
# package that is installed (it must return at once: no apt at all) and for
# one that is missing (it must wait for the locks, then install it). The
# package is removed again at the end.
#
# Not a step of tests/run-all.sh (CI): it downloads, installs and removes a
# Debian package, which a test suite should not do to the machine it runs
# on, and while it holds the locks any other apt-get on the machine without
# a lock timeout fails (on a shared machine: someone else's install). It
# never harms apt's state: it takes the locks as apt does (fcntl, released
# by the kernel when the holder dies), only when nobody holds them, for a
# few seconds, and it installs only with apt-get.
set -eu
cd "$(dirname "$0")/.."
. tools/deps.sh
pkg=${SW_APT_LOCK_PACKAGE:-hello}     # GNU hello: 50 kB, depends on libc6 only
have=coreutils
HOLD=${HOLD:-6}
[ "$(id -u)" = 0 ] || { echo "apt-lock.sh: run as root" >&2; exit 1; }
if dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed"; then
  echo "apt-lock.sh: $pkg is installed already; set SW_APT_LOCK_PACKAGE to a missing package" >&2
  exit 77
fi
work=$(mktemp -d)
holder=""
cleanup() {
  if [ -n "$holder" ]; then kill "$holder" 2>/dev/null || true; wait "$holder" 2>/dev/null || true; fi
  if dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed"; then
    sw_apt_get purge -y -qq "$pkg" >/dev/null && echo "removed $pkg again"
  fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# The stand-in: takes both locks without waiting (another apt at work: skip)
# and holds them for HOLD seconds.
/usr/bin/python3 - "$HOLD" > "$work/holder.out" 2>&1 <<'PY' &
import fcntl, os, sys, time
fds = []
for path in ("/var/lib/dpkg/lock-frontend", "/var/lib/apt/lists/lock"):
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o640)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        print("busy", path, flush=True)
        sys.exit(3)
    fds.append(fd)
print("holding", flush=True)
time.sleep(float(sys.argv[1]))
PY
holder=$!
for i in $(seq 50); do grep -q -e holding -e busy "$work/holder.out" && break; sleep 0.1; done
if grep -q busy "$work/holder.out"; then
  echo "apt-lock.sh: another apt or dpkg is running: $(cat "$work/holder.out"); try later" >&2
  exit 77
fi
grep -q holding "$work/holder.out" || fail "the lock holder did not start: $(cat "$work/holder.out")"
t0=$(date +%s)

echo "--- an installed package: no apt at all, no waiting"
sw_need "$have" || fail "sw_need $have"
[ $(($(date +%s) - t0)) -le 1 ] || fail "sw_need $have waited"

echo "--- a missing package: waits for the locks (held ${HOLD} s), then installs it"
sw_need "$pkg" || fail "sw_need $pkg failed while apt was busy"
waited=$(($(date +%s) - t0))
dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || fail "$pkg not installed"
[ "$waited" -ge $((HOLD - 1)) ] || fail "sw_need $pkg returned after ${waited} s: it did not wait"
echo "ok: sw_need waited ${waited} s for the locks and installed $pkg"
