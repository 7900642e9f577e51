-- SPDX-License-Identifier: Apache-2.0
-- Rules as data in Lua: libsw.parse_rules / load_rules (Sentinel's FlowRule
-- JSON, checked by the C library) and resty.libsw's define_from_file and
-- reload_rules (the watcher's step), with a stand-in ngx.
local here = debug.getinfo(1, "S").source:match("^@(.*)/spec/[^/]+$") or "bindings/lua"
package.path = here .. "/?.lua;" .. package.path

local libsw = assert(require("libsw").load())
local examples = here .. "/../../tests/observability/rules/"

local function write(path, text)
  local f = assert(io.open(path .. ".new", "wb"))
  f:write(text)
  f:close()
  assert(os.rename(path .. ".new", path)) -- replaced, as editors and tools do
end

describe("libsw.parse_rules", function()
  it("loads Sentinel's examples unchanged", function()
    local rules = assert(libsw.load_rules(examples .. "sentinel-dashboard.json"))
    assert.equal(3, #rules)
    assert.equal("GET:/api/orders", rules[1].resource)
    assert.same(100, rules[1].options.qps)
    assert.equal("pacing", rules[1].options.behavior)
    assert.equal("warm_up", rules[2].options.behavior)
    assert.equal(4, rules[3].options.concurrency)
    assert(libsw.load_rules(examples .. "sentinel-file-datasource.json"))
  end)

  it("keeps libsw's fields", function()
    local r = assert(libsw.parse_rules(
      '[{"resource": "k", "count": 0.5, "dryRun": true, "strict": false, "keyed": true,'
      .. ' "capacity": 1000, "controlBehavior": 2, "maxQueueingTimeMs": 250}]'))[1]
    assert.same({ 0.5, true, false, true, 1000, 0.25 },
                { r.options.qps, r.options.dry_run, r.options.strict, r.keyed, r.capacity,
                  r.options.max_queue })
  end)

  it("names the rule and the field of a bad value", function()
    for _, case in ipairs {
      { '[{"resource": "a", "count": 1}', "not JSON: line 1" },
      { '[{"resource": "a", "count": 1}, {"resource": "b", "count": -1}]',
        'rule 2 (resource "b"): count: want a number >= 0' },
      { '[{"resource": "a", "count": 1, "grade": 2}]', 'rule 1 (resource "a"): grade: 2 is outside 0..1' },
      { '[{"resource": "a", "count": 1, "cuont": 2}]', 'rule 1 (resource "a"): cuont: not a field' },
      { '[{"resource": "a", "count": 1}, {"resource": "a", "count": 2}]', 'resource "a" already has rule 1' },
    } do
      local rules, err, code = libsw.parse_rules(case[1])
      assert.is_nil(rules)
      assert.equal(libsw.EINVAL == code or libsw.EEXIST == code, true)
      assert.truthy(err:find(case[2], 1, true), err)
    end
    local rules, err, code = libsw.load_rules("/nonexistent/rules.json")
    assert.is_nil(rules)
    assert.equal(libsw.EIO, code)
    assert.matches("cannot read rules", err)
  end)
end)

describe("resty.libsw rule files", function()
  local resty, segs, path, t

  before_each(function()
    _G.ngx = { WARN = 5, ERR = 4, NOTICE = 6, log = function() end,
               get_phase = function() return "init" end }
    package.loaded["resty.libsw"] = nil
    resty = require "resty.libsw"
    path = os.tmpname()
    t = 7000000
    segs = {}
  end)

  after_each(function()
    for _, s in ipairs(segs) do libsw.unlink_segment(s) end
    os.remove(path)
    _G.ngx = nil
  end)

  local function unique(name)
    local n = ("%s_%d_%d"):format(name, libsw.getpid(), math.random(1, 1e9))
    segs[#segs + 1] = "libsw_" .. n
    return n
  end

  local function rule(lim) return assert(lim.lim:rule(resty.NOKEY)) end

  local function passes(lim, n)
    local p = 0
    for _ = 1, n do
      if lim.lim:entry(resty.NOKEY) == "pass" then p = p + 1 end
    end
    return p
  end

  it("defines a limit per rule and follows the file's changes", function()
    local api, up = unique("api"), unique("up")
    write(path, ('[{"resource": "%s", "count": 3}, {"resource": "%s", "grade": 0, "count": 2}]')
      :format(api, up))
    local made = assert(resty.define_from_file(path, { clock = function() return t end }))
    assert.equal(3, passes(made[api], 5))
    assert.equal(1, passes(made[up], 1))
    assert.equal(3, rule(made[api]).qps)
    assert.equal(2, rule(made[up]).concurrency)
    assert.is_false(resty.reload_rules(path)) -- unchanged

    write(path, ('[{"resource": "%s", "count": 5}]'):format(api))
    assert.is_true(resty.reload_rules(path))
    assert.equal(5, rule(made[api]).qps)
    assert.equal(3, made[api].lim:stats(resty.NOKEY).pass)      -- statistics kept
    assert.equal(2, passes(made[api], 5))            -- 5 in this window now
    assert.equal(2, rule(made[up]).concurrency) -- not named: unchanged

    -- bad files change nothing, and are said once
    write(path, ('[{"resource": "%s", "count": -1}]'):format(api))
    local ok, err = resty.reload_rules(path)
    assert.is_nil(ok)
    assert.truthy(err:find(('rule 1 (resource "%s"): count: want a number >= 0'):format(api), 1, true))
    assert.is_false(resty.reload_rules(path))
    write(path, ('[{"resource": "%s", "count": 9}, {"resource": "nosuch", "count": 1}]'):format(api))
    ok, err = resty.reload_rules(path)
    assert.is_nil(ok)
    assert.matches('rule 2 %(resource "nosuch"%): no limit of that name is defined', err)
    assert.equal(5, rule(made[api]).qps)
  end)

  it("puts the file's rule in force in a segment that exists (an nginx reload)", function()
    local api = unique("api")
    assert(resty.define(api, { qps = 100 }))
    write(path, ('[{"resource": "%s", "count": 7, "dryRun": true}]'):format(api))
    package.loaded["resty.libsw"] = nil -- the new master's Lua VM
    resty = require "resty.libsw"
    local made = assert(resty.define_from_file(path))
    passes(made[api], 1)
    assert.same({ 7, true }, { rule(made[api]).qps, rule(made[api]).dry_run })
  end)

  it("defines nothing from a bad file", function()
    local api = unique("api")
    write(path, ('[{"resource": "%s", "count": 1}, {"resource": "b", "strategy": 1, "count": 1}]')
      :format(api))
    local made, err = resty.define_from_file(path)
    assert.is_nil(made)
    assert.matches("strategy: 1 %(relate%) is not supported", err)
    assert.is_nil(resty.get(api))
    write(path, ('[{"resource": "%s", "count": 1}, {"resource": "GET:/x", "count": 1}]'):format(api))
    made, err = resty.define_from_file(path)
    assert.is_nil(made)
    assert.matches('rule 2 %(resource "GET:/x"%): resource: a limit\'s name takes', err)
    assert.is_nil(resty.get(api))
    made, err = resty.define_from_file(path, { qps = 5 })
    assert.is_nil(made)
    assert.matches("qps cannot be common", err)
  end)

  it("needs nginx to watch", function()
    local ok, err = resty.watch_rules(path, 1)
    assert.is_nil(ok)
    assert.matches("needs nginx", err)
    ok, err = resty.watch_rules(path, 0)
    assert.is_nil(ok)
    assert.matches("interval must be", err)
  end)
end)
