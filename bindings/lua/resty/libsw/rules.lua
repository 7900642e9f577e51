-- SPDX-License-Identifier: Apache-2.0
-- resty.libsw's limits from a rule file: Sentinel's FlowRule JSON
-- (docs/rules.md), parsed and checked by the C library.
--
--   init_by_lua_block {
--     local limits = require "resty.libsw"
--     assert(limits.define_from_file("/etc/nginx/rules.json", { status = 503 }))
--   }
--   init_worker_by_lua_block {
--     local limits = require "resty.libsw"
--     limits.init_worker()
--     assert(limits.watch_rules("/etc/nginx/rules.json", 2))   -- every 2 s
--   }
--
-- define_from_file defines one limit per rule, named by its resource, and
-- puts the file's rule in force even in a segment that exists (the file is
-- the source of truth: an nginx reload re-reads it). watch_rules re-reads
-- the file in one worker (worker 0) when it changes and applies it to the
-- limits defined: the rules live in shared memory, so every worker sees
-- them at its next entry, statistics kept. A file that does not parse,
-- names a bad value or a limit not defined changes nothing (logged).

local libsw = require "libsw"

local type, pairs, ipairs, tostring = type, pairs, ipairs, tostring
local open, concat, find = io.open, table.concat, string.find

-- Options of define() a rule file cannot share between its limits.
local PER_RULE = { segment = true, qps = true, concurrency = true }
local WARM_UP = { warm_up = true, warm_up_pacing = true }

return function(_M, h)
  local limits, invalid, log = h.limits, h.invalid, h.log
  local texts = {} -- path -> the text last applied
  local refused_texts = {} -- path -> the text last refused (said once)

  -- The rules of path and its text, or nil, message, code.
  local function read(path)
    local ok, err, code = libsw.load()
    if not ok then return nil, err, code end
    local rules, text
    rules, text, code = libsw.load_rules(path)
    if not rules then return nil, "libsw: " .. text, code end
    return rules, text
  end

  -- A rule's options over the common ones.
  local function options(rule, common)
    local o = {}
    for k, v in pairs(common) do o[k] = v end
    for k, v in pairs(rule.options) do o[k] = v end
    if rule.options.cluster then o.cluster = common.cluster or true end
    if rule.capacity then o.capacity = rule.capacity end
    return o
  end

  -- What the limit of rule i cannot take live; nil when it can.
  local function refused(self, i, rule)
    local what = 'rule ' .. i .. ' (resource "' .. rule.resource .. '"): '
    if self == nil then return what .. "no limit of that name is defined" end
    if rule.keyed ~= nil and rule.keyed ~= self.keyed then
      return what .. "keyed: " .. tostring(rule.keyed) .. ", but the limit is "
        .. (self.keyed and "a keyed table" or "not a keyed table")
    end
    if self.keyed and (WARM_UP[rule.options.behavior] or rule.options.cluster) then
      return what .. "controlBehavior: a keyed table takes no warm-up or cluster rule"
    end
  end

  -- define_from_file(path, options): a limit per rule of the file, named by
  -- its resource (1..40 characters of [A-Za-z0-9_.-]), with options common
  -- to all (those of define() but segment, qps and concurrency: each limit
  -- has its own segment, "libsw_<resource>", and the file gives the rule).
  -- Returns a table name -> Limit, or nil, message, code; nothing is
  -- defined when the file does not parse, names a bad value or a resource
  -- that is no limit name.
  function _M.define_from_file(path, common)
    common = common or {}
    if type(common) ~= "table" then return invalid("options must be a table") end
    for k in pairs(PER_RULE) do
      if common[k] ~= nil then
        return invalid(k .. " cannot be common to the limits of a rule file (each rule gives its own)")
      end
    end
    local rules, text, code = read(path)
    if not rules then return nil, text, code end
    for i, rule in ipairs(rules) do -- what define() would refuse, before the first one
      if not find(rule.resource, "^[%w_.%-]+$") or #rule.resource > 40 then
        return invalid(('%s: rule %d (resource "%s"): resource: a limit\'s name takes 1..40 '
          .. "characters of [A-Za-z0-9_.-]"):format(path, i, rule.resource))
      end
    end
    local made = {}
    for i, rule in ipairs(rules) do
      local lim, err
      lim, err, code = _M.define(rule.resource, options(rule, common))
      if not lim then return nil, path .. ": rule " .. i .. ": " .. err, code end
      local why = refused(lim, i, rule)
      if why then return invalid(path .. ": " .. why) end
      made[rule.resource] = lim -- define() put the rule in force, in a segment that exists too
    end
    texts[path] = text
    return made
  end

  -- reload_rules(path): apply the file if it changed since it was last
  -- applied (define_from_file, reload_rules) or refused: true (applied),
  -- false (unchanged), or nil, message, code (nothing changed).
  function _M.reload_rules(path)
    local f = open(path, "rb")
    local now = f and f:read("*a")
    if f then f:close() end
    if now ~= nil and (now == texts[path] or now == refused_texts[path]) then return false end
    local rules, text, code = read(path)
    local why = {}
    for i, rule in ipairs(rules or {}) do why[#why + 1] = refused(limits[rule.resource], i, rule) end
    if not rules or #why > 0 then
      refused_texts[path] = now
      if not rules then return nil, text, code end
      return invalid(path .. ": " .. concat(why, "; ") .. ": nothing changed")
    end
    for i, rule in ipairs(rules) do -- checked whole: each one C call now
      local ok, err
      ok, err, code = limits[rule.resource].lim:set_rule(rule.options)
      if not ok then
        return nil, path .. ": rule " .. i .. ": " .. err .. " (rules 1.." .. (i - 1)
          .. " were applied)", code
      end
    end
    texts[path], refused_texts[path] = text, nil
    return true
  end

  -- watch_rules(path, interval): in init_worker_by_lua, re-read path every
  -- interval seconds (default 1) in worker 0 and apply it when it changed;
  -- errors are logged and leave the rules in force. true, or nil, message.
  function _M.watch_rules(path, interval)
    interval = interval or 1
    if type(interval) ~= "number" or not (interval > 0) then
      return invalid("interval must be a number of seconds > 0, not " .. libsw._show(interval))
    end
    if not (ngx and ngx.timer and ngx.worker) then
      return invalid("watch_rules needs nginx (init_worker_by_lua); call reload_rules elsewhere")
    end
    if ngx.worker.id() ~= 0 then return true end -- one worker is enough: the rules are shared
    local said -- the last error logged: each one once
    local ok, err = ngx.timer.every(interval, function(premature)
      if premature then return end
      local applied, e = _M.reload_rules(path)
      if applied then
        log(ngx.NOTICE, "libsw: rules of ", path, " applied")
        said = nil
      elseif applied == nil and e ~= said then
        log(ngx.ERR, e)
        said = e
      end
    end)
    if not ok then return nil, "libsw: cannot start the rule watcher: " .. tostring(err) end
    return true
  end
end
