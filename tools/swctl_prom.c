/* The Prometheus text exposition (format 0.0.4) of a segment: counters of
 * what swctl has seen since it started (whole seconds, folded once), and
 * gauges read now. Base units: seconds. */
#include <string.h>

#include "swctl.h"

/* A label value: backslash, quote and newline escaped. */
static void escaped(swctl_buf *b, const char *s) {
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

static void label(swctl_buf *b, const char *segment, const char *resource) {
  swctl_append(b, "{segment=\"", 10);
  escaped(b, segment);
  if (resource) {
    swctl_append(b, "\",resource=\"", 12);
    escaped(b, resource);
  }
  swctl_append(b, "\"}", 2);
}

typedef enum { COUNTER, GAUGE } kind;

typedef struct family {
  const char *name, *help;
  kind kind;
  double (*value)(const swctl_resource *r);
} family;

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
    {"libsw_pass_total", "Requests admitted.", COUNTER, v_pass},
    {"libsw_block_total", "Requests refused.", COUNTER, v_block},
    {"libsw_would_block_total", "Requests a dry-run rule would have refused (admitted).",
     COUNTER, v_would_block},
    {"libsw_success_total", "Admitted requests that completed.", COUNTER, v_success},
    {"libsw_exception_total", "Admitted requests that failed.", COUNTER, v_exception},
    {"libsw_borrowed_total", "Requests admitted on quota borrowed from the next window.",
     COUNTER, v_occupied},
    {"libsw_response_time_seconds_total", "Sum of the response times of completed requests.",
     COUNTER, v_rt_seconds},
    {"libsw_concurrency", "Requests in flight.", GAUGE, v_concurrency},
    {"libsw_waiting", "Borrowed requests waiting for their window.", GAUGE, v_waiting},
    {"libsw_min_response_time_seconds", "Smallest response time in the last second.", GAUGE,
     v_min_rt_seconds},
    {"libsw_pass_per_second", "Admissions over the sliding second.", GAUGE, v_pass_qps},
    {"libsw_block_per_second", "Refusals over the sliding second.", GAUGE, v_block_qps},
    {"libsw_threshold", "The rule's threshold (requests per second, or in flight).", GAUGE,
     v_threshold},
    {"libsw_dry_run", "1 when the rule only counts what it would refuse.", GAUGE, v_dry_run},
};

void swctl_prometheus(swctl *c, swctl_buf *b) {
  for (size_t f = 0; f < sizeof families / sizeof families[0]; f++) {
    const family *fa = &families[f];
    swctl_printf(b, "# HELP %s %s\n# TYPE %s %s\n", fa->name, fa->help, fa->name,
                 fa->kind == COUNTER ? "counter" : "gauge");
    for (int i = 0; i < c->nres; i++) {
      const swctl_resource *r = &c->res[i];
      if (r->lim == NULL) continue;
      swctl_append(b, fa->name, strlen(fa->name));
      label(b, c->segment_name, r->name);
      swctl_printf(b, " %.17g\n", fa->value(r));
    }
  }
  swctl_printf(b, "# HELP libsw_resources Resources in the segment.\n"
                  "# TYPE libsw_resources gauge\nlibsw_resources");
  label(b, c->segment_name, NULL);
  swctl_printf(b, " %d\n", c->nres);
}
