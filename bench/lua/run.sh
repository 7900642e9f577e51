#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Cost of resty.libsw per request in nginx, against an empty access_by_lua
# handler and against nginx's own limit_req.
#
#   SW_LIB=/abs/path/libsw.so sh bench/lua/run.sh [K]
#
# 1. callgrind: nginx in one process (master_process off, worker_processes 1)
#    runs under valgrind --tool=callgrind; curl sends K, then (in a new run)
#    2K requests on one keep-alive connection to one location; the
#    instructions per request are (Ir(2K) - Ir(K)) / K, which cancels
#    startup, init_by_lua, JIT warm-up and shutdown. K defaults to 5000:
#    LuaJIT's garbage collector runs a cycle every few hundred requests, and
#    one cycle more or less in one of the two runs moves the figure by about
#    ±150 with K = 2000 (a handler's figure varied 3323..3495 in three runs
#    at K = 1000), by about ±10 with K = 5000.
#    First from one client address; then (CLIENTS, default "cycle new")
#    from many: every request carries X-Real-IP, which the realip module
#    (set_real_ip_from 127.0.0.1) makes the request's client address, so
#    that $binary_remote_addr differs from request to request:
#      cycle  CYCLE (default 1000) addresses in turn: from the CYCLE-th
#             request on, every one is a client seen before (the extra K
#             requests of the 2K run all are): the cost of an existing key;
#      new    a new address every request: the cost of a new key.
#    Those runs measure MANY_LOCATIONS (default: none limit_req lua_empty
#    libsw_key); realip's own cost is the same in each and cancels out.
#    KEEP_CALLGRIND=dir keeps every run's callgrind profile there.
#    CLIENTS="" skips those runs.
# 2. wrk: the same nginx without valgrind, wrk -t1 -c8 -d3s per location
#    (smoke numbers: this machine is shared and noisy). WRK=0 skips it.
#
# The goals (issue 16) come first in the summary, one line each: the
# documented access + log usage and a QPS rule without the log phase, both
# over the empty access handler, and limit_req over none; then the
# breakdown: each Lua floor (calling a function from a handler), the C
# calls (raw_entry, raw_entry_exit: the same FFI calls made bare), and what
# resty.libsw's own Lua adds on top of them.
#
# Locations (each serves the same 3-byte static file):
#   none             no access handler
#   limit_req        limit_req zone keyed by $binary_remote_addr, huge rate
#   lua_empty        access_by_lua_block { }
#   lua_call         a call of a trivial Lua function from the handler
#                    (require("libsw").loaded()): the floor of any Lua limiter
#   raw_entry        one FFI call of sw_limiter_entry from a Lua function: the
#                    floor of a libsw limiter in Lua
#   libsw            resty.libsw limit("bench"): one QPS limiter, no log phase
#                    (the recommended configuration of a QPS rule)
#   libsw_key        limit("bench_key"), key_var = "binary_remote_addr": a
#                    keyed table (capacity 100000), the per-IP limit
#   libsw_key_chunk  limit("bench_key", ngx.var.binary_remote_addr) (the
#                    variable read in the handler's chunk: interpreted)
#   lua_empty_log    access_by_lua_block { } + log_by_lua_block { }
#   lua_call_log     lua_call in both phases: the floor of access + log
#   raw_entry_exit   raw_entry in access, one FFI call of sw_limiter_exit in
#                    log: the floor of a libsw limiter with its exit
#   libsw_exit       limit("bench_exit") + log() in log_by_lua, the usage
#                    docs/openresty.md shows where the exit is needed (RT,
#                    success, requests in flight: exit = true)
# libsw never blocks here (qps = 1e12; 1000 per key over 10 minutes for
# the keyed table, whose counts per key and interval are 20 bits). Instructions are counted only inside
# the phases a limiter touches (callgrind --toggle-collect on
# ngx_http_core_generic_phase: preaccess, where limit_req runs;
# ngx_http_core_access_phase: access_by_lua; ngx_http_free_request: the log
# phase and the request's end), so the rest of nginx adds no noise; LuaJIT's
# garbage collector still adds some (a few tens of instructions per request
# from run to run).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
K=${1:-5000}
K2=$((K * 2))

if [ -z "${SW_LIB:-}" ]; then
  for c in "$top/_build/plain/libsw/.libs/libsw.so" "$top/libsw/.libs/libsw.so"; do
    if [ -f "$c" ]; then SW_LIB=$c; break; fi
  done
