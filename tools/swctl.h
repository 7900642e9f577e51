/* SPDX-License-Identifier: Apache-2.0 */
/* swctl's parts: reading a segment and the poll loop (swctl_collect.c),
 * a keyed table read as one resource (swctl_keyed.c) and shown
 * (swctl_keyed_show.c),
 * the HTTP server on libmicrohttpd (swctl_http.c), the Prometheus
 * exposition (swctl_prom.c), Sentinel's metric log (swctl_log.c) and the
 * dashboard (swctl_dashboard.c, serving tools/dashboard/, compiled in),
 * finding segments (swctl_ls.c), flow rules as JSON (swctl_rules.c).
 *
 * Threads: the main thread polls the segment and writes the metric log;
 * swctl serve's HTTP thread only reads what the last poll left, under
 * swctl.lock (the poll holds it for writing, never while writing the log). */
#ifndef SWCTL_H
#define SWCTL_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include <sw/sw.h>

#define SWCTL_HISTORY 60 /* seconds of history per resource */
#define SWCTL_RESCAN_MS 5000 /* serve --all: the segments that appeared, every 5 s */

/* One second of a resource (wall-clock start). */
typedef struct swctl_second {
  int64_t unix_ms;
  sw_metric_record rec;
  int64_t concurrency; /* at the poll that saw it */
} swctl_second;

typedef struct swctl_resource {
  const char *name; /* borrowed from the segment */
  sw_limiter *lim;  /* NULL: unreadable, or a keyed table's resource */
  sw_keyed *keyed;  /* a keyed table's: its totals are since its creation */
  int64_t folded_ms; /* monotonic start of the last second folded in */
  /* totals since swctl started (Prometheus counters) */
  int64_t pass, block, would_block, success, exception, occupied, rt;
  /* gauges, read at the last poll; min_rt NaN when no request completed
   * in the window (libsw's "no sample" value is not a response time) */
  double pass_qps, block_qps, would_block_qps, avg_rt, min_rt, threshold;
  int64_t concurrency, waiting, grade, behavior, dry_run;
  swctl_second history[SWCTL_HISTORY];
  int nhistory; /* oldest first */
} swctl_resource;

/* What a scan of a whole keyed table finds. */
typedef struct swctl_scan {
  int64_t active;       /* keys with a pass or a block in the interval */
  sw_keyed_key *top[2]; /* SW_KEYED_BY_PASS, SW_KEYED_BY_BLOCK: most first */
  int ntop[2];
} swctl_scan;

/* A keyed table (swctl_keyed.c): one resource, swctl.res[0]; what only a
 * keyed table has is here, read at each poll. */
#define SWCTL_TOP_MAX 1000 /* --top: bounds the Prometheus series per table */
typedef struct swctl_keyed {
  sw_keyed *k;
  sw_keyed_info info;
  int64_t polled;   /* monotonic ms of the last poll, 0 before the first */
  int64_t span_ms;  /* between the last two polls: the rates' (0: no rates yet) */
  uint32_t topn;    /* keys in each top list */
  swctl_scan shown; /* the last scan a poll took in */
  swctl_scan next;  /* a scan made before the poll that takes it in (staged) */
  sw_keyed_key *tops; /* the memory of the four lists */
  int staged;
  int64_t scanned;  /* monotonic ms when the last scan started */
  int64_t scan_ms;  /* how long it took */
  int drop_pages;   /* scans give back the pages they read (a one-shot dump) */
} swctl_keyed;

