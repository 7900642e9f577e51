-- SPDX-License-Identifier: Apache-2.0
-- resty.libsw in plain LuaJIT, with a stand-in for the ngx API (the real
-- nginx run is bindings/lua/t/nginx.lua).
local here = debug.getinfo(1, "S").source:match("^@(.*)/spec/[^/]+$") or "bindings/lua"
package.path = here .. "/?.lua;" .. package.path

local libsw = assert(require("libsw").load())

local T = 7000000

local function sorted(list)
  table.sort(list)
  return list
end

-- A minimal ngx: one request at a time; exit() raises so that the handler
-- stops as it does in nginx.
local EXIT = {}
local fake = {}
local function new_ngx()
  local n = {
    WARN = 5, ERR = 4, logs = {}, sleeps = {},
    ctx = {}, header = {}, status = 200, time = 100.0,
  }
  n.log = function(level, ...) n.logs[#n.logs + 1] = table.concat({ ... }) end
  n.exit = function(status) n.exited = status; error(EXIT) end
  n.sleep = function(s) n.sleeps[#n.sleeps + 1] = s end
  n.now = function() return n.time end
  n.req = { start_time = function() return n.start end }
  n.get_phase = function() return n.phase or "init" end
  return n
end

-- run one request through access (and the log phase)
local function request(resty, name, key, status)
  local n = fake.ngx
  n.ctx, n.header, n.exited, n.status, n.start = {}, {}, nil, 200, n.time
  local ok, err = pcall(resty.limit, name, key)
  if not ok and err ~= EXIT then error(err) end
  n.status = n.exited or status or 200
  resty.log()
  return n.exited or 200, n.header["Retry-After"]
end

describe("resty.libsw", function()
  local resty, clock, segs

  before_each(function()
    fake.ngx = new_ngx()
    _G.ngx = fake.ngx
    package.loaded["resty.libsw"] = nil
    resty = require "resty.libsw"
    clock = { t = T }
    segs = {}
  end)

  after_each(function()
    for _, s in ipairs(segs) do libsw.unlink_segment(s) end
    _G.ngx = nil
  end)

  local function define(name, opts)
    opts.segment = opts.segment or ("libsw_rspec_%s_%d_%d"):format(name, libsw.getpid(),
                                                                    math.random(1, 1e9))
    segs[#segs + 1] = opts.segment
    opts.clock = opts.clock or function() return clock.t end
    return resty.define(name, opts)
  end

  describe("key names", function()
    local key_name = function(k) return require("resty.libsw").key_name(k) end
    it("keeps printable keys", function()
      assert.equal("alice", key_name("alice"))
      assert.equal("GET:/api/v1?x=1", key_name("GET:/api/v1?x=1"))
    end)
    it("hex-encodes binary keys ($binary_remote_addr)", function()
      assert.equal("~7f000001", key_name("\127\0\0\1"))
      assert.equal("~20010db8000000000000000000000001",
                   key_name("\32\1\13\184" .. string.rep("\0", 11) .. "\1"))
    end)
    it("encodes keys with spaces, '~', empty or long keys", function()
      assert.equal("~612062", key_name("a b"))
      assert.equal("~7e", key_name("~"))
      assert.equal("~", key_name(""))
      local long = key_name(string.rep("x", 64))
      assert.is_true(#long <= 34) -- md5 in nginx (34), FNV-1a 64 outside (18)
      assert.equal("~h", long:sub(1, 2))
      assert.are_not.equal(long, key_name(string.rep("x", 65)))
    end)
    it("never exceeds 63 bytes", function()
      for n = 0, 200, 7 do
        assert.is_true(#key_name(string.rep("\1", n)) <= 63)
      end
    end)
  end)

  describe("define", function()
    it("checks its arguments", function()
      local l, err = resty.define("bad name!", { qps = 1 })
      assert.is_nil(l)
      assert.matches("limit name", err)
      l, err = define("x", { qps = 1, on_full = "maybe" })
      assert.is_nil(l)
      assert.matches("on_full must be", err)
      l, err = define("x", { qps = 1, on_full = "overflow", capacity = 1 })
      assert.is_nil(l)
      assert.matches("overflow", err)
      l, err = define("x", { qps = -1 })
      assert.is_nil(l)
      assert.matches("SW_ERANGE", err)
    end)

    it("refuses reset = true outside init_by_lua", function()
      fake.ngx.phase = "init_worker"
      local l, err = define("x", { qps = 1, reset = true })
      assert.is_nil(l)
      assert.matches("init_by_lua", err)
    end)
  end)

  describe("limit and log", function()
    it("passes up to the limit, then 429 with Retry-After rounded up", function()
      assert(define("api", { qps = 3, exit = true }))
      clock.t = T + 100
      assert.same({ 200 }, { request(resty, "api") })
      assert.same({ 200 }, { request(resty, "api") })
      assert.same({ 200 }, { request(resty, "api") })
      local status, retry = request(resty, "api")
      assert.equal(429, status)
      assert.equal(1, retry) -- 0.4 s rounded up
      local s = resty.stats("api")
      assert.equal(3, s.pass)
      assert.equal(1, s.block)
      assert.equal(3, s.success_qps) -- log() recorded the exits
      assert.equal(0, s.concurrency)
    end)

    it("uses the configured status and Retry-After over several seconds", function()
      assert(define("slow", { qps = 1, interval = 10, windows = 1, status = 503 }))
      clock.t = T + 2500
      for _ = 1, 10 do assert.equal(200, (request(resty, "slow"))) end
      local status, retry = request(resty, "slow")
      assert.equal(503, status)
      assert.equal(8, retry) -- 7.5 s rounded up
    end)

    it("can leave out Retry-After", function()
      assert(define("quiet", { qps = 1, retry_after = false }))
      request(resty, "quiet")
      local status, retry = request(resty, "quiet")
      assert.equal(429, status)
      assert.is_nil(retry)
    end)

    it("omits Retry-After when a request can never pass", function()
      assert(define("zero", { qps = 0 }))
      local status, retry = request(resty, "zero")
      assert.equal(429, status)
      assert.is_nil(retry)
    end)

    it("limits per key, binary keys included (a keyed table: the key's own bytes)", function()
      assert(define("ip", { qps = 1, capacity = 4 }))
      assert.equal(200, (request(resty, "ip", "\10\0\0\1")))
      assert.equal(429, (request(resty, "ip", "\10\0\0\1")))
      assert.equal(200, (request(resty, "ip", "\10\0\0\2")))
      assert.same({ "\10\0\0\1", "\10\0\0\2" }, sorted(resty.get("ip"):keys()))
      assert.equal(1, resty.stats("ip", "\10\0\0\1").block)
      assert.is_true(resty.get("ip").keyed)
    end)

    it("takes the key from an nginx variable (key_var)", function()
      assert(define("kv", { qps = 1, capacity = 4, key_var = "binary_remote_addr" }))
      fake.ngx.var = { binary_remote_addr = "\127\0\0\1" }
      assert.equal(200, (request(resty, "kv")))
      assert.equal(429, (request(resty, "kv")))
      fake.ngx.var.binary_remote_addr = "\127\0\0\2"
      assert.equal(200, (request(resty, "kv")))
      assert.equal(429, (request(resty, "kv", "\127\0\0\1"))) -- an explicit key wins
      assert.same({ "\127\0\0\1", "\127\0\0\2" }, sorted(resty.get("kv"):keys()))
      local l, err = define("kv2", { qps = 1, key_var = 5 })
      assert.is_nil(l)
      assert.matches("key_var", err)
    end)

    it("leaves nothing pending once log() ran", function()
      assert(define("p", { qps = 100, exit = true }))
      for _ = 1, 5 do request(resty, "p") end
      assert.equal(0, resty.pending())
      local n = fake.ngx
      n.ctx, n.header, n.start = {}, {}, n.time
      resty.limit("p")
      resty.limit("p") -- a second entry in one request
      assert.equal(2, resty.pending())
      n.status = 200
      resty.log()
      assert.equal(0, resty.pending())
      assert.equal(0, resty.stats("p").concurrency)
    end)

    it("sleeps on WAIT (pacing) and records the exit", function()
      assert(define("pace", { qps = 10, behavior = "pacing", exit = true }))
      assert.equal(200, (request(resty, "pace")))
      assert.equal(200, (request(resty, "pace")))
      assert.equal(200, (request(resty, "pace")))
      assert.same({ 0.1, 0.2 }, fake.ngx.sleeps)
      assert.equal(0, resty.stats("pace").concurrency)
    end)

    it("counts a failure when the status is >= 500, with the RT", function()
      assert(define("rt", { qps = 100, exit = true }))
      fake.ngx.time = 100.0
      local n = fake.ngx
      n.ctx, n.header, n.start = {}, {}, 100.0
      assert.is_true(resty.limit("rt"))
      n.time, n.status = 100.25, 502
      resty.log()
      local s = resty.stats("rt")
      assert.equal(1, s.exception_qps)
      assert.equal(250, s.avg_rt) -- milliseconds
      assert.equal(0, s.concurrency)
    end)

    it("concurrency limits need the log phase to free places", function()
      assert(define("conc", { concurrency = 1 }))
      local n = fake.ngx
      n.ctx, n.header, n.start = {}, {}, n.time
      assert.is_true(resty.limit("conc"))
      local ctx1 = n.ctx
      n.ctx = {}
      assert.has_error(function() resty.limit("conc") end)
      assert.equal(429, n.exited)
      n.ctx = ctx1
      resty.log()
      assert.equal(200, (request(resty, "conc")))
    end)

    it("exit = false records nothing in the log phase", function()
      assert(define("noexit", { qps = 5, exit = false }))
      request(resty, "noexit")
      assert.equal(0, resty.stats("noexit").success_qps)
    end)

    it("records exits by default for a concurrency limit only", function()
      assert.is_false(assert(define("dq", { qps = 5 })).exit)
      assert.is_false(assert(define("dk", { qps = 5, capacity = 10 })).exit)
      assert.is_false(assert(define("dp", { qps = 5, behavior = "pacing" })).exit)
      assert.is_true(assert(define("dc", { concurrency = 5 })).exit)
      assert.is_true(assert(define("dck", { concurrency = 5, capacity = 10 })).exit)
      assert.is_false(assert(define("dcn", { concurrency = 5, exit = false })).exit)
      assert.is_true(assert(define("dqy", { qps = 5, exit = true })).exit)
    end)

    it("a QPS limit without a log phase keeps nothing per request", function()
      assert(define("nolog", { qps = 100 }))
      assert(define("nologk", { qps = 100, capacity = 10 }))
      local n = fake.ngx
      for i = 1, 50 do -- no log(): as in a location without log_by_lua
        n.ctx, n.header, n.start = {}, {}, n.time
        assert.is_true(resty.limit("nolog"))
        assert.is_true(resty.limit("nologk", "k" .. i % 3))
      end
      assert.equal(0, resty.pending())
      assert.equal(0, resty.stats("nolog").success_qps)
      assert.equal(50, resty.stats("nolog").pass)
    end)

    it("log() exits the entries of a request on several limits, keyed or not", function()
      assert(define("m1", { qps = 100, exit = true }))
      assert(define("m2", { concurrency = 5, capacity = 10 }))
      assert(define("m3", { qps = 100, exit = true, capacity = 2, behavior = "warm_up" }))
      local n = fake.ngx
      for round = 1, 3 do
        n.ctx, n.header, n.start = {}, {}, n.time
        assert.is_true(resty.limit("m2", "a"))   -- first: a keyed table's key
        assert.is_true(resty.limit("m1"))        -- then the keyless handle
        assert.is_true(resty.limit("m3", "x"))   -- and a registry's handle
        assert.is_true(resty.limit("m2", "b"))
        assert.equal(4, resty.pending())
        n.time, n.status = n.time + 0.01, 200
        resty.log()
        assert.equal(0, resty.pending())
        assert.equal(0, resty.stats("m2", "a").in_flight)
        assert.equal(0, resty.stats("m2", "b").in_flight)
        assert.equal(0, resty.stats("m1").concurrency)
        assert.equal(0, resty.stats("m3", "x").concurrency)
        assert.equal(2 * round, resty.stats("m2").total_success) -- a and b
      end
      assert.equal(3, resty.stats("m1").total_success)
      assert.equal(3, resty.stats("m3", "x").total_success)
    end)

    it("an unknown limit is logged and lets the request through", function()
      local ok, err, code = resty.limit("nope")
      assert.is_nil(ok)
      assert.matches("no limit named nope", err)
      assert.equal(libsw.ENOTFOUND, code)
      assert.matches("no limit named nope", fake.ngx.logs[1])
    end)
  end)

  describe("several limits: limit({ ... }), all or nothing", function()
    -- one request through limit(names, keys) and the log phase
    local function request_all(names, keys)
      local n = fake.ngx
      n.ctx, n.header, n.exited, n.status, n.start = {}, {}, nil, 200, n.time
      local ok, err = pcall(resty.limit, names, keys)
      if not ok and err ~= EXIT then error(err) end
      n.status = n.exited or 200
      resty.log()
      return n.exited or 200, n.header["Retry-After"]
    end

    -- whether this libsw gives back an admitted entry (the stubs: ENOTSUP)
    local function cancel_supported()
      local lim = assert(libsw.limiter { qps = 10 })
      local h = assert(lim:handle())
      local d = require("ffi").new("sw_decision")
      assert(libsw.C.sw_limiter_entry(h, 1, 2, d) == 0)
      return libsw.C.sw_limiter_cancel(h, d) ~= libsw.ENOTSUP
    end

    it("a keyless limit is named as the limit (swctl, rules, Prometheus)", function()
      local site = assert(define("site", { qps = 5 }))
      assert.is_true(resty.limit("site"))
      assert.same({ "site" }, site.lim:keys())
      local keyed = assert(define("warm", { qps = 5, capacity = 4, behavior = "warm_up" }))
      assert.is_true(resty.limit("warm"))
      assert.same({ "~=warm" }, keyed.lim:keys()) -- a registry of keys: no key's name
    end)

    it("passes when every limit admits, counting in each", function()
      assert(define("site", { qps = 10 }))
      assert(define("per_ip", { qps = 2, capacity = 100 }))
      assert.equal(200, (request_all({ "site", "per_ip" }, { nil, "a" })))
      assert.equal(1, resty.stats("per_ip", "a").pass)
      assert.equal(1, resty.stats("site").pass_qps)
    end)

    it("refuses with the refusing limit's status and Retry-After", function()
      assert(define("site", { qps = 10 }))
      assert(define("per_ip", { qps = 1, capacity = 100, status = 503 }))
      assert.equal(200, (request_all({ "site", "per_ip" }, { nil, "a" })))
      local status, retry = request_all({ "site", "per_ip" }, { nil, "a" })
      assert.equal(503, status)
      assert.equal(1, retry)
      local ok, err, code = resty.limit({ "site", "nope" })
      assert.is_nil(ok)
      assert.equal(libsw.ENOTFOUND, code)
      assert.matches("no limit named nope", err)
    end)

    it("docs' flooding case: one client's refused requests do not use up the site", function()
      assert(define("site", { qps = 20 }))
      assert(define("per_ip", { qps = 2, capacity = 100 }))
      local passed = 0
      for _ = 1, 50 do
        if request_all({ "site", "per_ip" }, { nil, "flooder" }) == 200 then passed = passed + 1 end
      end
      assert.equal(2, passed)
      if not cancel_supported() then
        pending("sw_limiter_cancel / sw_keyed_cancel return SW_ENOTSUP in this libsw")
        return
      end
      for i = 1, 18 do -- the site's 20 per second: 18 left for everyone else
        assert.equal(200, (request_all({ "site", "per_ip" }, { nil, "c" .. i })))
      end
      assert.equal(429, (request_all({ "site", "per_ip" }, { nil, "c19" })))
    end)
  end)

  describe("capacity policy", function()
    it("fails open by default, with a warning", function()
      assert(define("open", { qps = 1, capacity = 1 }))
      assert.equal(200, (request(resty, "open", "a")))
      assert.equal(429, (request(resty, "open", "a")))
      assert.equal(200, (request(resty, "open", "b")))
      assert.equal(200, (request(resty, "open", "b")))
      assert.matches("SW_EFULL", fake.ngx.logs[1])
      assert.equal(1, #fake.ngx.logs) -- suppressed for 10 s
    end)

    it("fails closed with full_status", function()
      assert(define("closed", { qps = 1, capacity = 1, on_full = "closed", full_status = 503 }))
      assert.equal(200, (request(resty, "closed", "a")))
      assert.equal(503, (request(resty, "closed", "b")))
    end)

    it("overflow sends new keys to one shared limiter (a registry: warm-up per key)", function()
      -- qps = 6 with warm-up starts cold at 2 per second
      assert(define("over", { qps = 6, behavior = "warm_up", capacity = 2, on_full = "overflow" }))
      assert.is_false(resty.get("over").keyed)
      assert.same({ "~overflow" }, resty.get("over"):keys())
      assert.equal(200, (request(resty, "over", "a")))
      assert.equal(200, (request(resty, "over", "b"))) -- full: overflow
      assert.equal(200, (request(resty, "over", "c"))) -- overflow
      assert.equal(429, (request(resty, "over", "d"))) -- overflow exhausted
      assert.equal(200, (request(resty, "over", "a")))
    end)
  end)

  describe("keyed tables", function()
    -- capacity 12: one bucket of 16 places (libsw.keyed), 16 keys fill it
    local PLACES = 16
    local function fill(name, prefix)
      for i = 1, PLACES do assert.equal(200, (request(resty, name, prefix .. i))) end
    end

    it("warm-up, cluster and keyless limits keep the registry", function()
      assert.is_true(assert(define("a", { qps = 1, capacity = 2 })).keyed)
      assert.is_true(assert(define("b", { qps = 1, key_var = "binary_remote_addr" })).keyed)
      assert.is_false(assert(define("c", { qps = 1 })).keyed)
      assert.is_false(assert(define("d", { qps = 9, capacity = 9, behavior = "warm_up" })).keyed)
      assert.is_false(assert(define("e", { qps = 9, capacity = 9, behavior = 3 })).keyed)
    end)

    it("on_full = evict (the default): every new key gets its own limit", function()
      assert(define("ev", { qps = 1, capacity = 12 }))
      fill("ev", "k")
      assert.equal(200, (request(resty, "ev", "new")))
      assert.equal(429, (request(resty, "ev", "new")))
      local s = resty.stats("ev")
      assert.same({ PLACES, 1, 0 }, { s.keys, s.evicted, s.refused })
      assert.same({}, fake.ngx.logs) -- an eviction is no warning
    end)

    it("on_full = open: a new key passes unlimited (limit() returns false), warned once", function()
      assert(define("op", { qps = 1, capacity = 12, on_full = "open" }))
      fill("op", "k")
      for _ = 1, 3 do
        assert.equal(200, (request(resty, "op", "new")))
      end
      assert.is_false(resty.limit("op", "new"))
      assert.equal(1, #fake.ngx.logs) -- suppressed for 10 s
      assert.matches("limit op: keyed table full: a new key found its places taken by active "
        .. "keys (on_full = open; further messages suppressed for 10 s)", fake.ngx.logs[1], 1, true)
      fake.ngx.time = fake.ngx.time + 10
      request(resty, "op", "new")
      assert.equal(2, #fake.ngx.logs)
      assert.equal(5, resty.stats("op").refused)
    end)

    it("on_full = closed: a new key gets full_status, Retry-After to the window's end", function()
      assert(define("cl", { qps = 1, capacity = 12, on_full = "closed", full_status = 503 }))
      clock.t = T + 100
      fill("cl", "k")
      assert.same({ 503, 1 }, { request(resty, "cl", "new") })
      assert.equal(429, (request(resty, "cl", "k1"))) -- existing keys as before
      assert.matches("on_full = closed", fake.ngx.logs[1], 1, true)
      clock.t = T + 1600 -- every key idle: the new one takes a reclaimed place
      assert.equal(200, (request(resty, "cl", "new")))
      assert.equal(1, resty.stats("cl").reclaimed)
    end)

    it("on_full = overflow is evict for a keyed table (logged)", function()
      local lim = assert(define("ov", { qps = 1, capacity = 12, on_full = "overflow" }))
      assert.equal("evict", lim.on_full)
      assert.matches("on_full = \"overflow\" is \"evict\"", fake.ngx.logs[1], 1, true)
    end)

    it("requests without a key share one; no Lua state per key", function()
      assert(define("nk", { qps = 2, capacity = 100, key_var = "http_x_client", exit = true }))
      fake.ngx.var = {}
      assert.equal(200, (request(resty, "nk")))
      fake.ngx.var.http_x_client = ""
      assert.equal(200, (request(resty, "nk")))
      assert.equal(429, (request(resty, "nk", "")))
      assert.same({ "\0" }, resty.get("nk"):keys())
      assert.is_nil(resty.get("nk").handles)
      -- 20000 distinct keys leave nothing behind in Lua: anything kept per
      -- key (a string and a table slot, 60 bytes at least) would grow the
      -- heap by 1.2 MB; the JIT's traces of the loops take a few dozen KiB
      for i = 1, 5000 do request(resty, "nk", "warm-" .. i) end
      collectgarbage()
      local before = collectgarbage("count")
      for i = 1, 20000 do request(resty, "nk", "client-" .. i) end
      collectgarbage()
      assert.is_true(collectgarbage("count") - before < 256, "Lua heap grew by "
        .. (collectgarbage("count") - before) .. " KiB")
      assert.equal(0, resty.pending())
      local s = resty.stats("nk")
      assert.same({ 25003, 25002, 1 }, { s.total_pass + s.total_block, s.total_success, s.total_block })
    end)

    it("dry run: nothing blocked, limit() returns true, true", function()
      assert(define("dr", { qps = 1, capacity = 10, dry_run = true }))
      assert.is_true(resty.limit("dr", "k"))
      local ok, would = resty.limit("dr", "k")
      assert.same({ true, true }, { ok, would })
      assert.is_true(resty.get("dr"):set_dry_run(false))
      assert.equal(429, (request(resty, "dr", "k")))
      assert.equal(1, resty.stats("dr").total_would_block)
    end)

    it("pacing per key sleeps; log() exits the concurrency grade per key", function()
      assert(define("pk", { qps = 10, behavior = "pacing", capacity = 10 }))
      assert.equal(200, (request(resty, "pk", "a")))
      assert.equal(200, (request(resty, "pk", "a")))
      assert.equal(200, (request(resty, "pk", "b")))
      assert.same({ 0.1 }, fake.ngx.sleeps)
      assert(define("ck", { concurrency = 1, capacity = 10 }))
      local n = fake.ngx
      n.ctx, n.header, n.start = {}, {}, n.time
      assert.is_true(resty.limit("ck", "a"))
      local first = n.ctx
      n.ctx = {}
      assert.has_error(function() resty.limit("ck", "a") end)
      assert.equal(429, n.exited)
      assert.equal(200, (request(resty, "ck", "b"))) -- another key
      n.ctx = first
      resty.log()
      assert.equal(200, (request(resty, "ck", "a")))
      assert.equal(0, resty.stats("ck", "a").in_flight)
      assert.same({}, n.logs)
    end)

    it("top and stats of a key; a bad key is logged and passes", function()
      assert(define("tp", { qps = 2, capacity = 10 }))
      for _ = 1, 3 do request(resty, "tp", "\1\2\3\4") end
      request(resty, "tp", 7) -- a number: its tostring
      local top, active = resty.get("tp"):top(1, "block")
      assert.same({ 1, "\1\2\3\4", 1, 2 }, { #top, top[1].key, top[1].block, active })
      assert.equal(1, resty.stats("tp", "7").pass)
      local ok, err, code = resty.limit("tp", {})
      assert.same({ nil, libsw.EINVAL }, { ok, code })
      assert.matches("key must be a string or a number, not a table", fake.ngx.logs[1], 1, true)
      assert.matches("key must be a string or a number", err, 1, true)
      local reg = assert(define("rg", { qps = 1 }))
      ok, err, code = reg:top()
      assert.same({ nil, libsw.ENOTSUP }, { ok, code })
    end)
  end)

  describe("segments", function()
    -- define(name, opts) as a reload runs it (the module loaded anew, as in
    -- the new Lua VM), on a segment of its own; and the segment's name
    local function reloader(name)
      local seg = ("libsw_rspec_%s_%d_%d"):format(name, libsw.getpid(), math.random(1, 1e9))
      return function(opts)
        package.loaded["resty.libsw"] = nil
        resty = require "resty.libsw"
        opts.segment = seg
        return define(name, opts)
      end, seg
    end

    it("keeps state when defined again (reload) and resets with reset = true", function()
      local seg = ("libsw_rspec_reload_%d_%d"):format(libsw.getpid(), math.random(1, 1e9))
      assert(define("r", { qps = 1, segment = seg }))
      assert.equal(200, (request(resty, "r")))
      -- a reload: a new Lua VM runs define again
      package.loaded["resty.libsw"] = nil
      resty = require "resty.libsw"
      assert(define("r", { qps = 1, segment = seg }))
      assert.equal(429, (request(resty, "r")))
      package.loaded["resty.libsw"] = nil
      resty = require "resty.libsw"
      assert(define("r", { qps = 1, segment = seg, reset = true }))
      assert.equal(200, (request(resty, "r")))
    end)

    it("reset = \"mismatch\" starts anew only when the geometry changed", function()
      local seg = ("libsw_rspec_mm_%d_%d"):format(libsw.getpid(), math.random(1, 1e9))
      assert(define("m", { qps = 1, segment = seg, capacity = 2 }))
      assert.equal(200, (request(resty, "m", "k")))
      package.loaded["resty.libsw"] = nil
      resty = require "resty.libsw"
      local l, err = define("m", { qps = 1, segment = seg, capacity = 3 })
      assert.is_nil(l)
      assert.matches("SW_EGEOMETRY", err)
      assert(define("m", { qps = 1, segment = seg, capacity = 2, reset = "mismatch" }))
      assert.equal(429, (request(resty, "m", "k"))) -- same geometry: kept
      assert(define("m", { qps = 1, segment = seg, capacity = 3, reset = "mismatch" }))
      assert.equal(200, (request(resty, "m", "k"))) -- new geometry: anew
      assert.matches("starting it anew", fake.ngx.logs[#fake.ngx.logs])
    end)

    it("a QPS limit without exits counts nothing in flight: a concurrency limit can take it over", function()
      local reload = reloader("g")
      assert(reload { qps = 100 })
      for _ = 1, 3 do assert.equal(200, (request(resty, "g"))) end -- no exits (SW_ENTRY_NO_EXIT)
      assert.equal(0, resty.stats("g").concurrency)
      assert(reload { concurrency = 2 })
      assert.equal(200, (request(resty, "g"))) -- entered and exited
      assert.equal(0, resty.stats("g").concurrency)
      assert.equal(1, resty.stats("g").total_success)
      assert(reload { qps = 5 })
    end)

    it("a keyed table across reloads: kept, reset, mismatch (geometry, or a registry before)", function()
      local reload = reloader("kr")
      assert(reload { qps = 1, capacity = 100 })
      assert.equal(200, (request(resty, "kr", "a")))
      assert(reload { qps = 1, capacity = 100 })
      assert.equal(429, (request(resty, "kr", "a"))) -- kept
      assert(reload { qps = 2, capacity = 100 }) -- a new rule: counts kept, the rule applied
      assert.equal(200, (request(resty, "kr", "a")))
      assert.equal(429, (request(resty, "kr", "a")))
      local l, err, code = reload { qps = 2, capacity = 200 }
      assert.same({ nil, libsw.EGEOMETRY }, { l, code })
      assert.matches("libsw: limit kr: SW_EGEOMETRY", err, 1, true)
      assert(reload { qps = 2, capacity = 200, reset = "mismatch" })
      assert.equal(200, (request(resty, "kr", "a"))) -- anew
      assert(reload { qps = 2, capacity = 200, reset = true })
      assert.equal(0, resty.stats("kr").keys)
      -- the limit was a registry before (libsw without keyed tables, or warm-up)
      local reg = ("libsw_rspec_kreg_%d_%d"):format(libsw.getpid(), math.random(1, 1e9))
      segs[#segs + 1] = reg
      assert(define("kreg", { qps = 9, behavior = "warm_up", capacity = 4, segment = reg }))
      package.loaded["resty.libsw"] = nil
      resty = require "resty.libsw"
      l, err, code = define("kreg", { qps = 9, capacity = 4, segment = reg })
      assert.same({ nil, libsw.ETYPE }, { l, code })
      assert.matches("holds a registry of limiters, not a keyed table", err, 1, true)
      assert(define("kreg", { qps = 9, capacity = 4, segment = reg, reset = "mismatch" }))
      assert.is_true(resty.get("kreg").keyed)
    end)

    it("reopen = true opens a keyed table again in init_worker", function()
      assert(define("kw", { qps = 1, capacity = 10, reopen = true }))
      local before = resty.get("kw").k
      assert.is_true(resty.init_worker())
      assert.are_not.equal(before, resty.get("kw").k)
      assert.equal(200, (request(resty, "kw", "a")))
      assert.equal(429, (request(resty, "kw", "a")))
    end)

    it("reopen = true opens the segment again in init_worker", function()
      assert(define("w", { qps = 1, reopen = true }))
      local before = resty.get("w").lim
      assert.is_true(resty.init_worker())
      assert.are_not.equal(before, resty.get("w").lim)
      assert.equal(200, (request(resty, "w")))
      assert.equal(429, (request(resty, "w")))
    end)
  end)
end)
