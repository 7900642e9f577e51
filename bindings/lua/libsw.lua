-- SPDX-License-Identifier: Apache-2.0
-- libsw: LuaJIT FFI binding of libsw (Sentinel-style sliding-window limiters).
--
--   local libsw = require "libsw"          -- finds libsw.so (see libsw.load)
--   local lim = assert(libsw.limiter{ qps = 10 })
--   local verdict, wait, retry_after, remaining, borrowed = lim:entry()
--   if verdict == "block" then ... end   -- retry_after seconds
--   if verdict == "wait" then sleep(wait) end
--   ... lim:exit(nil, rt_ms, failed)
--
-- Thin over the C library: no statistics logic is re-implemented here. The
-- hot functions (entry, exit) are module-level locals that keep the loaded
-- library namespace and one reused sw_decision in upvalues, and return
-- nothing straight from a C call, so LuaJIT compiles them into traces.
--
-- Errors are returned, never raised: every public function answers a bad
-- argument (a wrong type, a fraction where a whole number is due, NaN, a
-- value out of range) with nil, a message naming the argument and the value
-- passed ("SW_ERANGE: n=1.5 is not an integer"), and the negative sw_err
-- code (docs/openresty.md, "Errors"). Only errors raised by the caller's
-- own functions (clock, key_name) propagate.
--
-- Keyed tables (libsw.keyed: one rule, any number of keys, a few dozen
-- bytes per key) live in libsw/keyed.lua, circuit breakers (libsw.breaker)
-- in libsw/breaker.lua, built on this file's checks when the library is
-- loaded; install the three files.
--
-- Works in plain LuaJIT and in OpenResty (resty.libsw builds on it).

local ffi = require "ffi"

local type, tostring, tonumber, setmetatable, getmetatable, pairs, ipairs, pcall =
  type, tostring, tonumber, setmetatable, getmetatable, pairs, ipairs, pcall
local floor, huge = math.floor, math.huge
local format, find = string.format, string.find
local ffi_string, ffi_new, ffi_gc, ffi_istype = ffi.string, ffi.new, ffi.gc, ffi.istype

-- --------------------------------------------------------------- C declarations
-- All declarations the bindings use, in one place, copied from <sw/sw.h>
-- with its exact types. Guarded so that loading this file twice in one
-- LuaJIT state (busted insulation, package.loaded resets) does not redefine.

local CDEF = [[
typedef enum sw_err {
  SW_OK = 0, SW_EINVAL = -1, SW_ENULL = -2, SW_ENOMEM = -3, SW_ESIZE = -4,
  SW_EOVERFLOW = -5, SW_ETIME = -6, SW_ERANGE = -7, SW_ENOTFOUND = -8,
  SW_EEXIST = -9, SW_EFULL = -10, SW_EABI = -11, SW_EPLUGIN = -12,
  SW_EVERSION = -13, SW_EGEOMETRY = -14, SW_ECORRUPT = -15, SW_EFOREIGN = -16,
  SW_EIO = -17, SW_EPERM = -18, SW_ENOTSUP = -19, SW_ESTATE = -20, SW_ETYPE = -21
} sw_err;
const char *sw_strerror(int err);
const char *sw_err_name(int err);
const char *sw_last_error(void);

uint32_t sw_version(void);
const char *sw_version_string(void);

int64_t sw_now_ms(void);
int64_t sw_now_ns(void);
int64_t sw_clock_resolution_ns(void);
int sw_clock_use(uint32_t source);

typedef struct sw_options sw_options;
typedef enum sw_option {
  SW_OPT_OCCUPIABLE = 1, SW_OPT_STRIPES = 2, SW_OPT_MAX_RT_MS = 3,
  SW_OPT_SECOND_SAMPLE_COUNT = 4, SW_OPT_SECOND_INTERVAL_MS = 5,
  SW_OPT_MINUTE_SAMPLE_COUNT = 6, SW_OPT_MINUTE_INTERVAL_MS = 7,
  SW_OPT_OCCUPY_TIMEOUT_MS = 8, SW_OPT_GRADE = 9, SW_OPT_BEHAVIOR = 10,
  SW_OPT_THRESHOLD = 11, SW_OPT_MAX_QUEUE_MS = 12, SW_OPT_WARM_UP_SEC = 13,
  SW_OPT_COLD_FACTOR = 14, SW_OPT_STRICT = 15, SW_OPT_SEGMENT_MODE = 16,
  SW_OPT_SEGMENT_UID = 17, SW_OPT_SEGMENT_GID = 18, SW_OPT_CLUSTER = 19,
  SW_OPT_CLUSTER_LEASE = 20, SW_OPT_CLUSTER_FAILURE = 21, SW_OPT_CLUSTER_NODES = 22,
  SW_OPT_CLUSTER_TIMEOUT_MS = 23, SW_OPT_CLUSTER_RETRY_MS = 24,
  SW_OPT_CLUSTER_LOW_WATER_PCT = 25, SW_OPT_DRY_RUN = 26, SW_OPT_SEGMENT_MAX_MB = 27,
  SW_OPT_KEY_BYTES = 28, SW_OPT_KEYED_ON_FULL = 29
} sw_option;
int sw_options_create(sw_options **out);
void sw_options_free(sw_options *opts);
int sw_options_set(sw_options *opts, sw_option key, int64_t value);
int sw_options_set_double(sw_options *opts, sw_option key, double value);
int sw_options_get(const sw_options *opts, sw_option key, int64_t *value);
int sw_options_get_double(const sw_options *opts, sw_option key, double *value);
int sw_option_bounds(sw_option key, double *min, double *max, double *def);

typedef struct sw_metric sw_metric;
int64_t sw_metric_pass_at(const sw_metric *m, int64_t t);
int64_t sw_metric_block_at(const sw_metric *m, int64_t t);

typedef struct sw_node sw_node;
sw_metric *sw_node_second_metric(sw_node *node);
double sw_node_pass_qps_at(const sw_node *node, int64_t t);
double sw_node_block_qps_at(const sw_node *node, int64_t t);
double sw_node_success_qps_at(const sw_node *node, int64_t t);
double sw_node_exception_qps_at(const sw_node *node, int64_t t);
double sw_node_total_qps_at(const sw_node *node, int64_t t);
double sw_node_would_block_qps_at(const sw_node *node, int64_t t);
double sw_node_avg_rt_at(const sw_node *node, int64_t t);
double sw_node_min_rt_at(const sw_node *node, int64_t t);
int64_t sw_node_total_request_at(const sw_node *node, int64_t t);
int64_t sw_node_total_pass_at(const sw_node *node, int64_t t);
int64_t sw_node_total_success_at(const sw_node *node, int64_t t);
int64_t sw_node_total_exception_at(const sw_node *node, int64_t t);
int64_t sw_node_block_request_at(const sw_node *node, int64_t t);
int64_t sw_node_concurrency(const sw_node *node);
int64_t sw_node_waiting_at(const sw_node *node, int64_t t);

typedef struct sw_limiter sw_limiter;
typedef struct sw_decision {
  int32_t verdict;
  int32_t borrowed;
  int64_t wait_ms;
  int64_t retry_after_ms;
  int64_t remaining;
  int32_t would_block;
  int32_t full;
  int64_t probe;
  int64_t receipt[2];
} sw_decision;
int sw_limiter_create(sw_limiter **out, const sw_options *opts);
void sw_limiter_free(sw_limiter *l);
sw_node *sw_limiter_node(sw_limiter *l);
int sw_limiter_entry(sw_limiter *l, int64_t n, uint32_t flags, sw_decision *d);
int sw_limiter_entry_at(sw_limiter *l, int64_t t, int64_t n, uint32_t flags, sw_decision *d);
int sw_limiter_exit(sw_limiter *l, int64_t rt_ms, int64_t n, uint32_t flags);
int sw_limiter_exit_at(sw_limiter *l, int64_t t, int64_t rt_ms, int64_t n, uint32_t flags);
int sw_limiter_set_rule(sw_limiter *l, const sw_options *rule);
int sw_limiter_get_rule(const sw_limiter *l, sw_options *opts);
int sw_limiter_set_dry_run(sw_limiter *l, int on);
int sw_limiter_cancel(sw_limiter *l, sw_decision *d);

typedef struct sw_lease_call {
  int64_t threshold; int64_t want; int64_t bucket_ms; int64_t refund;
  int64_t refund_bucket; int32_t buckets; int32_t target; int64_t started_ms;
  int64_t reserved[2];
} sw_lease_call;
typedef struct sw_lease_info {
  int64_t calls; int64_t granted; int64_t tokens; int64_t offset_ms;
  int64_t down_since_ms; int32_t up; int32_t need; int64_t reserved[2];
} sw_lease_info;
const char *sw_lease_script(void);
int sw_lease_next_call(sw_limiter *l, int64_t t, sw_lease_call *call);
int sw_lease_apply(sw_limiter *l, int64_t t, const sw_lease_call *call, int64_t bucket,
                   int64_t granted, int64_t redis_now_ms);
int sw_lease_failed(sw_limiter *l, int64_t t, const sw_lease_call *call);
int sw_lease_stats(const sw_limiter *l, int64_t t, sw_lease_info *info);

typedef struct sw_registry sw_registry;
int sw_registry_create(sw_registry **out, uint32_t capacity, const sw_options *opts);
void sw_registry_free(sw_registry *r);
int sw_registry_get(sw_registry *r, const char *name, sw_limiter **out);
int sw_registry_find(sw_registry *r, const char *name, sw_limiter **out);
uint32_t sw_registry_capacity(const sw_registry *r);
uint32_t sw_registry_count(const sw_registry *r);
int sw_registry_at(sw_registry *r, uint32_t i, sw_limiter **out, const char **name);
int sw_registry_set_rule(sw_registry *r, const sw_options *opts);

typedef struct sw_segment sw_segment;
int sw_segment_open(sw_segment **out, const char *name, uint32_t capacity,
                    const sw_options *opts, uint32_t flags);
void sw_segment_close(sw_segment *seg);
int sw_segment_unlink(const char *name);
sw_registry *sw_segment_registry(sw_segment *seg);
const char *sw_segment_name(const sw_segment *seg);
int64_t sw_segment_size(const sw_segment *seg);

typedef struct sw_keyed sw_keyed;
int sw_keyed_create(sw_keyed **out, uint32_t capacity, const sw_options *opts);
int sw_keyed_open(sw_keyed **out, const char *name, uint32_t capacity,
                  const sw_options *opts, uint32_t flags);
void sw_keyed_free(sw_keyed *k);
int sw_keyed_created(const sw_keyed *k);
int sw_keyed_entry(sw_keyed *k, const void *key, size_t len, int64_t n, uint32_t flags,
                   sw_decision *d);
int sw_keyed_entry_at(sw_keyed *k, int64_t t, const void *key, size_t len, int64_t n,
                      uint32_t flags, sw_decision *d);
int sw_keyed_exit(sw_keyed *k, const void *key, size_t len, int64_t rt_ms, int64_t n,
                  uint32_t flags);
int sw_keyed_exit_at(sw_keyed *k, int64_t t, const void *key, size_t len, int64_t rt_ms,
                     int64_t n, uint32_t flags);
int sw_keyed_set_rule(sw_keyed *k, const sw_options *rule);
int sw_keyed_get_rule(const sw_keyed *k, sw_options *opts);
int sw_keyed_set_dry_run(sw_keyed *k, int on);
int sw_keyed_cancel(sw_keyed *k, sw_decision *d);
typedef struct sw_keyed_info {
  uint32_t capacity; uint32_t slots; uint32_t key_bytes; uint32_t windows;
  int64_t interval_ms; int64_t bytes; int64_t bytes_per_key;
  int64_t keys; int64_t inserted; int64_t reclaimed; int64_t evicted; int64_t refused;
  int64_t pass, block, would_block;
  int64_t success, exception, rt;
  int64_t reserved[4];
} sw_keyed_info;
int sw_keyed_stats(const sw_keyed *k, sw_keyed_info *out);
typedef struct sw_keyed_key {
  uint8_t key[128];
  uint32_t len; uint32_t reserved32;
  int64_t pass; int64_t block; int64_t in_flight; int64_t last_ms;
  int64_t reserved[2];
} sw_keyed_key;
int sw_keyed_lookup_at(const sw_keyed *k, int64_t t, const void *key, size_t len,
                       sw_keyed_key *out);
int sw_keyed_scan_at(const sw_keyed *k, int64_t t, uint64_t *cursor, sw_keyed_key *out,
                     uint32_t cap);
int sw_keyed_top_at(const sw_keyed *k, int64_t t, uint32_t by, sw_keyed_key *out,
                    uint32_t n, int64_t *active);

typedef struct sw_rules sw_rules;
int sw_rules_parse(sw_rules **out, const char *json, size_t len);
void sw_rules_free(sw_rules *r);
uint32_t sw_rules_count(const sw_rules *r);
int sw_rules_at(const sw_rules *r, uint32_t i, const char **resource, sw_options *opts,
                int64_t *keyed, int64_t *capacity);
]]

