-- SPDX-License-Identifier: Apache-2.0
-- Integration test of resty.libsw in Debian's nginx with lua-nginx-module:
--   SW_LIB=/abs/path/libsw.so luajit bindings/lua/t/nginx.lua
--
-- Starts nginx (2 workers, 127.0.0.1, a random high port, its own prefix in
-- a temporary directory), sends a burst of 50 parallel requests to a
-- location limited to 20 per 20-second window and checks the exact number
-- of 200 and 429 answers and every Retry-After; then reloads nginx (state
-- kept) and reloads it with reset = true (fresh), within the same window.
-- Also: a keyed table hit by thousands of distinct clients (keyed on a
-- request header) through both workers and across the reloads, pacing
-- (ngx.sleep on WAIT), the capacity policies, workers that reopen the
-- segment by name (as the worker user), a dry-run limit, a limit from a
-- rule file (define_from_file) that watch_rules follows, and a cluster
-- limit leased from a redis-server of the test's own (skipped without
-- redis-server). nginx and redis-server are bounded by `timeout` and
-- stopped by their PIDs.
--
-- Why the counts are exact: the limit is qps = 1 over ONE window of 20 s
-- (interval = 20, windows = 1), i.e. a tumbling window admitting exactly
-- 20 requests (floor(qps) x interval). With the default 2 x 500 ms
-- geometry a burst crossing a 500 ms boundary would see a window leave the
-- interval and admit more. The test reads the same window clock as nginx
-- (libsw.now_ms: CLOCK_MONOTONIC_COARSE) and starts only when at least 12 s
-- of the window remain, enough for the burst and both reloads; it checks
-- afterwards that the window did not end meanwhile.
--
-- The thousands of clients: a reject window admits at least `interval`
-- passes per key, so thousands of keys x (budget + 1) requests would not
-- fit in one window on a shared machine; their limit paces each key to one
-- request per 10 minutes with no queue (a leaky bucket per key, exact
-- whatever the timing): the first request of each key passes, every other
-- one in those 10 minutes gets 429.

local U = dofile((debug.getinfo(1, "S").source:match("^@(.*/t)/[^/]+$") or "bindings/lua/t")
                 .. "/util.lua")
local here = U.bindings
package.path = here .. "/?.lua;" .. package.path

local libsw = assert(require("libsw").load())
local SW_LIB = libsw.path
if SW_LIB:sub(1, 1) ~= "/" then error("SW_LIB must be an absolute path: " .. SW_LIB) end

local WINDOW_MS = 20000
local LIMIT = 20 -- per window
local BURST = 50
local CLIENTS = 3000  -- distinct X-Client keys
local AGAIN = 500     -- of them sent again after the reloads
local TINY_PLACES = 16 -- a keyed table of capacity 12: one bucket of 16 places

local check, sh, sleep, exists, read, write = U.check, U.sh, U.sleep, U.exists, U.read, U.write

-- ------------------------------------------------------------------ setup

local modules, resty_dir = U.nginx_paths()

math.randomseed(os.time() + libsw.getpid())
local prefix = sh("mktemp -d /tmp/libsw-nginx-XXXXXX"):match("^%S+")
os.execute("mkdir -p " .. prefix .. "/logs")
local tag = ("%d_%d"):format(libsw.getpid(), math.random(1, 1e6))
local SEG = {
  burst = "libsw_t_burst_" .. tag, pace = "libsw_t_pace_" .. tag,
  tiny = "libsw_t_tiny_" .. tag, tinyopen = "libsw_t_open_" .. tag,
  reopen = "libsw_t_reopen_" .. tag, dry = "libsw_t_dry_" .. tag,
  fleet = "libsw_t_fleet_" .. tag, fleetrc = "libsw_t_fleetrc_" .. tag,
  clients = "libsw_t_clients_" .. tag, qps = "libsw_t_qps_" .. tag,
  conc = "libsw_t_conc_" .. tag, filed = "libsw_t_filed_" .. tag,
}
-- a limit from a rule file (define_from_file; its segment: libsw_<resource>, SEG.filed)
local FILED = "t_filed_" .. tag
local RULES = prefix .. "/rules.json"
local function write_rules(count)
  write(RULES .. ".new", ('[{"resource": "%s", "grade": 1, "count": %s}]'):format(FILED, count))
  os.execute("chmod 644 " .. RULES .. ".new")
  assert(os.rename(RULES .. ".new", RULES)) -- replaced whole, as tools do
end
write_rules(1000)
os.execute("chmod 755 " .. prefix .. " && chmod 644 " .. RULES) -- workers (nobody) read it
local FLEET_QPS = 10 -- the fleet's budget per 1 s window (2 buckets of 500 ms)
local root = libsw.geteuid() == 0

-- redis-servers of the test's own for the cluster limits (none: skipped):
-- one alone, and three masters of a Redis Cluster. Each is bounded by
-- `timeout` and stopped by its own PID.
local redis_pids = {}

-- The parent of process pid (nil once it is gone).
local function parent_of(pid)
  local stat = read("/proc/" .. pid .. "/stat")
  return stat and tonumber(stat:match("^%d+ %b() %S+ (%d+)"))
