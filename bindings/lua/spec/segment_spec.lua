-- SPDX-License-Identifier: Apache-2.0
-- Shared segments between two LuaJIT processes.
local here = debug.getinfo(1, "S").source:match("^@(.*)/spec/[^/]+$") or "bindings/lua"
package.path = here .. "/?.lua;" .. package.path

local libsw = assert(require("libsw").load())

local T = 5000000 -- every process uses this injected time: the same window

local function unique(tag)
  return ("libsw_spec_%s_%d_%d"):format(tag, libsw.getpid(), math.random(1, 1e9))
end

-- Run a second LuaJIT process with code (a chunk receiving the segment name
-- as ...); returns its output lines.
local function other_process(code, seg)
  local file = os.tmpname()
  local f = assert(io.open(file, "w"))
  f:write(("package.path = %q .. package.path\n"):format(here .. "/?.lua;"))
  f:write("local libsw = assert(require('libsw').load())\n")
  f:write(("local T = %d\n"):format(T))
  f:write(code)
  f:close()
  local p = assert(io.popen(("luajit %q %q 2>&1"):format(file, seg)))
  local lines = {}
  for line in p:lines() do lines[#lines + 1] = line end
  p:close()
  os.remove(file)
  return lines
end

describe("shared segment", function()
  local names = {}
  local function segment_name(tag)
    local n = unique(tag)
    names[#names + 1] = n
    return n
  end
  teardown(function()
    for _, n in ipairs(names) do libsw.unlink_segment(n) end
  end)

  it("segment_rule reads a registry segment's rule without changing it", function()
    local seg = segment_name("rule")
    local _, err, code = libsw.segment_rule(seg)
    assert.equal(libsw.ENOTFOUND, code, err)
    local lim = assert(libsw.limiter { qps = 7, behavior = "warm_up", capacity = 4, segment = seg })
    _, err, code = libsw.segment_rule(seg)
    assert.equal(libsw.ENOTFOUND, code)
    assert.matches("holds no limiter yet", err, 1, true)
    assert.equal("pass", (lim:entry("a")))
    local r = assert(libsw.segment_rule(seg))
    assert.same({ 7, "warm_up", nil }, { r.qps, r.behavior, r.concurrency })
    assert(lim:set_rule { concurrency = 3 })
    assert.same({ 3, nil }, { libsw.segment_rule(seg).concurrency, libsw.segment_rule(seg).qps })
    lim:close()
    local kseg = segment_name("rulek")
    assert(libsw.keyed { qps = 1, capacity = 10, segment = kseg }):close()
    _, _, code = libsw.segment_rule(kseg)
    assert.equal(libsw.ETYPE, code)
    _, err, code = libsw.segment_rule(5)
    assert.equal(libsw.EINVAL, code)
    assert.matches("segment name must be a string", err, 1, true)
  end)

  it("a segment over 2048 MiB needs segment_max_mb, and leaves nothing when refused", function()
    local seg = segment_name("big")
    local lim, err, code = libsw.limiter { qps = 10, capacity = 60000, segment = seg }
    assert.is_nil(lim)
    assert.equal(libsw.ESIZE, code)
    assert.truthy(err:find("larger than segment_max_mb=2048", 1, true), err)
    assert.is_nil(io.open("/dev/shm/" .. seg))
    lim = assert(libsw.limiter { qps = 10, capacity = 60000, segment = seg, segment_max_mb = 4096 })
    assert.equal("pass", (lim:entry("a")))
    lim, err = libsw.limiter { qps = 10, segment = seg, segment_max_mb = -1 }
    assert.is_nil(lim)
    assert.truthy(err:find("segment_max_mb", 1, true), err)
  end)

  it("two processes share one limiter exactly", function()
    local seg = segment_name("share")
    local lim = assert(libsw.limiter { qps = 5, segment = seg, capacity = 4,
                                       clock = function() return T end })
    assert.equal("pass", (lim:entry("api")))
    assert.equal("pass", (lim:entry("api")))
    assert.equal("pass", (lim:entry("api")))
    local out = other_process([[
      local seg = ...
      local lim = assert(libsw.limiter { qps = 5, segment = seg, capacity = 4,
                                         clock = function() return T end })
      local v = {}
      for i = 1, 4 do v[i] = (lim:entry("api")) end
      print(table.concat(v, " "))
      print(lim:stats("api").pass, lim:stats("api").block)
    ]], seg)
    assert.same({ "pass pass block block", "5\t2" }, out)
    -- this process sees the other's entries
    assert.equal("block", (lim:entry("api")))
    local s = lim:stats("api")
    assert.equal(5, s.pass)
    assert.equal(3, s.block)
  end)

  it("keys created by one process are seen by the other", function()
    local seg = segment_name("keys")
    local lim = assert(libsw.limiter { qps = 1, segment = seg, capacity = 3,
                                       clock = function() return T end })
    assert.equal("pass", (lim:entry("a")))
    local out = other_process([[
      local seg = ...
      local lim = assert(libsw.limiter { qps = 1, segment = seg, capacity = 3,
                                         clock = function() return T end })
      print((lim:entry("a")), (lim:entry("b")), (lim:entry("c")))
      local v, err, code = lim:entry("d")
      print(v, code)
    ]], seg)
    assert.same({ "block\tpass\tpass", "nil\t-10" }, out)
    assert.same({ "a", "b", "c" }, lim:keys())
    local v, _, code = lim:entry("e")
    assert.is_nil(v)
    assert.equal(libsw.EFULL, code)
  end)

  it("state survives close and reopen; reset starts anew", function()
    local seg = segment_name("reopen")
    local opts = { qps = 2, segment = seg, capacity = 2, clock = function() return T end }
    local lim = assert(libsw.limiter(opts))
    assert.equal("pass", (lim:entry("k")))
    assert.equal("pass", (lim:entry("k")))
    lim:close()
    lim = assert(libsw.limiter(opts))
    assert.equal("block", (lim:entry("k")))
    lim:close()
    opts.reset = true
    lim = assert(libsw.limiter(opts))
    assert.equal("pass", (lim:entry("k")))
    lim:close()
  end)

  it("a process with a newer rule applies it to the names it uses", function()
    local seg = segment_name("rule")
    local old = assert(libsw.limiter { qps = 1, segment = seg, capacity = 2,
                                       clock = function() return T end })
    assert.equal("pass block", (old:entry("k")) .. " " .. (old:entry("k")))
    -- like an nginx reload with a higher limit: same geometry, new rule
    local new = assert(libsw.limiter { qps = 3, segment = seg, capacity = 2,
                                       clock = function() return T end })
    assert.equal("pass", (new:entry("k")))
    assert.equal(3, new:rule("k").qps)
    assert.equal(3, old:rule("k").qps) -- one limiter in shared memory
  end)

  it("a rule or dry-run switch made by one process holds for every name in all", function()
    local seg = segment_name("switch")
    local a = assert(libsw.limiter { qps = 1, segment = seg, capacity = 4,
                                     clock = function() return T end })
    local b = assert(libsw.limiter { qps = 1, segment = seg, capacity = 4,
                                     clock = function() return T end })
    a:entry("x")
    assert.is_true(a:set_dry_run(true))
    -- b meets "x" and a new name "y" after the switch: it keeps the switch
    local v, _, _, _, _, would = b:entry("x")
    assert.equal("pass", v)
    assert.is_true(would)
    b:entry("y")
    assert.is_true(b:rule("y").dry_run)
    assert.is_true(a:set_rule { qps = 3 }) -- a new rule (dry-run off again)
    assert.equal(3, b:rule("y").qps)
    b:entry("z")
    assert.equal(3, b:rule("z").qps)
    assert.is_false(b:rule("z").dry_run)
  end)

  it("refuses another geometry with SW_EGEOMETRY, and a missing segment without create", function()
    local seg = segment_name("geom")
    assert(libsw.limiter { qps = 1, segment = seg, capacity = 2 })
    local lim, err, code = libsw.limiter { qps = 1, segment = seg, capacity = 3 }
    assert.is_nil(lim)
    assert.equal(libsw.EGEOMETRY, code)
    assert.matches("holds 2 names, 3 were asked for", err, 1, true)
    lim, err, code = libsw.limiter { qps = 1, segment = seg, capacity = 2, interval = 2 }
    assert.is_nil(lim)
    assert.equal(libsw.EGEOMETRY, code)
    lim, err, code = libsw.limiter { qps = 1, segment = unique("missing"), create = false }
    assert.is_nil(lim)
    assert.equal(libsw.ENOTFOUND, code)
  end)

  it("holds 64 names without a capacity, and attaches to one made with another", function()
    local seg = segment_name("default")
    local lim = assert(libsw.limiter { qps = 1, segment = seg })
    assert.equal(64, lim.capacity)
    local old = segment_name("older")
    assert(libsw.limiter { qps = 1, segment = old, capacity = 1024 })
    lim = assert(libsw.limiter { qps = 1, segment = old })
    assert.equal(1024, lim.capacity)
  end)

  it("gives a new segment the mode asked for", function()
    local seg = segment_name("mode")
    assert(libsw.limiter { qps = 1, segment = seg, capacity = 1, mode = tonumber("640", 8) })
    local p = io.popen("stat -c %a /dev/shm/" .. seg)
    local mode = p:read("*l")
    p:close()
    assert.equal("640", mode)
  end)

  describe("keyed table", function()
    local function keyed(seg, extra)
      local o = { qps = 3, capacity = 1000, segment = seg, clock = function() return T end }
      for k, v in pairs(extra or {}) do o[k] = v end
      return libsw.keyed(o)
    end

    it("two processes share each key exactly; a key of one is seen by the other", function()
      local seg = segment_name("kshare")
      local kt = assert(keyed(seg))
      assert.is_true(kt:created())
      assert.equal("pass", (kt:entry("\10\0\0\1")))
      assert.equal("pass", (kt:entry("\10\0\0\1")))
      local out = other_process([[
        local seg = ...
        local kt = assert(libsw.keyed { qps = 3, capacity = 1000, segment = seg,
                                        clock = function() return T end })
        local v = {}
        for i = 1, 3 do v[i] = (kt:entry("\10\0\0\1")) end
        for i = 1, 500 do kt:entry("k" .. i) end
        print(table.concat(v, " "), kt:created())
      ]], seg)
      assert.same({ "pass block block\tfalse" }, out)
      assert.equal("block", (kt:entry("\10\0\0\1")))
      local s = kt:stats()
      assert.same({ 501, 503, 3 }, { s.keys, s.total_pass, s.total_block })
      assert.equal(1, kt:lookup("k500").pass)
    end)

    it("state survives close and reopen; the newer rule holds; reset starts anew", function()
      local seg = segment_name("kreopen")
      local kt = assert(keyed(seg))
      assert.equal("pass pass pass block", ("%s %s %s %s"):format(kt:entry("k"), kt:entry("k"),
        kt:entry("k"), kt:entry("k")))
      kt:close()
      kt = assert(keyed(seg, { qps = 4 })) -- a reload with a higher limit
      assert.is_false(kt:created())
      assert.equal("pass block", (kt:entry("k")) .. " " .. (kt:entry("k")))
      assert.equal(4, kt:rule().qps)
      kt:close()
      kt = assert(keyed(seg, { reset = true }))
      assert.is_true(kt:created())
      assert.equal("pass", (kt:entry("k")))
      assert.equal(1, kt:stats().keys)
    end)

    it("refuses another geometry (SW_EGEOMETRY) and a registry segment (SW_ETYPE)", function()
      local seg = segment_name("kgeom")
      assert(keyed(seg))
      for _, o in ipairs { { qps = 3, capacity = 2000 }, { qps = 3, capacity = 1000, interval = 2 },
                           { qps = 3, capacity = 1000, key_bytes = 32 },
                           { concurrency = 3, capacity = 1000 } } do
        o.segment = seg
        local kt, _, code = libsw.keyed(o)
        assert.is_nil(kt)
        assert.equal(libsw.EGEOMETRY, code)
      end
      local reg = segment_name("kreg")
      assert(libsw.limiter { qps = 1, segment = reg, capacity = 2 })
      local kt, err, code = keyed(reg)
      assert.is_nil(kt)
      assert.equal(libsw.ETYPE, code)
      assert.matches("holds a registry of limiters, not a keyed table", err, 1, true)
      local lim
      lim, err, code = libsw.limiter { qps = 1, segment = seg, capacity = 1000 }
      assert.is_nil(lim)
      assert.equal(libsw.ETYPE, code)
    end)
  end)

  it("a segment can be a file path", function()
    local path = os.tmpname()
    os.remove(path)
    local lim = assert(libsw.limiter { qps = 1, segment = path, capacity = 1 })
    assert.equal("pass", (lim:entry("x")))
    assert.is_true(lim:segment_size() > 0)
    lim:close()
    assert.is_true(libsw.unlink_segment(path))
  end)
end)
