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
  apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends $missing >/dev/null
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

SW_C_PKGS="gcc make autoconf automake libtool pkgconf check libhiredis-dev libmicrohttpd-dev"
