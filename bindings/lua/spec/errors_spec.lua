-- SPDX-License-Identifier: Apache-2.0
-- Bad arguments: every public function of libsw and resty.libsw returns
-- nil, a message naming the argument and the value passed, and the
-- negative sw_err code — it never raises a Lua error, never truncates a
-- fraction, and never names the int64 a NaN would have become
-- (docs/openresty.md, "Errors").
local here = debug.getinfo(1, "S").source:match("^@(.*)/spec/[^/]+$") or "bindings/lua"
package.path = here .. "/?.lua;" .. package.path

local support = require "spec.support"
local libsw, limiter_at, T = support.libsw, support.limiter_at, support.T

local EINVAL, ERANGE, ETIME, ESIZE = libsw.EINVAL, libsw.ERANGE, libsw.ETIME, libsw.ESIZE

-- fn() must return nil, a message holding want, and code
local function refuses(code, want, fn)
  local ok, v, err, c = pcall(fn)
  assert(ok, "raised: " .. tostring(v))
  assert.is_nil(v)
  assert.is_string(err)
  assert.matches(want, err, 1, true)
  assert.not_matches("9223372036854775808", err, 1, true)
  assert.equal(code, c)
end

-- the lean pair returns the negative code and the message instead
local function refuses_lean(code, want, fn)
  local ok, c, err = pcall(fn)
  assert(ok, "raised: " .. tostring(c))
  assert.equal(code, c)
  assert.matches(want, err, 1, true)
end