typedef struct swctl {
  sw_segment *seg;    /* NULL for a keyed table, a breaker, and a host (below) */
  swctl_keyed *keyed; /* NULL for a registry */
  sw_breaker *breaker; /* a circuit breaker's segment (swctl_breaker.c), else NULL */
  sw_breaker_info binfo; /* ... read at the last poll, at bnow (monotonic ms) */
  int64_t bnow;
  const char *segment_name;
  /* Several segments served at once (swctl serve A B, --all): a host — a
   * swctl with neither seg nor keyed, which holds the lock, the generation
   * and the rescan — heads a chain of one swctl per segment. swctl_run,
   * swctl_prometheus and swctl_api_series go along the chain from the
   * swctl they are given; only the main thread adds to it, under lock. */
  struct swctl *next;
  /* --all: every few seconds, the segments that appeared, opened (a chain,
   * or NULL); swctl_run appends them under the lock */
  struct swctl *(*rescan)(struct swctl *host);
  void *rescan_user;
  int64_t rescan_ms; /* between two rescans (0: SWCTL_RESCAN_MS) */
  swctl_resource *res;
  int nres, capres;
  int64_t wall_offset; /* unix ms - monotonic ms, at the last poll */
  /* each whole second folded in is handed to this (the metric log) */
  void (*on_second)(void *user, const swctl_resource *r, const swctl_second *s);
  void *on_second_user;
  /* swctl_run: when set, each poll holds it for writing; generation counts
   * the polls (readers cache what they render per generation) */
  pthread_rwlock_t *lock;
  uint64_t generation;
  /* the seconds a poll folded in, handed to on_second after the lock */
  struct swctl_pending *pending;
  int npending, cappending;
} swctl;

const char *swctl_rule_name(int64_t grade, int64_t behavior);

/* A host heads a chain of segments and is none itself. */
static inline int swctl_is_host(const swctl *c) {
  return c->seg == NULL && c->keyed == NULL && c->breaker == NULL;
}

/* swctl_collect.c */
/* A registry segment, a keyed table (topn keys in its top lists), or a
 * circuit breaker. */
int swctl_open(swctl *c, const char *segment, uint32_t topn);
void swctl_close(swctl *c);
/* Read every resource: gauges now, and the whole seconds not seen yet. */
int swctl_poll(swctl *c);
/* The rule's threshold, grade, behaviour and dry run, from o into r. */
void swctl_take_rule(swctl_resource *r, const sw_options *o);
/* 1 if the resource was read (a limiter or a keyed table). */
int swctl_readable(const swctl_resource *r);
/* Monotonic now, and c->wall_offset set for it. */
int64_t swctl_clock(swctl *c);
/* A second of resource i: into its history, and to on_second after the poll. */
void swctl_add_second(swctl *c, int i, const swctl_second *s);
/* A host for several segments (see struct swctl). */
void swctl_host(swctl *c);
/* Poll c and every swctl chained after it once a second until *stop, or for
 * seconds (< 0: forever), calling
 * tick(user) about every 100 ms in between (tick may be NULL). Each poll
 * holds c->lock (when set) for writing; on_second runs after it is
 * released, so a slow metric log never holds up a reader. */
int swctl_run(swctl *c, long seconds, volatile int *stop, void (*tick)(void *user), void *user);

