-- SPDX-License-Identifier: Apache-2.0
-- libsw.keyed: keyed tables in the LuaJIT binding — one rule, any number of
-- keys, a few dozen bytes per key (docs/api.md, "Keyed tables").
--
--   local kt = assert(libsw.keyed{ qps = 10, capacity = 100000 })  -- segment = "name": shared
--   local verdict, wait, retry_after, remaining, _, would_block, full = kt:entry(key)
--   kt:exit(key, rt_ms, failed)
--   kt:stats()  kt:lookup(key)  kt:top(10, "block")  kt:scan(cursor)
--
-- libsw.lua calls the function this file returns once the library is
-- loaded, with the namespace C and its own checks; it adds libsw.keyed,
-- libsw.Keyed and the lean pair keyed_decide / keyed_finish to the module.
-- The hot functions follow libsw.lua's rules: locals of this closure over C
-- and one reused sw_decision, no allocation for a string key, no tail call
-- into C, argument checks as comparisons the JIT turns into guards.
--
-- The keyed table keeps per key what the reject and pacing behaviours and
-- the concurrency grade need. Warm-up and cluster rules are refused
-- (libsw.limiter with capacity keeps them per key, as whole limiters).

local ffi = require "ffi"

local type, tostring, setmetatable, getmetatable, ipairs =
  type, tostring, setmetatable, getmetatable, ipairs
local floor, huge = math.floor, math.huge
local ffi_string, ffi_new, ffi_gc, ffi_istype = ffi.string, ffi.new, ffi.gc, ffi.istype

