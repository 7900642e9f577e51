/* SPDX-License-Identifier: Apache-2.0 */
/* <sw/sw.h>: libsw, Sentinel-style sliding-window statistics.
 *
 * Conventions (see docs/api.md for the full reference):
 *  - Handles are opaque; every *_create has a *_free that accepts NULL.
 *  - Functions returning int return 0 (SW_OK) or a negative sw_err code;
 *    a function that also reports "found / not found" returns 1 / 0.
 *    Functions returning int64_t return a value >= 0 or a negative code;
 *    functions returning double return a negative code (as a double) on error.
 *    After a failure, sw_last_error() names the bad value on this thread.
 *  - Every function that reads the clock has an *_at twin that takes the time
 *    in milliseconds; times must be >= 0.
 *  - Unless a comment says otherwise, functions are thread-safe on a shared
 *    handle, except *_free, which must not race with any other use, and
 *    sw_options, which a thread fills before handing it to a constructor.
 */
#ifndef SW_SW_H
#define SW_SW_H

#include <stddef.h>
#include <stdint.h>

#include <sw/plugin.h>
#include <sw/version.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(SW_BUILDING) && defined(__GNUC__)
#define SW_API __attribute__((visibility("default")))
#else
#define SW_API
#endif

/* ------------------------------------------------------------------ errors */

/* XX(name, value, message). Values are part of the ABI: never renumber. */
#define SW_ERRNO_MAP(XX)                                                       \
  XX(EINVAL, -1, "invalid argument")                                           \
  XX(ENULL, -2, "required pointer argument is NULL")                           \
  XX(ENOMEM, -3, "out of memory")                                              \
  XX(ESIZE, -4, "invalid size or geometry")                                    \
  XX(EOVERFLOW, -5, "size or value overflows")                                 \
  XX(ETIME, -6, "time out of range")                                           \
  XX(ERANGE, -7, "value out of range")                                         \
  XX(ENOTFOUND, -8, "no such name")                                            \
  XX(EEXIST, -9, "name already registered")                                    \
  XX(EFULL, -10, "capacity exhausted")                                         \
  XX(EABI, -11, "plugin ABI mismatch")                                         \
  XX(EPLUGIN, -12, "plugin could not be loaded")                               \
  XX(EVERSION, -13, "layout version mismatch")                                 \
  XX(EGEOMETRY, -14, "geometry mismatch")                                      \
  XX(ECORRUPT, -15, "corrupt data")                                            \
  XX(EFOREIGN, -16, "not a libsw object")                                      \
  XX(EIO, -17, "input/output error")                                           \
  XX(EPERM, -18, "permission denied")                                          \
  XX(ENOTSUP, -19, "operation not supported")                                  \
  XX(ESTATE, -20, "object in the wrong state")                                 \
  XX(ETYPE, -21, "wrong bucket type")                                          \
  XX(EBUSY, -22, "resource busy: a lock wait timed out")

typedef enum sw_err {
  SW_OK = 0,
#define SW__ERR_ENUM(name, value, msg) SW_##name = (value),
  SW_ERRNO_MAP(SW__ERR_ENUM)
#undef SW__ERR_ENUM
} sw_err;

/* Static text for a code ("invalid argument"); "unknown error" otherwise. */
SW_API const char *sw_strerror(int err);
/* The code's name ("SW_EINVAL"); "SW_UNKNOWN" otherwise. */
SW_API const char *sw_err_name(int err);
/* Detail message of the last failing libsw call on the calling thread, naming
 * the bad value ("sample_count=3 does not divide interval_ms=1000"). Read it
 * right after a call failed: successful calls do not clear it (that would
 * cost the hot path a store). Borrowed; "" before any failure. */
SW_API const char *sw_last_error(void);

/* -------------------------------------------------------------- allocator */

/* Use malloc_fn / free_fn for every allocation of libsw (NULL, NULL: the C
 * library's). Set it before any other libsw call: memory is freed with the
 * functions in place when it is freed. */
typedef void *(*sw_malloc_fn)(size_t size);
typedef void (*sw_free_fn)(void *ptr);
SW_API int sw_set_alloc_funcs(sw_malloc_fn malloc_fn, sw_free_fn free_fn);

/* ----------------------------------------------------------------- version */

/* SW_VERSION_HEX of the library actually loaded. */
SW_API uint32_t sw_version(void);
SW_API const char *sw_version_string(void);

/* ------------------------------------------------------------------- clock */

/* Clock sources (sw_clock_use). The window clock places requests in windows
 * (sw_now_ms and every call without a time argument); the duration clock
 * measures what must be precise: pacing and warm-up pacing waits, response
 * times a caller takes with sw_now_ns. */
#define SW_CLOCK_MONOTONIC 0u        /* both CLOCK_MONOTONIC: precise, ~25 ns a read */
#define SW_CLOCK_MONOTONIC_COARSE 1u /* both CLOCK_MONOTONIC_COARSE: one tick of resolution */
#define SW_CLOCK_DEFAULT 2u          /* windows coarse (~4 ns), durations CLOCK_MONOTONIC */

/* Current time in milliseconds from the window clock (by default
 * CLOCK_MONOTONIC_COARSE: up to one kernel tick behind CLOCK_MONOTONIC,
 * never ahead; sw_clock_resolution_ns says how far). Thread-safe. */
SW_API int64_t sw_now_ms(void);
/* Current time in nanoseconds from the duration clock (CLOCK_MONOTONIC by
 * default; a custom clock's milliseconds x 10^6): for response times. */
SW_API int64_t sw_now_ns(void);
/* Resolution of sw_now_ms in nanoseconds (at least 1 ms): the kernel tick
 * of the coarse clock, 1 ms for the precise or a custom clock. SW_EIO if
 * the system cannot tell. */
SW_API int64_t sw_clock_resolution_ns(void);
/* Select the process-wide clock sources (SW_CLOCK_DEFAULT initially). Not
 * meant to race with readers. Processes sharing a segment should use the
 * same source: a process on a coarser clock sees windows turn later. */
SW_API int sw_clock_use(uint32_t source);
/* Install a custom clock (tests, simulations) for windows and durations;
 * NULL restores the sources chosen with sw_clock_use. fn must return
 * milliseconds >= 0. Not meant to race with readers: a reader may pair the
 * old fn with the new user. */
typedef int64_t (*sw_clock_fn)(void *user);
SW_API int sw_clock_set_custom(sw_clock_fn fn, void *user);

/* ----------------------------------------------------------------- options */

/* Construction options, set by key with bounds checked at once (zstd style);
 * NULL options mean all defaults. */
typedef struct sw_options sw_options;

/* Flow rule grades and behaviours (Sentinel's RuleConstant values). */
#define SW_GRADE_CONCURRENCY 0 /* FLOW_GRADE_THREAD: requests in flight */
#define SW_GRADE_QPS 1         /* FLOW_GRADE_QPS: passes per second */
#define SW_BEHAVIOR_REJECT 0        /* DefaultController (+ prioritized borrowing) */
#define SW_BEHAVIOR_WARM_UP 1       /* WarmUpController: token bucket, cold factor */
#define SW_BEHAVIOR_PACING 2        /* RateLimiterController: leaky bucket, queueing */
#define SW_BEHAVIOR_WARM_UP_PACING 3 /* WarmUpRateLimiterController */

