-- SPDX-License-Identifier: Apache-2.0
-- Shared by the specs (not a spec itself): the loaded binding and limiters
-- on an injected clock.
local libsw = assert(require("libsw").load())

local M = {
  libsw = libsw,
  -- times: a multiple of 1000, large like a real monotonic clock (pacing
  -- admits the very first request at once only when time is past its cost)
  T = 1000000,
}

-- make(opts) (libsw.limiter, libsw.breaker, ...) with its clock clock.t
-- (returned too; tests move it).
function M.at(make, opts)
  local clock = { t = M.T }
  opts.clock = function() return clock.t end
  local obj, err = make(opts)
  assert(obj, err)
  return obj, clock
end

-- A limiter whose clock is clock.t.
function M.limiter_at(opts)
  return M.at(libsw.limiter, opts)
end

return M