fi
[ -n "${SW_LIB:-}" ] || { echo "bench/lua/run.sh: set SW_LIB to libsw.so" >&2; exit 1; }
case "$SW_LIB" in /*) ;; *) SW_LIB="$(cd "$(dirname "$SW_LIB")" && pwd)/$(basename "$SW_LIB")" ;; esac
for cmd in nginx valgrind curl wrk luajit; do
  if [ "$cmd" = wrk ] && [ "${WRK:-1}" = 0 ]; then continue; fi
  command -v "$cmd" >/dev/null 2>&1 || { echo "bench/lua/run.sh: needs $cmd" >&2; exit 1; }
done
modules=/usr/lib/nginx/modules
[ -f "$modules/ngx_http_lua_module.so" ] || modules=/usr/share/nginx/modules
resty_dir=$(dirname "$(dirname "$(ls /usr/share/lua/5.1/resty/core.lua /usr/local/share/lua/5.1/resty/core.lua 2>/dev/null | head -1)")")

prefix=$(mktemp -d /tmp/libsw-bench-XXXXXX)
tag="${BENCH_TAG:-$$}" # BENCH_TAG: a fixed segment name (the same strings in every run)
port=$((20000 + $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 40000))
mkdir -p "$prefix/html" "$prefix/logs"
LOCATIONS=${LOCATIONS:-"none limit_req lua_empty lua_call raw_entry libsw libsw_key libsw_key_chunk lua_empty_log lua_call_log raw_entry_exit libsw_exit"}
MANY_LOCATIONS=${MANY_LOCATIONS:-"none limit_req lua_empty libsw_key"}
CLIENTS=${CLIENTS-"cycle new"}
WRK=${WRK:-1}
CYCLE=${CYCLE:-1000}
for l in $LOCATIONS $MANY_LOCATIONS; do printf 'ok\n' >"$prefix/html/$l"; done

cleanup() {
  if [ -f "$prefix/logs/nginx.pid" ]; then
    pid=$(cat "$prefix/logs/nginx.pid" 2>/dev/null || true)
    [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null || true
  fi
  for s in bench bench_key bench_exit; do rm -f "/dev/shm/libsw_${s}_$tag"; done
  rm -rf "$prefix"
}
trap cleanup EXIT INT TERM

cat >"$prefix/nginx.conf" <<EOF
load_module $modules/ndk_http_module.so;
load_module $modules/ngx_http_lua_module.so;
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
  lua_package_path "$top/bindings/lua/?.lua;$resty_dir/?.lua;;";
  limit_req_zone \$binary_remote_addr zone=bench:10m rate=1000000r/s;  # 10m: 20000 clients, none evicted
  init_by_lua_block {
    assert(require("libsw").load("$SW_LIB"))
    local limits = require "resty.libsw"
    assert(limits.define("bench", { qps = 1e12, reset = true,
                                    segment = "libsw_bench_$tag" }))
    -- a 10-minute interval (2 windows of 5 minutes): callgrind slows nginx
    -- some 50 times, and a key's first entry in a window takes libsw's
    -- longer path; this keeps the runs in one window (that path: see docs)
    assert(limits.define("bench_key", { qps = 1000, interval = 600, capacity = 100000,
                                        reset = true,
                                        key_var = "binary_remote_addr",
                                        segment = "libsw_bench_key_$tag" }))
    assert(limits.define("bench_exit", { qps = 1e12, exit = true, reset = true,
                                         segment = "libsw_bench_exit_$tag" }))
    -- the floors: one FFI call of sw_limiter_entry (and of sw_limiter_exit)
    -- from a compiled function
    local ffi, libsw = require "ffi", require "libsw"
    local C, d = libsw.C, ffi.new("sw_decision")
    local h = assert(limits.get("bench").lim:handle(limits.NOKEY))
    package.loaded.bench_raw = {
      entry = function()
        local rc = C.sw_limiter_entry(h, 1, 0, d)
        return rc
      end,
      exit = function()
        local rc = C.sw_limiter_exit(h, 0, 1, 0)
        return rc
      end,
    }
  }
  server {
    listen 127.0.0.1:$port;
    root $prefix/html;
    set_real_ip_from 127.0.0.1;   # X-Real-IP: the client address (runs with many clients)
    real_ip_header X-Real-IP;
    location = /none { }
    location = /limit_req { limit_req zone=bench burst=100000000 nodelay; }
    location = /lua_empty { access_by_lua_block { } }
    location = /lua_call { access_by_lua_block { require("libsw").loaded() } }
    location = /raw_entry { access_by_lua_block { require("bench_raw").entry() } }
    location = /libsw { access_by_lua_block { require("resty.libsw").limit("bench") } }
    location = /libsw_key { access_by_lua_block { require("resty.libsw").limit("bench_key") } }
    location = /libsw_key_chunk {
      access_by_lua_block { require("resty.libsw").limit("bench_key", ngx.var.binary_remote_addr) }
    }
    location = /lua_empty_log { access_by_lua_block { } log_by_lua_block { } }
    location = /lua_call_log {
      access_by_lua_block { require("libsw").loaded() }
      log_by_lua_block { require("libsw").loaded() }
    }
    location = /raw_entry_exit {
      access_by_lua_block { require("bench_raw").entry() }
      log_by_lua_block { require("bench_raw").exit() }
    }
    location = /libsw_exit {
      access_by_lua_block { require("resty.libsw").limit("bench_exit") }
      log_by_lua_block { require("resty.libsw").log() }
    }
  }
}
EOF

# the same addresses in every run (hash tables keyed by address)
noaslr=""
if setarch "$(uname -m)" -R true 2>/dev/null; then noaslr="setarch $(uname -m) -R"; fi

hexport=$(printf '%04X' "$port")
listening() { # without connecting (a probe would be counted)
  awk -v p=":$hexport" '$2 ~ p"$" && $4 == "0A" { found = 1 } END { exit !found }' /proc/net/tcp
}

wait_listening() {
  i=0
  until listening; do
    i=$((i + 1))
    if [ "$i" -gt 1200 ]; then
      echo "bench/lua/run.sh: nginx did not start" >&2
      cat "$prefix/logs/error.log" "$prefix/logs/stdout" >&2 2>/dev/null || true
      exit 1
    fi
    sleep 0.05
  done
}

# Stop by the PID nginx wrote. QUIT is sent again every second: a signal
# that lands between nginx's check of its flags and epoll_wait is noticed
# only at the next wake-up (a race that valgrind's slowness makes likely).
alive() { # not exited (an exited child stays a zombie until waited for)
  [ -r "/proc/$1/status" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null
}
stop_nginx() {
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

# n requests to a location on one keep-alive connection; prints the count
# of 200s. Clients: one (no header), cycle or new (X-Real-IP, see above).
send() {
  cfg="$prefix/curl.cfg"
  awk -v port="$port" -v loc="$1" -v n="$2" -v clients="${3:-one}" -v cycle="$CYCLE" 'BEGIN {
    for (i = 0; i < n; i++) {
      if (i > 0) print "next"
      printf "url = \"http://127.0.0.1:%s/%s\"\noutput = \"/dev/null\"\n", port, loc
      print "write-out = \"%{http_code}\\n\""
      if (clients == "one") continue
      j = clients == "cycle" ? i % cycle + 1 : i + 1
      printf "header = \"X-Real-IP: 10.%d.%d.%d\"\n", int(j / 65536), int(j / 256) % 256, j % 256
    }
  }' >"$cfg"
  curl -s -K "$cfg" | grep -c '^200$' || true
}

# total instructions of one nginx run serving n requests to a location
# (from clients $3)
ir_run() {
  out="$prefix/callgrind.out"
  rm -f "$out"
  $noaslr valgrind --tool=callgrind --smc-check=all-non-file --callgrind-out-file="$out" \
    --toggle-collect=ngx_http_core_generic_phase --toggle-collect=ngx_http_core_access_phase \
    --toggle-collect=ngx_http_free_request \
    nginx -p "$prefix" -c "$prefix/nginx.conf" >"$prefix/logs/stdout" 2>&1 &
  vg=$!
  wait_listening
  ok=$(send "$1" "$2" "${3:-one}")
  if [ "$ok" -ne "$2" ]; then
    echo "bench/lua/run.sh: $1: only $ok of $2 requests got 200" >&2
    exit 1
  fi
  stop_nginx "$vg"
  # KEEP_CALLGRIND=dir keeps each run's profile for callgrind_annotate
  if [ -n "${KEEP_CALLGRIND:-}" ]; then cp "$out" "$KEEP_CALLGRIND/callgrind.$1.${3:-one}.$2"; fi
  awk '/^(summary|totals):/ { print $2; exit }' "$out"
}

echo "# nginx $(nginx -v 2>&1 | sed 's/.*nginx\///'), $(luajit -v | cut -d' ' -f1-2), libsw from $SW_LIB"
echo "# callgrind: instructions per request = (Ir(${K2} requests) - Ir(${K} requests)) / ${K}"
for l in $LOCATIONS; do
  a=$(ir_run "$l" "$K")
  b=$(ir_run "$l" "$K2")
  per=$(awk -v a="$a" -v b="$b" -v k="$K" 'BEGIN { printf "%.0f", (b - a) / k }')
  eval "ir_$l=$per"
  echo "location=$l instructions_per_request=$per"
done

over() { # a - b, or n/a when a location was not measured
  if [ -z "$1" ] || [ -z "$2" ]; then echo "n/a"; return; fi
  awk -v a="$1" -v b="$2" 'BEGIN { printf "%+d", a - b }'
}
for l in none limit_req lua_empty lua_call raw_entry libsw libsw_key libsw_key_chunk \
         lua_empty_log lua_call_log raw_entry_exit libsw_exit; do
  eval ": \${ir_$l:=}"
done
echo "# goals (issue 16): instructions added per request"
echo "goal access+log   libsw_exit - lua_empty = $(over "$ir_libsw_exit" "$ir_lua_empty")   (limit() + log() as documented; goal <= +1200)"
echo "goal qps_no_log   libsw      - lua_empty = $(over "$ir_libsw" "$ir_lua_empty")   (a QPS rule, no log phase; goal <= +700)"
echo "goal limit_req    limit_req  - none      = $(over "$ir_limit_req" "$ir_none")   (nginx's own limiting)"
echo "# where they go"
echo "lua_empty       - none          = $(over "$ir_lua_empty" "$ir_none")   (an access_by_lua handler)"
echo "lua_empty_log   - lua_empty     = $(over "$ir_lua_empty_log" "$ir_lua_empty")   (a log_by_lua handler)"
echo "lua_call        - lua_empty     = $(over "$ir_lua_call" "$ir_lua_empty")   (calling any Lua function from access)"
echo "lua_call_log    - lua_empty     = $(over "$ir_lua_call_log" "$ir_lua_empty")   (... from both phases, with the log handler)"
echo "raw_entry       - lua_call      = $(over "$ir_raw_entry" "$ir_lua_call")   (C: sw_limiter_entry through the FFI)"
echo "raw_entry_exit  - lua_call_log  = $(over "$ir_raw_entry_exit" "$ir_lua_call_log")   (C: sw_limiter_entry + sw_limiter_exit)"
echo "libsw           - raw_entry     = $(over "$ir_libsw" "$ir_raw_entry")   (resty.libsw's own Lua, limit())"
echo "libsw_exit      - raw_entry_exit = $(over "$ir_libsw_exit" "$ir_raw_entry_exit")   (resty.libsw's own Lua, limit() + log())"
echo "libsw_exit      - lua_empty_log = $(over "$ir_libsw_exit" "$ir_lua_empty_log")   (access + log over both empty handlers)"
echo "libsw_key       - lua_empty     = $(over "$ir_libsw_key" "$ir_lua_empty")   (per key, key_var)"
echo "libsw_key_chunk - lua_empty     = $(over "$ir_libsw_key_chunk" "$ir_lua_empty")   (per key, ngx.var in the chunk)"

# Many clients: limit_req and the keyed table per address, side by side.
for c in $CLIENTS; do
  for l in $MANY_LOCATIONS; do
    a=$(ir_run "$l" "$K" "$c")
    b=$(ir_run "$l" "$K2" "$c")
    per=$(awk -v a="$a" -v b="$b" -v k="$K" 'BEGIN { printf "%.0f", (b - a) / k }')
    eval "ir_${c}_$l=$per"
    echo "clients=$c location=$l instructions_per_request=$per"
  done
  for l in none limit_req lua_empty libsw_key; do eval ": \${ir_${c}_$l:=}"; done
  eval "n=\$ir_${c}_none r=\$ir_${c}_limit_req e=\$ir_${c}_lua_empty k=\$ir_${c}_libsw_key"
  echo "# clients=$c: limit_req - none = $(over "$r" "$n"); libsw_key - lua_empty = $(over "$k" "$e")   (per-IP limit, keyed table)"
done

[ "$WRK" = 0 ] && exit 0
echo "# wrk -t1 -c8 -d3s (requests/s; smoke numbers)"
nginx -p "$prefix" -c "$prefix/nginx.conf" >"$prefix/logs/stdout" 2>&1 &
ng=$!
wait_listening
for l in $LOCATIONS; do
  wrk -t1 -c8 -d1s "http://127.0.0.1:$port/$l" >/dev/null 2>&1 # warm-up
  rps=$(wrk -t1 -c8 -d3s "http://127.0.0.1:$port/$l" | awk '/Requests\/sec/ { print $2 }')
  non2xx=$(wrk -t1 -c8 -d1s "http://127.0.0.1:$port/$l" | awk '/Non-2xx/ { print $4 }')
  echo "location=$l requests_per_second=$rps${non2xx:+ non_2xx=$non2xx}"
done
stop_nginx "$ng"
