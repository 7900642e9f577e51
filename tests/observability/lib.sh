# Sourced by tests/observability/*.sh: what their checks share. Needs $work.
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
