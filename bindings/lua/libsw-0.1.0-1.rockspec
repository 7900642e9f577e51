-- SPDX-License-Identifier: Apache-2.0
-- LuaRocks: cd bindings/lua && luarocks --lua-version=5.1 make
-- (docs/releasing.md: the version is configure.ac's, tools/check-versions.sh)
rockspec_format = "3.0"
package = "libsw"
version = "0.1.0-1"
source = {
   url = "git+https://github.com/libsw/libsw.git",
   tag = "v0.1.0",
   dir = "libsw/bindings/lua",
}
description = {
   summary = "Sentinel-style sliding-window rate limiting for LuaJIT and OpenResty",
   detailed = [[
libsw's LuaJIT FFI binding (require "libsw": limiters, keyed tables, circuit
breakers, limits shared by processes) and its nginx helper for
lua-nginx-module and OpenResty (require "resty.libsw": 429 with Retry-After
in access_by_lua, every limit shared exactly by all workers). Needs LuaJIT
and libsw's C library (the Debian package libsw0, or make install).
]],
   homepage = "https://github.com/libsw/libsw",
   issues_url = "https://github.com/libsw/libsw/issues",
   license = "Apache-2.0",
   labels = { "ratelimit", "openresty", "nginx", "luajit", "ffi" },
}
dependencies = {
   "lua == 5.1", -- LuaJIT: the binding is made of its FFI
}
external_dependencies = {
   LIBSW = { library = "sw" },
}
build = {
   type = "builtin",
   modules = {
      ["libsw"] = "libsw.lua",
      ["libsw.keyed"] = "libsw/keyed.lua",
      ["libsw.breaker"] = "libsw/breaker.lua",
      ["libsw.rules"] = "libsw/rules.lua",
      ["resty.libsw"] = "resty/libsw.lua",
      ["resty.libsw.breaker"] = "resty/libsw/breaker.lua",
      ["resty.libsw.cluster"] = "resty/libsw/cluster.lua",
      ["resty.libsw.rules"] = "resty/libsw/rules.lua",
      ["resty.libsw.slots"] = "resty/libsw/slots.lua",
   },
}