typedef enum sw_option {
  /* metric */
  SW_OPT_OCCUPIABLE = 1, /* 0 plain Bucket (default), 1 Occupiable */
  SW_OPT_STRIPES = 2,    /* counter stripes per window, power of two 1..64 (default 4) */
  SW_OPT_MAX_RT_MS = 3,  /* statistic max RT, the initial min RT (default 5000) */
  /* node */
  SW_OPT_SECOND_SAMPLE_COUNT = 4, /* per-second array: windows (default 2) */
  SW_OPT_SECOND_INTERVAL_MS = 5,  /* per-second array: interval (default 1000) */
  SW_OPT_MINUTE_SAMPLE_COUNT = 6, /* per-minute array: windows (default 60) */
  SW_OPT_MINUTE_INTERVAL_MS = 7,  /* per-minute array: interval (default 60000) */
  SW_OPT_OCCUPY_TIMEOUT_MS = 8,   /* longest wait of a borrowed pass (default 500) */
  /* flow rule */
  SW_OPT_GRADE = 9,          /* SW_GRADE_QPS (default) or SW_GRADE_CONCURRENCY */
  SW_OPT_BEHAVIOR = 10,      /* SW_BEHAVIOR_* (default reject) */
  SW_OPT_THRESHOLD = 11,     /* QPS or concurrent requests, >= 0, fractional allowed */
  SW_OPT_MAX_QUEUE_MS = 12,  /* pacing: longest queueing time (default 500) */
  SW_OPT_WARM_UP_SEC = 13,   /* warm-up period in seconds (default 10) */
  SW_OPT_COLD_FACTOR = 14,   /* warm-up cold factor, integer > 1 (default 3) */
  SW_OPT_STRICT = 15,        /* 1: check-and-count is atomic (default); 0: Sentinel's check-then-add */
  /* shared segment */
  SW_OPT_SEGMENT_MODE = 16,  /* file mode of a new segment (default 0600) */
  SW_OPT_SEGMENT_UID = 17,   /* owner of a new segment, -1: the creator (default) */
  SW_OPT_SEGMENT_GID = 18,   /* group of a new segment, -1: the creator's (default) */
  /* cluster rule (docs/cluster.md): the threshold holds for the whole fleet */
  SW_OPT_CLUSTER = 19,              /* 1: fleet-wide on Redis (QPS grade, reject behaviour) */
  SW_OPT_CLUSTER_LEASE = 20,        /* tokens taken per Redis call, L (default 100) */
  SW_OPT_CLUSTER_FAILURE = 21,      /* SW_CLUSTER_* policy while Redis is down */
  SW_OPT_CLUSTER_NODES = 22,        /* expected nodes: the local fallback is threshold / nodes */
  SW_OPT_CLUSTER_TIMEOUT_MS = 23,   /* a Redis call slower than this fails (default 100) */
  SW_OPT_CLUSTER_RETRY_MS = 24,     /* while down, try Redis again this often (default 1000) */
  SW_OPT_CLUSTER_LOW_WATER_PCT = 25, /* refill when the lease falls below this % of L (25) */
  SW_OPT_DRY_RUN = 26,              /* 1: decide and count "would block", but let everything
                                       pass (shadow mode; switchable with set_rule) */
  SW_OPT_SEGMENT_MAX_MB = 27,       /* largest segment an open may create, MiB (default 2048) */
  /* keyed table (sw_keyed_*): the rule's window is SW_OPT_SECOND_SAMPLE_COUNT x
     SW_OPT_SECOND_INTERVAL_MS */
  SW_OPT_KEY_BYTES = 28,            /* key bytes kept per key, 16..128 (default 16); a longer
                                       key is kept as a 128-bit digest */
  SW_OPT_KEYED_ON_FULL = 29,        /* SW_FULL_*: a new key when no place is free or idle */
  /* circuit breaker (sw_breaker_*, docs/breakers.md): Sentinel's DegradeRule */
  SW_OPT_BREAKER_STRATEGY = 30,     /* SW_BREAKER_SLOW_RATIO (default), _ERROR_RATIO, _ERROR_COUNT */
  SW_OPT_BREAKER_COUNT = 31,        /* DegradeRule.count: max RT in ms (slow ratio), the error
                                       ratio 0..1, or the error count; >= 0 (default 0) */
  SW_OPT_BREAKER_SLOW_RATIO = 32,   /* slowRatioThreshold, 0..1 (default 1) */
  SW_OPT_BREAKER_TIME_WINDOW_SEC = 33, /* timeWindow: seconds open before a probe, fractional
                                          allowed, >= 0.001 (default 10) */
  SW_OPT_BREAKER_MIN_REQUESTS = 34, /* minRequestAmount: fewer completions never open (default 5) */
  SW_OPT_BREAKER_STAT_INTERVAL_MS = 35, /* statIntervalMs (default 1000) */
  SW_OPT_BREAKER_SAMPLE_COUNT = 36, /* windows of the stat interval, 1..100 (default 1, as Sentinel) */
  SW_OPT_BREAKER_HALF_OPEN_CALLS = 37, /* probes let through in half-open, 1..32 (default 1;
                                          Resilience4j's permittedNumberOfCallsInHalfOpenState) */
  SW_OPT_BREAKER_PROBE_TIMEOUT_MS = 38 /* a probe not ended within this is lost: another entry
                                          probes in its place (default 5000) */
} sw_option;

/* SW_OPT_BREAKER_STRATEGY: Sentinel's DEGRADE_GRADE_* values */
#define SW_BREAKER_SLOW_RATIO 0  /* DEGRADE_GRADE_RT: slow requests (RT > count ms) / all */
#define SW_BREAKER_ERROR_RATIO 1 /* DEGRADE_GRADE_EXCEPTION_RATIO: errors / all > count */
#define SW_BREAKER_ERROR_COUNT 2 /* DEGRADE_GRADE_EXCEPTION_COUNT: errors > count */

/* SW_OPT_KEYED_ON_FULL */
#define SW_FULL_EVICT 0  /* evict the least recently active key of the new key's places (default) */
#define SW_FULL_OPEN 1   /* let the new key's entry pass, uncounted */
#define SW_FULL_CLOSED 2 /* refuse the new key's entry */

/* SW_OPT_CLUSTER_FAILURE */
#define SW_CLUSTER_FALLBACK_LOCAL 0 /* limit locally to threshold / SW_OPT_CLUSTER_NODES (default) */
#define SW_CLUSTER_FAIL_OPEN 1      /* let everything through */
#define SW_CLUSTER_FAIL_CLOSED 2    /* refuse everything */

SW_API int sw_options_create(sw_options **out);
SW_API void sw_options_free(sw_options *opts);
/* A copy (NULL: defaults), or NULL when out of memory. */
SW_API sw_options *sw_options_clone(const sw_options *opts);
/* SW_ERANGE (and a message naming the value) when outside sw_option_bounds,
 * NaN, fractional for an integer key, or a stripe count not a power of two. */
SW_API int sw_options_set(sw_options *opts, sw_option key, int64_t value);
SW_API int sw_options_set_double(sw_options *opts, sw_option key, double value);
/* The value set, or the default (opts may be NULL). _get truncates. */
SW_API int sw_options_get(const sw_options *opts, sw_option key, int64_t *value);
SW_API int sw_options_get_double(const sw_options *opts, sw_option key, double *value);
SW_API int sw_option_bounds(sw_option key, double *min, double *max, double *def);
SW_API const char *sw_option_name(sw_option key);

/* --------------------------------------------------------- bucket registry */

/* Register a bucket type by name. The vtable is validated (ABI major,
 * struct_size, sizes, callbacks) and copied; what it points to (name, field
 * names and kinds, callbacks) must stay valid. SW_EEXIST if the name is
 * taken, SW_EINVAL for the reserved "sw." prefix, SW_EFULL when the registry
 * (128 types) is full. Thread-safe. */
SW_API int sw_bucket_type_register(const sw_bucket_type *type);
/* Borrowed pointer to the registered copy, or NULL (sw_last_error says why). */
SW_API const sw_bucket_type *sw_bucket_type_find(const char *name);
/* Open a plugin shared object, call its SW_PLUGIN_ENTRY_SYMBOL and register
 * every type it returns. *registered (may be NULL) receives the count. The
 * object stays loaded for the life of the process. SW_EPLUGIN when it cannot
 * be opened or lacks the entry; SW_EABI when the entry refuses the host or
 * any vtable is invalid (ABI major, struct_size, ...): then nothing is
 * registered. A name already taken gives SW_EEXIST, after registering the
 * types before it (loading one plugin twice gives SW_EEXIST). */
SW_API int sw_plugin_load(const char *path, uint32_t *registered);

/* Names of the built-in types (all hold a sw metric bucket). Created by
 * name they take no context (NULL) and have one stripe; an occupiable array
 * created by name borrows from nothing: use sw_metric_create for that. */
#define SW_TYPE_METRIC "sw.metric"                       /* Sentinel's BucketLeapArray */
#define SW_TYPE_METRIC_OCCUPIABLE "sw.metric.occupiable" /* OccupiableBucketLeapArray */
#define SW_TYPE_METRIC_FUTURE "sw.metric.future"         /* FutureBucketLeapArray */
/* The circuit breakers' buckets (fields "total" and "slow" / "error"). */
#define SW_TYPE_BREAKER_SLOW "sw.breaker.slow"   /* Sentinel's SlowRequestCounter */
#define SW_TYPE_BREAKER_ERROR "sw.breaker.error" /* Sentinel's SimpleErrorCounter */

/* -------------------------------------------------------------- leap array */

typedef struct sw_leap_array sw_leap_array;

/* Create a ring of sample_count windows covering interval_ms, holding buckets
 * of the given type (ctx is passed to its callbacks; borrowed). Errors:
 * SW_ENULL, SW_ESIZE (sample_count <= 0, interval_ms <= 0, not divisible),
 * SW_EOVERFLOW (memory size), SW_EABI (bad vtable), SW_ENOMEM. */
SW_API int sw_leap_array_create(sw_leap_array **out, const sw_bucket_type *type, void *ctx,
                                int32_t sample_count, int64_t interval_ms);
/* Same, type looked up by registered name (SW_ENOTFOUND). */
SW_API int sw_leap_array_create_by_name(sw_leap_array **out, const char *type_name,
                                        void *ctx, int32_t sample_count,
                                        int64_t interval_ms);
SW_API void sw_leap_array_free(sw_leap_array *la);

/* Placing an array in memory of the caller's (e.g. a MAP_SHARED mapping
 * shared by forked processes). The layout is position-independent: each
 * process attaches at its own address. */
/* Bytes needed, or a negative code for a bad type or geometry. */
SW_API int64_t sw_leap_array_layout_size(const sw_bucket_type *type, int32_t sample_count,
                                         int64_t interval_ms);
#define SW_LEAP_ARRAY_SHARED 0x1u /* the memory is shared between processes */
/* Initialise an array in mem (64-byte aligned, size >= layout_size bytes;
 * the memory is zeroed first). */
SW_API int sw_leap_array_init_at(void *mem, uint64_t size, const sw_bucket_type *type,
                                 int32_t sample_count, int64_t interval_ms, uint32_t flags);
/* A handle on the array initialised at mem (by any process), checked
 * against its own header and the type it was laid out for: SW_EFOREIGN,
 * SW_EVERSION, SW_ECORRUPT, SW_ETYPE. sw_leap_array_free releases the
 * handle, not the memory. */
SW_API int sw_leap_array_attach(sw_leap_array **out, void *mem, uint64_t size,
                                const sw_bucket_type *type, void *ctx);

