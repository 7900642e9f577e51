-- SPDX-License-Identifier: Apache-2.0
-- resty.libsw.breaker in Debian's nginx (2 workers) in front of a failing
-- upstream (a server block of the same nginx answering 500 and counting
-- its hits in a shared dict):
--   SW_LIB=/abs/path/libsw.so luajit bindings/lua/t/breaker_nginx.lua
-- Sequential requests through both workers: the upstream sees at most 10
-- of them (the breaker opens after 5 failures of 5, or 10 if the stat
-- window turns in the middle), all later ones are answered 503 with a
-- Retry-After without reaching it; after open_for (5 s), 8 parallel requests let
-- exactly one probe through to the upstream across both workers, which
-- fails (open again); the upstream healed, the next probe closes it and
-- requests reach it again. A second key proxies to a port nothing
-- listens on: 502s open its own breaker, the first stays closed; the
-- state changes are in error.log. nginx is bounded by `timeout`, stopped
-- by PID.

local U = dofile((debug.getinfo(1, "S").source:match("^@(.*/t)/[^/]+$") or "bindings/lua/t")
                 .. "/util.lua")
local here = U.bindings
package.path = here .. "/?.lua;" .. package.path
local libsw = assert(require("libsw").load())
local check, sh, sleep = U.check, U.sh, U.sleep
local function read(path) return U.read(path) or "" end

local modules, resty_dir = U.nginx_paths()

