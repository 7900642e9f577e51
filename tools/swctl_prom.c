/* SPDX-License-Identifier: Apache-2.0 */
/* The Prometheus text exposition (format 0.0.4) of one segment or of a
 * chain of them (swctl serve A B, --all): each family once, with the
 * series of every segment, labelled by segment and resource. Counters of
 * what swctl has seen since it started (whole seconds, folded once; a
 * keyed table's: since its creation), and gauges read now. Base units:
 * seconds. A value that is not known (the minimum RT of a window in which
 * no request completed) is NaN, never libsw's "no sample" 5 s. A keyed
 * table's keys are never a series each: its totals, and --top N keys of
 * each list at most. */
#include <math.h>
#include <string.h>

#include "swctl.h"

/* A label value: backslash, quote and newline escaped. */
void swctl_prom_escape(swctl_buf *b, const char *s) {
  while (*s) {
    size_t run = strcspn(s, "\\\"\n"); /* copied at once */
    swctl_append(b, s, run);
    s += run;
    if (*s == '\n')
      swctl_append(b, "\\n", 2);
    else if (*s)
      swctl_printf(b, "\\%c", *s);
    if (*s) s++;
  }
}

/* {segment="..",resource="..",key=".."}: resource and key may be NULL. */
static void label(swctl_buf *b, const char *segment, const char *resource, const char *key) {
  swctl_append(b, "{segment=\"", 10);
  swctl_prom_escape(b, segment);
  if (resource) {
    swctl_append(b, "\",resource=\"", 12);
    swctl_prom_escape(b, resource);
  }
  if (key) {
    swctl_append(b, "\",key=\"", 7);
    swctl_prom_escape(b, key);
  }
  swctl_append(b, "\"}", 2);
}

typedef enum { COUNTER, GAUGE } kind;

typedef struct family {
  const char *name, *help;
  kind kind;
  double (*value)(const swctl_resource *r);
  int registry_only; /* not a keyed table's */
} family;

static void header(swctl_buf *b, const char *name, const char *help, kind k) {
  swctl_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name,
               k == COUNTER ? "counter" : "gauge");
}

#define V(field) static double v_##field(const swctl_resource *r) { return (double)r->field; }
V(pass)
V(block)
V(would_block)
V(success)
V(exception)
V(occupied)
V(concurrency)
V(waiting)
V(threshold)
V(dry_run)
V(pass_qps)
V(block_qps)
static double v_rt_seconds(const swctl_resource *r) { return (double)r->rt / 1000.0; }
static double v_min_rt_seconds(const swctl_resource *r) { return r->min_rt / 1000.0; }

static const family families[] = {
    {"libsw_pass_total", "Requests admitted.", COUNTER, v_pass, 0},
    {"libsw_block_total", "Requests refused.", COUNTER, v_block, 0},
    {"libsw_would_block_total", "Requests a dry-run rule would have refused (admitted).",
     COUNTER, v_would_block, 0},
    {"libsw_success_total", "Admitted requests that completed.", COUNTER, v_success, 0},
    {"libsw_exception_total", "Admitted requests that failed.", COUNTER, v_exception, 0},
    {"libsw_borrowed_total", "Requests admitted on quota borrowed from the next window.",
     COUNTER, v_occupied, 1},
    {"libsw_response_time_seconds_total", "Sum of the response times of completed requests.",
     COUNTER, v_rt_seconds, 0},
    {"libsw_concurrency", "Requests in flight.", GAUGE, v_concurrency, 1},
    {"libsw_waiting", "Borrowed requests waiting for their window.", GAUGE, v_waiting, 1},
    {"libsw_min_response_time_seconds",
     "Smallest response time in the last second (NaN: no request completed).", GAUGE,
     v_min_rt_seconds, 1},
    {"libsw_pass_per_second", "Admissions over the sliding second.", GAUGE, v_pass_qps, 0},
    {"libsw_block_per_second", "Refusals over the sliding second.", GAUGE, v_block_qps, 0},
    {"libsw_threshold", "The rule's threshold (requests per second, or in flight).", GAUGE,
     v_threshold, 0},
    {"libsw_dry_run", "1 when the rule only counts what it would refuse.", GAUGE, v_dry_run, 0},
};

/* A keyed table's own series: its keys and memory. */
typedef struct keyed_family {
  const char *name, *help;
  kind kind;
  double (*value)(const swctl_keyed *k);
} keyed_family;

#define K(field) static double k_##field(const swctl_keyed *k) { return (double)k->info.field; }
K(keys)
K(inserted)
K(reclaimed)
K(evicted)
K(refused)
K(capacity)
K(bytes)
static double k_active(const swctl_keyed *k) { return (double)k->shown.active; }