local KEY_MAX = 65535          -- key bytes (sw_keyed_entry)
local CAPACITY_MAX = 2 ^ 28    -- keys at once
local WINDOWS_MAX = 64         -- windows of a keyed rule's interval
local COUNT_MAX = 4294967295   -- passes per key and window (a window word's 32 bits)
local CONCURRENCY_MAX = 1e12   -- requests in flight per key
local TOP_MAX = 100000         -- keys of one top()
local ON_FULL = { evict = 0, open = 1, closed = 2 }
local BY = { pass = 0, block = 1 }

return function(api, C, h)
  local M, fail, whole, show = h.M, h.fail, h.whole, h.show
  local errmsg, bad_n, bad_time, exit_args, finish_flags, bad_lean =
    h.errmsg, h.bad_n, h.bad_time, h.exit_args, h.finish_flags, h.bad_lean
  local N_MAX, T_MAX, now_of = h.N_MAX, h.T_MAX, h.now_of
  local BEHAVIOR_NAMES = h.BEHAVIOR_NAMES

  -- one decision, one info and one key reused by every call: read right
  -- after the call, never across a yield
  local dec = ffi_new("sw_decision")
  local info = ffi_new("sw_keyed_info")
  local one = ffi_new("sw_keyed_key")
  local cursor_box = ffi_new("uint64_t[1]")
  local active_box = ffi_new("int64_t[1]")
  local dbl = ffi_new("double[1]")
  local keyed_ptr = ffi.typeof("sw_keyed *")
  local key_array = ffi.typeof("sw_keyed_key[?]")

  local Keyed = {}
  Keyed.__index = Keyed

  local function bad_self(method)
    return fail(M.EINVAL, method .. ": call it as kt:" .. method .. "(...)")
  end
  local function closed()
    return fail(M.ESTATE, "keyed table is closed")
  end
  -- true, or nil, message, code for a C call's rc (not on the hot path)
  local function result(rc)
    if rc ~= 0 then return nil, errmsg(rc), rc end
    return true
  end
  -- a key is a string of 1..65535 bytes, or a number (named by tostring)
  local function bad_key(key)
    if type(key) == "string" then
      return fail(M.ERANGE, "key of " .. #key .. " bytes is outside 1..65535")
    end
    return fail(M.EINVAL, "key must be a string or a number, not " .. show(key))
  end
  local function bad_table(k)
    return fail(M.EINVAL, "the table must be a sw_keyed * (kt.handle), not " .. show(k))
  end

  -- key as the C library takes it: a string of 1..65535 bytes (a number:
  -- its tostring) and its length; or nil, message, code
  local function key_arg(key)
    if type(key) ~= "string" then
      if type(key) ~= "number" or key ~= key then return bad_key(key) end
      key = tostring(key)
    end
    local len = #key
    if len == 0 or len > KEY_MAX then return bad_key(key) end
    return key, len
  end

  -- What a keyed table refuses, said in the Lua options (r: rule_of's
  -- table; interval_ms and windows: the table's, nil for set_rule).
  local function keyed_rule(r, interval_ms, windows)
    if r.cluster == 1 then
      return fail(M.EINVAL, "cluster: a keyed table limits each key on this host; a fleet-wide "
        .. "limit per key needs libsw.limiter with capacity")
    end
    if r.behavior == 1 or r.behavior == 3 then
      return fail(M.EINVAL, "behavior=" .. BEHAVIOR_NAMES[r.behavior] .. ": a keyed table has "
        .. "no warm-up per key (libsw.limiter with capacity keeps one per key)")
    end
    if windows then
      if windows > WINDOWS_MAX then
        return fail(M.ERANGE, "windows=" .. windows .. " is outside 1..64 for a keyed table")
      end
      if interval_ms % windows ~= 0 then
        return fail(M.ESIZE, ("windows=%d does not divide interval=%s s"):format(windows,
          show(interval_ms / 1000)))
      end
    end
    -- the most a window can count once admitted, as libsw/keyed/table.c computes it
    local isec = interval_ms / 1000
    local most = isec <= 1 and r.threshold + isec or r.threshold * isec + 1
    if r.grade == 1 and r.behavior == 0 and most > COUNT_MAX then
      return fail(M.ERANGE, ("qps=%s over interval=%s s could count %s passes per key in a "
        .. "window: a keyed table counts at most %d"):format(show(r.threshold), show(isec),
        show(most), COUNT_MAX))
    end
    if r.grade == 0 and r.threshold > CONCURRENCY_MAX then
      return fail(M.ERANGE, "concurrency=" .. show(r.threshold)
        .. " is outside 0..1e+12 for a keyed table")
    end
    return true
  end

  -- ----------------------------------------------------------- hot path

  -- The decision in dec after a C entry that returned rc: verdict, wait_s,
  -- retry_after_s, remaining, borrowed (always false: no borrowing per
  -- key), would_block, full (a new key that found no place: passed
  -- uncounted with on_full = "open", blocked with "closed").
  local function decision(rc)
    if rc ~= 0 then return nil, errmsg(rc), rc end
    local v = dec.verdict
    local would, full = dec.would_block ~= 0, dec.full ~= 0
    if v == 0 then
      if would then
        local ra = tonumber(dec.retry_after_ms)
        return "pass", 0, ra < 0 and huge or ra / 1000, tonumber(dec.remaining), false, true, full
      end
      return "pass", 0, 0, tonumber(dec.remaining), false, false, full
    elseif v == 2 then
      return "wait", tonumber(dec.wait_ms) / 1000, 0, tonumber(dec.remaining), false, would, full
    end
    local ra = tonumber(dec.retry_after_ms)
    return "block", 0, ra < 0 and huge or ra / 1000, tonumber(dec.remaining), false, false, full
  end

  -- Decide an entry of n (default 1) for key and count it.
  local function entry(self, key, n)
    if type(self) ~= "table" then return bad_self("entry") end
    local k = self._k
    if k == nil then return closed() end
    local len, code
    key, len, code = key_arg(key)
    if key == nil then return nil, len, code end
    if n == nil then
      n = 1
    elseif type(n) ~= "number" or not (n >= 0 and n <= N_MAX) or n ~= floor(n) then
      return bad_n(n)
    end
    local clock = self._clock
    local rc
    if clock then
      local t = clock()
      if type(t) ~= "number" or not (t >= 0 and t < T_MAX) then return bad_time(t, "clock()") end
      rc = C.sw_keyed_entry_at(k, floor(t), key, len, n, 0, dec)
    else
      rc = C.sw_keyed_entry(k, key, len, n, 0, dec)
    end
    return decision(rc)
  end
  Keyed.entry = entry

  -- The end of an admitted entry of key: rt in milliseconds (rounded;
  -- below 0 counts as 0), failed counts an exception; for the concurrency
  -- grade one request of key less in flight.
  local function exit(self, key, rt, failed, n)
    if type(self) ~= "table" then return bad_self("exit") end
    local k = self._k
    if k == nil then return closed() end
    local len, code
    key, len, code = key_arg(key)
    if key == nil then return nil, len, code end
    local rt_ms, flags
    rt_ms, n, flags = exit_args(rt, failed, n)
    if rt_ms == nil then return nil, n, flags end
    local clock = self._clock
    local rc
    if clock then
      local t = clock()
      if type(t) ~= "number" or not (t >= 0 and t < T_MAX) then return bad_time(t, "clock()") end
      rc = C.sw_keyed_exit_at(k, floor(t), key, len, rt_ms, n, flags)
    else
      rc = C.sw_keyed_exit(k, key, len, rt_ms, n, flags)
    end
    if rc ~= 0 then return nil, errmsg(rc), rc end
    return true
  end
  Keyed.exit = exit

  -- The lean pair for resty.libsw, as decide / finish are for limiters:
  -- keyed_decide(k, t, key, n) returns the verdict code (0 pass, 1 block,
  -- 2 wait) with wait_ms or retry_after_ms, then would_block and full when
  -- either is set (a pass a dry-run rule would have blocked: 0, 0,
  -- retry_after_ms, true); keyed_finish(k, t, key, rt_ms, failed) returns
  -- 0. Either returns a negative sw_err code and its message on error. k is
  -- a table's handle (kt.handle), key a string of 1..65535 bytes, t the
  -- time in ms or nil for libsw's clock.
  -- The lean pair's table and key: the key's length, or nil, message, code.
  local function lean_key(k, key)
    if not ffi_istype(keyed_ptr, k) then return bad_table(k) end
    if type(key) ~= "string" then return bad_key(key) end
    local len = #key
    if len == 0 or len > KEY_MAX then return bad_key(key) end
    return len
  end

  local function keyed_decide(k, t, key, n)
    local len, err, code = lean_key(k, key)
    if len == nil then return code, err end
    if type(n) ~= "number" or not (n >= 0 and n <= N_MAX) or n ~= floor(n) then
      return bad_lean(bad_n(n))
    end
    local rc
    if t then
      if type(t) ~= "number" or not (t >= 0 and t < T_MAX) then return bad_lean(bad_time(t, "t")) end
      rc = C.sw_keyed_entry_at(k, floor(t), key, len, n, 0, dec)
    else
      rc = C.sw_keyed_entry(k, key, len, n, 0, dec)
    end
    if rc ~= 0 then return rc, errmsg(rc) end
    local v = dec.verdict
    if dec.full ~= 0 then return v, 0, tonumber(dec.retry_after_ms), false, true end
    if v == 0 then
      if dec.would_block ~= 0 then return 0, 0, tonumber(dec.retry_after_ms), true end
      return 0
    end
    if v == 2 then return 2, tonumber(dec.wait_ms), 0, dec.would_block ~= 0 end
    return 1, 0, tonumber(dec.retry_after_ms)
  end
  api.keyed_decide = keyed_decide
  api.keyed_decision = dec -- keyed_decide()'s, as api.decision

  local function keyed_finish(k, t, key, rt_ms, failed)
    local len, err, code = lean_key(k, key)
    if len == nil then return code, err end
    local flags
    flags, err, code = finish_flags(rt_ms, failed)
    if flags == nil then return code, err end
    local rc
    if t then
      if type(t) ~= "number" or not (t >= 0 and t < T_MAX) then return bad_lean(bad_time(t, "t")) end
      rc = C.sw_keyed_exit_at(k, floor(t), key, len, rt_ms, 1, flags)
    else
      rc = C.sw_keyed_exit(k, key, len, rt_ms, 1, flags)
    end
    if rc ~= 0 then return rc, errmsg(rc) end
    return 0
  end
  api.keyed_finish = keyed_finish

  -- --------------------------------------------------------- inspection

  -- Keyed[name] = fn, run only on an open table (a method called with '.'
  -- or on a closed table gets nil, message, code instead).
  local function method(name, fn)
    Keyed[name] = function(self, ...)
      if getmetatable(self) ~= Keyed then return bad_self(name) end
      if self._k == nil then return closed() end
      return fn(self, ...)
    end
  end

  -- One sw_keyed_key as a table: key (its bytes; digest = true when they
  -- are the 16-byte digest of a key longer than key_bytes), pass (in the
  -- interval), block (of the latest window that blocked), in_flight,
  -- last_ms (start of its latest window with a pass; nil: none).
  local function key_table(kk)
    local len = kk.len
    local last = tonumber(kk.last_ms)
    return {
      key = ffi_string(kk.key, len > 0 and len or 16), digest = len == 0 or nil,
      pass = tonumber(kk.pass), block = tonumber(kk.block),
      in_flight = tonumber(kk.in_flight), last_ms = last >= 0 and last or nil,
    }
  end

  local function key_list(arr, n)
    local list = {}
    for i = 0, n - 1 do list[i + 1] = key_table(arr[i]) end
    return list
  end

  -- The rule in force, as options (qps or concurrency, behavior,
  -- max_queue, dry_run), from opts filled by sw_keyed_get_rule.
  local function rule_options(rv)
    local o = { behavior = BEHAVIOR_NAMES[rv.behavior], max_queue = rv.max_queue_ms / 1000,
                dry_run = rv.dry_run ~= 0 }
    if rv.grade == 0 then o.concurrency = rv.threshold else o.qps = rv.threshold end
    return o
  end

  local function get_rule(self)
    local rc = C.sw_keyed_get_rule(self._k, self._scratch)
    if rc ~= 0 then return nil, errmsg(rc), rc end
    return h.rule_values(self._scratch)
  end

  -- The table as a whole: its geometry and memory, its keys (present,
  -- inserted, reclaimed from idle keys, evicted, refused by on_full), the
  -- units of every entry and exit since creation, and the rule.
  method("stats", function(self)
    local rc = C.sw_keyed_stats(self._k, info)
    if rc ~= 0 then return nil, errmsg(rc), rc end
    local i = info
    local success = tonumber(i.success)
    local s = {
      capacity = i.capacity, slots = i.slots, key_bytes = i.key_bytes, windows = i.windows,
      interval = tonumber(i.interval_ms) / 1000, bytes = tonumber(i.bytes),
      bytes_per_key = tonumber(i.bytes_per_key), keys = tonumber(i.keys),
      inserted = tonumber(i.inserted), reclaimed = tonumber(i.reclaimed),
      evicted = tonumber(i.evicted), refused = tonumber(i.refused),
      total_pass = tonumber(i.pass), total_block = tonumber(i.block),
      total_would_block = tonumber(i.would_block), total_success = success,
      total_exception = tonumber(i.exception),
      avg_rt = success > 0 and tonumber(i.rt) / success or 0,
    }
    local rv, err, code = get_rule(self)
    if not rv then return nil, err, code end
    s.threshold = rv.threshold
    s.grade = rv.grade == 0 and "concurrency" or "qps"
    s.behavior = BEHAVIOR_NAMES[rv.behavior]
    s.dry_run = rv.dry_run ~= 0
    return s
  end)

  -- The state of key now (key_table above), or nil, "no such key",
  -- libsw.ENOTFOUND when the table does not hold it.
  method("lookup", function(self, key)
    local s, len, code = key_arg(key)
    if not s then return nil, len, code end
    local t, err
    t, err, code = now_of(self)
    if not t then return nil, err, code end
    local rc = C.sw_keyed_lookup_at(self._k, t, s, len, one)
    if rc < 0 then return nil, errmsg(rc), rc end
    if rc == 0 then return fail(M.ENOTFOUND, "no such key: " .. show(key)) end
    return key_table(one)
  end)

  -- The n (default 10, at most 100000) keys with the most passes (by =
  -- "pass", the default) or blocks in the interval, most first, and the
  -- number of keys with a pass or a block in it.
  method("top", function(self, n, by)
    local err, code
    n, err, code = whole(n == nil and 10 or n, "n", 1, TOP_MAX)
    if not n then return nil, err, code end
    local b = BY[by == nil and "pass" or by]
    if b == nil then return fail(M.EINVAL, "by must be \"pass\" or \"block\", not " .. show(by)) end
    local t
    t, err, code = now_of(self)
    if not t then return nil, err, code end
    local arr = key_array(n)
    local rc = C.sw_keyed_top_at(self._k, t, b, arr, n, active_box)
    if rc < 0 then return nil, errmsg(rc), rc end
    return key_list(arr, rc), tonumber(active_box[0])
  end)

  -- Up to cap (default 1000) keys present from cursor on (0 or nil: the
  -- first), in place order, and the cursor to continue from: call again
  -- until the list is empty. Bounded memory whatever the table's size.
  method("scan", function(self, cursor, cap)
    local err, code
    cursor, err, code = whole(cursor == nil and 0 or cursor, "cursor", 0, 2 ^ 53)
    if not cursor then return nil, err, code end
    cap, err, code = whole(cap == nil and 1000 or cap, "cap", 1, TOP_MAX)
    if not cap then return nil, err, code end
    local t
    t, err, code = now_of(self)
    if not t then return nil, err, code end
    local arr = key_array(cap)
    cursor_box[0] = cursor
    local rc = C.sw_keyed_scan_at(self._k, t, cursor_box, arr, cap)
    if rc < 0 then return nil, errmsg(rc), rc end
    return key_list(arr, rc), tonumber(cursor_box[0])
  end)

  -- Every key present, as strings (a table of up to the table's size: for
  -- small tables and tests; scan() streams).
  function Keyed:keys()
    if getmetatable(self) ~= Keyed then return bad_self("keys") end
    local keys, cursor = {}, 0
    repeat
      local list, next_cursor, code = self:scan(cursor)
      if not list then return nil, next_cursor, code end
      for _, kt in ipairs(list) do keys[#keys + 1] = kt.key end
      cursor = next_cursor
    until #list == 0
    return keys
  end

  -- ------------------------------------------------------------- rules

  method("rule", function(self)
    local rv, err, code = get_rule(self)
    if not rv then return nil, err, code end
    return rule_options(rv)
  end)

  -- A new rule for every key, now (counts kept; in a segment, for every
  -- process). The kind of state per key (windows, pacing, concurrency) is
  -- the table's: another kind is refused.
  method("set_rule", function(self, o)
    if type(o) ~= "table" then
      return fail(M.EINVAL, "set_rule needs a table of options, not " .. show(o))
    end
    local r, err, code = h.rule_of(o)
    if not r then return nil, err, code end
    local ok
    ok, err, code = keyed_rule(r, self.interval * 1000, nil)
    if not ok then return nil, err, code end
    local opts
    opts, err, code = h.make_options(r, nil)
    if not opts then return nil, err, code end
    return result(C.sw_keyed_set_rule(self._k, opts))
  end)

  method("set_dry_run", function(self, on)
    if type(on) ~= "boolean" then
      return fail(M.EINVAL, "set_dry_run needs true or false, not " .. show(on))
    end
    return result(C.sw_keyed_set_dry_run(self._k, on and 1 or 0))
  end)

  -- true if this libsw.keyed call made the table, false if it attached.
  method("created", function(self)
    return C.sw_keyed_created(self._k) == 1
  end)

  -- Free the heap table, or unmap the segment (it stays), now.
  function Keyed:close()
    if getmetatable(self) ~= Keyed then return bad_self("close") end
    local k = self._k
    if k ~= nil then
      ffi_gc(k, nil)
      C.sw_keyed_free(k)
    end
    self._k, self.handle = nil, nil
  end

  -- ------------------------------------------------------- construction

  -- libsw.keyed{ qps = N | concurrency = N, behavior = "reject" | "pacing",
  --   max_queue = s, dry_run = bool, interval = s, windows = n,
  --   capacity = n (keys at once, required), key_bytes = 16..128,
  --   on_full = "evict" | "open" | "closed",
  --   segment = name, reset = bool, create = bool, mode = 0600,
  --   uid = n | user = "name", gid = n | group = "name",
  --   clock = function() return ms end }
  -- Always strict (one CAS per key decides and counts): strict is ignored.
  function api.keyed(o)
    if type(o) ~= "table" then
      return fail(M.EINVAL, "libsw.keyed needs a table of options, not " .. show(o))
    end
    local r, err, code = h.rule_of(o)
    if not r then return nil, err, code end
    local g
    g, err, code = h.geometry_of(o)
    if not g then return nil, err, code end
    local ok
    ok, err, code = h.shared_options(o, g)
    if not ok then return nil, err, code end
    if o.capacity == nil then
      return fail(M.EINVAL, "libsw.keyed needs capacity = N (the keys it holds at once)")
    end
    local capacity
    capacity, err, code = whole(o.capacity, "capacity", 1, CAPACITY_MAX)
    if not capacity then return nil, err, code end
    local on_full = ON_FULL[o.on_full == nil and "evict" or o.on_full]
    if on_full == nil then
      return fail(M.EINVAL, "on_full must be evict, open or closed, not " .. show(o.on_full))
    end
    local key_bytes
    if o.key_bytes ~= nil then
      key_bytes, err, code = h.option_number(o.key_bytes, "key_bytes", C.SW_OPT_KEY_BYTES, 1)
      if not key_bytes then return nil, err, code end
    end
    local opts
    opts, err, code = h.make_options(r, g)
    if not opts then return nil, err, code end
    C.sw_options_get_double(opts, C.SW_OPT_SECOND_INTERVAL_MS, dbl)
    local interval_ms = dbl[0]
    C.sw_options_get_double(opts, C.SW_OPT_SECOND_SAMPLE_COUNT, dbl)
    ok, err, code = keyed_rule(r, interval_ms, dbl[0])
    if not ok then return nil, err, code end
    local rc = C.sw_options_set(opts, C.SW_OPT_KEYED_ON_FULL, on_full)
    if rc == 0 and key_bytes then rc = C.sw_options_set(opts, C.SW_OPT_KEY_BYTES, key_bytes) end
    if rc ~= 0 then return nil, errmsg(rc), rc end
    local pp_scratch = ffi_new("sw_options *[1]")
    rc = C.sw_options_create(pp_scratch)
    if rc ~= 0 then return nil, errmsg(rc), rc end
    local pk = ffi_new("sw_keyed *[1]")
    if o.segment then
      rc = C.sw_keyed_open(pk, o.segment, capacity, opts, h.segment_flags(o))
    else
      rc = C.sw_keyed_create(pk, capacity, opts)
    end
    if rc ~= 0 then return nil, errmsg(rc), rc end
    local k = ffi_gc(pk[0], C.sw_keyed_free)
    if o.segment and C.sw_keyed_created(k) == 0 then
      -- our rule for every key, also when a process with an older
      -- configuration made the table (e.g. before an nginx reload)
      rc = C.sw_keyed_set_rule(k, opts)
      if rc ~= 0 then return nil, errmsg(rc), rc end
    end
    return setmetatable({
      _k = k, handle = k, -- handle: for keyed_decide / keyed_finish
      _scratch = ffi_gc(pp_scratch[0], C.sw_options_free),
      _clock = o.clock, capacity = capacity, interval = interval_ms / 1000,
      segment = o.segment,
    }, Keyed)
  end

  api.Keyed = Keyed
end