-- From libc, to turn a user or group name into the ids a segment is given.
local CDEF_LIBC = [[
struct passwd {
  char *pw_name; char *pw_passwd; uint32_t pw_uid; uint32_t pw_gid;
  char *pw_gecos; char *pw_dir; char *pw_shell;
};
struct group { char *gr_name; char *gr_passwd; uint32_t gr_gid; char **gr_mem; };
struct passwd *getpwnam(const char *name);
struct group *getgrnam(const char *name);
uint32_t geteuid(void);
int getpid(void);
]]

if not pcall(ffi.typeof, "sw_decision") then ffi.cdef(CDEF) end
if not pcall(ffi.typeof, "struct passwd") then ffi.cdef(CDEF_LIBC) end

-- ---------------------------------------------------------------- constants

local M = {
  _VERSION = "0.1.0",
  -- verdicts as entry() returns them
  PASS = "pass", WAIT = "wait", BLOCK = "block",
  -- sw_err codes (the third value returned with an error)
  EINVAL = -1, ENULL = -2, ENOMEM = -3, ESIZE = -4, EOVERFLOW = -5, ETIME = -6,
  ERANGE = -7, ENOTFOUND = -8, EEXIST = -9, EFULL = -10, EABI = -11,
  EPLUGIN = -12, EVERSION = -13, EGEOMETRY = -14, ECORRUPT = -15,
  EFOREIGN = -16, EIO = -17, EPERM = -18, ENOTSUP = -19, ESTATE = -20, ETYPE = -21,
  -- segment open flags
  SEGMENT_CREATE = 1, SEGMENT_RESET = 2, SEGMENT_READONLY = 4, SEGMENT_ATTACH = 16,
}

-- Names of a segment's registry when no capacity is given: each name
-- reserves its windows in /dev/shm (36.5 KiB with the default geometry),
-- so 64 names take 2.3 MiB; per-client limits belong in a keyed table.
local SEGMENT_NAMES = 64

-- clock sources (sw_clock_use): booleans as the first API had them
local CLOCK_SOURCES = {
  monotonic = 0, coarse = 1, default = 2, [false] = 0, [true] = 1,
}

local BEHAVIORS = {
  reject = 0, warm_up = 1, pacing = 2, warm_up_pacing = 3,
  ["warm-up"] = 1, ["warm-up+pacing"] = 3, default = 0,
}
local BEHAVIOR_NAMES = { [0] = "reject", "warm_up", "pacing", "warm_up_pacing" }
M.BEHAVIORS = BEHAVIORS

-- cluster = { lease = L, nodes = n, failure = "local" | "open" | "closed",
--   timeout = s, retry = s, low_water_pct = p } (docs/cluster.md); keys
-- listed in CLUSTER_OTHER belong to the caller (resty.libsw: the Redis address)
local CLUSTER_KEYS = {
  lease = "cluster_lease", nodes = "cluster_nodes", failure = "cluster_failure",
  timeout = "cluster_timeout_ms", retry = "cluster_retry_ms",
  low_water_pct = "cluster_low_water_pct",
}
local CLUSTER_OTHER = { redis = true, interval = true, database = true, password = true }
local FAILURES = { ["local"] = 0, open = 1, closed = 2 }
local FAILURE_NAMES = { [0] = "local", "open", "closed" }

local ABI_MAJOR = 0 -- the major version of libsw this binding was written for

-- ------------------------------------------------------- checking arguments

local ERR_NAMES = {} -- code -> "SW_EINVAL"
for k, v in pairs(M) do
  if type(v) == "number" and k:match("^E%u+$") then ERR_NAMES[v] = "SW_" .. k end
end

-- A value as messages show it: numbers as written (1.5, 1e+30, nan, inf),
-- strings quoted (cut at 40 bytes), anything else by its type.
local function show(v)
  local t = type(v)
  if t == "number" then
    if v ~= v then return "nan" end
    if v == huge then return "inf" end
    if v == -huge then return "-inf" end
    local s = format("%.14g", v)
    if tonumber(s) ~= v then s = format("%.17g", v) end
    return s
  elseif t == "string" then
    if #v > 40 then return format("%q", v:sub(1, 40)) .. "..." end
    return format("%q", v)
  elseif t == "boolean" or t == "nil" then
    return tostring(v)
  end
  return "a " .. t
end
M._show = show -- for resty.libsw's messages (not part of the API)

-- nil, "SW_X: msg", code: what every public function returns on error
local function fail(code, msg)
  return nil, ERR_NAMES[code] .. ": " .. msg, code
end

