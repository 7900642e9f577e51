#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# ngx_http_libsw_module against nginx's own limit_req, side by side in one
# run, per-IP limits keyed on $binary_remote_addr (issue 26's goals):
#
#   sh bench/nginx/run.sh [BUILD_DIR] [K]
#
# BUILD_DIR (default _build/plain): a libsw build with the module.
# 1. callgrind, instructions per request: nginx in one process
#    (master_process off) under valgrind --tool=callgrind, instructions
#    counted inside ngx_http_core_generic_phase (the preaccess phase, where
#    both modules run; realip's cost is the same everywhere) and
#    ngx_http_free_request; (Ir(2K requests) - Ir(K requests)) / K, K = 5000
#    by default, cancels start-up and shutdown. Clients come from X-Real-IP
#    (set_real_ip_from 127.0.0.1): "cycle" = 1000 addresses in turn (every
#    measured request is an existing client), "new" = a new address every
#    request. Locations: none (no handler at all), limit_req (rate and burst
#    so high that nothing is refused), libsw (the module's default mode,
#    pacing: limit_req's leaky bucket), libsw_window (mode=window).
# 2. wrk, 10,000 client addresses (a wrk script sets X-Real-IP), rounds of
#    WRK_SECONDS (default 3) alternating none, limit_req, libsw,
#    libsw_window, ROUNDS (default 3) times; the median of each. WRK=0
#    skips it.
# 3. memory for 100,000 clients: libsw's table for 100,000 keys (its size
#    from sw_keyed_stats, through swctl list --json, after 100,000 clients:
#    none evicted) and the smallest limit_req zone (whole MiB, from 10m up)
#    that still remembers the first of 100,000 clients.
#    MEMORY=0 skips it. KEEP_CALLGRIND=DIR keeps every callgrind profile
#    there (CG_OPTS: more callgrind options, e.g. --dump-instr=yes);
#    CALLGRIND=0 skips part 1.
# Then the goal= lines, limit_req beside.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
build=${1:-_build/plain}
case "$build" in /*) ;; *) build="$top/$build" ;; esac
K=${2:-5000}
K2=$((K * 2))
CYCLE=${CYCLE:-1000}
WRK=${WRK:-1}
ROUNDS=${ROUNDS:-3}
WRK_SECONDS=${WRK_SECONDS:-3}
MEMORY=${MEMORY:-1}
module="$build/bindings/nginx/build/ngx_http_libsw_module.so"
libdir="$build/libsw/.libs"
swctl="$build/tools/swctl"
[ -f "$module" ] || { echo "bench/nginx/run.sh: no $module (make in $build with nginx-dev)" >&2; exit 1; }
for cmd in nginx valgrind curl wrk; do
  command -v "$cmd" >/dev/null 2>&1 || { echo "bench/nginx/run.sh: needs $cmd" >&2; exit 1; }
done
export LD_LIBRARY_PATH="$libdir"

prefix=$(mktemp -d /tmp/libsw-ngxbench-XXXXXX)
chmod 755 "$prefix"
tag="ngxbench$$"
port=$((20000 + $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 40000))
mkdir -p "$prefix/html" "$prefix/logs"
for l in none limit_req libsw libsw_window mem_libsw mem_limit_req; do printf 'ok\n' >"$prefix/html/$l"; done

cleanup() {
  if [ -f "$prefix/logs/nginx.pid" ]; then
    pid=$(cat "$prefix/logs/nginx.pid" 2>/dev/null || true)
    [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null || true
  fi
  rm -f /dev/shm/"${tag}"_*
  rm -rf "$prefix"
}
trap cleanup EXIT INT TERM

# conf [LIMIT_REQ_MEM_SIZE]: nginx.conf; the memory zones only when asked
conf() {
  memzones="" memlocs=""
  if [ -n "$1" ]; then
    memzones="limit_req_zone \$binary_remote_addr zone=mem:$1 rate=1r/m;
  libsw_zone \$binary_remote_addr zone=mem capacity=100000 rate=1r/m segment=${tag}_mem;"
    memlocs="location = /mem_limit_req { limit_req zone=mem; }
    location = /mem_libsw { libsw_limit zone=mem; }"
  fi
  cat >"$prefix/nginx.conf" <<EOF
load_module $module;
daemon off;
master_process off;
worker_processes 1;
error_log $prefix/logs/error.log warn;
pid $prefix/logs/nginx.pid;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path $prefix/client_body;
  proxy_temp_path $prefix/proxy;
  fastcgi_temp_path $prefix/fastcgi;
  uwsgi_temp_path $prefix/uwsgi;
  scgi_temp_path $prefix/scgi;
  keepalive_requests 1000000;
  limit_req_status 429;
  limit_req_zone \$binary_remote_addr zone=lr:64m rate=1000000r/s;
  libsw_zone \$binary_remote_addr zone=pace capacity=200000 rate=1000000r/s burst=100000000
             segment=${tag}_pace;
  libsw_zone \$binary_remote_addr zone=win capacity=200000 rate=1000r/s window=10m mode=window
             segment=${tag}_win;
  $memzones
  server {
    listen 127.0.0.1:$port;
    root $prefix/html;
    set_real_ip_from 127.0.0.1;
    real_ip_header X-Real-IP;
    location = /none { }
    location = /limit_req { limit_req zone=lr burst=100000000 nodelay; }
    location = /libsw { libsw_limit zone=pace nodelay; }
    location = /libsw_window { libsw_limit zone=win; }
    $memlocs
  }
}
EOF
}

noaslr=""
if setarch "$(uname -m)" -R true 2>/dev/null; then noaslr="setarch $(uname -m) -R"; fi
hexport=$(printf '%04X' "$port")
listening() { awk -v p=":$hexport" '$2 ~ p"$" && $4 == "0A" { f = 1 } END { exit !f }' /proc/net/tcp; }
wait_listening() { # PID of the nginx (or valgrind) started
  i=0
  until listening; do
    i=$((i + 1))
    if [ "$i" -gt 1200 ] || ! alive "$1"; then
      echo "bench/nginx/run.sh: nginx did not start" >&2
      cat "$prefix/logs/error.log" "$prefix/logs/stdout" >&2 2>/dev/null || true
      exit 1
    fi
    sleep 0.05
  done
}
alive() { [ -r "/proc/$1/status" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null; }
stop_nginx() { # by the PID nginx wrote; QUIT again every second (valgrind is slow to notice)
  pid=$(cat "$prefix/logs/nginx.pid")
  i=0
  while alive "$pid"; do
    kill -QUIT "$pid" 2>/dev/null || break
    i=$((i + 1))
    if [ "$i" -gt 60 ]; then kill -KILL "$pid" 2>/dev/null || true; break; fi
    sleep 1
  done
  wait "$1" 2>/dev/null || true
  rm -f "$prefix/logs/nginx.pid"
}

# send LOCATION N CLIENTS [FIRST]: N requests on one keep-alive connection
# from clients "cycle" (CYCLE addresses), "new" (addresses FIRST+1..); prints
# how many got 200
send() {
  cfg="$prefix/curl.cfg"
  awk -v port="$port" -v loc="$1" -v n="$2" -v clients="$3" -v cycle="$CYCLE" -v first="${4:-0}" 'BEGIN {
    for (i = 0; i < n; i++) {
      if (i > 0) print "next"
      printf "url = \"http://127.0.0.1:%s/%s\"\noutput = \"/dev/null\"\n", port, loc
      print "write-out = \"%{http_code}\\n\""
      j = clients == "cycle" ? i % cycle + 1 : first + i + 1
      printf "header = \"X-Real-IP: 10.%d.%d.%d\"\n", int(j / 65536), int(j / 256) % 256, j % 256
    }
  }' >"$cfg"
  curl -s -K "$cfg" | grep -c '^200$' || true
}

ir_run() { # LOCATION N CLIENTS: instructions of one run
  out="$prefix/callgrind.out"
  rm -f "$out" /dev/shm/"${tag}"_*
  $noaslr valgrind --tool=callgrind --callgrind-out-file="$out" \
    --toggle-collect=ngx_http_core_generic_phase --toggle-collect=ngx_http_free_request ${CG_OPTS:-} \
    nginx -p "$prefix" -c "$prefix/nginx.conf" >"$prefix/logs/stdout" 2>&1 &
  vg=$!
  wait_listening "$vg"
  ok=$(send "$1" "$2" "$3")
  [ "$ok" -eq "$2" ] || { echo "bench/nginx/run.sh: $1: only $ok of $2 got 200" >&2; exit 1; }
  stop_nginx "$vg"
  if [ -n "${KEEP_CALLGRIND:-}" ]; then cp "$out" "$KEEP_CALLGRIND/callgrind.$1.$3.$2"; fi
  awk '/^(summary|totals):/ { print $2; exit }' "$out"
}

over() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%d", a - b }'; }

conf ""
echo "# nginx $(nginx -v 2>&1 | sed 's/.*nginx\///'), libsw $(awk -F'"' '/SW_VERSION_STRING/ { print $2 }' "$build/libsw/sw/version.h" 2>/dev/null), module $module"
echo "# callgrind: instructions per request = (Ir($K2 requests) - Ir($K requests)) / $K"
CALLGRIND=${CALLGRIND:-1}
[ "$CALLGRIND" != 0 ] || echo "# CALLGRIND=0: no callgrind runs"
for c in cycle new; do
  [ "$CALLGRIND" != 0 ] || break
  for l in none limit_req libsw libsw_window; do
    a=$(ir_run "$l" "$K" "$c")
    b=$(ir_run "$l" "$K2" "$c")
    per=$(awk -v a="$a" -v b="$b" -v k="$K" 'BEGIN { printf "%.0f", (b - a) / k }')
    eval "ir_${c}_$l=$per"
    echo "clients=$c location=$l instructions_per_request=$per"
  done
done
for v in cycle_none cycle_limit_req cycle_libsw cycle_libsw_window new_none new_limit_req \
         new_libsw new_libsw_window; do eval ": \${ir_$v:=0}"; done
lr_c=$(over "$ir_cycle_limit_req" "$ir_cycle_none"); sw_c=$(over "$ir_cycle_libsw" "$ir_cycle_none")
sww_c=$(over "$ir_cycle_libsw_window" "$ir_cycle_none")
lr_n=$(over "$ir_new_limit_req" "$ir_new_none"); sw_n=$(over "$ir_new_libsw" "$ir_new_none")
sww_n=$(over "$ir_new_libsw_window" "$ir_new_none")

rps_line=""
if [ "$WRK" != 0 ]; then
  cat >"$prefix/clients.lua" <<'EOF'
-- 10,000 client addresses in turn (X-Real-IP; set_real_ip_from 127.0.0.1)
local i = 0
request = function()
  i = i % 10000 + 1
  return wrk.format("GET", nil, { ["X-Real-IP"] = "10.0." .. math.floor(i / 256) .. "." .. i % 256 })
end
EOF
  echo "# wrk -t1 -c16, 10,000 client addresses, ${WRK_SECONDS} s rounds alternating, $ROUNDS rounds (requests/s)"
  nginx -p "$prefix" -c "$prefix/nginx.conf" >"$prefix/logs/stdout" 2>&1 &
  ng=$!
  wait_listening "$ng"
  for l in none limit_req libsw libsw_window; do
    wrk -t1 -c16 -d1s -s "$prefix/clients.lua" "http://127.0.0.1:$port/$l" >/dev/null 2>&1 # warm-up
  done
  r=0
  while [ "$r" -lt "$ROUNDS" ]; do
    for l in none limit_req libsw libsw_window; do
      rps=$(wrk -t1 -c16 -d"${WRK_SECONDS}s" -s "$prefix/clients.lua" "http://127.0.0.1:$port/$l" |
        awk '/Requests\/sec/ { print $2 } /Non-2xx/ { bad = 1 } END { if (bad) print "non-2xx" }')
      case "$rps" in *non-2xx*) echo "bench/nginx/run.sh: $l answered non-2xx" >&2; exit 1 ;; esac
      echo "round=$r location=$l requests_per_second=$rps"
      eval "rps_${l}=\"\${rps_${l}:-} $rps\""
    done
    r=$((r + 1))
  done
  stop_nginx "$ng"
  median() { echo "$@" | tr ' ' '\n' | grep . | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
  m_none=$(median $rps_none); m_lr=$(median $rps_limit_req); m_sw=$(median $rps_libsw)
  m_sww=$(median $rps_libsw_window)
  echo "median none=$m_none limit_req=$m_lr libsw=$m_sw libsw_window=$m_sww"
fi

if [ "$MEMORY" != 0 ]; then
  echo "# memory for 100,000 clients"
  size=10
  lr_mib=""
  while [ "$size" -le 32 ]; do
    conf "${size}m"
    nginx -p "$prefix" -c "$prefix/nginx.conf" >"$prefix/logs/stdout" 2>&1 &
    ng=$!
    wait_listening "$ng"
    ok=$(send mem_limit_req 100000 new 0)
    again=$(send mem_limit_req 1 new 0) # client 1 again: 0 (refused) if still remembered
    if [ "$size" -eq 10 ]; then
      sw_ok=$(send mem_libsw 100000 new 0)
      json=$("$swctl" list --json "${tag}_mem")
      sw_bytes=$(echo "$json" | sed -n 's/.*"bytes":\([0-9]*\).*/\1/p')
      sw_keys=$(echo "$json" | sed -n 's/.*"keys":\([0-9]*\).*/\1/p')
      sw_evicted=$(echo "$json" | sed -n 's/.*"evicted":\([0-9]*\).*/\1/p')
      sw_again=$(send mem_libsw 1 new 0)
      echo "libsw: 100000 clients (all $sw_ok admitted), table bytes=$sw_bytes keys=$sw_keys evicted=$sw_evicted, client 1 again: $([ "$sw_again" = 0 ] && echo refused || echo admitted)"
    fi
    stop_nginx "$ng"
    rm -f /dev/shm/"${tag}"_*
    echo "limit_req zone=${size}m: 100000 clients ($ok admitted), client 1 again: $([ "$again" = 0 ] && echo "refused (remembered)" || echo "admitted (evicted)")"
    if [ "$again" = 0 ]; then lr_mib=$size; break; fi
    size=$((size + 1))
  done
