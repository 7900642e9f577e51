-- Helpers of the nginx integration tests (t/nginx.lua, t/breaker_nginx.lua),
-- loaded with dofile before package.path is set:
--   local U = dofile((debug.getinfo(1, "S").source:match("^@(.*/t)/[^/]+$") or "bindings/lua/t") .. "/util.lua")
-- U.bindings: the absolute path of bindings/lua; U.check counts into
-- U.checks and U.failures.
local U = { failures = 0, checks = 0 }

local bindings = debug.getinfo(1, "S").source:match("^@(.*)/t/[^/]+$") or "bindings/lua"
if bindings:sub(1, 1) ~= "/" then
  local p = io.popen("pwd")
  bindings = p:read("*l") .. "/" .. bindings
  p:close()
end
U.bindings = bindings

function U.check(cond, fmt, ...)
  U.checks = U.checks + 1
  local msg = fmt:format(...)
  if cond then
    print("ok     " .. msg)
  else
    U.failures = U.failures + 1
    print("FAILED " .. msg)
  end
  return cond
end

function U.sh(cmd)
  local p = assert(io.popen(cmd .. " 2>&1"))
  local out = p:read("*a")
  p:close()
  return out
end

function U.sleep(s)
  os.execute(("sleep %.3f"):format(s))
end

function U.exists(path)
  local f = io.open(path, "r")
  if f then f:close() return true end
  return false
end

-- a file's contents, or nil
function U.read(path)
  local f = io.open(path, "r")
  if not f then return nil end
  local s = f:read("*a")
  f:close()
  return s
end

function U.write(path, s)
  local f = assert(io.open(path, "w"))
  f:write(s)
  f:close()
end

return U