-- v when it is a whole number in lo..hi, else nil, message, code
local function whole(v, name, lo, hi)
  if type(v) ~= "number" then
    return fail(M.EINVAL, name .. " must be a whole number, not " .. show(v))
  end
  if v ~= v then return fail(M.ERANGE, name .. "=nan is not a number") end
  if not (v >= lo and v <= hi) then
    return fail(M.ERANGE, format("%s=%s is outside %s..%s", name, show(v), show(lo), show(hi)))
  end
  if v ~= floor(v) then return fail(M.ERANGE, name .. "=" .. show(v) .. " is not an integer") end
  return v
end

-- true when v is nil, true or false, else nil, message, code
local function boolean(v, name)
  if v == nil or v == true or v == false then return true end
  return fail(M.EINVAL, name .. " must be true or false, not " .. show(v))
end

-- true when v is a string without NUL (C would see it cut at the NUL)
local function c_string(v, name)
  if type(v) ~= "string" then return fail(M.EINVAL, name .. " must be a string, not " .. show(v)) end
  if find(v, "\0", 1, true) then
    return fail(M.EINVAL, name .. " " .. show(v) .. " holds a NUL byte")
  end
  return true
end

local N_MAX = 2147483647      -- entry / exit n: 0..INT32_MAX (sw_limiter_entry)
local RT_MAX_MS = 2147483647  -- exit rt: 0..INT32_MAX ms
local T_MAX = 2 ^ 62          -- times: 0..2^62 ms (int64, with room for arithmetic)
local INT_MIN, INT_MAX = -2147483648, 2147483647

-- ------------------------------------------------------------ finding the .so

local function file_exists(path)
  local f = io.open(path, "rb")
  if f then f:close() return true end
  return false
end

-- The usual library directories, searched last and in this order: where
-- `make install` and Debian's libsw0 put the library. A program (or a test
-- that must not find an installed libsw) may change the list before the
-- first load.
M.library_dirs = { "/usr/local/lib", "/usr/lib", "/usr/lib/x86_64-linux-gnu",
                   "/usr/lib/aarch64-linux-gnu", "/usr/local/lib64", "/usr/lib64" }