SW_API int32_t sw_leap_array_sample_count(const sw_leap_array *la);
SW_API int64_t sw_leap_array_interval_ms(const sw_leap_array *la);
SW_API int64_t sw_leap_array_window_length_ms(const sw_leap_array *la);
SW_API const sw_bucket_type *sw_leap_array_type(const sw_leap_array *la);
/* How often a caller's time was behind its slot's window (the clock went
 * backwards): current-window calls that returned a detached window, and
 * adds that were dropped for that reason. */
SW_API int64_t sw_leap_array_detached_count(const sw_leap_array *la);

/* calculateTimeIdx: (t / window length) % sample count. */
SW_API int sw_leap_array_time_index(const sw_leap_array *la, int64_t t, int32_t *idx);
/* calculateWindowStart: t - t % window length. */
SW_API int sw_leap_array_window_start(const sw_leap_array *la, int64_t t, int64_t *start);

/* currentWindow: the window containing t, created or reset as needed.
 * If the slot already holds a newer window (the caller's clock is behind),
 * the result is a detached, empty window with SW_WINDOW_DETACHED set: its
 * bucket is scratch memory of the calling thread, writes to it are seen by
 * no reader, and it is valid until the next libsw call on this thread.
 * Otherwise the bucket is borrowed and stays valid for at least one
 * interval after the window stops being current. */
SW_API int sw_leap_array_current_window(sw_leap_array *la, sw_window *out);
SW_API int sw_leap_array_current_window_at(sw_leap_array *la, int64_t t, sw_window *out);

/* getPreviousWindow: the window that starts one window length before the
 * window of t, if stored and not deprecated at t. Returns 1 / 0. */
SW_API int sw_leap_array_previous_window(const sw_leap_array *la, sw_window *out);
SW_API int sw_leap_array_previous_window_at(const sw_leap_array *la, int64_t t, sw_window *out);

/* getWindowValue: the stored window containing t. Returns 1 / 0. */
SW_API int sw_leap_array_window_value_at(const sw_leap_array *la, int64_t t, sw_window *out);

/* isWindowDeprecated: 1 if the window starting at start_ms is deprecated at
 * t by the type's rule (default: t - start_ms > interval), else 0. Both
 * times must be >= 0 (SW_ETIME). */
SW_API int sw_leap_array_is_window_deprecated_at(const sw_leap_array *la, int64_t t,
                                                 int64_t start_ms);

/* getValidHead: the oldest window of the interval ending at t (the slot of
 * t + window length), if it belongs to that interval. Returns 1 / 0. */
SW_API int sw_leap_array_valid_head(const sw_leap_array *la, sw_window *out);
SW_API int sw_leap_array_valid_head_at(const sw_leap_array *la, int64_t t, sw_window *out);

/* list: the windows of the sliding interval ending at t, oldest first.
 * For the default rule these are the windows whose start lies in
 * [start(t) - interval + length, start(t)] (what Sentinel reads after
 * refreshing the current window); a type with its own deprecation rule
 * gets the stored windows not deprecated at t. Writes up to cap windows and
 * returns how many there are (which may exceed cap). */
SW_API int sw_leap_array_list(const sw_leap_array *la, sw_window *out, uint32_t cap);
SW_API int sw_leap_array_list_at(const sw_leap_array *la, int64_t t, sw_window *out,
                                 uint32_t cap);
/* listAll: every stored window, whatever its age, oldest first. */
SW_API int sw_leap_array_list_all(const sw_leap_array *la, sw_window *out, uint32_t cap);
/* values: the buckets of list, oldest first. */
SW_API int sw_leap_array_values(const sw_leap_array *la, void **out, uint32_t cap);
SW_API int sw_leap_array_values_at(const sw_leap_array *la, int64_t t, void **out,
                                   uint32_t cap);
/* valuesConditional (sentinel-golang): buckets of stored windows not
 * deprecated at t whose start satisfies pred, oldest first. */
typedef int (*sw_time_predicate)(int64_t window_start_ms, void *user);
SW_API int sw_leap_array_values_on_condition_at(const sw_leap_array *la, int64_t t,
                                                sw_time_predicate pred, void *user,
                                                void **out, uint32_t cap);

/* Generic field access for types with add/get (SW_ENOTSUP otherwise);
 * n in 0..INT32_MAX (SW_ERANGE), field < field_count (SW_ERANGE). */
SW_API int sw_leap_array_add(sw_leap_array *la, uint32_t field, int64_t n);
SW_API int sw_leap_array_add_at(sw_leap_array *la, int64_t t, uint32_t field, int64_t n);
/* One field of one bucket of this array (e.g. from sw_leap_array_list_at). */
SW_API int sw_leap_array_bucket_get(const sw_leap_array *la, const void *bucket, uint32_t field,
                                    int64_t *out);
/* Combine field over list_at(t) by its kind (sum, min, max). */
SW_API int sw_leap_array_sum_at(const sw_leap_array *la, int64_t t, uint32_t field,
                                int64_t *out);

/* ------------------------------------------------------------- metric bucket */

/* Sentinel's MetricEvent, in its order. */
typedef enum sw_event {
  SW_EVENT_PASS = 0,
  SW_EVENT_BLOCK = 1,
  SW_EVENT_EXCEPTION = 2,
  SW_EVENT_SUCCESS = 3,
  SW_EVENT_RT = 4,
  SW_EVENT_OCCUPIED_PASS = 5,
  SW_EVENT_WOULD_BLOCK = 6, /* dry-run rules: blocks that were let through */
  SW_EVENT_COUNT = 7
} sw_event;
/* Field index of a metric bucket's min RT (after the events). */
#define SW_FIELD_MIN_RT 7u

/* One window of a metric, as Sentinel's MetricNode records it. */
typedef struct sw_metric_record {
  int64_t start_ms;
  int64_t pass;
  int64_t block;
  int64_t exception;
  int64_t success;
  int64_t rt; /* sum of response times, ms */
  int64_t occupied_pass;
  int64_t min_rt;
  int64_t would_block; /* dry-run rules: blocks let through */
} sw_metric_record;

/* Read one event (or SW_FIELD_MIN_RT) from a metric bucket, e.g. a bucket
 * returned by sw_leap_array_values on a sw.metric* array. */
SW_API int64_t sw_metric_bucket_get(const sw_leap_array *la, const void *bucket,
                                    uint32_t field);

/* ----------------------------------------------------------- ArrayMetric */

typedef struct sw_metric sw_metric;

/* Sentinel's ArrayMetric over a sw.metric (or, with SW_OPT_OCCUPIABLE,
 * sw.metric.occupiable borrowing from a sw.metric.future) leap array.
 * Options used: SW_OPT_OCCUPIABLE, SW_OPT_STRIPES, SW_OPT_MAX_RT_MS. */
SW_API int sw_metric_create(sw_metric **out, int32_t sample_count, int64_t interval_ms,
                            const sw_options *opts);
SW_API void sw_metric_free(sw_metric *m);
/* The underlying array (borrowed), for raw window access and views. */
SW_API sw_leap_array *sw_metric_leap_array(sw_metric *m);

/* Sums over the sliding interval ending now / at t. */
SW_API int64_t sw_metric_pass(const sw_metric *m);
SW_API int64_t sw_metric_pass_at(const sw_metric *m, int64_t t);
SW_API int64_t sw_metric_block(const sw_metric *m);
SW_API int64_t sw_metric_block_at(const sw_metric *m, int64_t t);
SW_API int64_t sw_metric_exception(const sw_metric *m);
SW_API int64_t sw_metric_exception_at(const sw_metric *m, int64_t t);
SW_API int64_t sw_metric_success(const sw_metric *m);
SW_API int64_t sw_metric_success_at(const sw_metric *m, int64_t t);
SW_API int64_t sw_metric_rt(const sw_metric *m);
SW_API int64_t sw_metric_rt_at(const sw_metric *m, int64_t t);
SW_API int64_t sw_metric_occupied_pass(const sw_metric *m);
SW_API int64_t sw_metric_occupied_pass_at(const sw_metric *m, int64_t t);
SW_API int64_t sw_metric_sum_at(const sw_metric *m, int64_t t, sw_event event);
/* Largest SUCCESS of a single window of the interval, at least 1 as in
 * Sentinel (maxSuccess). */
SW_API int64_t sw_metric_max_success(const sw_metric *m);
SW_API int64_t sw_metric_max_success_at(const sw_metric *m, int64_t t);
/* Smallest min RT of the interval, at least 1 (max RT when idle). */
SW_API int64_t sw_metric_min_rt(const sw_metric *m);
SW_API int64_t sw_metric_min_rt_at(const sw_metric *m, int64_t t);
/* PASS of the stored window containing t (getWindowPass); 0 if none. A
 * window holding only passes borrowed for it counts with them (as pass_at),
 * and so do previous_window_pass and details. */
SW_API int64_t sw_metric_window_pass_at(const sw_metric *m, int64_t t);
/* PASS / BLOCK of the window before the window of now / t. */
SW_API int64_t sw_metric_previous_window_pass(const sw_metric *m);
SW_API int64_t sw_metric_previous_window_pass_at(const sw_metric *m, int64_t t);
SW_API int64_t sw_metric_previous_window_block(const sw_metric *m);
SW_API int64_t sw_metric_previous_window_block_at(const sw_metric *m, int64_t t);
/* Borrowed passes still waiting for their future windows (Occupiable only;
 * 0 otherwise). */
SW_API int64_t sw_metric_waiting(const sw_metric *m);
SW_API int64_t sw_metric_waiting_at(const sw_metric *m, int64_t t);

