-- SPDX-License-Identifier: Apache-2.0
-- libsw.keyed: one rule, any number of keys, on an injected clock (plain
-- LuaJIT). Bad arguments: errors_spec.lua; two processes: segment_spec.lua;
-- the JIT: libsw_spec.lua.
local here = debug.getinfo(1, "S").source:match("^@(.*)/spec/[^/]+$") or "bindings/lua"
package.path = here .. "/?.lua;" .. package.path

local support = require "spec.support"
local libsw, T = support.libsw, support.T

-- A keyed table whose clock is clock.t (returned too; tests move it).
local function keyed_at(opts)
  local clock = { t = T }
  opts.clock = function() return clock.t end
  local kt, err = libsw.keyed(opts)
  assert(kt, err)
  return kt, clock
end

-- verdicts of n entries of key
local function verdicts(kt, n, key)
  local out = {}
  for i = 1, n do out[i] = (kt:entry(key)) end
  return table.concat(out, " ")
end

-- A table of capacity 12 has one bucket of 16 places (capacity / 0.8,
-- rounded up to buckets of 16); both of a key's buckets are then that one,
-- so the 17th key active at once finds no place.
local PLACES = 16
local function fill(kt, prefix)
  for i = 1, PLACES do assert.equal("pass", (kt:entry(prefix .. i))) end
end

