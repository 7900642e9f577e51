-- SPDX-License-Identifier: Apache-2.0
-- resty.libsw: libsw limiters for OpenResty / nginx + lua-nginx-module.
--
--   init_by_lua_block {
--     local limits = require "resty.libsw"
--     assert(limits.define("api", { qps = 100, capacity = 10000,
--                                   key_var = "binary_remote_addr" }))
--     assert(limits.define("uploads", { concurrency = 5 }))
--   }
--   location / { access_by_lua_block { require("resty.libsw").limit("api") } }
--   location /upload {
--     access_by_lua_block { require("resty.libsw").limit("uploads") }
--     log_by_lua_block    { require("resty.libsw").log() }   -- frees the place
--   }
--
-- Only a limit that records exits needs log() in the log phase: a
-- concurrency limit (exit = true by default), or one defined with exit =
-- true for RT and success statistics. A QPS limit needs none.
--
-- Each defined limit lives in a libsw shared segment (POSIX shared memory,
-- /dev/shm/<segment>) created by define() in init_by_lua, i.e. by the nginx
-- master. Workers are forked from the master and inherit its mapping, so
-- every worker updates the same limiters, exactly, with no lock on the hot
-- path. See docs/openresty.md.
--
-- A limit with keys (capacity > 1 or key_var) is one keyed table
-- (libsw.keyed: a few dozen bytes per key, idle keys reclaimed, the least
-- recently active evicted when every place is active); warm-up and cluster
-- rules, which a keyed table refuses, keep a registry of whole limiters
-- (libsw.limiter with capacity), as does a limit without keys.
--
-- Errors are returned as nil, message, code (libsw's convention): define()
-- and the inspection functions return them; limit() logs them too, and lets
-- the request through.

local libsw = require "libsw"
local cluster = require "resty.libsw.cluster"

local ngx = ngx
local type, tostring, tonumber, pairs, ipairs, setmetatable, getmetatable, error =
  type, tostring, tonumber, pairs, ipairs, setmetatable, getmetatable, error
local ceil, huge, floor = math.ceil, math.huge, math.floor
local byte, find, format, concat = string.byte, string.find, string.format, table.concat

local _M = { _VERSION = "0.1.0" }

-- libsw's lean entry / exit (of limiters and of keyed tables), set by
-- define() once the library is loaded
local decide, finish, keyed_decide, keyed_finish

local limits = {}   -- name -> Limit, in this Lua VM (the master's, copied into workers)
local DEFAULT_SEGMENT_PREFIX = "libsw_"

-- ------------------------------------------------------------ key names

-- Registry names are 1..63 bytes without NUL. A key made only of printable
-- ASCII other than space and '~' (0x21..0x7d), 1..63 bytes, is its own
-- name; any other key (binary addresses from $binary_remote_addr, long or
-- empty keys) is encoded, and every encoded name starts with '~', so the
-- two never collide:
--   "~" .. hex(key)         keys of up to 31 bytes (an IPv6 address: 33 bytes)
--   "~h" .. md5_hex(key)    longer keys (34 bytes)
local HEX = {}
for i = 0, 255 do HEX[i] = format("%02x", i) end

local function hex(s)
  local n = #s
  local out = {}
  for i = 1, n do out[i] = HEX[byte(s, i)] end
  return concat(out)
end

local function digest(s)
  if ngx and ngx.md5 then return ngx.md5(s) end
  -- outside nginx (unit tests): FNV-1a 64, as two 32-bit halves
  local h1, h2 = 0x811c9dc5, 0x050c5d1f
  for i = 1, #s do
    local b = byte(s, i)
    h1 = (bit.bxor(h1, b) * 16777619) % 4294967296
    h2 = (bit.bxor(h2, b) * 16777619 + h1) % 4294967296
  end
  return format("%08x%08x", h1, h2)
end

local function key_name(key)
  local t = type(key)
  if t ~= "string" then
    if t ~= "number" or key ~= key then
      return nil, "SW_EINVAL: key must be a string or a number, not "
        .. (t == "number" and "nan" or libsw._show(key)), libsw.EINVAL
    end
    key = tostring(key)
  end
  local n = #key
  if n >= 1 and n <= 63 and not find(key, "[^\33-\125]") then return key end
  if n <= 31 then return "~" .. hex(key) end
  return "~h" .. digest(key)
end
_M.key_name = key_name

-- Sentinel keys: a keyless call, and the shared overflow limiter.
local NOKEY = setmetatable({}, { __tostring = function() return "(no key)" end })
local OVERFLOW = setmetatable({}, { __tostring = function() return "(overflow)" end })
local OVERFLOW_NAME = "~overflow" -- not hex: cannot be an encoded key
-- A keyed table takes any bytes as a key: keyless requests (no key, an
-- empty one, an unset key_var) share this one.
local NOKEY_KEYED = "\0"

-- ------------------------------------------------------------------ limits

local Limit = {}
Limit.__index = Limit

local function log(level, ...)
  if ngx and ngx.log then ngx.log(level, ...) end
end

local function phase()
  if ngx and ngx.get_phase then return ngx.get_phase() end
  return "init"
end

-- on_full policies: of a keyed table, and of a registry
local ON_FULL_KEYED = { evict = true, open = true, closed = true, overflow = true }
local ON_FULL_REGISTRY = { open = true, closed = true, overflow = true }

-- nil, "SW_EINVAL: ...", libsw.EINVAL
local function invalid(msg)
  return nil, "SW_EINVAL: " .. msg, libsw.EINVAL
end

-- What define() passes on to libsw.limiter (everything else is ours).
local HELPER_OPTIONS = {
  segment = true, capacity = true, status = true, full_status = true,
  on_full = true, reset = true, exit = true, retry_after = true, lib = true,
  reopen = true, user = true, group = true, mode = true, uid = true, gid = true,
  create = true, clock = true, key_name = true, key_var = true,
}

-- Open (or create) the limit's segment: a keyed table, or a registry.
local function open(self, create, reset)
  local o = {}
  for k, v in pairs(self.opts) do
    if not HELPER_OPTIONS[k] then o[k] = v end
  end
  o.segment = self.segment
  o.capacity = self.capacity
  o.create = create
  o.reset = reset
  o.mode, o.uid, o.gid, o.user, o.group =
    self.opts.mode, self.opts.uid, self.opts.gid, self.opts.user, self.opts.group
  o.clock = self.opts.clock
  if self.keyed then
    o.on_full = self.on_full
    return libsw.keyed(o)
  end
  o.stripes = o.stripes or 1 -- per-key limiters: 4x smaller, see docs
  local limit_name = self.name
  -- a limit without keys (capacity 1, no key_var) is named as the limit,
  -- as swctl, rules and Prometheus show it and a user types it; a registry
  -- of keys names its keyless entry "~=" .. name (no key's name)
  local nokey_name = (self.capacity == 1 and not self.key_var) and limit_name
    or "~=" .. limit_name
  o.key_name = function(key)
    if key == NOKEY then return nokey_name end
    if key == OVERFLOW then return OVERFLOW_NAME end
    return key_name(key)
  end
  self.redis_name = o.key_name -- a key's name in Redis too (cluster limits)
  return libsw.limiter(o)
end

-- Whether a limit with these options is a keyed table: it has keys
-- (capacity > 1, or key_var) and a rule a keyed table keeps per key (no
-- warm-up, no cluster).
local function uses_keyed_table(opts)
  local capacity = opts.capacity
  if (capacity == nil or capacity == 1) and opts.key_var == nil then return false end
  local b = opts.behavior
  if type(b) == "string" then b = libsw.BEHAVIORS[b] end
  if b == 1 or b == 3 then return false end
  return not opts.cluster
end

-- The limit's object opened in this process: a keyed table (its handle for
-- the hot path), or a registry (with a cache of its handles by key, no
-- bigger than the registry).
local function attach(self, lim)
  self.lim = lim
  if self.keyed then
    self.k = lim.handle
  else
    self.handles = {}
    self.h = false
  end
  self.pid = libsw.getpid()
end

-- Whether limit() records entries for log() to exit: exit = true or false
-- as given; by default only a concurrency limit does (its places are freed
-- by the exits), a QPS limit (whose decisions need no exit) does not.
local function exits(opts)
  if opts.exit == nil then return opts.concurrency ~= nil end
  return opts.exit
end

-- define(name, options): create (or attach to) the limit's segment. Call it
-- in init_by_lua (the master: workers inherit the mapping). Options: those
-- of libsw.limiter (qps / concurrency, behavior, max_queue, warm_up,
-- cold_factor, strict, interval, windows, stripes, ...) and
--   segment      shared memory name (default "libsw_<name>") or a file path
--   capacity     keys at once (default 1: a limit without keys)
--   status       status of a blocked request (default 429)
--   retry_after  send Retry-After on a block (default true)
--   on_full      a new key when every place is taken: "evict" (the default
--                of a keyed table: the least recently active key gives its
--                place), "open" (passes unlimited; the default of a
--                registry), "closed" (full_status), "overflow" (a registry:
--                new keys share one limiter; a keyed table evicts)
--   key_bytes    keyed table: key bytes kept per key, 16..128 (default 16);
--                longer keys are kept as a 128-bit digest
--   full_status  status for on_full = "closed" (default: status)
--   reset        false (default): keep the state across restarts and reloads;
--                true: start empty at every (re)load; "mismatch": start empty
--                only when the segment has another geometry, kind (keyed
--                table or registry) or libsw version
--   key_var      an nginx variable giving the key when limit() gets none
--                ("binary_remote_addr"; read in the compiled hot path)
--   exit         record the end of each request in log(): response time,
--                success or failure, requests in flight (default: true for
--                a concurrency limit, which needs it; false for a QPS limit,
--                whose statistics then have no RT, success or in-flight)
--   user, group  owner of a new segment (names or uid / gid), mode (0600)
--   reopen       true: each worker opens the segment again in init_worker()
--   dry_run      true: count what would be blocked, block nothing
--                (Limit:set_dry_run(bool) switches it at run time)
--   cluster      { redis = "host:port", lease = L, nodes = n, failure =
--                "local" | "open" | "closed", timeout = s, retry = s,
--                interval = s, password = ..., database = n }: a budget for
--                the whole fleet, leased from Redis by init_worker()'s timer
--   lib          path of libsw.so (default: $SW_LIB, package.cpath)
function _M.define(name, opts)
  if type(name) ~= "string" or not find(name, "^[%w_.%-]+$") or #name > 40 then
    return invalid("limit name must be 1..40 characters of [A-Za-z0-9_.-], not "
      .. libsw._show(name))
  end
  opts = opts or {}
  if type(opts) ~= "table" then return invalid("options must be a table") end
  local ok, err, code = libsw.load(opts.lib)
  if not ok then return nil, err, code end
  ok, err = cluster.check(opts)
  if not ok then return nil, "libsw: limit " .. name .. ": " .. err, libsw.EINVAL end
  local keyed = uses_keyed_table(opts)
  local on_full = opts.on_full or (keyed and "evict" or "open")
  if not (keyed and ON_FULL_KEYED or ON_FULL_REGISTRY)[on_full] then
    if on_full == "evict" then
      return invalid("on_full = \"evict\" needs a keyed table; limit " .. name .. " keeps a "
        .. "registry (warm-up and cluster rules, limits without keys): use open, closed or overflow")
    end
    return invalid("on_full must be evict, open, closed or overflow, not " .. libsw._show(on_full))
  end
  if keyed and on_full == "overflow" then
    log(ngx and ngx.NOTICE, "libsw: limit ", name, ": on_full = \"overflow\" is \"evict\" for a ",
        "keyed table (every new key gets its own limit)")
    on_full = "evict"
  end
  local reset = opts.reset or false
  if reset ~= false and reset ~= true and reset ~= "mismatch" then
    return invalid("reset must be true, false or \"mismatch\", not " .. libsw._show(reset))
  end
  for _, k in ipairs { "status", "full_status" } do
    local v = opts[k]
    if v ~= nil and (type(v) ~= "number" or not (v >= 400 and v <= 599) or v ~= floor(v)) then
      return invalid(k .. " must be an HTTP status in 400..599, not " .. libsw._show(v))
    end
  end
  for _, k in ipairs { "retry_after", "exit", "reopen", "create" } do
    local v = opts[k]
    if v ~= nil and v ~= true and v ~= false then
      return invalid(k .. " must be true or false, not " .. libsw._show(v))
    end
  end
  local ph = phase()
  if reset == true and ph ~= "init" then
    return invalid("reset = true needs define() in init_by_lua (else every worker would reset)")
  end
  local old = limits[name]
  if old and old.pid == libsw.getpid() and old.opts == opts then return old end

  local self = setmetatable({
    name = name,
    opts = opts,
    segment = opts.segment or (DEFAULT_SEGMENT_PREFIX .. name),
    capacity = opts.capacity or 1,
    status = opts.status or 429,
    full_status = opts.full_status or opts.status or 429,
    on_full = on_full,
    keyed = keyed,
    k = false, -- the keyed table's handle
    h = false, -- the keyless handle (access() sets it)
    retry_after = opts.retry_after ~= false,
    exit = exits(opts),
    flags = exits(opts) and 0 or 2, -- decide()'s flags: 2 = no exit will follow
    key_var = opts.key_var or false, -- fields set (false, not nil): no
    clock = opts.clock or false,     -- metatable lookups in the hot path
    active = opts.cluster and {} or false, -- cluster: keys used since the last refill
    full_logged = -huge,
  }, Limit)
  if opts.key_var ~= nil and (type(opts.key_var) ~= "string" or opts.key_var == "") then
    return invalid("key_var must be the name of an nginx variable (\"binary_remote_addr\"), not "
      .. libsw._show(opts.key_var))
  end
  if on_full == "overflow" and not (type(self.capacity) == "number" and self.capacity >= 2) then
    return invalid("on_full = \"overflow\" needs capacity >= 2 (the overflow key takes one place)")
  end
  local lim, code
  lim, err, code = open(self, opts.create ~= false, reset == true)
  if not lim and reset == "mismatch"
      and (code == libsw.EGEOMETRY or code == libsw.EVERSION or code == libsw.ETYPE) then
    log(ngx and ngx.WARN, "libsw: limit ", name, ": ", err, "; starting it anew (reset = mismatch)")
    lim, err, code = open(self, true, true)
  end
  if not lim then return nil, "libsw: limit " .. name .. ": " .. err, code end
  decide, finish = libsw.decide, libsw.finish
  keyed_decide, keyed_finish = libsw.keyed_decide, libsw.keyed_finish
  attach(self, lim)
  if on_full == "overflow" then
    -- created now, so that it exists when the registry is full
    local okk, e, c = lim:ensure(OVERFLOW)
    if not okk then return nil, "libsw: limit " .. name .. ": overflow key: " .. e, c end
  end
  limits[name] = self
  return self
end

-- The Limit of name (nil, message if it was never defined).
function _M.get(name)
  local self = limits[name]
  if self == nil then
    return nil, "SW_ENOTFOUND: no limit named " .. tostring(name), libsw.ENOTFOUND
  end
  return self
end

-- init_worker(): start the Redis refill timer of cluster limits in this
-- worker (required for them), and for limits defined with reopen = true,
-- open the segment again in this worker (by name, not creating it; by
-- default workers use the mapping they inherited from the master).
function _M.init_worker()
  local ok, err = true, nil
  for name, self in pairs(limits) do
    if self.opts.reopen then
      local lim, e = open(self, false, false)
      if not lim then
        log(ngx.ERR, "libsw: limit ", name, ": cannot reopen in this worker: ", e)
      else
        attach(self, lim)
      end
    end
    if self.opts.cluster and not self.refill_state then
      local started, e = cluster.start(self)
      if not started then
        log(ngx.ERR, e)
        ok, err = nil, e
      end
    end
  end
  return ok, err
end

-- Switch dry-run on or off for every key of the limit (statistics kept).
function Limit:set_dry_run(on)
  if getmetatable(self) ~= Limit then return invalid("set_dry_run: call it as lim:set_dry_run(on)") end
  return self.lim:set_dry_run(on)
end

-- ------------------------------------------------------------- hot path

-- Entries waiting for their exit in the log phase, by request: the
-- request's address keys them (no ngx.ctx table per request). The first
-- entry of a request is pending[r]: the Limit itself when the entry is on
-- the limit's keyless handle (one table store per request), else the key
-- of a keyed table or the handle of a registry, with the Limit in
-- pending_limit[r]. Further entries of the request go to pending_more[r]
-- (entry, Limit, entry, Limit, ...); more counts the requests that have
-- some, so that log() looks there only when one does.
-- A request that never reaches log() (a subrequest, a location whose own
-- log_by_lua does not call it) leaves its entry behind: the next request
-- at the same address exits it, which ends the leak instead of keeping it.
local pending, pending_limit, pending_more = {}, {}, {}
local more = 0

-- The current request: a table key for it (the address of its
-- ngx_http_request_t as a number: get_request() returns a new cdata box at
-- every call, and cdata keys compare by box, not by address), and the
-- request itself for request_end().
local current
-- The end of the request as log() records it: its response time in ms
-- (from the request's start, nginx's cached time) and whether it failed
-- (status >= 500).
local request_end
if ngx and ngx.config and ngx.config.ngx_lua_version then
  local ok, base = pcall(require, "resty.core.base")
  if ok and base.get_request then
    local ffi = require "ffi"
    local cast, get_request = ffi.cast, base.get_request
    local uintptr_t = ffi.typeof("uintptr_t")
    current = function()
      local r = get_request()
      if r == nil then return nil end
      local n = tonumber(cast(uintptr_t, r)) -- not a tail call: see DESIGN.md 5
      return n, r
    end
    -- The C functions lua-resty-core's ngx.now(), ngx.req.start_time() and
    -- ngx.status call, called directly on the request at hand: the three
    -- API calls cost about 110 instructions more per request in the trace
    -- (their table lookups, and a request lookup each).
    local C = ffi.C
    local found, now, start_time, status = pcall(function()
      return C.ngx_http_lua_ffi_now, C.ngx_http_lua_ffi_req_start_time,
        C.ngx_http_lua_ffi_get_resp_status
    end)
    if found then
      request_end = function(r)
        local rt_ms = floor((now() - start_time(r)) * 1000 + 0.5)
        return rt_ms, status(r) >= 500
      end
    end
  end
end
if current == nil then
  -- without resty.core (unit tests with a stand-in ngx): ngx.ctx is per request
  current = function() return ngx.ctx end
end
if request_end == nil then
  request_end = function()
    local rt_ms = floor((ngx.now() - ngx.req.start_time()) * 1000 + 0.5)
    return rt_ms, ngx.status >= 500
  end
end

-- Keep entry (self, the Limit, for an entry on its keyless handle; else a
-- keyed table's key or a registry's handle) for log().
local function record(self, entry)
  local r = current()
  if r == nil then return end
  if pending[r] == nil then
    pending[r] = entry
    if entry ~= self then pending_limit[r] = self end
    return
  end
  local list = pending_more[r]
  if list == nil then
    list = {}
    pending_more[r] = list
    more = more + 1
  end
  list[#list + 1] = entry
  list[#list + 1] = self
end

-- A new key found no place (a full registry, a keyed table full of active
-- keys): warn at most every 10 s per worker and limit.
local function warn_full(self, err)
  local now = ngx.now()
  if now - self.full_logged >= 10 then
    self.full_logged = now
    log(ngx.WARN, "libsw: limit ", self.name, ": ", err, " (on_full = ", self.on_full,
        "; further messages suppressed for 10 s)")
  end
end

local function failure(self, key, err, code)
  if code == libsw.EFULL then
    if self.on_full == "overflow" then return "overflow" end
    warn_full(self, err)
    if self.on_full == "closed" then return ngx.exit(self.full_status) end
    return false
  end
  log(ngx.ERR, "libsw: limit ", self.name, ": ", err, " (request let through)")
  return false
end

-- A blocked request: Retry-After (whole seconds, at least 1; none when it
-- can never pass) and the status.
local function blocked(self, retry_ms, status)
  if self.retry_after and retry_ms >= 0 then
    local s = ceil(retry_ms / 1000)
    if s < 1 then s = 1 end
    ngx.header["Retry-After"] = s
  end
  return ngx.exit(status)
end

-- What limit() does with a decision (v: 0 pass, 1 block, 2 wait, or a
-- negative code whose message is in wait_ms; full: a keyed table's new key
-- found no place): exits are recorded for entry (what record() keeps).
local FULL_MSG = "keyed table full: a new key found its places taken by active keys"
local function act(self, key, entry, v, wait_ms, retry_ms, would_block, full)
  if v == 0 and not full then
    if self.exit then record(self, entry) end
    return true, would_block
  end
  if full then -- on_full = "open" (passed uncounted) or "closed" (blocked)
    warn_full(self, FULL_MSG)
    if v == 0 then return false end
    return blocked(self, retry_ms, self.full_status)
  end
  if v == 1 then return blocked(self, retry_ms, self.status) end
  if v == 2 then
    if self.exit then record(self, entry) end
    ngx.sleep(wait_ms / 1000)
    return true
  end
  return failure(self, key, wait_ms, v)
end

-- Decide one request of the limit for key (any string; nil: the define()
-- option key_var names an nginx variable to use, else the limit has no
-- keys): on PASS return true; on WAIT sleep (ngx.sleep) then return true;
-- on BLOCK send the status with Retry-After and end the request
-- (ngx.exit). Returns false when the request passes unlimited (on_full =
-- "open", or an error of libsw, which is logged), and nil, message, code
-- when called wrongly (a key neither a string nor a number, an unknown
-- limit: logged, and the request passes too). With a dry-run rule nothing
-- is blocked: a request the rule would have blocked returns true, true
-- (and counts as "would block" in the statistics).
local function access(self, key)
  if key == nil then
    local var = self.key_var
    if var then key = ngx.var[var] end
    if key == nil then
      local h = self.h -- the keyless handle, once access() found it
      if h then
        local clock = self.clock
        local ok, would_block = act(self, NOKEY, self, decide(h, clock and clock() or nil, 1, self.flags))
        return ok, would_block
      end
      key = NOKEY
    end
  end
  local l = self.handles[key]
  if l == nil then
    local lim = self.lim
    local err, code
    l, err, code = lim.handle(lim, key)
    if l == nil then
      if code == libsw.EINVAL then -- the caller's mistake (a bad key): say so
        log(ngx.ERR, "libsw: limit ", self.name, ": ", err, " (request let through)")
        return nil, err, code
      end
      local f = failure(self, key, err, code)
      if f == "overflow" then return access(self, OVERFLOW) end
      return f
    end
    self.handles[key] = l
    -- a keyless call: later ones take the handle without a lookup, and
    -- record() keeps only the limit (not with a cluster rule, whose
    -- refiller wants the keys used)
    if key == NOKEY and not self.active then self.h = l end
  end
  local active = self.active
  if active then active[key] = l end
  local clock = self.clock
  -- a limit that records no exits says so (SW_ENTRY_NO_EXIT): nothing in flight
  local ok, would_block = act(self, key, l, decide(l, clock and clock() or nil, 1, self.flags))
  return ok, would_block
end

-- access() of a keyed table: the key itself is the table's key (any bytes;
-- nothing cached per key in Lua), and what log() exits.
local function access_keyed(self, key)
  if key == nil then
    local var = self.key_var
    if var then key = ngx.var[var] end
  end
  if key == nil or key == "" then
    key = NOKEY_KEYED
  elseif type(key) ~= "string" then
    if type(key) ~= "number" or key ~= key then
      local _, err, code = key_name(key) -- its message
      log(ngx.ERR, "libsw: limit ", self.name, ": ", err, " (request let through)")
      return nil, err, code
    end
    key = tostring(key)
  end
  local clock = self.clock
  local ok, would_block = act(self, key, key, keyed_decide(self.k, clock and clock() or nil, key, 1))
  return ok, would_block
end

-- The access of self's kind. The hot path makes no tail calls: LuaJIT
-- counts them towards its loop unroll limit in a trace that runs several
-- limit() calls (a loop, a function that calls it for several limits),
-- and aborts that trace.
local function enter(self, key)
  local ok, err, code
  if self.keyed then
    ok, err, code = access_keyed(self, key)
  else
    ok, err, code = access(self, key)
  end
  return ok, err, code
end

function Limit:limit(key)
  if getmetatable(self) ~= Limit then return invalid("limit: call it as lim:limit(key)") end
  local ok, err, code = enter(self, key)
  return ok, err, code
end

-- ------------------------------------------- several limits, all or nothing

-- limit({ name1, name2, ... }, keys): every limit of the list in turn, all
-- or nothing (Sentinel checks every rule before it counts): when one
-- refuses, the entries of those before it are cancelled (libsw gives back
-- what they counted), so that a request refused by one limit is counted
-- by none. keys (may be nil) gives the key of each position, as limit()'s.
local ffi = require "ffi"
local saved = {}                       -- copies of the admitted decisions, by position
local selves, targets = {}, {}         -- the Limit and its handle / key, by position
local cancel_logged = false

local function saved_at(i)
  local d = saved[i]
  if d == nil then
    d = ffi.new("sw_decision")
    saved[i] = d
  end
  return d
end

-- Give back the admitted entries 1..upto.
local function cancel_upto(upto)
  local C = libsw.C
  for j = upto, 1, -1 do
    local self, target = selves[j], targets[j]
    if target then
      local rc
      if self.keyed then
        rc = C.sw_keyed_cancel(self.k, saved[j])
      else
        rc = C.sw_limiter_cancel(target, saved[j])
      end
      if rc == libsw.ENOTSUP then
        if not cancel_logged then
          cancel_logged = true
          log(ngx.NOTICE, "libsw: cancel not supported by this libsw: a request refused by ",
              "one limit stays counted by the limits before it")
        end
      elseif rc ~= 0 then
        log(ngx.ERR, "libsw: limit ", self.name, ": cancel: ", libsw.error_message(rc))
      end
    end
  end
end

-- One limit's entry, decided and not acted on: verdict code (or a
-- negative sw_err code and its message), wait or retry, would_block, full,
-- and the handle (registry) or key (keyed table) it counted in.
local function decide_one(self, key)
  local clock = self.clock
  local t = clock and clock() or nil
  if self.keyed then
    if key == nil then
      local var = self.key_var
      if var then key = ngx.var[var] end
    end
    if key == nil or key == "" then
      key = NOKEY_KEYED
    elseif type(key) ~= "string" then
      if type(key) ~= "number" or key ~= key then
        local _, err, code = key_name(key)
        return code, err
      end
      key = tostring(key)
    end
    local v, a, b, would_block, full = keyed_decide(self.k, t, key, 1)
    return v, a, b, would_block, full, key
  end
  if key == nil then
    local var = self.key_var
    if var then key = ngx.var[var] end
    if key == nil then key = NOKEY end
  end
  local l = self.handles[key]
  if l == nil then
    local lim = self.lim
    local err, code
    l, err, code = lim.handle(lim, key)
    if l == nil then
      if code == libsw.EFULL and self.on_full == "overflow" and key ~= OVERFLOW then
        return decide_one(self, OVERFLOW)
      end
      return code, err
    end
    self.handles[key] = l
    if key == NOKEY and not self.active then self.h = l end
  end
  local active = self.active
  if active then active[key] = l end
  local v, a, b, would_block = decide(l, t, 1, self.flags)
  return v, a, b, would_block, false, l
end

local function limit_all(names, keys)
  local n = #names
  local wait, would = 0, false
  for i = 1, n do
    selves[i], targets[i] = false, false
  end
  for i = 1, n do
    local self = limits[names[i]]
    if self == nil then
      cancel_upto(i - 1)
      log(ngx.ERR, "libsw: no limit named ", tostring(names[i]), " (define it in init_by_lua)")
      return nil, "SW_ENOTFOUND: no limit named " .. tostring(names[i]), libsw.ENOTFOUND
    end
    selves[i] = self
    local v, a, b, would_block, full, target = decide_one(self, keys and keys[i])
    if type(v) ~= "number" or v < 0 then -- an error, or a new key that found no place
      if v == libsw.EFULL then
        warn_full(self, a)
        if self.on_full == "closed" then
          cancel_upto(i - 1)
          return ngx.exit(self.full_status)
        end
      else
        log(ngx.ERR, "libsw: limit ", self.name, ": ", a, " (let through by this limit)")
      end
    elseif full then -- a keyed table's on_full: open (passed uncounted) or closed
      warn_full(self, FULL_MSG)
      if v ~= 0 then
        cancel_upto(i - 1)
        return blocked(self, b, self.full_status)
      end
    elseif v == 1 then
      cancel_upto(i - 1)
      return blocked(self, b, self.status)
    else
      ffi.copy(saved_at(i), self.keyed and libsw.keyed_decision or libsw.decision,
               ffi.sizeof("sw_decision"))
      targets[i] = target
      if v == 2 and a > wait then wait = a end
      if would_block then would = true end
    end
  end
  for i = 1, n do
    local self, target = selves[i], targets[i]
    if target and self.exit then
      record(self, (not self.keyed and target == self.h) and self or target)
    end
  end
  if wait > 0 then ngx.sleep(wait / 1000) end
  return true, would
end

-- limit(name, key): access() of the limit defined under name; limit({
-- name, ... }, keys): several limits, all or nothing (limit_all).
function _M.limit(name, key)
  if type(name) == "table" then
    local ok, err, code = limit_all(name, key)
    return ok, err, code
  end
  local self = limits[name]
  if self == nil then
    log(ngx.ERR, "libsw: no limit named ", tostring(name), " (define it in init_by_lua)")
    return nil, "SW_ENOTFOUND: no limit named " .. tostring(name), libsw.ENOTFOUND
  end
  local ok, err, code = enter(self, key)
  return ok, err, code
end

-- The exit of one entry (what record() kept) of limit self.
local function exit_one(self, entry, rt_ms, failed)
  local clock = self.clock
  local rc, err
  if self.keyed then
    rc, err = keyed_finish(self.k, clock and clock() or nil, entry, rt_ms, failed)
  else
    if entry == self then entry = self.h end
    rc, err = finish(entry, clock and clock() or nil, rt_ms, failed)
  end
  if rc ~= 0 then
    log(ngx.ERR, "libsw: limit ", self.name, ": exit: ", err)
  end
end

-- log(): the end of every entry this request made (call it in log_by_lua):
-- response time from the request's start, failure when status >= 500.
function _M.log()
  local r, req = current()
  if r == nil then return end
  local entry = pending[r]
  if entry == nil then return end
  pending[r] = nil
  local self = entry
  if type(entry) ~= "table" then -- a key or a handle (a Limit is the only table)
    self = pending_limit[r]
    pending_limit[r] = nil
  end
  local rt_ms, failed = request_end(req)
  if rt_ms < 0 then rt_ms = 0 end
  exit_one(self, entry, rt_ms, failed)
  if more > 0 then
    local list = pending_more[r]
    if list ~= nil then
      pending_more[r] = nil
      more = more - 1
      for i = 1, #list, 2 do exit_one(list[i + 1], list[i], rt_ms, failed) end
    end
  end
end

-- ----------------------------------------------------------- inspection

-- Statistics of a key (nil: the limit without keys), see libsw's stats();
-- of a keyed table: the table's (nil) or a key's (libsw.Keyed's lookup).
function Limit:stats(key)
  if getmetatable(self) ~= Limit then return invalid("stats: call it as lim:stats(key)") end
  if self.keyed then
    if key == nil then return self.lim:stats() end
    return self.lim:lookup(key)
  end
  if key == nil then key = NOKEY end
  return self.lim:stats(key)
end

-- A keyed table's n keys with the most passes (by = "pass") or blocks
-- ("block"), and the number of keys active in the interval.
function Limit:top(n, by)
  if getmetatable(self) ~= Limit then return invalid("top: call it as lim:top(n, by)") end
  if not self.keyed then
    return nil, "SW_ENOTSUP: limit " .. self.name .. " is not a keyed table", libsw.ENOTSUP
  end
  return self.lim:top(n, by)
end

function Limit:keys()
  if getmetatable(self) ~= Limit then return invalid("keys: call it as lim:keys()") end
  return self.lim:keys()
end

function _M.stats(name, key)
  local self, err, code = _M.get(name)
  if not self then return nil, err, code end
  return self:stats(key)
end

function _M.names()
  local list = {}
  for name in pairs(limits) do list[#list + 1] = name end
  table.sort(list)
  return list
end

-- Entries of this worker still waiting for log() (0 between requests).
function _M.pending()
  local n = 0
  for _ in pairs(pending) do n = n + 1 end
  for _, list in pairs(pending_more) do n = n + #list / 2 end
  return n
end

-- limits from a rule file (resty/libsw/rules.lua): define_from_file,
-- reload_rules, watch_rules
require("resty.libsw.rules")(_M, { limits = limits, invalid = invalid, log = log })

_M.NOKEY, _M.OVERFLOW = NOKEY, OVERFLOW

return _M
