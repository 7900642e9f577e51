/* swctl's parts: reading a segment (swctl_collect.c), the HTTP server
 * (swctl_http.c), the Prometheus exposition (swctl_prom.c), Sentinel's
 * metric log (swctl_log.c) and the dashboard (swctl_dashboard.c, serving
 * tools/dashboard/, compiled in). */
#ifndef SWCTL_H
#define SWCTL_H

#include <stdint.h>
#include <stdio.h>

#include <sw/sw.h>

#define SWCTL_HISTORY 60 /* seconds of history per resource */

/* One second of a resource (wall-clock start). */
typedef struct swctl_second {
  int64_t unix_ms;
  sw_metric_record rec;
  int64_t concurrency; /* at the poll that saw it */
} swctl_second;

typedef struct swctl_resource {
  const char *name; /* borrowed from the segment */
  sw_limiter *lim;
  int64_t folded_ms; /* monotonic start of the last second folded in */
  /* totals since swctl started (Prometheus counters) */
  int64_t pass, block, would_block, success, exception, occupied, rt;
  /* gauges, read at the last poll */
  double pass_qps, block_qps, would_block_qps, avg_rt, min_rt, threshold;
  int64_t concurrency, waiting, grade, behavior, dry_run;
  swctl_second history[SWCTL_HISTORY];
  int nhistory; /* oldest first */
} swctl_resource;

typedef struct swctl {
  sw_segment *seg;
  const char *segment_name;
  swctl_resource *res;
  int nres, capres;
  int64_t wall_offset; /* unix ms - monotonic ms, at the last poll */
  /* each whole second folded in is handed to this (the metric log) */
  void (*on_second)(void *user, const swctl_resource *r, const swctl_second *s);
  void *on_second_user;
} swctl;

const char *swctl_rule_name(int64_t grade, int64_t behavior);

/* swctl_collect.c */
int swctl_open(swctl *c, const char *segment);
void swctl_close(swctl *c);
/* Read every resource: gauges now, and the whole seconds not seen yet. */
int swctl_poll(swctl *c);

/* Growing text buffer for replies. */
typedef struct swctl_buf {
  char *data;
  size_t len, cap;
} swctl_buf;
void swctl_printf(swctl_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void swctl_json_str(swctl_buf *b, const char *s);

/* swctl_http.c: serve until *stop, or for seconds (< 0: forever); polls the
 * segment every second. */
typedef struct swctl_reply {
  int status;
  const char *type;
  swctl_buf body;
} swctl_reply;
typedef void (*swctl_handler)(swctl *c, const char *path, swctl_reply *out);
int swctl_serve(swctl *c, const char *listen, long seconds, swctl_handler handler,
                volatile int *stop);
/* Run the poll loop without a listener (the metric log alone). */
int swctl_run(swctl *c, long seconds, volatile int *stop);

/* swctl_prom.c */
void swctl_prometheus(swctl *c, swctl_buf *b);

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

/* swctl_dashboard.c */
void swctl_api_series(swctl *c, swctl_buf *b);
int swctl_asset(const char *path, const char **type, const unsigned char **data, size_t *len);

#endif
