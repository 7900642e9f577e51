/* SPDX-License-Identifier: Apache-2.0 */
/* The dashboard's data: /api/series, every resource's last minute (and a
 * keyed table's totals, keys and top keys), of one segment or a chain. */
#include <math.h>

#include "swctl.h"

static void resources(swctl *c, swctl_buf *b, int *first) {
  for (int i = 0; i < c->nres; i++) {
    const swctl_resource *r = &c->res[i];
    if (!swctl_readable(r)) continue;
    swctl_printf(b, "%s{\"segment\":", *first ? "" : ",");
    *first = 0;
    swctl_json_str(b, c->segment_name);
    swctl_printf(b, ",\"name\":");
    swctl_json_str(b, r->name);
    swctl_printf(b, ",\"rule\":\"%s\",\"threshold\":%.17g,\"dry_run\":%lld,"
                    "\"concurrency\":%lld,\"waiting\":%lld,\"pass_qps\":%.3f,"
                    "\"block_qps\":%.3f,\"min_rt\":",
                 swctl_rule_name(r->grade, r->behavior), r->threshold, (long long)r->dry_run,
                 (long long)r->concurrency, (long long)r->waiting, r->pass_qps, r->block_qps);
    if (isnan(r->min_rt) || r->keyed) /* none in the window; a table keeps none */
      swctl_append(b, "null", 4);
    else
      swctl_printf(b, "%.0f", r->min_rt);
    swctl_append(b, ",\"series\":[", 11);
    for (int k = 0; k < r->nhistory; k++) {
      const sw_metric_record *m = &r->history[k].rec;
      swctl_printf(b, "%s{\"t\":%lld,\"pass\":%lld,\"block\":%lld,\"would_block\":%lld,"
                      "\"success\":%lld,\"exception\":%lld,\"rt\":%lld}",
                   k ? "," : "", (long long)r->history[k].unix_ms, (long long)m->pass,
                   (long long)m->block, (long long)m->would_block, (long long)m->success,
                   (long long)m->exception, (long long)(m->success ? m->rt / m->success : 0));
    }
    swctl_printf(b, "]");
    if (r->keyed) {
      swctl_printf(b, ",\"keyed\":{");
      swctl_keyed_json(c, b);
      swctl_printf(b, "}");
    }
    swctl_printf(b, "}");
  }
}

void swctl_api_series(swctl *c, swctl_buf *b) {
  int64_t offset = c->wall_offset;
  swctl_printf(b, "{\"segments\":[");
  int first = 1;
  for (swctl *s = c; s; s = s->next) {
    if (swctl_is_host(s)) continue;
    if (!first) swctl_append(b, ",", 1);
    first = 0;
    swctl_json_str(b, s->segment_name);
    offset = s->wall_offset;
  }
  swctl_printf(b, "],\"now\":%lld,\"resources\":[", (long long)(sw_now_ms() + offset));
  first = 1;
  for (swctl *s = c; s; s = s->next) resources(s, b, &first);
  swctl_printf(b, "],\"breakers\":[");
  first = 1;
  for (swctl *s = c; s; s = s->next) {
    if (s->breaker == NULL) continue;
    swctl_printf(b, "%s{\"segment\":", first ? "" : ",");
    first = 0;
    swctl_json_str(b, s->segment_name);
    swctl_append(b, ",", 1);
    swctl_breaker_json(s, b);
    swctl_append(b, "}", 1);
  }
  swctl_printf(b, "]}\n");
}
