/* SPDX-License-Identifier: Apache-2.0 */
/* The bad input catalogue: every exported function of libsw, called with bad
 * input, with the exact result each must give.
 *
 * One table entry per exported name ({"sw_metric_pass_at",
 * bad_sw_metric_pass_at}); each entry tries NULL handles and out-pointers,
 * bad sizes (0, negative, INT32_MAX / INT64_MAX), bad times (-1, INT64_MIN;
 * INT64_MAX must be a valid time or SW_ETIME, never undefined behaviour), bad
 * counts (-1, INT32_MAX + 1, INT64_MAX), bad enums (event 99, option key 999,
 * clock source 2), bad names (NULL, "", 64 bytes) and bad memory, on NULL
 * and on real handles (a real metric with a negative time), and checks:
 *  - the exact code: int / int64_t results, doubles (a negative code as a
 *    double), NULL for pointers; void functions must just not crash;
 *  - that the failing call set sw_last_error(): before each call the
 *    catalogue plants a known message (a failing sw_clock_use), which the
 *    failure must replace with a non-empty one of its own.
 * Clock-reading twins (sw_metric_pass, ...) get their bad times from a custom
 * clock (sw_clock_set_custom) that returns -1.
 *
 * test_catalogue_covers_exports reads SW_SYMBOLS_FILE (the list of exported
 * functions, tests/exported-symbols.txt) and fails when an exported name has
 * no entry or an entry names no exported function: a new public function
 * needs its bad-input entry here.
 *
 * Each entry runs as its own Check test (forked), named after the function,
 * so a crash is reported against that function and the others still run.
 * Shared memory segments and files are named "swbad-<runner pid>-..." and
 * main() removes what a failed entry left behind. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <netinet/in.h> /* the fake Redis of the issue 14 section */
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "testutil.h"

#ifndef SW_SYMBOLS_FILE
/* e.g. -DSW_SYMBOLS_FILE='"/abs/path/tests/exported-symbols.txt"' */
#error "SW_SYMBOLS_FILE must name tests/exported-symbols.txt"
#endif

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* ============================================================ assertions */

static const char *cur_fn = "";  /* the catalogue entry running */
static char note[160];           /* the bad value being tried, for messages */
#define NOTE(...) snprintf(note, sizeof note, __VA_ARGS__)
#define NO_NOTE() (note[0] = '\0')
#define WITH_NOTE note[0] ? " with " : "", note

/* A failure must replace this message (a failing sw_clock_use) with its own. */
#define MARK_SOURCE 0xDEADBEEFu
#define MARK_TEXT "3735928559"
static void plant_mark(void) {
  int rc = sw_clock_use(MARK_SOURCE);
  ck_assert_msg(rc == SW_EINVAL && strstr(sw_last_error(), MARK_TEXT) != NULL,
                "cannot plant the marker message (sw_clock_use returned %d, \"%s\")", rc,
                sw_last_error());
}

#define FRESH_ERROR(callstr)                                                             \
  do {                                                                                   \
    const char *e_ = sw_last_error();                                                    \
    ck_assert_msg(e_ != NULL && e_[0] != '\0',                                           \
                  "[%s] %s%s%s failed but sw_last_error() is empty", cur_fn, callstr,    \
                  WITH_NOTE);                                                            \
    ck_assert_msg(strstr(e_, MARK_TEXT) == NULL,                                         \
                  "[%s] %s%s%s failed without setting sw_last_error() (it still holds "  \
                  "\"%s\")", cur_fn, callstr, WITH_NOTE, e_);                            \
    ck_assert_msg(strlen(e_) < 1024, "[%s] sw_last_error() is not terminated", cur_fn);   \
  } while (0)

