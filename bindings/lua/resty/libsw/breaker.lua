-- SPDX-License-Identifier: Apache-2.0
-- resty.libsw.breaker: a circuit breaker per upstream in OpenResty.
--
--   init_by_lua_block {
--     assert(require("libsw").load("/usr/local/lib/libsw.so"))
--     breakers = require("resty.libsw.breaker").new { prefix = "brk", error_ratio = 0.5,
--                                                      min_requests = 10, open_for = 10 }
--   }
--   location /api/ {
--     access_by_lua_block { breakers:access("backend") }  -- 503 + Retry-After while open
--     proxy_pass http://backend;
--     log_by_lua_block { breakers:log() }    -- $upstream_status, $upstream_response_time
--   }
--
-- One breaker per key, in the shared segment prefix .. "-" .. key: every
-- worker of every nginx on the machine shares it (one probe in half-open
-- for all of them). An answer of the upstream with a status >= fail_status
-- (default 500), or none at all (a connection error: no $upstream_status),
-- counts as failed; $upstream_response_time (the last attempt's) as its
-- response time. State changes seen by this worker's requests are logged
-- (ngx.WARN). The breaker's options are libsw.breaker's (docs/breakers.md).

local libsw = require "libsw"

local ngx = ngx
local tonumber, type, ceil = tonumber, type, math.ceil

local _M = {}
local mt = { __index = _M }

-- new(opts): the options of libsw.breaker plus prefix (segment names,
-- default "libsw-breaker"), fail_status (default 500), status (default 503)
function _M.new(opts)
  if type(opts) ~= "table" then return nil, "resty.libsw.breaker.new takes a table" end
  local o = {}
  for k, v in pairs(opts) do o[k] = v end
  local self = { prefix = o.prefix or "libsw-breaker", fail_status = o.fail_status or 500,
                 status = o.status or 503, cache = {} }
  o.prefix, o.fail_status, o.status = nil, nil, nil
  self.opts = o
  return setmetatable(self, mt)
end

-- The breaker of key (opened on first use in this worker), or nil, err.
function _M.get(self, key)
  local br = self.cache[key]
  if br then return br end
  local o = {}
  for k, v in pairs(self.opts) do o[k] = v end
  o.segment = self.prefix .. "-" .. key
  local err
  br, err = libsw.breaker(o)
  if not br then return nil, err end
  self.cache[key] = br
  return br
end

-- The last of a comma- or colon-separated list of upstream values.
local function last(v)
  if v == nil then return nil end
  return tonumber(v:match("([^,:%s]+)%s*$"))
end

-- access phase: refuse with 503 and Retry-After while the key's breaker is
-- open (or half-open with its probe out); remember the entry for log().
function _M.access(self, key)
  local br, err = self:get(key)
  if not br then
    ngx.log(ngx.ERR, "libsw breaker ", key, ": ", err, " (letting the request through)")
    return
  end
  local verdict, retry_after, probe = br:entry()
  if verdict == "block" then
    ngx.header["Retry-After"] = ceil(retry_after)
    return ngx.exit(self.status)
  end
  if verdict == nil then
    ngx.log(ngx.ERR, "libsw breaker ", key, ": ", retry_after, " (letting the request through)")
    return
  end
  if probe ~= 0 then ngx.log(ngx.WARN, "libsw breaker ", key, ": half-open, probing the upstream") end
  ngx.ctx.libsw_breaker = { br = br, probe = probe, key = key }
end

-- log phase: the upstream's answer ends the entry.
function _M.log(self)
  local c = ngx.ctx.libsw_breaker
  if not c then return end
  ngx.ctx.libsw_breaker = nil
  local status = last(ngx.var.upstream_status)
  local rt = (last(ngx.var.upstream_response_time) or 0) * 1000 -- seconds in nginx, ms here
  local failed = status == nil or status >= self.fail_status
  local before = c.br:state()
  local ok, err = c.br:exit(c.probe, rt, failed)
  if not ok then
    ngx.log(ngx.ERR, "libsw breaker ", c.key, ": ", err)
    return
  end
  local after = c.br:state()
  if after ~= before then
    ngx.log(ngx.WARN, "libsw breaker ", c.key, ": ", before, " -> ", after,
            " (upstream status ", status or "none", ")")
  end
end

return _M
