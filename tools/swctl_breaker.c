/* SPDX-License-Identifier: Apache-2.0 */
/* A circuit breaker's segment in swctl: its state, the stat interval's
 * completions and ratio, its probes and transitions — shown (list, top),
 * as a JSON line (dump), as Prometheus series (serve), and in the
 * dashboard's data (the "breaker" member of /api/series). Read-only. */
#include <stdlib.h>
#include <string.h>

#include "swctl.h"

int swctl_breaker_open(swctl *c, const char *segment) {
  return sw_breaker_open(&c->breaker, segment, NULL, SW_SEGMENT_READONLY);
}

void swctl_breaker_close(swctl *c) {
  sw_breaker_free(c->breaker);
  c->breaker = NULL;
}

int swctl_breaker_poll(swctl *c) {
  int64_t t = swctl_clock(c);
  int rc = sw_breaker_stats_at(c->breaker, t, &c->binfo);
  if (rc == SW_OK) c->bnow = t;
  return rc;
}

static const char *const states[] = {"closed", "open", "half_open"};
static const char *const strategies[] = {"slow_ratio", "error_ratio", "error_count"};

static const char *state_name(int32_t s) { return s >= 0 && s <= 2 ? states[s] : "unknown"; }
static const char *strategy_name(int32_t s) { return s >= 0 && s <= 2 ? strategies[s] : "unknown"; }

/* Milliseconds until the next probe may go (0 unless open). */
static int64_t probe_in(const swctl *c) {
  const sw_breaker_info *in = &c->binfo;
  return in->state == SW_BREAKER_OPEN && in->next_probe_ms > c->bnow ? in->next_probe_ms - c->bnow
                                                                     : 0;
}

void swctl_breaker_print(swctl *c, FILE *out) {
  const sw_breaker_info *in = &c->binfo;
  fprintf(out, "%s: circuit breaker (%s)\n", c->segment_name, strategy_name(in->strategy));
  fprintf(out, "%-10s %9s %9s %7s %8s %8s %8s %8s %8s %8s %8s %8s\n", "STATE", "REQUESTS", "BAD",
          "RATIO", "PROBE_IN", "OPENED", "HALF", "CLOSED", "REOPENED", "PROBES", "LOST",
          "BLOCKED");
  fprintf(out, "%-10s %9lld %9lld %7.3f %7.3fs %8lld %8lld %8lld %8lld %8lld %8lld %8lld\n",
          state_name(in->state), (long long)in->total, (long long)in->bad, in->ratio,
          (double)probe_in(c) / 1000.0, (long long)in->opened, (long long)in->half_opened,
          (long long)in->closed, (long long)in->reopened, (long long)in->probes,
          (long long)in->probes_lost, (long long)in->blocked);
}

void swctl_breaker_json(swctl *c, swctl_buf *b) {
  const sw_breaker_info *in = &c->binfo;
  swctl_printf(b, "\"state\":\"%s\",\"strategy\":\"%s\",\"requests\":%lld,\"bad\":%lld,"
                  "\"ratio\":%.6f,\"next_probe_in_ms\":%lld,\"probes_in_flight\":%lld,"
                  "\"opened\":%lld,\"half_opened\":%lld,\"closed\":%lld,\"reopened\":%lld,"
                  "\"probes\":%lld,\"probes_lost\":%lld,\"blocked\":%lld",
               state_name(in->state), strategy_name(in->strategy), (long long)in->total,
               (long long)in->bad, in->ratio, (long long)probe_in(c),
               (long long)in->probes_in_flight, (long long)in->opened,
               (long long)in->half_opened, (long long)in->closed, (long long)in->reopened,
               (long long)in->probes, (long long)in->probes_lost, (long long)in->blocked);
}

int swctl_breaker_dump(swctl *c) {
  swctl_buf b = {0};
  swctl_printf(&b, "{\"ts\":%lld,\"segment\":", (long long)(c->bnow + c->wall_offset));
  swctl_json_str(&b, c->segment_name);
  swctl_printf(&b, ",");
  swctl_breaker_json(c, &b);
  swctl_printf(&b, "}\n");
  fwrite(b.data, 1, b.len, stdout);
  free(b.data);
  return 0;
}