math.randomseed(os.time() + libsw.getpid())
local prefix = sh("mktemp -d /tmp/libsw-breaker-nginx-XXXXXX"):match("^%S+")
os.execute("mkdir -p " .. prefix .. "/logs")
local seg_prefix = ("libsw_t_brk_%d_%d"):format(libsw.getpid(), math.random(1, 1e6))
local port, up_port = math.random(20000, 40000), math.random(40001, 60000)
-- a port nothing listens on (bound and closed at once)
local dead_port = tonumber(sh([[python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])']]))
local CONF = prefix .. "/nginx.conf"
-- as root, nginx's workers run as nobody: the segment the master makes is theirs
local user, group = U.nginx_user(libsw.geteuid() == 0)
local conf = U.nginx_conf({ modules = modules, resty = resty_dir, prefix = prefix, bindings = here,
                            user = user, group = group }, ([[
  lua_shared_dict upstream 1m;
  init_by_lua_block {
    assert(require("libsw").load("SWLIB"))
    breakers = require("resty.libsw.breaker").new { prefix = "SEGPREFIX", error_ratio = 0.5,
      min_requests = 5, interval = 600, open_for = 5, probe_timeout = 30, reset = true, USEROPT }
    assert(breakers:get("backend")) -- made once, before the workers fork
    assert(breakers:get("dead"))
    breakers.opts.reset = nil
    breakers.cache = {}
  }
  server {
    listen 127.0.0.1:UPPORT;
    location / {
      content_by_lua_block {
        local d = ngx.shared.upstream
        d:incr("hits", 1, 0)
        if d:get("healthy") then ngx.say("ok") return end
        ngx.status = 500
        ngx.say("down")
      }
    }
  }
  server {
    listen 127.0.0.1:PORT;
    location = /hits { content_by_lua_block { ngx.say(ngx.shared.upstream:get("hits") or 0) } }
    location = /heal { content_by_lua_block { ngx.shared.upstream:set("healthy", true) ngx.say("healed") } }
    location /api {
      access_by_lua_block { breakers:access("backend") }
      proxy_pass http://127.0.0.1:UPPORT;
      log_by_lua_block { breakers:log() }
    }
    location /dead { # nothing listens there: 502, its own breaker
      access_by_lua_block { breakers:access("dead") }
      proxy_pass http://127.0.0.1:DEADPORT;
      log_by_lua_block { breakers:log() }
    }
  }
}
]]):gsub("[A-Z]+", { SWLIB = libsw.path, SEGPREFIX = seg_prefix, UPPORT = tostring(up_port),
                     PORT = tostring(port), DEADPORT = tostring(dead_port),
                     USEROPT = user and ('user = "%s", group = "%s"'):format(user, group) or "" }))
local f = assert(io.open(CONF, "w"))
f:write(conf)
f:close()

local function url(path) return ("http://127.0.0.1:%d%s"):format(port, path) end
local function get(path) return sh(("curl -s -m 5 -H 'Connection: close' %q"):format(url(path))) end
local function status(path)
  local out = sh(("curl -s -m 5 -o /dev/null -H 'Connection: close' -w '%%{http_code} %%header{retry-after}' %q"):format(url(path)))
  local code, retry = out:match("^(%d+) ?(%S*)")
  return tonumber(code), tonumber(retry)
end
local function hits() return tonumber(get("/hits")) end

os.execute(("SW_LIB=%q timeout 300 nginx -p %q -c %q > %q 2>&1 &"):format(
  libsw.path, prefix, CONF, prefix .. "/logs/stdout"))
local up = false
for _ = 1, 100 do
  sleep(0.05)
  if hits() then up = true break end
end
local master = tonumber(read(prefix .. "/logs/nginx.pid"))
local ok, err = pcall(function()
  assert(up, "nginx did not start: " .. read(prefix .. "/logs/stdout") .. read(prefix .. "/logs/error.log"))

  -- the upstream fails: the breaker opens for both workers
  local codes = {}
  for i = 1, 12 do codes[i] = status("/api") end
  local n500, first503 = 0, nil
  for i, c in ipairs(codes) do
    if c == 500 then n500 = n500 + 1 elseif c == 503 and not first503 then first503 = i end
  end
  check(n500 >= 5 and n500 <= 10, "%d requests reached the failing upstream before it opened (5..10)", n500)
  check(first503 == n500 + 1, "every request after the %d-th answered 503 (first 503: %s)", n500,
        tostring(first503))
  check(hits() == n500, "the upstream was hit %d times, as many as answers 500", hits())
  local c, retry = status("/api")
  check(c == 503 and retry and retry >= 1 and retry <= 5, "open: 503 with Retry-After: 1..5 s (got %s, %s)",
        tostring(c), tostring(retry))

  -- after open_for: 8 parallel requests, exactly one probe reaches the upstream
  sleep(5.2)
  local before = hits()
  local out = sh(("curl -s -m 10 -Z --parallel-immediate --parallel-max 8 -H 'Connection: close' -w '\\ncode=%%{http_code}\\n' %s"):format(
    (url("/api") .. " "):rep(8)))
  local n = { [500] = 0, [503] = 0 }
  for code in out:gmatch("code=(%d+)") do n[tonumber(code)] = (n[tonumber(code)] or 0) + 1 end
  check(hits() - before == 1, "one probe across both workers reached the upstream (%d)", hits() - before)
  check(n[500] == 1 and n[503] == 7, "1 answer 500 (the probe) and 7 answers 503 (got %d and %d)",
        n[500], n[503])

  -- the upstream heals: the next probe closes the breaker
  get("/heal")
  sleep(5.2)
  c = status("/api")
  check(c == 200, "the probe reaches the healed upstream: 200 (got %s)", tostring(c))
  local all = true
  for _ = 1, 10 do if status("/api") ~= 200 then all = false end end
  check(all, "closed: 10 more requests answered 200")

  -- an upstream that refuses connections: 502 five times (up to 10 if the
  -- 600 s stat window turns meanwhile), then 503; the other key's breaker
  -- stays closed
  local dead = {}
  for i = 1, 12 do dead[i] = status("/dead") end
  local n502 = 0
  while dead[n502 + 1] == 502 do n502 = n502 + 1 end
  local rest503 = true
  for i = n502 + 1, 12 do rest503 = rest503 and dead[i] == 503 end
  check(n502 >= 5 and n502 <= 10 and rest503, "dead upstream: %d answers 502 (5..10), then 503 (%s)",
        n502, table.concat(dead, " "))
  check(status("/api") == 200, "the healed upstream's breaker is still closed")
  local log = read(prefix .. "/logs/error.log")
  check(log:find("libsw breaker backend: closed %-> open") ~= nil, "error.log: closed -> open")
  check(log:find("libsw breaker backend: half_open %-> closed") ~= nil, "error.log: half_open -> closed")
  check(log:find("libsw breaker dead: closed %-> open %(upstream status 502%)") ~= nil,
        "error.log: dead: closed -> open (upstream status 502)")
end)
if master then
  os.execute("kill -QUIT " .. master)
  sleep(0.3)
end
libsw.unlink_segment(seg_prefix .. "-backend")
libsw.unlink_segment(seg_prefix .. "-dead")
if os.getenv("KEEP") then print("# kept " .. prefix) else os.execute("rm -rf " .. prefix) end
if not ok then
  print("FAILED " .. tostring(err))
  U.failures = U.failures + 1
end
print(U.failures == 0 and "breaker nginx: all checks passed" or ("breaker nginx: " .. U.failures .. " FAILED"))
os.exit(U.failures == 0 and 0 or 1)
