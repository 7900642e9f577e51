-- SPDX-License-Identifier: Apache-2.0
-- Dry-run rules and cluster leases through the LuaJIT binding (plain
-- LuaJIT, no Redis: the lease replies are made up here, as a refiller would
-- receive them).
local here = debug.getinfo(1, "S").source:match("^@(.*)/spec/[^/]+$") or "bindings/lua"
package.path = here .. "/?.lua;" .. package.path

local support = require "spec.support"
local libsw, T, limiter_at = support.libsw, support.T, support.limiter_at

describe("dry-run", function()
  it("lets through what it would block, and says so", function()
    local lim = limiter_at { qps = 2, dry_run = true }
    local v, _, _, _, _, would = lim:entry()
    assert.equal("pass", v)
    assert.is_nil(would)
    lim:entry()
    local retry
    v, _, retry, _, _, would = lim:entry()
    assert.equal("pass", v)
    assert.is_true(would)
    assert.is_true(retry > 0)
    local s = lim:stats()
    assert.is_true(s.dry_run)
    assert.equal(3, s.pass)
    assert.equal(0, s.block)
    assert.equal(1, s.would_block_qps)
    assert.is_true(lim:rule().dry_run)
  end)

  it("is switched at run time, keeping the statistics", function()
    local lim = limiter_at { qps = 1 }
    assert.equal("pass", (lim:entry()))
    assert.equal("block", (lim:entry()))
    assert.is_true(lim:set_dry_run(true))
    local v, _, _, _, _, would = lim:entry()
    assert.equal("pass", v)
    assert.is_true(would)
    assert.is_true(lim:set_dry_run(false))
    assert.equal("block", (lim:entry()))
    local s = lim:stats()
    assert.equal(2, s.pass)
    assert.equal(2, s.block)
    assert.is_false(s.dry_run)
    local ok, err = lim:set_dry_run("yes")
    assert.is_nil(ok)
    assert.matches("true or false", err)
  end)

  it("applies to every key of a registry", function()
    local lim = limiter_at { qps = 1, capacity = 4 }
    assert.equal("pass", (lim:entry("a")))
    assert.is_true(lim:set_dry_run(true))
    local v, _, _, _, _, would = lim:entry("a")
    assert.equal("pass", v)
    assert.is_true(would)
    lim:entry("b")
    v, _, _, _, _, would = lim:entry("b") -- a key created after the switch
    assert.equal("pass", v)
    assert.is_true(would)
  end)

  it("is reported by the lean decide() of resty.libsw", function()
    local lim = limiter_at { qps = 1, dry_run = true }
    local l = lim:handle()
    assert.equal(0, (libsw.decide(l, T, 1, 0)))
    local v, wait, retry, would = libsw.decide(l, T, 1, 0)
    assert.equal(0, v)
    assert.equal(0, wait)
    assert.is_true(retry > 0)
    assert.is_true(would)
  end)
end)

