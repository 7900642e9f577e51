-- SPDX-License-Identifier: Apache-2.0
-- The hot loop of the Lua binding, for `luajit -jv` / `-jdump` and timing:
--   SW_LIB=.../libsw.so luajit -jv bench/lua/jit_loop.lua [iterations]
-- Runs entry+exit on a single limiter, a registry-backed limiter (per key),
-- a limiter with an injected clock and a keyed table (1000 addresses);
-- prints ns per entry+exit for each.
local dir = arg and arg[0] and arg[0]:match("^(.*)/bench/lua/[^/]*$") or "."
package.path = dir .. "/bindings/lua/?.lua;" .. package.path
local libsw = assert(require("libsw").load())
local N = tonumber(arg and arg[1]) or 2000000

local function run(name, lim, key_of)
  local entry, exit = lim.entry, lim.exit
  local pass = 0
  local t0 = os.clock()
  for i = 1, N do
    local key = key_of(i)
    local v = entry(lim, key, 1)
    if v == "pass" then
      pass = pass + 1
      exit(lim, key, 0.001, false)
    end
  end
  local dt = os.clock() - t0
  print(("%-10s %8.1f ns/op (entry+exit), %d passed"):format(name, dt / N * 1e9, pass))
end

run("single", assert(libsw.limiter { qps = 1e12 }), function() return nil end)
local keys = { "a", "b", "c", "d" }
run("registry", assert(libsw.limiter { qps = 1e12, capacity = 16 }),
    function(i) return keys[i % 4 + 1] end)
local t = 0
run("clock", assert(libsw.limiter { qps = 1e12, clock = function() t = t + 1; return t end }),
    function() return nil end)
local addrs = {}
for i = 1, 1000 do addrs[i] = string.char(10, 0, math.floor(i / 256), i % 256) end
run("keyed", assert(libsw.keyed { qps = 1e6, capacity = 4096 }),
    function(i) return addrs[i % 1000 + 1] end)
