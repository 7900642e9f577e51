/* The dashboard's data: /api/series, every resource's last minute (and a
 * keyed table's totals, keys and top keys). */
#include "swctl.h"

void swctl_api_series(swctl *c, swctl_buf *b) {
  swctl_printf(b, "{\"segment\":");
  swctl_json_str(b, c->segment_name);
  swctl_printf(b, ",\"now\":%lld,\"resources\":[", (long long)(sw_now_ms() + c->wall_offset));
  int first = 1;
  if (c->breaker) {
    swctl_printf(b, "],\"breaker\":{");
    swctl_breaker_json(c, b);
    swctl_printf(b, "}}\n");
    return;
  }
  for (int i = 0; i < c->nres; i++) {
    const swctl_resource *r = &c->res[i];
    if (!swctl_readable(r)) continue;
    swctl_printf(b, "%s{\"name\":", first ? "" : ",");
    first = 0;
    swctl_json_str(b, r->name);
    swctl_printf(b, ",\"rule\":\"%s\",\"threshold\":%.17g,\"dry_run\":%lld,"
                    "\"concurrency\":%lld,\"waiting\":%lld,\"pass_qps\":%.3f,"
                    "\"block_qps\":%.3f,\"series\":[",
                 swctl_rule_name(r->grade, r->behavior), r->threshold, (long long)r->dry_run,
                 (long long)r->concurrency, (long long)r->waiting, r->pass_qps, r->block_qps);
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
  swctl_printf(b, "]}\n");
}
