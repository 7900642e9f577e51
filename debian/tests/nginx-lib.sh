# SPDX-License-Identifier: Apache-2.0
# Sourced by debian/tests/lua-nginx and nginx-module: nginx as Debian
# installed it, its modules loaded as Debian enables them
# (/etc/nginx/modules-enabled), with a configuration and logs of the test's
# own under $prefix, on 127.0.0.1 and a random free port.
#   nginx_start HTTP_BLOCK   the inside of http {}, with PORT for the port:
#                            sets $port, or fails with the error log
#   nginx_check              fails when the error log holds an error
# nginx is bounded by timeout and stopped by its own PID at exit.
prefix=$(pwd)/nginx
mkdir -p "$prefix/logs"
nginx_pid=""
nginx_stop() {
  if [ -n "$nginx_pid" ] && [ -f "$prefix/nginx.pid" ]; then
    kill -QUIT "$(cat "$prefix/nginx.pid")" 2>/dev/null || true
  fi
  [ -z "$nginx_pid" ] || wait "$nginx_pid" 2>/dev/null || true
  nginx_pid=""
}

nginx_try() { # nginx_try PORT HTTP_BLOCK
  {
    printf '%s\n' "include /etc/nginx/modules-enabled/*.conf;" "daemon off;" \
      "worker_processes 2;" "pid $prefix/nginx.pid;" \
      "error_log $prefix/logs/error.log notice;" "events { worker_connections 64; }" "http {" \
      "  access_log $prefix/logs/access.log;" "  client_body_temp_path $prefix/body;" \
      "  proxy_temp_path $prefix/proxy;" "  fastcgi_temp_path $prefix/fastcgi;" \
      "  uwsgi_temp_path $prefix/uwsgi;" "  scgi_temp_path $prefix/scgi;"
    printf '%s\n' "$2" | sed "s/PORT/$1/g"
    echo "}"
  } > "$prefix/nginx.conf"
  : > "$prefix/logs/error.log"
  # nginx's own prefix: modules-enabled loads modules/NAME.so relative to it
  timeout 120 nginx -c "$prefix/nginx.conf" -e "$prefix/logs/error.log" &
  nginx_pid=$!
  i=0
  while [ $i -lt 100 ]; do
    if curl -s -o /dev/null "http://127.0.0.1:$1/"; then return 0; fi
    if ! kill -0 "$nginx_pid" 2>/dev/null; then
      wait "$nginx_pid" 2>/dev/null || true
      nginx_pid=""
      return 1
    fi
    sleep 0.1
    i=$((i + 1))
  done
  nginx_stop
  return 1
}

nginx_start() {
  port=""
  for _ in 1 2 3 4 5; do
    p=$(shuf -i 20000-60000 -n 1)
    if nginx_try "$p" "$1"; then port=$p; return 0; fi
    # another address in use: try another port; anything else is an error
    grep -q "Address already in use" "$prefix/logs/error.log" || break
  done
  cat "$prefix/logs/error.log" >&2
  echo "nginx did not start" >&2
  return 1
}

nginx_check() {
  if grep -E '\[(emerg|alert|crit|error)\]' "$prefix/logs/error.log" >&2; then return 1; fi
}
