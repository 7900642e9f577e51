-- SPDX-License-Identifier: Apache-2.0
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

-- nginx.conf of a test: 2 workers (as nobody when user is given) in the
-- foreground, logs and temporary files under prefix, lua-nginx-module with
-- bindings and resty on lua_package_path, then http_body (the rest of the
-- http block and its closing brace, its own placeholders already
-- replaced). o: modules, resty (U.nginx_paths), prefix, bindings, and
-- user, group or nil.
function U.nginx_conf(o, http_body)
  local head = ([[
load_module MODULES/ndk_http_module.so;
load_module MODULES/ngx_http_lua_module.so;
USERLINE
daemon off;
master_process on;
worker_processes 2;
error_log PREFIX/logs/error.log notice;
pid PREFIX/logs/nginx.pid;
env SW_LIB;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path PREFIX/client_body;
  proxy_temp_path PREFIX/proxy;
  fastcgi_temp_path PREFIX/fastcgi;
  uwsgi_temp_path PREFIX/uwsgi;
  scgi_temp_path PREFIX/scgi;
  lua_package_path "BINDINGS/?.lua;RESTY/?.lua;;";
]]):gsub("[A-Z]+", { MODULES = o.modules, PREFIX = o.prefix, BINDINGS = o.bindings, RESTY = o.resty,
                     USERLINE = o.user and ("user %s %s;"):format(o.user, o.group) or "" })
  return head .. http_body
end

-- As root, the user and group nginx's workers run as (nobody, and nogroup
-- where it exists); else nil.
function U.nginx_user(root)
  if not root then return nil end
  local g = U.read("/etc/group") or ""
  return "nobody", g:find("\nnogroup:") and "nogroup" or "nobody"
end

return U