/* Add n >= 0 (n <= INT32_MAX) to the current window's counter. */
SW_API int sw_metric_add_pass(sw_metric *m, int64_t n);
SW_API int sw_metric_add_pass_at(sw_metric *m, int64_t t, int64_t n);
SW_API int sw_metric_add_block(sw_metric *m, int64_t n);
SW_API int sw_metric_add_block_at(sw_metric *m, int64_t t, int64_t n);
SW_API int sw_metric_add_exception(sw_metric *m, int64_t n);
SW_API int sw_metric_add_exception_at(sw_metric *m, int64_t t, int64_t n);
SW_API int sw_metric_add_success(sw_metric *m, int64_t n);
SW_API int sw_metric_add_success_at(sw_metric *m, int64_t t, int64_t n);
SW_API int sw_metric_add_occupied_pass(sw_metric *m, int64_t n);
SW_API int sw_metric_add_occupied_pass_at(sw_metric *m, int64_t t, int64_t n);
/* Add a response time (adds to RT and lowers the window's min RT). */
SW_API int sw_metric_add_rt(sw_metric *m, int64_t rt_ms);
SW_API int sw_metric_add_rt_at(sw_metric *m, int64_t t, int64_t rt_ms);
SW_API int sw_metric_add_at(sw_metric *m, int64_t t, sw_event event, int64_t n);
/* Check-then-add as a limiter does it (Sentinel's DefaultController): if
 * PASS over the interval ending at t plus n is <= limit, add n to the
 * current window's PASS and return 1; otherwise add nothing and return 0.
 * *pass_out (may be NULL) receives PASS before the add. The check and the
 * add are two steps: threads racing for the last units may all pass. When
 * t is behind the stored window (detached) it returns 1 and counts nothing. */
SW_API int sw_metric_try_pass(sw_metric *m, int64_t n, int64_t limit, int64_t *pass_out);
SW_API int sw_metric_try_pass_at(sw_metric *m, int64_t t, int64_t n, int64_t limit,
                                 int64_t *pass_out);
/* Borrow n passes from the window containing future_ms (Occupiable only,
 * SW_ENOTSUP otherwise): they are carried into that window's PASS when it
 * becomes current, or added to it directly if it already is. future_ms is
 * not checked to be in the future (Sentinel's callers compute it). */
SW_API int sw_metric_add_waiting(sw_metric *m, int64_t future_ms, int64_t n);

/* details: one record per window of the interval ending now / at t, oldest
 * first; writes up to cap, returns the number of windows. */
SW_API int sw_metric_details(const sw_metric *m, sw_metric_record *out, uint32_t cap);
SW_API int sw_metric_details_at(const sw_metric *m, int64_t t, sw_metric_record *out,
                                uint32_t cap);
/* detailsOnCondition: records of stored windows not deprecated at t whose
 * start satisfies pred. */
SW_API int sw_metric_details_on_condition_at(const sw_metric *m, int64_t t,
                                             sw_time_predicate pred, void *user,
                                             sw_metric_record *out, uint32_t cap);
/* windows: same records as details (Sentinel returns the buckets). */
SW_API int sw_metric_windows_at(const sw_metric *m, int64_t t, sw_metric_record *out,
                                uint32_t cap);

SW_API int32_t sw_metric_sample_count(const sw_metric *m);
SW_API double sw_metric_interval_sec(const sw_metric *m);

/* ------------------------------------------------------------ sliding view */

/* sentinel-golang's SlidingWindowMetric: a read-only view of (sample_count,
 * interval_ms) over a metric's larger array. Validated as sentinel-golang
 * does: interval_ms % sample_count == 0; the view's window length is a
 * multiple of the real one; the real interval is a multiple of interval_ms.
 * The metric is borrowed and must outlive the view. */
typedef struct sw_sliding_view sw_sliding_view;
SW_API int sw_sliding_view_create(sw_sliding_view **out, const sw_metric *real,
                                  int32_t sample_count, int64_t interval_ms);
SW_API void sw_sliding_view_free(sw_sliding_view *v);
/* Sum of an event over the view's interval ending at t. */
SW_API int64_t sw_sliding_view_sum_at(const sw_sliding_view *v, int64_t t, sw_event event);
/* Sum divided by the interval in seconds. */
SW_API double sw_sliding_view_qps_at(const sw_sliding_view *v, int64_t t, sw_event event);
/* QPS of the view's interval ending one view window before t. */
SW_API double sw_sliding_view_previous_qps_at(const sw_sliding_view *v, int64_t t,
                                              sw_event event);
/* Largest per-window value of an event in the view's interval. */
SW_API int64_t sw_sliding_view_max_of_single_bucket_at(const sw_sliding_view *v, int64_t t,
                                                       sw_event event);
/* Min RT over the interval (max RT when idle), and RT / SUCCESS (0 if none). */
SW_API int64_t sw_sliding_view_min_rt_at(const sw_sliding_view *v, int64_t t);
SW_API double sw_sliding_view_avg_rt_at(const sw_sliding_view *v, int64_t t);
/* Per-second records of the real array's windows not deprecated at t whose
 * start satisfies pred — not limited to the view's interval, as in
 * sentinel-golang; pass a predicate to limit it. Windows are merged into
 * whole seconds (start rounded down to 1000 ms), oldest first. */
SW_API int sw_sliding_view_second_metrics_on_condition_at(const sw_sliding_view *v,
                                                          int64_t t,
                                                          sw_time_predicate pred,
                                                          void *user,
                                                          sw_metric_record *out,
                                                          uint32_t cap);

/* ---------------------------------------------------------- StatisticNode */

/* Sentinel's StatisticNode: a per-second occupiable metric (2 x 500 ms), a
 * per-minute metric (60 x 1 s) and the number of requests in flight.
 * Options used: SW_OPT_SECOND_*, SW_OPT_MINUTE_*, SW_OPT_OCCUPY_TIMEOUT_MS,
 * SW_OPT_STRIPES, SW_OPT_MAX_RT_MS. Functions returning double return a
 * negative code on error. */
typedef struct sw_node sw_node;
SW_API int sw_node_create(sw_node **out, const sw_options *opts);
SW_API void sw_node_free(sw_node *node);
/* The node's metrics (borrowed; they live as long as the node). */
SW_API sw_metric *sw_node_second_metric(sw_node *node);
SW_API sw_metric *sw_node_minute_metric(sw_node *node);

/* Per-second rates over the per-second array. */
SW_API double sw_node_pass_qps_at(const sw_node *node, int64_t t);
SW_API double sw_node_block_qps_at(const sw_node *node, int64_t t);
SW_API double sw_node_success_qps_at(const sw_node *node, int64_t t);
SW_API double sw_node_exception_qps_at(const sw_node *node, int64_t t);
SW_API double sw_node_occupied_pass_qps_at(const sw_node *node, int64_t t);
/* Blocks that a dry-run rule let through, per second. */
SW_API double sw_node_would_block_qps_at(const sw_node *node, int64_t t);
/* pass + block */
SW_API double sw_node_total_qps_at(const sw_node *node, int64_t t);
/* RT / SUCCESS over the per-second array; 0 when there is no success. */
SW_API double sw_node_avg_rt_at(const sw_node *node, int64_t t);
SW_API double sw_node_min_rt_at(const sw_node *node, int64_t t);
/* Largest per-window SUCCESS, scaled to a second (maxSuccessQps). */
SW_API double sw_node_max_success_qps_at(const sw_node *node, int64_t t);
/* PASS / BLOCK of the previous window of the per-minute array (the last
 * whole second with the default geometry). */
SW_API int64_t sw_node_previous_pass_qps_at(const sw_node *node, int64_t t);
SW_API int64_t sw_node_previous_block_qps_at(const sw_node *node, int64_t t);
/* Sums over the per-minute array. totalRequest = pass + block. */
SW_API int64_t sw_node_total_request_at(const sw_node *node, int64_t t);
SW_API int64_t sw_node_total_pass_at(const sw_node *node, int64_t t);
SW_API int64_t sw_node_total_success_at(const sw_node *node, int64_t t);
SW_API int64_t sw_node_total_exception_at(const sw_node *node, int64_t t);
SW_API int64_t sw_node_block_request_at(const sw_node *node, int64_t t);
/* Requests in flight (curThreadNum). */
SW_API int64_t sw_node_concurrency(const sw_node *node);
/* Borrowed passes waiting for their windows. */
SW_API int64_t sw_node_waiting_at(const sw_node *node, int64_t t);

/* Recording. n and rt_ms in 0..INT32_MAX. */
SW_API int sw_node_add_pass_at(sw_node *node, int64_t t, int64_t n);
SW_API int sw_node_add_rt_and_success_at(sw_node *node, int64_t t, int64_t rt_ms, int64_t n);
SW_API int sw_node_increase_block_at(sw_node *node, int64_t t, int64_t n);
SW_API int sw_node_increase_exception_at(sw_node *node, int64_t t, int64_t n);
SW_API int sw_node_increase_concurrency(sw_node *node);
SW_API int sw_node_decrease_concurrency(sw_node *node);
/* A pass borrowed from the window of future_ms (per-second array). */
SW_API int sw_node_add_waiting(sw_node *node, int64_t future_ms, int64_t n);
/* Record n borrowed passes in the per-minute array (OCCUPIED_PASS and PASS). */
SW_API int sw_node_add_occupied_pass_at(sw_node *node, int64_t t, int64_t n);
/* tryOccupyNext: how long a request of n units would wait to pass on quota
 * of the next window under threshold (QPS); returns the occupy timeout when
 * it cannot. */
SW_API int64_t sw_node_try_occupy_next_at(const sw_node *node, int64_t t, int64_t n,
                                          double threshold);