static const keyed_family keyed_families[] = {
    {"libsw_keyed_keys", "Keys in a keyed table (active or idle).", GAUGE, k_keys},
    {"libsw_keyed_active_keys", "Keys with a pass or a block in the rule's interval.", GAUGE,
     k_active},
    {"libsw_keyed_capacity", "Keys a keyed table holds at once, as created.", GAUGE, k_capacity},
    {"libsw_keyed_bytes", "A keyed table's memory (reserved; touched as keys arrive).", GAUGE,
     k_bytes},
    {"libsw_keyed_inserted_total", "Keys inserted since the table was created.", COUNTER,
     k_inserted},
    {"libsw_keyed_reclaimed_total", "Keys inserted in the place of an idle key (nothing lost).",
     COUNTER, k_reclaimed},
    {"libsw_keyed_evicted_total", "Keys inserted in the place of an active key (table full).",
     COUNTER, k_evicted},
    {"libsw_keyed_refused_total", "New keys refused while the table was full.", COUNTER,
     k_refused},
};

/* A sample's value: NaN as Prometheus spells it. */
static void value(swctl_buf *b, double v) {
  if (isnan(v))
    swctl_append(b, " NaN\n", 5);
  else
    swctl_printf(b, " %.17g\n", v);
}

/* The keyed tables' series, then their top keys: at most --top series a
 * list and table, whatever its number of keys. */
static void keyed_series(swctl *c, swctl_buf *b) {
  int any = 0;
  for (swctl *s = c; s; s = s->next) any |= s->keyed != NULL;
  if (!any) return;
  for (size_t f = 0; f < sizeof keyed_families / sizeof keyed_families[0]; f++) {
    const keyed_family *fa = &keyed_families[f];
    header(b, fa->name, fa->help, fa->kind);
    for (swctl *s = c; s; s = s->next) {
      if (s->keyed == NULL) continue;
      swctl_append(b, fa->name, strlen(fa->name));
      label(b, s->segment_name, s->res[0].name, NULL);
      value(b, fa->value(s->keyed));
    }
  }
  static const char *const names[] = {"libsw_keyed_top_passes", "libsw_keyed_top_blocks"};
  static const char *const helps[] = {
      "Passes in the rule's interval of the keys with the most (swctl --top).",
      "Blocks in the latest window that blocked of the keys with the most (swctl --top)."};
  char key[SWCTL_KEY_TEXT];
  for (int by = 0; by < 2; by++) {
    header(b, names[by], helps[by], GAUGE);
    for (swctl *s = c; s; s = s->next) {
      const swctl_keyed *kt = s->keyed;
      for (int i = 0; kt && i < kt->shown.ntop[by]; i++) {
        const sw_keyed_key *k = &kt->shown.top[by][i];
        swctl_key_text(k, key);
        swctl_append(b, names[by], strlen(names[by]));
        label(b, s->segment_name, s->res[0].name, key);
        swctl_printf(b, " %lld\n", (long long)(by == SW_KEYED_BY_PASS ? k->pass : k->block));
      }
    }
  }
}

void swctl_prometheus(swctl *c, swctl_buf *b) {
  int registries = 0, segments = 0;
  for (swctl *s = c; s; s = s->next) {
    registries |= s->seg != NULL;
    segments += !swctl_is_host(s);
  }
  for (size_t f = 0; f < sizeof families / sizeof families[0]; f++) {
    const family *fa = &families[f];
    if (fa->registry_only && !registries) continue;
    header(b, fa->name, fa->help, fa->kind);
    for (swctl *s = c; s; s = s->next) {
      if (fa->registry_only && s->keyed) continue;
      for (int i = 0; i < s->nres; i++) {
        const swctl_resource *r = &s->res[i];
        if (!swctl_readable(r)) continue;
        swctl_append(b, fa->name, strlen(fa->name));
        label(b, s->segment_name, r->name, NULL);
        value(b, fa->value(r));
      }
    }
  }
  keyed_series(c, b);
  swctl_breaker_series(c, b);
  swctl_printf(b, "# HELP libsw_resources Resources in the segment.\n"
                  "# TYPE libsw_resources gauge\n");
  for (swctl *s = c; s; s = s->next) {
    if (swctl_is_host(s)) continue;
    swctl_append(b, "libsw_resources", 15);
    label(b, s->segment_name, NULL, NULL);
    swctl_printf(b, " %d\n", s->nres);
  }
  swctl_printf(b, "# HELP libsw_segments Segments exported by this swctl.\n"
                  "# TYPE libsw_segments gauge\nlibsw_segments %d\n", segments);
}