/* Growing text buffer for replies. */
typedef struct swctl_buf {
  char *data;
  size_t len, cap;
} swctl_buf;
void swctl_printf(swctl_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void swctl_append(swctl_buf *b, const char *s, size_t n);
void swctl_json_str(swctl_buf *b, const char *s);

/* swctl_http.c: serve /metrics, /api/series and the dashboard while
 * swctl_run polls, until *stop or for seconds (< 0: forever). Returns the
 * exit status: 0, or 1 with a message on stderr (a bad address, or a swctl
 * built without libmicrohttpd). */
typedef struct swctl_serve_opts {
  const char *listen;        /* "host:port", host an IP address */
  long seconds;              /* < 0: until *stop */
  unsigned max_connections;  /* open at once; more are closed at accept */
  unsigned read_timeout_s;   /* a request must have arrived by then */
  unsigned write_timeout_s;  /* its reply must have been taken by then */
} swctl_serve_opts;
#define SWCTL_MAX_CONNECTIONS 128
#define SWCTL_READ_TIMEOUT_S 10
#define SWCTL_WRITE_TIMEOUT_S 30
int swctl_serve(swctl *c, const swctl_serve_opts *o, volatile int *stop);
/* 1 when this swctl can serve HTTP (built with libmicrohttpd). */
int swctl_can_serve(void);

/* swctl_prom.c (a keyed table's series too) */
void swctl_prometheus(swctl *c, swctl_buf *b);
/* A label value escaped (backslash, quote, newline). */
void swctl_prom_escape(swctl_buf *b, const char *s);

/* swctl_breaker.c: a circuit breaker's segment */
int swctl_breaker_open(swctl *c, const char *segment);
void swctl_breaker_close(swctl *c);
int swctl_breaker_poll(swctl *c);
void swctl_breaker_print(swctl *c, FILE *out);
int swctl_breaker_dump(swctl *c);
/* The breaker's members of a JSON object. */
void swctl_breaker_json(swctl *c, swctl_buf *b);
/* The breakers' series, of every breaker along the chain from c. */
void swctl_breaker_series(swctl *c, swctl_buf *b);

/* swctl_log.c */
typedef struct swctl_log {
  char path[4096];
  FILE *f;
  int64_t size, max_size;
  int max_files;
  int64_t last_error_ms;
  int64_t errors;
} swctl_log;
int swctl_log_open(swctl_log *log, const char *dir, const char *app, int64_t max_size,
                   int max_files);
void swctl_log_second(void *log, const swctl_resource *r, const swctl_second *s);
void swctl_log_close(swctl_log *log);

/* swctl_keyed.c: attach, and read at each poll */
int swctl_keyed_open(swctl *c, const char *segment, uint32_t topn);
void swctl_keyed_close(swctl *c);
/* The top keys and the active ones, one pass over the table into
 * c->keyed->next, when due: a scan may take at most a tenth of the time
 * (so a table too large to scan every second is scanned less often).
 * swctl_run calls it before it takes the lock, so readers go on. */
void swctl_keyed_scan(swctl *c);
/* Totals and key counts, and the staged scan taken in (made now if no
 * swctl_run calls swctl_keyed_scan). */
int swctl_keyed_poll(swctl *c);
/* Every key present at t, SWCTL_KEYED_CHUNK at a time: memory does not
 * grow with the keys. 0, or a negative sw_err. */
#define SWCTL_KEYED_CHUNK 1024 /* 176 KiB */
int swctl_keyed_each(swctl *c, int64_t t, void (*fn)(void *user, const sw_keyed_key *keys, int n),
                     void *user);
/* A key as text in out (SWCTL_KEY_TEXT bytes): an IPv4 or IPv6 address,
 * text, 0x and hex, or digest: and hex; returns its kind's name. */
#define SWCTL_KEY_TEXT (2 * SW_KEYED_KEY_MAX + 8)
const char *swctl_key_text(const sw_keyed_key *key, char *out);

/* swctl_keyed_show.c */
void swctl_keyed_print(swctl *c, FILE *out);
/* The table's JSON line, then one per key, on stdout: 0, or 1 with a message. */
int swctl_keyed_dump(swctl *c);
/* The table's members of a JSON object (rule, totals, keys, top lists). */
void swctl_keyed_json(swctl *c, swctl_buf *b);

/* swctl_ls.c: segments found by their header (sw_segment_probe) */
typedef struct swctl_list {
  char **names; /* shared memory names (in /dev/shm) or paths; owned */
  int n, cap;
} swctl_list;
/* Add name (taken, freed if already there): 0, or -1 out of memory. */
int swctl_list_add(swctl_list *l, char *name);
void swctl_list_free(swctl_list *l);
/* The segments args name, in order: a name or a path as it is; a glob
 * (*, ?, [) the libsw segments it matches — in /dev/shm without a '/',
 * else as a path; with all, first every libsw segment of /dev/shm.
 * 0, or -1 (said on stderr). */
int swctl_find(const char *const *args, int nargs, int all, swctl_list *out);
/* swctl ls: the libsw segments of dirs (none: /dev/shm) as a table or
 * JSON; the exit status. */
int swctl_ls(const char *const *dirs, int ndirs, int json);

/* swctl_rules.c: what "get", "apply" (file) or "check" (segment is the
 * file); the exit status (3: the rules were refused, nothing changed). */
int swctl_rules(const char *what, const char *segment, const char *file);

/* swctl_dashboard.c */
void swctl_api_series(swctl *c, swctl_buf *b);
int swctl_asset(const char *path, const char **type, const unsigned char **data, size_t *len);

#endif