SW_API int64_t sw_node_occupy_timeout_ms(const sw_node *node);
/* Per-second records of the per-minute array for metric export: whole
 * seconds after since_ms and before the second of t, with any activity,
 * oldest first. Returns the count (may exceed cap). */
SW_API int sw_node_metrics_at(const sw_node *node, int64_t t, int64_t since_ms,
                              sw_metric_record *out, uint32_t cap);

/* ---------------------------------------------------------------- limiter */

/* A flow rule on a StatisticNode, deciding each entry (Sentinel's flow
 * controllers). The rule comes from options: SW_OPT_GRADE, SW_OPT_BEHAVIOR,
 * SW_OPT_THRESHOLD, SW_OPT_MAX_QUEUE_MS, SW_OPT_WARM_UP_SEC,
 * SW_OPT_COLD_FACTOR, SW_OPT_STRICT; the node's geometry from the node
 * options. See docs/limiters.md for each behaviour with a timeline. */
typedef struct sw_limiter sw_limiter;

#define SW_VERDICT_PASS 0  /* proceed now */
#define SW_VERDICT_BLOCK 1 /* refused; retry_after_ms says when to retry */
#define SW_VERDICT_WAIT 2  /* admitted: sleep wait_ms, then proceed */

/* sw_limiter_entry flags */
#define SW_ENTRY_PRIORITIZED 0x1u /* reject behaviour: may borrow from the next window */
#define SW_ENTRY_NO_EXIT 0x2u     /* no exit will follow: not counted in flight (QPS grade) */
/* sw_limiter_exit flags */
#define SW_EXIT_ERROR 0x1u /* the request failed: count an exception */
#define SW_EXIT_CANCEL 0x2u /* breaker only: the entry did not run (a later check refused it):
                               nothing is counted, and a probe is given back */

typedef struct sw_decision {
  int32_t verdict;        /* SW_VERDICT_* */
  int32_t borrowed;       /* 1: admitted on quota borrowed from the next window */
  int64_t wait_ms;        /* SW_VERDICT_WAIT: how long to wait before proceeding */
  int64_t retry_after_ms; /* SW_VERDICT_BLOCK: earliest retry that can pass; -1: never */
  int64_t remaining;      /* units still admissible now, after this decision */
  int32_t would_block;    /* dry-run rule: 1 when enforcing it would have blocked (the
                             verdict is PASS; the block is counted as WOULD_BLOCK) */
  int32_t full;           /* keyed table: 1 when a new key found no place and
                             SW_OPT_KEYED_ON_FULL open or closed decided; else 0 */
  int64_t probe;          /* breaker: nonzero when this entry is a half-open probe (hand the
                             decision to sw_breaker_exit); else 0 */
  int64_t receipt[2];     /* limiter and keyed table: where an admitted entry counted, for
                             sw_limiter_cancel / sw_keyed_cancel (opaque); else zero */
} sw_decision;

/* A limiter with its own node. Errors: the node's, and for the rule
 * SW_ERANGE (value out of bounds, NaN) or SW_EINVAL (a behaviour that the
 * grade does not allow; warm-up parameters that give no warm-up range). */
SW_API int sw_limiter_create(sw_limiter **out, const sw_options *opts);
SW_API void sw_limiter_free(sw_limiter *l);
/* The limiter's node (borrowed). */
SW_API sw_node *sw_limiter_node(sw_limiter *l);

/* Decide an entry of n units (0..INT32_MAX) at now / t and count it: a pass
 * or wait counts n passes and one request in flight (call exit later), a
 * block counts n blocks. Thread-safe; in strict mode the check and the
 * count are one atomic step, so no thread or process overshoots the
 * threshold in any interval, window boundaries included (an entry whose
 * time is behind a newer window's entries is decided at the newer window);
 * the one exception, a window reset whose lock a stopped process has held
 * for 1 s, admits that entry uncounted (docs/limiters.md).
 * With SW_ENTRY_NO_EXIT the caller will not call exit: an admitted entry
 * is not counted in flight (a QPS rule that needs no exit: no RT, success
 * or in-flight statistics, and no atomic add on the in-flight count).
 * Errors: SW_ENULL, SW_EPERM (read-only), SW_ETIME (t < 0; pacing: t past
 * 292 years in ns), SW_ERANGE (n), SW_EINVAL (flags; SW_ENTRY_NO_EXIT on
 * the concurrency grade, whose places the exits free). */
SW_API int sw_limiter_entry(sw_limiter *l, int64_t n, uint32_t flags, sw_decision *d);
SW_API int sw_limiter_entry_at(sw_limiter *l, int64_t t, int64_t n, uint32_t flags,
                               sw_decision *d);
/* The end of an admitted entry: records rt_ms and n successes (and n
 * exceptions with SW_EXIT_ERROR), and one request less in flight. */
SW_API int sw_limiter_exit(sw_limiter *l, int64_t rt_ms, int64_t n, uint32_t flags);
SW_API int sw_limiter_exit_at(sw_limiter *l, int64_t t, int64_t rt_ms, int64_t n,
                              uint32_t flags);

/* All or nothing, for several limits on one request (Sentinel checks every
 * rule before it counts): enter each limit in turn and, when one refuses,
 * cancel the decisions of those that admitted. A cancel gives back what
 * the admitted entry d counted (its passes, its request in flight, its
 * place in a pacing queue), as if it had never been admitted; the passes
 * of a window that has since left the interval are gone already. A blocked
 * decision, or one cancelled before, is a no-op (SW_OK): cancel each
 * decision at most once. Thread-safe, across processes too. Errors:
 * SW_ENULL, SW_EPERM (read-only), SW_EINVAL (d is not a decision of this
 * limiter or table). */
SW_API int sw_limiter_cancel(sw_limiter *l, sw_decision *d);

/* Replace the rule at run time; the statistics are kept. Changing the
 * behaviour restarts the pacing queue and the warm-up token bucket, as
 * Sentinel does when it rebuilds a controller. Node options are ignored. */
SW_API int sw_limiter_set_rule(sw_limiter *l, const sw_options *rule);
/* Write the current rule into opts. */
SW_API int sw_limiter_get_rule(const sw_limiter *l, sw_options *opts);
/* Switch dry-run (SW_OPT_DRY_RUN) on (1) or off (0), keeping the rest of the rule. */
SW_API int sw_limiter_set_dry_run(sw_limiter *l, int on);

/* ---------------------------------------------------------- cluster leases */

/* A limiter with SW_OPT_CLUSTER=1 admits from tokens leased from Redis for
 * the current bucket (a window of its per-second array), so that its
 * threshold holds for the whole fleet (docs/cluster.md). Entries never touch
 * the network: whoever talks to Redis — sw_cluster's refiller thread, or the
 * caller (OpenResty cosockets) — asks sw_lease_next_call what to send, runs
 * sw_lease_script() with EVALSHA on key "sw:{<resource>}" and ARGV
 * (threshold, want, bucket_ms, buckets, target, refund, refund_bucket), and
 * hands the reply {bucket, granted, redis_now_ms, total} to sw_lease_apply,
 * or reports a failure (timeout, error) with sw_lease_failed. */
typedef struct sw_lease_call {
  int64_t threshold;     /* passes allowed in a window of `buckets` buckets, fleet-wide */
  int64_t want;          /* tokens to ask for */
  int64_t bucket_ms;     /* bucket length */
  int64_t refund;        /* tokens of refund_bucket to give back (0: none); < 0: the
                            passes the failure policy admitted in the window, charged
                            to the current bucket when Redis is back */
  int64_t refund_bucket; /* Redis time, ms */
  int32_t buckets;       /* buckets per window */
  int32_t target;        /* 0: the current bucket, 1: the next one */
  int64_t started_ms;    /* local time the call was claimed */
  int64_t reserved[2];
} sw_lease_call;

typedef struct sw_lease_info {
  int64_t calls;         /* script calls made */
  int64_t granted;       /* tokens granted in all */
  int64_t tokens;        /* tokens left for the current bucket */
  int64_t offset_ms;     /* Redis time - local time */
  int64_t down_since_ms; /* 0: Redis is up */
  int32_t up;            /* 1 once reached and not down */
  int32_t need;          /* an entry found the lease short */
  int64_t reserved[2];
} sw_lease_info;

/* The lease script (Lua, for EVAL / SCRIPT LOAD). Static text. */
SW_API const char *sw_lease_script(void);
/* 1 and *call filled when this limiter needs a Redis call now (it is then
 * claimed: one call at a time across processes), 0 when not. SW_ESTATE if
 * the rule is not a cluster rule. */
SW_API int sw_lease_next_call(sw_limiter *l, int64_t t, sw_lease_call *call);
/* The script's reply to call, received at local time t. SW_ERANGE (and
 * nothing changes: report the call with sw_lease_failed) for a reply that is
 * not the script's: bucket not the start of the bucket of redis_now_ms (+1
 * for call->target 1), granted outside 0..call->want, a negative time. A
 * Redis time far from local time is taken as it is (no overflow). */
SW_API int sw_lease_apply(sw_limiter *l, int64_t t, const sw_lease_call *call, int64_t bucket,
                          int64_t granted, int64_t redis_now_ms);
/* The call failed: Redis counts as down from t (the rule's failure policy
 * applies) until a call succeeds; the next try comes at the next multiple of
 * SW_OPT_CLUSTER_RETRY_MS in Redis time (so that a fleet tries together; t +
 * the retry interval before Redis was ever reached). A charge the call
 * carried (refund < 0) goes with a later call. */
