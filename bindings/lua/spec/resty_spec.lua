-- resty.libsw in plain LuaJIT, with a stand-in for the ngx API (the real
-- nginx run is bindings/lua/t/nginx.lua).
local here = debug.getinfo(1, "S").source:match("^@(.*)/spec/[^/]+$") or "bindings/lua"
package.path = here .. "/?.lua;" .. package.path

local libsw = assert(require("libsw").load())

local T = 7000000

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
      assert(define("api", { qps = 3 }))
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

    it("limits per key, binary keys included", function()
      assert(define("ip", { qps = 1, capacity = 4 }))
      assert.equal(200, (request(resty, "ip", "\10\0\0\1")))
      assert.equal(429, (request(resty, "ip", "\10\0\0\1")))
      assert.equal(200, (request(resty, "ip", "\10\0\0\2")))
      assert.same({ "~0a000001", "~0a000002" }, resty.get("ip"):keys())
      assert.equal(1, resty.stats("ip", "\10\0\0\1").block)
    end)

    it("takes the key from an nginx variable (key_var)", function()
      assert(define("kv", { qps = 1, capacity = 4, key_var = "binary_remote_addr" }))
      fake.ngx.var = { binary_remote_addr = "\127\0\0\1" }
      assert.equal(200, (request(resty, "kv")))
      assert.equal(429, (request(resty, "kv")))
      fake.ngx.var.binary_remote_addr = "\127\0\0\2"
      assert.equal(200, (request(resty, "kv")))
      assert.equal(429, (request(resty, "kv", "\127\0\0\1"))) -- an explicit key wins
      assert.same({ "~7f000001", "~7f000002" }, resty.get("kv"):keys())
      local l, err = define("kv2", { qps = 1, key_var = 5 })
      assert.is_nil(l)
      assert.matches("key_var", err)
    end)

    it("leaves nothing pending once log() ran", function()
      assert(define("p", { qps = 100 }))
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
      assert(define("pace", { qps = 10, behavior = "pacing" }))
      assert.equal(200, (request(resty, "pace")))
      assert.equal(200, (request(resty, "pace")))
      assert.equal(200, (request(resty, "pace")))
      assert.same({ 0.1, 0.2 }, fake.ngx.sleeps)
      assert.equal(0, resty.stats("pace").concurrency)
    end)

    it("counts a failure when the status is >= 500, with the RT", function()
      assert(define("rt", { qps = 100 }))
      fake.ngx.time = 100.0
      local n = fake.ngx
      n.ctx, n.header, n.start = {}, {}, 100.0
      assert.is_true(resty.limit("rt"))
      n.time, n.status = 100.25, 502
      resty.log()
      local s = resty.stats("rt")
      assert.equal(1, s.exception_qps)
      assert.equal(0.25, s.avg_rt)
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

    it("an unknown limit is logged and lets the request through", function()
      local ok, err, code = resty.limit("nope")
      assert.is_nil(ok)
      assert.matches("no limit named nope", err)
      assert.equal(libsw.ENOTFOUND, code)
      assert.matches("no limit named nope", fake.ngx.logs[1])
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

    it("overflow sends new keys to one shared limiter", function()
      assert(define("over", { qps = 2, capacity = 2, on_full = "overflow" }))
      assert.same({ "~overflow" }, resty.get("over"):keys())
      assert.equal(200, (request(resty, "over", "a")))
      assert.equal(200, (request(resty, "over", "b"))) -- full: overflow
      assert.equal(200, (request(resty, "over", "c"))) -- overflow
      assert.equal(429, (request(resty, "over", "d"))) -- overflow exhausted
      assert.equal(200, (request(resty, "over", "a")))
    end)
  end)

  describe("segments", function()
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