describe("bad arguments are returned as nil, message, code", function()
  describe("entry and exit", function()
    local cases = {
      { EINVAL, 'n must be a whole number, not "x"', function(l) return l:entry(nil, "x") end },
      { EINVAL, "n must be a whole number, not a table", function(l) return l:entry(nil, {}) end },
      { EINVAL, "n must be a whole number, not true", function(l) return l:entry(nil, true) end },
      { ERANGE, "n=1.5 is not an integer", function(l) return l:entry(nil, 1.5) end },
      { ERANGE, "n=nan is not a number", function(l) return l:entry(nil, 0 / 0) end },
      { ERANGE, "n=1e+30 is outside 0..2147483647", function(l) return l:entry(nil, 1e30) end },
      { ERANGE, "n=-1e+30 is outside 0..2147483647", function(l) return l:entry(nil, -1e30) end },
      { ERANGE, "n=inf is outside", function(l) return l:entry(nil, math.huge) end },
      { ERANGE, "n=2147483648 is outside", function(l) return l:entry(nil, 2 ^ 31) end },
      { EINVAL, 'prioritized must be true or false, not "yes"',
        function(l) return l:entry(nil, 1, "yes") end },
      { EINVAL, 'rt must be a number of milliseconds, not "0.5"', function(l) return l:exit(nil, "0.5") end },
      { ERANGE, "rt=nan is not a number", function(l) return l:exit(nil, 0 / 0) end },
      { ERANGE, "rt=1e+300 is outside 0..2147483647 milliseconds", function(l) return l:exit(nil, 1e300) end },
      { ERANGE, "n=1.5 is not an integer", function(l) return l:exit(nil, 0.1, false, 1.5) end },
      { EINVAL, 'n must be a whole number, not "x"', function(l) return l:exit(nil, 0.1, false, "x") end },
      { EINVAL, "failed must be true or false, not 1", function(l) return l:exit(nil, 0.1, 1) end },
      { EINVAL, "the handle must be a sw_limiter *", function(l) return l:entry_handle("x") end },
      { EINVAL, "the handle must be a sw_limiter *", function(l) return l:exit_handle({}, 0.1) end },
      { ERANGE, "n=1.5 is not an integer", function(l) return l:entry_handle(l:handle(), 1.5) end },
      { EINVAL, "entry: call it as lim:entry(...)", function(l) return l.entry() end },
      { EINVAL, "exit: call it as lim:exit(...)", function(l) return l.exit(5) end },
      { EINVAL, "stats: call it as lim:stats(...)", function(l) return l.stats() end },
      { EINVAL, "keys: call it as lim:keys(...)", function(l) return l.keys("k") end },
      { EINVAL, "set_rule: call it as", function(l) return l.set_rule({ qps = 1 }) end },
    }
    for _, c in ipairs(cases) do
      it(c[2], function()
        local lim = limiter_at { qps = 10 }
        refuses(c[1], c[2], function() return c[3](lim) end)
        -- nothing was counted: a refused n = 1.5 is not an entry of 1
        assert.equal(0, lim:stats().pass)
      end)
    end

    it("a negative rt counts as 0 (a clock step), not as an error", function()
      local lim = limiter_at { qps = 10 }
      assert.equal("pass", (lim:entry()))
      assert.is_true(lim:exit(nil, -0.5))
      assert.equal(0, lim:stats().avg_rt)
    end)
  end)

  describe("keys", function()
    local cases = {
      { EINVAL, "key must be a string or a number, not a table", function(l) return l:entry({}) end },
      { EINVAL, "key must be a string or a number, not true", function(l) return l:entry(true) end },
      { EINVAL, "key must be a string or a number, not nan", function(l) return l:entry(0 / 0) end },
      { EINVAL, 'key "a\\0b" holds a NUL byte', function(l) return l:entry("a\0b") end },
      { EINVAL, "key must be a string or a number, not a table", function(l) return l:exit({}) end },
      { EINVAL, "key must be a string or a number, not a table", function(l) return l:stats({}) end },
      { EINVAL, "key must be a string or a number, not a table", function(l) return l:rule({}) end },
      { EINVAL, "key must be a string or a number, not a table", function(l) return l:ensure({}) end },
      { EINVAL, "key must be a string or a number, not a function", function(l) return l:handle(print) end },
    }
    for _, c in ipairs(cases) do
      it(c[2], function()
        local lim = limiter_at { qps = 10, capacity = 4 }
        refuses(c[1], c[2], function() return c[3](lim) end)
        assert.same({}, lim:keys())
      end)
    end

    it("NUL is refused rather than cut (\"n\\0one\" and \"n\\0two\" would both be \"n\")", function()
      local lim = limiter_at { qps = 1, capacity = 4 }
      refuses(EINVAL, "holds a NUL byte", function() return lim:entry("n\0one") end)
      refuses(EINVAL, "holds a NUL byte", function() return lim:entry("n\0two") end)
      assert.equal(0, lim:count())
    end)

    it("a key_name that gives no name", function()
      local lim = limiter_at { qps = 1, capacity = 4, key_name = function() return nil, "no name here" end }
      refuses(EINVAL, "no name here", function() return lim:entry("k") end)
      lim = limiter_at { qps = 1, capacity = 4, key_name = function() return 5 end }
      refuses(EINVAL, 'key_name gave no name for key "k"', function() return lim:entry("k") end)
    end)
  end)

  describe("an injected clock", function()
    local cases = {
      { EINVAL, 'clock() returned "x": want milliseconds (a number)', function() return "x" end },
      { EINVAL, "clock() returned nil", function() return nil end },
      { ETIME, "clock() returned nan", function() return 0 / 0 end },
      { ETIME, "clock() returned 1e+300: want milliseconds in 0..2^62", function() return 1e300 end },
      { ETIME, "clock() returned -5", function() return -5 end },
    }
    for _, c in ipairs(cases) do
      it(c[2], function()
        local lim = assert(libsw.limiter { qps = 10, clock = c[3] })
        refuses(c[1], c[2], function() return lim:entry() end)
        refuses(c[1], c[2], function() return lim:exit() end)
        refuses(c[1], c[2], function() return lim:stats() end)
      end)
    end

    it("drops a fraction of a millisecond (documented), and errors it raises propagate", function()
      local t = T + 0.75
      local lim = assert(libsw.limiter { qps = 1, clock = function() return t end })
      assert.equal("pass", (lim:entry()))
      assert.equal("block", (lim:entry()))
      local boom = assert(libsw.limiter { qps = 1, clock = function() error("boom") end })
      assert.has_error(function() boom:entry() end, "boom")
    end)
  end)

  describe("options", function()
    local cases = {
      { EINVAL, 'qps must be a number, not "10"', { qps = "10" } },
      { ERANGE, "qps=nan is not a number", { qps = 0 / 0 } },
      { ERANGE, "qps=inf is outside 0..1e+15", { qps = math.huge } },
      { EINVAL, 'windows must be a number, not "x"', { qps = 1, windows = "x" } },
      { ERANGE, "windows=1.5 is not an integer", { qps = 1, windows = 1.5 } },
      { ERANGE, "interval=nan is not a number", { qps = 1, interval = 0 / 0 } },
      { ERANGE, "interval=1e+300 is outside 0.001..3600 seconds", { qps = 1, interval = 1e300 } },
      { ERANGE, "interval=0.0001 is outside 0.001..3600 seconds", { qps = 1, interval = 0.0001 } },
      { EINVAL, 'max_queue must be a number of seconds, not "1"',
        { qps = 1, behavior = "pacing", max_queue = "1" } },
      { ERANGE, "max_queue=-1 is outside 0..3600 seconds", { qps = 1, behavior = "pacing", max_queue = -1 } },
      { ERANGE, "stripes=1.5 is not an integer", { qps = 1, stripes = 1.5 } },
      { ERANGE, "behavior=1.5 is not an integer", { qps = 1, behavior = 1.5 } },
      { EINVAL, "behavior must be reject, pacing, warm_up or warm_up_pacing, not a table",
        { qps = 1, behavior = {} } },
      { ERANGE, "warm_up=1.5 is not an integer", { qps = 1, behavior = "warm_up", warm_up = 1.5 } },
      { EINVAL, 'strict must be true or false, not "no"', { qps = 1, strict = "no" } },
      { EINVAL, "dry_run must be true or false, not 1", { qps = 1, dry_run = 1 } },
      { EINVAL, 'reset must be true or false, not "x"', { qps = 1, reset = "x" } },
      { EINVAL, "create must be true or false, not 0", { qps = 1, create = 0 } },
      { EINVAL, 'mode must be a number, not "0660"', { qps = 1, segment = "x", mode = "0660" } },
      { ERANGE, "mode=512 is outside 0..511", { qps = 1, segment = "x", mode = 512 } },
      { EINVAL, 'uid must be a number, not "x"', { qps = 1, segment = "x", uid = "x" } },
      { ERANGE, "uid=1.5 is not an integer", { qps = 1, segment = "x", uid = 1.5 } },
      { EINVAL, "user must be a name or a uid, not a table", { qps = 1, segment = "x", user = {} } },
      { ERANGE, "user=1.5 is not an integer", { qps = 1, segment = "x", user = 1.5 } },
      { EINVAL, 'segment "a\\0b" holds a NUL byte', { qps = 1, segment = "a\0b" } },
      { ERANGE, "capacity=nan is not a number", { qps = 1, capacity = 0 / 0 } },
      { ERANGE, "capacity=2.5 is not an integer", { qps = 1, capacity = 2.5 } },
      { EINVAL, 'capacity must be a whole number, not "8"', { qps = 1, capacity = "8" } },
      { EINVAL, 'cluster.lease must be a number, not "x"', { qps = 1, cluster = { lease = "x" } } },
      { ERANGE, "cluster.lease=1.5 is not an integer", { qps = 1, cluster = { lease = 1.5 } } },
      { ERANGE, "cluster.timeout=nan is not a number", { qps = 1, cluster = { timeout = 0 / 0 } } },
      { EINVAL, "cluster must be true or a table of cluster options, not 1", { qps = 1, cluster = 1 } },
      { EINVAL, "key_name must be a function(key) returning a name, not 1",
        { qps = 1, capacity = 2, key_name = 1 } },
    }
    for _, c in ipairs(cases) do
      it(c[2], function()
        refuses(c[1], c[2], function() return libsw.limiter(c[3]) end)
      end)
    end

    it("set_rule and set_dry_run", function()
      local lim = limiter_at { qps = 1 }
      refuses(EINVAL, "set_rule needs a table of options, not 5", function() return lim:set_rule(5) end)
      refuses(EINVAL, 'qps must be a number, not "x"', function() return lim:set_rule { qps = "x" } end)
      refuses(ERANGE, "max_queue=nan is not a number",
        function() return lim:set_rule { qps = 1, behavior = "pacing", max_queue = 0 / 0 } end)
      refuses(EINVAL, 'set_dry_run needs true or false, not "x"', function() return lim:set_dry_run("x") end)
      assert.equal(1, lim:rule().qps)
    end)
  end)

  describe("keyed tables", function()
    local function keyed(o)
      o.capacity = o.capacity or 8
      return libsw.keyed(o)
    end
    local options = {
      { EINVAL, "libsw.keyed needs a table of options, not 5", 5 },
      { EINVAL, "libsw.keyed needs capacity = N (the keys it holds at once)",
        function() return libsw.keyed { qps = 1 } end },
      { ERANGE, "capacity=0 is outside 1..268435456", { qps = 1, capacity = 0 } },
      { ERANGE, "capacity=2.5 is not an integer", { qps = 1, capacity = 2.5 } },
      { EINVAL, 'on_full must be evict, open or closed, not "overflow"', { qps = 1, on_full = "overflow" } },
      { EINVAL, 'key_bytes must be a number, not "16"', { qps = 1, key_bytes = "16" } },
      { ERANGE, "key_bytes=15 is outside 16..128", { qps = 1, key_bytes = 15 } },
      { EINVAL, "behavior=warm_up: a keyed table has no warm-up per key", { qps = 1, behavior = "warm_up" } },
      { EINVAL, "behavior=warm_up_pacing: a keyed table has no warm-up", { qps = 1, behavior = 3 } },
      { EINVAL, "cluster: a keyed table limits each key on this host", { qps = 1, cluster = true } },
      { ERANGE, "windows=100 is outside 1..64 for a keyed table", { qps = 1, interval = 100, windows = 100 } },
      { ESIZE, "windows=3 does not divide interval=1 s", { qps = 1, windows = 3 } },
      { ERANGE, "qps=5000000000 over interval=1 s could count 5000000001 passes per key in a window: "
        .. "a keyed table counts at most 4294967295", { qps = 5e9 } },
      { ERANGE, "qps=100000000 over interval=60 s could count 6000000001 passes per key", { qps = 1e8, interval = 60, windows = 1 } },
      { ERANGE, "concurrency=10000000000000 is outside 0..1e+12 for a keyed table", { concurrency = 1e13 } },
      { EINVAL, "give either qps or concurrency, not both", { qps = 1, concurrency = 1 } },
      { EINVAL, 'segment "a\\0b" holds a NUL byte', { qps = 1, segment = "a\0b" } },
      { EINVAL, "clock must be a function", { qps = 1, clock = 5 } },
    }
    for _, c in ipairs(options) do
      it(c[2], function()
        refuses(c[1], c[2], function()
          if type(c[3]) == "function" then return c[3]() end
          if type(c[3]) ~= "table" then return libsw.keyed(c[3]) end
          return keyed(c[3])
        end)
      end)
    end

    local calls = {
      { EINVAL, "key must be a string or a number, not a table", function(k) return k:entry({}) end },
      { EINVAL, "key must be a string or a number, not nil", function(k) return k:entry() end },
      { EINVAL, "key must be a string or a number, not nan", function(k) return k:entry(0 / 0) end },
      { ERANGE, "key of 0 bytes is outside 1..65535", function(k) return k:entry("") end },
      { ERANGE, "key of 65536 bytes is outside 1..65535", function(k) return k:entry(string.rep("x", 65536)) end },
      { ERANGE, "n=1.5 is not an integer", function(k) return k:entry("a", 1.5) end },
      { EINVAL, 'n must be a whole number, not "2"', function(k) return k:entry("a", "2") end },
      { ERANGE, "rt=nan is not a number", function(k) return k:exit("a", 0 / 0) end },
      { EINVAL, "failed must be true or false, not 1", function(k) return k:exit("a", 0.1, 1) end },
      { EINVAL, "key must be a string or a number, not true", function(k) return k:exit(true) end },
      { EINVAL, "key must be a string or a number, not a table", function(k) return k:lookup({}) end },
      { ERANGE, "n=0 is outside 1..100000", function(k) return k:top(0) end },
      { EINVAL, 'by must be "pass" or "block", not "rt"', function(k) return k:top(5, "rt") end },
      { ERANGE, "cursor=-1 is outside", function(k) return k:scan(-1) end },
      { ERANGE, "cap=1.5 is not an integer", function(k) return k:scan(0, 1.5) end },
      { EINVAL, "set_rule needs a table of options, not 5", function(k) return k:set_rule(5) end },
      { EINVAL, "behavior=warm_up: a keyed table has no warm-up", function(k) return k:set_rule { qps = 1, behavior = "warm_up" } end },
      { ERANGE, "qps=5000000000 over interval=1 s", function(k) return k:set_rule { qps = 5e9 } end },
      { EINVAL, "a keyed table keeps the kind of state it was created with (windows): this rule needs pacing",
        function(k) return k:set_rule { qps = 1, behavior = "pacing" } end },
      { EINVAL, 'set_dry_run needs true or false, not "x"', function(k) return k:set_dry_run("x") end },
      { EINVAL, "entry: call it as kt:entry(...)", function(k) return k.entry("a") end },
      { EINVAL, "exit: call it as kt:exit(...)", function(k) return k.exit(5) end },
      { EINVAL, "stats: call it as kt:stats(...)", function(k) return k.stats() end },
      { EINVAL, "lookup: call it as kt:lookup(...)", function(k) return k.lookup("a") end },
      { EINVAL, "top: call it as kt:top(...)", function(k) return k.top(5) end },
    }
    for _, c in ipairs(calls) do
      it(c[2], function()
        local kt = assert(libsw.keyed { qps = 10, capacity = 8, clock = function() return T end })
        refuses(c[1], c[2], function() return c[3](kt) end)
        assert.equal(0, kt:stats().total_pass) -- nothing was counted
        assert.equal(10, kt:rule().qps)
      end)
    end

    it("an injected clock that returns junk", function()
      local kt = assert(libsw.keyed { qps = 10, capacity = 8, clock = function() return 0 / 0 end })
      refuses(ETIME, "clock() returned nan", function() return kt:entry("a") end)
      refuses(ETIME, "clock() returned nan", function() return kt:exit("a") end)
      refuses(ETIME, "clock() returned nan", function() return kt:lookup("a") end)
    end)

    it("keyed_decide and keyed_finish return the code and the message", function()
      local k = assert(libsw.keyed { qps = 10, capacity = 8 }).handle
      local l = limiter_at { qps = 10 }:handle()
      refuses_lean(EINVAL, "the table must be a sw_keyed * (kt.handle), not", function() return libsw.keyed_decide(l, nil, "a", 1) end)
      refuses_lean(EINVAL, "the table must be a sw_keyed *", function() return libsw.keyed_finish("x", nil, "a", 1, false) end)
      refuses_lean(EINVAL, "key must be a string or a number, not 5", function() return libsw.keyed_decide(k, nil, 5, 1) end)
      refuses_lean(ERANGE, "key of 0 bytes is outside 1..65535", function() return libsw.keyed_decide(k, nil, "", 1) end)
      refuses_lean(ERANGE, "n=nan is not a number", function() return libsw.keyed_decide(k, nil, "a", 0 / 0) end)
      refuses_lean(ETIME, "t=-1: want milliseconds", function() return libsw.keyed_decide(k, -1, "a", 1) end)
      refuses_lean(ERANGE, "rt_ms=2.5 is not an integer", function() return libsw.keyed_finish(k, nil, "a", 2.5, false) end)
      refuses_lean(EINVAL, 'failed must be true or false, not "yes"', function() return libsw.keyed_finish(k, nil, "a", 1, "yes") end)
      -- the library's own error comes with its message
      local c = assert(libsw.keyed { concurrency = 1, capacity = 8 }).handle
      refuses_lean(libsw.ESTATE, "SW_ESTATE: exit without an entry of this key in flight",
        function() return libsw.keyed_finish(c, nil, "a", 1, false) end)
    end)
  end)

  describe("module functions", function()
    local l
    setup(function() l = limiter_at { qps = 10, cluster = { lease = 10 } }:handle() end)
    local cases = {
      { EINVAL, 'code must be a whole number, not "x"', function() return libsw.strerror("x") end },
      { ERANGE, "code=1.5 is not an integer", function() return libsw.strerror(1.5) end },
      { EINVAL, "code must be a whole number, not a table", function() return libsw.err_name({}) end },
      { EINVAL, "code must be a whole number, not nil", function() return libsw.error_message() end },
      { EINVAL, 'source must be "default", "monotonic", "coarse", true or false, not "x"',
        function() return libsw.clock_use("x") end },
      { EINVAL, 'true or false, not 2', function() return libsw.clock_use(2) end },
      { EINVAL, 'true or false, not nan', function() return libsw.clock_use(0 / 0) end },
      { EINVAL, "segment name must be a string, not 5", function() return libsw.unlink_segment(5) end },
      { EINVAL, "holds a NUL byte", function() return libsw.unlink_segment("a\0b") end },
      { EINVAL, "segment name must be a string, not 5", function() return libsw.segment_rule(5) end },
      { EINVAL, "holds a NUL byte", function() return libsw.segment_rule("a\0b") end },
      { EINVAL, "user must be a name or a uid, not a table", function() return libsw.user_ids({}) end },
      { EINVAL, "group must be a name or a gid, not true", function() return libsw.user_ids(nil, true) end },
      { EINVAL, "the handle must be a sw_limiter *", function() return libsw.lease_stats("x") end },
      { EINVAL, "the handle must be a sw_limiter *", function() return libsw.lease_next_call(nil, T) end },
      { EINVAL, 't="x": want milliseconds', function() return libsw.lease_next_call(l, "x") end },
      { ETIME, "t=1.5: want milliseconds", function() return libsw.lease_next_call(l, 1.5) end },
      { EINVAL, "call must be a sw_lease_call", function() return libsw.lease_apply(l, T, nil, 1, 1, 1) end },
      { EINVAL, "call must be a sw_lease_call", function() return libsw.lease_failed(l, T, "x") end },
      { EINVAL, "call must be a sw_lease_call", function() return libsw.lease_args({}) end },
      { EINVAL, 'bucket must be a whole number, not "1000"', function()
        local h = limiter_at { qps = 10, cluster = { lease = 10 } }:handle()
        local call = assert(libsw.lease_next_call(h, T))
        return libsw.lease_apply(h, T, call, "1000", 1, 1)
      end },
      { ERANGE, "granted=nan is not a number", function()
        local h = limiter_at { qps = 10, cluster = { lease = 10 } }:handle()
        local call = assert(libsw.lease_next_call(h, T))
        return libsw.lease_apply(h, T, call, T, 0 / 0, T)
      end },
      { EINVAL, "the library path must be a non-empty string, not 5", function()
        return libsw.find_library(5)
      end },
    }
    for _, c in ipairs(cases) do
      it(c[2], function() refuses(c[1], c[2], c[3]) end)
    end

    it("decide and finish return the code and the message", function()
      local h = limiter_at { qps = 10 }:handle()
      refuses_lean(EINVAL, "the handle must be a sw_limiter *", function() return libsw.decide("x", nil, 1, 0) end)
      refuses_lean(ERANGE, "n=nan is not a number", function() return libsw.decide(h, nil, 0 / 0, 0) end)
      refuses_lean(ERANGE, "n=1.5 is not an integer", function() return libsw.decide(h, nil, 1.5, 0) end)
      refuses_lean(EINVAL, "flags must be 0..3 (1 prioritized, 2 no exit), not 4", function() return libsw.decide(h, nil, 1, 4) end)
      refuses_lean(EINVAL, 't="x"', function() return libsw.decide(h, "x", 1, 0) end)
      refuses_lean(ETIME, "t=nan", function() return libsw.decide(h, 0 / 0, 1, 0) end)
      refuses_lean(ERANGE, "rt_ms=nan is not a number", function() return libsw.finish(h, nil, 0 / 0, false) end)
      refuses_lean(ERANGE, "rt_ms=2.5 is not an integer", function() return libsw.finish(h, nil, 2.5, false) end)
      refuses_lean(EINVAL, 'failed must be true or false, not "yes"', function() return libsw.finish(h, nil, 1, "yes") end)
      -- a failure of the C library: its message comes along too
      refuses_lean(libsw.ESTATE, "SW_ESTATE: exit without an entry in flight",
        function() return libsw.finish(h, nil, 1, false) end)
    end)
  end)
end)

