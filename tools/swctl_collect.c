/* SPDX-License-Identifier: Apache-2.0 */
/* Reading a segment: gauges of every resource, and each whole second of its
 * per-minute array folded once into totals and a short history; and the
 * loop that does it once a second. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "swctl.h"

static const char *const behaviors[] = {"reject", "warm-up", "pacing", "warm-up+pacing"};

const char *swctl_rule_name(int64_t grade, int64_t behavior) {
  if (grade == SW_GRADE_CONCURRENCY) return "concurrency";
  return behavior >= 0 && behavior < 4 ? behaviors[behavior] : "?";
}

void swctl_printf(swctl_buf *b, const char *fmt, ...) {
  va_list ap;
  for (;;) {
    size_t room = b->cap - b->len;
    va_start(ap, fmt);
    int n = vsnprintf(b->data ? b->data + b->len : NULL, b->data ? room : 0, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if (b->data && (size_t)n < room) {
      b->len += (size_t)n;
      return;
    }
    size_t cap = b->cap ? b->cap * 2 : 4096;
    while (cap < b->len + (size_t)n + 1) cap *= 2;
    char *d = realloc(b->data, cap);
    if (d == NULL) return;
    b->data = d;
    b->cap = cap;
  }
}

void swctl_append(swctl_buf *b, const char *s, size_t n) {
  if (b->cap - b->len <= n) {
    size_t cap = b->cap ? b->cap * 2 : 4096;
    while (cap <= b->len + n) cap *= 2;
    char *d = realloc(b->data, cap);
    if (d == NULL) return;
    b->data = d;
    b->cap = cap;
  }
  memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = '\0';
}

void swctl_json_str(swctl_buf *b, const char *s) {
  swctl_append(b, "\"", 1);
  while (*s) {
    size_t run = 0; /* characters that need no escape, copied at once */
    while (s[run] && s[run] != '"' && s[run] != '\\' && (unsigned char)s[run] >= 0x20) run++;
    swctl_append(b, s, run);
    s += run;
    if (*s == '"' || *s == '\\')
      swctl_printf(b, "\\%c", *s++);
    else if (*s)
      swctl_printf(b, "\\u%04x", (unsigned char)*s++);
  }
  swctl_append(b, "\"", 1);
}

int swctl_open(swctl *c, const char *segment, uint32_t topn) {
  memset(c, 0, sizeof *c);
  c->segment_name = segment;
  int rc = sw_segment_open(&c->seg, segment, 0, NULL, SW_SEGMENT_READONLY);
  /* a keyed table and a circuit breaker are other kinds of segment */
  if (rc == SW_ETYPE) rc = swctl_keyed_open(c, segment, topn);
  return rc == SW_ETYPE ? swctl_breaker_open(c, segment) : rc;
}

void swctl_host(swctl *c) {
  memset(c, 0, sizeof *c);
  c->segment_name = "";
}

int swctl_readable(const swctl_resource *r) { return r->lim != NULL || r->keyed != NULL; }

void swctl_close(swctl *c) {
  swctl_keyed_close(c);
  swctl_breaker_close(c);
  sw_segment_close(c->seg);
  free(c->res);
  free(c->pending);
  memset(c, 0, sizeof *c);
}

/* A second folded in by a poll, for on_second once the poll is over. */
struct swctl_pending {
  int res;
  swctl_second s;
};

static void pend(swctl *c, int res, const swctl_second *s) {
  if (c->npending == c->cappending) {
    int cap = c->cappending ? c->cappending * 2 : 256;
    struct swctl_pending *p = realloc(c->pending, (size_t)cap * sizeof *p);
    if (p == NULL) return; /* the line is lost, the totals are not */
    c->pending = p;
    c->cappending = cap;
  }
  c->pending[c->npending].res = res;
  c->pending[c->npending].s = *s;
  c->npending++;
}

static void swctl_gauges(swctl_resource *r, int64_t t) {
  sw_node *n = sw_limiter_node(r->lim);
  r->pass_qps = sw_node_pass_qps_at(n, t);
  r->block_qps = sw_node_block_qps_at(n, t);
  r->would_block_qps = sw_node_would_block_qps_at(n, t);
  r->avg_rt = sw_node_avg_rt_at(n, t);
  /* Sentinel's min RT is its maximum (SW_OPT_MAX_RT_MS, 5 s) until a
   * request completes in the window: no sample, not a response time. */
  r->min_rt = sw_node_success_qps_at(n, t) > 0 ? sw_node_min_rt_at(n, t) : NAN;
  r->concurrency = sw_node_concurrency(n);
  r->waiting = sw_node_waiting_at(n, t);
  sw_options *o;
  if (sw_options_create(&o) == SW_OK) {
    sw_limiter_get_rule(r->lim, o);
    swctl_take_rule(r, o);
    sw_options_free(o);
  }
}

