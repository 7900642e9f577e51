-- SPDX-License-Identifier: Apache-2.0
-- Unit tests of the LuaJIT binding (plain LuaJIT, no nginx):
--   SW_LIB=/path/libsw.so busted --lua=luajit bindings/lua/spec
local here = debug.getinfo(1, "S").source:match("^@(.*)/spec/[^/]+$") or "bindings/lua"
package.path = here .. "/?.lua;" .. package.path

local support = require "spec.support"
local libsw, T, limiter_at = support.libsw, support.T, support.limiter_at

-- verdicts of n entries (key optional)
local function verdicts(lim, n, key)
  local out = {}
  for i = 1, n do out[i] = (lim:entry(key)) end
  return table.concat(out, " ")
end

describe("loading", function()
  it("reports the version of the loaded library", function()
    assert.matches("^%d+%.%d+%.%d+", libsw.version())
    assert.is_true(libsw.loaded())
    assert.equal(libsw.path, os.getenv("SW_LIB") or libsw.path)
  end)

  it("refuses to load a second, different library", function()
    local ok, err = libsw.load("/nonexistent/libsw.so")
    assert.is_nil(ok)
    assert.matches("already loaded", err)
  end)

  local function luajit(env, code)
    local cmd = ("cd %q && %s luajit -e %q 2>&1"):format(here, env, code)
    local p = io.popen(cmd)
    local out = p:read("*a")
    p:close()
    return out
  end

  it("fails with a message, not an error, for a bad explicit path", function()
    local out = luajit("env -u SW_LIB", [[
      package.path = "./?.lua;" .. package.path
      local m = require "libsw"
      print(m.load("/nonexistent/libsw.so"))]])
    assert.matches("nil\tlibsw: cannot load /nonexistent/libsw.so", out, 1, true)
  end)

  it("finds the library through package.cpath, never by a bare name", function()
    local lib = os.getenv("SW_LIB")
    local dir = lib:match("^(.*)/[^/]+$")
    local out = luajit("env -u SW_LIB", ([[
      package.path = "./?.lua;" .. package.path
      package.cpath = %q
      local m = assert(require("libsw").load())
      print(m.path, m.version())]]):format(dir .. "/?.so"))
    assert.equal(dir .. "/libsw.so\t" .. libsw.version(), out:match("^[^\n]*"))
  end)

  -- The usual directories are replaced by ones the test makes, so that a
  -- libsw installed on the machine (make install, the Debian packages)
  -- changes nothing.
  it("explains where it looked when the library is nowhere", function()
    local out = luajit("env -u SW_LIB", [[
      package.path = "./?.lua;" .. package.path
      package.cpath = "/nonexistent/?.so"
      local m = require "libsw"
      m.library_dirs = { "/nonexistent/lib" }
      local lim, err = m.limiter{ qps = 1 }
      print(lim, err)]])
    assert.matches("libsw.so not found", out, 1, true)
    assert.matches("/nonexistent/libsw.so", out, 1, true)
    assert.matches("/nonexistent/lib/libsw.so.0", out, 1, true)
  end)

  -- (make install's directory comes first)
  it("finds libsw.so.0 in the usual directories, in their order", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute(("mkdir -p %q/a %q/b && ln -s %q %q/b/libsw.so.0"):format(
      dir, dir, os.getenv("SW_LIB"), dir)) == 0)
    finally(function() os.execute(("rm -rf %q"):format(dir)) end)
    local out = luajit("env -u SW_LIB", ([[
      package.path = "./?.lua;" .. package.path
      package.cpath = "/nonexistent/?.so"
      local m = require "libsw"
      assert(m.library_dirs[1] == "/usr/local/lib")
      m.library_dirs = { %q, %q }
      assert(m.load())
      print(m.path, m.version())]]):format(dir .. "/a", dir .. "/b"))
    assert.equal(dir .. "/b/libsw.so.0\t" .. libsw.version(), out:match("^[^\n]*"))
  end)

  it("reads the monotonic clock in milliseconds", function()
    local a = libsw.now_ms()
    assert.is_number(a)
    assert.is_true(libsw.now_ms() >= a)
  end)

  it("reads the duration clock in nanoseconds, never behind the window clock", function()
    local ms = libsw.now_ms()
    local a = libsw.now_ns()
    assert.is_number(a)
    assert.is_true(a >= ms * 1e6) -- the coarse window clock lags, never leads
    local b = libsw.now_ns()
    assert.is_true(b >= a)
    assert.is_true(a - ms * 1e6 < 1e9) -- the same time base, a tick or two apart
  end)

  it("tells the window clock's resolution", function()
    local ns = assert(libsw.clock_resolution_ns())
    assert.is_true(ns >= 1e6 and ns == math.floor(ns), tostring(ns))
  end)

  it("selects the clock sources by name, or coarse as a boolean", function()
    finally(function() assert(libsw.clock_use("default")) end)
    assert.is_true(libsw.clock_use("monotonic"))
    assert.equal(1e6, libsw.clock_resolution_ns()) -- CLOCK_MONOTONIC: 1 ns, counted in ms
    local ms, ns = libsw.now_ms(), libsw.now_ns()
    assert.is_true(math.abs(ns / 1e6 - ms) < 1000)
    assert.is_true(libsw.clock_use(true))            -- coarse: both clocks
    local coarse = libsw.clock_resolution_ns()
    assert.is_true(libsw.clock_use(false))           -- monotonic
    assert.equal(1e6, libsw.clock_resolution_ns())
    assert.is_true(libsw.clock_use("coarse"))
    assert.equal(coarse, libsw.clock_resolution_ns())
    assert.is_true(libsw.clock_use())                -- the default: windows coarse
    assert.equal(coarse, libsw.clock_resolution_ns())
  end)
end)