describe("cluster leases", function()
  local B0 = 1700000000000 -- a Redis time, bucket aligned

  it("admits from leased tokens and asks again below the low-water mark", function()
    local lim = limiter_at { qps = 200, cluster = { lease = 10, nodes = 4, failure = "closed" } }
    local l = lim:handle()
    local rule = lim:rule()
    assert.equal(10, rule.cluster.lease)
    assert.equal("closed", rule.cluster.failure)
    -- never reached Redis: the failure policy (closed)
    assert.equal("block", (lim:entry()))
    local call = assert(libsw.lease_next_call(l, T))
    assert.is_false(libsw.lease_next_call(l, T)) -- claimed: one call at a time
    local args = { libsw.lease_args(call) }
    assert.same({ "200", "10", "500", "2", "0", "0", "0" }, args)
    assert.matches("redis.call", libsw.lease_script())
    assert.is_true(libsw.lease_apply(l, T, call, B0, 10, B0 + 100))
    local st = libsw.lease_stats(l, T)
    assert.is_true(st.up)
    assert.equal(10, st.tokens)
    for _ = 1, 10 do assert.equal("pass", (lim:entry())) end
    -- empty, Redis up: a refill is on its way
    local v, _, retry = lim:entry()
    assert.equal("block", v)
    assert.equal(0.001, retry)
    assert.is_true(libsw.lease_stats(l, T).need)
    assert.is_true(lim:stats().lease.need)
    call = assert(libsw.lease_next_call(l, T + 1))
    assert.is_true(libsw.lease_apply(l, T + 1, call, B0, 10, B0 + 101))
    assert.equal("pass", (lim:entry()))
  end)

  it("stats() shows the lease on libsw's own clock too", function()
    local lim = assert(libsw.limiter { qps = 200, cluster = { lease = 10 } })
    local s = assert(lim:stats())
    assert.is_table(s.lease)
    assert.is_false(s.lease.up)
  end)

  it("falls back to the failure policy when Redis fails", function()
    local lim, clock = limiter_at { qps = 200, cluster = { lease = 10, nodes = 4, retry = 1 } }
    local l = lim:handle()
    local call = assert(libsw.lease_next_call(l, T))
    assert.is_true(libsw.lease_failed(l, T, call))
    local st = libsw.lease_stats(l, T)
    assert.is_false(st.up)
    assert.equal(T, st.down_since_ms)
    -- local fallback: 200 / 4 nodes = 50 per second
    local passed = 0
    for _ = 1, 60 do if lim:entry() == "pass" then passed = passed + 1 end end
    assert.equal(50, passed)
    -- no new call before the retry interval
    assert.is_false(libsw.lease_next_call(l, T + 999))
    clock.t = T + 1000
    assert.truthy(libsw.lease_next_call(l, T + 1000))
  end)

  it("rejects bad cluster options and lease calls on plain rules", function()
    local lim, err = libsw.limiter { qps = 10, cluster = { failure = "maybe" } }
    assert.is_nil(lim)
    assert.matches("local, open or closed", err)
    lim, err = libsw.limiter { qps = 10, cluster = { lease = "many" } }
    assert.is_nil(lim)
    assert.matches("lease must be a number", err)
    lim, err = libsw.limiter { qps = 10, cluster = { bogus = 1 } }
    assert.is_nil(lim)
    assert.matches("unknown cluster option bogus", err)
    lim, err = libsw.limiter { concurrency = 10, cluster = true }
    assert.is_nil(lim)
    local plain = limiter_at { qps = 10 }
    local ok, msg, code = libsw.lease_next_call(plain:handle(), T)
    assert.is_nil(ok)
    assert.equal(libsw.ESTATE, code)
    assert.matches("not a cluster rule", msg)
  end)
end)

describe("Redis Cluster slots (resty.libsw.slots)", function()
  local slots = require "resty.libsw.slots"

  it("computes Redis's CRC16 and key slots", function()
    assert.equal(0x31C3, slots.crc16("123456789"))
    assert.equal(12182, slots.of("foo")) -- CLUSTER KEYSLOT foo
    assert.equal(5061, slots.of("bar"))
    assert.equal(slots.of("user1000"), slots.of("{user1000}.following"))
    assert.equal(slots.of("{}x"), slots.crc16("{}x") % 16384) -- an empty tag is no tag
    assert.equal(slots.of("api/~=api"), slots.of("sw:{api/~=api}"))
  end)

  it("reads a CLUSTER SLOTS reply", function()
    local map = assert(slots.map {
      { 0, 5460, { "127.0.0.1", 7000, "id1" } },
      { 5461, 16383, { "127.0.0.1", 7001, "id2" }, { "127.0.0.1", 7002, "id3" } },
    })
    assert.equal("127.0.0.1:7000", map[0])
    assert.equal("127.0.0.1:7000", map[5460])
    assert.equal("127.0.0.1:7001", map[5461])
    assert.equal("127.0.0.1:7001", map[16383])
    local ok, err = slots.map { { "x" } }
    assert.is_nil(ok)
    assert.matches("unexpected reply", err)
  end)
end)
