-- SPDX-License-Identifier: Apache-2.0
-- libsw.breaker: circuit breakers in the LuaJIT binding — Sentinel's degrade
-- rules (docs/breakers.md).
--
--   local br = assert(libsw.breaker{ error_ratio = 0.5, min_requests = 5, open_for = 10 })
--   local verdict, retry_after, probe = br:entry()      -- "pass" or "block"
--   if verdict == "block" then ... end                 -- retry_after seconds
--   br:exit(probe, rt_ms, failed)                      -- probe: as entry returned it
--
-- One strategy: error_ratio = r, error_count = n, or slow_ratio = r with
-- max_rt = seconds (an option, in seconds like the limiter's max_rt; the rt
-- of exit is in ms, like the limiters' exits). Options: min_requests, interval (s), windows, open_for
-- (s), half_open_calls, probe_timeout (s), segment = name (one breaker for
-- every process; reset = true replaces it; user, group: the owner of a new
-- segment), clock = function returning ms.
-- Errors are returned (nil, message, code), never raised, as in libsw.lua.
--
-- libsw.lua calls the function this file returns once the library is
-- loaded, with the namespace C and its checks. entry and exit reuse one
-- sw_decision; a probe's word is returned as an int64 cdata (0 otherwise).

local ffi = require "ffi"

local type, setmetatable, tonumber = type, setmetatable, tonumber
local floor = math.floor
local ffi_new, ffi_gc, ffi_string = ffi.new, ffi.gc, ffi.string

if not pcall(ffi.typeof, "sw_breaker_info") then
  ffi.cdef [[
typedef struct sw_breaker sw_breaker;
typedef struct sw_breaker_info {
  int32_t state; int32_t strategy;
  int64_t state_since_ms; int64_t next_probe_ms;
  int64_t total; int64_t bad; double ratio; int64_t probes_in_flight;
  int64_t opened; int64_t half_opened; int64_t closed; int64_t reopened;
  int64_t probes; int64_t probes_lost; int64_t blocked;
  int64_t reserved[4];
} sw_breaker_info;
int sw_breaker_create(sw_breaker **out, const sw_options *opts);
int sw_breaker_open(sw_breaker **out, const char *name, const sw_options *opts, uint32_t flags);
void sw_breaker_free(sw_breaker *b);
int sw_breaker_entry(sw_breaker *b, sw_decision *d);
int sw_breaker_entry_at(sw_breaker *b, int64_t t, sw_decision *d);
int sw_breaker_exit(sw_breaker *b, const sw_decision *d, int64_t rt_ms, uint32_t flags);
int sw_breaker_exit_at(sw_breaker *b, int64_t t, const sw_decision *d, int64_t rt_ms,
                       uint32_t flags);
int sw_breaker_stats_at(const sw_breaker *b, int64_t t, sw_breaker_info *out);
]]
end

-- SW_OPT_BREAKER_* (appended to sw_option after the binding's CDEF was written)
local OPT = { strategy = 30, count = 31, slow_ratio = 32, open_for = 33, min_requests = 34,
              interval = 35, windows = 36, half_open_calls = 37, probe_timeout = 38 }
local NAMES = { SW_OPT_BREAKER_SLOW_RATIO = "slow_ratio", SW_OPT_BREAKER_TIME_WINDOW_SEC = "open_for",
                SW_OPT_BREAKER_MIN_REQUESTS = "min_requests",
                SW_OPT_BREAKER_STAT_INTERVAL_MS = "interval (ms)",
                SW_OPT_BREAKER_SAMPLE_COUNT = "windows",
                SW_OPT_BREAKER_HALF_OPEN_CALLS = "half_open_calls",
                SW_OPT_BREAKER_PROBE_TIMEOUT_MS = "probe_timeout (ms)" }
local STATES = { [0] = "closed", [1] = "open", [2] = "half_open" }
local SEGMENT_UID, SEGMENT_GID = 17, 18 -- SW_OPT_SEGMENT_UID, SW_OPT_SEGMENT_GID
local EXIT_ERROR, EXIT_CANCEL, VERDICT_BLOCK = 1, 2, 1
local RT_MAX = 2147483647

return function(api, C, h)
  local M, fail, show, errmsg, segment_flags = h.M, h.fail, h.show, h.errmsg, h.segment_flags
  local dec = ffi_new("sw_decision")
  local info = ffi_new("sw_breaker_info")
  local int64 = ffi.typeof("int64_t")

  local Breaker = {}
  Breaker.__index = Breaker

  -- the C message with the options as this binding names them
  local function message(rc, count_name)
    local msg = errmsg(rc):gsub("SW_OPT_BREAKER_COUNT", count_name)
    for c_name, lua_name in pairs(NAMES) do msg = msg:gsub(c_name, lua_name) end
    return msg
  end

  local function now_of(self)
    local clock = self._clock
    if clock then
      local t = clock()
      if type(t) ~= "number" or not (t >= 0) then
        return nil, "clock() returned " .. show(t) .. ", not a time in ms >= 0", M.ETIME
      end
      return floor(t)
    end
    return nil
  end

  -- entry(): "pass", 0, probe (an int64 cdata for a probe, else 0) or
  -- "block", retry_after (seconds), state; nil, message, code on error
  function Breaker.entry(self)
    local b = self._b
    if b == nil then return fail(M.ESTATE, "breaker is closed") end
    local rc
    if self._clock then
      local t, err, code = now_of(self)
      if not t then return nil, err, code end
      rc = C.sw_breaker_entry_at(b, t, dec)
    else
      rc = C.sw_breaker_entry(b, dec)
    end
    if rc ~= 0 then return nil, message(rc, self._count_name), rc end
    if dec.verdict == VERDICT_BLOCK then
      return "block", tonumber(dec.retry_after_ms) / 1000, self:state()
    end
    if dec.probe ~= 0 then return "pass", 0, int64(dec.probe) end
    return "pass", 0, 0
  end

  -- exit(probe, rt_ms, failed, cancel): the end of a passed entry
  function Breaker.exit(self, probe, rt, failed, cancel)
    local b = self._b
    if b == nil then return fail(M.ESTATE, "breaker is closed") end
    if type(rt) ~= "number" or not (rt >= 0) then
      return fail(M.ERANGE, "rt must be milliseconds >= 0, not " .. show(rt))
    end
    local rt_ms = floor(rt + 0.5)
    if rt_ms > RT_MAX then rt_ms = RT_MAX end
    dec.probe = probe or 0
    local flags = (failed and EXIT_ERROR or 0) + (cancel and EXIT_CANCEL or 0)
    local rc
    if self._clock then
      local t, err, code = now_of(self)
      if not t then return nil, err, code end
      rc = C.sw_breaker_exit_at(b, t, dec, rt_ms, flags)
    else
      rc = C.sw_breaker_exit(b, dec, rt_ms, flags)
    end
    if rc ~= 0 then return nil, message(rc, self._count_name), rc end
    return true
  end

  -- stats(): a table of the state and every process's counts
  function Breaker.stats(self)
    local b = self._b
    if b == nil then return fail(M.ESTATE, "breaker is closed") end
    local t = self._clock and now_of(self) or tonumber(C.sw_now_ms())
    local rc = C.sw_breaker_stats_at(b, t, info)
    if rc ~= 0 then return nil, message(rc, self._count_name), rc end
    local open = info.state == 1
    return {
      state = STATES[info.state] or "?", requests = tonumber(info.total),
      bad = tonumber(info.bad), ratio = tonumber(info.ratio),
      next_probe_in = open and math.max(tonumber(info.next_probe_ms) - t, 0) / 1000 or 0,
      probes_in_flight = tonumber(info.probes_in_flight), opened = tonumber(info.opened),
      half_opened = tonumber(info.half_opened), closed = tonumber(info.closed),
      reopened = tonumber(info.reopened), probes = tonumber(info.probes),
      probes_lost = tonumber(info.probes_lost), blocked = tonumber(info.blocked),
    }
  end

  function Breaker.state(self)
    local s, err, code = self:stats()
    if not s then return nil, err, code end
    return s.state
  end

  function Breaker.close(self)
    if self._b ~= nil then
      C.sw_breaker_free(ffi_gc(self._b, nil))
      self._b = nil
    end
    return true
  end

  local function number(o, name, lo, hi)
    local v = o[name]
    if type(v) ~= "number" or v ~= v or v < lo or v > hi then
      return nil, "SW_ERANGE: " .. name .. "=" .. show(v) .. " must be a number in " .. lo .. ".." .. hi
    end
    return v
  end

  -- libsw.breaker{ ... }: see the top of this file
  function api.breaker(o)
    if type(o) ~= "table" then return fail(M.EINVAL, "libsw.breaker takes a table of options, not " .. show(o)) end
    local given = {}
    for _, k in ipairs { "slow_ratio", "error_ratio", "error_count" } do
      if o[k] ~= nil then given[#given + 1] = k end
    end
    if #given ~= 1 then
      return fail(M.EINVAL, "give exactly one of slow_ratio, error_ratio, error_count (got "
        .. (#given > 0 and table.concat(given, ", ") or "none") .. ")")
    end
    local strategy, count, ratio, count_name = given[1], nil, 1, given[1]
    local err
    if strategy == "slow_ratio" then
      if o.max_rt == nil then return fail(M.EINVAL, "slow_ratio needs max_rt (seconds)") end
      count, err = number(o, "max_rt", 0, 2147483)
      if not count then return nil, err, M.ERANGE end
      count = count * 1000
      ratio, err = number(o, "slow_ratio", 0, 1)
      if not ratio then return nil, err, M.ERANGE end
      count_name = "max_rt (ms)"
    else
      count, err = number(o, strategy, 0, 1e15)
      if not count then return nil, err, M.ERANGE end
    end
    local po = ffi_new("sw_options *[1]")
    local rc = C.sw_options_create(po)
    if rc ~= 0 then return nil, errmsg(rc), rc end
    local opts = ffi_gc(po[0], C.sw_options_free)
    local sets = {
      { OPT.strategy, strategy == "slow_ratio" and 0 or strategy == "error_ratio" and 1 or 2 },
      { OPT.count, count }, { OPT.slow_ratio, ratio },
      { OPT.open_for, o.open_for or 10 }, { OPT.min_requests, o.min_requests or 5 },
      { OPT.interval, (o.interval or 1) * 1000 }, { OPT.windows, o.windows or 1 },
      { OPT.half_open_calls, o.half_open_calls or 1 },
      { OPT.probe_timeout, (o.probe_timeout or 5) * 1000 },
    }
    for _, kv in ipairs(sets) do
      if type(kv[2]) ~= "number" then
        return fail(M.EINVAL, "breaker options are numbers, not " .. show(kv[2]))
      end
      rc = C.sw_options_set_double(opts, kv[1], kv[2])
      if rc ~= 0 then return nil, message(rc, count_name), rc end
    end
    if o.clock ~= nil and type(o.clock) ~= "function" then
      return fail(M.EINVAL, "clock must be a function returning ms, not " .. show(o.clock))
    end
    local pb = ffi_new("sw_breaker *[1]")
    if o.segment ~= nil then
      if type(o.segment) ~= "string" then
        return fail(M.EINVAL, "segment must be a string, not " .. show(o.segment))
      end
      -- the owner of a new segment (e.g. nginx's worker user, when the master makes it)
      if o.user ~= nil or o.group ~= nil then
        local uid, gid, code = api.user_ids(o.user, o.group)
        if not uid then return nil, gid, code end
        if o.user ~= nil then C.sw_options_set(opts, SEGMENT_UID, uid) end
        if gid ~= -1 then C.sw_options_set(opts, SEGMENT_GID, gid) end
      end
      rc = C.sw_breaker_open(pb, o.segment, opts, segment_flags(o))
    else
      rc = C.sw_breaker_create(pb, opts)
    end
    if rc ~= 0 then return nil, message(rc, count_name), rc end
    return setmetatable({ _b = ffi_gc(pb[0], C.sw_breaker_free), _clock = o.clock,
                          _count_name = count_name, segment = o.segment }, Breaker)
  end

  api.Breaker = Breaker
  return api
end