describe("reject behaviour (docs/limiters.md timeline)", function()
  it("passes 10, blocks with retry_after 0.8 s, passes again at 1000", function()
    local lim, clock = limiter_at { qps = 10 }
    for i = 1, 10 do
      local v, wait, retry, remaining, borrowed = lim:entry()
      assert.same({ "pass", 0, 0, 10 - i, false }, { v, wait, retry, remaining, borrowed })
    end
    clock.t = T + 200
    local v, wait, retry, remaining = lim:entry()
    assert.same({ "block", 0, 0.8, 0 }, { v, wait, retry, remaining })
    clock.t = T + 1000
    assert.equal("pass pass pass pass pass pass pass pass pass pass block", verdicts(lim, 11))
  end)

  it("counts n units per entry", function()
    local lim = limiter_at { qps = 10 }
    assert.equal("pass", (lim:entry(nil, 6)))
    local v, _, _, remaining = lim:entry(nil, 4)
    assert.equal("pass", v)
    assert.equal(0, remaining)
    assert.equal("block", (lim:entry(nil, 1)))
  end)

  it("borrows from the next window when prioritized", function()
    local lim, clock = limiter_at { qps = 10 }
    verdicts(lim, 10)
    clock.t = T + 800
    local v, wait, retry, _, borrowed = lim:entry(nil, 1, true)
    assert.same({ "wait", 0.2, 0, true }, { v, wait, retry, borrowed })
    clock.t = T + 1000
    assert.equal(1, lim:stats().pass) -- the borrowed pass, in the new window
  end)

  it("blocks forever (retry_after = math.huge) what can never pass", function()
    local lim = limiter_at { qps = 2 }
    local v, _, retry = lim:entry(nil, 3)
    assert.equal("block", v)
    assert.equal(math.huge, retry)
  end)

  it("limits per longer interval with one window (a tumbling 10 s window)", function()
    local lim, clock = limiter_at { qps = 2, interval = 10, windows = 1 }
    assert.equal(string.rep("pass ", 20) .. "block", verdicts(lim, 21))
    clock.t = T + 9999
    local v, _, retry = lim:entry()
    assert.equal("block", v)
    assert.equal(0.001, retry)
    clock.t = T + 10000
    assert.equal("pass", (lim:entry()))
  end)

  it("fast (non-strict) mode gives the same answers on one thread", function()
    local lim = limiter_at { qps = 3, strict = false }
    assert.equal("pass pass pass block", verdicts(lim, 4))
    assert.is_false(lim:rule().strict)
  end)
end)

