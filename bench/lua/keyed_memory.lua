-- SPDX-License-Identifier: Apache-2.0
-- Memory of a per-client keyed table in a segment, as docs/openresty.md's
-- nginx.conf defines it (qps = 10, capacity = 100000, 16-byte keys):
--   SW_LIB=.../libsw.so luajit bench/lua/keyed_memory.lua [capacity]
-- Prints, as distinct IPv4 keys arrive, the segment file's size, what it
-- holds in memory (the pages tmpfs allocated: st_blocks x 512, i.e. the
-- shared memory resident for it), the table's bytes per key, and how much
-- the Lua heap grew (nothing is kept per key in Lua).
local dir = arg and arg[0] and arg[0]:match("^(.*)/bench/lua/[^/]*$") or "."
package.path = dir .. "/bindings/lua/?.lua;" .. package.path
local libsw = assert(require("libsw").load())
local capacity = tonumber(arg and arg[1]) or 100000

local seg = ("libsw_bench_memory_%d"):format(libsw.getpid())
local path = "/dev/shm/" .. seg

local function file(p)
  local f = assert(io.popen(("stat -c '%%s %%b %%B' %q"):format(p)))
  local size, blocks, unit = f:read("*l"):match("^(%d+) (%d+) (%d+)$")
  f:close()
  return tonumber(size), tonumber(blocks) * tonumber(unit)
end

local kt = assert(libsw.keyed { qps = 10, capacity = capacity, segment = seg, reset = true })
local s = kt:stats()
print(("# keyed table: capacity %d, %d places, %d bytes per key, %d bytes in all"):format(
  s.capacity, s.slots, s.bytes_per_key, s.bytes))
print("keys        file_bytes  resident_bytes  resident_per_key  lua_heap_kib")
collectgarbage()
local heap0 = collectgarbage("count")
local n = 0
for _, target in ipairs { 0, 100, 1000, 10000, capacity } do
  while n < target do
    n = n + 1
    kt:entry(string.char(10, math.floor(n / 65536) % 256, math.floor(n / 256) % 256, n % 256))
  end
  collectgarbage()
  local size, resident = file(path)
  print(("%-10d  %10d  %14d  %16s  %12.1f"):format(n, size, resident,
    n > 0 and ("%.1f"):format(resident / n) or "-", collectgarbage("count") - heap0))
end
assert(kt:stats().keys == n, "every key is present")
kt:close()
libsw.unlink_segment(seg)
