/* SPDX-License-Identifier: Apache-2.0 */
/* Print a node's per-second metrics the way Sentinel's metric log does
 * (timestamp|resource|passQps|blockQps|successQps|exceptionQps|rt|occupiedPassQps),
 * from simulated traffic on a limiter of 5 requests per second. */
#include <stdio.h>

#include <sw/sw.h>

#define T0 1700000000000LL /* simulated time, ms */

int main(void) {
  sw_options *o;
  sw_limiter *lim;
  sw_options_create(&o);
  sw_options_set_double(o, SW_OPT_THRESHOLD, 5);
  if (sw_limiter_create(&lim, o) != SW_OK) {
    fprintf(stderr, "sw_limiter_create: %s\n", sw_last_error());
    return 1;
  }
  sw_options_free(o);
  /* 4 seconds of 8 requests per second, every third one failing, RT 20 ms. */
  for (int s = 0; s < 4; s++)
    for (int i = 0; i < 8; i++) {
      int64_t t = T0 + s * 1000 + i * 120;
      sw_decision d;
      sw_limiter_entry_at(lim, t, 1, 0, &d);
      if (d.verdict != SW_VERDICT_BLOCK)
        sw_limiter_exit_at(lim, t + 20, 20, 1, i % 3 == 0 ? SW_EXIT_ERROR : 0);
    }
  sw_metric_record rec[60];
  int n = sw_node_metrics_at(sw_limiter_node(lim), T0 + 4500, 0, rec, 60);
  for (int i = 0; i < n && i < 60; i++)
    printf("%lld|demo|%lld|%lld|%lld|%lld|%lld|%lld\n", (long long)rec[i].start_ms,
           (long long)rec[i].pass, (long long)rec[i].block, (long long)rec[i].success,
           (long long)rec[i].exception,
           (long long)(rec[i].success ? rec[i].rt / rec[i].success : rec[i].rt),
           (long long)rec[i].occupied_pass);
  sw_limiter_free(lim);
  return n == 4 ? 0 : 1;
}