SW_API int sw_lease_failed(sw_limiter *l, int64_t t, const sw_lease_call *call);
SW_API int sw_lease_stats(const sw_limiter *l, int64_t t, sw_lease_info *info);

/* ---------------------------------------------------------------- cluster */

/* The Redis side of cluster rules for C and Python programs: connections to
 * one Redis ("host:port") or a Redis Cluster ("host:port,host:port,..."; the
 * slot map comes from CLUSTER SLOTS, MOVED / ASK are followed, NOSCRIPT
 * reloads the script), and a refiller that keeps the leases of its limiters
 * filled (docs/cluster.md). Options: SW_OPT_CLUSTER_TIMEOUT_MS. Without
 * hiredis at build time every function returns SW_ENOTSUP ("cluster support
 * not built").
 *
 * Teardown: the refiller reads every limiter added to c. Freeing a limiter
 * (sw_limiter_free, or freeing or closing the registry or segment that
 * holds it) first takes it out of its cluster, as sw_cluster_remove does:
 * it waits for a refill round in progress (at most about the timeout per
 * Redis node), after which c never touches the limiter again. sw_cluster_free
 * can come before or after. Not thread-safe against entries on the limiter
 * being freed (as for any free). */
typedef struct sw_cluster sw_cluster;
/* servers: "host:port" entries (a host name, IPv4, or "[IPv6]:port")
 * separated by commas, at most 1023 bytes; nothing is connected yet.
 * SW_EINVAL naming the entry for an empty list or entry, a missing port
 * ("nohostport"), a port outside 1..65535, a host over 63 bytes. */
SW_API int sw_cluster_create(sw_cluster **out, const char *servers, const sw_options *opts);
/* Stops the refiller (waiting for its round to finish); the limiters stay:
 * once an entry's request for tokens goes unanswered for 2 x
 * SW_OPT_CLUSTER_TIMEOUT_MS + one bucket, they use their failure policy
 * until a call succeeds again. */
SW_API void sw_cluster_free(sw_cluster *c);
/* Keep l's lease (a limiter with SW_OPT_CLUSTER=1; borrowed until removed,
 * or freed, or c freed) under Redis key "sw:{resource}". Processes that
 * share a budget use the same resource name. A limiter is added to one
 * cluster at a time: SW_ESTATE if it already is. */
SW_API int sw_cluster_add(sw_cluster *c, sw_limiter *l, const char *resource);
/* Stop keeping l's lease; returns once no refill round uses l (it waits for
 * the one in progress), so that l may then be freed. Thread-safe. SW_ENOTFOUND
 * if not added. */
SW_API int sw_cluster_remove(sw_cluster *c, sw_limiter *l);
/* Authenticate every connection: AUTH password, or AUTH user password (Redis
 * 6 ACL) when user is not NULL. NULL password: no AUTH (the default). Copies
 * the strings; open connections are closed, the next round reconnects.
 * Thread-safe. SW_EINVAL for a user without a password, an empty one or one
 * over 1024 bytes (the message never shows the password). A refused AUTH
 * makes Redis count as down, with the server's reply in the log. */
SW_API int sw_cluster_set_auth(sw_cluster *c, const char *user, const char *password);
/* SELECT db on every connection (default 0; Redis Cluster has only 0: any
 * other makes its nodes count as down). Thread-safe. SW_ERANGE outside
 * 0..INT32_MAX. */
SW_API int sw_cluster_set_database(sw_cluster *c, int64_t db);
/* Redis going down and coming back: fn(user, up, "host:port", message) once
 * per change of each server (up 0: found down, with why; 1: answering again
 * after it was down), from the thread that made the call (the refiller, or
 * the caller of sw_cluster_refill / sw_cluster_entry_exact), with no lock of
 * libsw held; fn must not free c. NULL fn: no log (the default). */
typedef void (*sw_cluster_log_fn)(void *user, int up, const char *server, const char *message);
SW_API int sw_cluster_set_log(sw_cluster *c, sw_cluster_log_fn fn, void *user);
/* One refill round now: the calls due, as one pipeline per Redis node.
 * Returns the number of calls made, or an error (some failed: their limiters
 * count Redis as down). */
SW_API int sw_cluster_refill(sw_cluster *c);
/* A thread that runs a refill round every millisecond until sw_cluster_free. */
SW_API int sw_cluster_start(sw_cluster *c);
SW_API int64_t sw_cluster_round_trips(const sw_cluster *c);
/* Exact mode (opt-in, for low rates): one script call for this entry, made
 * now, in this thread (it waits on the network, up to the timeout). Counted
 * and dry-run as sw_limiter_entry. */
SW_API int sw_cluster_entry_exact(sw_cluster *c, sw_limiter *l, int64_t n, sw_decision *d);

/* --------------------------------------------------------------- registry */

/* Limiters by name, all with the node geometry of the options given at
 * creation and starting with their rule. The capacity is fixed: when every
 * place is taken, getting a new name fails with SW_EFULL and nothing is
 * evicted (see docs/limiters.md). Names are 1..63 bytes. Lookups of
 * existing names take no lock. */
typedef struct sw_registry sw_registry;
#define SW_NAME_MAX 63

SW_API int sw_registry_create(sw_registry **out, uint32_t capacity, const sw_options *opts);
SW_API void sw_registry_free(sw_registry *r);
/* The limiter of name, created on first use (borrowed: it lives as long as
 * the registry). SW_EFULL when full, SW_ERANGE for a bad name. */
SW_API int sw_registry_get(sw_registry *r, const char *name, sw_limiter **out);
/* Same, and a limiter created by this call starts with the rule of opts
 * (validated then) instead of the registry's; an existing one is returned
 * as it is, and opts is not read. NULL opts: the registry's rule. */
SW_API int sw_registry_get_ex(sw_registry *r, const char *name, const sw_options *opts,
                              sw_limiter **out);
/* A new rule for every limiter of the registry and for those created later
 * (e.g. a reload with another threshold); statistics are kept. */
SW_API int sw_registry_set_rule(sw_registry *r, const sw_options *opts);
/* The limiter of name if it exists: 1 / 0. */
SW_API int sw_registry_find(sw_registry *r, const char *name, sw_limiter **out);
SW_API uint32_t sw_registry_capacity(const sw_registry *r);
SW_API uint32_t sw_registry_count(const sw_registry *r);
/* The i-th limiter in creation order (i < count) and its name (borrowed). */
SW_API int sw_registry_at(sw_registry *r, uint32_t i, sw_limiter **out, const char **name);

/* ---------------------------------------------------------------- segment */

/* A registry in shared memory, attached by many processes, which update the
 * same limiters exactly (see docs/shared-memory.md). name: a POSIX shared
 * memory object if it has no '/' (it appears in /dev/shm), else a file path.
 * The capacity and the node geometry of the options must match an existing
 * segment (SW_EGEOMETRY if not); the default rule and SW_OPT_SEGMENT_* apply
 * to a new segment only. Names: 1..63 bytes without '/' (not "." or ".."),
 * or a path (SW_ERANGE otherwise).
 * A new segment is created exclusively and its memory is reserved whole
 * (its pages allocated: a full file system is SW_ENOMEM now, never a SIGBUS
 * later); a file that exists is adopted only if it is a libsw segment,
 * or an empty file, owned by this process's uid or SW_OPT_SEGMENT_UID.
 * Errors for what is found: SW_ENOTFOUND (no segment, no SW_SEGMENT_CREATE),
 * SW_EFOREIGN (not a libsw segment, not a regular file), SW_ETYPE (another
 * kind of segment), SW_EVERSION (laid out by another libsw), SW_ECORRUPT
 * (truncated, bad checksum, bad header, creation interrupted), SW_EPERM
 * (permissions, another owner, a symbolic link without SW_SEGMENT_FOLLOW),
 * SW_EBUSY (another process holds the file's lock for more than 2 s: the
 * message names it), SW_ESIZE (larger than SW_OPT_SEGMENT_MAX_MB), SW_ENOMEM
 * (more than its file system has free: the message says how much it needs and
 * has, and what to change), SW_EIO. A segment written before the
 * last reboot is reset: its times are stale. A failed open that created the
 * file removes it. */
typedef struct sw_segment sw_segment;
#define SW_SEGMENT_CREATE 0x1u   /* create it if it does not exist */
#define SW_SEGMENT_RESET 0x2u    /* replace any existing segment by a new one (implies CREATE);
                                    processes attached to the old one keep it */
#define SW_SEGMENT_READONLY 0x4u /* attach for reading only, whatever its geometry */
#define SW_SEGMENT_FOLLOW 0x8u   /* follow a symbolic link at the path (refused otherwise) */
#define SW_SEGMENT_ATTACH 0x10u  /* attach read-write to an existing segment whatever its
                                    capacity and geometry; never creates (swctl rules apply) */

SW_API int sw_segment_open(sw_segment **out, const char *name, uint32_t capacity,
                           const sw_options *opts, uint32_t flags);
/* Handles from a SW_SEGMENT_READONLY segment refuse every write (entries,
 * exits, rules, adds) with SW_EPERM. */
/* Unmap (the segment itself stays for other processes and later opens). */
SW_API void sw_segment_close(sw_segment *seg);
/* Remove a segment's name; processes attached keep their mapping.
 * SW_EFOREIGN (nothing removed) if the name is not a regular file. */
SW_API int sw_segment_unlink(const char *name);
/* The segment's registry (borrowed; sw_registry_free ignores it). */
SW_API sw_registry *sw_segment_registry(sw_segment *seg);
SW_API const char *sw_segment_name(const sw_segment *seg);
SW_API int64_t sw_segment_size(const sw_segment *seg);
/* 1 if this open created the segment (or created it again: interrupted,
 * reset, stale after a reboot), 0 if it attached to one in use; a negative
 * code for NULL. A caller whose own setup fails after creating a segment
 * can then remove it (sw_segment_close, then sw_segment_unlink). */