describe("pacing behaviour", function()
  it("spaces admissions 100 ms apart and queues up to max_queue", function()
    local lim, clock = limiter_at { qps = 10, behavior = "pacing" }
    local seq = {}
    for i = 1, 7 do
      local v, wait, retry = lim:entry()
      seq[i] = v .. ":" .. wait .. ":" .. retry
    end
    assert.same({ "pass:0:0", "wait:0.1:0", "wait:0.2:0", "wait:0.3:0", "wait:0.4:0",
                  "wait:0.5:0", "block:0:0.1" }, seq)
    clock.t = T + 1000
    assert.equal("pass", (lim:entry()))
  end)

  it("honours a shorter max_queue (seconds)", function()
    local lim = limiter_at { qps = 10, behavior = "pacing", max_queue = 0.2 }
    assert.equal("pass wait wait block", verdicts(lim, 4))
  end)
end)

describe("warm-up behaviours", function()
  it("starts at threshold / cold_factor and rises to the threshold", function()
    local lim, clock = limiter_at { qps = 10, behavior = "warm_up" }
    local per_second = {}
    for s = 0, 12 do
      clock.t = T + s * 1000
      local n = 0
      for _ = 1, 20 do
        if lim:entry() == "pass" then n = n + 1 end
      end
      per_second[#per_second + 1] = n
    end
    -- cold: (int)passQps + 1 <= 10/3 lets 3 through; warm: 10
    assert.same({ 3, 3, 3, 3, 3, 4, 4, 4, 5, 5, 6, 7, 10 }, per_second)
  end)

  it("warm-up + pacing spaces admissions by the cold rate", function()
    local lim = limiter_at { qps = 10, behavior = "warm_up_pacing" }
    local v1 = lim:entry()
    local v2, wait = lim:entry()
    assert.equal("pass", v1)
    assert.equal("wait", v2)
    assert.equal(0.3, wait)
    assert.equal("block", (lim:entry()))
  end)

  it("takes warm_up and cold_factor", function()
    local lim = limiter_at { qps = 100, behavior = "warm_up", warm_up = 5, cold_factor = 4 }
    local r = lim:rule()
    assert.same({ 5, 4, "warm_up" }, { r.warm_up, r.cold_factor, r.behavior })
  end)
end)

describe("concurrency grade", function()
  it("admits up to N in flight, exit frees a place", function()
    local lim = limiter_at { concurrency = 2 }
    assert.equal("pass pass", verdicts(lim, 2))
    local v, _, retry = lim:entry()
    assert.equal("block", v)
    assert.equal(0.001, retry) -- no RT known yet: 1 ms
    assert.is_true(lim:exit(nil, 50))
    assert.equal("pass", (lim:entry()))
    v, _, retry = lim:entry()
    assert.equal("block", v)
    assert.equal(0.05, retry) -- the average RT
    assert.equal(2, lim:stats().concurrency)
  end)
end)

describe("exit and stats", function()
  it("records RT, successes and failures", function()
    local lim, clock = limiter_at { qps = 100 }
    verdicts(lim, 3)
    lim:exit(nil, 10)          -- milliseconds
    lim:exit(nil, 30, true)
    clock.t = T + 100
    local s = lim:stats()
    assert.equal(3, s.pass)
    assert.equal(0, s.block)
    assert.equal(3, s.pass_qps)
    assert.equal(2, s.success_qps)
    assert.equal(1, s.exception_qps)
    assert.equal(20, s.avg_rt)
    assert.equal(10, s.min_rt)
    assert.equal(1, s.concurrency)
    assert.equal(100, s.threshold)
    assert.equal("qps", s.grade)
    assert.equal("reject", s.behavior)
  end)

  it("counts blocks", function()
    local lim = limiter_at { qps = 1 }
    verdicts(lim, 4)
    local s = lim:stats()
    assert.same({ 1, 3, 4 }, { s.pass, s.block, s.total_request })
  end)
end)

describe("rules at run time", function()
  it("set_rule changes the threshold and keeps the statistics", function()
    local lim = limiter_at { qps = 2 }
    assert.equal("pass pass block", verdicts(lim, 3))
    assert.is_true(lim:set_rule { qps = 4 })
    assert.equal("pass pass block", verdicts(lim, 3))
    assert.equal(4, lim:rule().qps)
  end)

  it("set_rule refuses a bad rule", function()
    local lim = limiter_at { qps = 2 }
    local ok, err = lim:set_rule { qps = -3 }
    assert.is_nil(ok)
    assert.matches("SW_ERANGE", err)
  end)
end)

describe("registry (per-key limiters)", function()
  it("keeps one limiter per key", function()
    local lim = limiter_at { qps = 2, capacity = 8 }
    assert.equal("pass pass block", verdicts(lim, 3, "alice"))
    assert.equal("pass pass block", verdicts(lim, 3, "bob"))
    assert.equal(2, lim:count())
    assert.same({ "alice", "bob" }, lim:keys())
    assert.equal(1, lim:stats("bob").block)
    local s, err = lim:stats("carol")
    assert.is_nil(s)
    assert.matches("no such key", err)
  end)

  it("fails with SW_EFULL when full, existing keys keep working", function()
    local lim = limiter_at { qps = 1, capacity = 2 }
    assert.equal("pass", (lim:entry("a")))
    assert.equal("pass", (lim:entry("b")))
    local v, err, code = lim:entry("c")
    assert.is_nil(v)
    assert.equal(libsw.EFULL, code)
    assert.matches("SW_EFULL: registry is full: 2 of 2 names taken, c not added", err, 1, true)
    assert.equal("block", (lim:entry("a")))
  end)

  it("needs a key and a valid name", function()
    local lim = limiter_at { qps = 1, capacity = 2 }
    local v, err, code = lim:entry()
    assert.is_nil(v)
    assert.matches("need a key", err)
    assert.equal(libsw.EINVAL, code)
    v, err, code = lim:entry(string.rep("k", 64))
    assert.is_nil(v)
    assert.equal(libsw.ERANGE, code)
    assert.matches("name of 64 bytes is outside 1..63", err, 1, true)
  end)

  it("exit and set_rule work per key", function()
    local lim = limiter_at { concurrency = 1, capacity = 4 }
    assert.equal("pass block", verdicts(lim, 2, "k"))
    assert.is_true(lim:exit("k", 1))
    assert.equal("pass", (lim:entry("k")))
    assert.is_true(lim:set_rule { concurrency = 2 })
    assert.equal("pass block", verdicts(lim, 2, "k"))
    -- a key created after set_rule gets the new rule too
    assert.equal("pass pass block", verdicts(lim, 3, "new"))
  end)

  it("applies a key_name function to keys", function()
    local lim = limiter_at { qps = 1, capacity = 4,
                             key_name = function(k) return "user:" .. k end }
    assert.equal("pass block", verdicts(lim, 2, "42"))
    assert.same({ "user:42" }, lim:keys())
    assert.equal(1, lim:stats("42").block)
  end)
end)

describe("errors are returned, not raised", function()
  local cases = {
    { {}, "needs qps = N or concurrency = N" },
    { { qps = 1, concurrency = 1 }, "either qps or concurrency" },
    { { qps = "x" }, "qps must be a number" },
    { { qps = -1 }, "SW_ERANGE: qps=-1 is outside 0..1e+15" },
    { { qps = 0 / 0 }, "SW_ERANGE: qps=nan is not a number" },
    { { qps = 1, behavior = "turbo" }, "behavior must be reject, pacing, warm_up or warm_up_pacing" },
    { { concurrency = 1, behavior = "pacing" }, "SW_EINVAL: SW_OPT_BEHAVIOR=2 (pacing) needs SW_OPT_GRADE=SW_GRADE_QPS" },
    { { qps = 1, cold_factor = 1, behavior = "warm_up" }, "SW_ERANGE: cold_factor=1 is outside 2..1000" },
    { { qps = 0.1, warm_up = 1, behavior = "warm_up" }, "has no warm-up range" },
    { { qps = 1, windows = 3 }, "SW_ESIZE: per-second array: " },
    { { qps = 1, stripes = 3 }, "SW_ERANGE: SW_OPT_STRIPES=3 is not a power of two" },
    { { qps = 1, capacity = 0 }, "SW_ERANGE: capacity=0 is outside 1..4294967295" },
    { { qps = 1, clock = 5 }, "clock must be a function" },
    { { qps = 1, segment = 5 }, "SW_EINVAL: segment must be a string, not 5" },
  }
  for _, c in ipairs(cases) do
    it(c[2], function()
      local lim, err = libsw.limiter(c[1])
      assert.is_nil(lim)
      assert.is_string(err)
      assert.matches(c[2], err, 1, true)
    end)
  end

  it("libsw.limiter without a table", function()
    local lim, err = libsw.limiter(10)
    assert.is_nil(lim)
    assert.matches("needs a table", err)
  end)

  it("entry of a bad size", function()
    local lim = limiter_at { qps = 1 }
    local v, err, code = lim:entry(nil, -1)
    assert.is_nil(v)
    assert.equal(libsw.ERANGE, code)
    assert.matches("n=-1 is outside 0..2147483647", err, 1, true)
  end)

  it("a closed limiter", function()
    local lim = limiter_at { qps = 1, capacity = 2 }
    lim:close()
    local v, err = lim:entry("a")
    assert.is_nil(v)
    assert.matches("closed", err)
    local single = limiter_at { qps = 1 }
    single:close()
    v, err = single:entry()
    assert.is_nil(v)
    assert.matches("closed", err)
  end)
end)

describe("the JIT compiles the hot path", function()
  -- Record trace aborts while entry/exit run hot: an abort in libsw.lua or
  -- libsw/keyed.lua (an NYI, a tail call into C, ...) would leave it to the
  -- interpreter. So would a stitch in them (LuaJIT 2.1 ends a trace before
  -- a call it cannot compile, runs that call in the interpreter and starts
  -- a new trace after it).
  local function traces_of(fn)
    local events = { stop = 0, aborts = {} }
    local files = { package.searchpath("libsw", package.path),
                    package.searchpath("libsw.keyed", package.path),
                    package.searchpath("resty.libsw", package.path) }
    jit.flush()
    local function handler(what, tr, func, pc, otr, oex)
      if what == "stop" then
        events.stop = events.stop + 1
      elseif what == "start" and otr and oex == -1 then -- after a stitch: where it goes on
        local info = require("jit.util").funcinfo(func, pc)
        events.aborts[#events.aborts + 1] = ("%s:%s: a trace stitched around a call it "
          .. "cannot compile"):format(tostring(info.source), tostring(info.currentline))
      elseif what == "abort" then
        local info = require("jit.util").funcinfo(func, pc)
        events.aborts[#events.aborts + 1] = ("%s:%s: %s"):format(
          tostring(info.source), tostring(info.currentline),
          type(otr) == "number" and require("jit.vmdef").traceerr[otr]:format(oex) or tostring(otr))
      end
    end
    jit.attach(handler, "trace")
    fn()
    jit.attach(handler) -- detached
    local mine = {}
    for _, a in ipairs(events.aborts) do
      for _, f in ipairs(files) do
        if a:find(f, 1, true) then mine[#mine + 1] = a end
      end
    end
    return events.stop, mine
  end

  -- fn runs in traces, none aborted or stitched in libsw's files
  local function compiles(fn)
    local stops, aborts = traces_of(fn)
    assert.is_true(stops > 0)
    assert.same({}, aborts)
  end

  local function hot(lim, key)
    local entry, exit = lim.entry, lim.exit
    local n = 0
    for _ = 1, 5000 do
      if entry(lim, key, 1) == "pass" then
        n = n + 1
        exit(lim, key, 0.001, false)
      end
    end
    return n
  end

  it("single limiter, registry key, injected clock: traces, no abort in libsw.lua", function()
    local t = 0
    local cases = {
      { assert(libsw.limiter { qps = 1e12 }), nil },
      { assert(libsw.limiter { qps = 1e12, capacity = 4 }), "k" },
      { assert(libsw.limiter { qps = 1e12, clock = function() t = t + 1 return t end }), nil },
    }
    for _, c in ipairs(cases) do
      compiles(function() assert.equal(5000, hot(c[1], c[2])) end)
    end
  end)

  it("keyed table entry / exit, many keys, libsw's clock and an injected one: no abort", function()
    local keys = {}
    for i = 1, 1000 do keys[i] = string.char(10, 0, math.floor(i / 256), i % 256) end
    local t = T
    for _, kt in ipairs { assert(libsw.keyed { qps = 1e6, capacity = 4096 }),
                          assert(libsw.keyed { concurrency = 1e6, capacity = 4096,
                                               clock = function() t = t + 1 return t end }) } do
      local entry, exit = kt.entry, kt.exit
      compiles(function()
        local n = 0
        for i = 1, 5000 do
          local key = keys[i % 1000 + 1]
          if entry(kt, key, 1) == "pass" then
            n = n + 1
            exit(kt, key, 0.001, false)
          end
        end
        assert.equal(5000, n)
      end)
    end
  end)

  it("the lean keyed_decide / keyed_finish of resty.libsw, new keys and old: no abort", function()
    local decide, finish = libsw.keyed_decide, libsw.keyed_finish
    local k = assert(libsw.keyed { qps = 1e6, capacity = 8192, on_full = "open" }).handle
    local keys = {}
    for i = 1, 5000 do keys[i] = "client-" .. i end
    local t = T
    compiles(function()
      local n = 0
      for i = 1, 10000 do -- the first 5000 insert, the next 5000 find
        t = t + 1
        local key = keys[(i - 1) % 5000 + 1]
        if decide(k, t, key, 1) == 0 then
          n = n + 1
          assert(finish(k, t, key, 1, false) == 0)
        end
      end
      assert.equal(10000, n)
    end)
  end)

  it("resty.libsw's limit() and log(): keyless, keyed, exits or none, two limits a request", function()
    local n = { ctx = {}, header = {}, status = 200, var = {}, WARN = 5, ERR = 4,
                now = function() return 100.5 end, req = { start_time = function() return 100 end },
                log = function() end, sleep = function() end, exit = function(s) error(s) end,
                get_phase = function() return "init" end }
    local tag = ("%d_%d"):format(libsw.getpid(), math.random(1, 1e9))
    _G.ngx = n
    package.loaded["resty.libsw"] = nil
    local resty = require "resty.libsw"
    finally(function()
      _G.ngx, package.loaded["resty.libsw"] = nil, nil
      for _, name in ipairs { "q", "c", "k" } do libsw.unlink_segment("libsw_jit_" .. name .. tag) end
    end)
    assert(resty.define("q", { qps = 1e12, segment = "libsw_jit_q" .. tag }))
    assert(resty.define("c", { concurrency = 1e9, segment = "libsw_jit_c" .. tag }))
    assert(resty.define("k", { qps = 1e5, capacity = 4096, key_var = "k", exit = true,
                               segment = "libsw_jit_k" .. tag }))
    local keys = {}
    for i = 1, 100 do keys[i] = string.char(10, 0, 0, i) end
    local limit, log = resty.limit, resty.log
    -- requests with one exit to record (a request with several loops over
    -- them in log(): a loop of one or two turns, which LuaJIT tries to
    -- trace on its own and gives up after a few tries)
    compiles(function()
      for _ = 1, 5000 do -- one request: a QPS limit, then a concurrency limit
        n.ctx = {}
        assert(limit("q"))
        assert(limit("c"))
        log()
      end
      for i = 1, 5000 do -- one request: a keyed table with exits, then a QPS limit
        n.ctx, n.var.k = {}, keys[i % 100 + 1]
        assert(limit("k"))
        assert(limit("q"))
        log()
      end
    end)
    assert.equal(0, resty.pending())
    assert.equal(0, resty.stats("c").concurrency)
    assert.equal(5000, resty.stats("c").total_success)
    assert.equal(5000, resty.stats("k").total_success)
  end)

  it("the lean decide / finish of resty.libsw, with their argument checks: no abort", function()
    local decide, finish = libsw.decide, libsw.finish
    local h = assert(libsw.limiter { qps = 1e12 }):handle()
    local t = T
    compiles(function()
      local n = 0
      for _ = 1, 5000 do
        t = t + 1
        if decide(h, t, 1, 0) == 0 then
          n = n + 1
          assert(finish(h, t, 1, false) == 0)
        end
      end
      assert.equal(5000, n)
    end)
  end)
end)