-- Where libsw.so is: the explicit path, else $SW_LIB, else package.cpath
-- ("libsw" substituted for '?'), else M.library_dirs. Never a bare
-- ffi.load("sw"): the dynamic loader's search would silently pick whatever
-- libsw is installed. Returns the path, or nil, where it looked and
-- libsw.ENOTFOUND.
local function find_library(path)
  if path ~= nil then
    if type(path) ~= "string" or path == "" or find(path, "\0", 1, true) then
      return nil, "libsw: the library path must be a non-empty string, not " .. show(path), M.EINVAL
    end
    return path
  end
  local env = os.getenv("SW_LIB")
  if env and env ~= "" then return env end
  local tried = {}
  local found, err = package.searchpath("libsw", package.cpath)
  if found then return found end
  tried[#tried + 1] = err
  for _, dir in ipairs(M.library_dirs) do
    for _, name in ipairs { "libsw.so", "libsw.so.0" } do
      local p = dir .. "/" .. name
      if file_exists(p) then return p end
      tried[#tried + 1] = "\n\tno file '" .. p .. "'"
    end
  end
  return nil, "libsw: libsw.so not found (set SW_LIB to its full path, call "
    .. "require('libsw').load(path), or add its directory to package.cpath):"
    .. table.concat(tried), M.ENOTFOUND
end
M.find_library = find_library

-- ------------------------------------------------------------------ the API

-- Everything that calls into C is made here, with the loaded namespace C as
-- an immutable upvalue of every function (LuaJIT folds C.sym to a direct
-- call in traces).
local function build(C, path)
  local api = {}

  local function errmsg(rc)
    local msg = ffi_string(C.sw_last_error())
    if msg == "" then msg = ffi_string(C.sw_strerror(rc)) end
    msg = msg:gsub("SW_OPT_SEGMENT_MAX_MB", "segment_max_mb") -- the option as Lua names it
    return ffi_string(C.sw_err_name(rc)) .. ": " .. msg
  end

  -- one decision reused by every entry: read right after the call, never
  -- across a yield
  local dec = ffi_new("sw_decision")
  local out_lim = ffi_new("sw_limiter *[1]")
  local out_name = ffi_new("const char *[1]")
  local dbl = ffi_new("double[1]")
  local bound_lo, bound_hi = ffi_new("double[1]"), ffi_new("double[1]")
  local limiter_ptr = ffi.typeof("sw_limiter *")
  local lease_call_t = ffi.typeof("sw_lease_call")

  api.path = path
  api.C = C

  function api.version()
    return ffi_string(C.sw_version_string())
  end
  function api.version_hex()
    return tonumber(C.sw_version())
  end
  -- the window clock, ms (by default CLOCK_MONOTONIC_COARSE: one kernel
  -- tick of resolution, clock_resolution_ns(); behind CLOCK_MONOTONIC by up
  -- to a tick): the time windows are placed by, not for durations
  function api.now_ms()
    local t = C.sw_now_ms()
    return tonumber(t)
  end
  -- the duration clock, ns (CLOCK_MONOTONIC by default): for response
  -- times and other durations (a double: exact to the ns for 104 days of
  -- uptime, to a few ns after)
  function api.now_ns()
    local t = C.sw_now_ns()
    return tonumber(t)
  end
  -- the window clock's resolution, ns (at least 1 ms), or nil, message, code
  function api.clock_resolution_ns()
    local ns = tonumber(C.sw_clock_resolution_ns())
    if ns < 0 then return nil, errmsg(ns), ns end
    return ns
  end
  function api.strerror(code)
    local ok, err, ecode = whole(code, "code", INT_MIN, INT_MAX)
    if not ok then return nil, err, ecode end
    return ffi_string(C.sw_strerror(code))
  end
  function api.err_name(code)
    local ok, err, ecode = whole(code, "code", INT_MIN, INT_MAX)
    if not ok then return nil, err, ecode end
    return ffi_string(C.sw_err_name(code))
  end
  function api.last_error()
    return ffi_string(C.sw_last_error())
  end
  -- clock_use(source): the process-wide clocks. "default" (or no
  -- argument): windows on the coarse clock, durations on CLOCK_MONOTONIC;
  -- "monotonic" (false): both precise; "coarse" (true): both coarse.
  function api.clock_use(source)
    local id = CLOCK_SOURCES[source == nil and "default" or source]
    if id == nil then
      return fail(M.EINVAL, 'source must be "default", "monotonic", "coarse", true or false, not '
        .. show(source))
    end
    local rc = C.sw_clock_use(id)
    if rc ~= 0 then return nil, errmsg(rc), rc end
    return true
  end
  function api.unlink_segment(name)
    local ok, err, code = c_string(name, "segment name")
    if not ok then return nil, err, code end
    local rc = C.sw_segment_unlink(name)
    if rc ~= 0 then return nil, errmsg(rc), rc end
    return true
  end

  -- user / group name (or id) -> uid, gid (-1: not given), for segment
  -- ownership; nil, message, code for an unknown or a bad one
  function api.user_ids(user, group)
    local uid, gid
    local ok, err, code
    if type(user) == "number" then
      uid, err, code = whole(user, "user", 0, INT_MAX)
      if not uid then return nil, err, code end
    elseif type(user) == "string" then
      ok, err, code = c_string(user, "user")
      if not ok then return nil, err, code end
      local pw = ffi.C.getpwnam(user)
      if pw == nil then return fail(M.ENOTFOUND, "no such user: " .. user) end
      uid, gid = tonumber(pw.pw_uid), tonumber(pw.pw_gid)
    elseif user ~= nil then
      return fail(M.EINVAL, "user must be a name or a uid, not " .. show(user))
    end
    if type(group) == "number" then
      gid, err, code = whole(group, "group", 0, INT_MAX)
      if not gid then return nil, err, code end
    elseif type(group) == "string" then
      ok, err, code = c_string(group, "group")
      if not ok then return nil, err, code end
      local gr = ffi.C.getgrnam(group)
      if gr == nil then return fail(M.ENOTFOUND, "no such group: " .. group) end
      gid = tonumber(gr.gr_gid)
    elseif group ~= nil then
      return fail(M.EINVAL, "group must be a name or a gid, not " .. show(group))
    end
    return uid or -1, gid or -1
  end
  function api.geteuid()
    return tonumber(ffi.C.geteuid())
  end
  function api.getpid()
    return tonumber(ffi.C.getpid())
  end

  -- ----------------------------------------------------------- options

  -- The C value of a numeric option given in Lua as v (seconds when scale
  -- is 1000, rounded to ms), checked against the library's bounds (and
  -- against fractions, unless real): messages name the Lua option and the
  -- value passed, in the option's own unit.
  local function option_number(v, name, key, scale, real)
    if type(v) ~= "number" then
      return fail(M.EINVAL, name .. " must be a number" .. (scale == 1000 and " of seconds" or "")
        .. ", not " .. show(v))
    end
    if v ~= v then return fail(M.ERANGE, name .. "=nan is not a number") end
    C.sw_option_bounds(key, bound_lo, bound_hi, nil)
    local lo, hi = bound_lo[0], bound_hi[0]
    local cv = scale == 1 and v or floor(v * scale + 0.5)
    if not (cv >= lo and cv <= hi) then
      return fail(M.ERANGE, format("%s=%s is outside %s..%s%s", name, show(v), show(lo / scale),
        show(hi / scale), scale == 1000 and " seconds" or ""))
    end
    if not real and cv ~= floor(cv) then
      return fail(M.ERANGE, name .. "=" .. show(v) .. " is not an integer")
    end
    return cv
  end

  -- Lua options -> the rule and geometry, as a plain table of sw_option
  -- values (numbers), every value checked here (types, fractions, bounds)
  -- and the combinations by C. nil, message, code for a bad one.
  local RULE_NUMBERS = { -- Lua name, C key, scale, field of r
    { "max_queue", C.SW_OPT_MAX_QUEUE_MS, 1000, "max_queue_ms" },
    { "warm_up", C.SW_OPT_WARM_UP_SEC, 1, "warm_up_sec" },
    { "cold_factor", C.SW_OPT_COLD_FACTOR, 1, "cold_factor" },
  }
  local CLUSTER_NUMBERS = {
    lease = { C.SW_OPT_CLUSTER_LEASE, 1 }, nodes = { C.SW_OPT_CLUSTER_NODES, 1 },
    timeout = { C.SW_OPT_CLUSTER_TIMEOUT_MS, 1000 }, retry = { C.SW_OPT_CLUSTER_RETRY_MS, 1000 },
    low_water_pct = { C.SW_OPT_CLUSTER_LOW_WATER_PCT, 1 },
  }
  local function rule_of(o)
    local r = {}
    local qps, conc = o.qps, o.concurrency
    local ok, err, code
    if qps ~= nil and conc ~= nil then
      return fail(M.EINVAL, "give either qps or concurrency, not both")
    end
    if qps ~= nil then
      r.grade = 1
      r.threshold, err, code = option_number(qps, "qps", C.SW_OPT_THRESHOLD, 1, true)
    elseif conc ~= nil then
      r.grade = 0
      r.threshold, err, code = option_number(conc, "concurrency", C.SW_OPT_THRESHOLD, 1, true)
    else
      return fail(M.EINVAL, "a limiter needs qps = N or concurrency = N")
    end
    if r.threshold == nil then return nil, err, code end
    local b = o.behavior
    if b == nil then
      r.behavior = 0
    elseif type(b) == "number" then
      r.behavior, err, code = option_number(b, "behavior", C.SW_OPT_BEHAVIOR, 1)
      if r.behavior == nil then return nil, err, code end
    else
      r.behavior = BEHAVIORS[b]
      if r.behavior == nil then
        return fail(M.EINVAL, "behavior must be reject, pacing, warm_up or warm_up_pacing, not "
          .. show(b))
      end
    end
    for _, n in ipairs(RULE_NUMBERS) do
      local v = o[n[1]]
      if v ~= nil then
        r[n[4]], err, code = option_number(v, n[1], n[2], n[3])
        if r[n[4]] == nil then return nil, err, code end
      end
    end
    for _, k in ipairs { "strict", "dry_run" } do
      ok, err, code = boolean(o[k], k)
      if not ok then return nil, err, code end
      if o[k] ~= nil then r[k] = o[k] and 1 or 0 end
    end
    local c = o.cluster
    if c ~= nil and c ~= false then
      if c ~= true and type(c) ~= "table" then
        return fail(M.EINVAL, "cluster must be true or a table of cluster options, not " .. show(c))
      end
      r.cluster = 1
      if type(c) == "table" then
        for k, v in pairs(c) do
          local key = CLUSTER_KEYS[k]
          if key == nil then
            if not CLUSTER_OTHER[k] then
              return fail(M.EINVAL, "unknown cluster option " .. tostring(k))
            end
          elseif k == "failure" then
            r.cluster_failure = FAILURES[v]
            if r.cluster_failure == nil then
              return fail(M.EINVAL, "cluster failure must be local, open or closed, not " .. show(v))
            end
          else
            local n = CLUSTER_NUMBERS[k]
            r[key], err, code = option_number(v, "cluster." .. k, n[1], n[2])
            if r[key] == nil then return nil, err, code end
          end
        end
      end
    end
    return r
  end

  local RULE_KEYS = {
    { "grade", C.SW_OPT_GRADE }, { "behavior", C.SW_OPT_BEHAVIOR },
    { "threshold", C.SW_OPT_THRESHOLD, true }, { "max_queue_ms", C.SW_OPT_MAX_QUEUE_MS },
    { "warm_up_sec", C.SW_OPT_WARM_UP_SEC }, { "cold_factor", C.SW_OPT_COLD_FACTOR },
    { "strict", C.SW_OPT_STRICT }, { "dry_run", C.SW_OPT_DRY_RUN },
    { "cluster", C.SW_OPT_CLUSTER }, { "cluster_lease", C.SW_OPT_CLUSTER_LEASE },
    { "cluster_failure", C.SW_OPT_CLUSTER_FAILURE }, { "cluster_nodes", C.SW_OPT_CLUSTER_NODES },
    { "cluster_timeout_ms", C.SW_OPT_CLUSTER_TIMEOUT_MS },
    { "cluster_retry_ms", C.SW_OPT_CLUSTER_RETRY_MS },
    { "cluster_low_water_pct", C.SW_OPT_CLUSTER_LOW_WATER_PCT },
  }

  -- geometry options: interval (s), windows, minute_interval (s),
  -- minute_windows, occupy_timeout (s), stripes, max_rt (s); of a segment:
  -- mode, uid, gid (user / group are turned into uid / gid by the caller),
  -- segment_max_mb (the largest segment an open may create, default 2048)
  local GEOMETRY_NUMBERS = { -- Lua name, C key, scale, field of g
    { "interval", C.SW_OPT_SECOND_INTERVAL_MS, 1000, "second_interval_ms" },
    { "windows", C.SW_OPT_SECOND_SAMPLE_COUNT, 1, "second_sample_count" },
    { "minute_interval", C.SW_OPT_MINUTE_INTERVAL_MS, 1000, "minute_interval_ms" },
    { "minute_windows", C.SW_OPT_MINUTE_SAMPLE_COUNT, 1, "minute_sample_count" },
    { "occupy_timeout", C.SW_OPT_OCCUPY_TIMEOUT_MS, 1000, "occupy_timeout_ms" },
    { "stripes", C.SW_OPT_STRIPES, 1, "stripes" },
    { "max_rt", C.SW_OPT_MAX_RT_MS, 1000, "max_rt_ms" },
    { "mode", C.SW_OPT_SEGMENT_MODE, 1, "segment_mode" },
    { "uid", C.SW_OPT_SEGMENT_UID, 1, "segment_uid" },
    { "gid", C.SW_OPT_SEGMENT_GID, 1, "segment_gid" },
    { "segment_max_mb", C.SW_OPT_SEGMENT_MAX_MB, 1, "segment_max_mb" },
  }
  local function geometry_of(o)
    local g = {}
    local err, code
    for _, n in ipairs(GEOMETRY_NUMBERS) do
      local v = o[n[1]]
      if v ~= nil then
        g[n[4]], err, code = option_number(v, n[1], n[2], n[3])
        if g[n[4]] == nil then return nil, err, code end
      end
    end
    if o.occupy_timeout == nil and g.second_interval_ms and g.second_interval_ms < 500 then
      g.occupy_timeout_ms = g.second_interval_ms -- the default 500 must fit
    end
    return g
  end

  local GEOM_KEYS = {
    { "second_interval_ms", C.SW_OPT_SECOND_INTERVAL_MS },
    { "second_sample_count", C.SW_OPT_SECOND_SAMPLE_COUNT },
    { "minute_interval_ms", C.SW_OPT_MINUTE_INTERVAL_MS },
    { "minute_sample_count", C.SW_OPT_MINUTE_SAMPLE_COUNT },
    { "occupy_timeout_ms", C.SW_OPT_OCCUPY_TIMEOUT_MS },
    { "stripes", C.SW_OPT_STRIPES }, { "max_rt_ms", C.SW_OPT_MAX_RT_MS },
    { "segment_mode", C.SW_OPT_SEGMENT_MODE }, { "segment_uid", C.SW_OPT_SEGMENT_UID },
    { "segment_gid", C.SW_OPT_SEGMENT_GID }, { "segment_max_mb", C.SW_OPT_SEGMENT_MAX_MB },
  }

  -- A sw_options (freed by the GC) holding the rule r and geometry g.
  local function make_options(r, g)
    local pp = ffi_new("sw_options *[1]")
    local rc = C.sw_options_create(pp)
    if rc ~= 0 then return nil, errmsg(rc), rc end
    local opts = ffi_gc(pp[0], C.sw_options_free)
    for _, kv in ipairs(RULE_KEYS) do
      local v = r[kv[1]]
      if v ~= nil then
        rc = C.sw_options_set_double(opts, kv[2], v)
        if rc ~= 0 then return nil, errmsg(rc), rc end
      end
    end
    if g then
      for _, kv in ipairs(GEOM_KEYS) do
        local v = g[kv[1]]
        if v ~= nil then
          rc = C.sw_options_set_double(opts, kv[2], v)
          if rc ~= 0 then return nil, errmsg(rc), rc end
        end
      end
    end
    return opts
  end

  -- The rule as the options hold it (defaults filled in), for comparisons.
  local function rule_values(opts)
    local v = {}
    for _, kv in ipairs(RULE_KEYS) do
      C.sw_options_get_double(opts, kv[2], dbl)
      v[kv[1]] = dbl[0]
    end
    return v
  end

  -- ------------------------------------------------------------ limiter

  local Limiter = {}
  Limiter.__index = Limiter

  -- Put the rule opts in force: on the single limiter, or on every name of
  -- the registry and those created later (in a shared segment: for every
  -- process at once). The statistics are kept.
  local function apply_rule(self, opts)
    local rc
    if self._l ~= nil then
      rc = C.sw_limiter_set_rule(self._l, opts)
    elseif self._reg ~= nil then
      rc = C.sw_registry_set_rule(self._reg, opts)
    else
      return fail(M.ESTATE, "limiter is closed")
    end
    if rc ~= 0 then return nil, errmsg(rc), rc end
    self._opts = opts
    return true
  end

  -- self is a limiter (a method called with '.' instead of ':' gets a
  -- message, not a Lua error)
  local function bad_self(method)
    return fail(M.EINVAL, method .. ": call it as lim:" .. method .. "(...)")
  end

  -- The registry name of key: the key itself (a string, or a number),
  -- or what key_name(key) returns; nil, message, code for a bad key.
  local function name_of(self, key)
    if key == nil then
      return fail(M.EINVAL, "this limiter holds many keys (capacity " .. self.capacity
        .. "): entry/exit/stats need a key")
    end
    local name, err = key, nil
    local key_name = self._key_name
    if key_name then
      name, err = key_name(key)
      if type(name) ~= "string" then
        if err ~= nil then return nil, tostring(err), M.EINVAL end
        return fail(M.EINVAL, "key_name gave no name for key " .. show(key))
      end
    elseif type(key) == "number" then
      if key ~= key then return fail(M.EINVAL, "key must be a string or a number, not nan") end
      name = tostring(key)
    elseif type(key) ~= "string" then
      return fail(M.EINVAL, "key must be a string or a number, not " .. show(key))
    end
    if find(name, "\0", 1, true) then
      return fail(M.EINVAL, "key " .. show(key) .. " holds a NUL byte")
    end
    return name
  end

  -- The limiter of key in a registry-backed limiter, created on first use
  -- and cached per process (the registry owns it; the cache holds no more
  -- entries than the registry has names).
  local function lookup(self, key)
    local cache = self._cache
    if cache == nil then return fail(M.ESTATE, "limiter is closed") end
    local name, err, code = name_of(self, key)
    if name == nil then return nil, err, code end
    local rc = C.sw_registry_get(self._reg, name, out_lim)
    if rc ~= 0 then return nil, errmsg(rc), rc end
    local l = out_lim[0]
    cache[key] = l
    return l
  end

  -- The sw_limiter handle of key (the single limiter when there are no
  -- keys), created on first use; for entry_handle / exit_handle.
  local function handle(self, key)
    if type(self) ~= "table" then return bad_self("handle") end
    local l = self._l
    if l == nil then
      local cache = self._cache
      l = cache and cache[key]
      if l == nil then return lookup(self, key) end
    end
    return l
  end
  Limiter.handle = handle

  -- Checks of the hot path's arguments. Each hot function tests its
  -- arguments with comparisons the JIT compiles into guards and calls one
  -- of these only when a test fails: they build the message.
  local function bad_n(n)
    return whole(n, "n", 0, N_MAX)
  end
  local function bad_flag(v, name)
    return fail(M.EINVAL, name .. " must be true or false, not " .. show(v))
  end
  local function bad_time(t, what) -- what: "clock()" or an argument's name
    local got = what == "clock()" and "clock() returned " or what .. "="
    if type(t) ~= "number" then
      return fail(M.EINVAL, got .. show(t) .. ": want milliseconds (a number)")
    end
    if t ~= t then return fail(M.ETIME, got .. "nan: want milliseconds, not NaN") end
    return fail(M.ETIME, got .. show(t) .. ": want milliseconds in 0..2^62")
  end
  local function bad_rt(rt)
    if type(rt) ~= "number" then
      return fail(M.EINVAL, "rt must be a number of milliseconds, not " .. show(rt))
    end
    if rt ~= rt then return fail(M.ERANGE, "rt=nan is not a number") end
    return fail(M.ERANGE, "rt=" .. show(rt) .. " is outside 0..2147483647 milliseconds")
  end
  local function bad_handle(l)
    return fail(M.EINVAL, "the handle must be a sw_limiter * (lim:handle(key)), not " .. show(l))
  end

  -- Decide an entry on handle l: verdict, wait_s, retry_after_s, remaining,
  -- borrowed, would_block (a dry-run rule let through what it would have
  -- blocked: the verdict is "pass"), or nil, message, code.
  local function entry_on(self, l, n, prioritized)
    if n == nil then
      n = 1
    elseif type(n) ~= "number" or not (n >= 0 and n <= N_MAX) or n ~= floor(n) then
      return bad_n(n)
    end
    local flags = 0
    if prioritized then
      if prioritized ~= true then return bad_flag(prioritized, "prioritized") end
      flags = 1
    end
    local clock = self._clock
    local rc
    if clock then
      local t = clock()
      if type(t) ~= "number" or not (t >= 0 and t < T_MAX) then return bad_time(t, "clock()") end
      rc = C.sw_limiter_entry_at(l, floor(t), n, flags, dec)
    else
      rc = C.sw_limiter_entry(l, n, flags, dec)
    end
    if rc ~= 0 then return nil, errmsg(rc), rc end
    local v = dec.verdict
    if v == 0 then
      if dec.would_block ~= 0 then
        local ra = tonumber(dec.retry_after_ms)
        return "pass", 0, ra < 0 and huge or ra / 1000, tonumber(dec.remaining), false, true
      end
      return "pass", 0, 0, tonumber(dec.remaining), dec.borrowed ~= 0
    elseif v == 2 then
      return "wait", tonumber(dec.wait_ms) / 1000, 0, tonumber(dec.remaining),
        dec.borrowed ~= 0
    end
    local ra = tonumber(dec.retry_after_ms)
    return "block", 0, ra < 0 and huge or ra / 1000, tonumber(dec.remaining), false
  end

  local function entry_handle(self, l, n, prioritized)
    if type(self) ~= "table" then return bad_self("entry_handle") end
    if not ffi_istype(limiter_ptr, l) then return bad_handle(l) end
    return entry_on(self, l, n, prioritized)
  end
  Limiter.entry_handle = entry_handle

  -- The lean pair for integrations that keep handles themselves
  -- (resty.libsw): decide(l, t, n, flags) (flags: 1 prioritized, 2 no
  -- exit will follow, SW_ENTRY_NO_EXIT) returns the verdict code (0 pass,
  -- 1 block, 2 wait) with wait_ms or retry_after_ms (and, for a pass that a
  -- dry-run rule would have blocked, 0, retry_after_ms, true), or a
  -- negative sw_err code and its message; finish(l, t, rt_ms, failed)
  -- returns 0, or a negative code and its message. t is the time in ms, or
  -- nil for libsw's clock. (api.error_message(code) gives the message of a
  -- failure of the C library right after it.)
  local function bad_lean(_, err, code)
    return code, err
  end
  local function decide(l, t, n, flags)
    if not ffi_istype(limiter_ptr, l) then return bad_lean(bad_handle(l)) end
    if type(n) ~= "number" or not (n >= 0 and n <= N_MAX) or n ~= floor(n) then
      return bad_lean(bad_n(n))
    end
    if flags ~= 0 and flags ~= 1 and flags ~= 2 and flags ~= 3 then
      return bad_lean(fail(M.EINVAL, "flags must be 0..3 (1 prioritized, 2 no exit), not " ..
        show(flags)))
    end
    local rc
    if t then
      if type(t) ~= "number" or not (t >= 0 and t < T_MAX) then return bad_lean(bad_time(t, "t")) end
      rc = C.sw_limiter_entry_at(l, floor(t), n, flags, dec)
    else
      rc = C.sw_limiter_entry(l, n, flags, dec)
    end
    if rc ~= 0 then return rc, errmsg(rc) end
    local v = dec.verdict
    if v == 0 then
      if dec.would_block ~= 0 then return 0, 0, tonumber(dec.retry_after_ms), true end
      return 0
    end
    if v == 2 then return 2, tonumber(dec.wait_ms) end
    return 1, 0, tonumber(dec.retry_after_ms)
  end
  api.decide = decide
  -- decide()'s decision (one reused cdata, overwritten by the next call):
  -- resty.libsw copies it to cancel an admitted entry (all or nothing)
  api.decision = dec

  -- The exit flags of finish's rt_ms (whole ms) and failed, or nil,
  -- message, code.
  local function finish_flags(rt_ms, failed)
    if type(rt_ms) ~= "number" or not (rt_ms >= 0 and rt_ms <= RT_MAX_MS) or rt_ms ~= floor(rt_ms) then
      return whole(rt_ms, "rt_ms", 0, RT_MAX_MS)
    end
    if failed then
      if failed ~= true then return bad_flag(failed, "failed") end
      return 1
    end
    return 0
  end

  local function finish(l, t, rt_ms, failed)
    if not ffi_istype(limiter_ptr, l) then return bad_lean(bad_handle(l)) end
    local flags, err, code = finish_flags(rt_ms, failed)
    if flags == nil then return code, err end
    local rc
    if t then
      if type(t) ~= "number" or not (t >= 0 and t < T_MAX) then return bad_lean(bad_time(t, "t")) end
      rc = C.sw_limiter_exit_at(l, floor(t), rt_ms, 1, flags)
    else
      rc = C.sw_limiter_exit(l, rt_ms, 1, flags)
    end
    if rc ~= 0 then return rc, errmsg(rc) end
    return 0
  end
  api.finish = finish
  function api.error_message(code)
    local ok, err, ecode = whole(code, "code", INT_MIN, INT_MAX)
    if not ok then return nil, err, ecode end
    return errmsg(code)
  end

  -- ------------------------------------------------------- cluster leases
  -- For whoever talks to Redis for cluster rules (resty.libsw's refiller,
  -- docs/cluster.md): next_call says what to send, apply takes the reply
  -- of the lease script, failed reports a timeout or an error. t: libsw's
  -- clock, ms (api.now_ms()).

  function api.lease_script()
    return ffi_string(C.sw_lease_script())
  end

  -- l a limiter handle, t a time (ms), call a sw_lease_call (when given)
  local function lease_check(l, t, call)
    if not ffi_istype(limiter_ptr, l) then return bad_handle(l) end
    if t ~= nil and (type(t) ~= "number" or not (t >= 0 and t < T_MAX) or t ~= floor(t)) then
      return bad_time(t, "t")
    end
    if call ~= false and not ffi_istype(lease_call_t, call) then
      return fail(M.EINVAL, "call must be a sw_lease_call (lease_next_call), not " .. show(call))
    end
    return true
  end

  -- A new sw_lease_call when l needs a Redis call now (it is then claimed:
  -- one call at a time across processes), false when not, or nil, message,
  -- code.
  function api.lease_next_call(l, t)
    local ok, err, code = lease_check(l, t, false)
    if not ok then return nil, err, code end
    if t == nil then return bad_time(t, "t") end
    local call = ffi_new("sw_lease_call")
    local rc = C.sw_lease_next_call(l, t, call)
    if rc < 0 then return nil, errmsg(rc), rc end
    return rc == 1 and call
  end

  -- The arguments of the script call (ARGV: threshold, want, bucket_ms,
  -- buckets, target, refund, refund_bucket), as decimal strings.
  local function dec_string(v) return (tostring(v):gsub("U?LL$", "")) end
  function api.lease_args(call)
    if not ffi_istype(lease_call_t, call) then
      return fail(M.EINVAL, "call must be a sw_lease_call (lease_next_call), not " .. show(call))
    end
    return dec_string(call.threshold), dec_string(call.want), dec_string(call.bucket_ms),
      dec_string(call.buckets), dec_string(call.target), dec_string(call.refund),
      dec_string(call.refund_bucket)
  end

  -- The reply of the lease script: the bucket (ms), the tokens granted and
  -- Redis's time (ms), whole numbers.
  function api.lease_apply(l, t, call, bucket, granted, redis_now_ms)
    local ok, err, code = lease_check(l, t, call)
    if not ok then return nil, err, code end
    if t == nil then return bad_time(t, "t") end
    for _, a in ipairs { { bucket, "bucket" }, { granted, "granted" },
                         { redis_now_ms, "redis_now_ms" } } do
      ok, err, code = whole(a[1], a[2], -T_MAX, T_MAX)
      if not ok then return nil, err, code end
    end
    local rc = C.sw_lease_apply(l, t, call, bucket, granted, redis_now_ms)
    if rc ~= 0 then return nil, errmsg(rc), rc end
    return true
  end

  function api.lease_failed(l, t, call)
    local ok, err, code = lease_check(l, t, call)
    if not ok then return nil, err, code end
    if t == nil then return bad_time(t, "t") end
    local rc = C.sw_lease_failed(l, t, call)
    if rc ~= 0 then return nil, errmsg(rc), rc end
    return true
  end

  local lease_info = ffi_new("sw_lease_info")
  function api.lease_stats(l, t)
    local ok, err, code = lease_check(l, t, false)
    if not ok then return nil, err, code end
    local rc = C.sw_lease_stats(l, t or C.sw_now_ms(), lease_info)
    if rc ~= 0 then return nil, errmsg(rc), rc end
    local i = lease_info
    return {
      calls = tonumber(i.calls), granted = tonumber(i.granted), tokens = tonumber(i.tokens),
      offset_ms = tonumber(i.offset_ms), down_since_ms = tonumber(i.down_since_ms),
      up = i.up ~= 0, need = i.need ~= 0,
    }
  end

  -- verdict, wait_s, retry_after_s, remaining, borrowed
  -- or nil, message, code
  local function entry(self, key, n, prioritized)
    if type(self) ~= "table" then return bad_self("entry") end
    local l = self._l
    if l == nil then
      local cache = self._cache
      l = cache and cache[key]
      if l == nil then
        local err, code
        l, err, code = lookup(self, key)
        if l == nil then return nil, err, code end
      end
    end
    return entry_on(self, l, n, prioritized)
  end
  Limiter.entry = entry

  -- The arguments of an exit as C takes them: rt in milliseconds, as every
  -- response time of libsw (rounded to whole ms; below 0 counts as 0), n
  -- (default 1), failed -> flags (an exception); or nil, message, code.
  local function exit_args(rt, failed, n)
    local rt_ms = 0
    if rt ~= nil then
      if type(rt) ~= "number" or not (rt <= RT_MAX_MS) then return bad_rt(rt) end
      rt_ms = floor(rt + 0.5)
      if rt_ms < 0 then rt_ms = 0 end
    end
    if n == nil then
      n = 1
    elseif type(n) ~= "number" or not (n >= 0 and n <= N_MAX) or n ~= floor(n) then
      return bad_n(n)
    end
    local flags = 0
    if failed then
      if failed ~= true then return bad_flag(failed, "failed") end
      flags = 1
    end
    return rt_ms, n, flags
  end

  -- The end of an admitted entry on handle l (exit_args).
  local function exit_on(self, l, rt, failed, n)
    local rt_ms, flags
    rt_ms, n, flags = exit_args(rt, failed, n)
    if rt_ms == nil then return nil, n, flags end
    local clock = self._clock
    local rc
    if clock then
      local t = clock()
      if type(t) ~= "number" or not (t >= 0 and t < T_MAX) then return bad_time(t, "clock()") end
      rc = C.sw_limiter_exit_at(l, floor(t), rt_ms, n, flags)
    else
      rc = C.sw_limiter_exit(l, rt_ms, n, flags)
    end
    if rc ~= 0 then return nil, errmsg(rc), rc end
    return true
  end

  local function exit_handle(self, l, rt, failed, n)
    if type(self) ~= "table" then return bad_self("exit_handle") end
    if not ffi_istype(limiter_ptr, l) then return bad_handle(l) end
    return exit_on(self, l, rt, failed, n)
  end
  Limiter.exit_handle = exit_handle

  -- The end of an admitted entry of key: rt in milliseconds, failed counts
  -- an exception.
  local function exit(self, key, rt, failed, n)
    if type(self) ~= "table" then return bad_self("exit") end
    local l = self._l
    if l == nil then
      local cache = self._cache
      l = cache and cache[key]
      if l == nil then
        local err, code
        l, err, code = lookup(self, key)
        if l == nil then return nil, err, code end
      end
    end
    return exit_on(self, l, rt, failed, n)
  end
  Limiter.exit = exit

  local function now_of(self)
    local clock = self._clock
    if clock then
      local t = clock()
      if type(t) ~= "number" or not (t >= 0 and t < T_MAX) then return bad_time(t, "clock()") end
      return floor(t)
    end
    return tonumber(C.sw_now_ms())
  end

  -- The handle of an existing key (the single limiter for key nil), or
  -- nil, message, code (libsw.ENOTFOUND for a key never used).
  local function existing(self, key)
    local l = self._l
    if l ~= nil then return l end
    if self._reg == nil then return fail(M.ESTATE, "limiter is closed") end
    local name, err, code = name_of(self, key)
    if name == nil then return nil, err, code end
    local rc = C.sw_registry_find(self._reg, name, out_lim)
    if rc < 0 then return nil, errmsg(rc), rc end
    if rc == 0 then return fail(M.ENOTFOUND, "no such key: " .. show(key)) end
    return out_lim[0]
  end

  local function stats_of(self, l, t)
    local node = C.sw_limiter_node(l)
    local sec = C.sw_node_second_metric(node)
    local s = {
      pass = tonumber(C.sw_metric_pass_at(sec, t)),
      block = tonumber(C.sw_metric_block_at(sec, t)),
      pass_qps = tonumber(C.sw_node_pass_qps_at(node, t)),
      block_qps = tonumber(C.sw_node_block_qps_at(node, t)),
      success_qps = tonumber(C.sw_node_success_qps_at(node, t)),
      exception_qps = tonumber(C.sw_node_exception_qps_at(node, t)),
      total_qps = tonumber(C.sw_node_total_qps_at(node, t)),
      would_block_qps = tonumber(C.sw_node_would_block_qps_at(node, t)),
      avg_rt = tonumber(C.sw_node_avg_rt_at(node, t)),
      -- no request completed in the window: no minimum (libsw's "no
      -- sample" value, SW_OPT_MAX_RT_MS, is not a response time)
      min_rt = C.sw_node_success_qps_at(node, t) > 0 and tonumber(C.sw_node_min_rt_at(node, t))
        or nil,
      concurrency = tonumber(C.sw_node_concurrency(node)),
      waiting = tonumber(C.sw_node_waiting_at(node, t)),
      total_request = tonumber(C.sw_node_total_request_at(node, t)),
      total_pass = tonumber(C.sw_node_total_pass_at(node, t)),
      total_success = tonumber(C.sw_node_total_success_at(node, t)),
      total_exception = tonumber(C.sw_node_total_exception_at(node, t)),
      total_block = tonumber(C.sw_node_block_request_at(node, t)),
    }
    local rc = C.sw_limiter_get_rule(l, self._scratch)
    if rc == 0 then
      local rv = rule_values(self._scratch)
      s.threshold = rv.threshold
      s.grade = rv.grade == 0 and "concurrency" or "qps"
      s.behavior = BEHAVIOR_NAMES[rv.behavior]
      s.dry_run = rv.dry_run ~= 0
      if rv.cluster ~= 0 then s.lease = api.lease_stats(l, t) end
    end
    return s
  end

  -- Statistics of key (nil for a single limiter): a table of rates per
  -- second, counts, RTs in milliseconds, requests in flight and the rule. A key
  -- never used gives nil, "no such key".
  function Limiter:stats(key)
    if getmetatable(self) ~= Limiter then return bad_self("stats") end
    local l, err, code = existing(self, key)
    if l == nil then return nil, err, code end
    local t
    t, err, code = now_of(self)
    if t == nil then return nil, err, code end
    return stats_of(self, l, t)
  end

  -- Create key's limiter now if it does not exist (no entry is counted).
  function Limiter:ensure(key)
    if getmetatable(self) ~= Limiter then return bad_self("ensure") end
    if self._l ~= nil then return true end
    local l, err, code = lookup(self, key)
    if l == nil then return nil, err, code end
    return true
  end

  -- Names in a registry-backed limiter, in creation order.
  function Limiter:keys()
    if getmetatable(self) ~= Limiter then return bad_self("keys") end
    local reg = self._reg
    if reg == nil then return {} end
    local list = {}
    local n = C.sw_registry_count(reg)
    for i = 0, n - 1 do
      local rc = C.sw_registry_at(reg, i, nil, out_name)
      if rc == 0 then list[#list + 1] = ffi_string(out_name[0]) end
    end
    return list
  end

  function Limiter:count()
    if getmetatable(self) ~= Limiter then return bad_self("count") end
    local reg = self._reg
    if reg == nil then return self._l and 1 or 0 end
    return tonumber(C.sw_registry_count(reg))
  end

  -- Replace the rule (qps / concurrency, behavior, ...) of this limiter:
  -- of every key, now and later, and in a shared segment for every process
  -- at once. The statistics are kept.
  function Limiter:set_rule(o)
    if getmetatable(self) ~= Limiter then return bad_self("set_rule") end
    if type(o) ~= "table" then
      return fail(M.EINVAL, "set_rule needs a table of options, not " .. show(o))
    end
    local r, err, code = rule_of(o)
    if not r then return nil, err, code end
    local opts
    opts, err, code = make_options(r, nil)
    if not opts then return nil, err, code end
    return apply_rule(self, opts)
  end

  -- The rule keys of the sw_options opts as options (those of set_rule).
  local function options_of(opts)
    local rv = rule_values(opts)
    local o = {
      behavior = BEHAVIOR_NAMES[rv.behavior], strict = rv.strict ~= 0,
      max_queue = rv.max_queue_ms / 1000, warm_up = rv.warm_up_sec,
      cold_factor = rv.cold_factor, dry_run = rv.dry_run ~= 0,
    }
    if rv.grade == 0 then o.concurrency = rv.threshold else o.qps = rv.threshold end
    if rv.cluster ~= 0 then
      o.cluster = {
        lease = rv.cluster_lease, nodes = rv.cluster_nodes,
        failure = FAILURE_NAMES[rv.cluster_failure],
        timeout = rv.cluster_timeout_ms / 1000, retry = rv.cluster_retry_ms / 1000,
        low_water_pct = rv.cluster_low_water_pct,
      }
    end
    return o
  end

  -- The rule of limiter l as options (scratch: a sw_options to fill).
  local function rule_options(l, scratch)
    local rc = C.sw_limiter_get_rule(l, scratch)
    if rc ~= 0 then return nil, errmsg(rc), rc end
    return options_of(scratch)
  end

  -- The rule in force for key (nil for a single limiter), as options.
  function Limiter:rule(key)
    if getmetatable(self) ~= Limiter then return bad_self("rule") end
    local l, err, code = existing(self, key)
    if l == nil then return nil, err, code end
    return rule_options(l, self._scratch)
  end

  -- The rule in force in the registry segment name (as Limiter:rule gives
  -- it), read without attaching for writing and without changing it; nil,
  -- message, code when there is none (ENOTFOUND: no such segment, or no
  -- limiter in it yet; ETYPE: a keyed table).
  function api.segment_rule(name)
    local ok, err, code = c_string(name, "segment name")
    if not ok then return nil, err, code end
    local ps = ffi_new("sw_segment *[1]")
    local rc = C.sw_segment_open(ps, name, 0, nil, M.SEGMENT_READONLY)
    if rc ~= 0 then return nil, errmsg(rc), rc end
    local seg = ffi_gc(ps[0], C.sw_segment_close)
    local reg = C.sw_segment_registry(seg)
    local o
    if C.sw_registry_count(reg) == 0 or C.sw_registry_at(reg, 0, out_lim, nil) ~= 0 then
      o, err, code = fail(M.ENOTFOUND, "segment " .. name .. " holds no limiter yet")
    else
      local scratch
      scratch, err, code = make_options({}, nil)
      if scratch then o, err, code = rule_options(out_lim[0], scratch) end
    end
    ffi_gc(seg, nil)
    C.sw_segment_close(seg)
    return o, err, code
  end

  -- Switch dry-run on or off, keeping the rest of the rule in force (of a
  -- registry: the rule of its first name, which set_rule gave them all, or
  -- ours while it has none), for every name, now and later.
  function Limiter:set_dry_run(on)
    if getmetatable(self) ~= Limiter then return bad_self("set_dry_run") end
    if type(on) ~= "boolean" then
      return fail(M.EINVAL, "set_dry_run needs true or false, not " .. show(on))
    end
    if self._l == nil and self._reg == nil then return fail(M.ESTATE, "limiter is closed") end
    local current = self._l
    if current == nil and C.sw_registry_count(self._reg) > 0
        and C.sw_registry_at(self._reg, 0, out_lim, nil) == 0 then
      current = out_lim[0]
    end
    local opts, err, code = make_options(current and {} or rule_values(self._opts), nil)
    if not opts then return nil, err, code end
    local rc = current and C.sw_limiter_get_rule(current, opts) or 0
    if rc == 0 then rc = C.sw_options_set(opts, C.SW_OPT_DRY_RUN, on and 1 or 0) end
    if rc ~= 0 then return nil, errmsg(rc), rc end
    return apply_rule(self, opts)
  end

  -- Release the C objects now (the GC does it otherwise). A shared segment
  -- stays for the other processes.
  function Limiter:close()
    if getmetatable(self) ~= Limiter then return bad_self("close") end
    if self._l ~= nil and self._owner then
      ffi_gc(self._l, nil)
      C.sw_limiter_free(self._l)
    end
    if self._seg ~= nil then
      ffi_gc(self._seg, nil)
      C.sw_segment_close(self._seg)
    elseif self._reg ~= nil then
      ffi_gc(self._reg, nil)
      C.sw_registry_free(self._reg)
    end
    self._l, self._reg, self._seg, self._cache = nil, nil, nil, nil
  end

  function Limiter:segment_size()
    if getmetatable(self) ~= Limiter then return bad_self("segment_size") end
    if self._seg == nil then return fail(M.ESTATE, "not a shared segment (or closed)") end
    return tonumber(C.sw_segment_size(self._seg))
  end

  -- The options of libsw.limiter and libsw.keyed about time and segments:
  -- clock, reset, create, segment (a name without NUL), and the owner of a
  -- new segment into g (user / group, names or ids, become segment_uid /
  -- segment_gid; without a segment, no owner and no mode). true, or nil,
  -- message, code.
  local function shared_options(o, g)
    if o.clock ~= nil and type(o.clock) ~= "function" then
      return fail(M.EINVAL, "clock must be a function returning milliseconds, not " .. show(o.clock))
    end
    for _, k in ipairs { "reset", "create" } do
      local ok, err, code = boolean(o[k], k)
      if not ok then return nil, err, code end
    end
    local segment = o.segment
    if segment == nil then
      g.segment_mode, g.segment_uid, g.segment_gid = nil, nil, nil
      return true
    end
    local ok, err, code = c_string(segment, "segment")
    if not ok then return nil, err, code end
    if o.user ~= nil or o.group ~= nil then
      local u, gg, c2 = api.user_ids(o.user, o.group)
      if not u then return nil, gg, c2 end
      if o.user ~= nil then g.segment_uid = u end
      if gg ~= -1 then g.segment_gid = gg end
    end
    return true
  end

  -- SW_SEGMENT_* flags of the options create (default true) and reset.
  local function segment_flags(o)
    local flags = 0
    if o.create ~= false then flags = flags + M.SEGMENT_CREATE end
    if o.reset then flags = flags + M.SEGMENT_RESET end
    return flags
  end

  -- libsw.limiter{ qps = N | concurrency = N, behavior = ..., max_queue = s,
  --   warm_up = s, cold_factor = k, strict = bool, prioritized = bool,
  --   interval = s, windows = n, minute_interval = s, minute_windows = n,
  --   occupy_timeout = s, stripes = n, max_rt = s,
  --   capacity = n, segment = name, reset = bool, create = bool,
  --   mode = 0660, uid = n | user = "name", gid = n | group = "name",
  --   segment_max_mb = n (a new segment over 2048 MiB needs it),
  --   clock = function() return ms end,
  --   key_name = function(key) return name end }  -- keys -> registry names
  function api.limiter(o)
    if type(o) ~= "table" then
      return fail(M.EINVAL, "libsw.limiter needs a table of options, not " .. show(o))
    end
    local r, err, code = rule_of(o)
    if not r then return nil, err, code end
    local g
    g, err, code = geometry_of(o)
    if not g then return nil, err, code end
    if o.key_name ~= nil and type(o.key_name) ~= "function" then
      return fail(M.EINVAL, "key_name must be a function(key) returning a name, not "
        .. show(o.key_name))
    end
    local ok
    ok, err, code = shared_options(o, g)
    if not ok then return nil, err, code end
    local segment, capacity = o.segment, o.capacity
    if capacity ~= nil then
      capacity, err, code = whole(capacity, "capacity", 1, 0xffffffff)
      if not capacity then return nil, err, code end
    end
    local opts
    opts, err, code = make_options(r, g)
    if not opts then return nil, err, code end
    local pp_scratch = ffi_new("sw_options *[1]")
    local rc = C.sw_options_create(pp_scratch)
    if rc ~= 0 then return nil, errmsg(rc), rc end
    local self = setmetatable({
      _opts = opts,
      _scratch = ffi_gc(pp_scratch[0], C.sw_options_free),
      _clock = o.clock, _key_name = o.key_name, capacity = capacity or 1,
    }, Limiter)
    if segment then
      local ps = ffi_new("sw_segment *[1]")
      rc = C.sw_segment_open(ps, segment, capacity or SEGMENT_NAMES, opts, segment_flags(o))
      if rc == M.EGEOMETRY and capacity == nil and not o.reset then
        -- no capacity given: a segment made with another one (an older
        -- default) is taken as it is
        rc = C.sw_segment_open(ps, segment, 0, opts, M.SEGMENT_ATTACH)
      end
      if rc ~= 0 then return nil, errmsg(rc), rc end
      self._seg = ffi_gc(ps[0], C.sw_segment_close)
      self._reg = C.sw_segment_registry(self._seg)
      self._cache = {}
      -- our rule for every name, also those made by a process with an older
      -- configuration (e.g. before an nginx reload)
      rc = C.sw_registry_set_rule(self._reg, opts)
      if rc ~= 0 then return nil, errmsg(rc), rc end
      self.capacity = capacity or C.sw_registry_capacity(self._reg)
      self.segment = segment
    elseif capacity then
      local pr = ffi_new("sw_registry *[1]")
      rc = C.sw_registry_create(pr, capacity, opts)
      if rc ~= 0 then return nil, errmsg(rc), rc end
      self._reg = ffi_gc(pr[0], C.sw_registry_free)
      self._cache = {}
    else
      rc = C.sw_limiter_create(out_lim, opts)
      if rc ~= 0 then return nil, errmsg(rc), rc end
      self._l = ffi_gc(out_lim[0], C.sw_limiter_free)
      self._owner = true
    end
    return self
  end

  api.Limiter = Limiter

  -- keyed tables (libsw/keyed.lua): built on the same checks and options
  require("libsw.keyed")(api, C, {
    M = M, fail = fail, whole = whole, show = show, boolean = boolean, c_string = c_string,
    errmsg = errmsg, option_number = option_number, rule_of = rule_of,
    geometry_of = geometry_of, make_options = make_options, rule_values = rule_values,
    shared_options = shared_options, segment_flags = segment_flags,
    bad_n = bad_n, bad_time = bad_time, exit_args = exit_args, finish_flags = finish_flags,
    now_of = now_of,
    bad_lean = bad_lean, BEHAVIOR_NAMES = BEHAVIOR_NAMES,
    N_MAX = N_MAX, T_MAX = T_MAX,
  })
  -- circuit breakers (libsw/breaker.lua)
  require("libsw.breaker")(api, C, {
    M = M, fail = fail, show = show, errmsg = errmsg, segment_flags = segment_flags,
  })
  -- flow rules as JSON (libsw/rules.lua)
  require("libsw.rules")(api, C, {
    M = M, fail = fail, errmsg = errmsg, show = show, make_options = make_options,
    options_of = options_of,
  })
  return api
end

-- --------------------------------------------------------------- loading

local loaded -- the api table once the library is loaded

-- Load libsw.so (path, else $SW_LIB, else package.cpath, else the usual
-- directories) and fill the module. Loading again with another path is an
-- error; without a path, or with the same one, it returns the module.
function M.load(path)
  if loaded then
    if path == nil or path == loaded.path then return M end
    return nil, "libsw: already loaded from " .. loaded.path .. ", not loading " .. show(path),
      M.EEXIST
  end
  local p, err, code = find_library(path)
  if not p then return nil, err, code end
  local ok, lib = pcall(ffi.load, p)
  if not ok then return nil, "libsw: cannot load " .. p .. ": " .. tostring(lib), M.EIO end
  local okv, ver = pcall(function() return lib.sw_version() end)
  if not okv then
    return nil, "libsw: " .. p .. " has no sw_version: " .. tostring(ver), M.EABI
  end
  local major = floor(tonumber(ver) / 65536)
  if major ~= ABI_MAJOR then
    return nil, ("libsw: %s is version %s, this binding needs %d.x"):format(
      p, ffi_string(lib.sw_version_string()), ABI_MAJOR), M.EVERSION
  end
  loaded = build(lib, p)
  for k, v in pairs(loaded) do M[k] = v end
  return M
end

-- Until loaded, the API functions load the library on first use.
local function lazy(name)
  return function(...)
    local ok, err, code = M.load()
    if not ok then return nil, err, code end
    return M[name](...)
  end
end
for _, name in ipairs { "limiter", "keyed", "breaker", "version", "version_hex", "now_ms", "now_ns",
                        "clock_resolution_ns", "strerror", "err_name", "last_error",
                        "unlink_segment", "segment_rule", "user_ids", "clock_use", "geteuid",
                        "getpid" } do
  M[name] = lazy(name)
end

function M.loaded()
  return loaded ~= nil
end

return M
