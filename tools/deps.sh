# SPDX-License-Identifier: Apache-2.0
# Sourced by the top-level scripts: install the Debian packages a step needs
# when they are missing (as root on Debian 12; otherwise say what to install).
sw_need() {
  missing=""
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
  done
  [ -z "$missing" ] && return 0
  if [ "$(id -u)" != 0 ]; then
    echo "missing Debian packages:$missing (run as root, or: sudo apt-get install$missing)" >&2
    return 1
  fi
  echo "installing:$missing" >&2
  export DEBIAN_FRONTEND=noninteractive
  sw_apt_get update -qq >/dev/null
  sw_apt_get install -y -qq --no-install-recommends $missing >/dev/null
}

# apt-get that waits for another apt or dpkg (a fresh machine often runs
# unattended-upgrades at boot) instead of failing: sw_apt_get ARGS...
# install and the like wait up to 5 minutes for the dpkg lock (apt's
# DPkg::Lock::Timeout). update takes the package lists' lock, which that
# option does not cover (apt 2.6): it is retried while that lock is held, up
# to 5 minutes, and never fails: install then uses the lists there are.
sw_apt_get() {
  if [ "${1:-}" != update ]; then
    apt-get -o DPkg::Lock::Timeout=300 "$@"
    return
  fi
  waited=0
  while :; do
    err=$(apt-get -o DPkg::Lock::Timeout=300 "$@" 2>&1 >/dev/null) && return 0
    case "$err" in
    *"Could not get lock"*)
      if [ "$waited" -lt 300 ]; then
        [ "$waited" -gt 0 ] || echo "apt-get update: waiting for another apt to finish" >&2
        sleep 2
        waited=$((waited + 2))
        continue
      fi ;;
    esac
    echo "apt-get update failed, going on with the package lists there are: $err" >&2
    return 0
  done
}

# Configure and build libsw in an out-of-tree directory: sw_build DIR [configure args]
sw_build() {
  dir=$1; shift
  top=$(pwd)
  [ -x "$top/configure" ] || (cd "$top" && autoreconf -fi >/dev/null 2>&1)
  mkdir -p "$dir"
  if [ ! -f "$dir/Makefile" ]; then
    (cd "$dir" && "$top/configure" -q "$@")
  fi
  make -C "$dir" -s -j"$(nproc)" >/dev/null
}

SW_C_PKGS="gcc make autoconf automake libtool pkgconf check libhiredis-dev libmicrohttpd-dev libjansson-dev man-db python3-yaml"
