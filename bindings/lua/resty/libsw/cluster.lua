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
-- One Redis server per limit (a Redis Cluster is for C and Python's
-- sw_cluster); the Redis key of a key's budget is "sw:{<limit>/<name>}".

local libsw = require "libsw"

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
-- ({ name, handle, call }): a lease runs short only by entries, and an
-- entry that finds it short marks its key again, so idle keys cost nothing.
local function due_calls(self, now)
  local due = {}
  local limit = self.limit
  local used = limit.active
  limit.active, self.spare = self.spare, used
  for key, l in pairs(used) do
    local call, err = libsw.lease_next_call(l, now)
    if call then
      due[#due + 1] = { limit.redis_name(key), l, call }
    elseif call == nil then
      log(ngx.ERR, "libsw: limit ", self.name, ": lease: ", err)
    end
  end
  clear(used)
  return due
end

local function settle(self, d, reply)
  local now = libsw.now_ms()
  if type(reply) == "table" and reply[1] ~= false and #reply >= 3 then
    local ok, err = libsw.lease_apply(d[2], now, d[3], reply[1], reply[2], reply[3])
    if ok then return end
    log(ngx.ERR, "libsw: limit ", self.name, ": lease reply for ", d[1], ": ", err)
  end
  libsw.lease_failed(d[2], now, d[3])
end

local function fail_all(self, due, err)
  local now = libsw.now_ms()
  for _, d in ipairs(due) do libsw.lease_failed(d[2], now, d[3]) end
  local t = ngx.now()
  if t - self.failure_logged >= 10 then
    self.failure_logged = t
    log(ngx.WARN, "libsw: limit ", self.name, ": Redis ", self.redis_addr, ": ", err,
        " (the failure policy applies; further messages suppressed for 10 s)")
  end
end

local function call_script(red, self, d)
  return red:evalsha(self.sha, 1, "sw:{" .. self.name .. "/" .. d[1] .. "}",
                     libsw.lease_args(d[3]))
end

-- One round: the due calls in one pipeline; NOSCRIPT (a restarted Redis)
-- loads the script and sends those calls again.
local function round(self)
  local due = due_calls(self, libsw.now_ms())
  if #due == 0 then return end
  local redis = redis_module()
  local red = redis:new()
  red:set_timeout(self.timeout_ms) -- (Debian's 0.27 has no set_timeouts)
  local ok, err = red:connect(self.host, self.port)
  if not ok then return fail_all(self, due, err) end
  if red:get_reused_times() == 0 then
    if self.password then
      ok, err = red:auth(self.password)
      if not ok then red:close() return fail_all(self, due, "AUTH: " .. tostring(err)) end
    end
    if self.database then
      ok, err = red:select(self.database)
      if not ok then red:close() return fail_all(self, due, "SELECT: " .. tostring(err)) end
    end
  end
  red:init_pipeline(#due)
  for _, d in ipairs(due) do call_script(red, self, d) end
  local replies
  replies, err = red:commit_pipeline()
  if not replies then
    red:close()
    return fail_all(self, due, err)
  end
  local again = {}
  for i, d in ipairs(due) do
    local r = replies[i]
    if type(r) == "table" and r[1] == false and find(tostring(r[2]), "^NOSCRIPT") then
      again[#again + 1] = d
    else
      settle(self, d, r)
    end
  end
  if #again > 0 then
    ok, err = red:script("LOAD", self.script)
    if not ok then
      red:close()
      return fail_all(self, again, "SCRIPT LOAD: " .. tostring(err))
    end
    for i, d in ipairs(again) do
      local r
      r, err = call_script(red, self, d)
      if r == nil and err and not find(err, "^ERR") then -- the connection failed
        red:close()
        local rest = {}
        for j = i, #again do rest[#rest + 1] = again[j] end
        return fail_all(self, rest, err)
      end
      settle(self, d, r)
    end
  end
  red:set_keepalive(10000, 8)
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
  local host, port = parse_address(c.redis)
  if not host then return nil, port end
  if c.interval ~= nil and (type(c.interval) ~= "number" or c.interval <= 0) then
    return nil, "cluster.interval must be a positive number of seconds"
  end
  return true
end

-- Start the refill timer of limit (a resty.libsw Limit) in this worker.
function _M.start(limit)
  local c = limit.opts.cluster
  local host, port = parse_address(c.redis)
  local script = libsw.lease_script()
  local state = {
    name = limit.name,
    limit = limit, -- limit.active: key -> sw_limiter used by this worker since the last round
    spare = {},
    redis_addr = c.redis,
    host = host,
    port = port,
    password = c.password,
    database = c.database,
    timeout_ms = tonumber(c.timeout and c.timeout * 1000 or 100),
    script = script,
    sha = (ngx.sha1_bin(script):gsub(".", function(ch) return format("%02x", byte(ch)) end)),
    failure_logged = -1e9,
    busy = false,
  }
  local ok, err = ngx.timer.every(c.interval or DEFAULT_INTERVAL, tick, state)
  if not ok then return nil, "libsw: limit " .. limit.name .. ": refill timer: " .. tostring(err) end
  limit.refill_state = state
  return true
end

return _M