fi

echo "# goals (issue 26), limit_req beside"
[ "$CALLGRIND" = 0 ] || awk -v s="$sw_c" -v l="$lr_c" -v w="$sww_c" 'BEGIN {
  printf "goal=existing_client instructions_added libsw=%d limit_req=%d ratio=%.2f target<=0.75 %s (libsw_window=%d ratio=%.2f)\n",
    s, l, s / l, (s <= 0.75 * l ? "met" : "NOT_MET"), w, w / l }'
[ "$CALLGRIND" = 0 ] || awk -v s="$sw_n" -v l="$lr_n" -v w="$sww_n" 'BEGIN {
  printf "goal=new_client instructions_added libsw=%d limit_req=%d ratio=%.2f target<=1.00 %s (libsw_window=%d ratio=%.2f)\n",
    s, l, s / l, (s <= l ? "met" : "NOT_MET"), w, w / l }'
if [ "$WRK" != 0 ]; then
  awk -v s="$m_sw" -v l="$m_lr" -v w="$m_sww" -v n="$m_none" 'BEGIN {
    printf "goal=requests_per_second libsw=%.0f limit_req=%.0f ratio=%.3f target>=1.00 %s (libsw_window=%.0f none=%.0f)\n",
      s, l, s / l, (s >= l ? "met" : "NOT_MET"), w, n }'
fi
if [ "$MEMORY" != 0 ]; then
  awk -v s="$sw_bytes" -v m="$lr_mib" -v e="$sw_evicted" 'BEGIN {
    l = m == "" ? -1 : m * 1048576
    printf "goal=memory_100000_clients libsw_bytes=%d limit_req_bytes=%s %s (libsw evicted %d; limit_req: the smallest whole-MiB zone that remembers client 1)\n",
      s, (l < 0 ? ">32MiB" : l), ((l < 0 || s < l) && e == 0 ? "met" : "NOT_MET"), e }'
fi
