-- SPDX-License-Identifier: Apache-2.0
-- libsw.breaker on an injected clock (plain LuaJIT): Sentinel's transitions
-- with exact times, probes, errors returned (never raised), and one
-- breaker for two handles on a segment. nginx: t/breaker_nginx.lua.
local here = debug.getinfo(1, "S").source:match("^@(.*)/spec/[^/]+$") or "bindings/lua"
package.path = here .. "/?.lua;" .. package.path

local support = require "spec.support"
local libsw, T = support.libsw, support.T

local function breaker_at(opts) return support.at(libsw.breaker, opts) end

-- one call at the clock's time: "pass" or "block", then the exit
local function call(br, failed, rt)
  local v, retry, probe = br:entry()
  if v == "pass" then assert(br:exit(probe, rt or 1, failed)) end
  return v, retry, probe
end

describe("breaker", function()
  it("opens on the error ratio, probes after open_for, closes on a good probe", function()
    local br, clock = breaker_at { error_ratio = 0.5, min_requests = 4, open_for = 2 }
    for i = 1, 5 do assert.equal("pass", (call(br, i > 2))) end -- 3 of 5 failed
    assert.equal("open", br:state())
    local v, retry, state = br:entry()
    assert.same({ "block", 2, "open" }, { v, retry, state })
    clock.t = T + 1999
    assert.equal("block", (br:entry()))
    clock.t = T + 2000
    local v2, _, probe = call(br, true)                      -- the probe fails
    assert.equal("pass", v2)
    assert.is_true(probe ~= 0)
    assert.equal("open", br:state())
    clock.t = T + 4000
    assert.equal("pass", (call(br, false)))                 -- the next one closes it
    local s = br:stats()
    assert.same({ "closed", 1, 2, 1, 1, 2 },
                { s.state, s.opened, s.half_opened, s.reopened, s.closed, s.probes })
  end)

  it("counts slow calls with max_rt and lets one probe through", function()
    local br, clock = breaker_at { slow_ratio = 0.5, max_rt = 0.05, min_requests = 2, open_for = 1 }
    call(br, false, 10)
    call(br, false, 60)
    assert.equal("closed", br:state())                      -- 50% is not over 50%
    call(br, false, 51)
    assert.equal("open", br:state())
    clock.t = T + 1000
    local v, _, probe = br:entry()
    assert.equal("pass", v)
    local v2, retry = br:entry()                             -- one probe only
    assert.equal("block", v2)
    assert.is_true(retry > 0)
    assert(br:exit(probe, 10, false))
    assert.equal("closed", br:state())
  end)

  it("returns errors, never raises", function()
    local br, err, code = libsw.breaker { error_ratio = 2 }
    assert.is_nil(br)
    assert.equal(libsw.ERANGE, code)
    assert.truthy(err:find("error_ratio=2", 1, true))
    br, err, code = libsw.breaker { error_ratio = 0.5, error_count = 1 }
    assert.is_nil(br)
    assert.equal(libsw.EINVAL, code)
    br, err = libsw.breaker { slow_ratio = 0.5 }
    assert.is_nil(br)
    assert.truthy(err:find("max_rt", 1, true))
    br, err = libsw.breaker { error_ratio = 0.5, windows = 3 }
    assert.truthy(err:find("windows=3", 1, true))
    local ok = libsw.breaker { error_count = 1 }
    local r, e2, c2 = ok:exit(0, -1)
    assert.is_nil(r)
    assert.equal(libsw.ERANGE, c2)
    assert.truthy(e2:find("rt", 1, true))
  end)

  it("is one breaker for two handles on a segment", function()
    local name = ("libsw_spec_brk_%d"):format(libsw.getpid())
    local a = assert(libsw.breaker { error_count = 1, min_requests = 1, open_for = 60,
                                     segment = name, reset = true })
    local b = assert(libsw.breaker { error_count = 1, min_requests = 1, open_for = 60,
                                     segment = name })
    call(a, true)
    call(b, true)                                            -- 2 errors > 1: opens for both
    assert.equal("open", a:state())
    assert.equal("block", (a:entry()))
    a:close()
    b:close()
    libsw.unlink_segment(name)
  end)
end)
