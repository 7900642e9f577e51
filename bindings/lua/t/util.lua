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

-- Where Debian's lua-nginx-module and lua-resty-core are: the folder of
-- the nginx modules to load_module, and the one that holds resty/core.lua.
function U.nginx_paths()
  local modules
  for _, d in ipairs { "/usr/lib/nginx/modules", "/usr/share/nginx/modules" } do
    if U.exists(d .. "/ngx_http_lua_module.so") then modules = d break end
  end
  assert(modules, "ngx_http_lua_module.so not found (apt-get install libnginx-mod-http-lua)")
  local resty_core = package.searchpath("resty.core",
    "/usr/share/lua/5.1/?.lua;/usr/local/share/lua/5.1/?.lua;/usr/local/openresty/lualib/?.lua")
  assert(resty_core, "resty/core.lua not found (apt-get install lua-resty-core)")
  return modules, resty_core:match("^(.*)/resty/core%.lua$")
end

return U