SW_API int sw_segment_created(const sw_segment *seg);

/* What a segment's header says, for a listing (swctl ls): read from the
 * file without attaching, locking or writing. */
#define SW_SEGMENT_KIND_REGISTRY 1u /* a registry of limiters (sw_segment_open) */
#define SW_SEGMENT_KIND_KEYED 2u    /* a keyed table (sw_keyed_open) */
#define SW_SEGMENT_KIND_BREAKER 3u  /* a circuit breaker (sw_breaker_open) */
typedef struct sw_segment_info {
  uint32_t kind;        /* SW_SEGMENT_KIND_*; 0: a kind this libsw does not know */
  uint32_t ready;       /* 1: its creation finished; 0: under way, or interrupted */
  uint32_t current;     /* 1: laid out by this libsw (it can attach); 0: by another version */
  uint32_t creator_pid; /* the process that created it (it may be gone) */
  uint32_t owner_uid;   /* the file's owner */
  uint32_t capacity;    /* names (a registry) or keys (a keyed table) as created; 0 if not
                           ready, and for a breaker */
  uint64_t layout;      /* the layout fingerprint written by its creator */
  int64_t size;         /* the file's size in bytes */
  int64_t created_unix_ms;
  int64_t allocated;    /* bytes its file system holds for it: its size (rounded up to
                           pages) once reserved; less for a segment of an older libsw */
  int64_t fs_free;      /* its file system (/dev/shm, or the path's): bytes free for an
                           unprivileged process (statvfs f_bavail); -1 unknown */
  int64_t fs_size;      /* ... and its size (0: a file system without a size, ramfs) */
  int64_t reserved[1];
} sw_segment_info;
/* Fill *out from the header of the segment name (a name or a path, as
 * sw_segment_open; a symbolic link is not followed). Errors: SW_ENULL,
 * SW_ERANGE (the name), SW_ENOTFOUND, SW_EPERM, SW_EFOREIGN (not a regular
 * file, or not a libsw segment: no libsw magic), SW_EIO. Thread-safe. */
SW_API int sw_segment_probe(const char *name, sw_segment_info *out);

/* ------------------------------------------------------------- rules as data */

/* Flow rules as Sentinel's FlowRule JSON list (docs/rules.md): a list of
 * (resource, rule options) pairs. Fields: resource, limitApp ("default"
 * only), grade (0 concurrency, 1 QPS), count (the threshold), strategy (0
 * only: direct), controlBehavior (0..3: SW_BEHAVIOR_*), warmUpPeriodSec,
 * maxQueueingTimeMs, clusterMode; libsw's, which Sentinel ignores: strict,
 * dryRun, keyed (a keyed table's rule), capacity (names or keys, as
 * created: checked, never changed). The fields of Sentinel's dashboard
 * (id, app, ip, port, gmtCreate, gmtModified, refResource, clusterConfig)
 * are ignored; any other field is an error. Parsing and writing JSON need
 * jansson at build time (SW_ENOTSUP without it). */
typedef struct sw_rules sw_rules;

/* Parse len bytes of JSON (a FlowRule array) into *out (caller frees with
 * sw_rules_free). Every rule is checked whole — its fields, its options,
 * and a limiter made with it — and one bad rule refuses the list:
 * SW_EINVAL (not JSON: line and column; a bad field: "rule N (resource
 * \"R\"): FIELD: why"), SW_ERANGE, SW_EEXIST (a resource with two rules),
 * SW_EFULL (more than 100,000 rules: refused before any is parsed),
 * SW_ENOTSUP (built without jansson), SW_ENULL, SW_ENOMEM. Thread-safe. */
SW_API int sw_rules_parse(sw_rules **out, const char *json, size_t len);
/* An empty list, to fill with sw_rules_add. */
SW_API int sw_rules_create(sw_rules **out);
/* NULL is a no-op. */
SW_API void sw_rules_free(sw_rules *r);
SW_API uint32_t sw_rules_count(const sw_rules *r);
/* Append the rule keys of opts (grade, behaviour, threshold, queueing,
 * warm-up, strict, cluster, dry run; NULL: the defaults) for resource
 * (1..63 bytes); keyed -1 (not said), 0 or 1; capacity 0 (not said) or
 * 1..2^28. SW_EEXIST if resource already has a rule, SW_EFULL past 100,000
 * rules. */
SW_API int sw_rules_add(sw_rules *r, const char *resource, const sw_options *opts, int64_t keyed,
                        int64_t capacity);
/* Rule i (< count): its resource (borrowed from r), its rule keys set into
 * opts, keyed and capacity; each out pointer may be NULL. SW_ERANGE for i. */
SW_API int sw_rules_at(const sw_rules *r, uint32_t i, const char **resource, sw_options *opts,
                       int64_t *keyed, int64_t *capacity);
/* The list as canonical JSON (every field, in Sentinel's order, 2-space
 * indent) into buf of cap bytes, always NUL-terminated when cap > 0;
 * returns its length (call with cap 0 to size buf: length + 1), or a
 * negative code. Parsing the output gives the same list. */
SW_API int64_t sw_rules_json(const sw_rules *r, char *buf, size_t cap);

/* ------------------------------------------------------------ keyed table */

/* One rule, any number of keys (docs/keyed.md): per-client limits. Each key
 * keeps only what the rule needs — the sliding-window counts of the reject
 * behaviour (a window's number and count in one word), the last admission
 * for pacing, the requests in flight for the concurrency grade — in
 * 9 + SW_OPT_KEY_BYTES + 8 x (1 + windows) bytes (8 more with pacing or
 * the concurrency grade): 49 for keys of up to 16 bytes and the default 2
 * windows. A key whose windows have all left the interval
 * holds nothing, and its place is given to a new key (reclaimed); only when
 * both of a new key's buckets are full of keys active right now does
 * SW_OPT_KEYED_ON_FULL apply. Entries of existing keys take no lock; they
 * are strict (check-and-count is one CAS per key, no overshoot across
 * threads, processes or window boundaries).
 * Options: the rule (SW_OPT_GRADE, SW_OPT_BEHAVIOR reject or pacing,
 * SW_OPT_THRESHOLD, SW_OPT_MAX_QUEUE_MS, SW_OPT_DRY_RUN), its window
 * (SW_OPT_SECOND_SAMPLE_COUNT 1..64 x SW_OPT_SECOND_INTERVAL_MS),
 * SW_OPT_KEY_BYTES, SW_OPT_KEYED_ON_FULL, and for a segment SW_OPT_SEGMENT_*.
 * Refused (SW_EINVAL): warm-up and cluster rules; (SW_ERANGE) a reject
 * threshold over 1,048,575 passes per key and interval. */
typedef struct sw_keyed sw_keyed;

/* A table for capacity keys at once (1..2^28) on the heap: its memory is
 * reserved, and used as keys arrive. */
SW_API int sw_keyed_create(sw_keyed **out, uint32_t capacity, const sw_options *opts);
/* The same in a shared segment (name and flags as sw_segment_open; an
 * existing table must have the same capacity, key bytes, window and kind
 * of rule: SW_EGEOMETRY; a registry segment is SW_ETYPE). */
SW_API int sw_keyed_open(sw_keyed **out, const char *name, uint32_t capacity,
                         const sw_options *opts, uint32_t flags);
/* Free the heap table, or unmap the segment (it stays). NULL is a no-op. */
SW_API void sw_keyed_free(sw_keyed *k);
/* 1 if this create / open made the table, 0 if it attached to one. */
SW_API int sw_keyed_created(const sw_keyed *k);

/* Decide an entry of n units (0..INT32_MAX) for key (1..65535 bytes, any
 * bytes) at now / t and count it, as sw_limiter_entry does for a limiter
 * (verdict, wait, retry-after, remaining, would_block). A new key is
 * inserted. flags: 0, or SW_ENTRY_NO_EXIT, which changes nothing for a
 * reject or pacing table (they count nothing in flight) and is refused by a
 * concurrency table (SW_EINVAL); SW_ENTRY_PRIORITIZED: SW_ENOTSUP, no
 * borrowing per key. Errors: SW_ENULL, SW_EPERM (read-only), SW_ETIME, SW_ERANGE (n,
 * key length), SW_EINVAL, SW_EBUSY (a new key's bucket lock held by a
 * stopped process for 2 s). Thread-safe, across processes too. */
SW_API int sw_keyed_entry(sw_keyed *k, const void *key, size_t len, int64_t n, uint32_t flags,
                          sw_decision *d);
SW_API int sw_keyed_entry_at(sw_keyed *k, int64_t t, const void *key, size_t len, int64_t n,
                             uint32_t flags, sw_decision *d);
/* The end of an admitted entry: RT, successes and errors in the table's
 * totals; for the concurrency grade, one request of key less in flight
 * (SW_ESTATE if none). */
SW_API int sw_keyed_exit(sw_keyed *k, const void *key, size_t len, int64_t rt_ms, int64_t n,
                         uint32_t flags);
SW_API int sw_keyed_exit_at(sw_keyed *k, int64_t t, const void *key, size_t len, int64_t rt_ms,
                            int64_t n, uint32_t flags);

/* Give back what an admitted entry counted (all or nothing: see
 * sw_limiter_cancel). */
SW_API int sw_keyed_cancel(sw_keyed *k, sw_decision *d);