describe("keyed table", function()
  describe("exact per-key limits", function()
    it("each key passes 10, is blocked with retry_after 0.8 s, passes again at 1000", function()
      local kt, clock = keyed_at { qps = 10, capacity = 1000 }
      for _, key in ipairs { "\127\0\0\1", "\127\0\0\2", "alice" } do
        for i = 1, 10 do
          local v, wait, retry, remaining, borrowed, would, full = kt:entry(key)
          assert.same({ "pass", 0, 0, 10 - i, false, false, false },
                      { v, wait, retry, remaining, borrowed, would, full })
        end
      end
      clock.t = T + 200
      local v, wait, retry, remaining = kt:entry("alice")
      assert.same({ "block", 0, 0.8, 0 }, { v, wait, retry, remaining })
      clock.t = T + 1000
      assert.equal(string.rep("pass ", 10) .. "block", verdicts(kt, 11, "alice"))
      assert.equal(string.rep("pass ", 10) .. "block", verdicts(kt, 11, "\127\0\0\1"))
    end)

    it("slides over its windows: the older half leaves the interval", function()
      local kt, clock = keyed_at { qps = 4, capacity = 10 }
      clock.t = T + 400
      assert.equal("pass pass pass pass block", verdicts(kt, 5, "k"))
      clock.t = T + 600 -- the window of T is still in the interval
      assert.equal("block", (kt:entry("k")))
      clock.t = T + 1000 -- it left: 4 again
      assert.equal("pass pass pass pass block", verdicts(kt, 5, "k"))
    end)

    it("counts n units, numbers as keys (tostring), any bytes", function()
      local kt = keyed_at { qps = 10, capacity = 10 }
      assert.equal("pass", (kt:entry(42, 6)))
      local v, _, _, remaining = kt:entry("42", 4)
      assert.same({ "pass", 0 }, { v, remaining })
      assert.equal("block", (kt:entry(42)))
      assert.equal("pass", (kt:entry("a\0b")))
      assert.equal(1, kt:lookup("a\0b").pass)
      assert.is_nil(kt:lookup("a"))
    end)

    it("blocks forever (retry_after = math.huge) what can never pass", function()
      local kt = keyed_at { qps = 2, capacity = 10 }
      local v, _, retry = kt:entry("k", 3)
      assert.same({ "block", math.huge }, { v, retry })
    end)

    it("keys longer than key_bytes are kept as a digest, still exact", function()
      local kt = keyed_at { qps = 1, capacity = 10, key_bytes = 16 }
      local long = string.rep("x", 100)
      assert.equal("pass block", verdicts(kt, 2, long))
      assert.equal("pass", (kt:entry(long .. "y")))
      local k = kt:lookup(long)
      assert.same({ 1, 1, true, 16 }, { k.pass, k.block, k.digest, #k.key })
    end)

    it("pacing per key spaces each key's admissions", function()
      local kt, clock = keyed_at { qps = 10, behavior = "pacing", max_queue = 0.2, capacity = 10 }
      local seq = {}
      for i = 1, 4 do
        local v, wait, retry = kt:entry("a")
        seq[i] = v .. ":" .. wait .. ":" .. retry
      end
      assert.same({ "pass:0:0", "wait:0.1:0", "wait:0.2:0", "block:0:0.1" }, seq)
      assert.equal("pass", (kt:entry("b"))) -- another key, its own queue
      clock.t = T + 1000
      assert.equal("pass", (kt:entry("a")))
    end)

    it("the concurrency grade counts requests in flight per key; exit frees one", function()
      local kt = keyed_at { concurrency = 1, capacity = 10 }
      assert.equal("pass block", verdicts(kt, 2, "a"))
      assert.equal("pass", (kt:entry("b")))
      assert.equal(1, kt:lookup("a").in_flight)
      assert.is_true(kt:exit("a", 4))
      assert.equal("pass", (kt:entry("a")))
      local s = kt:stats()
      assert.same({ 3, 1, 1, 4 }, { s.total_pass, s.total_block, s.total_success, s.avg_rt })
      local ok, err, code = kt:exit("c")
      assert.is_nil(ok)
      assert.equal(libsw.ESTATE, code)
      assert.matches("SW_ESTATE", err)
    end)
  end)

  describe("reclamation", function()
    it("10 waves of keys, each idle for an interval before the next: none refused, all exact", function()
      local kt, clock = keyed_at { qps = 3, capacity = 12, on_full = "closed" }
      assert.equal(PLACES, kt:stats().slots)
      for wave = 0, 9 do
        clock.t = T + wave * 2000 -- the previous wave's windows have left the interval
        for i = 1, PLACES do
          assert.equal("pass pass pass block", verdicts(kt, 4, wave .. ":" .. i))
        end
      end
      local s = kt:stats()
      assert.same({ PLACES, 10 * PLACES, 9 * PLACES, 0, 0 },
                  { s.keys, s.inserted, s.reclaimed, s.evicted, s.refused })
      assert.same({ 30 * PLACES, 10 * PLACES }, { s.total_pass, s.total_block })
    end)
  end)

  describe("a table full of active keys: on_full", function()
    it("evict (the default): the least recently active key gives its place", function()
      local kt, clock = keyed_at { qps = 5, capacity = 12 }
      assert.equal("pass", (kt:entry("old")))
      clock.t = T + 500 -- a later window, "old" still in the interval
      for i = 1, PLACES - 1 do assert.equal("pass", (kt:entry("k" .. i))) end
      local v, _, _, remaining, _, _, full = kt:entry("new")
      assert.same({ "pass", 4, false }, { v, remaining, full })
      assert.is_nil(kt:lookup("old"))
      local s = kt:stats()
      assert.same({ PLACES, 1, 0 }, { s.keys, s.evicted, s.refused })
      assert.equal("pass pass pass pass block", verdicts(kt, 5, "new"))
    end)

    it("open: the new key passes uncounted, with full = true", function()
      local kt = keyed_at { qps = 5, capacity = 12, on_full = "open" }
      fill(kt, "k")
      for _ = 1, 7 do
        local v, _, _, _, _, _, full = kt:entry("new")
        assert.same({ "pass", true }, { v, full })
      end
      assert.is_nil(kt:lookup("new"))
      assert.equal("pass", (kt:entry("k1"))) -- existing keys go on
      local s = kt:stats()
      assert.same({ 7, 0 }, { s.refused, s.evicted })
    end)

    it("closed: the new key is blocked until the window ends, with full = true", function()
      local kt, clock = keyed_at { qps = 5, capacity = 12, on_full = "closed" }
      fill(kt, "k")
      clock.t = T + 100
      local v, _, retry, _, _, _, full = kt:entry("new")
      assert.same({ "block", 0.4, true }, { v, retry, full })
      assert.equal(1, kt:stats().refused)
      clock.t = T + 1500 -- every key idle: a place is reclaimed
      assert.equal("pass", (kt:entry("new")))
    end)
  end)

  describe("dry run", function()
    it("counts would-be blocks and blocks nothing; set_dry_run switches it for every key", function()
      local kt = keyed_at { qps = 1, capacity = 10, dry_run = true }
      assert.equal("pass", (kt:entry("a")))
      local v, _, retry_after, _, _, would = kt:entry("a")
      assert.same({ "pass", true, 1 }, { v, would, retry_after }) -- what a block would say
      assert.is_true(kt:rule().dry_run)
      assert.is_true(kt:set_dry_run(false))
      assert.equal("block", (kt:entry("a")))
      assert.equal("pass block", verdicts(kt, 2, "b"))
      local s = kt:stats()
      assert.same({ 1, 3, 2, false }, { s.total_would_block, s.total_pass, s.total_block, s.dry_run })
    end)
  end)

  describe("inspection", function()
    it("stats, lookup, top, scan and keys", function()
      local kt, clock = keyed_at { qps = 3, capacity = 1000 }
      verdicts(kt, 5, "\10\0\0\1")
      verdicts(kt, 2, "b")
      verdicts(kt, 1, "c")
      local s = kt:stats()
      assert.same({ 1000, 1264, 16, 2, 1, 65, 3, 6, 2 },
        { s.capacity, s.slots, s.key_bytes, s.windows, s.interval, s.bytes_per_key, s.keys,
          s.total_pass, s.total_block })
      assert.same({ 3, "qps", "reject" }, { s.threshold, s.grade, s.behavior })
      local k = kt:lookup("\10\0\0\1")
      assert.same({ "\10\0\0\1", 3, 2, 0, T }, { k.key, k.pass, k.block, k.in_flight, k.last_ms })
      local top, active = kt:top(2)
      assert.same({ 2, 3, "\10\0\0\1", "b" }, { #top, active, top[1].key, top[2].key })
      top = kt:top(5, "block")
      assert.equal("\10\0\0\1", top[1].key)
      local seen, cursor, calls = {}, 0, 0
      repeat
        local list
        list, cursor = kt:scan(cursor, 2)
        calls = calls + 1
        for _, e in ipairs(list) do seen[#seen + 1] = e.key end
      until #list == 0
      table.sort(seen)
      assert.same({ "\10\0\0\1", "b", "c" }, seen)
      assert.is_true(calls >= 2)
      local keys = kt:keys()
      table.sort(keys)
      assert.same(seen, keys)
      clock.t = T + 2000 -- every key idle: kept until reclaimed, nothing in the interval
      top, active = kt:top(10)
      assert.same({ 0, 3 }, { active, kt:stats().keys })
      assert.equal(0, kt:lookup("b").pass)
    end)

    it("set_rule applies to every key at once, counts kept", function()
      local kt = keyed_at { qps = 2, capacity = 10 }
      assert.equal("pass pass block", verdicts(kt, 3, "a"))
      assert.is_true(kt:set_rule { qps = 4 })
      assert.equal("pass pass block", verdicts(kt, 3, "a"))
      assert.equal("pass pass pass pass block", verdicts(kt, 5, "new"))
      assert.same({ qps = 4, behavior = "reject", max_queue = 0.5, dry_run = false }, kt:rule())
    end)

    it("close releases the table; calls then fail with ESTATE", function()
      local kt = keyed_at { qps = 2, capacity = 10 }
      kt:close()
      local v, err, code = kt:entry("a")
      assert.same({ libsw.ESTATE, "SW_ESTATE: keyed table is closed" }, { code, err })
      assert.is_nil(v)
      kt:close() -- twice is fine
    end)
  end)
end)
