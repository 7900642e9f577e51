/* Reading a segment: gauges of every resource, and each whole second of its
 * per-minute array folded once into totals and a short history. */
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

void swctl_json_str(swctl_buf *b, const char *s) {
  swctl_printf(b, "\"");
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\')
      swctl_printf(b, "\\%c", ch);
    else if (ch < 0x20)
      swctl_printf(b, "\\u%04x", ch);
    else
      swctl_printf(b, "%c", ch);
  }
  swctl_printf(b, "\"");
}

int swctl_open(swctl *c, const char *segment) {
  memset(c, 0, sizeof *c);
  c->segment_name = segment;
  return sw_segment_open(&c->seg, segment, 0, NULL, SW_SEGMENT_READONLY);
}

void swctl_close(swctl *c) {
  sw_segment_close(c->seg);
  free(c->res);
  memset(c, 0, sizeof *c);
}

static void swctl_gauges(swctl_resource *r, int64_t t) {
  sw_node *n = sw_limiter_node(r->lim);
  r->pass_qps = sw_node_pass_qps_at(n, t);
  r->block_qps = sw_node_block_qps_at(n, t);
  r->would_block_qps = sw_node_would_block_qps_at(n, t);
  r->avg_rt = sw_node_avg_rt_at(n, t);
  r->min_rt = sw_node_min_rt_at(n, t);
  r->concurrency = sw_node_concurrency(n);
  r->waiting = sw_node_waiting_at(n, t);
  sw_options *o;
  if (sw_options_create(&o) == SW_OK) {
    sw_limiter_get_rule(r->lim, o);
    sw_options_get_double(o, SW_OPT_THRESHOLD, &r->threshold);
    sw_options_get(o, SW_OPT_GRADE, &r->grade);
    sw_options_get(o, SW_OPT_BEHAVIOR, &r->behavior);
    sw_options_get(o, SW_OPT_DRY_RUN, &r->dry_run);
    sw_options_free(o);
  }
}

int swctl_poll(swctl *c) {
  sw_registry *reg = sw_segment_registry(c->seg);
  uint32_t count = sw_registry_count(reg);
  if ((int)count > c->capres) {
    swctl_resource *res = realloc(c->res, count * sizeof *res);
    if (res == NULL) return SW_ENOMEM;
    memset(res + c->capres, 0, (count - (uint32_t)c->capres) * sizeof *res);
    c->res = res;
    c->capres = (int)count;
  }
  int64_t t = sw_now_ms();
  struct timespec wall;
  clock_gettime(CLOCK_REALTIME, &wall);
  c->wall_offset = (int64_t)wall.tv_sec * 1000 + wall.tv_nsec / 1000000 - t;
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
      if (r->nhistory == SWCTL_HISTORY) {
        memmove(r->history, r->history + 1, (SWCTL_HISTORY - 1) * sizeof r->history[0]);
        r->nhistory--;
      }
      swctl_second *s = &r->history[r->nhistory++];
      /* Windows are aligned on the monotonic clock; name each second by the
       * nearest wall-clock second, as Sentinel's metric log does. */
      s->unix_ms = (m->start_ms + c->wall_offset + 500) / 1000 * 1000;
      s->rec = *m;
      s->concurrency = r->concurrency;
      if (c->on_second) c->on_second(c->on_second_user, r, s);
    }
  }
  c->nres = (int)count;
  return SW_OK;
}