/* An integer result: exactly code (a negative code must set the message). */
#define EXPECT(call, code)                                                               \
  do {                                                                                   \
    plant_mark();                                                                        \
    mark_point();                                                                        \
    int64_t got_ = (int64_t)(call);                                                      \
    int64_t want_ = (int64_t)(code);                                                     \
    ck_assert_msg(got_ == want_,                                                         \
                  "[%s] %s%s%s returned %" PRId64 " (%s), expected %" PRId64             \
                  " (%s); last error: %s",                                               \
                  cur_fn, #call, WITH_NOTE, got_, sw_err_name((int)got_), want_,         \
                  sw_err_name((int)want_), sw_last_error());                             \
    if (want_ < 0) FRESH_ERROR(#call);                                                   \
  } while (0)

#define EXPECT_OK(call) EXPECT(call, SW_OK)

/* A double result: a code comes back as a negative double. */
#define EXPECT_D(call, code)                                                             \
  do {                                                                                   \
    plant_mark();                                                                        \
    mark_point();                                                                        \
    double got_ = (call);                                                                \
    double want_ = (double)(code);                                                       \
    ck_assert_msg(got_ == want_, "[%s] %s%s%s returned %g, expected %g (%s); last error: %s", \
                  cur_fn, #call, WITH_NOTE, got_, want_, sw_err_name((int)(code)),       \
                  sw_last_error());                                                      \
    if (want_ < 0) FRESH_ERROR(#call);                                                   \
  } while (0)

/* A pointer result: NULL, with the message set. */
#define EXPECT_NULL(call)                                                                \
  do {                                                                                   \
    plant_mark();                                                                        \
    mark_point();                                                                        \
    const void *got_ = (const void *)(call);                                             \
    ck_assert_msg(got_ == NULL, "[%s] %s%s%s returned %p, expected NULL", cur_fn, #call, \
                  WITH_NOTE, got_);                                                      \
    FRESH_ERROR(#call);                                                                  \
  } while (0)

/* A failure that cannot carry a code (a uint32_t result): value, and the message. */
#define EXPECT_FAIL_VALUE(call, value)                                                   \
  do {                                                                                   \
    plant_mark();                                                                        \
    mark_point();                                                                        \
    int64_t got_ = (int64_t)(call);                                                      \
    ck_assert_msg(got_ == (int64_t)(value), "[%s] %s%s%s returned %" PRId64              \
                  ", expected %" PRId64, cur_fn, #call, WITH_NOTE, got_,                 \
                  (int64_t)(value));                                                     \
    FRESH_ERROR(#call);                                                                  \
  } while (0)

/* A valid result: >= lo. */
#define EXPECT_GE(call, lo)                                                              \
  do {                                                                                   \
    mark_point();                                                                        \
    int64_t got_ = (int64_t)(call);                                                      \
    ck_assert_msg(got_ >= (int64_t)(lo),                                                 \
                  "[%s] %s%s%s returned %" PRId64 " (%s), expected >= %" PRId64          \
                  "; last error: %s",                                                    \
                  cur_fn, #call, WITH_NOTE, got_, sw_err_name((int)got_), (int64_t)(lo), \
                  sw_last_error());                                                      \
  } while (0)

#define EXPECT_D_GE(call, lo)                                                            \
  do {                                                                                   \
    mark_point();                                                                        \
    double got_ = (call);                                                                \
    ck_assert_msg(got_ >= (lo), "[%s] %s%s%s returned %g, expected >= %g; last error: %s", \
                  cur_fn, #call, WITH_NOTE, got_, (double)(lo), sw_last_error());        \
  } while (0)

/* At the far end of time (INT64_MAX): a valid answer or SW_ETIME, never
 * overflowing arithmetic (the sanitizer build aborts on that). */
#define EXPECT_HUGE_T(call)                                                              \
  do {                                                                                   \
    NOTE("t=INT64_MAX");                                                                 \
    mark_point();                                                                        \
    int64_t got_ = (int64_t)(call);                                                      \
    ck_assert_msg(got_ >= 0 || got_ == SW_ETIME,                                         \
                  "[%s] %s%s%s returned %" PRId64 " (%s), expected a value >= 0 or "     \
                  "SW_ETIME; last error: %s",                                            \
                  cur_fn, #call, WITH_NOTE, got_, sw_err_name((int)got_),                \
                  sw_last_error());                                                      \
    NO_NOTE();                                                                           \
  } while (0)

#define EXPECT_D_HUGE_T(call)                                                            \
  do {                                                                                   \
    NOTE("t=INT64_MAX");                                                                 \
    mark_point();                                                                        \
    double got_ = (call);                                                                \
    ck_assert_msg(got_ >= 0 || got_ == (double)SW_ETIME,                                 \
                  "[%s] %s%s%s returned %g, expected >= 0 or SW_ETIME", cur_fn, #call,   \
                  WITH_NOTE, got_);                                                      \
    NO_NOTE();                                                                           \
  } while (0)

/* Run the statement for each value of arr, with the value in the messages. */
#define FOR_EACH(var, arr, fmt)                                                          \
  for (size_t var##_i = 0;                                                               \
       var##_i < NELEM(arr) ? (NOTE(#var "=" fmt, arr[var##_i]), 1) : (NO_NOTE(), 0);    \
       var##_i++)                                                                        \
    for (int var##_k = 1; var##_k; var##_k = 0)                                          \
      for (__typeof__(arr[0]) var = arr[var##_i]; var##_k; var##_k = 0)

/* ============================================================= bad values */

static const int64_t BAD_T[] = {-1, -1000, INT64_MIN};
static const int64_t BAD_N[] = {-1, INT64_MIN, (int64_t)INT32_MAX + 1, INT64_MAX};
static const int BAD_EV[] = {99, -1, SW_EVENT_COUNT, INT_MAX, INT_MIN};
static const int32_t BAD_SAMPLES[] = {0, -1, INT32_MIN};
static const int64_t BAD_INTERVALS[] = {0, -1, -1000, INT64_MIN};
static const uint32_t BAD_FIELDS[] = {SW_FIELD_MIN_RT + 1, 99, UINT32_MAX};
static const int BAD_KEYS[] = {0, 999, -1, 100, INT_MAX, INT_MIN};
#define EV(e) ((sw_event)(e))
#define KEY(k) ((sw_option)(k))
#define HUGE_N ((int64_t)INT32_MAX + 1)

static char NAME64[65];   /* 64 bytes: one more than SW_NAME_MAX */
static char NAME63[64];   /* SW_NAME_MAX bytes: the longest valid registry name */
static char NAME1000[1001];

static void init_names(void) {
  memset(NAME64, 'n', 64);
  NAME64[64] = '\0';
  memset(NAME63, 'n', 63);
  NAME63[63] = '\0';
  memset(NAME1000, 'x', 1000);
  NAME1000[1000] = '\0';
}

/* ========================================================== cleanup pool */

/* Handles made by the fixtures, freed in reverse order after each entry. */
typedef struct {
  void (*fn)(void *);
  void *p;
} held;
static held pool[64];
static size_t npool;

static void *keep(void *p, void (*fn)(void *)) {
  ck_assert_msg(npool < NELEM(pool), "cleanup pool full");
  pool[npool++] = (held){fn, p};
  return p;
}

static void drain(void) {
  while (npool > 0) {
    held h = pool[--npool];
    h.fn(h.p);
  }
}

static void free_options(void *p) { sw_options_free(p); }
static void free_la(void *p) { sw_leap_array_free(p); }
static void free_metric(void *p) { sw_metric_free(p); }
static void free_view(void *p) { sw_sliding_view_free(p); }
static void free_node(void *p) { sw_node_free(p); }
static void free_limiter(void *p) { sw_limiter_free(p); }
static void free_registry(void *p) { sw_registry_free(p); }
static void free_mem(void *p) { free(p); }

/* ================================================================ clock */

static int64_t clock_value;
static int64_t fixed_clock(void *user) { return *(const int64_t *)user; }
/* The process clock returns v from now on. */
static void clock_at(int64_t v) {
  clock_value = v;
  ck_assert_int_eq(sw_clock_set_custom(fixed_clock, &clock_value), SW_OK);
}
static void clock_real(void) { ck_assert_int_eq(sw_clock_set_custom(NULL, NULL), SW_OK); }

/* ============================================================= fixtures */

typedef struct {
  sw_option key;
  double value;
} kv;

static sw_options *mkopts_(const kv *p, size_t n) {
  sw_options *o = NULL;
  ck_assert_int_eq(sw_options_create(&o), SW_OK);
  for (size_t i = 0; i < n; i++)
    ck_assert_msg(sw_options_set_double(o, p[i].key, p[i].value) == SW_OK,
                  "fixture option %d=%g: %s", (int)p[i].key, p[i].value, sw_last_error());
  return keep(o, free_options);
}
#define OPTS(...) mkopts_((const kv[]){__VA_ARGS__}, NELEM(((const kv[]){__VA_ARGS__})))

static sw_metric *metric_with(int32_t n, int64_t interval, const sw_options *o) {
  sw_metric *m = NULL;
  ck_assert_msg(sw_metric_create(&m, n, interval, o) == SW_OK, "fixture metric: %s",
                sw_last_error());
  return keep(m, free_metric);
}
/* 10 windows of 100 ms. */
static sw_metric *metric10(void) { return metric_with(10, 1000, NULL); }
/* Windows of 1 ms: t / window_length is t itself. */
static sw_metric *metric_wl1(void) { return metric_with(2, 2, NULL); }
static sw_metric *metric_occ(void) { return metric_with(10, 1000, OPTS({SW_OPT_OCCUPIABLE, 1})); }
static sw_metric *metric_occ_wl1(void) { return metric_with(2, 2, OPTS({SW_OPT_OCCUPIABLE, 1})); }

static sw_leap_array *la_by_name(int32_t n, int64_t interval) {
  sw_leap_array *la = NULL;
  ck_assert_msg(sw_leap_array_create_by_name(&la, SW_TYPE_METRIC, NULL, n, interval) == SW_OK,
                "fixture leap array: %s", sw_last_error());
  return keep(la, free_la);
}
static sw_leap_array *la10(void) { return la_by_name(10, 1000); }
static sw_leap_array *la_wl1(void) { return la_by_name(2, 2); }

/* A third-party type with no fields (no generic add/get). */
static void plain_new(void *ctx, void *bucket, int64_t t) {
  (void)ctx;
  *(int64_t *)bucket = t;
}
static void plain_reset(void *ctx, sw_window *w, int64_t start) {
  (void)ctx;
  *(int64_t *)w->bucket = start;
}
static int64_t plain_get(void *ctx, const void *bucket, uint32_t field) {
  (void)ctx;
  (void)field;
  return *(const int64_t *)bucket;
}
static void plain_add(void *ctx, void *bucket, uint32_t field, int64_t n) {
  (void)ctx;
  (void)field;
  *(int64_t *)bucket += n;
}
static sw_bucket_type plain_type(void) {
  return (sw_bucket_type){.abi_version = SW_PLUGIN_ABI_VERSION,
                          .struct_size = sizeof(sw_bucket_type),
                          .name = "badinput.plain",
                          .bucket_size = 8,
                          .bucket_align = 8,
                          .new_empty_bucket = plain_new,
                          .reset_window_to = plain_reset};
}
/* The largest bucket a type may have. */
static sw_bucket_type big_type(void) {
  sw_bucket_type t = plain_type();
  t.name = "badinput.big";
  t.bucket_size = SW_BUCKET_SIZE_MAX;
  t.bucket_align = SW_BUCKET_ALIGN_MAX;
  return t;
}

/* Every way a vtable can be invalid (SW_EABI). */
typedef struct {
  const char *what;
  sw_bucket_type t;
} bad_vtable;

static size_t bad_vtables(bad_vtable *out) {
  size_t n = 0;
  sw_bucket_type t;
#define BAD_VT(what_, stmt) (t = plain_type(), (stmt), out[n++] = (bad_vtable){what_, t})
  BAD_VT("abi major 2", t.abi_version = 2u << 16);
  BAD_VT("abi major 0", t.abi_version = 0);
  BAD_VT("abi 0xffffffff", t.abi_version = UINT32_MAX);
  BAD_VT("struct_size 0", t.struct_size = 0);
  BAD_VT("struct_size below the minimum", t.struct_size = SW_BUCKET_TYPE_MIN_SIZE - 1);
  BAD_VT("name NULL", t.name = NULL);
  BAD_VT("name empty", t.name = "");
  BAD_VT("bucket_size 0", t.bucket_size = 0);
  BAD_VT("bucket_size SW_BUCKET_SIZE_MAX + 1", t.bucket_size = SW_BUCKET_SIZE_MAX + 1);
  BAD_VT("bucket_size UINT32_MAX", t.bucket_size = UINT32_MAX);
  BAD_VT("bucket_align 0", t.bucket_align = 0);
  BAD_VT("bucket_align 3", t.bucket_align = 3);
  BAD_VT("bucket_align 128", t.bucket_align = 128);
  BAD_VT("bucket_align 2^31", t.bucket_align = 1u << 31);
  BAD_VT("new_empty_bucket NULL", t.new_empty_bucket = NULL);
  BAD_VT("reset_window_to NULL", t.reset_window_to = NULL);
  BAD_VT("fields without add/get", t.field_count = 3);
  BAD_VT("fields without get", (t.field_count = 1, t.add = plain_add));
  BAD_VT("fields without add", (t.field_count = 1, t.get = plain_get));
#undef BAD_VT
  return n;
}

static sw_node *node_with(const sw_options *o) {
  sw_node *node = NULL;
  ck_assert_msg(sw_node_create(&node, o) == SW_OK, "fixture node: %s", sw_last_error());
  return keep(node, free_node);
}
static sw_node *node_default(void) { return node_with(NULL); }
/* Per-second and per-minute arrays of 1 ms windows. */
static sw_node *node_wl1(void) {
  return node_with(OPTS({SW_OPT_SECOND_SAMPLE_COUNT, 2}, {SW_OPT_SECOND_INTERVAL_MS, 2},
                        {SW_OPT_MINUTE_SAMPLE_COUNT, 2}, {SW_OPT_MINUTE_INTERVAL_MS, 2},
                        {SW_OPT_OCCUPY_TIMEOUT_MS, 2}));
}

static sw_limiter *limiter_with(const sw_options *o) {
  sw_limiter *l = NULL;
  ck_assert_msg(sw_limiter_create(&l, o) == SW_OK, "fixture limiter: %s", sw_last_error());
  return keep(l, free_limiter);
}
static sw_limiter *limiter_qps(double threshold) {
  return limiter_with(OPTS({SW_OPT_THRESHOLD, threshold}));
}

static sw_registry *registry_with(uint32_t cap, const sw_options *o) {
  sw_registry *r = NULL;
  ck_assert_msg(sw_registry_create(&r, cap, o) == SW_OK, "fixture registry: %s",
                sw_last_error());
  return keep(r, free_registry);
}

/* Rules that sw__rule_from refuses (SW_EINVAL). */
static const sw_options *bad_rule(int which) {
  switch (which) {
  case 0: /* pacing needs the QPS grade */
    return OPTS({SW_OPT_GRADE, SW_GRADE_CONCURRENCY}, {SW_OPT_BEHAVIOR, SW_BEHAVIOR_PACING});
  case 1:
    return OPTS({SW_OPT_GRADE, SW_GRADE_CONCURRENCY}, {SW_OPT_BEHAVIOR, SW_BEHAVIOR_WARM_UP});
  case 2: /* warm-up with no range: threshold 0 */
    return OPTS({SW_OPT_BEHAVIOR, SW_BEHAVIOR_WARM_UP}, {SW_OPT_THRESHOLD, 0});
  default: /* warm-up + pacing with threshold x period too small */
    return OPTS({SW_OPT_BEHAVIOR, SW_BEHAVIOR_WARM_UP_PACING}, {SW_OPT_THRESHOLD, 0.01},
                {SW_OPT_WARM_UP_SEC, 1});
  }
}
#define N_BAD_RULES 4

/* Node geometries that validate only together (each option is in bounds). */
static const sw_options *bad_geometry(int which, int *code) {
  switch (which) {
  case 0:
    *code = SW_ESIZE; /* 3 does not divide 1000 */
    return OPTS({SW_OPT_SECOND_SAMPLE_COUNT, 3});
  case 1:
    *code = SW_ESIZE; /* 7 does not divide 60000 */
    return OPTS({SW_OPT_MINUTE_SAMPLE_COUNT, 7});
  default:
    *code = SW_ERANGE; /* occupy timeout beyond the per-second interval */
    return OPTS({SW_OPT_SECOND_INTERVAL_MS, 100}, {SW_OPT_SECOND_SAMPLE_COUNT, 1});
  }
}
#define N_BAD_GEOMETRIES 3

/* ========================================================= names on disk */

static int g_main_pid;
static char g_dir[160]; /* mkdtemp directory for files and file segments */

static void shm_name(char *buf, size_t n, const char *tag) {
  snprintf(buf, n, "swbad-%d-%d-%s", g_main_pid, (int)getpid(), tag);
  ck_assert_uint_le(strlen(buf), SW_NAME_MAX);
}

static void file_name(char *buf, size_t n, const char *tag) {
  snprintf(buf, n, "%s/%d-%s", g_dir, (int)getpid(), tag);
}

static void write_file(const char *path, const void *data, size_t len) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ck_assert_msg(fd >= 0, "cannot create %s: %s", path, strerror(errno));
  ck_assert_msg(write(fd, data, len) == (ssize_t)len, "cannot write %s", path);
  close(fd);
}

/* The file's bytes equal data. */
static int file_is(const char *path, const void *data, size_t len) {
  unsigned char buf[8192];
  int fd = open(path, O_RDONLY);
  if (fd < 0) return 0;
  ssize_t got = read(fd, buf, sizeof buf);
  close(fd);
  return got == (ssize_t)len && memcmp(buf, data, len) == 0;
}

/* ======================================================== family helpers */

typedef int64_t (*metric_read_at_fn)(const sw_metric *, int64_t);
typedef int64_t (*metric_read_now_fn)(const sw_metric *);
typedef int (*metric_add_at_fn)(sw_metric *, int64_t, int64_t);
typedef int (*metric_add_now_fn)(sw_metric *, int64_t);

/* A metric reader of the interval ending at t. */
static void metric_reader_at(metric_read_at_fn fn, int64_t at_least) {
  sw_metric *m = metric10(), *m1 = metric_wl1(), *occ1 = metric_occ_wl1();
  EXPECT(fn(NULL, 0), SW_ENULL);
  EXPECT(fn(NULL, -1), SW_ENULL); /* the handle is checked first */
  FOR_EACH(t, BAD_T, "%" PRId64) {
    EXPECT(fn(m, t), SW_ETIME);
    EXPECT(fn(occ1, t), SW_ETIME);
  }
  EXPECT_GE(fn(m, 0), at_least);
  EXPECT_HUGE_T(fn(m, INT64_MAX));
  EXPECT_HUGE_T(fn(m1, INT64_MAX));
  EXPECT_HUGE_T(fn(occ1, INT64_MAX));
}

/* Its twin reading the clock: bad times come from the clock. */
static void metric_reader_now(metric_read_now_fn fn) {
  sw_metric *m = metric10(), *occ = metric_occ();
  EXPECT(fn(NULL), SW_ENULL);
  FOR_EACH(now, BAD_T, "%" PRId64) {
    clock_at(now);
    EXPECT(fn(m), SW_ETIME);
    EXPECT(fn(occ), SW_ETIME);
  }
  clock_at(5000);
  EXPECT_GE(fn(m), 0);
  clock_real();
}

static void metric_adder_at(metric_add_at_fn fn) {
  sw_metric *m = metric10(), *m1 = metric_wl1();
  EXPECT(fn(NULL, 0, 1), SW_ENULL);
  EXPECT(fn(NULL, -1, -1), SW_ENULL);
  FOR_EACH(t, BAD_T, "%" PRId64) EXPECT(fn(m, t, 1), SW_ETIME);
  FOR_EACH(n, BAD_N, "%" PRId64) EXPECT(fn(m, 1000, n), SW_ERANGE);
  EXPECT(fn(m, -1, -1), SW_ETIME); /* the time is checked before the count */
  EXPECT_OK(fn(m, 1000, 0));
  EXPECT_OK(fn(m, 1000, INT32_MAX));
  EXPECT_HUGE_T(fn(m, INT64_MAX, 1));
  EXPECT_HUGE_T(fn(m1, INT64_MAX, 1));
  EXPECT_OK(fn(m, 1000, 1)); /* behind the window of INT64_MAX in its slot: dropped */
}

static void metric_adder_now(metric_add_now_fn fn) {
  sw_metric *m = metric10();
  EXPECT(fn(NULL, 1), SW_ENULL);
  clock_at(5000);
  FOR_EACH(n, BAD_N, "%" PRId64) EXPECT(fn(m, n), SW_ERANGE);
  EXPECT_OK(fn(m, 1));
  FOR_EACH(now, BAD_T, "%" PRId64) {
    clock_at(now);
    EXPECT(fn(m, 1), SW_ETIME);
  }
  clock_real();
}

typedef int (*records_at_fn)(const sw_metric *, int64_t, sw_metric_record *, uint32_t);

static void metric_records_at(records_at_fn fn) {
  sw_metric *m = metric10(), *m1 = metric_wl1();
  sw_metric_record rec[10];
  ck_assert_int_eq(sw_metric_add_pass_at(m, 1000, 1), SW_OK);
  EXPECT(fn(NULL, 1000, rec, 10), SW_ENULL);
  EXPECT(fn(m, 1000, NULL, 1), SW_ENULL);
  EXPECT(fn(m, 1000, NULL, UINT32_MAX), SW_ENULL);
  EXPECT(fn(m, 1000, NULL, 0), 1); /* count only */
  FOR_EACH(t, BAD_T, "%" PRId64) EXPECT(fn(m, t, rec, 10), SW_ETIME);
  /* cap beyond the buffer: at most sample_count records are written */
  EXPECT(fn(m, 1000, rec, UINT32_MAX), 1);
  EXPECT_HUGE_T(fn(m, INT64_MAX, rec, 10));
  EXPECT_HUGE_T(fn(m1, INT64_MAX, rec, 2));
}

typedef int (*la_window_at_fn)(const sw_leap_array *, int64_t, sw_window *);
typedef int (*la_window_now_fn)(const sw_leap_array *, sw_window *);

/* previous_window_at, valid_head_at, window_value_at: 1 / 0 or a code. */
static void la_window_at(la_window_at_fn fn) {
  sw_leap_array *la = la10(), *la1 = la_wl1();
  sw_window w;
  EXPECT(fn(NULL, 0, &w), SW_ENULL);
  EXPECT(fn(la, 0, NULL), SW_ENULL);
  EXPECT(fn(NULL, -1, NULL), SW_ENULL);
  FOR_EACH(t, BAD_T, "%" PRId64) EXPECT(fn(la, t, &w), SW_ETIME);
  EXPECT(fn(la, 0, &w), 0); /* nothing stored */
  EXPECT_HUGE_T(fn(la, INT64_MAX, &w));
  ck_assert_int_eq(sw_leap_array_current_window_at(la1, INT64_MAX, &w), SW_OK);
  EXPECT_HUGE_T(fn(la1, INT64_MAX, &w));
  EXPECT_HUGE_T(fn(la1, INT64_MAX - 1, &w));
}

static void la_window_now(la_window_now_fn fn) {
  sw_leap_array *la = la10();
  sw_window w;
  EXPECT(fn(NULL, &w), SW_ENULL);
  EXPECT(fn(la, NULL), SW_ENULL);
  FOR_EACH(now, BAD_T, "%" PRId64) {
    clock_at(now);
    EXPECT(fn(la, &w), SW_ETIME);
  }
  clock_at(5000);
  EXPECT_GE(fn(la, &w), 0);
  clock_real();
}

typedef int (*la_list_at_fn)(const sw_leap_array *, int64_t, void *, uint32_t);

static int list_at_w(const sw_leap_array *la, int64_t t, void *out, uint32_t cap) {
  return sw_leap_array_list_at(la, t, out, cap);
}
static int values_at_w(const sw_leap_array *la, int64_t t, void *out, uint32_t cap) {
  return sw_leap_array_values_at(la, t, out, cap);
}
static int values_cond_w(const sw_leap_array *la, int64_t t, void *out, uint32_t cap) {
  return sw_leap_array_values_on_condition_at(la, t, NULL, NULL, out, cap);
}

/* list_at, values_at, values_on_condition_at. */
static void la_list_at(la_list_at_fn fn) {
  sw_leap_array *la = la10(), *la1 = la_wl1();
  sw_window w[10];
  void *v[10];
  void *out = fn == list_at_w ? (void *)w : (void *)v;
  ck_assert_int_eq(sw_leap_array_add_at(la, 1000, SW_EVENT_PASS, 1), SW_OK);
  EXPECT(fn(NULL, 1000, out, 10), SW_ENULL);
  EXPECT(fn(la, 1000, NULL, 1), SW_ENULL);
  EXPECT(fn(la, 1000, NULL, UINT32_MAX), SW_ENULL);
  EXPECT(fn(la, 1000, NULL, 0), 1); /* count only */
  FOR_EACH(t, BAD_T, "%" PRId64) EXPECT(fn(la, t, out, 10), SW_ETIME);
  EXPECT(fn(la, 1000, out, UINT32_MAX), 1); /* never more than sample_count written */
  EXPECT_HUGE_T(fn(la, INT64_MAX, out, 10));
  ck_assert_int_eq(sw_leap_array_add_at(la1, INT64_MAX, SW_EVENT_PASS, 1), SW_OK);
  EXPECT_HUGE_T(fn(la1, INT64_MAX, out, 2));
}

typedef double (*node_rate_fn)(const sw_node *, int64_t);
typedef int64_t (*node_read_fn)(const sw_node *, int64_t);
typedef int (*node_add_fn)(sw_node *, int64_t, int64_t);

static void node_rate_at(node_rate_fn fn) {
  sw_node *node = node_default(), *node1 = node_wl1();
  EXPECT_D(fn(NULL, 0), SW_ENULL);
  EXPECT_D(fn(NULL, -1), SW_ENULL);
  FOR_EACH(t, BAD_T, "%" PRId64) EXPECT_D(fn(node, t), SW_ETIME);
  EXPECT_D_GE(fn(node, 0), 0);
  EXPECT_D_HUGE_T(fn(node, INT64_MAX));
  EXPECT_D_HUGE_T(fn(node1, INT64_MAX));
}

static void node_read_at(node_read_fn fn) {
  sw_node *node = node_default(), *node1 = node_wl1();
  EXPECT(fn(NULL, 0), SW_ENULL);
  EXPECT(fn(NULL, -1), SW_ENULL);
  FOR_EACH(t, BAD_T, "%" PRId64) EXPECT(fn(node, t), SW_ETIME);
  EXPECT_GE(fn(node, 0), 0);
  EXPECT_HUGE_T(fn(node, INT64_MAX));
  EXPECT_HUGE_T(fn(node1, INT64_MAX));
}

static void node_adder_at(node_add_fn fn) {
  sw_node *node = node_default(), *node1 = node_wl1();
  EXPECT(fn(NULL, 0, 1), SW_ENULL);
  EXPECT(fn(NULL, -1, -1), SW_ENULL);
  FOR_EACH(t, BAD_T, "%" PRId64) EXPECT(fn(node, t, 1), SW_ETIME);
  FOR_EACH(n, BAD_N, "%" PRId64) EXPECT(fn(node, 1000, n), SW_ERANGE);
  EXPECT_OK(fn(node, 1000, 0));
  EXPECT_OK(fn(node, 1000, INT32_MAX));
  EXPECT_HUGE_T(fn(node, INT64_MAX, 1));
  EXPECT_HUGE_T(fn(node1, INT64_MAX, 1));
}

typedef int64_t (*view_event_fn)(const sw_sliding_view *, int64_t, sw_event);
typedef double (*view_event_d_fn)(const sw_sliding_view *, int64_t, sw_event);

static sw_sliding_view *view_on(const sw_metric *m, int32_t n, int64_t interval) {
  sw_sliding_view *v = NULL;
  ck_assert_msg(sw_sliding_view_create(&v, m, n, interval) == SW_OK, "fixture view: %s",
                sw_last_error());
  return keep(v, free_view);
}

static void view_event_at(view_event_fn fn) {
  sw_metric *m = metric10(), *m1 = metric_wl1();
  sw_sliding_view *v = view_on(m, 5, 500), *v1 = view_on(m1, 1, 2);
  EXPECT(fn(NULL, 0, SW_EVENT_PASS), SW_ENULL);
  EXPECT(fn(NULL, -1, EV(99)), SW_ENULL);
  FOR_EACH(t, BAD_T, "%" PRId64) EXPECT(fn(v, t, SW_EVENT_PASS), SW_ETIME);
  FOR_EACH(ev, BAD_EV, "%d") EXPECT(fn(v, 1000, EV(ev)), SW_ERANGE);
  EXPECT(fn(v, -1, EV(99)), SW_ETIME); /* the time is checked before the event */
  EXPECT_GE(fn(v, 1000, SW_EVENT_PASS), 0);
  EXPECT_HUGE_T(fn(v, INT64_MAX, SW_EVENT_PASS));
  EXPECT_HUGE_T(fn(v1, INT64_MAX, SW_EVENT_PASS));
}

static void view_event_d_at(view_event_d_fn fn) {
  sw_metric *m = metric10(), *m1 = metric_wl1();
  sw_sliding_view *v = view_on(m, 5, 500), *v1 = view_on(m1, 1, 2);
  EXPECT_D(fn(NULL, 0, SW_EVENT_PASS), SW_ENULL);
  FOR_EACH(t, BAD_T, "%" PRId64) EXPECT_D(fn(v, t, SW_EVENT_PASS), SW_ETIME);
  FOR_EACH(ev, BAD_EV, "%d") EXPECT_D(fn(v, 1000, EV(ev)), SW_ERANGE);
  EXPECT_D_GE(fn(v, 1000, SW_EVENT_PASS), 0);
  EXPECT_D_HUGE_T(fn(v, INT64_MAX, SW_EVENT_PASS));
  EXPECT_D_HUGE_T(fn(v1, INT64_MAX, SW_EVENT_PASS));
}

/* ====================================================== errors, version */

static void bad_sw_strerror(void) {
  static const int codes[] = {1, 23, -23, SW_EBUSY - 1, INT_MIN, INT_MAX};
  FOR_EACH(code, codes, "%d") {
    mark_point();
    ck_assert_str_eq(sw_strerror(code), "unknown error");
  }
  ck_assert_str_eq(sw_strerror(SW_OK), "success");
}

static void bad_sw_err_name(void) {
  static const int codes[] = {1, 23, -23, SW_EBUSY - 1, INT_MIN, INT_MAX};
  FOR_EACH(code, codes, "%d") {
    mark_point();
    ck_assert_str_eq(sw_err_name(code), "SW_UNKNOWN");
  }
  ck_assert_str_eq(sw_err_name(SW_OK), "SW_OK");
}

static void bad_sw_last_error(void) {
  /* Takes no input. A message about a huge value is cut, never overflows. */
  ck_assert_ptr_nonnull(sw_last_error());
  EXPECT_NULL(sw_bucket_type_find(NAME1000));
  ck_assert_uint_lt(strlen(sw_last_error()), 1024);
  ck_assert_ptr_nonnull(strstr(sw_last_error(), "xxxx"));
  /* A message can quote the previous one (formatted aside first). */
  EXPECT(sw_plugin_load("/nonexistent/" "badinput.so", NULL), SW_EPLUGIN);
  ck_assert_uint_lt(strlen(sw_last_error()), 1024);
}

static void bad_sw_version(void) {
  /* No input: the loaded library is the one compiled against. */
  ck_assert_uint_eq(sw_version(), SW_VERSION_HEX);
}

static void bad_sw_version_string(void) {
  ck_assert_ptr_nonnull(sw_version_string());
  ck_assert_str_eq(sw_version_string(), SW_VERSION_STRING);
}

/* ============================================================ allocator */

static void *null_malloc(size_t n) {
  (void)n;
  return NULL;
}

static void bad_sw_set_alloc_funcs(void) {
  EXPECT(sw_set_alloc_funcs(malloc, NULL), SW_EINVAL);
  EXPECT(sw_set_alloc_funcs(NULL, free), SW_EINVAL);
  /* An allocator that always fails: creations report SW_ENOMEM, clone NULL. */
  EXPECT_OK(sw_set_alloc_funcs(null_malloc, free));
  sw_options *o = (sw_options *)&o;
  EXPECT(sw_options_create(&o), SW_ENOMEM);
  sw_metric *m = (sw_metric *)&m;
  EXPECT(sw_metric_create(&m, 10, 1000, NULL), SW_ENOMEM);
  ck_assert_ptr_null(m);
  EXPECT_NULL(sw_options_clone(NULL));
  EXPECT_OK(sw_set_alloc_funcs(NULL, NULL));
  EXPECT_OK(sw_options_create(&o));
  sw_options_free(o);
}

/* ================================================================ clock */

static void bad_sw_now_ms(void) {
  /* No input; the default clock is >= 0. A custom clock breaking its
   * contract (negative times) must not crash the reader. */
  EXPECT_GE(sw_now_ms(), 0);
  clock_at(-5);
  mark_point();
  (void)sw_now_ms();
  clock_at(INT64_MIN);
  mark_point();
  (void)sw_now_ms();
  clock_real();
  EXPECT_GE(sw_now_ms(), 0);
}

static void bad_sw_clock_use(void) {
  static const uint32_t sources[] = {3, 7, 0x80000000u, UINT32_MAX};
  FOR_EACH(source, sources, "%u") EXPECT(sw_clock_use(source), SW_EINVAL);
  EXPECT_GE(sw_now_ms(), 0); /* the clock in use is unchanged */
  EXPECT_OK(sw_clock_use(SW_CLOCK_DEFAULT));
}

static void bad_sw_now_ns(void) {
  /* No input. A custom clock's milliseconds are scaled without overflow,
   * whatever it returns. */
  EXPECT_GE(sw_now_ns(), 0);
  clock_at(INT64_MAX);
  EXPECT_GE(sw_now_ns(), INT64_MAX);
  clock_at(INT64_MIN);
  mark_point();
  (void)sw_now_ns();
  clock_real();
  EXPECT_GE(sw_now_ns(), 0);
}

static void bad_sw_clock_resolution_ns(void) {
  /* No input: at least a millisecond, whatever the clock. */
  EXPECT_GE(sw_clock_resolution_ns(), 1000000);
  clock_at(-5);
  EXPECT_GE(sw_clock_resolution_ns(), 1000000);
  clock_real();
}

static void bad_sw_clock_set_custom(void) {
  /* Every argument is valid: NULL restores the clock; user is opaque. */
  EXPECT_OK(sw_clock_set_custom(NULL, (void *)1));
  EXPECT_GE(sw_now_ms(), 0);
  EXPECT_OK(sw_clock_set_custom(fixed_clock, &clock_value));
  EXPECT_OK(sw_clock_set_custom(NULL, NULL));
  EXPECT_GE(sw_now_ms(), 0);
}

/* ============================================================== options */

static void bad_sw_options_create(void) { EXPECT(sw_options_create(NULL), SW_ENULL); }

static void bad_sw_options_free(void) {
  mark_point();
  sw_options_free(NULL);
}

static void bad_sw_options_clone(void) {
  /* NULL is not an error: a copy of the defaults. */
  sw_options *c = sw_options_clone(NULL);
  ck_assert_ptr_nonnull(c);
  int64_t v = 0;
  ck_assert_int_eq(sw_options_get(c, SW_OPT_STRIPES, &v), SW_OK);
  ck_assert_int_eq(v, 4);
  sw_options_free(c);
}

static void bad_sw_options_set(void) {
  sw_options *o = OPTS({SW_OPT_STRIPES, 8});
  EXPECT(sw_options_set(NULL, SW_OPT_STRIPES, 4), SW_ENULL);
  EXPECT(sw_options_set(NULL, KEY(999), 4), SW_ENULL);
  FOR_EACH(key, BAD_KEYS, "%d") EXPECT(sw_options_set(o, KEY(key), 1), SW_EINVAL);
  static const int64_t values[] = {INT64_MIN, -1, 0, 3, 65, 128, INT64_MAX};
  FOR_EACH(value, values, "%" PRId64) EXPECT(sw_options_set(o, SW_OPT_STRIPES, value), SW_ERANGE);
  EXPECT(sw_options_set(o, SW_OPT_MAX_RT_MS, (int64_t)INT32_MAX + 1), SW_ERANGE);
  EXPECT(sw_options_set(o, SW_OPT_SEGMENT_UID, -2), SW_ERANGE);
  EXPECT(sw_options_set(o, SW_OPT_SEGMENT_MODE, 01000), SW_ERANGE);
  EXPECT(sw_options_set(o, SW_OPT_GRADE, 2), SW_ERANGE);
  EXPECT(sw_options_set(o, SW_OPT_BEHAVIOR, 4), SW_ERANGE);
  EXPECT(sw_options_set(o, SW_OPT_COLD_FACTOR, 1), SW_ERANGE);
  int64_t v = 0;
  ck_assert_int_eq(sw_options_get(o, SW_OPT_STRIPES, &v), SW_OK);
  ck_assert_int_eq(v, 8); /* failed sets change nothing */
}

static void bad_sw_options_set_double(void) {
  sw_options *o = OPTS({SW_OPT_THRESHOLD, 5});
  EXPECT(sw_options_set_double(NULL, SW_OPT_THRESHOLD, 1), SW_ENULL);
  FOR_EACH(key, BAD_KEYS, "%d") EXPECT(sw_options_set_double(o, KEY(key), 1), SW_EINVAL);
  static const double values[] = {NAN, -NAN, INFINITY, -INFINITY, -1e-300, -1, 1e15 * 1.0000001,
                                  DBL_MAX};
  FOR_EACH(value, values, "%g")
    EXPECT(sw_options_set_double(o, SW_OPT_THRESHOLD, value), SW_ERANGE);
  static const double fractions[] = {1.5, 0.5, 4.000001, 1e-300};
  FOR_EACH(value, fractions, "%g")
    EXPECT(sw_options_set_double(o, SW_OPT_STRIPES, value), SW_ERANGE);
  EXPECT(sw_options_set_double(o, SW_OPT_MAX_RT_MS, NAN), SW_ERANGE);
  EXPECT(sw_options_set_double(o, SW_OPT_MAX_RT_MS, 9.3e18), SW_ERANGE);
  double d = 0;
  ck_assert_int_eq(sw_options_get_double(o, SW_OPT_THRESHOLD, &d), SW_OK);
  ck_assert(d == 5);
}

static void bad_sw_options_get(void) {
  sw_options *o = OPTS({SW_OPT_STRIPES, 8});
  int64_t v = 12345;
  EXPECT(sw_options_get(o, SW_OPT_STRIPES, NULL), SW_ENULL);
  EXPECT(sw_options_get(NULL, SW_OPT_STRIPES, NULL), SW_ENULL);
  FOR_EACH(key, BAD_KEYS, "%d") {
    EXPECT(sw_options_get(o, KEY(key), &v), SW_EINVAL);
    EXPECT(sw_options_get(NULL, KEY(key), &v), SW_EINVAL);
  }
  ck_assert_int_eq(v, 12345); /* untouched on failure */
  EXPECT_OK(sw_options_get(NULL, SW_OPT_STRIPES, &v)); /* NULL options: the defaults */
  ck_assert_int_eq(v, 4);
}

static void bad_sw_options_get_double(void) {
  sw_options *o = OPTS({SW_OPT_THRESHOLD, 2.5});
  double d = 7;
  EXPECT(sw_options_get_double(o, SW_OPT_THRESHOLD, NULL), SW_ENULL);
  FOR_EACH(key, BAD_KEYS, "%d") EXPECT(sw_options_get_double(o, KEY(key), &d), SW_EINVAL);
  ck_assert(d == 7);
  EXPECT_OK(sw_options_get_double(NULL, SW_OPT_THRESHOLD, &d));
  ck_assert(d == 0);
}

static void bad_sw_option_bounds(void) {
  double lo = 1, hi = 2, def = 3;
  FOR_EACH(key, BAD_KEYS, "%d") {
    EXPECT(sw_option_bounds(KEY(key), &lo, &hi, &def), SW_EINVAL);
    EXPECT(sw_option_bounds(KEY(key), NULL, NULL, NULL), SW_EINVAL);
  }
  ck_assert(lo == 1 && hi == 2 && def == 3);
  EXPECT_OK(sw_option_bounds(SW_OPT_STRIPES, NULL, NULL, NULL)); /* every out is optional */
}

static void bad_sw_option_name(void) {
  FOR_EACH(key, BAD_KEYS, "%d") EXPECT_NULL(sw_option_name(KEY(key)));
}

/* ======================================================= bucket registry */

static void bad_sw_bucket_type_register(void) {
  EXPECT(sw_bucket_type_register(NULL), SW_ENULL);
  bad_vtable bad[32];
  size_t nbad = bad_vtables(bad);
  for (size_t i = 0; i < nbad; i++) {
    NOTE("%s", bad[i].what);
    EXPECT(sw_bucket_type_register(&bad[i].t), SW_EABI);
  }
  NO_NOTE();
  /* The reserved prefix, also for a built-in's name. */
  static const char *const reserved[] = {"sw.", "sw.x", SW_TYPE_METRIC, SW_TYPE_METRIC_FUTURE};
  FOR_EACH(name, reserved, "%s") {
    sw_bucket_type t = plain_type();
    t.name = name;
    EXPECT(sw_bucket_type_register(&t), SW_EINVAL);
  }
  /* A taken name. */
  sw_bucket_type t = plain_type();
  t.name = "badinput.dup";
  int rc = sw_bucket_type_register(&t);
  ck_assert_msg(rc == SW_OK || rc == SW_EEXIST, "first register: %s", sw_last_error());
  EXPECT(sw_bucket_type_register(&t), SW_EEXIST);
  /* A full registry (128 types). Last: it leaves the registry full. */
  static char names[200][32];
  int full_at = -1;
  for (int i = 0; i < 200 && full_at < 0; i++) {
    snprintf(names[i], sizeof names[i], "badinput.fill.%d", i);
    t.name = names[i];
    rc = sw_bucket_type_register(&t);
    ck_assert_msg(rc == SW_OK || rc == SW_EFULL || rc == SW_EEXIST, "register %s: %s (%s)",
                  names[i], sw_err_name(rc), sw_last_error());
    if (rc == SW_EFULL) full_at = i;
  }
  ck_assert_msg(full_at >= 0 && full_at <= 128, "the registry never filled (%d)", full_at);
  t.name = "badinput.one.more";
  EXPECT(sw_bucket_type_register(&t), SW_EFULL);
  /* A full registry still finds what it holds. */
  ck_assert_ptr_nonnull(sw_bucket_type_find(SW_TYPE_METRIC));
}

static void bad_sw_bucket_type_find(void) {
  EXPECT_NULL(sw_bucket_type_find(NULL));
  static const char *const names[] = {"", "nonexistent", "sw.", "sw.metric.", "SW.METRIC"};
  FOR_EACH(name, names, "\"%s\"") EXPECT_NULL(sw_bucket_type_find(name));
  EXPECT_NULL(sw_bucket_type_find(NAME64));
  EXPECT_NULL(sw_bucket_type_find(NAME1000));
  ck_assert_ptr_nonnull(sw_bucket_type_find(SW_TYPE_METRIC));
}

/* The directory of the test plugins: SW_PLUGIN_DIR, or plugins/.libs next to
 * the symbols file. */
static void plugin_path(char *buf, size_t n, const char *plugin) {
#ifdef SW_PLUGIN_DIR
  snprintf(buf, n, "%s/%s.so", SW_PLUGIN_DIR, plugin);
#else
  const char *file = SW_SYMBOLS_FILE, *slash = strrchr(file, '/');
  int dir = slash ? (int)(slash - file) : 1;
  snprintf(buf, n, "%.*s/plugins/.libs/%s.so", dir, slash ? file : ".", plugin);
#endif
}

static void bad_sw_plugin_load(void) {
  uint32_t n = 77;
  EXPECT(sw_plugin_load(NULL, &n), SW_ENULL);
  EXPECT(sw_plugin_load(NULL, NULL), SW_ENULL);
  static const char *const paths[] = {"/nonexistent/plugin.so", "/", "libm.so.6", "",
                                      "no-such-plugin.so"};
  FOR_EACH(path, paths, "\"%s\"") {
    n = 77;
    EXPECT(sw_plugin_load(path, &n), SW_EPLUGIN);
    ck_assert_uint_eq(n, 0); /* *registered is 0 after a failure */
  }
  char long_path[5000];
  memset(long_path, 'p', sizeof long_path - 1);
  long_path[sizeof long_path - 1] = '\0';
  EXPECT(sw_plugin_load(long_path, NULL), SW_EPLUGIN);
  /* Not a shared object at all. */
  char junk[256];
  file_name(junk, sizeof junk, "junk.so");
  write_file(junk, "not an ELF file\n", 16);
  EXPECT(sw_plugin_load(junk, &n), SW_EPLUGIN);
  unlink(junk);
  /* The deliberately broken plugins of check_plugin, when built. */
  static const char *const broken[] = {"bad_major", "small_struct", "refuse"};
  FOR_EACH(plugin, broken, "%s") {
    char path[512];
    plugin_path(path, sizeof path, plugin);
    if (access(path, R_OK) != 0) continue;
    n = 77;
    EXPECT(sw_plugin_load(path, &n), SW_EABI);
    ck_assert_uint_eq(n, 0);
  }
}

/* ============================================================ leap array */

static void bad_sw_leap_array_create(void) {
  sw_bucket_type plain = plain_type(), big = big_type();
  sw_leap_array *la = (sw_leap_array *)&la;
  EXPECT(sw_leap_array_create(NULL, &plain, NULL, 10, 1000), SW_ENULL);
  EXPECT(sw_leap_array_create(&la, NULL, NULL, 10, 1000), SW_ENULL);
  ck_assert_ptr_null(la); /* *out is NULL after a failure */
  bad_vtable bad[32];
  size_t nbad = bad_vtables(bad);
  for (size_t i = 0; i < nbad; i++) {
    NOTE("%s", bad[i].what);
    la = (sw_leap_array *)&la;
    EXPECT(sw_leap_array_create(&la, &bad[i].t, NULL, 10, 1000), SW_EABI);
    EXPECT(sw_leap_array_create(&la, &bad[i].t, NULL, 0, 0), SW_EABI); /* vtable first */
    ck_assert_ptr_null(la);
  }
  NO_NOTE();
  FOR_EACH(n, BAD_SAMPLES, "%d") EXPECT(sw_leap_array_create(&la, &plain, NULL, n, 1000), SW_ESIZE);
  FOR_EACH(ms, BAD_INTERVALS, "%" PRId64)
    EXPECT(sw_leap_array_create(&la, &plain, NULL, 10, ms), SW_ESIZE);
  EXPECT(sw_leap_array_create(&la, &plain, NULL, 3, 1000), SW_ESIZE);
  EXPECT(sw_leap_array_create(&la, &plain, NULL, 2000, 1000), SW_ESIZE);
  EXPECT(sw_leap_array_create(&la, &plain, NULL, INT32_MAX, INT64_MAX), SW_ESIZE);
  /* More than 1 TiB. */
  EXPECT(sw_leap_array_create(&la, &big, NULL, INT32_MAX, INT32_MAX), SW_EOVERFLOW);
  EXPECT(sw_leap_array_create(&la, &big, NULL, 1 << 24, 1 << 24), SW_EOVERFLOW);
  ck_assert_ptr_null(la);
  /* A built-in type reads its context as its own configuration: refused. */
  int junk[64] = {0};
  EXPECT(sw_leap_array_create(&la, sw_bucket_type_find(SW_TYPE_METRIC), junk, 2, 1000), SW_EINVAL);
  ck_assert_ptr_null(la);
  /* Huge but valid: one window of INT64_MAX ms. */
  EXPECT_OK(sw_leap_array_create(&la, &plain, NULL, 1, INT64_MAX));
  sw_window w;
  EXPECT_OK(sw_leap_array_current_window_at(la, INT64_MAX, &w));
  EXPECT_OK(sw_leap_array_current_window_at(la, 0, &w));
  sw_leap_array_free(la);
}

static void bad_sw_leap_array_create_by_name(void) {
  sw_leap_array *la = (sw_leap_array *)&la;
  EXPECT(sw_leap_array_create_by_name(NULL, SW_TYPE_METRIC, NULL, 10, 1000), SW_ENULL);
  EXPECT(sw_leap_array_create_by_name(&la, NULL, NULL, 10, 1000), SW_ENULL);
  ck_assert_ptr_null(la);
  static const char *const names[] = {"", "nonexistent", "sw.", "sw.metric.x"};
  FOR_EACH(name, names, "\"%s\"")
    EXPECT(sw_leap_array_create_by_name(&la, name, NULL, 10, 1000), SW_ENOTFOUND);
  EXPECT(sw_leap_array_create_by_name(&la, NAME64, NULL, 10, 1000), SW_ENOTFOUND);
  EXPECT(sw_leap_array_create_by_name(&la, NAME1000, NULL, 0, 0), SW_ENOTFOUND); /* name first */
  /* A built-in type takes no context. */
  static const char *const builtins[] = {SW_TYPE_METRIC, SW_TYPE_METRIC_OCCUPIABLE,
                                         SW_TYPE_METRIC_FUTURE};
  FOR_EACH(name, builtins, "%s")
    EXPECT(sw_leap_array_create_by_name(&la, name, &la, 10, 1000), SW_EINVAL);
  FOR_EACH(n, BAD_SAMPLES, "%d")
    EXPECT(sw_leap_array_create_by_name(&la, SW_TYPE_METRIC, NULL, n, 1000), SW_ESIZE);
  FOR_EACH(ms, BAD_INTERVALS, "%" PRId64)
    EXPECT(sw_leap_array_create_by_name(&la, SW_TYPE_METRIC, NULL, 10, ms), SW_ESIZE);
  EXPECT(sw_leap_array_create_by_name(&la, SW_TYPE_METRIC, NULL, 7, 1000), SW_ESIZE);
  ck_assert_ptr_null(la);
}

static void bad_sw_leap_array_free(void) {
  mark_point();
  sw_leap_array_free(NULL);
}

static void bad_sw_leap_array_layout_size(void) {
  sw_bucket_type plain = plain_type(), big = big_type();
  const sw_bucket_type *metric = sw_bucket_type_find(SW_TYPE_METRIC);
  ck_assert_ptr_nonnull(metric);
  EXPECT(sw_leap_array_layout_size(NULL, 10, 1000), SW_ENULL);
  bad_vtable bad[32];
  size_t nbad = bad_vtables(bad);
  for (size_t i = 0; i < nbad; i++) {
    NOTE("%s", bad[i].what);
    EXPECT(sw_leap_array_layout_size(&bad[i].t, 10, 1000), SW_EABI);
  }
  NO_NOTE();
  FOR_EACH(n, BAD_SAMPLES, "%d") EXPECT(sw_leap_array_layout_size(&plain, n, 1000), SW_ESIZE);
  FOR_EACH(ms, BAD_INTERVALS, "%" PRId64)
    EXPECT(sw_leap_array_layout_size(&plain, 10, ms), SW_ESIZE);
  EXPECT(sw_leap_array_layout_size(&plain, 3, 1000), SW_ESIZE);
  EXPECT(sw_leap_array_layout_size(&big, INT32_MAX, INT32_MAX), SW_EOVERFLOW);
  /* Large but under 1 TiB: a size, not an error (nothing is allocated). */
  EXPECT_GE(sw_leap_array_layout_size(metric, INT32_MAX, INT32_MAX), (int64_t)INT32_MAX * 64);
}

/* Memory for an array of the plain type, 10 windows of 100 ms. */
static void *la_memory(int64_t *need) {
  sw_bucket_type plain = plain_type();
  *need = sw_leap_array_layout_size(&plain, 10, 1000);
  ck_assert_int_gt(*need, 0);
  void *mem = aligned_alloc(64, (size_t)(*need + 127) / 64 * 64);
  ck_assert_ptr_nonnull(mem);
  memset(mem, 0, (size_t)*need);
  return keep(mem, free_mem);
}

static void bad_sw_leap_array_init_at(void) {
  sw_bucket_type plain = plain_type();
  int64_t need;
  unsigned char *mem = la_memory(&need);
  EXPECT(sw_leap_array_init_at(NULL, (uint64_t)need, &plain, 10, 1000, 0), SW_ENULL);
  EXPECT(sw_leap_array_init_at(NULL, 0, NULL, 0, 0, 0), SW_ENULL);
  EXPECT(sw_leap_array_init_at(mem, (uint64_t)need, NULL, 10, 1000, 0), SW_ENULL);
  bad_vtable bad[32];
  size_t nbad = bad_vtables(bad);
  for (size_t i = 0; i < nbad; i++) {
    NOTE("%s", bad[i].what);
    EXPECT(sw_leap_array_init_at(mem, (uint64_t)need, &bad[i].t, 10, 1000, 0), SW_EABI);
  }
  NO_NOTE();
  FOR_EACH(n, BAD_SAMPLES, "%d")
    EXPECT(sw_leap_array_init_at(mem, (uint64_t)need, &plain, n, 1000, 0), SW_ESIZE);
  FOR_EACH(ms, BAD_INTERVALS, "%" PRId64)
    EXPECT(sw_leap_array_init_at(mem, (uint64_t)need, &plain, 10, ms, 0), SW_ESIZE);
  static const uintptr_t offsets[] = {1, 8, 32, 63};
  FOR_EACH(off, offsets, "%" PRIuPTR)
    EXPECT(sw_leap_array_init_at(mem + off, (uint64_t)need, &plain, 10, 1000, 0), SW_EINVAL);
  static const uint64_t sizes[] = {0, 1, 63, 64};
  FOR_EACH(size, sizes, "%" PRIu64)
    EXPECT(sw_leap_array_init_at(mem, size, &plain, 10, 1000, 0), SW_ESIZE);
  EXPECT(sw_leap_array_init_at(mem, (uint64_t)need - 1, &plain, 10, 1000, 0), SW_ESIZE);
  /* Unknown flag bits are refused (they stay free for later use). */
  EXPECT(sw_leap_array_init_at(mem, (uint64_t)need, &plain, 10, 1000, UINT32_MAX), SW_EINVAL);
  EXPECT_OK(sw_leap_array_init_at(mem, UINT64_MAX, &plain, 10, 1000, 0));
}

static void bad_sw_leap_array_attach(void) {
  sw_bucket_type plain = plain_type(), other = plain_type();
  other.bucket_size = 4096; /* another body size */
  int64_t need;
  unsigned char *mem = la_memory(&need);
  sw_leap_array *la = (sw_leap_array *)&la;
  EXPECT(sw_leap_array_attach(NULL, mem, (uint64_t)need, &plain, NULL), SW_ENULL);
  EXPECT(sw_leap_array_attach(&la, NULL, (uint64_t)need, &plain, NULL), SW_ENULL);
  ck_assert_ptr_null(la);
  EXPECT(sw_leap_array_attach(&la, mem, (uint64_t)need, NULL, NULL), SW_ENULL);
  /* Never initialised: zeros, then junk. */
  EXPECT(sw_leap_array_attach(&la, mem, (uint64_t)need, &plain, NULL), SW_EFOREIGN);
  memset(mem, 0xab, (size_t)need);
  EXPECT(sw_leap_array_attach(&la, mem, (uint64_t)need, &plain, NULL), SW_EFOREIGN);
  static const uint64_t small[] = {0, 1, 16};
  FOR_EACH(size, small, "%" PRIu64)
    EXPECT(sw_leap_array_attach(&la, mem, size, &plain, NULL), SW_ECORRUPT);
  ck_assert_int_eq(sw_leap_array_init_at(mem, (uint64_t)need, &plain, 10, 1000, 0), SW_OK);
  EXPECT(sw_leap_array_attach(&la, mem, (uint64_t)need - 1, &plain, NULL), SW_ECORRUPT);
  EXPECT(sw_leap_array_attach(&la, mem, (uint64_t)need, &other, NULL), SW_ECORRUPT);
  /* same size, another type: its callbacks would misread the buckets */
  sw_bucket_type renamed = plain_type();
  renamed.name = "test.renamed";
  EXPECT(sw_leap_array_attach(&la, mem, (uint64_t)need, &renamed, NULL), SW_ETYPE);
  EXPECT(sw_leap_array_attach(&la, mem + 8, (uint64_t)need - 8, &plain, NULL), SW_EINVAL);
  int junk[64] = {0};
  EXPECT(sw_leap_array_attach(&la, mem, (uint64_t)need, sw_bucket_type_find(SW_TYPE_METRIC), junk),
         SW_EINVAL);
  bad_vtable bad[32];
  size_t nbad = bad_vtables(bad);
  for (size_t i = 0; i < nbad; i++) {
    if (bad[i].t.bucket_size != plain.bucket_size) continue; /* would fail the size check */
    NOTE("%s", bad[i].what);
    EXPECT(sw_leap_array_attach(&la, mem, (uint64_t)need, &bad[i].t, NULL), SW_EABI);
  }
  NO_NOTE();
  ck_assert_ptr_null(la);
  /* Every byte of the header corrupted in turn: a code of the header check,
   * or a handle that works. */
  for (int byte = 0; byte < 64; byte++) {
    static const unsigned char flips[] = {0x01, 0x80, 0xff};
    for (size_t f = 0; f < NELEM(flips); f++) {
      ck_assert_int_eq(sw_leap_array_init_at(mem, (uint64_t)need, &plain, 10, 1000, 0), SW_OK);
      mem[byte] ^= flips[f];
      NOTE("header byte %d ^ 0x%02x", byte, flips[f]);
      mark_point();
      int rc = sw_leap_array_attach(&la, mem, (uint64_t)need, &plain, NULL);
      ck_assert_msg(rc == SW_OK || rc == SW_EFOREIGN || rc == SW_EVERSION || rc == SW_ECORRUPT ||
                        rc == SW_ETYPE,
                    "[%s] attach with %s returned %s", cur_fn, note, sw_err_name(rc));
      if (rc == SW_OK) {
        sw_window w[10];
        ck_assert_int_eq(sw_leap_array_current_window_at(la, 5000, &w[0]), SW_OK);
        ck_assert_int_ge(sw_leap_array_list_all(la, w, 10), 0);
        sw_leap_array_free(la);
      } else {
        FRESH_ERROR("sw_leap_array_attach");
        ck_assert_ptr_null(la);
      }
    }
  }
  NO_NOTE();
  ck_assert_int_eq(sw_leap_array_init_at(mem, (uint64_t)need, &plain, 10, 1000, 0), SW_OK);
  EXPECT_OK(sw_leap_array_attach(&la, mem, UINT64_MAX, &plain, NULL));
  sw_leap_array_free(la);
}

static void bad_sw_leap_array_sample_count(void) {
  EXPECT(sw_leap_array_sample_count(NULL), SW_ENULL);
}
static void bad_sw_leap_array_interval_ms(void) {
  EXPECT(sw_leap_array_interval_ms(NULL), SW_ENULL);
}
static void bad_sw_leap_array_window_length_ms(void) {
  EXPECT(sw_leap_array_window_length_ms(NULL), SW_ENULL);
}
static void bad_sw_leap_array_detached_count(void) {
  EXPECT(sw_leap_array_detached_count(NULL), SW_ENULL);
}
static void bad_sw_leap_array_type(void) { EXPECT_NULL(sw_leap_array_type(NULL)); }

static void bad_sw_leap_array_time_index(void) {
  sw_leap_array *la = la10(), *la1 = la_wl1();
  int32_t idx = 77;
  EXPECT(sw_leap_array_time_index(NULL, 0, &idx), SW_ENULL);
  EXPECT(sw_leap_array_time_index(la, 0, NULL), SW_ENULL);
  FOR_EACH(t, BAD_T, "%" PRId64) EXPECT(sw_leap_array_time_index(la, t, &idx), SW_ETIME);
  ck_assert_int_eq(idx, 77);
  EXPECT_HUGE_T(sw_leap_array_time_index(la, INT64_MAX, &idx));
  EXPECT_HUGE_T(sw_leap_array_time_index(la1, INT64_MAX, &idx));
  ck_assert(idx >= 0 && idx < 2);
}

static void bad_sw_leap_array_window_start(void) {
  sw_leap_array *la = la10(), *la1 = la_wl1();
  int64_t start = 77;
  EXPECT(sw_leap_array_window_start(NULL, 0, &start), SW_ENULL);
  EXPECT(sw_leap_array_window_start(la, 0, NULL), SW_ENULL);
  FOR_EACH(t, BAD_T, "%" PRId64) EXPECT(sw_leap_array_window_start(la, t, &start), SW_ETIME);
  ck_assert_int_eq(start, 77);
  EXPECT_HUGE_T(sw_leap_array_window_start(la, INT64_MAX, &start));
  EXPECT_HUGE_T(sw_leap_array_window_start(la1, INT64_MAX, &start));
  ck_assert_int_eq(start, INT64_MAX);
}

static void bad_sw_leap_array_current_window_at(void) {
  sw_leap_array *la = la10(), *la1 = la_wl1();
  sw_window w;
  EXPECT(sw_leap_array_current_window_at(NULL, 0, &w), SW_ENULL);
  EXPECT(sw_leap_array_current_window_at(la, 0, NULL), SW_ENULL);
  FOR_EACH(t, BAD_T, "%" PRId64) EXPECT(sw_leap_array_current_window_at(la, t, &w), SW_ETIME);
  EXPECT_HUGE_T(sw_leap_array_current_window_at(la, INT64_MAX, &w));
  EXPECT_HUGE_T(sw_leap_array_current_window_at(la1, INT64_MAX, &w));
  EXPECT_HUGE_T(sw_leap_array_current_window_at(la1, INT64_MAX - 2, &w)); /* behind: detached */
  ck_assert_uint_eq(w.flags, SW_WINDOW_DETACHED);
}

static void bad_sw_leap_array_current_window(void) {
  sw_leap_array *la = la10();
  sw_window w;
  EXPECT(sw_leap_array_current_window(NULL, &w), SW_ENULL);
  EXPECT(sw_leap_array_current_window(la, NULL), SW_ENULL);
  FOR_EACH(now, BAD_T, "%" PRId64) {
    clock_at(now);
    EXPECT(sw_leap_array_current_window(la, &w), SW_ETIME);
  }
  clock_real();
}

static void bad_sw_leap_array_previous_window_at(void) {
  la_window_at(sw_leap_array_previous_window_at);
}
static void bad_sw_leap_array_previous_window(void) {
  la_window_now(sw_leap_array_previous_window);
}
static void bad_sw_leap_array_valid_head_at(void) { la_window_at(sw_leap_array_valid_head_at); }
static void bad_sw_leap_array_valid_head(void) { la_window_now(sw_leap_array_valid_head); }
static void bad_sw_leap_array_window_value_at(void) {
  la_window_at(sw_leap_array_window_value_at);
}

static void bad_sw_leap_array_is_window_deprecated_at(void) {
  sw_leap_array *la = la10();
  EXPECT(sw_leap_array_is_window_deprecated_at(NULL, 0, 0), SW_ENULL);
  FOR_EACH(t, BAD_T, "%" PRId64) {
    EXPECT(sw_leap_array_is_window_deprecated_at(la, t, 0), SW_ETIME);
    EXPECT(sw_leap_array_is_window_deprecated_at(la, 0, t), SW_ETIME);
    EXPECT(sw_leap_array_is_window_deprecated_at(la, INT64_MAX, t), SW_ETIME);
  }
  EXPECT(sw_leap_array_is_window_deprecated_at(la, INT64_MAX, 0), 1);
  EXPECT(sw_leap_array_is_window_deprecated_at(la, 0, INT64_MAX), 0);
  EXPECT(sw_leap_array_is_window_deprecated_at(la, INT64_MAX, INT64_MAX), 0);
}

static void bad_sw_leap_array_list_at(void) { la_list_at(list_at_w); }
static void bad_sw_leap_array_values_at(void) { la_list_at(values_at_w); }
static void bad_sw_leap_array_values_on_condition_at(void) { la_list_at(values_cond_w); }

static void bad_sw_leap_array_list(void) {
  sw_leap_array *la = la10();
  sw_window w[10];
  EXPECT(sw_leap_array_list(NULL, w, 10), SW_ENULL);
  EXPECT(sw_leap_array_list(la, NULL, 1), SW_ENULL);
  FOR_EACH(now, BAD_T, "%" PRId64) {
    clock_at(now);
    EXPECT(sw_leap_array_list(la, w, 10), SW_ETIME);
  }
  clock_at(5000);
  EXPECT(sw_leap_array_list(la, NULL, 0), 0);
  clock_real();
}

static void bad_sw_leap_array_values(void) {
  sw_leap_array *la = la10();
  void *v[10];
  EXPECT(sw_leap_array_values(NULL, v, 10), SW_ENULL);
  EXPECT(sw_leap_array_values(la, NULL, 1), SW_ENULL);
  FOR_EACH(now, BAD_T, "%" PRId64) {
    clock_at(now);
    EXPECT(sw_leap_array_values(la, v, 10), SW_ETIME);
  }
  clock_real();
}

static void bad_sw_leap_array_list_all(void) {
  sw_leap_array *la = la10();
  sw_window w[10];
  ck_assert_int_eq(sw_leap_array_add_at(la, 1000, SW_EVENT_PASS, 1), SW_OK);
  EXPECT(sw_leap_array_list_all(NULL, w, 10), SW_ENULL);
  EXPECT(sw_leap_array_list_all(la, NULL, 1), SW_ENULL);
  EXPECT(sw_leap_array_list_all(la, NULL, UINT32_MAX), SW_ENULL);
  EXPECT(sw_leap_array_list_all(la, NULL, 0), 1);
  EXPECT(sw_leap_array_list_all(la, w, UINT32_MAX), 1);
}

static void bad_sw_leap_array_add_at(void) {
  sw_bucket_type plain = plain_type();
  sw_leap_array *la = la10(), *la1 = la_wl1(), *p = NULL;
  ck_assert_int_eq(sw_leap_array_create(&p, &plain, NULL, 10, 1000), SW_OK);
  keep(p, free_la);
  EXPECT(sw_leap_array_add_at(NULL, 0, 0, 1), SW_ENULL);
  EXPECT(sw_leap_array_add_at(p, 0, 0, 1), SW_ENOTSUP);
  EXPECT(sw_leap_array_add_at(p, -1, 99, -1), SW_ENOTSUP); /* the type first */
  FOR_EACH(field, BAD_FIELDS, "%u") EXPECT(sw_leap_array_add_at(la, 0, field, 1), SW_ERANGE);
  FOR_EACH(t, BAD_T, "%" PRId64) EXPECT(sw_leap_array_add_at(la, t, 0, 1), SW_ETIME);
  FOR_EACH(n, BAD_N, "%" PRId64) EXPECT(sw_leap_array_add_at(la, 1000, 0, n), SW_ERANGE);
  EXPECT(sw_leap_array_add_at(la, -1, 99, 1), SW_ERANGE); /* the field before the time */
  EXPECT_OK(sw_leap_array_add_at(la, 1000, SW_FIELD_MIN_RT, 0));
  EXPECT_HUGE_T(sw_leap_array_add_at(la, INT64_MAX, 0, 1));
  EXPECT_HUGE_T(sw_leap_array_add_at(la1, INT64_MAX, 0, 1));
}

static void bad_sw_leap_array_add(void) {
  sw_bucket_type plain = plain_type();
  sw_leap_array *la = la10(), *p = NULL;
  ck_assert_int_eq(sw_leap_array_create(&p, &plain, NULL, 10, 1000), SW_OK);
  keep(p, free_la);
  EXPECT(sw_leap_array_add(NULL, 0, 1), SW_ENULL);
  EXPECT(sw_leap_array_add(p, 0, 1), SW_ENOTSUP);
  FOR_EACH(field, BAD_FIELDS, "%u") EXPECT(sw_leap_array_add(la, field, 1), SW_ERANGE);
  clock_at(5000);
  FOR_EACH(n, BAD_N, "%" PRId64) EXPECT(sw_leap_array_add(la, 0, n), SW_ERANGE);
  FOR_EACH(now, BAD_T, "%" PRId64) {
    clock_at(now);
    EXPECT(sw_leap_array_add(la, 0, 1), SW_ETIME);
  }
  clock_real();
}

static void bad_sw_leap_array_sum_at(void) {
  sw_bucket_type plain = plain_type();
  sw_leap_array *la = la10(), *la1 = la_wl1(), *p = NULL;
  ck_assert_int_eq(sw_leap_array_create(&p, &plain, NULL, 10, 1000), SW_OK);
  keep(p, free_la);
  int64_t sum = 77;
  EXPECT(sw_leap_array_sum_at(NULL, 0, 0, &sum), SW_ENULL);
  EXPECT(sw_leap_array_sum_at(p, 0, 0, &sum), SW_ENOTSUP);
  FOR_EACH(field, BAD_FIELDS, "%u") EXPECT(sw_leap_array_sum_at(la, 0, field, &sum), SW_ERANGE);
  EXPECT(sw_leap_array_sum_at(la, 0, 0, NULL), SW_ENULL);
  FOR_EACH(t, BAD_T, "%" PRId64) EXPECT(sw_leap_array_sum_at(la, t, 0, &sum), SW_ETIME);
  ck_assert_int_eq(sum, 77);
  EXPECT_HUGE_T(sw_leap_array_sum_at(la, INT64_MAX, 0, &sum));
  ck_assert_int_eq(sw_leap_array_add_at(la1, INT64_MAX, 0, 1), SW_OK);
  EXPECT_HUGE_T(sw_leap_array_sum_at(la1, INT64_MAX, 0, &sum));
}

/* ========================================================= metric bucket */

static void bad_sw_metric_bucket_get(void) {
  sw_bucket_type plain = plain_type();
  sw_leap_array *la = la10(), *p = NULL;
  ck_assert_int_eq(sw_leap_array_create(&p, &plain, NULL, 10, 1000), SW_OK);
  keep(p, free_la);
  sw_window w, pw;
  ck_assert_int_eq(sw_leap_array_current_window_at(la, 1000, &w), SW_OK);
  ck_assert_int_eq(sw_leap_array_current_window_at(p, 1000, &pw), SW_OK);
  EXPECT(sw_metric_bucket_get(NULL, w.bucket, 0), SW_ENULL);
  EXPECT(sw_metric_bucket_get(la, NULL, 0), SW_ENULL);
  EXPECT(sw_metric_bucket_get(p, pw.bucket, 0), SW_ETYPE);
  FOR_EACH(field, BAD_FIELDS, "%u") EXPECT(sw_metric_bucket_get(la, w.bucket, field), SW_ERANGE);
  EXPECT(sw_metric_bucket_get(la, w.bucket, SW_FIELD_MIN_RT), 5000); /* idle: max RT */
}

/* ================================================================ metric */

static void bad_sw_metric_create(void) {
  sw_metric *m = (sw_metric *)&m;
  EXPECT(sw_metric_create(NULL, 10, 1000, NULL), SW_ENULL);
  FOR_EACH(n, BAD_SAMPLES, "%d") {
    m = (sw_metric *)&m;
    EXPECT(sw_metric_create(&m, n, 1000, NULL), SW_ESIZE);
    ck_assert_ptr_null(m);
  }
  FOR_EACH(ms, BAD_INTERVALS, "%" PRId64) EXPECT(sw_metric_create(&m, 10, ms, NULL), SW_ESIZE);
  EXPECT(sw_metric_create(&m, 3, 1000, NULL), SW_ESIZE);
  EXPECT(sw_metric_create(&m, 2000, 1000, NULL), SW_ESIZE);
  EXPECT(sw_metric_create(&m, INT32_MAX, INT64_MAX, NULL), SW_ESIZE);
  EXPECT(sw_metric_create(&m, INT32_MAX, INT32_MAX, OPTS({SW_OPT_STRIPES, 64})), SW_EOVERFLOW);
  EXPECT(sw_metric_create(&m, INT32_MAX, INT32_MAX,
                          OPTS({SW_OPT_STRIPES, 64}, {SW_OPT_OCCUPIABLE, 1})),
         SW_EOVERFLOW);
  ck_assert_ptr_null(m);
}

static void bad_sw_metric_free(void) {
  mark_point();
  sw_metric_free(NULL);
}

static void bad_sw_metric_leap_array(void) { EXPECT_NULL(sw_metric_leap_array(NULL)); }
static void bad_sw_metric_sample_count(void) { EXPECT(sw_metric_sample_count(NULL), SW_ENULL); }
static void bad_sw_metric_interval_sec(void) {
  EXPECT_D(sw_metric_interval_sec(NULL), SW_ENULL);
}

static void bad_sw_metric_pass_at(void) { metric_reader_at(sw_metric_pass_at, 0); }
static void bad_sw_metric_pass(void) { metric_reader_now(sw_metric_pass); }
static void bad_sw_metric_block_at(void) { metric_reader_at(sw_metric_block_at, 0); }
static void bad_sw_metric_block(void) { metric_reader_now(sw_metric_block); }
static void bad_sw_metric_exception_at(void) { metric_reader_at(sw_metric_exception_at, 0); }
static void bad_sw_metric_exception(void) { metric_reader_now(sw_metric_exception); }
static void bad_sw_metric_success_at(void) { metric_reader_at(sw_metric_success_at, 0); }
static void bad_sw_metric_success(void) { metric_reader_now(sw_metric_success); }
static void bad_sw_metric_rt_at(void) { metric_reader_at(sw_metric_rt_at, 0); }
static void bad_sw_metric_rt(void) { metric_reader_now(sw_metric_rt); }
static void bad_sw_metric_occupied_pass_at(void) {
  metric_reader_at(sw_metric_occupied_pass_at, 0);
}
static void bad_sw_metric_occupied_pass(void) { metric_reader_now(sw_metric_occupied_pass); }
static void bad_sw_metric_max_success_at(void) { metric_reader_at(sw_metric_max_success_at, 1); }
static void bad_sw_metric_max_success(void) { metric_reader_now(sw_metric_max_success); }
static void bad_sw_metric_min_rt_at(void) { metric_reader_at(sw_metric_min_rt_at, 1); }
static void bad_sw_metric_min_rt(void) { metric_reader_now(sw_metric_min_rt); }
static void bad_sw_metric_window_pass_at(void) { metric_reader_at(sw_metric_window_pass_at, 0); }
static void bad_sw_metric_previous_window_pass_at(void) {
  metric_reader_at(sw_metric_previous_window_pass_at, 0);
}
static void bad_sw_metric_previous_window_pass(void) {
  metric_reader_now(sw_metric_previous_window_pass);
}
static void bad_sw_metric_previous_window_block_at(void) {
  metric_reader_at(sw_metric_previous_window_block_at, 0);
}
static void bad_sw_metric_previous_window_block(void) {
  metric_reader_now(sw_metric_previous_window_block);
}
static void bad_sw_metric_waiting_at(void) { metric_reader_at(sw_metric_waiting_at, 0); }
static void bad_sw_metric_waiting(void) { metric_reader_now(sw_metric_waiting); }

static void bad_sw_metric_sum_at(void) {
  sw_metric *m = metric10(), *m1 = metric_wl1();
  EXPECT(sw_metric_sum_at(NULL, 0, SW_EVENT_PASS), SW_ENULL);
  EXPECT(sw_metric_sum_at(NULL, -1, EV(99)), SW_ENULL);
  FOR_EACH(t, BAD_T, "%" PRId64) EXPECT(sw_metric_sum_at(m, t, SW_EVENT_PASS), SW_ETIME);
  FOR_EACH(ev, BAD_EV, "%d") EXPECT(sw_metric_sum_at(m, 0, EV(ev)), SW_ERANGE);
  EXPECT(sw_metric_sum_at(m, -1, EV(99)), SW_ETIME);
  EXPECT_HUGE_T(sw_metric_sum_at(m, INT64_MAX, SW_EVENT_RT));
  EXPECT_HUGE_T(sw_metric_sum_at(m1, INT64_MAX, SW_EVENT_RT));
}

static void bad_sw_metric_add_pass_at(void) { metric_adder_at(sw_metric_add_pass_at); }
static void bad_sw_metric_add_pass(void) { metric_adder_now(sw_metric_add_pass); }
static void bad_sw_metric_add_block_at(void) { metric_adder_at(sw_metric_add_block_at); }
static void bad_sw_metric_add_block(void) { metric_adder_now(sw_metric_add_block); }
static void bad_sw_metric_add_exception_at(void) { metric_adder_at(sw_metric_add_exception_at); }
static void bad_sw_metric_add_exception(void) { metric_adder_now(sw_metric_add_exception); }
static void bad_sw_metric_add_success_at(void) { metric_adder_at(sw_metric_add_success_at); }
static void bad_sw_metric_add_success(void) { metric_adder_now(sw_metric_add_success); }
static void bad_sw_metric_add_occupied_pass_at(void) {
  metric_adder_at(sw_metric_add_occupied_pass_at);
}
static void bad_sw_metric_add_occupied_pass(void) {
  metric_adder_now(sw_metric_add_occupied_pass);
}
static void bad_sw_metric_add_rt_at(void) { metric_adder_at(sw_metric_add_rt_at); }
static void bad_sw_metric_add_rt(void) { metric_adder_now(sw_metric_add_rt); }

static void bad_sw_metric_add_at(void) {
  sw_metric *m = metric10();
  EXPECT(sw_metric_add_at(NULL, 0, SW_EVENT_PASS, 1), SW_ENULL);
  FOR_EACH(t, BAD_T, "%" PRId64) EXPECT(sw_metric_add_at(m, t, SW_EVENT_PASS, 1), SW_ETIME);
  FOR_EACH(ev, BAD_EV, "%d") EXPECT(sw_metric_add_at(m, 0, EV(ev), 1), SW_ERANGE);
  FOR_EACH(n, BAD_N, "%" PRId64) {
    EXPECT(sw_metric_add_at(m, 0, SW_EVENT_PASS, n), SW_ERANGE);
    EXPECT(sw_metric_add_at(m, 0, SW_EVENT_RT, n), SW_ERANGE);
  }
  EXPECT(sw_metric_add_at(m, 0, EV(99), -1), SW_ERANGE); /* the event names itself */
  ck_assert_ptr_nonnull(strstr(sw_last_error(), "event"));
  EXPECT_HUGE_T(sw_metric_add_at(m, INT64_MAX, SW_EVENT_RT, INT32_MAX));
}

static void bad_sw_metric_try_pass_at(void) {
  sw_metric *m = metric10(), *m1 = metric_wl1();
  int64_t pass = 77;
  EXPECT(sw_metric_try_pass_at(NULL, 0, 1, 10, &pass), SW_ENULL);
  FOR_EACH(t, BAD_T, "%" PRId64) EXPECT(sw_metric_try_pass_at(m, t, 1, 10, &pass), SW_ETIME);
  FOR_EACH(n, BAD_N, "%" PRId64) EXPECT(sw_metric_try_pass_at(m, 0, n, 10, &pass), SW_ERANGE);
  ck_assert_int_eq(pass, 77); /* untouched on failure */
  /* Any limit is valid: negative ones refuse everything. */
  EXPECT(sw_metric_try_pass_at(m, 0, 0, -1, NULL), 0);
  EXPECT(sw_metric_try_pass_at(m, 0, 1, INT64_MIN, &pass), 0);
  EXPECT(sw_metric_try_pass_at(m, 0, INT32_MAX, INT64_MAX, NULL), 1);
  EXPECT_HUGE_T(sw_metric_try_pass_at(m, INT64_MAX, 1, INT64_MAX, &pass));
  EXPECT_HUGE_T(sw_metric_try_pass_at(m1, INT64_MAX, INT32_MAX, INT64_MAX, &pass));
}

static void bad_sw_metric_try_pass(void) {
  sw_metric *m = metric10();
  EXPECT(sw_metric_try_pass(NULL, 1, 10, NULL), SW_ENULL);
  clock_at(5000);
  FOR_EACH(n, BAD_N, "%" PRId64) EXPECT(sw_metric_try_pass(m, n, 10, NULL), SW_ERANGE);
  FOR_EACH(now, BAD_T, "%" PRId64) {
    clock_at(now);
    EXPECT(sw_metric_try_pass(m, 1, 10, NULL), SW_ETIME);
  }
  clock_real();
}

static void bad_sw_metric_add_waiting(void) {
  sw_metric *m = metric10(), *occ = metric_occ(), *occ1 = metric_occ_wl1();
  EXPECT(sw_metric_add_waiting(NULL, 1000, 1), SW_ENULL);
  FOR_EACH(t, BAD_T, "%" PRId64) {
    EXPECT(sw_metric_add_waiting(occ, t, 1), SW_ETIME);
    EXPECT(sw_metric_add_waiting(m, t, 1), SW_ETIME); /* the time before the kind */
  }
  FOR_EACH(n, BAD_N, "%" PRId64) EXPECT(sw_metric_add_waiting(occ, 1000, n), SW_ERANGE);
  EXPECT(sw_metric_add_waiting(m, 1000, 1), SW_ENOTSUP);
  EXPECT_HUGE_T(sw_metric_add_waiting(occ, INT64_MAX, 1));
  EXPECT_HUGE_T(sw_metric_add_waiting(occ1, INT64_MAX, INT32_MAX));
  EXPECT_HUGE_T(sw_metric_waiting_at(occ1, INT64_MAX - 1));
}

static void bad_sw_metric_details_at(void) { metric_records_at(sw_metric_details_at); }
static void bad_sw_metric_windows_at(void) { metric_records_at(sw_metric_windows_at); }
static int details_cond_w(const sw_metric *m, int64_t t, sw_metric_record *out, uint32_t cap) {
  return sw_metric_details_on_condition_at(m, t, NULL, NULL, out, cap);
}
static void bad_sw_metric_details_on_condition_at(void) { metric_records_at(details_cond_w); }

static void bad_sw_metric_details(void) {
  sw_metric *m = metric10();
  sw_metric_record rec[10];
  EXPECT(sw_metric_details(NULL, rec, 10), SW_ENULL);
  EXPECT(sw_metric_details(m, NULL, 1), SW_ENULL);
  FOR_EACH(now, BAD_T, "%" PRId64) {
    clock_at(now);
    EXPECT(sw_metric_details(m, rec, 10), SW_ETIME);
  }
  clock_at(5000);
  EXPECT(sw_metric_details(m, rec, UINT32_MAX), 0);
  clock_real();
}

/* ========================================================== sliding view */

static void bad_sw_sliding_view_create(void) {
  sw_metric *m = metric10(); /* 10 x 100 ms */
  sw_sliding_view *v = (sw_sliding_view *)&v;
  EXPECT(sw_sliding_view_create(NULL, m, 5, 500), SW_ENULL);
  EXPECT(sw_sliding_view_create(&v, NULL, 5, 500), SW_ENULL);
  ck_assert_ptr_null(v);
  FOR_EACH(n, BAD_SAMPLES, "%d") EXPECT(sw_sliding_view_create(&v, m, n, 500), SW_ESIZE);
  FOR_EACH(ms, BAD_INTERVALS, "%" PRId64) EXPECT(sw_sliding_view_create(&v, m, 5, ms), SW_ESIZE);
  EXPECT(sw_sliding_view_create(&v, m, 3, 500), SW_ESIZE);
  EXPECT(sw_sliding_view_create(&v, m, INT32_MAX, INT64_MAX), SW_ESIZE);
  /* Valid alone, not over this metric. */
  EXPECT(sw_sliding_view_create(&v, m, 1, 300), SW_EGEOMETRY);    /* 300 does not divide 1000 */
  EXPECT(sw_sliding_view_create(&v, m, 1, 2000), SW_EGEOMETRY);   /* longer than the real one */
  EXPECT(sw_sliding_view_create(&v, m, 10, 500), SW_EGEOMETRY);   /* 50 ms windows < 100 ms */
  EXPECT(sw_sliding_view_create(&v, m, 1, INT64_MAX), SW_EGEOMETRY);
  EXPECT(sw_sliding_view_create(&v, m, INT32_MAX, (int64_t)INT32_MAX * 2), SW_EGEOMETRY);
  ck_assert_ptr_null(v);
}

static void bad_sw_sliding_view_free(void) {
  mark_point();
  sw_sliding_view_free(NULL);
}

static void bad_sw_sliding_view_sum_at(void) { view_event_at(sw_sliding_view_sum_at); }
static void bad_sw_sliding_view_max_of_single_bucket_at(void) {
  view_event_at(sw_sliding_view_max_of_single_bucket_at);
}
static void bad_sw_sliding_view_qps_at(void) { view_event_d_at(sw_sliding_view_qps_at); }
static void bad_sw_sliding_view_previous_qps_at(void) {
  view_event_d_at(sw_sliding_view_previous_qps_at);
}

static void bad_sw_sliding_view_min_rt_at(void) {
  sw_metric *m = metric10(), *m1 = metric_wl1();
  sw_sliding_view *v = view_on(m, 5, 500), *v1 = view_on(m1, 2, 2);
  EXPECT(sw_sliding_view_min_rt_at(NULL, 0), SW_ENULL);
  FOR_EACH(t, BAD_T, "%" PRId64) EXPECT(sw_sliding_view_min_rt_at(v, t), SW_ETIME);
  EXPECT(sw_sliding_view_min_rt_at(v, 0), 5000);
  EXPECT_HUGE_T(sw_sliding_view_min_rt_at(v, INT64_MAX));
  EXPECT_HUGE_T(sw_sliding_view_min_rt_at(v1, INT64_MAX));
}

static void bad_sw_sliding_view_avg_rt_at(void) {
  sw_metric *m = metric10(), *m1 = metric_wl1();
  sw_sliding_view *v = view_on(m, 5, 500), *v1 = view_on(m1, 2, 2);
  EXPECT_D(sw_sliding_view_avg_rt_at(NULL, 0), SW_ENULL);
  FOR_EACH(t, BAD_T, "%" PRId64) EXPECT_D(sw_sliding_view_avg_rt_at(v, t), SW_ETIME);
  EXPECT_D(sw_sliding_view_avg_rt_at(v, 0), 0);
  EXPECT_D_HUGE_T(sw_sliding_view_avg_rt_at(v, INT64_MAX));
  EXPECT_D_HUGE_T(sw_sliding_view_avg_rt_at(v1, INT64_MAX));
}

static void bad_sw_sliding_view_second_metrics_on_condition_at(void) {
  sw_metric *m = metric10(), *m1 = metric_wl1();
  sw_sliding_view *v = view_on(m, 5, 500), *v1 = view_on(m1, 2, 2);
  sw_metric_record rec[10];
  ck_assert_int_eq(sw_metric_add_pass_at(m, 1000, 1), SW_OK);
  EXPECT(sw_sliding_view_second_metrics_on_condition_at(NULL, 0, NULL, NULL, rec, 10), SW_ENULL);
  EXPECT(sw_sliding_view_second_metrics_on_condition_at(v, 1000, NULL, NULL, NULL, 1), SW_ENULL);
  EXPECT(sw_sliding_view_second_metrics_on_condition_at(v, 1000, NULL, NULL, NULL, 0), 1);
  FOR_EACH(t, BAD_T, "%" PRId64)
    EXPECT(sw_sliding_view_second_metrics_on_condition_at(v, t, NULL, NULL, rec, 10), SW_ETIME);
  EXPECT(sw_sliding_view_second_metrics_on_condition_at(v, 1000, NULL, NULL, rec, UINT32_MAX), 1);
  EXPECT_HUGE_T(sw_sliding_view_second_metrics_on_condition_at(v, INT64_MAX, NULL, NULL, rec, 10));
  EXPECT_HUGE_T(sw_sliding_view_second_metrics_on_condition_at(v1, INT64_MAX, NULL, NULL, rec, 10));
}

/* ================================================================== node */

static void bad_sw_node_create(void) {
  sw_node *node = (sw_node *)&node;
  EXPECT(sw_node_create(NULL, NULL), SW_ENULL);
  for (int i = 0; i < N_BAD_GEOMETRIES; i++) {
    int code;
    const sw_options *o = bad_geometry(i, &code);
    NOTE("geometry %d", i);
    node = (sw_node *)&node;
    EXPECT(sw_node_create(&node, o), code);
    ck_assert_ptr_null(node);
  }
  NO_NOTE();
}

static void bad_sw_node_free(void) {
  mark_point();
  sw_node_free(NULL);
}

static void bad_sw_node_second_metric(void) { EXPECT_NULL(sw_node_second_metric(NULL)); }
static void bad_sw_node_minute_metric(void) { EXPECT_NULL(sw_node_minute_metric(NULL)); }

static void bad_sw_node_pass_qps_at(void) { node_rate_at(sw_node_pass_qps_at); }
static void bad_sw_node_block_qps_at(void) { node_rate_at(sw_node_block_qps_at); }
static void bad_sw_node_success_qps_at(void) { node_rate_at(sw_node_success_qps_at); }
static void bad_sw_node_exception_qps_at(void) { node_rate_at(sw_node_exception_qps_at); }
static void bad_sw_node_occupied_pass_qps_at(void) { node_rate_at(sw_node_occupied_pass_qps_at); }
static void bad_sw_node_total_qps_at(void) { node_rate_at(sw_node_total_qps_at); }
static void bad_sw_node_avg_rt_at(void) { node_rate_at(sw_node_avg_rt_at); }
static void bad_sw_node_min_rt_at(void) { node_rate_at(sw_node_min_rt_at); }
static void bad_sw_node_max_success_qps_at(void) { node_rate_at(sw_node_max_success_qps_at); }

static void bad_sw_node_previous_pass_qps_at(void) { node_read_at(sw_node_previous_pass_qps_at); }
static void bad_sw_node_previous_block_qps_at(void) {
  node_read_at(sw_node_previous_block_qps_at);
}
static void bad_sw_node_total_request_at(void) { node_read_at(sw_node_total_request_at); }
static void bad_sw_node_total_pass_at(void) { node_read_at(sw_node_total_pass_at); }
static void bad_sw_node_total_success_at(void) { node_read_at(sw_node_total_success_at); }
static void bad_sw_node_total_exception_at(void) { node_read_at(sw_node_total_exception_at); }
static void bad_sw_node_block_request_at(void) { node_read_at(sw_node_block_request_at); }
static void bad_sw_node_waiting_at(void) { node_read_at(sw_node_waiting_at); }

static void bad_sw_node_concurrency(void) { EXPECT(sw_node_concurrency(NULL), SW_ENULL); }
static void bad_sw_node_occupy_timeout_ms(void) {
  EXPECT(sw_node_occupy_timeout_ms(NULL), SW_ENULL);
}

static void bad_sw_node_add_pass_at(void) { node_adder_at(sw_node_add_pass_at); }
static void bad_sw_node_increase_block_at(void) { node_adder_at(sw_node_increase_block_at); }
static void bad_sw_node_increase_exception_at(void) {
  node_adder_at(sw_node_increase_exception_at);
}
static void bad_sw_node_add_occupied_pass_at(void) { node_adder_at(sw_node_add_occupied_pass_at); }

static void bad_sw_node_add_rt_and_success_at(void) {
  sw_node *node = node_default(), *node1 = node_wl1();
  EXPECT(sw_node_add_rt_and_success_at(NULL, 0, 1, 1), SW_ENULL);
  FOR_EACH(t, BAD_T, "%" PRId64) EXPECT(sw_node_add_rt_and_success_at(node, t, 1, 1), SW_ETIME);
  FOR_EACH(n, BAD_N, "%" PRId64) {
    EXPECT(sw_node_add_rt_and_success_at(node, 1000, n, 1), SW_ERANGE);
    EXPECT(sw_node_add_rt_and_success_at(node, 1000, 1, n), SW_ERANGE);
  }
  EXPECT(sw_node_total_success_at(node, 1000), 0); /* nothing counted by the failures */
  EXPECT_OK(sw_node_add_rt_and_success_at(node, 1000, INT32_MAX, INT32_MAX));
  EXPECT_HUGE_T(sw_node_add_rt_and_success_at(node, INT64_MAX, 1, 1));
  EXPECT_HUGE_T(sw_node_add_rt_and_success_at(node1, INT64_MAX, 1, 1));
}

static void bad_sw_node_increase_concurrency(void) {
  EXPECT(sw_node_increase_concurrency(NULL), SW_ENULL);
}

static void bad_sw_node_decrease_concurrency(void) {
  EXPECT(sw_node_decrease_concurrency(NULL), SW_ENULL);
  /* More decreases than increases: the count must not go negative, where
   * sw_node_concurrency's -1 would read as SW_EINVAL. */
  sw_node *node = node_default();
  mark_point();
  int rc = sw_node_decrease_concurrency(node);
  ck_assert_msg(rc == SW_OK || rc == SW_ESTATE, "[%s] unbalanced decrease returned %s", cur_fn,
                sw_err_name(rc));
  EXPECT_GE(sw_node_concurrency(node), 0);
}

static void bad_sw_node_add_waiting(void) {
  sw_node *node = node_default(), *node1 = node_wl1();
  EXPECT(sw_node_add_waiting(NULL, 1000, 1), SW_ENULL);
  FOR_EACH(t, BAD_T, "%" PRId64) EXPECT(sw_node_add_waiting(node, t, 1), SW_ETIME);
  FOR_EACH(n, BAD_N, "%" PRId64) EXPECT(sw_node_add_waiting(node, 1000, n), SW_ERANGE);
  EXPECT_HUGE_T(sw_node_add_waiting(node, INT64_MAX, 1));
  EXPECT_HUGE_T(sw_node_add_waiting(node1, INT64_MAX, 1));
}

static void bad_sw_node_try_occupy_next_at(void) {
  sw_node *node = node_default(), *node1 = node_wl1();
  EXPECT(sw_node_try_occupy_next_at(NULL, 0, 1, 10), SW_ENULL);
  FOR_EACH(t, BAD_T, "%" PRId64) EXPECT(sw_node_try_occupy_next_at(node, t, 1, 10), SW_ETIME);
  FOR_EACH(n, BAD_N, "%" PRId64) EXPECT(sw_node_try_occupy_next_at(node, 1000, n, 10), SW_ERANGE);
  /* Any threshold is taken (not checked): one that allows nothing gives the
   * occupy timeout (500 ms). */
  static const double thresholds[] = {NAN, -1, -INFINITY, INFINITY, 1e16};
  FOR_EACH(threshold, thresholds, "%g")
    EXPECT(sw_node_try_occupy_next_at(node, 1000, 1, threshold), SW_ERANGE);
  EXPECT(sw_node_try_occupy_next_at(node, 1000, 1, 0), 500); /* no room: the timeout */
  EXPECT_HUGE_T(sw_node_try_occupy_next_at(node, INT64_MAX, 1, 10));
  EXPECT_HUGE_T(sw_node_try_occupy_next_at(node1, INT64_MAX, 1, 1e9));
}

static void bad_sw_node_metrics_at(void) {
  sw_node *node = node_default(), *node1 = node_wl1();
  sw_metric_record rec[60];
  ck_assert_int_eq(sw_node_add_pass_at(node, 1000, 1), SW_OK);
  EXPECT(sw_node_metrics_at(NULL, 5000, 0, rec, 60), SW_ENULL);
  EXPECT(sw_node_metrics_at(node, 5000, 0, NULL, 1), SW_ENULL);
  EXPECT(sw_node_metrics_at(node, 5000, 0, NULL, 0), 1);
  FOR_EACH(t, BAD_T, "%" PRId64) EXPECT(sw_node_metrics_at(node, t, 0, rec, 60), SW_ETIME);
  /* since_ms is a bound, not a time: any value selects by comparison. */
  EXPECT(sw_node_metrics_at(node, 5000, -1, rec, 60), 1);
  EXPECT(sw_node_metrics_at(node, 5000, INT64_MIN, rec, 60), 1);
  EXPECT(sw_node_metrics_at(node, 5000, INT64_MAX, rec, 60), 0);
  EXPECT(sw_node_metrics_at(node, 5000, -1, rec, UINT32_MAX), 1);
  EXPECT_HUGE_T(sw_node_metrics_at(node, INT64_MAX, 0, rec, 60));
  EXPECT_HUGE_T(sw_node_metrics_at(node1, INT64_MAX, INT64_MIN, rec, 60));
}

/* =============================================================== limiter */

static void bad_sw_limiter_create(void) {
  sw_limiter *l = (sw_limiter *)&l;
  EXPECT(sw_limiter_create(NULL, NULL), SW_ENULL);
  for (int i = 0; i < N_BAD_RULES; i++) {
    NOTE("rule %d", i);
    l = (sw_limiter *)&l;
    EXPECT(sw_limiter_create(&l, bad_rule(i)), SW_EINVAL);
    ck_assert_ptr_null(l);
  }
  for (int i = 0; i < N_BAD_GEOMETRIES; i++) {
    int code;
    const sw_options *o = bad_geometry(i, &code);
    NOTE("geometry %d", i);
    EXPECT(sw_limiter_create(&l, o), code);
  }
  NO_NOTE();
  /* Extreme rules within the option bounds: created (or refused with a
   * code), and usable, without overflowing arithmetic. */
  static const double thresholds[] = {1e15, 1e-300};
  static const double periods[] = {86400, 1};
  for (size_t i = 0; i < NELEM(thresholds); i++)
    for (size_t j = 0; j < NELEM(periods); j++)
      for (int behavior = 0; behavior <= SW_BEHAVIOR_WARM_UP_PACING; behavior++) {
        NOTE("behavior %d, threshold %g, warm-up %g s, cold factor 1000", behavior,
             thresholds[i], periods[j]);
        const sw_options *o =
            OPTS({SW_OPT_BEHAVIOR, behavior}, {SW_OPT_THRESHOLD, thresholds[i]},
                 {SW_OPT_WARM_UP_SEC, periods[j]}, {SW_OPT_COLD_FACTOR, 1000});
        mark_point();
        int rc = sw_limiter_create(&l, o);
        ck_assert_msg(rc == SW_OK || rc == SW_EINVAL || rc == SW_ERANGE,
                      "[%s] create with %s returned %s", cur_fn, note, sw_err_name(rc));
        if (rc != SW_OK) continue;
        sw_decision d;
        ck_assert_int_eq(sw_limiter_entry_at(l, 1000, 1, 0, &d), SW_OK);
        ck_assert_int_eq(sw_limiter_entry_at(l, 86400000, INT32_MAX, 0, &d), SW_OK);
        sw_limiter_free(l);
      }
  NO_NOTE();
}

static void bad_sw_limiter_free(void) {
  mark_point();
  sw_limiter_free(NULL);
}

static void bad_sw_limiter_node(void) { EXPECT_NULL(sw_limiter_node(NULL)); }

static void bad_sw_limiter_entry_at(void) {
  sw_limiter *l = limiter_qps(1);
  sw_decision d;
  EXPECT(sw_limiter_entry_at(NULL, 0, 1, 0, &d), SW_ENULL);
  EXPECT(sw_limiter_entry_at(l, 0, 1, 0, NULL), SW_ENULL);
  FOR_EACH(t, BAD_T, "%" PRId64) EXPECT(sw_limiter_entry_at(l, t, 1, 0, &d), SW_ETIME);
  FOR_EACH(n, BAD_N, "%" PRId64) EXPECT(sw_limiter_entry_at(l, 1000, n, 0, &d), SW_ERANGE);
  EXPECT(sw_node_total_request_at(sw_limiter_node(l), 1000), 0); /* nothing counted */
  /* Unknown flag bits are refused (they stay free for later use). */
  EXPECT(sw_limiter_entry_at(l, 1000, 1, UINT32_MAX, &d), SW_EINVAL);
  EXPECT_OK(sw_limiter_entry_at(l, 1000, 1, 0, &d));
  /* No exit on the concurrency grade: nothing would free its places. */
  sw_limiter *conc = limiter_with(OPTS({SW_OPT_GRADE, SW_GRADE_CONCURRENCY}, {SW_OPT_THRESHOLD, 5}));
  EXPECT(sw_limiter_entry_at(conc, 1000, 1, SW_ENTRY_NO_EXIT, &d), SW_EINVAL);
  EXPECT(sw_node_concurrency(sw_limiter_node(conc)), 0);
  /* The far end of time, passed and then blocked (retry_after is computed). */
  EXPECT_HUGE_T(sw_limiter_entry_at(l, INT64_MAX, 1, 0, &d));
  EXPECT_HUGE_T(sw_limiter_entry_at(l, INT64_MAX, 1, 0, &d));
  EXPECT_HUGE_T(sw_limiter_entry_at(l, INT64_MAX, 1, SW_ENTRY_PRIORITIZED, &d));
  /* Pacing at the far end of time: the second admission queues after the first. */
  sw_limiter *pacing = limiter_with(OPTS({SW_OPT_BEHAVIOR, SW_BEHAVIOR_PACING},
                                         {SW_OPT_THRESHOLD, 1000}));
  EXPECT_HUGE_T(sw_limiter_entry_at(pacing, INT64_MAX, 1, 0, &d));
  EXPECT_HUGE_T(sw_limiter_entry_at(pacing, INT64_MAX, 1, 0, &d));
  /* Pacing with a tiny threshold: a cost beyond int64 ms must block, not wrap. */
  sw_limiter *slow = limiter_with(OPTS({SW_OPT_BEHAVIOR, SW_BEHAVIOR_PACING},
                                       {SW_OPT_THRESHOLD, 1e-9}));
  EXPECT_OK(sw_limiter_entry_at(slow, 1000, INT32_MAX, 0, &d));
  ck_assert_int_eq(d.verdict, SW_VERDICT_BLOCK);
  /* Warm-up at the far end of time (tokens refilled over the whole gap). */
  sw_limiter *warm = limiter_with(OPTS({SW_OPT_BEHAVIOR, SW_BEHAVIOR_WARM_UP},
                                       {SW_OPT_THRESHOLD, 1e15}));
  EXPECT_HUGE_T(sw_limiter_entry_at(warm, INT64_MAX, 1, 0, &d));
}

static void bad_sw_limiter_entry(void) {
  sw_limiter *l = limiter_qps(1);
  sw_decision d;
  EXPECT(sw_limiter_entry(NULL, 1, 0, &d), SW_ENULL);
  EXPECT(sw_limiter_entry(l, 1, 0, NULL), SW_ENULL);
  clock_at(5000);
  FOR_EACH(n, BAD_N, "%" PRId64) EXPECT(sw_limiter_entry(l, n, 0, &d), SW_ERANGE);
  FOR_EACH(now, BAD_T, "%" PRId64) {
    clock_at(now);
    EXPECT(sw_limiter_entry(l, 1, 0, &d), SW_ETIME);
  }
  clock_real();
}

static void bad_sw_limiter_exit_at(void) {
  sw_limiter *l = limiter_qps(10);
  EXPECT(sw_limiter_exit_at(NULL, 0, 1, 1, 0), SW_ENULL);
  FOR_EACH(t, BAD_T, "%" PRId64) EXPECT(sw_limiter_exit_at(l, t, 1, 1, 0), SW_ETIME);
  FOR_EACH(n, BAD_N, "%" PRId64) {
    EXPECT(sw_limiter_exit_at(l, 1000, n, 1, 0), SW_ERANGE);
    EXPECT(sw_limiter_exit_at(l, 1000, 1, n, 0), SW_ERANGE);
  }
  sw_decision d;
  ck_assert_int_eq(sw_limiter_entry_at(l, 1000, 1, 0, &d), SW_OK);
  EXPECT(sw_limiter_exit_at(l, 1000, 1, 1, UINT32_MAX), SW_EINVAL); /* unknown flag bits */
  EXPECT_OK(sw_limiter_exit_at(l, 1000, 1, 1, 0));
  EXPECT(sw_limiter_exit_at(l, 1000, 1, 1, 0), SW_ESTATE); /* no entry left in flight */
  ck_assert_int_eq(sw_limiter_entry_at(l, 1000, 1, 0, &d), SW_OK);
  EXPECT_HUGE_T(sw_limiter_exit_at(l, INT64_MAX, INT32_MAX, INT32_MAX, 0));
  /* An exit without an entry: requests in flight must not go negative, where
   * sw_node_concurrency's -1 would read as SW_EINVAL. */
  sw_limiter *fresh = limiter_qps(10);
  mark_point();
  int rc = sw_limiter_exit_at(fresh, 1000, 1, 1, 0);
  ck_assert_msg(rc == SW_OK || rc == SW_ESTATE, "[%s] unbalanced exit returned %s", cur_fn,
                sw_err_name(rc));
  EXPECT_GE(sw_node_concurrency(sw_limiter_node(fresh)), 0);
}

static void bad_sw_limiter_exit(void) {
  sw_limiter *l = limiter_qps(10);
  EXPECT(sw_limiter_exit(NULL, 1, 1, 0), SW_ENULL);
  clock_at(5000);
  FOR_EACH(n, BAD_N, "%" PRId64) {
    EXPECT(sw_limiter_exit(l, n, 1, 0), SW_ERANGE);
    EXPECT(sw_limiter_exit(l, 1, n, 0), SW_ERANGE);
  }
  FOR_EACH(now, BAD_T, "%" PRId64) {
    clock_at(now);
    EXPECT(sw_limiter_exit(l, 1, 1, 0), SW_ETIME);
  }
  clock_real();
}

static void bad_sw_limiter_set_rule(void) {
  sw_limiter *l = limiter_qps(7);
  EXPECT(sw_limiter_set_rule(NULL, NULL), SW_ENULL);
  EXPECT(sw_limiter_set_rule(NULL, bad_rule(0)), SW_ENULL);
  for (int i = 0; i < N_BAD_RULES; i++) {
    NOTE("rule %d", i);
    EXPECT(sw_limiter_set_rule(l, bad_rule(i)), SW_EINVAL);
  }
  NO_NOTE();
  sw_options *o = OPTS({SW_OPT_THRESHOLD, 1});
  ck_assert_int_eq(sw_limiter_get_rule(l, o), SW_OK);
  double threshold = 0;
  ck_assert_int_eq(sw_options_get_double(o, SW_OPT_THRESHOLD, &threshold), SW_OK);
  ck_assert_msg(threshold == 7, "a refused rule changed the threshold to %g", threshold);
  /* Node options are ignored, even a geometry no node accepts. */
  int code;
  EXPECT_OK(sw_limiter_set_rule(l, bad_geometry(0, &code)));
  EXPECT_OK(sw_limiter_set_rule(l, NULL)); /* NULL: the default rule */
}

static void bad_sw_limiter_get_rule(void) {
  sw_limiter *l = limiter_qps(7);
  sw_options *o = OPTS({SW_OPT_THRESHOLD, 1});
  EXPECT(sw_limiter_get_rule(NULL, o), SW_ENULL);
  EXPECT(sw_limiter_get_rule(l, NULL), SW_ENULL);
  EXPECT(sw_limiter_get_rule(NULL, NULL), SW_ENULL);
}

/* ============================================================== registry */

/* Options whose limiters are large: 1 << 24 of them exceed 1 TiB. */
static const sw_options *huge_geometry(void) {
  return OPTS({SW_OPT_STRIPES, 64}, {SW_OPT_MINUTE_SAMPLE_COUNT, 3600},
              {SW_OPT_MINUTE_INTERVAL_MS, 3600000});
}

static void bad_sw_registry_create(void) {
  sw_registry *r = (sw_registry *)&r;
  EXPECT(sw_registry_create(NULL, 4, NULL), SW_ENULL);
  static const uint32_t caps[] = {0, (1u << 24) + 1, UINT32_MAX};
  FOR_EACH(cap, caps, "%u") {
    r = (sw_registry *)&r;
    EXPECT(sw_registry_create(&r, cap, NULL), SW_ESIZE);
    ck_assert_ptr_null(r);
  }
  for (int i = 0; i < N_BAD_RULES; i++) {
    NOTE("rule %d", i);
    EXPECT(sw_registry_create(&r, 4, bad_rule(i)), SW_EINVAL);
  }
  for (int i = 0; i < N_BAD_GEOMETRIES; i++) {
    int code;
    const sw_options *o = bad_geometry(i, &code);
    NOTE("geometry %d", i);
    EXPECT(sw_registry_create(&r, 4, o), code);
  }
  NO_NOTE();
  EXPECT(sw_registry_create(&r, 1u << 24, huge_geometry()), SW_EOVERFLOW);
  ck_assert_ptr_null(r);
}

static void bad_sw_registry_free(void) {
  mark_point();
  sw_registry_free(NULL);
  /* A segment's registry belongs to the segment: ignored. */
  char name[80];
  shm_name(name, sizeof name, "regfree");
  sw_segment *seg = NULL;
  ck_assert_int_eq(sw_segment_open(&seg, name, 2, NULL, SW_SEGMENT_RESET), SW_OK);
  sw_registry *r = sw_segment_registry(seg);
  mark_point();
  sw_registry_free(r);
  sw_limiter *l = NULL;
  EXPECT_OK(sw_registry_get(r, "still-here", &l));
  sw_segment_close(seg);
  ck_assert_int_eq(sw_segment_unlink(name), SW_OK);
}

static void bad_sw_registry_get(void) {
  sw_registry *r = registry_with(2, NULL);
  sw_limiter *l = (sw_limiter *)&l;
  EXPECT(sw_registry_get(NULL, "a", &l), SW_ENULL);
  EXPECT(sw_registry_get(r, NULL, &l), SW_ENULL);
  EXPECT(sw_registry_get(r, "a", NULL), SW_ENULL);
  EXPECT(sw_registry_get(r, "", &l), SW_ERANGE);
  EXPECT(sw_registry_get(r, NAME64, &l), SW_ERANGE);
  EXPECT(sw_registry_get(r, NAME1000, &l), SW_ERANGE);
  EXPECT(sw_registry_count(r), 0); /* nothing added by the failures */
  EXPECT_OK(sw_registry_get(r, NAME63, &l));
  EXPECT_OK(sw_registry_get(r, "b", &l));
  EXPECT(sw_registry_get(r, "c", &l), SW_EFULL);
  EXPECT_OK(sw_registry_get(r, NAME63, &l)); /* existing names still work when full */
  /* A read-only segment adds no names. */
  char name[80];
  shm_name(name, sizeof name, "regget");
  sw_segment *seg = NULL, *ro = NULL;
  ck_assert_int_eq(sw_segment_open(&seg, name, 2, NULL, SW_SEGMENT_RESET), SW_OK);
  ck_assert_int_eq(sw_registry_get(sw_segment_registry(seg), "a", &l), SW_OK);
  ck_assert_int_eq(sw_segment_open(&ro, name, 0, NULL, SW_SEGMENT_READONLY), SW_OK);
  EXPECT(sw_registry_get(sw_segment_registry(ro), "new", &l), SW_EPERM);
  EXPECT_OK(sw_registry_get(sw_segment_registry(ro), "a", &l));
  sw_segment_close(ro);
  sw_segment_close(seg);
  ck_assert_int_eq(sw_segment_unlink(name), SW_OK);
}

static void bad_sw_registry_find(void) {
  sw_registry *r = registry_with(2, NULL);
  sw_limiter *l = (sw_limiter *)&l;
  EXPECT(sw_registry_find(NULL, "a", &l), SW_ENULL);
  EXPECT(sw_registry_find(r, NULL, &l), SW_ENULL);
  EXPECT(sw_registry_find(r, "a", NULL), SW_ENULL);
  EXPECT(sw_registry_find(r, "", &l), SW_ERANGE);
  EXPECT(sw_registry_find(r, NAME64, &l), SW_ERANGE);
  EXPECT(sw_registry_find(r, NAME1000, &l), SW_ERANGE);
  EXPECT(sw_registry_find(r, NAME63, &l), 0);
  ck_assert_ptr_eq(l, (sw_limiter *)&l); /* untouched when not found */
}

static void bad_sw_registry_capacity(void) { EXPECT_FAIL_VALUE(sw_registry_capacity(NULL), 0); }
static void bad_sw_registry_count(void) { EXPECT_FAIL_VALUE(sw_registry_count(NULL), 0); }

static void bad_sw_registry_at(void) {
  sw_registry *r = registry_with(4, NULL);
  sw_limiter *l = NULL;
  const char *name = NULL;
  EXPECT(sw_registry_at(NULL, 0, &l, &name), SW_ENULL);
  static const uint32_t idx[] = {0, 1, 4, UINT32_MAX};
  FOR_EACH(i, idx, "%u") EXPECT(sw_registry_at(r, i, &l, &name), SW_ERANGE);
  ck_assert_int_eq(sw_registry_get(r, "a", &l), SW_OK);
  EXPECT(sw_registry_at(r, 1, &l, &name), SW_ERANGE);
  EXPECT_OK(sw_registry_at(r, 0, NULL, NULL)); /* both outs are optional */
}

/* =============================================================== segment */

static void bad_sw_segment_open(void) {
  char name[80], file[256];
  shm_name(name, sizeof name, "open");
  sw_segment *seg = (sw_segment *)&seg;
  EXPECT(sw_segment_open(NULL, name, 2, NULL, SW_SEGMENT_CREATE), SW_ENULL);
  EXPECT(sw_segment_open(&seg, NULL, 2, NULL, SW_SEGMENT_CREATE), SW_ENULL);
  ck_assert_ptr_null(seg);
  /* Names: 1..63 bytes without '/', or a path shorter than 4096. */
  EXPECT(sw_segment_open(&seg, "", 2, NULL, SW_SEGMENT_CREATE), SW_ERANGE);
  EXPECT(sw_segment_open(&seg, NAME64, 2, NULL, SW_SEGMENT_CREATE), SW_ERANGE);
  EXPECT(sw_segment_open(&seg, NAME1000, 2, NULL, SW_SEGMENT_CREATE), SW_ERANGE);
  char long_path[4200];
  memset(long_path, 'p', sizeof long_path - 1);
  long_path[0] = '/';
  long_path[sizeof long_path - 1] = '\0';
  EXPECT(sw_segment_open(&seg, long_path, 2, NULL, SW_SEGMENT_CREATE), SW_ERANGE);
  static const uint32_t caps[] = {0, (1u << 24) + 1, UINT32_MAX};
  FOR_EACH(cap, caps, "%u")
    EXPECT(sw_segment_open(&seg, name, cap, NULL, SW_SEGMENT_CREATE), SW_ESIZE);
  for (int i = 0; i < N_BAD_RULES; i++) {
    NOTE("rule %d", i);
    EXPECT(sw_segment_open(&seg, name, 2, bad_rule(i), SW_SEGMENT_CREATE), SW_EINVAL);
  }
  for (int i = 0; i < N_BAD_GEOMETRIES; i++) {
    int code;
    const sw_options *o = bad_geometry(i, &code);
    NOTE("geometry %d", i);
    EXPECT(sw_segment_open(&seg, name, 2, o, SW_SEGMENT_CREATE), code);
  }
  NO_NOTE();
  /* None of that created anything. */
  EXPECT(sw_segment_open(&seg, name, 2, NULL, 0), SW_ENOTFOUND);
  EXPECT(sw_segment_open(&seg, name, 0, NULL, SW_SEGMENT_READONLY), SW_ENOTFOUND);
  EXPECT(sw_segment_open(&seg, name, 2, NULL, SW_SEGMENT_READONLY | SW_SEGMENT_CREATE),
         SW_ENOTFOUND); /* read-only never creates */
  /* Unknown flag bits are refused (they stay free for later use). */
  EXPECT(sw_segment_open(&seg, name, 2, NULL, ~(SW_SEGMENT_CREATE | SW_SEGMENT_RESET |
                                                SW_SEGMENT_READONLY | SW_SEGMENT_FOLLOW)),
         SW_EINVAL);
  file_name(file, sizeof file, "nodir/x");
  EXPECT(sw_segment_open(&seg, file, 2, NULL, SW_SEGMENT_CREATE), SW_ENOTFOUND);
  EXPECT(sw_segment_open(&seg, g_dir, 2, NULL, SW_SEGMENT_CREATE), SW_EFOREIGN); /* a directory */
  ck_assert_ptr_null(seg);
  /* More than 1 TiB of limiters: refused before anything is created. */
  EXPECT(sw_segment_open(&seg, name, 1u << 24, huge_geometry(), SW_SEGMENT_CREATE),
         SW_EOVERFLOW);
  EXPECT(sw_segment_open(&seg, name, 2, NULL, 0), SW_ENOTFOUND);
  sw_segment_unlink(name);
  /* Files that are not segments are refused and left as they are. */
  static unsigned char junk[4096];
  memset(junk, 0xab, sizeof junk);
  file_name(file, sizeof file, "foreign");
  write_file(file, junk, sizeof junk);
  EXPECT(sw_segment_open(&seg, file, 2, NULL, 0), SW_EFOREIGN);
  EXPECT(sw_segment_open(&seg, file, 2, NULL, SW_SEGMENT_CREATE), SW_EFOREIGN);
  EXPECT(sw_segment_open(&seg, file, 0, NULL, SW_SEGMENT_READONLY), SW_EFOREIGN);
  ck_assert_msg(file_is(file, junk, sizeof junk), "a foreign file was modified");
  write_file(file, junk, 10);
  EXPECT(sw_segment_open(&seg, file, 2, NULL, SW_SEGMENT_CREATE), SW_ECORRUPT);
  EXPECT(sw_segment_open(&seg, file, 0, NULL, SW_SEGMENT_READONLY), SW_ECORRUPT);
  ck_assert_msg(file_is(file, junk, 10), "a truncated file was modified");
  unlink(file);
  /* Another geometry than the segment's. */
  sw_segment *good = NULL;
  ck_assert_int_eq(sw_segment_open(&good, name, 2, NULL, SW_SEGMENT_RESET), SW_OK);
  EXPECT(sw_segment_open(&seg, name, 3, NULL, 0), SW_EGEOMETRY);
  EXPECT(sw_segment_open(&seg, name, 2, OPTS({SW_OPT_STRIPES, 8}), 0), SW_EGEOMETRY);
  EXPECT(sw_segment_open(&seg, name, 0, NULL, 0), SW_ESIZE);
  ck_assert_ptr_null(seg);
  sw_segment_close(good);
  ck_assert_int_eq(sw_segment_unlink(name), SW_OK);
}

static void bad_sw_segment_close(void) {
  mark_point();
  sw_segment_close(NULL);
}

/* ---- cluster leases and sw_cluster ---------------------------------- */

static sw_limiter *limiter_cluster(void) {
  return limiter_with(OPTS({SW_OPT_THRESHOLD, 10}, {SW_OPT_CLUSTER, 1}));
}

static void bad_sw_lease_script(void) {
  const char *s = sw_lease_script();
  ck_assert_ptr_nonnull(s);
  ck_assert_ptr_nonnull(strstr(s, "redis.call('TIME')"));
}

static void bad_sw_lease_next_call(void) {
  sw_lease_call call;
  sw_limiter *plain = limiter_qps(10), *l = limiter_cluster();
  EXPECT(sw_lease_next_call(NULL, 0, &call), SW_ENULL);
  EXPECT(sw_lease_next_call(l, 0, NULL), SW_ENULL);
  EXPECT(sw_lease_next_call(plain, 1000, &call), SW_ESTATE); /* not a cluster rule */
  FOR_EACH(t, BAD_T, "%" PRId64) EXPECT(sw_lease_next_call(l, t, &call), SW_ETIME);
  EXPECT(sw_lease_next_call(l, 1000, &call), 1); /* never synced: a call is due */
  EXPECT(sw_lease_next_call(l, 1000, &call), 0); /* and claimed */
}

static void bad_sw_lease_apply(void) {
  sw_lease_call call;
  sw_limiter *plain = limiter_qps(10), *l = limiter_cluster();
  EXPECT(sw_lease_next_call(l, 1000, &call), 1);
  EXPECT(sw_lease_apply(NULL, 1000, &call, 0, 1, 1), SW_ENULL);
  EXPECT(sw_lease_apply(l, 1000, NULL, 0, 1, 1), SW_ENULL);
  EXPECT(sw_lease_apply(plain, 1000, &call, 0, 1, 1), SW_ESTATE);
  FOR_EACH(t, BAD_T, "%" PRId64) EXPECT(sw_lease_apply(l, t, &call, 0, 1, 1), SW_ETIME);
  EXPECT(sw_lease_apply(l, 1000, &call, 250, 1, 1000), SW_ERANGE); /* not a bucket start */
  EXPECT(sw_lease_apply(l, 1000, &call, -500, 1, 1000), SW_ERANGE);
  EXPECT(sw_lease_apply(l, 1000, &call, 500, -1, 1000), SW_ERANGE);
  EXPECT(sw_lease_apply(l, 1000, &call, 500, INT64_MAX, 1000), SW_ERANGE);
  EXPECT(sw_lease_apply(l, 1000, &call, 500, 1, -1), SW_ERANGE);
  EXPECT_OK(sw_lease_apply(l, 1000, &call, 1000, 5, 1000));
}

static void bad_sw_lease_failed(void) {
  sw_lease_call call;
  sw_limiter *plain = limiter_qps(10), *l = limiter_cluster();
  EXPECT(sw_lease_next_call(l, 1000, &call), 1);
  EXPECT(sw_lease_failed(NULL, 1000, &call), SW_ENULL);
  EXPECT(sw_lease_failed(l, 1000, NULL), SW_ENULL);
  EXPECT(sw_lease_failed(plain, 1000, &call), SW_ESTATE);
  FOR_EACH(t, BAD_T, "%" PRId64) EXPECT(sw_lease_failed(l, t, &call), SW_ETIME);
  EXPECT_OK(sw_lease_failed(l, 1000, &call));
}

static void bad_sw_lease_stats(void) {
  sw_lease_info info;
  sw_limiter *l = limiter_cluster();
  EXPECT(sw_lease_stats(NULL, 0, &info), SW_ENULL);
  EXPECT(sw_lease_stats(l, 0, NULL), SW_ENULL);
  FOR_EACH(t, BAD_T, "%" PRId64) EXPECT(sw_lease_stats(l, t, &info), SW_ETIME);
  EXPECT_OK(sw_lease_stats(l, 1000, &info));
}

/* Without a Redis to talk to, sw_cluster's functions still check their
 * arguments (or say the support is not built). */
static int cluster_built(void) {
  sw_cluster *c = NULL;
  int rc = sw_cluster_create(&c, "127.0.0.1:1", NULL);
  sw_cluster_free(c);
  return rc != SW_ENOTSUP;
}

static void bad_sw_cluster_create(void) {
  sw_cluster *c;
  if (!cluster_built()) {
    EXPECT(sw_cluster_create(&c, "127.0.0.1:6379", NULL), SW_ENOTSUP);
    return;
  }
  EXPECT(sw_cluster_create(NULL, "127.0.0.1:6379", NULL), SW_ENULL);
  EXPECT(sw_cluster_create(&c, NULL, NULL), SW_ENULL);
  EXPECT(sw_cluster_create(&c, "", NULL), SW_EINVAL);
  EXPECT(sw_cluster_create(&c, "host:0", NULL), SW_EINVAL);
  EXPECT(sw_cluster_create(&c, "host:99999", NULL), SW_EINVAL);
  EXPECT(sw_cluster_create(&c, ":6379", NULL), SW_EINVAL);
}

static void bad_sw_cluster_free(void) { sw_cluster_free(NULL); }

static void bad_sw_cluster_add(void) {
  if (!cluster_built()) return;
  sw_cluster *c;
  ck_assert_int_eq(sw_cluster_create(&c, "127.0.0.1:1", NULL), SW_OK);
  sw_limiter *plain = limiter_qps(10), *l = limiter_cluster();
  EXPECT(sw_cluster_add(NULL, l, "r"), SW_ENULL);
  EXPECT(sw_cluster_add(c, NULL, "r"), SW_ENULL);
  EXPECT(sw_cluster_add(c, l, NULL), SW_ENULL);
  EXPECT(sw_cluster_add(c, l, ""), SW_ERANGE);
  EXPECT(sw_cluster_add(c, l, NAME64), SW_ERANGE);
  EXPECT(sw_cluster_add(c, plain, "r"), SW_ESTATE);
  EXPECT_OK(sw_cluster_add(c, l, "r"));
  sw_cluster_free(c);
}

static void bad_sw_cluster_remove(void) {
  EXPECT(sw_cluster_remove(NULL, NULL), cluster_built() ? SW_ENULL : SW_ENOTSUP);
  if (!cluster_built()) return;
  sw_cluster *c;
  ck_assert_int_eq(sw_cluster_create(&c, "127.0.0.1:1", NULL), SW_OK);
  sw_limiter *l = limiter_cluster();
  EXPECT(sw_cluster_remove(c, NULL), SW_ENULL);
  EXPECT(sw_cluster_remove(c, l), SW_ENOTFOUND);
  EXPECT_OK(sw_cluster_add(c, l, "r"));
  EXPECT_OK(sw_cluster_remove(c, l));
  EXPECT(sw_cluster_remove(c, l), SW_ENOTFOUND);
  sw_cluster_free(c);
}

static void bad_sw_cluster_refill(void) {
  EXPECT(sw_cluster_refill(NULL), cluster_built() ? SW_ENULL : SW_ENOTSUP);
  if (!cluster_built()) return;
  sw_cluster *c;
  ck_assert_int_eq(sw_cluster_create(&c, "127.0.0.1:1", OPTS({SW_OPT_CLUSTER_TIMEOUT_MS, 50})),
                   SW_OK);
  sw_limiter *l = limiter_cluster();
  EXPECT_OK(sw_cluster_add(c, l, "r"));
  EXPECT(sw_cluster_refill(c), SW_EIO); /* nobody listens on port 1 */
  sw_lease_info info;
  EXPECT_OK(sw_lease_stats(l, sw_now_ms(), &info));
  ck_assert_int_ne(info.down_since_ms, 0);
  sw_cluster_free(c);
}

static void bad_sw_cluster_start(void) {
  EXPECT(sw_cluster_start(NULL), cluster_built() ? SW_ENULL : SW_ENOTSUP);
}

static void bad_sw_cluster_round_trips(void) {
  EXPECT(sw_cluster_round_trips(NULL), cluster_built() ? SW_ENULL : SW_ENOTSUP);
}

static void bad_sw_cluster_entry_exact(void) {
  sw_decision d;
  EXPECT(sw_cluster_entry_exact(NULL, NULL, 1, &d), cluster_built() ? SW_ENULL : SW_ENOTSUP);
  if (!cluster_built()) return;
  sw_cluster *c;
  ck_assert_int_eq(sw_cluster_create(&c, "127.0.0.1:1", OPTS({SW_OPT_CLUSTER_TIMEOUT_MS, 50})),
                   SW_OK);
  sw_limiter *plain = limiter_qps(10), *l = limiter_cluster();
  EXPECT(sw_cluster_entry_exact(c, NULL, 1, &d), SW_ENULL);
  EXPECT(sw_cluster_entry_exact(c, l, 1, NULL), SW_ENULL);
  FOR_EACH(n, BAD_N, "%" PRId64) EXPECT(sw_cluster_entry_exact(c, l, n, &d), SW_ERANGE);
  EXPECT(sw_cluster_entry_exact(c, plain, 1, &d), SW_ESTATE);
  EXPECT(sw_cluster_entry_exact(c, l, 1, &d), SW_ENOTFOUND); /* not added */
  EXPECT_OK(sw_cluster_add(c, l, "r"));
  EXPECT_OK(sw_cluster_entry_exact(c, l, 1, &d)); /* Redis down: the local fallback */
  ck_assert_int_eq(d.verdict, SW_VERDICT_PASS);
  sw_cluster_free(c);
}

static void bad_sw_leap_array_bucket_get(void) {
  sw_leap_array *la;
  ck_assert_int_eq(sw_leap_array_create_by_name(&la, SW_TYPE_METRIC, NULL, 2, 1000), SW_OK);
  sw_window w;
  ck_assert_int_eq(sw_leap_array_current_window_at(la, 1000, &w), SW_OK);
  int64_t v;
  EXPECT(sw_leap_array_bucket_get(NULL, w.bucket, 0, &v), SW_ENULL);
  EXPECT(sw_leap_array_bucket_get(la, NULL, 0, &v), SW_ENULL);
  EXPECT(sw_leap_array_bucket_get(la, w.bucket, 0, NULL), SW_ENULL);
  EXPECT(sw_leap_array_bucket_get(la, w.bucket, SW_FIELD_MIN_RT + 1, &v), SW_ERANGE);
  EXPECT(sw_leap_array_bucket_get(la, w.bucket, UINT32_MAX, &v), SW_ERANGE);
  EXPECT_OK(sw_leap_array_bucket_get(la, w.bucket, SW_EVENT_PASS, &v));
  sw_leap_array_free(la);
}

static void bad_sw_registry_get_ex(void) {
  sw_registry *r = registry_with(2, NULL);
  sw_limiter *l;
  EXPECT(sw_registry_get_ex(NULL, "a", NULL, &l), SW_ENULL);
  EXPECT(sw_registry_get_ex(r, NULL, NULL, &l), SW_ENULL);
  EXPECT(sw_registry_get_ex(r, "a", NULL, NULL), SW_ENULL);
  EXPECT(sw_registry_get_ex(r, "", NULL, &l), SW_ERANGE);
  EXPECT(sw_registry_get_ex(r, NAME64, NULL, &l), SW_ERANGE);
  EXPECT(sw_registry_get_ex(r, "a", bad_rule(0), &l), SW_EINVAL);
  ck_assert_int_eq(sw_registry_count(r), 0); /* a bad rule creates nothing */
  EXPECT_OK(sw_registry_get_ex(r, "a", OPTS({SW_OPT_THRESHOLD, 3}), &l));
  EXPECT_OK(sw_registry_get_ex(r, "b", NULL, &l));
  EXPECT(sw_registry_get_ex(r, "c", NULL, &l), SW_EFULL);
}

static void bad_sw_limiter_set_dry_run(void) {
  sw_limiter *l = limiter_qps(1);
  EXPECT(sw_limiter_set_dry_run(NULL, 1), SW_ENULL);
  EXPECT(sw_limiter_set_dry_run(l, 2), SW_EINVAL);
  EXPECT(sw_limiter_set_dry_run(l, -1), SW_EINVAL);
  EXPECT_OK(sw_limiter_set_dry_run(l, 1));
  EXPECT_OK(sw_limiter_set_dry_run(l, 0));
}

static void bad_sw_limiter_cancel(void) {
  sw_decision d = {0};
  EXPECT(sw_limiter_cancel(NULL, &d), SW_ENULL);
  EXPECT(sw_limiter_cancel(limiter_qps(1), NULL), SW_ENULL);
  EXPECT_OK(sw_limiter_cancel(limiter_qps(1), &d)); /* a zero receipt: nothing to give back */
  d.receipt[1] = 1;                                 /* no kind: not a receipt */
  EXPECT(sw_limiter_cancel(limiter_qps(1), &d), SW_EINVAL);
  sw_decision other;
  EXPECT_OK(sw_limiter_entry_at(limiter_qps(1), 1000, 1, 0, &other));
  EXPECT(sw_limiter_cancel(limiter_qps(1), &other), SW_EINVAL); /* another limiter's */
}

static void bad_sw_node_would_block_qps_at(void) {
  sw_node *node;
  ck_assert_int_eq(sw_node_create(&node, NULL), SW_OK);
  EXPECT_D(sw_node_would_block_qps_at(NULL, 1000), SW_ENULL);
  FOR_EACH(t, BAD_T, "%" PRId64) EXPECT_D(sw_node_would_block_qps_at(node, t), SW_ETIME);
  EXPECT_D(sw_node_would_block_qps_at(node, 1000), 0);
  sw_node_free(node);
}

static void bad_sw_registry_set_rule(void) {
  sw_registry *r = registry_with(2, NULL);
  EXPECT(sw_registry_set_rule(NULL, NULL), SW_ENULL);
  EXPECT(sw_registry_set_rule(r, bad_rule(0)), SW_EINVAL);
  EXPECT_OK(sw_registry_set_rule(r, NULL)); /* the defaults */
}

static void bad_sw_segment_unlink(void) {
  EXPECT(sw_segment_unlink(NULL), SW_ENULL);
  EXPECT(sw_segment_unlink(""), SW_ERANGE);
  EXPECT(sw_segment_unlink(NAME1000), SW_ERANGE);
  char name[80];
  shm_name(name, sizeof name, "unlink-missing");
  EXPECT_OK(sw_segment_unlink(name)); /* missing: fine */
  /* A 64-byte name must not remove the segment named by its first 63 bytes. */
  char n63[64], n64[65];
  snprintf(n63, sizeof n63, "swbad-%d-%d-", g_main_pid, (int)getpid());
  size_t len = strlen(n63);
  memset(n63 + len, 'u', 63 - len);
  n63[63] = '\0';
  snprintf(n64, sizeof n64, "%sv", n63);
  sw_segment *seg = NULL;
  ck_assert_int_eq(sw_segment_open(&seg, n63, 1, NULL, SW_SEGMENT_RESET), SW_OK);
  sw_segment_close(seg);
  EXPECT(sw_segment_unlink(n64), SW_ERANGE);
  EXPECT_OK(sw_segment_open(&seg, n63, 1, NULL, 0)); /* still there */
  sw_segment_close(seg);
  ck_assert_int_eq(sw_segment_unlink(n63), SW_OK);
  /* Not removable: a directory. */
  char dir[256];
  file_name(dir, sizeof dir, "dir");
  ck_assert_int_eq(mkdir(dir, 0700), 0);
  EXPECT(sw_segment_unlink(dir), SW_EFOREIGN);
  rmdir(dir);
}

/* ========================================================= circuit breaker */

static void free_breaker(void *p) { sw_breaker_free(p); }

static sw_breaker *breaker_with(const sw_options *o) {
  sw_breaker *b = NULL;
  ck_assert_msg(sw_breaker_create(&b, o) == SW_OK, "fixture breaker: %s", sw_last_error());
  return keep(b, free_breaker);
}

static void bad_sw_breaker_create(void) {
  sw_breaker *b = (sw_breaker *)&b;
  EXPECT(sw_breaker_create(NULL, NULL), SW_ENULL);
  EXPECT(sw_breaker_create(&b, OPTS({SW_OPT_BREAKER_STRATEGY, SW_BREAKER_ERROR_RATIO},
                                    {SW_OPT_BREAKER_COUNT, 1.5})), SW_ERANGE);
  EXPECT(sw_breaker_create(&b, OPTS({SW_OPT_BREAKER_COUNT, 3e9})), SW_ERANGE);
  EXPECT(sw_breaker_create(&b, OPTS({SW_OPT_BREAKER_SAMPLE_COUNT, 7})), SW_ESIZE);
  ck_assert_ptr_null(b);
  EXPECT_OK(sw_breaker_create(&b, NULL));
  sw_breaker_free(b);
}

static void bad_sw_breaker_open(void) {
  char name[80], path[256];
  shm_name(name, sizeof name, "breaker");
  sw_breaker *b = (sw_breaker *)&b;
  EXPECT(sw_breaker_open(NULL, name, NULL, SW_SEGMENT_CREATE), SW_ENULL);
  EXPECT(sw_breaker_open(&b, NULL, NULL, SW_SEGMENT_CREATE), SW_ENULL);
  EXPECT(sw_breaker_open(&b, "", NULL, SW_SEGMENT_CREATE), SW_ERANGE);
  EXPECT(sw_breaker_open(&b, NAME64, NULL, SW_SEGMENT_CREATE), SW_ERANGE);
  EXPECT(sw_breaker_open(&b, name, NULL, 0x80), SW_EINVAL);
  EXPECT(sw_breaker_open(&b, name, NULL, 0), SW_ENOTFOUND);
  EXPECT(sw_breaker_open(&b, name, OPTS({SW_OPT_BREAKER_SAMPLE_COUNT, 7}), SW_SEGMENT_CREATE),
         SW_ESIZE);
  ck_assert_ptr_null(b);
  /* a registry segment is not a breaker, and the other way round */
  sw_segment *seg = NULL;
  ck_assert_int_eq(sw_segment_open(&seg, name, 2, NULL, SW_SEGMENT_RESET), SW_OK);
  sw_segment_close(seg);
  EXPECT(sw_breaker_open(&b, name, NULL, SW_SEGMENT_CREATE), SW_ETYPE);
  EXPECT(sw_breaker_open(&b, name, NULL, SW_SEGMENT_READONLY), SW_ETYPE);
  EXPECT_OK(sw_breaker_open(&b, name, NULL, SW_SEGMENT_RESET));
  sw_breaker_free(b);
  EXPECT(sw_segment_open(&seg, name, 2, NULL, 0), SW_ETYPE);
  sw_keyed *k = NULL;
  EXPECT(sw_keyed_open(&k, name, 10, NULL, 0), SW_ETYPE);
  EXPECT(sw_breaker_open(&b, name, OPTS({SW_OPT_BREAKER_HALF_OPEN_CALLS, 2}), 0), SW_EGEOMETRY);
  EXPECT(sw_breaker_open(&b, name, OPTS({SW_OPT_BREAKER_STAT_INTERVAL_MS, 2000}), 0),
         SW_EGEOMETRY);
  EXPECT(sw_breaker_open(&b, name, OPTS({SW_OPT_BREAKER_STRATEGY, SW_BREAKER_ERROR_COUNT}), 0),
         SW_EGEOMETRY);
  /* read-only: no entries, no exits */
  EXPECT_OK(sw_breaker_open(&b, name, NULL, SW_SEGMENT_READONLY));
  sw_decision d;
  EXPECT(sw_breaker_entry_at(b, 1000, &d), SW_EPERM);
  EXPECT(sw_breaker_exit_at(b, 1000, NULL, 1, 0), SW_EPERM);
  sw_breaker_info in;
  EXPECT_OK(sw_breaker_stats_at(b, 1000, &in));
  sw_breaker_free(b);
  ck_assert_int_eq(sw_segment_unlink(name), SW_OK);
  /* a file that is not a segment */
  file_name(path, sizeof path, "breaker-junk");
  static unsigned char junk[8192];
  memset(junk, 0x5a, sizeof junk);
  write_file(path, junk, sizeof junk);
  EXPECT(sw_breaker_open(&b, path, NULL, SW_SEGMENT_CREATE), SW_EFOREIGN);
  unlink(path);
}

static void bad_sw_breaker_free(void) { sw_breaker_free(NULL); }

static void bad_sw_breaker_entry_at(void) {
  sw_breaker *b = breaker_with(NULL);
  sw_decision d;
  EXPECT(sw_breaker_entry_at(NULL, 1000, &d), SW_ENULL);
  EXPECT(sw_breaker_entry_at(b, 1000, NULL), SW_ENULL);
  FOR_EACH(t, BAD_T, "%" PRId64) EXPECT(sw_breaker_entry_at(b, t, &d), SW_ETIME);
  EXPECT(sw_breaker_entry_at(b, INT64_C(1) << 42, &d), SW_ETIME);
  EXPECT_HUGE_T(sw_breaker_entry_at(b, INT64_MAX, &d));
  EXPECT_OK(sw_breaker_entry_at(b, (INT64_C(1) << 42) - 1, &d));
}

static void bad_sw_breaker_entry(void) {
  sw_decision d;
  EXPECT(sw_breaker_entry(NULL, &d), SW_ENULL);
  EXPECT(sw_breaker_entry(breaker_with(NULL), NULL), SW_ENULL);
}

static void bad_sw_breaker_exit_at(void) {
  sw_breaker *b = breaker_with(OPTS({SW_OPT_BREAKER_TIME_WINDOW_SEC, 1e8}));
  EXPECT(sw_breaker_exit_at(NULL, 1000, NULL, 1, 0), SW_ENULL);
  FOR_EACH(t, BAD_T, "%" PRId64) EXPECT(sw_breaker_exit_at(b, t, NULL, 1, 0), SW_ETIME);
  static const int64_t rts[] = {-1, (int64_t)INT32_MAX + 1, INT64_MIN, INT64_MAX};
  FOR_EACH(rt, rts, "%" PRId64) EXPECT(sw_breaker_exit_at(b, 1000, NULL, rt, 0), SW_ERANGE);
  EXPECT(sw_breaker_exit_at(b, 1000, NULL, 1, 0x10), SW_EINVAL);
  sw_breaker_info in;
  ck_assert_int_eq(sw_breaker_stats_at(b, 1000, &in), SW_OK);
  ck_assert_int_eq(in.total, 0); /* nothing counted by a refusal */
  /* a forged probe word decides nothing; a time near the end of time opens
   * for the whole time window (10^8 s: the state word holds it) */
  sw_decision forged = {.probe = -1};
  for (int i = 0; i < 5; i++)
    EXPECT_OK(sw_breaker_exit_at(b, (INT64_C(1) << 42) - 2, &forged, INT32_MAX, 0));
  ck_assert_int_eq(sw_breaker_stats_at(b, (INT64_C(1) << 42) - 2, &in), SW_OK);
  ck_assert_int_eq(in.state, SW_BREAKER_OPEN);
  ck_assert_int_eq(in.next_probe_ms, (INT64_C(1) << 42) - 2 + INT64_C(100000000000));
  EXPECT_HUGE_T(sw_breaker_exit_at(b, INT64_MAX, NULL, 1, 0));
}

static void bad_sw_breaker_exit(void) {
  EXPECT(sw_breaker_exit(NULL, NULL, 1, 0), SW_ENULL);
  EXPECT(sw_breaker_exit(breaker_with(NULL), NULL, -1, 0), SW_ERANGE);
}

static void bad_sw_breaker_set_listener(void) {
  EXPECT(sw_breaker_set_listener(NULL, NULL, NULL), SW_ENULL);
  EXPECT_OK(sw_breaker_set_listener(breaker_with(NULL), NULL, NULL));
}

static void bad_sw_breaker_stats_at(void) {
  sw_breaker *b = breaker_with(NULL);
  sw_breaker_info in;
  EXPECT(sw_breaker_stats_at(NULL, 1000, &in), SW_ENULL);
  EXPECT(sw_breaker_stats_at(b, 1000, NULL), SW_ENULL);
  FOR_EACH(t, BAD_T, "%" PRId64) EXPECT(sw_breaker_stats_at(b, t, &in), SW_ETIME);
  EXPECT_HUGE_T(sw_breaker_stats_at(b, INT64_MAX, &in));
}

static void bad_sw_breaker_get_rule(void) {
  sw_options *o = OPTS({SW_OPT_THRESHOLD, 1});
  EXPECT(sw_breaker_get_rule(NULL, o), SW_ENULL);
  EXPECT(sw_breaker_get_rule(breaker_with(NULL), NULL), SW_ENULL);
}

static void bad_sw_segment_probe(void) {
  sw_segment_info in;
  EXPECT(sw_segment_probe(NULL, &in), SW_ENULL);
  EXPECT(sw_segment_probe("x", NULL), SW_ENULL);
  EXPECT(sw_segment_probe("", &in), SW_ERANGE);
  EXPECT(sw_segment_probe(NAME1000, &in), SW_ERANGE);
  char name[80], path[256];
  shm_name(name, sizeof name, "probe-missing");
  EXPECT(sw_segment_probe(name, &in), SW_ENOTFOUND);
  /* not libsw's: a directory, an empty file, a file of other bytes */
  file_name(path, sizeof path, "probe-dir");
  ck_assert_int_eq(mkdir(path, 0700), 0);
  EXPECT(sw_segment_probe(path, &in), SW_EFOREIGN);
  rmdir(path);
  file_name(path, sizeof path, "probe-file");
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fclose(f);
  EXPECT(sw_segment_probe(path, &in), SW_EFOREIGN);
  f = fopen(path, "w");
  for (int i = 0; i < 4096; i++) fputc('x', f);
  fclose(f);
  EXPECT(sw_segment_probe(path, &in), SW_EFOREIGN);
  unlink(path);
  /* a segment: its header */
  sw_segment *seg = NULL;
  ck_assert_int_eq(sw_segment_open(&seg, name, 3, NULL, SW_SEGMENT_RESET), SW_OK);
  sw_segment_close(seg);
  EXPECT_OK(sw_segment_probe(name, &in));
  ck_assert_uint_eq(in.kind, SW_SEGMENT_KIND_REGISTRY);
  ck_assert_uint_eq(in.capacity, 3);
  ck_assert(in.ready && in.current && in.creator_pid == (uint32_t)getpid() && in.size > 0);
  sw_segment_unlink(name);
  /* a breaker's segment: its kind, no capacity */
  sw_breaker *b = NULL;
  ck_assert_int_eq(sw_breaker_open(&b, name, NULL, SW_SEGMENT_RESET), SW_OK);
  sw_breaker_free(b);
  EXPECT_OK(sw_segment_probe(name, &in));
  ck_assert_uint_eq(in.kind, SW_SEGMENT_KIND_BREAKER);
  ck_assert(in.ready && in.current && in.capacity == 0);
  sw_segment_unlink(name);
}

/* ========================================================== rules as data */

static void bad_sw_rules_parse(void) {
  sw_rules *r = (sw_rules *)1;
  EXPECT(sw_rules_parse(NULL, "[]", 2), SW_ENULL);
  EXPECT(sw_rules_parse(&r, NULL, 0), SW_ENULL);
  ck_assert_ptr_null(r);
  EXPECT(sw_rules_parse(&r, "", 0), SW_EINVAL);
  EXPECT(sw_rules_parse(&r, "[", 1), SW_EINVAL);
  EXPECT(sw_rules_parse(&r, "{}", 2), SW_EINVAL);                      /* not a list */
  EXPECT(sw_rules_parse(&r, "[1]", 3), SW_EINVAL);                     /* not an object */
  EXPECT(sw_rules_parse(&r, "[{\"count\":1}]", 13), SW_EINVAL);        /* no resource */
  EXPECT(sw_rules_parse(&r, "[{\"resource\":\"a\"}]", 16), SW_EINVAL); /* no count */
  const char *bad[] = {
      "[{\"resource\":\"a\",\"count\":-1}]",
      "[{\"resource\":\"a\",\"count\":\"1\"}]",
      "[{\"resource\":\"a\",\"count\":1,\"grade\":2}]",
      "[{\"resource\":\"a\",\"count\":1,\"grade\":0.5}]",
      "[{\"resource\":\"a\",\"count\":1,\"controlBehavior\":4}]",
      "[{\"resource\":\"a\",\"count\":1,\"strategy\":2}]",
      "[{\"resource\":\"a\",\"count\":1,\"limitApp\":\"appA\"}]",
      "[{\"resource\":\"a\",\"count\":1,\"dryRun\":1}]",
      "[{\"resource\":\"a\",\"count\":1,\"nosuch\":1}]",
      "[{\"resource\":\"a\",\"count\":1,\"count\":2}]",
      "[{\"resource\":\"\",\"count\":1}]",
      "[{\"resource\":\"a\",\"count\":1},{\"resource\":\"a\",\"count\":2}]",
      "[{\"resource\":\"a\",\"count\":1,\"grade\":0,\"controlBehavior\":1}]",
  };
  for (size_t i = 0; i < NELEM(bad); i++) {
    int rc = sw_rules_parse(&r, bad[i], strlen(bad[i]));
    ck_assert_msg(rc < 0 && r == NULL, "%s accepted", bad[i]);
    ck_assert_msg(strstr(sw_last_error(), "rule ") != NULL || strstr(sw_last_error(), "line 1"),
                  "%s: %s", bad[i], sw_last_error()); /* the rule, or where the JSON breaks */
  }
  EXPECT_OK(sw_rules_parse(&r, "[]", 2));
  ck_assert_uint_eq(sw_rules_count(r), 0);
  sw_rules_free(r);
}

static void bad_sw_rules_create(void) { EXPECT(sw_rules_create(NULL), SW_ENULL); }

static void bad_sw_rules_free(void) { sw_rules_free(NULL); }

static void bad_sw_rules_count(void) {
  ck_assert_uint_eq(sw_rules_count(NULL), 0);
  ck_assert_ptr_nonnull(strstr(sw_last_error(), "NULL"));
}

static void bad_sw_rules_add(void) {
  sw_rules *r;
  ck_assert_int_eq(sw_rules_create(&r), SW_OK);
  EXPECT(sw_rules_add(NULL, "a", NULL, -1, 0), SW_ENULL);
  EXPECT(sw_rules_add(r, NULL, NULL, -1, 0), SW_ENULL);
  EXPECT(sw_rules_add(r, "", NULL, -1, 0), SW_ERANGE);
  EXPECT(sw_rules_add(r, NAME1000, NULL, -1, 0), SW_ERANGE);
  EXPECT(sw_rules_add(r, "a", NULL, 2, 0), SW_ERANGE);
  EXPECT(sw_rules_add(r, "a", NULL, -1, -1), SW_ERANGE);
  EXPECT_OK(sw_rules_add(r, "a", NULL, -1, 0));
  EXPECT(sw_rules_add(r, "a", NULL, -1, 0), SW_EEXIST);
  ck_assert_uint_eq(sw_rules_count(r), 1);
  sw_rules_free(r);
}

static void bad_sw_rules_at(void) {
  sw_rules *r;
  ck_assert_int_eq(sw_rules_create(&r), SW_OK);
  const char *res;
  EXPECT(sw_rules_at(NULL, 0, &res, NULL, NULL, NULL), SW_ENULL);
  EXPECT(sw_rules_at(r, 0, &res, NULL, NULL, NULL), SW_ERANGE);
  EXPECT_OK(sw_rules_add(r, "a", NULL, -1, 0));
  EXPECT_OK(sw_rules_at(r, 0, NULL, NULL, NULL, NULL));
  EXPECT(sw_rules_at(r, 1, &res, NULL, NULL, NULL), SW_ERANGE);
  sw_rules_free(r);
}

static void bad_sw_rules_json(void) {
  sw_rules *r;
  char buf[8];
  EXPECT(sw_rules_json(NULL, buf, sizeof buf), SW_ENULL);
  ck_assert_int_eq(sw_rules_create(&r), SW_OK);
  EXPECT(sw_rules_json(r, NULL, 4), SW_ENULL);
  EXPECT_OK(sw_rules_add(r, "a", NULL, -1, 0));
  int64_t n = sw_rules_json(r, NULL, 0);
  ck_assert_int_gt(n, 10);
  ck_assert_int_eq(sw_rules_json(r, buf, sizeof buf), n); /* truncated, terminated */
  ck_assert_uint_eq(strlen(buf), sizeof buf - 1);
  sw_rules_free(r);
}

/* ============================================================ keyed table */

static void free_keyed(void *p) { sw_keyed_free(p); }

static sw_keyed *keyed_with(uint32_t cap, const sw_options *o) {
  sw_keyed *k = NULL;
  ck_assert_msg(sw_keyed_create(&k, cap, o) == SW_OK, "fixture keyed table: %s", sw_last_error());
  return keep(k, free_keyed);
}

static void bad_sw_keyed_create(void) {
  sw_keyed *k = (sw_keyed *)&k;
  EXPECT(sw_keyed_create(NULL, 10, NULL), SW_ENULL);
  static const uint32_t caps[] = {0, (1u << 28) + 1, UINT32_MAX};
  FOR_EACH(cap, caps, "%u") EXPECT(sw_keyed_create(&k, cap, NULL), SW_ESIZE);
  ck_assert_ptr_null(k);
  EXPECT(sw_keyed_create(&k, 10, OPTS({SW_OPT_BEHAVIOR, SW_BEHAVIOR_WARM_UP}, {SW_OPT_THRESHOLD, 5})),
         SW_EINVAL);
  EXPECT(sw_keyed_create(&k, 10, OPTS({SW_OPT_CLUSTER, 1})), SW_EINVAL);
  EXPECT(sw_keyed_create(&k, 10, OPTS({SW_OPT_THRESHOLD, 5e9})), SW_ERANGE);
  EXPECT(sw_keyed_create(&k, 10, OPTS({SW_OPT_SECOND_SAMPLE_COUNT, 65},
                                      {SW_OPT_SECOND_INTERVAL_MS, 65000})), SW_ERANGE);
  EXPECT(sw_keyed_create(&k, 10, OPTS({SW_OPT_SECOND_SAMPLE_COUNT, 3})), SW_ESIZE);
  for (int i = 0; i < 4; i++) EXPECT(sw_keyed_create(&k, 10, bad_rule(i)), SW_EINVAL);
  EXPECT_OK(sw_keyed_create(&k, 1, NULL));
  sw_keyed_free(k);
}

static void bad_sw_keyed_open(void) {
  char name[80], path[256];
  shm_name(name, sizeof name, "keyed");
  sw_keyed *k = (sw_keyed *)&k;
  EXPECT(sw_keyed_open(NULL, name, 10, NULL, SW_SEGMENT_CREATE), SW_ENULL);
  EXPECT(sw_keyed_open(&k, NULL, 10, NULL, SW_SEGMENT_CREATE), SW_ENULL);
  EXPECT(sw_keyed_open(&k, "", 10, NULL, SW_SEGMENT_CREATE), SW_ERANGE);
  EXPECT(sw_keyed_open(&k, NAME64, 10, NULL, SW_SEGMENT_CREATE), SW_ERANGE);
  EXPECT(sw_keyed_open(&k, name, 0, NULL, SW_SEGMENT_CREATE), SW_ESIZE);
  EXPECT(sw_keyed_open(&k, name, 10, NULL, 0x80), SW_EINVAL);
  EXPECT(sw_keyed_open(&k, name, 10, NULL, 0), SW_ENOTFOUND);
  ck_assert_ptr_null(k);
  /* a registry segment is not a keyed table, and the other way round */
  sw_segment *seg = NULL;
  ck_assert_int_eq(sw_segment_open(&seg, name, 2, NULL, SW_SEGMENT_RESET), SW_OK);
  sw_segment_close(seg);
  EXPECT(sw_keyed_open(&k, name, 10, NULL, SW_SEGMENT_CREATE), SW_ETYPE);
  EXPECT(sw_keyed_open(&k, name, 10, NULL, SW_SEGMENT_READONLY), SW_ETYPE);
  EXPECT_OK(sw_keyed_open(&k, name, 10, NULL, SW_SEGMENT_RESET));
  sw_keyed_free(k);
  EXPECT(sw_segment_open(&seg, name, 2, NULL, 0), SW_ETYPE);
  EXPECT(sw_keyed_open(&k, name, 11, NULL, 0), SW_EGEOMETRY);
  EXPECT(sw_keyed_open(&k, name, 10, OPTS({SW_OPT_KEY_BYTES, 32}), 0), SW_EGEOMETRY);
  EXPECT(sw_keyed_open(&k, name, 10, OPTS({SW_OPT_BEHAVIOR, SW_BEHAVIOR_PACING}), 0), SW_EGEOMETRY);
  ck_assert_int_eq(sw_segment_unlink(name), SW_OK);
  /* a file that is not a segment */
  file_name(path, sizeof path, "keyed-junk");
  static unsigned char junk[8192];
  memset(junk, 0x5a, sizeof junk);
  write_file(path, junk, sizeof junk);
  EXPECT(sw_keyed_open(&k, path, 10, NULL, SW_SEGMENT_CREATE), SW_EFOREIGN);
  unlink(path);
}

static void bad_sw_keyed_free(void) { sw_keyed_free(NULL); }
static void bad_sw_keyed_created(void) { EXPECT(sw_keyed_created(NULL), SW_ENULL); }

static void bad_sw_keyed_entry_at(void) {
  sw_keyed *k = keyed_with(4, OPTS({SW_OPT_THRESHOLD, 5}));
  sw_decision d;
  EXPECT(sw_keyed_entry_at(NULL, 1000, "a", 1, 1, 0, &d), SW_ENULL);
  EXPECT(sw_keyed_entry_at(k, 1000, NULL, 1, 1, 0, &d), SW_ENULL);
  EXPECT(sw_keyed_entry_at(k, 1000, "a", 1, 1, 0, NULL), SW_ENULL);
  FOR_EACH(t, BAD_T, "%" PRId64) EXPECT(sw_keyed_entry_at(k, t, "a", 1, 1, 0, &d), SW_ETIME);
  static const int64_t ns[] = {-1, (int64_t)INT32_MAX + 1, INT64_MIN, INT64_MAX};
  FOR_EACH(n, ns, "%" PRId64) EXPECT(sw_keyed_entry_at(k, 1000, "a", 1, n, 0, &d), SW_ERANGE);
  static const size_t lens[] = {0, 65536, SIZE_MAX};
  FOR_EACH(len, lens, "%zu") EXPECT(sw_keyed_entry_at(k, 1000, "a", len, 1, 0, &d), SW_ERANGE);
  EXPECT(sw_keyed_entry_at(k, 1000, "a", 1, 1, SW_ENTRY_PRIORITIZED, &d), SW_ENOTSUP);
  EXPECT(sw_keyed_entry_at(k, 1000, "a", 1, 1, ~0u, &d), SW_EINVAL);
  /* no exit on a concurrency table: nothing would free its places */
  sw_keyed *conc = keyed_with(4, OPTS({SW_OPT_GRADE, SW_GRADE_CONCURRENCY}, {SW_OPT_THRESHOLD, 5}));
  EXPECT(sw_keyed_entry_at(conc, 1000, "a", 1, 1, SW_ENTRY_NO_EXIT, &d), SW_EINVAL);
  sw_keyed_info in;
  ck_assert_int_eq(sw_keyed_stats(k, &in), SW_OK);
  ck_assert_int_eq(in.keys + in.pass + in.block, 0); /* nothing counted by a refusal */
  EXPECT_HUGE_T(sw_keyed_entry_at(k, INT64_MAX, "a", 1, 1, 0, &d));
  EXPECT_OK(sw_keyed_entry_at(k, 1000, "a", 1, INT32_MAX, 0, &d));
  ck_assert_int_eq(d.retry_after_ms, -1); /* more than the threshold: never */
}

static void bad_sw_keyed_entry(void) {
  sw_decision d;
  EXPECT(sw_keyed_entry(NULL, "a", 1, 1, 0, &d), SW_ENULL);
  EXPECT(sw_keyed_entry(keyed_with(4, NULL), "a", 0, 1, 0, &d), SW_ERANGE);
}

static void bad_sw_keyed_exit_at(void) {
  sw_keyed *k = keyed_with(4, OPTS({SW_OPT_GRADE, SW_GRADE_CONCURRENCY}, {SW_OPT_THRESHOLD, 5}));
  EXPECT(sw_keyed_exit_at(NULL, 1000, "a", 1, 1, 1, 0), SW_ENULL);
  EXPECT(sw_keyed_exit_at(k, 1000, NULL, 1, 1, 1, 0), SW_ENULL);
  FOR_EACH(t, BAD_T, "%" PRId64) EXPECT(sw_keyed_exit_at(k, t, "a", 1, 1, 1, 0), SW_ETIME);
  EXPECT(sw_keyed_exit_at(k, 1000, "a", 1, -1, 1, 0), SW_ERANGE);
  EXPECT(sw_keyed_exit_at(k, 1000, "a", 1, 1, -1, 0), SW_ERANGE);
  EXPECT(sw_keyed_exit_at(k, 1000, "a", 1, (int64_t)INT32_MAX + 1, 1, 0), SW_ERANGE);
  EXPECT(sw_keyed_exit_at(k, 1000, "a", 0, 1, 1, 0), SW_ERANGE);
  EXPECT(sw_keyed_exit_at(k, 1000, "a", 1, 1, 1, 0x10), SW_EINVAL);
  EXPECT(sw_keyed_exit_at(k, 1000, "a", 1, 1, 1, 0), SW_ESTATE); /* nothing in flight */
}

static void bad_sw_keyed_exit(void) {
  EXPECT(sw_keyed_exit(NULL, "a", 1, 1, 1, 0), SW_ENULL);
}

static void bad_sw_keyed_set_rule(void) {
  sw_keyed *k = keyed_with(4, NULL);
  EXPECT(sw_keyed_set_rule(NULL, NULL), SW_ENULL);
  EXPECT(sw_keyed_set_rule(k, OPTS({SW_OPT_BEHAVIOR, SW_BEHAVIOR_PACING})), SW_EINVAL);
  EXPECT(sw_keyed_set_rule(k, OPTS({SW_OPT_GRADE, SW_GRADE_CONCURRENCY})), SW_EINVAL);
  EXPECT(sw_keyed_set_rule(k, OPTS({SW_OPT_THRESHOLD, 5e9})), SW_ERANGE);
  for (int i = 0; i < 4; i++) EXPECT(sw_keyed_set_rule(k, bad_rule(i)), SW_EINVAL);
  EXPECT_OK(sw_keyed_set_rule(k, OPTS({SW_OPT_THRESHOLD, 7})));
}

static void bad_sw_keyed_get_rule(void) {
  sw_options *o = keep(sw_options_clone(NULL), free_options);
  EXPECT(sw_keyed_get_rule(NULL, o), SW_ENULL);
  EXPECT(sw_keyed_get_rule(keyed_with(4, NULL), NULL), SW_ENULL);
}

static void bad_sw_keyed_set_dry_run(void) {
  sw_keyed *k = keyed_with(4, NULL);
  EXPECT(sw_keyed_set_dry_run(NULL, 1), SW_ENULL);
  static const int ons[] = {-1, 2, INT32_MAX};
  FOR_EACH(on, ons, "%d") EXPECT(sw_keyed_set_dry_run(k, on), SW_EINVAL);
}

static void bad_sw_keyed_cancel(void) {
  sw_decision d = {0};
  EXPECT(sw_keyed_cancel(NULL, &d), SW_ENULL);
  EXPECT(sw_keyed_cancel(keyed_with(4, NULL), NULL), SW_ENULL);
}

static void bad_sw_keyed_stats(void) {
  sw_keyed_info in;
  EXPECT(sw_keyed_stats(NULL, &in), SW_ENULL);
  EXPECT(sw_keyed_stats(keyed_with(4, NULL), NULL), SW_ENULL);
}

static void bad_sw_keyed_lookup_at(void) {
  sw_keyed *k = keyed_with(4, NULL);
  sw_keyed_key out;
  EXPECT(sw_keyed_lookup_at(NULL, 1000, "a", 1, &out), SW_ENULL);
  EXPECT(sw_keyed_lookup_at(k, 1000, NULL, 1, &out), SW_ENULL);
  EXPECT(sw_keyed_lookup_at(k, 1000, "a", 1, NULL), SW_ENULL);
  EXPECT(sw_keyed_lookup_at(k, 1000, "a", 0, &out), SW_ERANGE);
  FOR_EACH(t, BAD_T, "%" PRId64) EXPECT(sw_keyed_lookup_at(k, t, "a", 1, &out), SW_ETIME);
  EXPECT(sw_keyed_lookup_at(k, 1000, "a", 1, &out), 0);
  EXPECT_HUGE_T(sw_keyed_lookup_at(k, INT64_MAX, "a", 1, &out));
}

static void bad_sw_keyed_scan_at(void) {
  sw_keyed *k = keyed_with(4, NULL);
  sw_keyed_key out[2];
  uint64_t cur = 0;
  EXPECT(sw_keyed_scan_at(NULL, 1000, &cur, out, 2), SW_ENULL);
  EXPECT(sw_keyed_scan_at(k, 1000, NULL, out, 2), SW_ENULL);
  EXPECT(sw_keyed_scan_at(k, 1000, &cur, NULL, 2), SW_ENULL);
  FOR_EACH(t, BAD_T, "%" PRId64) EXPECT(sw_keyed_scan_at(k, t, &cur, out, 2), SW_ETIME);
  EXPECT(sw_keyed_scan_at(k, 1000, &cur, NULL, 0), 0);
  cur = UINT64_MAX; /* past the end: nothing, no crash */
  EXPECT(sw_keyed_scan_at(k, 1000, &cur, out, 2), 0);
}

static void bad_sw_keyed_top_at(void) {
  sw_keyed *k = keyed_with(4, NULL);
  sw_keyed_key out[2];
  EXPECT(sw_keyed_top_at(NULL, 1000, SW_KEYED_BY_PASS, out, 2, NULL), SW_ENULL);
  EXPECT(sw_keyed_top_at(k, 1000, SW_KEYED_BY_PASS, NULL, 2, NULL), SW_ENULL);
  EXPECT(sw_keyed_top_at(k, 1000, 2, out, 2, NULL), SW_EINVAL);
  EXPECT(sw_keyed_top_at(k, 1000, SW_KEYED_BY_PASS, out, 100001, NULL), SW_ERANGE);
  FOR_EACH(t, BAD_T, "%" PRId64)
    EXPECT(sw_keyed_top_at(k, t, SW_KEYED_BY_PASS, out, 2, NULL), SW_ETIME);
  EXPECT(sw_keyed_top_at(k, 1000, SW_KEYED_BY_BLOCK, out, 2, NULL), 0);
}

static void bad_sw_segment_registry(void) { EXPECT_NULL(sw_segment_registry(NULL)); }
static void bad_sw_segment_name(void) { EXPECT_NULL(sw_segment_name(NULL)); }
static void bad_sw_segment_size(void) { EXPECT(sw_segment_size(NULL), SW_ENULL); }
static void bad_sw_segment_created(void) { EXPECT(sw_segment_created(NULL), SW_ENULL); }


/* ===== issue 14: lease clocks at the ends of time, forged replies, addresses */

/* Times up to INT64_MAX are valid, and a Redis reply may name any time:
 * the lease's clock arithmetic saturates, it never overflows (this section
 * runs under UBSan with -fno-sanitize-recover: tests/run-all.sh). A reply
 * that is not the lease script's is refused with SW_ERANGE. */

static sw_limiter *lease_limiter(int failure) {
  return limiter_with(OPTS({SW_OPT_THRESHOLD, 200}, {SW_OPT_CLUSTER, 1},
                           {SW_OPT_CLUSTER_LEASE, 20}, {SW_OPT_CLUSTER_FAILURE, failure},
                           {SW_OPT_CLUSTER_NODES, 2}));
}

/* Every lease function at t on l: a valid answer, whatever it is. */
static void lease_all_at(sw_limiter *l, int64_t t) {
  NOTE("t=%" PRId64, t);
  sw_decision d;
  sw_lease_call call;
  sw_lease_info in;
  EXPECT_OK(sw_limiter_entry_at(l, t, 1, 0, &d));
  ck_assert_msg(d.verdict == SW_VERDICT_PASS ||
                    (d.verdict == SW_VERDICT_BLOCK && d.retry_after_ms >= 1 &&
                     d.retry_after_ms <= 1000),
                "[%s] t=%" PRId64 ": verdict %d retry_after %" PRId64, cur_fn, t, d.verdict,
                d.retry_after_ms);
  EXPECT_OK(sw_lease_stats(l, t, &in));
  ck_assert(in.tokens >= 0 && in.tokens <= 20);
  EXPECT_GE(sw_lease_next_call(l, t, &call), 0);
  EXPECT_OK(sw_lease_failed(l, t, &call));
  EXPECT_GE(sw_lease_next_call(l, t, &call), 0);
  NO_NOTE();
}

static const int64_t END_TIMES[] = {0, 1, 10, 1000, INT64_MAX / 2, INT64_MAX - 1, INT64_MAX};
#define FAR_BUCKET (INT64_MAX - INT64_MAX % 500) /* the last bucket start of time */

START_TEST(lease_clock_at_the_ends_of_time) {
  cur_fn = "lease clock";
  const int policies[] = {SW_CLUSTER_FALLBACK_LOCAL, SW_CLUSTER_FAIL_OPEN, SW_CLUSTER_FAIL_CLOSED};
  for (size_t p = 0; p < NELEM(policies); p++) {
    sw_lease_call call;
    /* Redis time at the end of time, received at local time 10 */
    sw_limiter *l = lease_limiter(policies[p]);
    EXPECT(sw_lease_next_call(l, 10, &call), 1);
    EXPECT_OK(sw_lease_apply(l, 10, &call, FAR_BUCKET, 20, INT64_MAX));
    for (size_t i = 0; i < NELEM(END_TIMES); i++) lease_all_at(l, END_TIMES[i]);
    /* Redis time 0, received at local INT64_MAX */
    l = lease_limiter(policies[p]);
    EXPECT(sw_lease_next_call(l, INT64_MAX, &call), 1);
    EXPECT_OK(sw_lease_apply(l, INT64_MAX, &call, 0, 20, 0));
    for (size_t i = 0; i < NELEM(END_TIMES); i++) lease_all_at(l, END_TIMES[i]);
    /* down at the end of time: the next try (aligned to Redis time) saturates */
    l = lease_limiter(policies[p]);
    EXPECT(sw_lease_next_call(l, 5, &call), 1);
    EXPECT_OK(sw_lease_apply(l, 5, &call, FAR_BUCKET, 20, FAR_BUCKET + 1));
    sw_decision d;
    for (int i = 0; i < 16; i++) EXPECT_OK(sw_limiter_entry_at(l, INT64_MAX, 1, 0, &d));
    EXPECT(sw_lease_next_call(l, INT64_MAX, &call), 1); /* below the low-water mark */
    EXPECT_OK(sw_lease_failed(l, INT64_MAX, &call));
    for (size_t i = 0; i < NELEM(END_TIMES); i++) lease_all_at(l, END_TIMES[i]);
  }
  /* the fleet spent the last bucket of time: retry_after is the time to its end */
  sw_limiter *l = lease_limiter(SW_CLUSTER_FAIL_CLOSED);
  sw_lease_call call;
  sw_decision d;
  EXPECT(sw_lease_next_call(l, 5, &call), 1);
  EXPECT_OK(sw_lease_apply(l, 5, &call, FAR_BUCKET, 3, INT64_MAX - 1));
  for (int i = 0; i < 3; i++) EXPECT_OK(sw_limiter_entry_at(l, 5, 1, 0, &d));
  EXPECT_OK(sw_limiter_entry_at(l, 5, 1, 0, &d));
  ck_assert_int_eq(d.verdict, SW_VERDICT_BLOCK);
  ck_assert_int_eq(d.retry_after_ms, 500 - (INT64_MAX - 1) % 500);
  EXPECT_OK(sw_limiter_entry_at(l, INT64_MAX, 1, 0, &d)); /* Redis time saturates */
  ck_assert_int_eq(d.verdict, SW_VERDICT_BLOCK);
  ck_assert(d.retry_after_ms >= 1 && d.retry_after_ms <= 500);
  drain();
}
END_TEST

START_TEST(lease_forged_calls_and_replies) {
  cur_fn = "lease replies";
  sw_limiter *l = lease_limiter(SW_CLUSTER_FALLBACK_LOCAL);
  sw_lease_call call, forged;
  EXPECT(sw_lease_next_call(l, 1000, &call), 1);
  /* replies that are not the script's */
  EXPECT(sw_lease_apply(l, 1000, &call, 500, 5, 1000), SW_ERANGE);  /* not the bucket of 1000 */
  EXPECT(sw_lease_apply(l, 1000, &call, 1500, 5, 1000), SW_ERANGE); /* target 0, not 1 */
  EXPECT(sw_lease_apply(l, 1000, &call, FAR_BUCKET, 5, 1000), SW_ERANGE);
  EXPECT(sw_lease_apply(l, 1000, &call, 1000 + 500 * (INT64_C(1) << 24), 5, 1000), SW_ERANGE);
  EXPECT(sw_lease_apply(l, 1000, &call, 1000, 21, 1000), SW_ERANGE); /* more than asked */
  EXPECT(sw_lease_apply(l, 1000, &call, 0, 5, INT64_MAX), SW_ERANGE);
  forged = call;
  forged.target = 7;
  EXPECT(sw_lease_apply(l, 1000, &forged, 1000, 5, 1000), SW_ERANGE);
  forged.target = -1;
  EXPECT(sw_lease_apply(l, 1000, &forged, 500, 5, 1000), SW_ERANGE);
  forged = call;
  forged.want = INT64_MIN;
  EXPECT(sw_lease_apply(l, 1000, &forged, 1000, 0, 1000), SW_ERANGE);
  sw_lease_info in;
  EXPECT_OK(sw_lease_stats(l, 1000, &in));
  ck_assert_int_eq(in.up, 0); /* nothing was taken */
  /* forged calls reported as failed: refunds and charges of any size */
  const int64_t refunds[] = {INT64_MIN, INT64_MIN + 1, -1, INT64_MAX, (INT64_C(1) << 40) + 1};
  for (size_t i = 0; i < NELEM(refunds); i++) {
    forged = call;
    forged.refund = refunds[i];
    forged.refund_bucket = INT64_MIN;
    forged.started_ms = i % 2 ? INT64_MIN : INT64_MAX;
    NOTE("refund=%" PRId64, refunds[i]);
    EXPECT_OK(sw_lease_failed(l, 1000, &forged));
  }
  NO_NOTE();
  l = lease_limiter(SW_CLUSTER_FALLBACK_LOCAL);
  EXPECT(sw_lease_next_call(l, 1000, &call), 1);
  forged = call;
  forged.refund = INT64_MAX;
  EXPECT_OK(sw_lease_failed(l, 1000, &forged)); /* not kept: no such tokens */
  EXPECT(sw_lease_next_call(l, 3000, &call), 1);
  ck_assert_int_eq(call.refund, 0);
  for (size_t i = 0; i < NELEM(END_TIMES); i++) lease_all_at(l, END_TIMES[i]);
  drain();
}
END_TEST

/* A fake Redis (a child process on 127.0.0.1) that answers every EVALSHA
 * with the integers given: forged replies for sw_cluster. */
static int fake_parse(const char *b, size_t len, size_t *used, char *name, size_t cap) {
  size_t off = 0;
  char *end;
  if (len < 4 || b[0] != '*' || memchr(b, '\n', len) == NULL) return 0;
  long argc = strtol(b + 1, &end, 10);
  off = (size_t)(strchr(b, '\n') - b) + 1;
  for (long i = 0; i < argc; i++) {
    if (off >= len || b[off] != '$' || memchr(b + off, '\n', len - off) == NULL) return 0;
    long n = strtol(b + off + 1, &end, 10);
    off = (size_t)((const char *)memchr(b + off, '\n', len - off) - b) + 1;
    if (off + (size_t)n + 2 > len) return 0;
    if (i == 0) {
      size_t k = (size_t)n < cap - 1 ? (size_t)n : cap - 1;
      memcpy(name, b + off, k);
      name[k] = '\0';
    }
    off += (size_t)n + 2;
  }
  *used = off;
  return 1;
}

static void fake_serve(int c, const long long *ints, int n) {
  static char buf[1 << 16];
  size_t len = 0;
  for (;;) {
    ssize_t r = read(c, buf + len, sizeof buf - len);
    if (r <= 0) return;
    len += (size_t)r;
    size_t off = 0, used;
    char name[32], out[512];
    while (fake_parse(buf + off, len - off, &used, name, sizeof name)) {
      off += used;
      int k = 0;
      if (strcasecmp(name, "CLUSTER") == 0)
        k = snprintf(out, sizeof out, "-ERR This instance has cluster support disabled\r\n");
      else if (strcasecmp(name, "SCRIPT") == 0)
        k = snprintf(out, sizeof out, "$40\r\n%040d\r\n", 0);
      else if (strncasecmp(name, "EVAL", 4) == 0) {
        k = snprintf(out, sizeof out, "*%d\r\n", n);
        for (int i = 0; i < n; i++) k += snprintf(out + k, sizeof out - (size_t)k, ":%lld\r\n", ints[i]);
      } else
        k = snprintf(out, sizeof out, "+OK\r\n");
      if (write(c, out, (size_t)k) != k) return;
    }
    memmove(buf, buf + off, len - off);
    len -= off;
  }
}

static pid_t fake_redis(const long long *ints, int n, int *port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t alen = sizeof a;
  ck_assert(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && listen(fd, 8) == 0 &&
            getsockname(fd, (struct sockaddr *)&a, &alen) == 0);
  *port = ntohs(a.sin_port);
  pid_t pid = fork();
  ck_assert(pid >= 0);
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    for (;;) {
      int c = accept(fd, NULL, NULL);
      if (c < 0) continue;
      fake_serve(c, ints, n);
      close(c);
    }
  }
  close(fd);
  return pid;
}

START_TEST(cluster_forged_redis_replies) {
  cur_fn = "forged Redis";
  if (!cluster_built()) return;
  const long long F = (long long)FAR_BUCKET, M = INT64_MAX, m = INT64_MIN;
  const long long replies[][4] = {
      {M, 5, M, m},         /* not a bucket start, nor the bucket of its time */
      {0, 5, M, 0},         /* a bucket far from its time */
      {1000, M, 1000, 0},   /* more than asked */
      {-500, 5, -1, -5},    /* negative */
      {F, 5, M, 5},         /* consistent, at the end of time */
      {0, 1, 0, M},         /* consistent, at time 0 */
      {F, 20, M - 1, m},    /* consistent, a total that overflows a subtraction */
  };
  const int counts[] = {4, 4, 4, 4, 4, 4, 4, 3, 2};
  for (size_t i = 0; i < NELEM(replies) + 2; i++) {
    const long long *r = replies[i < NELEM(replies) ? i : 4];
    int n = counts[i], port;
    NOTE("reply %zu {%lld, %lld, %lld, %lld} (%d integers)", i, r[0], r[1], r[2], r[3], n);
    pid_t pid = fake_redis(r, n, &port);
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    sw_cluster *c = NULL;
    EXPECT_OK(sw_cluster_create(&c, addr, OPTS({SW_OPT_CLUSTER_TIMEOUT_MS, 500})));
    sw_limiter *l = lease_limiter(SW_CLUSTER_FALLBACK_LOCAL);
    EXPECT_OK(sw_cluster_add(c, l, "forged"));
    sw_decision d;
    for (int k = 0; k < 5; k++) {
      EXPECT_OK(sw_limiter_entry(l, 1, 0, &d));
      EXPECT_GE(sw_cluster_refill(c) + 100, 0); /* a count of calls, or SW_EIO */
      lease_all_at(l, sw_now_ms());
    }
    EXPECT_OK(sw_cluster_entry_exact(c, l, 1, &d));
    ck_assert(d.verdict == SW_VERDICT_PASS || d.verdict == SW_VERDICT_BLOCK);
    ck_assert(d.remaining >= 0 && d.retry_after_ms >= 0);
    EXPECT_OK(sw_cluster_remove(c, l));
    sw_cluster_free(c);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
  }
  NO_NOTE();
  drain();
}
END_TEST

/* Addresses: refused at creation, SW_EINVAL with the bad entry named. */
START_TEST(cluster_addresses) {
  cur_fn = "cluster addresses";
  if (!cluster_built()) return;
  static char long_host[100], long_list[1100];
  memset(long_host, 'h', 64);
  strcpy(long_host + 64, ":6379");
  for (size_t i = 0; i + 15 < sizeof long_list; i += 15) memcpy(long_list + i, "127.0.0.1:6379,", 15);
  long_list[sizeof long_list - 1] = '\0';
  const struct {
    const char *servers, *named;
  } bad[] = {
      {"nohostport", "nohostport"}, {"host:", "host:"},       {"host:0", "host:0"},
      {"host:65536", "host:65536"}, {"host:99999", "host:99999"}, {"host:-1", "host:-1"},
      {"host:12x", "host:12x"},     {"host:+80", "host:+80"},   {"host: 80", "host: 80"},
      {":6379", ":6379"},           {"a:1,,b:2", "a:1,,b:2"},   {",a:1", ",a:1"},
      {"a:1,", "a:1,"},             {"a:1,b", "\"b\""},         {"[::1]", "[::1]"},
      {"[::1]6379", "[::1]6379"},   {"::1:6379", "::1:6379"},   {"a b:1", "a b:1"},
      {"h/x:1", "h/x:1"},           {long_host, "hhhh"},        {long_list, "longer than 1023"},
      {"", "empty"},
  };
  sw_cluster *c;
  for (size_t i = 0; i < NELEM(bad); i++) {
    NOTE("servers=\"%.40s\"", bad[i].servers);
    EXPECT(sw_cluster_create(&c, bad[i].servers, NULL), SW_EINVAL);
    ck_assert_msg(strstr(sw_last_error(), bad[i].named) != NULL,
                  "[%s] the message for \"%.40s\" does not name it: %s", cur_fn, bad[i].servers,
                  sw_last_error());
  }
  NO_NOTE();
  const char *good[] = {"127.0.0.1:6379", "[::1]:6379", "localhost:1,127.0.0.1:65535",
                        "redis-1.example:6380,redis-2.example:6380"};
  for (size_t i = 0; i < NELEM(good); i++) {
    NOTE("servers=\"%s\"", good[i]);
    EXPECT_OK(sw_cluster_create(&c, good[i], NULL));
    sw_cluster_free(c);
  }
  NO_NOTE();
}
END_TEST

static void bad_sw_cluster_set_auth(void) {
  EXPECT(sw_cluster_set_auth(NULL, NULL, "p"), cluster_built() ? SW_ENULL : SW_ENOTSUP);
  if (!cluster_built()) return;
  sw_cluster *c;
  ck_assert_int_eq(sw_cluster_create(&c, "127.0.0.1:1", NULL), SW_OK);
  static char big[1100];
  memset(big, 'p', sizeof big - 1);
  EXPECT(sw_cluster_set_auth(c, "user", NULL), SW_EINVAL);
  EXPECT(sw_cluster_set_auth(c, NULL, ""), SW_EINVAL);
  EXPECT(sw_cluster_set_auth(c, "", "p"), SW_EINVAL);
  EXPECT(sw_cluster_set_auth(c, NULL, big), SW_EINVAL);
  ck_assert_msg(strstr(sw_last_error(), "pppp") == NULL, "the message shows the password");
  EXPECT(sw_cluster_set_auth(c, big, "p"), SW_EINVAL);
  EXPECT_OK(sw_cluster_set_auth(c, NULL, "p"));
  EXPECT_OK(sw_cluster_set_auth(c, "user", "p"));
  EXPECT_OK(sw_cluster_set_auth(c, NULL, NULL)); /* no AUTH again */
  sw_cluster_free(c);
}

static void bad_sw_cluster_set_database(void) {
  EXPECT(sw_cluster_set_database(NULL, 0), cluster_built() ? SW_ENULL : SW_ENOTSUP);
  if (!cluster_built()) return;
  sw_cluster *c;
  ck_assert_int_eq(sw_cluster_create(&c, "127.0.0.1:1", NULL), SW_OK);
  const int64_t bad[] = {-1, INT64_MIN, (int64_t)INT32_MAX + 1, INT64_MAX};
  FOR_EACH(db, bad, "%" PRId64) EXPECT(sw_cluster_set_database(c, db), SW_ERANGE);
  EXPECT_OK(sw_cluster_set_database(c, 0));
  EXPECT_OK(sw_cluster_set_database(c, INT32_MAX));
  sw_cluster_free(c);
}

static void ignore_log(void *user, int up, const char *server, const char *message) {
  (void)user, (void)up, (void)server, (void)message;
}

static void bad_sw_cluster_set_log(void) {
  EXPECT(sw_cluster_set_log(NULL, ignore_log, NULL), cluster_built() ? SW_ENULL : SW_ENOTSUP);
  if (!cluster_built()) return;
  sw_cluster *c;
  ck_assert_int_eq(sw_cluster_create(&c, "127.0.0.1:1", OPTS({SW_OPT_CLUSTER_TIMEOUT_MS, 50})),
                   SW_OK);
  EXPECT_OK(sw_cluster_set_log(c, ignore_log, NULL));
  sw_limiter *l = limiter_cluster();
  EXPECT_OK(sw_cluster_add(c, l, "r"));
  EXPECT(sw_cluster_refill(c), SW_EIO); /* a message for 127.0.0.1:1, to ignore_log */
  EXPECT_OK(sw_cluster_set_log(c, NULL, NULL));
  EXPECT(sw_cluster_refill(c), 0); /* the retry is not due yet */
  sw_cluster_free(c);
}

/* ============================================================= the table */

typedef struct {
  const char *name;
  void (*bad)(void);
  void (*fn)(void); /* the function itself: the name must be declared */
} entry;

#define E(f) {#f, bad_##f, (void (*)(void))f}

static const entry table[] = {
    E(sw_breaker_create),
    E(sw_breaker_entry),
    E(sw_breaker_entry_at),
    E(sw_breaker_exit),
    E(sw_breaker_exit_at),
    E(sw_breaker_free),
    E(sw_breaker_get_rule),
    E(sw_breaker_open),
    E(sw_breaker_set_listener),
    E(sw_breaker_stats_at),
    E(sw_bucket_type_find),
    E(sw_bucket_type_register),
    E(sw_clock_resolution_ns),
    E(sw_clock_set_custom),
    E(sw_clock_use),
    E(sw_err_name),
    E(sw_last_error),
    E(sw_leap_array_add),
    E(sw_leap_array_add_at),
    E(sw_leap_array_attach),
    E(sw_leap_array_create),
    E(sw_leap_array_create_by_name),
    E(sw_leap_array_current_window),
    E(sw_leap_array_current_window_at),
    E(sw_leap_array_detached_count),
    E(sw_leap_array_free),
    E(sw_leap_array_init_at),
    E(sw_leap_array_interval_ms),
    E(sw_leap_array_is_window_deprecated_at),
    E(sw_leap_array_layout_size),
    E(sw_leap_array_list),
    E(sw_leap_array_list_all),
    E(sw_leap_array_list_at),
    E(sw_leap_array_previous_window),
    E(sw_leap_array_previous_window_at),
    E(sw_leap_array_sample_count),
    E(sw_leap_array_sum_at),
    E(sw_leap_array_time_index),
    E(sw_leap_array_type),
    E(sw_leap_array_valid_head),
    E(sw_leap_array_valid_head_at),
    E(sw_leap_array_values),
    E(sw_leap_array_values_at),
    E(sw_leap_array_values_on_condition_at),
    E(sw_leap_array_window_length_ms),
    E(sw_leap_array_window_start),
    E(sw_leap_array_window_value_at),
    E(sw_limiter_create),
    E(sw_limiter_entry),
    E(sw_limiter_entry_at),
    E(sw_limiter_exit),
    E(sw_limiter_exit_at),
    E(sw_limiter_free),
    E(sw_limiter_get_rule),
    E(sw_limiter_node),
    E(sw_limiter_set_rule),
    E(sw_metric_add_at),
    E(sw_metric_add_block),
    E(sw_metric_add_block_at),
    E(sw_metric_add_exception),
    E(sw_metric_add_exception_at),
    E(sw_metric_add_occupied_pass),
    E(sw_metric_add_occupied_pass_at),
    E(sw_metric_add_pass),
    E(sw_metric_add_pass_at),
    E(sw_metric_add_rt),
    E(sw_metric_add_rt_at),
    E(sw_metric_add_success),
    E(sw_metric_add_success_at),
    E(sw_metric_add_waiting),
    E(sw_metric_block),
    E(sw_metric_block_at),
    E(sw_metric_bucket_get),
    E(sw_metric_create),
    E(sw_metric_details),
    E(sw_metric_details_at),
    E(sw_metric_details_on_condition_at),
    E(sw_metric_exception),
    E(sw_metric_exception_at),
    E(sw_metric_free),
    E(sw_metric_interval_sec),
    E(sw_metric_leap_array),
    E(sw_metric_max_success),
    E(sw_metric_max_success_at),
    E(sw_metric_min_rt),
    E(sw_metric_min_rt_at),
    E(sw_metric_occupied_pass),
    E(sw_metric_occupied_pass_at),
    E(sw_metric_pass),
    E(sw_metric_pass_at),
    E(sw_metric_previous_window_block),
    E(sw_metric_previous_window_block_at),
    E(sw_metric_previous_window_pass),
    E(sw_metric_previous_window_pass_at),
    E(sw_metric_rt),
    E(sw_metric_rt_at),
    E(sw_metric_sample_count),
    E(sw_metric_success),
    E(sw_metric_success_at),
    E(sw_metric_sum_at),
    E(sw_metric_try_pass),
    E(sw_metric_try_pass_at),
    E(sw_metric_waiting),
    E(sw_metric_waiting_at),
    E(sw_metric_window_pass_at),
    E(sw_metric_windows_at),
    E(sw_node_add_occupied_pass_at),
    E(sw_node_add_pass_at),
    E(sw_node_add_rt_and_success_at),
    E(sw_node_add_waiting),
    E(sw_node_avg_rt_at),
    E(sw_node_block_qps_at),
    E(sw_node_block_request_at),
    E(sw_node_concurrency),
    E(sw_node_create),
    E(sw_node_decrease_concurrency),
    E(sw_node_exception_qps_at),
    E(sw_node_free),
    E(sw_node_increase_block_at),
    E(sw_node_increase_concurrency),
    E(sw_node_increase_exception_at),
    E(sw_node_max_success_qps_at),
    E(sw_node_metrics_at),
    E(sw_node_min_rt_at),
    E(sw_node_minute_metric),
    E(sw_node_occupied_pass_qps_at),
    E(sw_node_occupy_timeout_ms),
    E(sw_node_pass_qps_at),
    E(sw_node_previous_block_qps_at),
    E(sw_node_previous_pass_qps_at),
    E(sw_node_second_metric),
    E(sw_node_success_qps_at),
    E(sw_node_total_exception_at),
    E(sw_node_total_pass_at),
    E(sw_node_total_qps_at),
    E(sw_node_total_request_at),
    E(sw_node_total_success_at),
    E(sw_node_try_occupy_next_at),
    E(sw_node_waiting_at),
    E(sw_now_ms),
    E(sw_now_ns),
    E(sw_option_bounds),
    E(sw_option_name),
    E(sw_options_clone),
    E(sw_options_create),
    E(sw_options_free),
    E(sw_options_get),
    E(sw_options_get_double),
    E(sw_options_set),
    E(sw_options_set_double),
    E(sw_plugin_load),
    E(sw_registry_at),
    E(sw_registry_capacity),
    E(sw_registry_count),
    E(sw_registry_create),
    E(sw_registry_find),
    E(sw_registry_free),
    E(sw_registry_get),
    E(sw_segment_close),
    E(sw_segment_name),
    E(sw_segment_open),
    E(sw_segment_registry),
    E(sw_segment_size),
    E(sw_segment_created),
    E(sw_keyed_create),
    E(sw_keyed_open),
    E(sw_keyed_free),
    E(sw_keyed_created),
    E(sw_keyed_entry),
    E(sw_keyed_entry_at),
    E(sw_keyed_exit),
    E(sw_keyed_exit_at),
    E(sw_keyed_set_rule),
    E(sw_keyed_get_rule),
    E(sw_keyed_set_dry_run),
    E(sw_keyed_cancel),
    E(sw_limiter_cancel),
    E(sw_keyed_stats),
    E(sw_keyed_lookup_at),
    E(sw_keyed_scan_at),
    E(sw_keyed_top_at),
    E(sw_segment_unlink),
    E(sw_segment_probe),
    E(sw_rules_parse),
    E(sw_rules_create),
    E(sw_rules_free),
    E(sw_rules_count),
    E(sw_rules_add),
    E(sw_rules_at),
    E(sw_rules_json),
    E(sw_registry_set_rule),
    E(sw_limiter_set_dry_run),
    E(sw_node_would_block_qps_at),
    E(sw_leap_array_bucket_get),
    E(sw_registry_get_ex),
    E(sw_lease_script),
    E(sw_lease_next_call),
    E(sw_lease_apply),
    E(sw_lease_failed),
    E(sw_lease_stats),
    E(sw_cluster_create),
    E(sw_cluster_free),
    E(sw_cluster_add),
    E(sw_cluster_refill),
    E(sw_cluster_remove),
    E(sw_cluster_start),
    E(sw_cluster_round_trips),
    E(sw_cluster_entry_exact),
    E(sw_cluster_set_auth),
    E(sw_cluster_set_database),
    E(sw_cluster_set_log),
    E(sw_set_alloc_funcs),
    E(sw_sliding_view_avg_rt_at),
    E(sw_sliding_view_create),
    E(sw_sliding_view_free),
    E(sw_sliding_view_max_of_single_bucket_at),
    E(sw_sliding_view_min_rt_at),
    E(sw_sliding_view_previous_qps_at),
    E(sw_sliding_view_qps_at),
    E(sw_sliding_view_second_metrics_on_condition_at),
    E(sw_sliding_view_sum_at),
    E(sw_strerror),
    E(sw_version),
    E(sw_version_string),
};

/* Run one entry as its own Check test, named after the function. */
static void run_entry(int i) {
  tcase_fn_start(table[i].name, __FILE__, __LINE__);
  /* Without fork (CK_FORK=no) a failed entry leaves its state: reset it. */
  drain();
  clock_real();
  sw_set_alloc_funcs(NULL, NULL);
  cur_fn = table[i].name;
  NO_NOTE();
  table[i].bad();
  drain();
  clock_real();
}

/* ============================================ every export has an entry */

static int in_table(const char *name) {
  for (size_t i = 0; i < NELEM(table); i++)
    if (strcmp(table[i].name, name) == 0) return 1;
  return 0;
}

START_TEST(test_catalogue_covers_exports) {
  FILE *f = fopen(SW_SYMBOLS_FILE, "r");
  ck_assert_msg(f != NULL, "cannot open %s: %s", SW_SYMBOLS_FILE, strerror(errno));
  static char exported[1024][128];
  size_t n = 0;
  char line[256], missing[4096] = "", stale[4096] = "";
  while (fgets(line, sizeof line, f)) {
    char *s = line, *e;
    while (*s == ' ' || *s == '\t') s++;
    for (e = s + strlen(s); e > s && (e[-1] == '\n' || e[-1] == '\r' || e[-1] == ' ' ||
                                      e[-1] == '\t');)
      *--e = '\0';
    if (*s == '\0' || *s == '#') continue;
    ck_assert_msg(n < NELEM(exported) && strlen(s) < sizeof exported[0], "symbol list too big");
    strcpy(exported[n++], s);
    if (!in_table(s) && strlen(missing) + strlen(s) + 2 < sizeof missing) {
      strcat(missing, " ");
      strcat(missing, s);
    }
  }
  fclose(f);
  ck_assert_msg(n > 0, "%s lists no symbols", SW_SYMBOLS_FILE);
  for (size_t i = 0; i < NELEM(table); i++) {
    int found = 0;
    for (size_t k = 0; k < n && !found; k++) found = strcmp(exported[k], table[i].name) == 0;
    if (!found && strlen(stale) + strlen(table[i].name) + 2 < sizeof stale) {
      strcat(stale, " ");
      strcat(stale, table[i].name);
    }
    for (size_t k = i + 1; k < NELEM(table); k++)
      ck_assert_msg(strcmp(table[i].name, table[k].name) != 0, "%s has two entries",
                    table[i].name);
    ck_assert_msg(strncmp(table[i].name, "sw_", 3) == 0 && table[i].fn != NULL,
                  "entry %s is not a libsw function", table[i].name);
  }
  ck_assert_msg(missing[0] == '\0' && stale[0] == '\0',
                "exported without a bad-input entry in tests/check_bad_input.c:%s%s; "
                "entries for functions that are not exported:%s%s",
                missing, missing[0] ? "" : " (none)", stale, stale[0] ? "" : " (none)");
}
END_TEST

/* ====================================== writes on a read-only attachment */

/* Every write through a handle of a SW_SEGMENT_READONLY segment is refused
 * with SW_EPERM (the mapping is PROT_READ: a write would be SIGSEGV); reads
 * work. The segment is made once by the runner (unchecked fixture), so a
 * crashing test leaves nothing behind. */
static char ro_name[80];
static sw_registry *ro_registry; /* of the read-only handle of the running test */

static void ro_setup(void) {
  snprintf(ro_name, sizeof ro_name, "swbad-%d-readonly", g_main_pid);
  sw_options *o = NULL;
  ck_assert_int_eq(sw_options_create(&o), SW_OK);
  ck_assert_int_eq(sw_options_set(o, SW_OPT_THRESHOLD, 10), SW_OK);
  sw_segment *seg = NULL;
  ck_assert_int_eq(sw_segment_open(&seg, ro_name, 2, o, SW_SEGMENT_RESET), SW_OK);
  sw_limiter *l = NULL;
  ck_assert_int_eq(sw_registry_get(sw_segment_registry(seg), "a", &l), SW_OK);
  sw_decision d;
  ck_assert_int_eq(sw_limiter_entry_at(l, 1000, 1, 0, &d), SW_OK);
  ck_assert_int_eq(d.verdict, SW_VERDICT_PASS);
  /* "c": a cluster rule, for the lease and exact-mode writes */
  ck_assert_int_eq(sw_options_set(o, SW_OPT_CLUSTER, 1), SW_OK);
  ck_assert_int_eq(sw_registry_get_ex(sw_segment_registry(seg), "c", o, &l), SW_OK);
  sw_options_free(o);
  sw_segment_close(seg);
}

static void ro_teardown(void) { sw_segment_unlink(ro_name); }

typedef struct {
  const char *what;
  int want; /* SW_EPERM for writes; the reads give PASS at 1000: 1 */
  int64_t (*op)(sw_limiter *l);
} ro_op;

static sw_decision ro_d;
static int64_t ro_entry(sw_limiter *l) { return sw_limiter_entry_at(l, 2000, 1, 0, &ro_d); }
static int64_t ro_exit(sw_limiter *l) { return sw_limiter_exit_at(l, 2000, 1, 1, 0); }
static int64_t ro_set_rule(sw_limiter *l) { return sw_limiter_set_rule(l, NULL); }
static int64_t ro_node_add(sw_limiter *l) {
  return sw_node_add_pass_at(sw_limiter_node(l), 2000, 1);
}
static int64_t ro_node_rt(sw_limiter *l) {
  return sw_node_add_rt_and_success_at(sw_limiter_node(l), 2000, 1, 1);
}
static int64_t ro_node_inc(sw_limiter *l) {
  return sw_node_increase_concurrency(sw_limiter_node(l));
}
static int64_t ro_node_wait(sw_limiter *l) {
  return sw_node_add_waiting(sw_limiter_node(l), 2500, 1);
}
static int64_t ro_metric_add(sw_limiter *l) {
  return sw_metric_add_pass_at(sw_node_second_metric(sw_limiter_node(l)), 2000, 1);
}
static int64_t ro_metric_try(sw_limiter *l) {
  return sw_metric_try_pass_at(sw_node_minute_metric(sw_limiter_node(l)), 2000, 1, 10, NULL);
}
static int64_t ro_la_current(sw_limiter *l) {
  sw_window w;
  sw_leap_array *la = sw_metric_leap_array(sw_node_second_metric(sw_limiter_node(l)));
  return sw_leap_array_current_window_at(la, 2000, &w);
}
static int64_t ro_la_add(sw_limiter *l) {
  sw_leap_array *la = sw_metric_leap_array(sw_node_minute_metric(sw_limiter_node(l)));
  return sw_leap_array_add_at(la, 2000, 0, 1);
}
static int64_t ro_set_dry_run(sw_limiter *l) { return sw_limiter_set_dry_run(l, 1); }
/* The cluster rule "c" of the same segment. */
static sw_limiter *ro_cluster_limiter(sw_limiter *l) {
  sw_limiter *c = NULL;
  (void)l;
  ck_assert_int_eq(sw_registry_find(ro_registry, "c", &c), 1);
  return c;
}
static int64_t ro_lease_next(sw_limiter *l) {
  sw_lease_call call;
  return sw_lease_next_call(ro_cluster_limiter(l), 2000, &call);
}
static int64_t ro_lease_apply(sw_limiter *l) {
  sw_lease_call call = {.want = 1};
  return sw_lease_apply(ro_cluster_limiter(l), 2000, &call, 0, 1, 2000);
}
static int64_t ro_lease_failed(sw_limiter *l) {
  sw_lease_call call = {.want = 1};
  return sw_lease_failed(ro_cluster_limiter(l), 2000, &call);
}
/* Exact mode writes the node after the Redis call: refused before it. */
static int64_t ro_exact(sw_limiter *l) {
  if (!cluster_built()) return SW_EPERM; /* nothing to check without hiredis */
  sw_cluster *c = NULL;
  ck_assert_int_eq(sw_cluster_create(&c, "127.0.0.1:1", OPTS({SW_OPT_CLUSTER_TIMEOUT_MS, 50})),
                   SW_OK);
  sw_limiter *cl = ro_cluster_limiter(l);
  ck_assert_int_eq(sw_cluster_add(c, cl, "c"), SW_OK);
  int rc = sw_cluster_entry_exact(c, cl, 1, &ro_d);
  sw_cluster_free(c);
  return rc;
}
static int64_t ro_reads(sw_limiter *l) {
  sw_node *node = sw_limiter_node(l);
  sw_options *o = NULL;
  ck_assert_int_eq(sw_options_create(&o), SW_OK);
  int rc = sw_limiter_get_rule(l, o);
  sw_options_free(o);
  if (rc < 0) return rc;
  ck_assert(sw_node_pass_qps_at(node, 1000) >= 0);
  sw_metric_record rec[60];
  if ((rc = sw_node_metrics_at(node, 5000, 0, rec, 60)) < 0) return rc;
  return sw_node_total_pass_at(node, 1000);
}

static const ro_op ro_ops[] = {
    {"sw_limiter_entry_at", SW_EPERM, ro_entry},
    {"sw_limiter_exit_at", SW_EPERM, ro_exit},
    {"sw_limiter_set_rule", SW_EPERM, ro_set_rule},
    {"sw_node_add_pass_at", SW_EPERM, ro_node_add},
    {"sw_node_add_rt_and_success_at", SW_EPERM, ro_node_rt},
    {"sw_node_increase_concurrency", SW_EPERM, ro_node_inc},
    {"sw_node_add_waiting", SW_EPERM, ro_node_wait},
    {"sw_metric_add_pass_at", SW_EPERM, ro_metric_add},
    {"sw_metric_try_pass_at", SW_EPERM, ro_metric_try},
    {"sw_leap_array_current_window_at", SW_EPERM, ro_la_current},
    {"sw_leap_array_add_at", SW_EPERM, ro_la_add},
    {"sw_limiter_set_dry_run", SW_EPERM, ro_set_dry_run},
    {"sw_lease_next_call", SW_EPERM, ro_lease_next},
    {"sw_lease_apply", SW_EPERM, ro_lease_apply},
    {"sw_lease_failed", SW_EPERM, ro_lease_failed},
    {"sw_cluster_entry_exact", SW_EPERM, ro_exact},
    {"reads", 1, ro_reads},
};

static void run_ro(int i) {
  tcase_fn_start(ro_ops[i].what, __FILE__, __LINE__);
  cur_fn = ro_ops[i].what;
  NO_NOTE();
  sw_segment *ro = NULL;
  ck_assert_int_eq(sw_segment_open(&ro, ro_name, 0, NULL, SW_SEGMENT_READONLY), SW_OK);
  sw_limiter *l = NULL;
  ro_registry = sw_segment_registry(ro);
  ck_assert_int_eq(sw_registry_find(ro_registry, "a", &l), 1);
  EXPECT(ro_ops[i].op(l), ro_ops[i].want);
  sw_segment_close(ro);
}

/* ================================================================= main */

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(path);
}

/* Remove every segment a failed test left behind. */
static void remove_leftovers(void) {
  char prefix[64];
  snprintf(prefix, sizeof prefix, "swbad-%d-", g_main_pid);
  DIR *d = opendir("/dev/shm");
  if (d) {
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
      if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) sw_segment_unlink(e->d_name);
    closedir(d);
  }
  if (g_dir[0]) nftw(g_dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

int main(void) {
  g_main_pid = (int)getpid();
  init_names();
  const char *tmp = getenv("TMPDIR");
  snprintf(g_dir, sizeof g_dir, "%s/swbad-%d-XXXXXX", tmp && *tmp ? tmp : "/tmp", g_main_pid);
  if (mkdtemp(g_dir) == NULL) {
    perror("mkdtemp");
    return EXIT_FAILURE;
  }

  Suite *s = suite_create("bad_input");
  TCase *tc = tcase_create("coverage");
  tcase_add_test(tc, test_catalogue_covers_exports);
  suite_add_tcase(s, tc);

  static TTest tests[NELEM(table)];
  tc = tcase_create("catalogue");
  tcase_set_timeout(tc, 120);
  for (size_t i = 0; i < NELEM(table); i++) {
    tests[i] = (TTest){table[i].name, run_entry, __FILE__, __LINE__};
    tcase_add_loop_test(tc, &tests[i], (int)i, (int)i + 1);
  }
  suite_add_tcase(s, tc);

  tc = tcase_create("issue 14: lease clocks, forged replies, addresses");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, lease_clock_at_the_ends_of_time);
  tcase_add_test(tc, lease_forged_calls_and_replies);
  tcase_add_test(tc, cluster_forged_redis_replies);
  tcase_add_test(tc, cluster_addresses);
  suite_add_tcase(s, tc);

  static TTest ro_tests[NELEM(ro_ops)];
  tc = tcase_create("readonly");
  tcase_set_timeout(tc, 120);
  tcase_add_unchecked_fixture(tc, ro_setup, ro_teardown);
  for (size_t i = 0; i < NELEM(ro_ops); i++) {
    ro_tests[i] = (TTest){ro_ops[i].what, run_ro, __FILE__, __LINE__};
    tcase_add_loop_test(tc, &ro_tests[i], (int)i, (int)i + 1);
  }
  suite_add_tcase(s, tc);

  int rc = sw_test_run(s);
  remove_leftovers();
  return rc;
}
