-- SPDX-License-Identifier: Apache-2.0
-- libsw.rules: flow rules as Sentinel's FlowRule JSON in the LuaJIT binding
-- (docs/rules.md), parsed and checked by the C library (sw_rules_parse, on
-- jansson): the same fields, the same checks and messages as swctl rules.
--
--   local rules, err = libsw.parse_rules(text)   -- or libsw.load_rules(path)
--   for _, r in ipairs(rules) do print(r.resource, r.options.qps) end
--
-- Each rule is { resource = "...", options = {...}, keyed = bool|nil,
-- capacity = n|nil }; options are those of libsw.limiter and lim:set_rule
-- (qps or concurrency, behavior, warm_up, max_queue in seconds, strict,
-- dry_run, cluster = true).

local ffi = require "ffi"

local ffi_new, ffi_gc, ffi_string = ffi.new, ffi.gc, ffi.string
local open = io.open

return function(api, C, h)
  local fail, errmsg, show, make_options, options_of =
    h.fail, h.errmsg, h.show, h.make_options, h.options_of
  local M = h.M

  local out_rules = ffi_new("sw_rules *[1]")
  local out_res = ffi_new("const char *[1]")
  local out_keyed = ffi_new("int64_t[1]")
  local out_cap = ffi_new("int64_t[1]")

  -- The rules of a FlowRule JSON list: a list of rules, or nil, message
  -- ("rule N (resource \"R\"): FIELD: why", or where the JSON breaks), code.
  function api.parse_rules(text)
    if type(text) ~= "string" then
      return fail(M.EINVAL, "rules must be a string of JSON, not " .. show(text))
    end
    local rc = C.sw_rules_parse(out_rules, text, #text)
    if rc ~= 0 then return nil, errmsg(rc), rc end
    local r = ffi_gc(out_rules[0], C.sw_rules_free)
    local scratch, err, code = make_options({}, nil)
    if not scratch then return nil, err, code end
    local list = {}
    for i = 0, C.sw_rules_count(r) - 1 do
      rc = C.sw_rules_at(r, i, out_res, scratch, out_keyed, out_cap)
      if rc ~= 0 then return nil, errmsg(rc), rc end
      local keyed, capacity = tonumber(out_keyed[0]), tonumber(out_cap[0])
      list[#list + 1] = {
        resource = ffi_string(out_res[0]),
        options = options_of(scratch),
        keyed = keyed >= 0 and keyed == 1 or nil,
        capacity = capacity > 0 and capacity or nil,
      }
    end
    return list
  end

  -- The rules of the file at path (see parse_rules); a file that cannot be
  -- read gives nil, message, EIO.
  function api.load_rules(path)
    if type(path) ~= "string" then
      return fail(M.EINVAL, "path must be a string, not " .. show(path))
    end
    local f, err = open(path, "rb")
    if not f then return fail(M.EIO, "cannot read rules: " .. err) end
    local text = f:read("*a")
    f:close()
    local rules, e, code = api.parse_rules(text)
    if not rules then return nil, path .. ": " .. e, code end
    return rules, text
  end
end
