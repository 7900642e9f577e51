-- SPDX-License-Identifier: Apache-2.0
-- resty.libsw.cluster: the Redis side of cluster limits in nginx.
--
-- A limit defined with cluster = { redis = "host:port", ... } admits from
-- tokens leased from Redis (docs/cluster.md): requests never wait on the
-- network. This module keeps the leases filled from an ngx.timer.every
-- callback in each worker, with cosockets (lua-resty-redis, Debian's
-- lua-nginx-redis), as libsw's own refiller thread does for C and Python:
-- every tick, it asks libsw which of the keys this worker has used need a
-- call (libsw lets one process at a time claim a call for a key, so
-- workers never ask twice), sends the due calls to Redis in one pipeline,
-- and hands each reply (or the failure) back to libsw. resty.libsw's
-- init_worker() starts it.
--
-- redis = "host:port" (one Redis) or "host:port,host:port,..." (seeds of a
-- Redis Cluster): calls go to the first address until a MOVED reply brings
-- the slot map (CLUSTER SLOTS); ASK is followed with ASKING; CLUSTERDOWN,
-- TRYAGAIN, errors and timeouts fail the call (the failure policy). The
-- Redis key of a key's budget is "sw:{<limit>/<name>}".

local libsw = require "libsw"
local slots = require "resty.libsw.slots"

local ngx = ngx
local type, tostring, ipairs, pairs, pcall, tonumber = type, tostring, ipairs, pairs, pcall,
  tonumber
local sub, find, match, format, byte = string.sub, string.find, string.match, string.format,
  string.byte

local _M = {}

local ok_clear, clear = pcall(require, "table.clear")
if not ok_clear then
  clear = function(t) for k in pairs(t) do t[k] = nil end end
end

local DEFAULT_INTERVAL = 0.002 -- seconds between two refill rounds of a worker

local function log(level, ...)
  ngx.log(level, ...)
end

-- lua-resty-redis: "resty.redis" upstream, "nginx.redis" in Debian's
-- lua-nginx-redis.
local redis_lib
local function redis_module()
  if redis_lib == nil then
    local ok, m = pcall(require, "resty.redis")
    if not ok then m = require "nginx.redis" end
    redis_lib = m
  end
  return redis_lib
end