end

-- A redis-server on a free port (extra: more options): port, or nil. The
-- server that answers must be ours (a child of our `timeout`): on a port
-- another test's Redis already holds, ours fails to bind while theirs
-- answers PING, and the test would use (and at the end kill) theirs.
-- Ports up to 55535: a cluster node also listens on its port + 10000.
local function start_redis(extra)
  for _ = 1, 5 do
    local p = math.random(20000, 55535)
    local pid = tonumber(sh(("cd %s && timeout 600 redis-server --port %d --bind 127.0.0.1 "
      .. "--save '' --appendonly no --daemonize no %s > logs/redis-%d.log 2>&1 & echo $!"):format(
        prefix, p, extra or "", p)))
    for _ = 1, 100 do
      if sh(("redis-cli -p %d ping"):format(p)):find("PONG") then
        -- the server's own PID ($! is timeout's, which SIGKILL would not pass on)
        local spid = tonumber(sh(("redis-cli -p %d info server"):format(p)):match("process_id:(%d+)"))
        if spid and parent_of(spid) == pid then
          redis_pids[#redis_pids + 1] = spid
          return p, spid
        end
        break -- another Redis holds the port
      end
      if not parent_of(pid) then break end -- ours exited (the port was taken)
      sleep(0.05)
    end
    os.execute("kill " .. pid .. " 2>/dev/null")
  end
end

local redis_port, redis_pid, rc_ports
if sh("command -v redis-server; command -v redis-cli"):find("redis%-cli") then
  redis_port, redis_pid = start_redis()
  assert(redis_port, "redis-server did not start")
  rc_ports = {}
  for i = 1, 3 do
    rc_ports[i] = assert(start_redis(("--cluster-enabled yes --cluster-node-timeout 2000 "
      .. "--cluster-config-file nodes-%d.conf"):format(i)), "cluster node did not start")
  end
  local out = sh(("redis-cli --cluster create 127.0.0.1:%d 127.0.0.1:%d 127.0.0.1:%d "
    .. "--cluster-replicas 0 --cluster-yes"):format(rc_ports[1], rc_ports[2], rc_ports[3]))
  assert(out:find("All 16384 slots covered"), "redis-cli --cluster create:\n" .. out)
  for _, p in ipairs(rc_ports) do
    for _ = 1, 200 do
      if sh(("redis-cli -p %d cluster info"):format(p)):find("cluster_state:ok") then break end
      sleep(0.05)
    end
  end
else
  print("# redis-server not installed: the cluster limits are not tested")
end

-- The cluster node that holds key's slot, and one that does not.
local function owner_and_other(key)
  local owner, other
  for _, p in ipairs(rc_ports) do
    if sh(("redis-cli -p %d set %q probe"):format(p, key)):find("OK") then owner = p
    else other = p end
  end
  return owner, other
end

-- The Redis Cluster limit's seeds: first a node without its key, so that
-- the refiller must follow MOVED to the slot map.
local rc_seeds, rc_owner = "127.0.0.1:1", nil
if rc_ports then
  local other
  rc_owner, other = owner_and_other("{fleetrc/fleetrc}probe") -- a keyless limit: its own name
  rc_seeds = ("127.0.0.1:%d,127.0.0.1:%d"):format(other, rc_owner)
end
local worker_user, worker_group = U.nginx_user(root)
local port

local function conf(gen, reset)
  local user_opt = worker_user and ('user = "%s", group = "%s", '):format(worker_user, worker_group) or ""
  return U.nginx_conf({ modules = modules, resty = resty_dir, prefix = prefix, bindings = here,
                        user = worker_user, group = worker_group }, ([[
  lua_socket_log_errors off; # Redis down is logged once by resty.libsw, not per connect
  init_by_lua_block {
    assert(require("libsw").load("SWLIB"))
    local limits = require "resty.libsw"
    assert(limits.define("burst", { qps = 1, interval = 20, windows = 1, capacity = 16,
                                    key_var = "binary_remote_addr", exit = true,
                                    segment = "SEG_BURST", reset = RESET, USEROPT }))
    assert(limits.define("pace", { qps = 10, behavior = "pacing", max_queue = 1,
                                   exit = true, segment = "SEG_PACE" }))
    -- the recommended configuration: a QPS limit without a log phase (no
    -- exits by default), a concurrency limit with log() in its location
    assert(limits.define("qps", { qps = 1000, segment = "SEG_QPS" }))
    assert(limits.define("conc", { concurrency = 1, segment = "SEG_CONC" }))
    assert(limits.define("clients", { qps = 1 / 600, behavior = "pacing", max_queue = 0,
                                      capacity = 8192, key_var = "http_x_client",
                                      segment = "SEG_CLIENTS" }))
    assert(limits.define("tiny", { qps = 100, interval = 60, windows = 1, capacity = 12,
                                   on_full = "closed", full_status = 503, segment = "SEG_TINY" }))
    assert(limits.define("tinyopen", { qps = 100, capacity = 1, segment = "SEG_OPEN" }))
    assert(limits.define("reopen", { qps = 1000, reopen = true, USEROPT
                                     segment = "SEG_REOPEN" }))
    assert(limits.define("dry", { qps = 1, interval = 1, windows = 1, dry_run = true,
                                  segment = "SEG_DRY" }))
    assert(limits.define("fleet", { qps = FLEET_QPS, segment = "SEG_FLEET",
                                    cluster = { redis = "127.0.0.1:REDIS_PORT", lease = 2,
                                                failure = "closed" } }))
    assert(limits.define("fleetrc", { qps = FLEET_QPS, segment = "SEG_FLEETRC",
                                      cluster = { redis = "RC_SEEDS", lease = 2,
                                                  failure = "closed" } }))
    assert(limits.define_from_file("RULES_PATH"))
  }
  init_worker_by_lua_block {
    local limits = require "resty.libsw"
    limits.init_worker()
    assert(limits.watch_rules("RULES_PATH", 0.2))
  }
  server {
    listen 127.0.0.1:PORT reuseport;
    location = /gen { content_by_lua_block { ngx.say("GEN ", ngx.worker.pid()) } }
    location = /burst {
      access_by_lua_block {
        ngx.header["X-Worker"] = ngx.worker.pid()
        require("resty.libsw").limit("burst") -- key: $binary_remote_addr (key_var)
      }
      content_by_lua_block { ngx.say("ok") }
      log_by_lua_block { require("resty.libsw").log() }
    }
    location = /clients {
      access_by_lua_block {
        ngx.header["X-Worker"] = ngx.worker.pid()
        require("resty.libsw").limit("clients") -- key: $http_x_client (key_var)
      }
      content_by_lua_block { ngx.say("ok") }
    }
    location = /pace {
      access_by_lua_block { require("resty.libsw").limit("pace") }
      content_by_lua_block { ngx.say("ok") }
      log_by_lua_block { require("resty.libsw").log() }
    }
    location = /qps {
      access_by_lua_block { require("resty.libsw").limit("qps") }
      content_by_lua_block { ngx.say("ok") }
    }
    location = /conc {
      access_by_lua_block { require("resty.libsw").limit("conc") }
      content_by_lua_block { ngx.sleep(0.5) ngx.say("ok") }
      log_by_lua_block { require("resty.libsw").log() }
    }
    location = /conc_fail {
      access_by_lua_block { require("resty.libsw").limit("conc") }
      content_by_lua_block { ngx.exit(502) }
      log_by_lua_block { require("resty.libsw").log() }
    }
    location = /tiny {
      access_by_lua_block { require("resty.libsw").limit("tiny", ngx.var.arg_k) }
      content_by_lua_block { ngx.say("ok") }
    }
    location = /tinyopen {
      access_by_lua_block { require("resty.libsw").limit("tinyopen", ngx.var.arg_k) }
      content_by_lua_block { ngx.say("ok") }
    }
    location = /dry {
      access_by_lua_block { require("resty.libsw").limit("dry") }
      content_by_lua_block { ngx.say("ok") }
    }
    location = /fleet {
      access_by_lua_block { require("resty.libsw").limit("fleet") }
      content_by_lua_block { ngx.say("ok") }
    }
    location = /fleetrc {
      access_by_lua_block { require("resty.libsw").limit("fleetrc") }
      content_by_lua_block { ngx.say("ok") }
    }
    location = /reopen {
      access_by_lua_block { require("resty.libsw").limit("reopen") }
      content_by_lua_block {
        local l = require("resty.libsw").get("reopen")
        ngx.say(l.pid == ngx.worker.pid() and "own" or "inherited")
      }
    }
    location = /filed {
      access_by_lua_block { require("resty.libsw").limit("FILED") }
      content_by_lua_block {
        local limits = require "resty.libsw"
        ngx.say(limits.get("FILED").lim:rule(limits.NOKEY).qps)
      }
    }
    location = /pending {
      content_by_lua_block { ngx.say(require("resty.libsw").pending()) }
    }
    location = /stats {
      content_by_lua_block {
        local limits = require "resty.libsw"
        local key = ngx.var.arg_byaddr and ngx.var.binary_remote_addr or nil
        local s, err = limits.stats(ngx.var.arg_limit, key)
        if not s then ngx.say("error ", err) return end
        if limits.get(ngx.var.arg_limit).keyed then -- a key's state, the table's totals
          local t = limits.stats(ngx.var.arg_limit)
          s.concurrency, s.total_success = s.in_flight, t.total_success
        end
        ngx.say(s.pass, " ", s.block, " ", s.concurrency, " ", s.total_success, " ",
                s.would_block_qps, " ", s.lease and (s.lease.up and "up" or "down") or "-",
                " ", s.total_exception or "-", " ", s.avg_rt or "-")
      }
    }
    location = /table {
      content_by_lua_block {
        local s = require("resty.libsw").stats(ngx.var.arg_limit)
        ngx.say(s.keys, " ", s.inserted, " ", s.evicted, " ", s.refused, " ", s.total_pass,
                " ", s.total_block)
      }
    }
  }
}
]]):gsub("USEROPT", user_opt):gsub("PREFIX", prefix):gsub("SWLIB", SW_LIB)
    :gsub("SEG_BURST", SEG.burst):gsub("SEG_PACE", SEG.pace):gsub("SEG_TINY", SEG.tiny)
    :gsub("SEG_QPS", SEG.qps):gsub("SEG_CONC", SEG.conc)
    :gsub("SEG_OPEN", SEG.tinyopen):gsub("SEG_REOPEN", SEG.reopen)
    :gsub("SEG_DRY", SEG.dry):gsub("SEG_FLEETRC", SEG.fleetrc) -- before its prefix SEG_FLEET
    :gsub("SEG_FLEET", SEG.fleet):gsub("SEG_CLIENTS", SEG.clients)
    :gsub("FLEET_QPS", tostring(FLEET_QPS)):gsub("REDIS_PORT", tostring(redis_port or 1))
    :gsub("RC_SEEDS", rc_seeds):gsub("RULES_PATH", RULES):gsub("FILED", FILED)
    :gsub("RESET", tostring(reset)):gsub("GEN", tostring(gen)):gsub("PORT", tostring(port)))
