-- SPDX-License-Identifier: Apache-2.0
-- resty.libsw.slots: which Redis Cluster node holds a key (the hash slot
-- of the key's hash tag, as Redis computes it, and the slot map that
-- CLUSTER SLOTS returns).

local bit = require "bit"
local band, bxor, lshift, rshift = bit.band, bit.bxor, bit.lshift, bit.rshift
local byte, find, sub, tostring, type, ipairs = string.byte, string.find, string.sub, tostring,
  type, ipairs

local _M = { COUNT = 16384 }

-- CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0), by table.
local TABLE = {}
for i = 0, 255 do
  local c = lshift(i, 8)
  for _ = 1, 8 do
    c = band(c, 0x8000) ~= 0 and band(bxor(lshift(c, 1), 0x1021), 0xffff)
      or band(lshift(c, 1), 0xffff)
  end
  TABLE[i] = c
end

function _M.crc16(s)
  local crc = 0
  for i = 1, #s do
    crc = band(bxor(lshift(crc, 8), TABLE[bxor(band(rshift(crc, 8), 0xff), byte(s, i))]), 0xffff)
  end
  return crc
end

-- The slot of key: of the part between the first '{' and the next '}'
-- when that part is not empty, else of the whole key.
function _M.of(key)
  local open = find(key, "{", 1, true)
  if open then
    local close = find(key, "}", open + 1, true)
    if close and close > open + 1 then key = sub(key, open + 1, close - 1) end
  end
  return _M.crc16(key) % _M.COUNT
end

-- A CLUSTER SLOTS reply -> slot (0-based) -> "host:port" of its master, or
-- nil and a message.
function _M.map(reply)
  if type(reply) ~= "table" then return nil, "CLUSTER SLOTS: " .. tostring(reply) end
  local map = {}
  for _, range in ipairs(reply) do
    local first, last, master = range[1], range[2], range[3]
    if type(first) ~= "number" or type(last) ~= "number" or type(master) ~= "table" then
      return nil, "CLUSTER SLOTS: unexpected reply"
    end
    local addr = tostring(master[1]) .. ":" .. tostring(master[2])
    for s = first, last do map[s] = addr end
  end
  return map
end

return _M
