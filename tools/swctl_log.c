/* SPDX-License-Identifier: Apache-2.0 */
/* Sentinel's metric log: one line per resource and second,
 *   timestamp|resource|passQps|blockQps|successQps|exceptionQps|rt|occupiedPassQps|concurrency|classification
 * (rt: the average; classification: 0) followed by libsw's wouldBlockQps,
 * written to <dir>/<app>-metrics.log and rolled to .1 .. .N-1 when it
 * would exceed max_size. A write that fails (a full disk) is reported once
 * a minute and dropped; swctl, and the limiters, go on. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "swctl.h"

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void complain(swctl_log *log, const char *what) {
  log->errors++;
  int64_t t = now_ms();
  if (log->last_error_ms && t - log->last_error_ms < 60000) return;
  log->last_error_ms = t;
  fprintf(stderr, "swctl: metric log %s: %s: %s (lines are dropped, serving goes on)\n",
          log->path, what, strerror(errno));
}

static int reopen(swctl_log *log) {
  if (log->f) fclose(log->f);
  log->f = fopen(log->path, "a");
  if (log->f == NULL) {
    complain(log, "cannot open");
    return -1;
  }
  fseek(log->f, 0, SEEK_END);
  long pos = ftell(log->f);
  log->size = pos > 0 ? pos : 0;
  return 0;
}

int swctl_log_open(swctl_log *log, const char *dir, const char *app, int64_t max_size,
                   int max_files) {
  memset(log, 0, sizeof *log);
  if (max_size < 256 || max_files < 1) {
    fprintf(stderr, "swctl: metric log: want --log-max-size >= 256 and --log-max-files >= 1\n");
    return -1;
  }
  if (snprintf(log->path, sizeof log->path, "%s/%s-metrics.log", dir, app) >=
      (int)sizeof log->path) {
    fprintf(stderr, "swctl: metric log: path too long\n");
    return -1;
  }
  log->max_size = max_size;
  log->max_files = max_files;
  reopen(log); /* a failure here is reported and retried at each second */
  return 0;
}

static void roll(swctl_log *log) {
  char from[4200], to[4200];
  for (int i = log->max_files - 1; i >= 1; i--) {
    if (i == 1)
      snprintf(from, sizeof from, "%s", log->path);
    else
      snprintf(from, sizeof from, "%s.%d", log->path, i - 1);
    snprintf(to, sizeof to, "%s.%d", log->path, i);
    if (rename(from, to) < 0 && errno != ENOENT) complain(log, "cannot roll");
  }
  if (log->max_files == 1) remove(log->path);
  reopen(log);
}

void swctl_log_second(void *user, const swctl_resource *r, const swctl_second *s) {
  swctl_log *log = user;
  char name[128], line[512];
  snprintf(name, sizeof name, "%s", r->name);
  for (char *p = name; *p; p++)
    if (*p == '|' || *p == '\n' || *p == '\r') *p = '_';
  const sw_metric_record *m = &s->rec;
  int n = snprintf(line, sizeof line, "%lld|%s|%lld|%lld|%lld|%lld|%lld|%lld|%lld|0|%lld\n",
                   (long long)s->unix_ms, name, (long long)m->pass, (long long)m->block,
                   (long long)m->success, (long long)m->exception,
                   (long long)(m->success ? m->rt / m->success : m->rt),
                   (long long)m->occupied_pass, (long long)s->concurrency,
                   (long long)m->would_block);
  if (log->f == NULL && reopen(log) < 0) return;
  if (log->size > 0 && log->size + n > log->max_size) roll(log);
  if (log->f == NULL) return;
  if (fwrite(line, 1, (size_t)n, log->f) != (size_t)n || fflush(log->f) != 0) {
    complain(log, "cannot write");
    clearerr(log->f);
    return;
  }
  log->size += n;
}

void swctl_log_close(swctl_log *log) {
  if (log->f) fclose(log->f);
  log->f = NULL;
}
