# SPDX-License-Identifier: Apache-2.0
# Sourced by tests/observability/*.sh, first: the build directory ($1),
# the tree (the current directory), the packages every check needs, swctl
# built, and what the checks share. At exit, the processes in $pids are
# killed, the shared memory segments named in $segs removed and $work deleted.
build=$(cd "${1:-_build/plain}" && pwd)
cd "$(dirname "$0")/../.."
top=$(pwd)
. tools/deps.sh
sw_need prometheus chromium curl time
make -C "$build" -s tools/swctl >/dev/null
swctl="${SWCTL:-$build/tools/swctl}"
work=$(mktemp -d)
pids=""
segs=""
cleanup() {
  for p in $pids; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  for s in $segs; do rm -f "/dev/shm/$s"; done
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_http() { # url
  for i in $(seq 1 100); do curl -fs -o /dev/null "$1" && return 0; sleep 0.1; done
  fail "nothing answers at $1"
}
wait_line() { # file text: until the file holds the text (10 s)
  for i in $(seq 1 200); do grep -q "$2" "$1" && return 0; sleep 0.05; done
  fail "no \"$2\" in $1: $(cat "$1")"
}
chrome() {
  chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$work/chrome" --virtual-time-budget=4000 "$@" 2>/dev/null
}