/* {segment="..."[,NAME="VALUE"]} */
static void labels(swctl_buf *b, const char *segment, const char *name, const char *value) {
  swctl_append(b, "{segment=\"", 10);
  swctl_prom_escape(b, segment);
  if (name) swctl_printf(b, "\",%s=\"%s", name, value);
  swctl_append(b, "\"}", 2);
}

static void header(swctl_buf *b, const char *metric, const char *help, int counter) {
  swctl_printf(b, "# HELP %s %s\n# TYPE %s %s\n", metric, help, metric,
               counter ? "counter" : "gauge");
}

/* One family: a series for each breaker of the chain, value(info, now). */
static void family(swctl *c, swctl_buf *b, const char *metric, const char *help, int counter,
                   double (*value)(const swctl *)) {
  header(b, metric, help, counter);
  for (swctl *s = c; s; s = s->next) {
    if (s->breaker == NULL) continue;
    swctl_printf(b, "%s", metric);
    labels(b, s->segment_name, NULL, NULL);
    swctl_printf(b, " %.17g\n", value(s));
  }
}

static double requests(const swctl *s) { return (double)s->binfo.total; }
static double bad(const swctl *s) { return (double)s->binfo.bad; }
static double ratio(const swctl *s) { return s->binfo.ratio; }
static double next_probe(const swctl *s) { return (double)probe_in(s) / 1000.0; }
static double in_flight(const swctl *s) { return (double)s->binfo.probes_in_flight; }
static double probes(const swctl *s) { return (double)s->binfo.probes; }
static double lost(const swctl *s) { return (double)s->binfo.probes_lost; }
static double blocked(const swctl *s) { return (double)s->binfo.blocked; }

void swctl_breaker_series(swctl *c, swctl_buf *b) {
  int any = 0;
  for (swctl *s = c; s; s = s->next) any |= s->breaker != NULL;
  if (!any) return;
  header(b, "libsw_breaker_state", "1 for the breaker's current state.", 0);
  for (swctl *s = c; s; s = s->next)
    for (int k = 0; s->breaker && k < 3; k++) {
      swctl_printf(b, "libsw_breaker_state");
      labels(b, s->segment_name, "state", states[k]);
      swctl_printf(b, " %d\n", s->binfo.state == k);
    }
  header(b, "libsw_breaker_transitions_total", "State changes, by all processes.", 1);
  static const char *const moves[] = {"closed_to_open", "open_to_half_open", "half_open_to_closed",
                                      "half_open_to_open"};
  for (swctl *s = c; s; s = s->next) {
    if (s->breaker == NULL) continue;
    const sw_breaker_info *in = &s->binfo;
    const int64_t counts[] = {in->opened, in->half_opened, in->closed, in->reopened};
    for (int k = 0; k < 4; k++) {
      swctl_printf(b, "libsw_breaker_transitions_total");
      labels(b, s->segment_name, "transition", moves[k]);
      swctl_printf(b, " %lld\n", (long long)counts[k]);
    }
  }
  family(c, b, "libsw_breaker_requests", "Completions in the stat interval.", 0, requests);
  family(c, b, "libsw_breaker_bad_requests", "Slow or failed completions in the stat interval.",
         0, bad);
  family(c, b, "libsw_breaker_bad_ratio", "Slow or failed completions over all, in the interval.",
         0, ratio);
  family(c, b, "libsw_breaker_next_probe_seconds", "Time until the next probe while open.", 0,
         next_probe);
  family(c, b, "libsw_breaker_probes_in_flight", "Probes let through and not ended (half-open).",
         0, in_flight);
  family(c, b, "libsw_breaker_probes_total", "Probes let through.", 1, probes);
  family(c, b, "libsw_breaker_lost_probes_total", "Probes whose timeout passed before they ended.",
         1, lost);
  family(c, b, "libsw_breaker_blocked_total", "Entries refused.", 1, blocked);
}