end

local CONF = prefix .. "/nginx.conf"
local PIDFILE = prefix .. "/logs/nginx.pid"

local function url(path) return ("http://127.0.0.1:%d%s"):format(port, path) end

local function get(path)
  local out = sh(("curl -s -m 5 -H 'Connection: close' %q"):format(url(path)))
  return out
end

local function master_pid()
  local s = read(PIDFILE)
  return s and tonumber(s:match("%d+"))
end

local function alive(pid)
  return pid and exists("/proc/" .. pid .. "/stat")
end

local function workers(master)
  local list = {}
  for pid in sh("ps -o pid= --ppid " .. master):gmatch("%d+") do list[#list + 1] = tonumber(pid) end
  return list
end

local function wait_for(what, timeout, fn)
  local deadline = os.time() + timeout
  repeat
    local v = fn()
    if v then return v end
    sleep(0.05)
  until os.time() > deadline
  error("timed out waiting for " .. what .. "\n" .. (read(prefix .. "/logs/error.log") or ""))
end

local function start()
  for attempt = 1, 5 do
    port = math.random(20000, 60000)
    write(CONF, conf(1, false))
    os.remove(PIDFILE)
    os.execute(("SW_LIB=%q timeout 600 nginx -p %q -c %q > %q 2>&1 &"):format(
      SW_LIB, prefix, CONF, prefix .. "/logs/stdout"))
    local deadline = os.time() + 10
    local ok = false
    repeat
      sleep(0.05)
      if get("/gen"):match("^1 ") then ok = true break end
      local log = read(prefix .. "/logs/stdout") or ""
      if log:find("bind%(%) to .- failed") then break end
    until os.time() > deadline
    if ok then return master_pid() end
    local pid = master_pid()
    if pid then os.execute("kill -TERM " .. pid) end
    print("# nginx did not start on port " .. port .. " (attempt " .. attempt .. ")")
    print(read(prefix .. "/logs/stdout"))
    print(read(prefix .. "/logs/error.log"))
  end
  error("nginx did not start")
end

local function stop(master)
  if not alive(master) then return end
  os.execute("kill -QUIT " .. master)
  for _ = 1, 200 do
    if not alive(master) then return end
    sleep(0.05)
  end
  os.execute("kill -KILL " .. master)
end

-- reload with a new generation of the configuration; returns when the old
-- workers are gone and the new ones answer
local function reload(master, gen, reset)
  local old = workers(master)
  write(CONF, conf(gen, reset))
  local out = sh(("nginx -p %q -c %q -s reload"):format(prefix, CONF))
  local failed = out:find("%[emerg%]") or out:find("%[error%]") or out:find("%[alert%]")
  check(not failed, "nginx -s reload (generation %d, reset = %s)%s", gen, tostring(reset),
        failed and ": " .. out or "")
  wait_for("old workers to exit", 15, function()
    for _, pid in ipairs(old) do
      if alive(pid) then return false end
    end
    return true
  end)
  wait_for("generation " .. gen, 15, function()
    return get("/gen"):match("^" .. gen .. " ")
  end)
end

-- What curl wrote for each request (-w WRITE_OUT) of the command cmd run
-- in parallel: list of { code, retry_after, worker, time }
local WRITE_OUT = "%{http_code} [%header{retry-after}] [%header{x-worker}] %{time_total}\n"
local function answers(cmd)
  local p = assert(io.popen(cmd .. " 2>/dev/null")) -- -Z shows a progress meter despite -s
  local out = p:read("*a")
  p:close()
  local res = {}
  for line in out:gmatch("[^\n]+") do
    local code, ra, w, t = line:match("^(%d+) %[(.-)%] %[(.-)%] ([%d.]+)$")
    if code then
      res[#res + 1] = { code = tonumber(code), retry_after = ra, worker = w, time = tonumber(t) }
    else
      print("# curl: " .. line)
    end
  end
  return res
end

-- curl n requests in parallel on separate connections (answers); curl
-- opens them at once (--parallel-immediate: else it waits for the first
-- connection, to reuse it, and the requests may not overlap)
local function burst(path, n, parallel)
  local args = {}
  for i = 1, n do args[i] = ("-o /dev/null %q"):format(url(path)) end
  return answers(("curl -s -m 10 -Z --parallel-immediate --parallel-max %d -H 'Connection: close' -w '%s' %s"):format(
    parallel or 10, WRITE_OUT:gsub("\n", "\\n"), table.concat(args, " ")))
end

-- One request per key to path with the header X-Client: key, in parallel
-- (curl blocks joined by --next, one connection each; answers).
local function burst_clients(path, keys, parallel)
  local cfg = prefix .. "/clients.cfg"
  local f = assert(io.open(cfg, "w"))
  for i, key in ipairs(keys) do
    if i > 1 then f:write("next\n") end
    f:write(('url = "%s"\noutput = "/dev/null"\nheader = "X-Client: %s"\n'
      .. 'header = "Connection: close"\nmax-time = 20\nwrite-out = "%s"\n')
      :format(url(path), key, (WRITE_OUT:gsub("\n", "\\n"))))
  end
  f:close()
  return answers(("curl -s -Z --parallel-max %d -K %q"):format(parallel, cfg))
end

-- Counts of a burst's answers: 200s, 429s, others, Retry-After outside
-- lo..hi on a 429, distinct workers.
local function tally(res, lo, hi)
  local t = { [200] = 0, [429] = 0, other = 0, bad_retry = 0, workers = 0 }
  local pids = {}
  for _, r in ipairs(res) do
    if not pids[r.worker] then
      pids[r.worker] = true
      t.workers = t.workers + 1
    end
    if t[r.code] then t[r.code] = t[r.code] + 1 else t.other = t.other + 1 end
    local ra = tonumber(r.retry_after)
    if r.code == 429 and not (r.retry_after:match("^%d+$") and ra >= lo and ra <= hi) then
      t.bad_retry = t.bad_retry + 1
      if t.bad_retry <= 3 then print("# Retry-After " .. r.retry_after .. " not in " .. lo .. ".." .. hi) end
    end
  end
  return t
end

local function table_stats(limit)
  local s = get("/table?limit=" .. limit)
  local k, ins, ev, ref, p, b = s:match("^(%d+) (%d+) (%d+) (%d+) (%d+) (%d+)")
  return { keys = tonumber(k), inserted = tonumber(ins), evicted = tonumber(ev),
           refused = tonumber(ref), pass = tonumber(p), block = tonumber(b), raw = s }
end

local function stats(limit, byaddr)
  local s = get("/stats?limit=" .. limit .. (byaddr and "&byaddr=1" or ""))
  local p, b, c, su, wb, up, ex, rt = s:match("^(%d+) (%d+) (%d+) (%d+) (%S+) (%S+) (%S+) (%S+)")
  return { pass = tonumber(p), block = tonumber(b), concurrency = tonumber(c),
           success = tonumber(su), would_block_qps = tonumber(wb), lease = up,
           exception = tonumber(ex), avg_rt = tonumber(rt), raw = s }
end

-- ------------------------------------------------------------------- run

print(("# nginx %s, lua module from %s, libsw %s from %s, prefix %s"):format(
  sh("nginx -v"):match("nginx/(%S+)") or "?", modules, libsw.version(), SW_LIB, prefix))

local master = start()
local ok, err = pcall(function()
  print("# nginx master " .. master .. ", port " .. port .. ", workers "
    .. table.concat(workers(master), " "))
  check(#workers(master) == 2, "2 worker processes")

  -- thousands of clients: each key twice, all at once through both workers
  local keys, twice = {}, {}
  for i = 1, CLIENTS do
    keys[i] = ("client-%05d"):format(i)
    twice[2 * i - 1], twice[2 * i] = keys[i], keys[i]
  end
  local t0 = libsw.now_ns() -- a duration: the duration clock
  local cres = burst_clients("/clients", twice, 50)
  print(("# %d requests of %d clients in %d ms"):format(#cres, CLIENTS,
    (libsw.now_ns() - t0) / 1e6))
  local c = tally(cres, 1, 600)
  check(#cres == 2 * CLIENTS and c[200] == CLIENTS and c[429] == CLIENTS and c.other == 0,
        "%d clients, 2 requests each: exactly %d x 200 and %d x 429 (got %d, %d, %d other)",
        CLIENTS, CLIENTS, CLIENTS, c[200], c[429], c.other)
  check(c.bad_retry == 0, "every 429 of a client has Retry-After in 1..600")
  check(c.workers == 2, "both workers served the clients (%d)", c.workers)
  local ts = table_stats("clients")
  check(ts.keys == CLIENTS and ts.pass == CLIENTS and ts.block == CLIENTS and ts.evicted == 0
        and ts.refused == 0, "one keyed table holds the %d clients: %s", CLIENTS,
        ts.raw:gsub("\n", ""))

  -- wait for a window with at least 12 s left
  local now = libsw.now_ms()
  local left = WINDOW_MS - now % WINDOW_MS
  if left < 12000 then
    print(("# waiting %.1f s for the next %d s window"):format(left / 1000, WINDOW_MS / 1000))
    sleep(left / 1000 + 0.05)
  end
  local t_before = libsw.now_ms()
  local window_end = t_before - t_before % WINDOW_MS + WINDOW_MS
  local res = burst("/burst", BURST, 10)
  local t_after = libsw.now_ms()
  print(("# burst of %d ended %d ms into the window, %d ms before its end"):format(
    BURST, t_after % WINDOW_MS, window_end - t_after))

  local lo = math.ceil((window_end - t_after) / 1000)
  local hi = math.ceil((window_end - t_before) / 1000)
  local n = tally(res, lo, hi)
  check(#res == BURST, "%d answers to %d requests", #res, BURST)
  check(n[200] == LIMIT, "exactly %d x 200 (got %d)", LIMIT, n[200])
  check(n[429] == BURST - LIMIT, "exactly %d x 429 (got %d)", BURST - LIMIT, n[429])
  check(n.other == 0, "no other status (got %d)", n.other)
  check(n.bad_retry == 0, "every 429 has Retry-After = seconds to the window's end, rounded up (%d..%d)",
        lo, hi)
  check(n.workers == 2, "both workers answered (%d distinct worker pids)", n.workers)
  local s = stats("burst", true)
  check(s.pass == LIMIT and s.block == BURST - LIMIT and s.concurrency == 0
        and s.success == LIMIT,
        "shared statistics: pass %s block %s in flight %s success %s", s.pass, s.block,
        s.concurrency, s.success)

  local pend = {}
  for _ = 1, 8 do pend[#pend + 1] = (get("/pending"):gsub("\n", "")) end
  check(table.concat(pend, " ") == "0 0 0 0 0 0 0 0",
        "no entry left waiting for log() in the workers (%s)", table.concat(pend, " "))

  -- reload: the segment (and the exhausted limit) persists
  reload(master, 2, false)
  local code = tonumber(sh(("curl -s -o /dev/null -w '%%{http_code}' %q"):format(url("/burst"))))
  check(code == 429, "after nginx -s reload the limit is still exhausted (%s)", code)
  s = stats("burst", true)
  check(s.pass == LIMIT and s.block == BURST - LIMIT + 1,
        "after reload: pass %s block %s", s.pass, s.block)

  -- reload with reset = true: a fresh segment
  reload(master, 3, true)
  code = tonumber(sh(("curl -s -o /dev/null -w '%%{http_code}' %q"):format(url("/burst"))))
  check(code == 200, "after a reload with reset = true the limit is fresh (%s)", code)
  s = stats("burst", true)
  check(s.pass == 1 and s.block == 0, "after reset: pass %s block %s", s.pass, s.block)
  -- the master closed the old configuration's Lua VM and with it the old
  -- mappings: one mapping per segment, none of a reset (deleted) segment
  local maps = read("/proc/" .. master .. "/maps") or ""
  local mapped, deleted = 0, 0
  for line in maps:gmatch("[^\n]+") do
    if line:find("libsw_t_", 1, true) and line:find(tag, 1, true) then
      mapped = mapped + 1
      if line:find("(deleted)", 1, true) then deleted = deleted + 1 end
    end
  end
  local nseg = 0
  for _ in pairs(SEG) do nseg = nseg + 1 end
  check(mapped == nseg and deleted == 0,
        "master maps each of the %d segments once after 2 reloads (%d mappings, %d deleted)",
        nseg, mapped, deleted)
  local t_end = libsw.now_ms()
  check(t_end < window_end, "all within one window (%d ms to spare)", window_end - t_end)

  -- the clients after two reloads: still limited; a new client passes
  local again = {}
  for i = 1, AGAIN do again[i] = keys[i * math.floor(CLIENTS / AGAIN)] end
  again[#again + 1] = "client-new"
  c = tally(burst_clients("/clients", again, 50), 1, 600)
  check(c[429] == AGAIN and c[200] == 1 and c.other == 0,
        "after 2 reloads: %d clients again get %d x 429 (got %d), a new one 200 (%d)",
        AGAIN, AGAIN, c[429], c[200])
  ts = table_stats("clients")
  check(ts.keys == CLIENTS + 1 and ts.pass == CLIENTS + 1 and ts.block == CLIENTS + AGAIN,
        "after the reloads the table still holds them: %s", ts.raw:gsub("\n", ""))

  -- pacing: 5 requests at once, spaced 100 ms apart by ngx.sleep
  res = burst("/pace", 5, 5)
  local all200, slowest = true, 0
  for _, r in ipairs(res) do
    if r.code ~= 200 then all200 = false end
    if r.time > slowest then slowest = r.time end
  end
  check(#res == 5 and all200, "pacing: 5 parallel requests all admitted")
  check(slowest >= 0.35, "pacing: the last waited (slowest %.3f s >= 0.35 s)", slowest)
  s = stats("pace")
  -- (total successes, not the passes of the last second: a loaded machine
  -- can take more than a second to ask)
  check(s.success == 5 and s.concurrency == 0, "pacing: 5 exits, none left in flight (%s)",
        s.raw:gsub("\n", ""))

  -- a rule file, watched by worker 0: a change is in force in both workers,
  -- a bad version changes nothing and is logged once (thresholds far above
  -- the requests of the test)
  check(get("/filed"):match("^1000\n") ~= nil, "the rule file's limit (%s)", get("/filed"))
  write_rules(700)
  wait_for("the rule file's new threshold", 10, function() return get("/filed") == "700\n" end)
  write_rules(-1)
  sleep(1) -- 5 looks of the watcher
  local kept = 0
  for _ = 1, 8 do -- both workers
    if get("/filed") == "700\n" then kept = kept + 1 end
  end
  local log = read(prefix .. "/logs/error.log") or ""
  local _, said = log:gsub("count: want a number >= 0", "")
  check(kept == 8 and said == 1, "a bad rule file: the rule in force stays (%d of 8), said "
        .. "once (%d)", kept, said)
  write_rules(900)
  wait_for("the rule file's fixed version", 10, function() return get("/filed") == "900\n" end)
  check(true, "the rule file's next version is applied")

  -- the recommended configuration: a QPS limit, no log phase, keeps
  -- nothing per request; a concurrency limit's places are freed by log()
  res = burst("/qps", 40, 10)
  local q = tally(res, 1, 1)
  s = stats("qps")
  check(q[200] == 40 and s.pass == 40 and s.success == 0,
        "QPS limit without a log phase: 40 x 200, pass %s, no exits recorded (%s)", s.pass,
        s.raw:gsub("\n", ""))
  local qpend = {}
  for _ = 1, 8 do qpend[#qpend + 1] = (get("/pending"):gsub("\n", "")) end
  check(table.concat(qpend, " "):match("^[0 ]+$") ~= nil,
        "QPS limit without a log phase: nothing left waiting for log() (%s)", table.concat(qpend, " "))
  res = burst("/conc", 3, 3)
  local c = tally(res, 1, 1)
  check(c[200] == 1 and c[429] == 2 and c.bad_retry == 0,
        "concurrency = 1: of 3 requests at once 1 x 200, 2 x 429 with Retry-After 1 (%d, %d, %d)",
        c[200], c[429], c.bad_retry)
  s = stats("conc")
  check(s.concurrency == 0 and s.success == 1 and s.avg_rt and s.avg_rt >= 450 and s.avg_rt < 5000,
        "concurrency: log() freed the place and recorded the RT (in flight %s, success %s, "
        .. "avg rt %s ms)", s.concurrency, s.success, s.avg_rt)
  check(get("/conc") == "ok\n", "concurrency: the next request passes")
  local code502 = sh(("curl -s -o /dev/null -w '%%{http_code}' %q"):format(url("/conc_fail")))
  s = stats("conc")
  check(code502 == "502" and s.exception == 1 and s.success == 3 and s.concurrency == 0,
        "concurrency: a 502 counts as an exception (%s: exceptions %s, success %s, in flight %s)",
        code502, s.exception, s.success, s.concurrency)

  -- capacity policies: a keyed table full of active keys, closed; a full
  -- registry, open
  local placed = 0
  for i = 1, TINY_PLACES do
    if get("/tiny?k=k" .. i) == "ok\n" then placed = placed + 1 end
  end
  local c3 = tonumber(sh(("curl -s -o /dev/null -w '%%{http_code}' %q"):format(url("/tiny?k=new"))))
  check(placed == TINY_PLACES and c3 == 503,
        "on_full = closed: %d keys placed, a new key in a table full of active keys gets 503 (%s)",
        placed, c3)
  local o1 = get("/tinyopen?k=a") == "ok\n"
  local o2 = get("/tinyopen?k=b") == "ok\n"
  check(o1 and o2, "on_full = open: a new key beyond capacity passes")

  -- workers reopening the segment by name, as the worker user
  local r1 = get("/reopen")
  check(r1 == "own\n", "reopen = true: the worker opened the segment itself (%s)",
        r1:gsub("\n", ""))
  if root then
    local owner = sh("stat -c %U /dev/shm/" .. SEG.reopen):match("%S+")
    check(owner == worker_user, "segment owned by the worker user %s (%s)", worker_user, owner)
  end

  -- dry-run: 1 request per 1 s window; all 5 pass, 4 counted as would-block
  -- (3 if the burst crossed into a new window)
  res = burst("/dry", 5, 5)
  local dry200 = 0
  for _, r in ipairs(res) do if r.code == 200 then dry200 = dry200 + 1 end end
  s = stats("dry")
  local would = math.floor((s.would_block_qps or 0) + 0.5)
  check(dry200 == 5 and s.pass == 5 and s.block == 0 and (would == 4 or would == 3),
        "dry-run: 5 x 200, pass %s block %s, %d would-block", s.pass, s.block, would)

  -- A fleet budget leased by both workers, 2 tokens at a time, from the
  -- Redis at port: 40 requests at once never get more than the budget in
  -- any 1 s window (2 buckets) of Redis time.
  local function fleet_budget(limit, port, what)
    get("/" .. limit) -- the first entry asks for a lease
    wait_for(what .. " lease", 10, function() return stats(limit).lease == "up" end)
    local answers = burst("/" .. limit, 40, 10)
    local f200, f429 = 0, 0
    for _, r in ipairs(answers) do
      if r.code == 200 then f200 = f200 + 1 elseif r.code == 429 then f429 = f429 + 1 end
    end
    local key = ("sw:{%s/%s}"):format(limit, limit) -- a keyless limit: its own name
    local hash = sh(("redis-cli -p %d --raw HGETALL %q"):format(port, key))
    local buckets, granted, fields = {}, 0, {}
    for v in hash:gmatch("%S+") do fields[#fields + 1] = tonumber(v) end
    for i = 1, #fields - 1, 2 do
      buckets[fields[i]] = fields[i + 1]
      granted = granted + fields[i + 1]
    end
    local worst = 0
    for b, n in pairs(buckets) do
      local w = n + (buckets[b + 500] or 0)
      if w > worst then worst = w end
    end
    print(("# %s: %d x 200, %d x 429; Redis granted %d: %s"):format(what, f200, f429, granted,
      hash:gsub("\n", " ")))
    check(f200 + f429 == 40 and f200 >= 2, "%s: %d x 200 and %d x 429 of 40", what, f200, f429)
    check(worst <= FLEET_QPS, "%s: no 1 s window of Redis time granted over %d (max %d)", what,
          FLEET_QPS, worst)
    check(f200 <= granted + 1, "%s: admitted %d <= granted %d (+1 first entry)", what, f200,
          granted)
  end

  if rc_ports then
    -- the first seed does not hold the key: MOVED, CLUSTER SLOTS, the owner
    fleet_budget("fleetrc", rc_owner, "Redis Cluster")
  end

  if redis_port then
    fleet_budget("fleet", redis_port, "cluster")

    -- the script flushed (as by a Redis restart): NOSCRIPT, loaded again
    sh(("redis-cli -p %d SCRIPT FLUSH"):format(redis_port))
    sleep(1.1) -- a fresh budget
    local again200 = 0
    for _ = 1, 10 do -- spaced, so that refills (2 tokens each) keep up
      local code = sh(("curl -s -o /dev/null -w '%%{http_code}' %q"):format(url("/fleet")))
      if code == "200" then again200 = again200 + 1 end
      sleep(0.02)
    end
    check(again200 >= 5, "cluster: after SCRIPT FLUSH the script is loaded again (%d x 200 of 10)",
          again200)

    -- Redis killed: within a timeout the failure policy (closed) refuses all
    os.execute("kill -KILL " .. redis_pid)
    sleep(1.2) -- the leased tokens were for a past bucket
    get("/fleet") -- finds no tokens: a call fails, Redis counts as down
    wait_for("the fleet to see Redis down", 10, function()
      return stats("fleet").lease == "down"
    end)
    res = burst("/fleet", 10, 5)
    local closed, ra1 = 0, 0
    for _, r in ipairs(res) do
      if r.code == 429 then closed = closed + 1 end
      if r.retry_after == "1" then ra1 = ra1 + 1 end
    end
    check(closed == 10 and ra1 == 10, "cluster, Redis down: failure = closed refuses all "
          .. "(%d x 429, %d with Retry-After: 1)", closed, ra1)
  end
end)
if not ok then
  U.failures = U.failures + 1
  print("FAILED " .. tostring(err))
end

stop(master)
check(not alive(master), "nginx stopped")
for _, pid in ipairs(redis_pids) do os.execute("kill -KILL " .. pid .. " 2>/dev/null") end
local log = read(prefix .. "/logs/error.log") or ""
local bad = {}
for line in log:gmatch("[^\n]+") do
  if (line:find("%[error%]") or line:find("%[alert%]") or line:find("%[crit%]")
     or line:find("%[emerg%]")) and not line:find("count: want a number >= 0", 1, true) then
    bad[#bad + 1] = line
  end
end
check(#bad == 0, "no errors in error.log%s", #bad > 0 and ":\n" .. table.concat(bad, "\n") or "")
check(log:find("SW_EFULL") ~= nil, "the full registry was logged (on_full = open)")
if redis_pids[1] then
  local downs = 0
  for _ in log:gmatch("limit fleet: Redis [^\n]* is down %(") do downs = downs + 1 end
  check(downs >= 1 and downs <= 2, "Redis down logged once per worker, not per round (%d)", downs)
end
check(log:find("limit tiny: keyed table full", 1, true) ~= nil,
      "the full keyed table was logged (on_full = closed)")

for _, s in pairs(SEG) do libsw.unlink_segment(s) end
if U.failures == 0 then
  os.execute("rm -rf " .. prefix)
else
  print("# kept " .. prefix .. " for inspection")
end
print(("# %d checks, %d failed"):format(U.checks, U.failures))
os.exit(U.failures == 0 and 0 or 1)