void swctl_take_rule(swctl_resource *r, const sw_options *o) {
  sw_options_get_double(o, SW_OPT_THRESHOLD, &r->threshold);
  sw_options_get(o, SW_OPT_GRADE, &r->grade);
  sw_options_get(o, SW_OPT_BEHAVIOR, &r->behavior);
  sw_options_get(o, SW_OPT_DRY_RUN, &r->dry_run);
}

int64_t swctl_clock(swctl *c) {
  int64_t t = sw_now_ms();
  struct timespec wall;
  clock_gettime(CLOCK_REALTIME, &wall);
  c->wall_offset = (int64_t)wall.tv_sec * 1000 + wall.tv_nsec / 1000000 - t;
  return t;
}

void swctl_add_second(swctl *c, int i, const swctl_second *s) {
  swctl_resource *r = &c->res[i];
  if (r->nhistory == SWCTL_HISTORY) {
    memmove(r->history, r->history + 1, (SWCTL_HISTORY - 1) * sizeof r->history[0]);
    r->nhistory--;
  }
  r->history[r->nhistory++] = *s;
  if (c->on_second) pend(c, i, s);
}

int swctl_poll(swctl *c) {
  if (c->keyed) return swctl_keyed_poll(c);
  if (c->breaker) return swctl_breaker_poll(c);
  if (c->seg == NULL) return SW_OK; /* a host */
  sw_registry *reg = sw_segment_registry(c->seg);
  uint32_t count = sw_registry_count(reg);
  if ((int)count > c->capres) {
    swctl_resource *res = realloc(c->res, count * sizeof *res);
    if (res == NULL) return SW_ENOMEM;
    memset(res + c->capres, 0, (count - (uint32_t)c->capres) * sizeof *res);
    c->res = res;
    c->capres = (int)count;
  }
  int64_t t = swctl_clock(c);
  for (uint32_t i = 0; i < count; i++) {
    swctl_resource *r = &c->res[i];
    if (r->lim == NULL) {
      if (sw_registry_at(reg, i, &r->lim, &r->name) < 0) {
        r->lim = NULL;
        continue;
      }
      r->folded_ms = t - 60000; /* a new resource: its last minute is history */
    }
    swctl_gauges(r, t);
    sw_metric_record recs[SWCTL_HISTORY];
    int n = sw_node_metrics_at(sw_limiter_node(r->lim), t, r->folded_ms, recs, SWCTL_HISTORY);
    for (int k = 0; k < n && k < SWCTL_HISTORY; k++) {
      const sw_metric_record *m = &recs[k];
      r->pass += m->pass;
      r->block += m->block;
      r->would_block += m->would_block;
      r->success += m->success;
      r->exception += m->exception;
      r->occupied += m->occupied_pass;
      r->rt += m->rt;
      r->folded_ms = m->start_ms;
      /* Windows are aligned on the monotonic clock; name each second by the
       * nearest wall-clock second, as Sentinel's metric log does. */
      swctl_second s = {(m->start_ms + c->wall_offset + 500) / 1000 * 1000, *m, r->concurrency};
      swctl_add_second(c, (int)i, &s);
    }
  }
  c->nres = (int)count;
  return SW_OK;
}

static int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}


int swctl_run(swctl *c, long seconds, volatile int *stop, void (*tick)(void *user), void *user) {
  int64_t end = seconds < 0 ? INT64_MAX : mono_ms() + seconds * 1000, next_poll = 0;
  int64_t next_rescan = 0;
  while (!*stop && mono_ms() < end) {
    int64_t now = mono_ms();
    if (now >= next_poll) {
      swctl *added = NULL;
      if (c->rescan && now >= next_rescan) { /* opens: outside the lock */
        added = c->rescan(c);
        next_rescan = now + (c->rescan_ms > 0 ? c->rescan_ms : SWCTL_RESCAN_MS);
      }
      for (swctl *s = c; s; s = s->next)
        if (s->keyed) swctl_keyed_scan(s); /* the long part, before the lock */
      for (swctl *s = added; s; s = s->next)
        if (s->keyed) swctl_keyed_scan(s);
      if (c->lock) pthread_rwlock_wrlock(c->lock);
      swctl *tail = c;
      while (tail->next) tail = tail->next;
      tail->next = added;
      for (swctl *s = c; s; s = s->next) swctl_poll(s);
      c->generation++;
      if (c->lock) pthread_rwlock_unlock(c->lock);
      /* Only this thread changes the chain and c->res: they stay valid without the lock. */
      for (swctl *s = c; s; s = s->next) {
        for (int k = 0; k < s->npending; k++)
          s->on_second(s->on_second_user, &s->res[s->pending[k].res], &s->pending[k].s);
        s->npending = 0;
      }
      next_poll = now + 1000;
    }
    if (tick) tick(user);
    int64_t wait = next_poll - mono_ms(), left = end - mono_ms();
    if (wait > left) wait = left;
    if (tick && wait > 100) wait = 100;
    if (wait <= 0) continue;
    struct timespec ts = {wait / 1000, (wait % 1000) * 1000000};
    nanosleep(&ts, NULL);
  }
  return 0;
}