-- The addresses of a comma-separated list.
local function seeds_of(list)
  local seeds = {}
  for addr in list:gmatch("[^,%s]+") do seeds[#seeds + 1] = addr end
  return seeds
end

-- "host:port", "host" (port 6379) or "unix:/path".
local function parse_address(addr)
  if type(addr) ~= "string" or addr == "" then return nil, "cluster.redis must be \"host:port\"" end
  if sub(addr, 1, 5) == "unix:" then return addr end
  local host, port = match(addr, "^(.+):(%d+)$")
  if host == nil then return addr, 6379 end
  port = tonumber(port)
  if port < 1 or port > 65535 then return nil, "cluster.redis: bad port in " .. addr end
  return host, port
end

-- The calls due now for the keys this worker used since the last round
-- ({ key, l, call }): a lease runs short only by entries, and an entry
-- that finds it short marks its key again, so idle keys cost nothing.
local function due_calls(self, now)
  local due = {}
  local limit = self.limit
  local used = limit.active
  limit.active, self.spare = self.spare, used
  for key, l in pairs(used) do
    local call, err = libsw.lease_next_call(l, now)
    if call then
      due[#due + 1] = { key = "sw:{" .. self.name .. "/" .. limit.redis_name(key) .. "}",
                        l = l, call = call }
    elseif call == nil then
      log(ngx.ERR, "libsw: limit ", self.name, ": lease: ", err)
    end
  end
  clear(used)
  return due
end

local fail_all

-- Hand a script reply (or the error of the call) to libsw.
local function settle(self, d, reply, err)
  if type(reply) == "table" and reply[1] ~= false and #reply >= 3 then
    local ok, e = libsw.lease_apply(d.l, libsw.now_ms(), d.call, reply[1], reply[2], reply[3])
    if ok then
      if self.down then -- once per change, as the C and Python bindings log it
        self.down = false
        log(ngx.NOTICE, "libsw: limit ", self.name, ": Redis ", self.redis_addr,
            " is back up: cluster rules take leases again")
      end
      return
    end
    log(ngx.ERR, "libsw: limit ", self.name, ": lease reply for ", d.key, ": ", e)
  end
  if type(reply) == "table" and reply[1] == false then err = reply[2] end
  fail_all(self, { d }, tostring(err or reply))
end

function fail_all(self, due, err)
  local now = libsw.now_ms()
  for _, d in ipairs(due) do libsw.lease_failed(d.l, now, d.call) end
  if not self.down then -- once per change: until a reply comes again
    self.down = true
    log(ngx.WARN, "libsw: limit ", self.name, ": Redis ", self.redis_addr, " is down (", err,
        "): cluster rules follow their failure policy")
  end
end

-- A connection to addr ("host:port" or "unix:/path"), authenticated.
local function connect(self, addr)
  local red = redis_module():new()
  red:set_timeout(self.timeout_ms) -- (Debian's 0.27 has no set_timeouts)
  local host, port = parse_address(addr)
  local ok, err = red:connect(host, port)
  if not ok then return nil, err end
  if red:get_reused_times() == 0 then
    if self.password then
      ok, err = red:auth(self.password)
      if not ok then red:close() return nil, "AUTH: " .. tostring(err) end
    end
    if self.database then
      ok, err = red:select(self.database)
      if not ok then red:close() return nil, "SELECT: " .. tostring(err) end
    end
  end
  return red
end

local function call_script(red, self, d, asking)
  if asking then red:asking() end
  return red:evalsha(self.sha, 1, d.key, libsw.lease_args(d.call))
end

-- Send calls to the node at addr in one pipeline (each after ASKING when
-- asking) and settle them; NOSCRIPT (a restarted Redis) loads the script
-- and sends those calls again. Returns the calls Redis Cluster redirected:
-- moved (the slot map is stale) and ask ({ call, address }).
local function run_node(self, addr, calls, asking)
  local moved, ask = {}, {}
  local red, err = connect(self, addr)
  if not red then
    fail_all(self, calls, err)
    return moved, ask
  end
  red:init_pipeline()
  for _, d in ipairs(calls) do call_script(red, self, d, asking) end
  local replies
  replies, err = red:commit_pipeline()
  if not replies then
    red:close()
    fail_all(self, calls, err)
    return moved, ask
  end
  local again, step = {}, asking and 2 or 1
  for i, d in ipairs(calls) do
    local r = replies[i * step]
    local e = type(r) == "table" and r[1] == false and tostring(r[2]) or ""
    if find(e, "^NOSCRIPT") then
      again[#again + 1] = d
    elseif find(e, "^MOVED ") then
      moved[#moved + 1] = d
    elseif find(e, "^ASK ") then
      ask[#ask + 1] = { d, match(e, "^ASK %d+ (%S+)") }
    else
      settle(self, d, r)
    end
  end
  if #again > 0 then
    local ok
    ok, err = red:script("LOAD", self.script)
    if not ok then
      red:close()
      fail_all(self, again, "SCRIPT LOAD: " .. tostring(err))
      return moved, ask
    end
    for i, d in ipairs(again) do
      local r
      r, err = call_script(red, self, d, asking)
      if r == nil and err and not find(err, "^[A-Z]") then -- the connection failed
        red:close()
        local rest = {}
        for j = i, #again do rest[#rest + 1] = again[j] end
        fail_all(self, rest, err)
        return moved, ask
      end
      settle(self, d, r, err)
    end
  end
  red:set_keepalive(10000, 8)
  return moved, ask
end

-- Where a key lives: its slot's master once a MOVED taught us the slot
-- map, else the first address given.
local function route(self, key)
  local map = self.slot_map
  return map and map[slots.of(key)] or self.seeds[1]
end

-- Ask the seeds for the slot map (CLUSTER SLOTS).
local function refresh_slots(self)
  local err
  for _, addr in ipairs(self.seeds) do
    local red
    red, err = connect(self, addr)
    if red then
      local reply
      reply, err = red:cluster("slots")
      if reply then
        red:set_keepalive(10000, 8)
        local map
        map, err = slots.map(reply)
        if map then
          self.slot_map = map
          return true
        end
      else
        red:close()
      end
    end
  end
  return nil, err
end

-- The calls grouped by the node that holds their key, each group in one
-- pipeline; calls that a Redis Cluster redirects (MOVED: after a fresh
-- slot map; ASK: after ASKING) are sent once more, then count as failed.
local function send(self, due, last)
  local groups = {}
  for _, d in ipairs(due) do
    local addr = route(self, d.key)
    local g = groups[addr]
    if g == nil then
      g = {}
      groups[addr] = g
    end
    g[#g + 1] = d
  end
  local moved = {}
  for addr, calls in pairs(groups) do
    local m, ask = run_node(self, addr, calls, false)
    for _, d in ipairs(m) do moved[#moved + 1] = d end
    for _, a in ipairs(ask) do
      if last or a[2] == nil then
        fail_all(self, { a[1] }, "ASK redirection")
      else
        local m2 = run_node(self, a[2], { a[1] }, true)
        if #m2 > 0 then fail_all(self, m2, "MOVED after ASK") end
      end
    end
  end
  if #moved == 0 then return end
  local ok, err = refresh_slots(self)
  if last or not ok then return fail_all(self, moved, "MOVED: " .. tostring(err or "again")) end
  return send(self, moved, true)
end

local function round(self)
  local due = due_calls(self, libsw.now_ms())
  if #due > 0 then send(self, due, false) end
end

local function tick(premature, self)
  if premature or self.busy then return end
  self.busy = true
  local ok, err = pcall(round, self)
  self.busy = false
  if not ok then log(ngx.ERR, "libsw: limit ", self.name, ": refill: ", err) end
end

-- Check a limit's cluster options (in define(); nothing is connected).
function _M.check(opts)
  local c = opts.cluster
  if c == nil or c == false then return true end
  if type(c) ~= "table" or c.redis == nil then
    return nil, "cluster needs a table with redis = \"host:port\""
  end
  local seeds = type(c.redis) == "string" and seeds_of(c.redis) or {}
  if #seeds == 0 then
    return nil, "cluster.redis must be \"host:port\" or a list \"host:port,host:port,...\""
  end
  for _, addr in ipairs(seeds) do
    local host, err = parse_address(addr)
    if not host then return nil, err end
  end
  if c.interval ~= nil and (type(c.interval) ~= "number" or c.interval <= 0) then
    return nil, "cluster.interval must be a positive number of seconds"
  end
  return true
end

-- Start the refill timer of limit (a resty.libsw Limit) in this worker.
function _M.start(limit)
  local c = limit.opts.cluster
  local script = libsw.lease_script()
  local state = {
    name = limit.name,
    limit = limit, -- limit.active: key -> sw_limiter used by this worker since the last round
    spare = {},
    redis_addr = c.redis,
    seeds = seeds_of(c.redis), -- "host:port" strings; a Redis Cluster's slot map after a MOVED
    slot_map = nil,
    password = c.password,
    database = c.database,
    timeout_ms = tonumber(c.timeout and c.timeout * 1000 or 100),
    script = script,
    sha = (ngx.sha1_bin(script):gsub(".", function(ch) return format("%02x", byte(ch)) end)),
    down = false,
    busy = false,
  }
  local ok, err = ngx.timer.every(c.interval or DEFAULT_INTERVAL, tick, state)
  if not ok then return nil, "libsw: limit " .. limit.name .. ": refill timer: " .. tostring(err) end
  limit.refill_state = state
  return true
end

return _M