describe("resty.libsw returns bad arguments as nil, message, code", function()
  local resty, logs, segs
  before_each(function()
    logs, segs = {}, {}
    _G.ngx = {
      WARN = 5, ERR = 4, ctx = {}, header = {}, status = 200,
      log = function(_, ...) logs[#logs + 1] = table.concat({ ... }) end,
      now = function() return 100 end, get_phase = function() return "init" end,
      exit = function(s) error({ exit = s }) end,
    }
    package.loaded["resty.libsw"] = nil
    resty = require "resty.libsw"
  end)
  after_each(function()
    for _, s in ipairs(segs) do libsw.unlink_segment(s) end
    _G.ngx = nil
  end)
  local function define(name, opts)
    opts.segment = ("libsw_espec_%s_%d_%d"):format(name, libsw.getpid(), math.random(1, 1e9))
    segs[#segs + 1] = opts.segment
    return resty.define(name, opts)
  end

  it("define checks every option of its own", function()
    refuses(EINVAL, "limit name must be 1..40 characters of [A-Za-z0-9_.-], not 5",
      function() return resty.define(5, { qps = 1 }) end)
    refuses(EINVAL, "options must be a table", function() return resty.define("x", 5) end)
    refuses(EINVAL, 'status must be an HTTP status in 400..599, not "429"',
      function() return define("x", { qps = 1, status = "429" }) end)
    refuses(EINVAL, "full_status must be an HTTP status in 400..599, not 503.5",
      function() return define("x", { qps = 1, full_status = 503.5 }) end)
    refuses(EINVAL, 'exit must be true or false, not "no"',
      function() return define("x", { qps = 1, exit = "no" }) end)
    refuses(EINVAL, "retry_after must be true or false, not 0",
      function() return define("x", { qps = 1, retry_after = 0 }) end)
    refuses(EINVAL, 'on_full must be evict, open, closed or overflow, not "maybe"',
      function() return define("x", { qps = 1, on_full = "maybe" }) end)
    refuses(EINVAL, 'on_full = "evict" needs a keyed table; limit x keeps a registry',
      function() return define("x", { qps = 1, on_full = "evict" }) end)
    refuses(EINVAL, 'on_full = "evict" needs a keyed table',
      function() return define("x", { qps = 10, behavior = "warm_up", capacity = 8,
                                      on_full = "evict" }) end)
    refuses(ERANGE, "key_bytes=200 is outside 16..128",
      function() return define("x", { qps = 1, capacity = 8, key_bytes = 200 }) end)
    refuses(ERANGE, "capacity=268435457 is outside 1..268435456",
      function() return define("x", { qps = 1, capacity = 2 ^ 28 + 1 }) end)
    refuses(EINVAL, 'key_var must be the name of an nginx variable',
      function() return define("x", { qps = 1, key_var = 5 }) end)
    refuses(ERANGE, "capacity=1.5 is not an integer",
      function() return define("x", { qps = 1, capacity = 1.5 }) end)
    refuses(EINVAL, 'stripes must be a number, not "1"',
      function() return define("x", { qps = 1, stripes = "1" }) end)
  end)

  it("limit: a bad key or an unknown limit is logged, the request passes", function()
    assert(define("k", { qps = 1, capacity = 4 }))
    refuses(EINVAL, "key must be a string or a number, not a table", function() return resty.limit("k", {}) end)
    refuses(EINVAL, "key must be a string or a number, not nan", function() return resty.limit("k", 0 / 0) end)
    refuses(EINVAL, "key must be a string or a number, not true", function() return resty.limit("k", true) end)
    refuses(libsw.ENOTFOUND, "no limit named nope", function() return resty.limit("nope") end)
    refuses(EINVAL, "limit: call it as lim:limit(key)", function() return resty.get("k").limit("a") end)
    assert.equal(4, #logs) -- each logged, but the wrong call
    assert.same({}, resty.get("k"):keys())
    assert.is_true(resty.limit("k", 42)) -- numbers are keys
    assert.same({ "42" }, resty.get("k"):keys())
  end)

  it("key_name, get and stats", function()
    refuses(EINVAL, "key must be a string or a number, not a table", function() return resty.key_name({}) end)
    refuses(EINVAL, "not nan", function() return resty.key_name(0 / 0) end)
    refuses(libsw.ENOTFOUND, "no limit named nope", function() return resty.get("nope") end)
    refuses(libsw.ENOTFOUND, "no limit named nope", function() return resty.stats("nope") end)
    assert(define("s", { qps = 1, capacity = 2 }))
    refuses(EINVAL, "key must be a string or a number, not a table", function() return resty.stats("s", {}) end)
    refuses(EINVAL, "set_dry_run needs true or false, not 1", function() return resty.get("s"):set_dry_run(1) end)
  end)

  it("a clock that returns junk fails the decision (logged), the request passes", function()
    assert(define("c", { qps = 1, clock = function() return "soon" end }))
    assert.is_false(resty.limit("c"))
    assert.matches('t="soon": want milliseconds', logs[1], 1, true) -- decide() names the value
  end)
end)