/* A new rule for every key, now (counts kept). The kind of state per key
 * (windows, pacing, concurrency) cannot change: SW_EINVAL. */
SW_API int sw_keyed_set_rule(sw_keyed *k, const sw_options *rule);
SW_API int sw_keyed_get_rule(const sw_keyed *k, sw_options *opts);
SW_API int sw_keyed_set_dry_run(sw_keyed *k, int on);

/* The table as a whole: its geometry, its keys, and totals since creation. */
typedef struct sw_keyed_info {
  uint32_t capacity;    /* keys at once, as created */
  uint32_t slots;       /* places (a little more than capacity) */
  uint32_t key_bytes;   /* key bytes kept per key */
  uint32_t windows;     /* windows of the rule's interval */
  int64_t interval_ms;
  int64_t bytes;        /* the table's memory, all of it reserved */
  int64_t bytes_per_key; /* what one key takes: its place and its tag byte */
  int64_t keys;         /* keys present (active or idle) */
  int64_t inserted;     /* keys inserted since creation */
  int64_t reclaimed;    /* ... into the place of an idle key (nothing lost) */
  int64_t evicted;      /* ... into the place of an active key (SW_FULL_EVICT) */
  int64_t refused;      /* new keys refused while full (SW_FULL_OPEN / _CLOSED) */
  int64_t pass, block, would_block; /* entries' units */
  int64_t success, exception, rt;   /* from exits: units, and the sum of RTs in ms */
  int64_t on_full;      /* SW_FULL_*, as created */
  int64_t reserved[3];
} sw_keyed_info;
SW_API int sw_keyed_stats(const sw_keyed *k, sw_keyed_info *out);

/* One key as seen at t. */
#define SW_KEYED_KEY_MAX 128
typedef struct sw_keyed_key {
  uint8_t key[SW_KEYED_KEY_MAX]; /* its bytes (zero-padded) */
  uint32_t len;      /* its length; 0: key[0..15] is the digest of a longer key */
  uint32_t reserved32;
  int64_t pass;      /* passes in the interval ending at t */
  int64_t block;     /* blocks in the latest window that blocked, if in the interval */
  int64_t in_flight; /* concurrency grade */
  int64_t last_ms;   /* start of its latest window with a pass (-1: none) */
  int64_t reserved[2];
} sw_keyed_key;

/* The state of key at t: 1 and *out, or 0 if the table does not hold it. */
SW_API int sw_keyed_lookup_at(const sw_keyed *k, int64_t t, const void *key, size_t len,
                              sw_keyed_key *out);
/* Keys in slot order, streaming: start with *cursor = 0; writes up to cap
 * keys present (idle ones too) and advances *cursor; returns how many were
 * written (0 at the end). Bounded memory whatever the table's size. */
SW_API int sw_keyed_scan_at(const sw_keyed *k, int64_t t, uint64_t *cursor, sw_keyed_key *out,
                            uint32_t cap);
#define SW_KEYED_BY_PASS 0
#define SW_KEYED_BY_BLOCK 1
/* The n keys with the most passes (or blocks) at t, most first; returns
 * how many were written. *active (may be NULL) receives the number of keys
 * with a pass or a block in the interval. One pass over the table. */
SW_API int sw_keyed_top_at(const sw_keyed *k, int64_t t, uint32_t by, sw_keyed_key *out,
                           uint32_t n, int64_t *active);

/* ---------------------------------------------------------------- breaker */

/* A circuit breaker: Sentinel 1.8's degrade rules (docs/breakers.md). The
 * exits' response times and errors go into a leap array of
 * SW_OPT_BREAKER_SAMPLE_COUNT windows over SW_OPT_BREAKER_STAT_INTERVAL_MS
 * (buckets of type sw.breaker.slow or sw.breaker.error); when, at an exit
 * while CLOSED, at least SW_OPT_BREAKER_MIN_REQUESTS requests completed in
 * the interval and the strategy's value exceeds SW_OPT_BREAKER_COUNT (the
 * slow ratio: SW_OPT_BREAKER_SLOW_RATIO, reached when it is 1), the breaker
 * opens: entries are refused for SW_OPT_BREAKER_TIME_WINDOW_SEC, then the
 * next entry becomes a probe (HALF_OPEN) and everything else is refused
 * until the probe ends: a good probe closes the breaker (its windows are
 * cleared), a bad one opens it again. With SW_OPT_BREAKER_HALF_OPEN_CALLS
 * N > 1, N probes go through; the first bad one opens it, N good ones
 * close it. A probe not ended within SW_OPT_BREAKER_PROBE_TIMEOUT_MS (its
 * process died) is lost, and the next entry probes in its place.
 * Times are < 2^42 ms (139 years; SW_ETIME otherwise). */
typedef struct sw_breaker sw_breaker;

#define SW_BREAKER_CLOSED 0
#define SW_BREAKER_OPEN 1
#define SW_BREAKER_HALF_OPEN 2

/* A breaker on the heap. Options: SW_OPT_BREAKER_*. Errors: SW_ENULL,
 * SW_ERANGE (an error ratio count over 1), SW_ESIZE (the interval not a
 * multiple of the sample count), SW_ENOMEM. */
SW_API int sw_breaker_create(sw_breaker **out, const sw_options *opts);
/* One breaker for every process that opens name (a shared segment; name,
 * flags and errors as sw_segment_open). An existing breaker must have the
 * same stat interval, sample count and half-open calls (SW_EGEOMETRY); the
 * rest of its rule is the creator's (SW_SEGMENT_RESET replaces it). A
 * segment of another kind is SW_ETYPE. */
SW_API int sw_breaker_open(sw_breaker **out, const char *name, const sw_options *opts,
                           uint32_t flags);
/* Free the heap breaker, or unmap the segment (it stays). NULL is a no-op. */
SW_API void sw_breaker_free(sw_breaker *b);

/* Decide an entry at now / t: PASS (while CLOSED; or as a probe, with
 * d->probe nonzero), or BLOCK with retry_after_ms: while OPEN the time
 * until the next probe may go, while HALF_OPEN the time until the earliest
 * probe's timeout. A pass must be followed by one sw_breaker_exit with the
 * decision. Thread-safe, across processes too. Errors: SW_ENULL, SW_EPERM
 * (read-only), SW_ETIME, SW_ECORRUPT (a damaged shared breaker, named). */
SW_API int sw_breaker_entry(sw_breaker *b, sw_decision *d);
SW_API int sw_breaker_entry_at(sw_breaker *b, int64_t t, sw_decision *d);
/* The end of a passed entry d (NULL: not a probe) after rt_ms: counted in
 * the windows (slow if rt_ms > the rule's max RT; failed with
 * SW_EXIT_ERROR), then the state changes the rule asks for. A probe's
 * result decides the half-open state. With SW_EXIT_CANCEL the entry did
 * not run: nothing is counted and a probe's place is given back (the next
 * entry probes). rt_ms in 0..INT32_MAX (SW_ERANGE); flags SW_EXIT_ERROR,
 * SW_EXIT_CANCEL (SW_EINVAL otherwise); SW_ECORRUPT (a damaged shared
 * breaker, named). */
SW_API int sw_breaker_exit(sw_breaker *b, const sw_decision *d, int64_t rt_ms, uint32_t flags);
SW_API int sw_breaker_exit_at(sw_breaker *b, int64_t t, const sw_decision *d, int64_t rt_ms,
                              uint32_t flags);

/* State changes: fn(user, from, to, t, value) for each transition this
 * process makes (SW_BREAKER_* states; value: the ratio or count that
 * opened it, 1 for a bad probe, else 0), from the thread that made it,
 * after the change; transitions other processes make are counted in
 * sw_breaker_info, not called here. NULL fn: none (the default). Set it
 * before the handle is shared between threads. */
typedef void (*sw_breaker_listener_fn)(void *user, int32_t from, int32_t to, int64_t t,
                                       double value);
SW_API int sw_breaker_set_listener(sw_breaker *b, sw_breaker_listener_fn fn, void *user);

typedef struct sw_breaker_info {
  int32_t state;           /* SW_BREAKER_* */
  int32_t strategy;        /* SW_BREAKER_SLOW_RATIO, ... */
  int64_t state_since_ms;  /* when the current state began */
  int64_t next_probe_ms;   /* OPEN: when the next probe may go; else -1 */
  int64_t total;           /* completions in the stat interval ending at t */
  int64_t bad;             /* ... slow or failed */
  double ratio;            /* bad / total (0 without completions) */
  int64_t probes_in_flight; /* HALF_OPEN: probes let through, not ended, not timed out */
  int64_t opened;          /* transitions CLOSED -> OPEN */
  int64_t half_opened;     /* OPEN -> HALF_OPEN */
  int64_t closed;          /* HALF_OPEN -> CLOSED */
  int64_t reopened;        /* HALF_OPEN -> OPEN (a bad probe) */
  int64_t probes;          /* probes let through */
  int64_t probes_lost;     /* ... whose timeout passed before they ended */
  int64_t blocked;         /* entries refused */
  int64_t reserved[4];
} sw_breaker_info;
/* The state and statistics at t. Thread-safe. SW_ECORRUPT: a damaged
 * shared breaker (named). */
SW_API int sw_breaker_stats_at(const sw_breaker *b, int64_t t, sw_breaker_info *out);
/* The rule (SW_OPT_BREAKER_*) into opts. */
SW_API int sw_breaker_get_rule(const sw_breaker *b, sw_options *opts);

#ifdef __cplusplus
}
#endif

#endif /* SW_SW_H */
