/* SPDX-License-Identifier: Apache-2.0 */
/* A circuit breaker with known numbers for tests/observability/breaker.sh:
 * error ratio over 50% of at least 4 completions in a day-long interval,
 * open for 10 minutes. 2 good and 3 failed calls open it (3 of 5), then 2
 * entries are refused. The segment stays for swctl.
 * Usage: breaker_fixture SEGMENT */
#include <stdio.h>

#include <sw/sw.h>

int main(int argc, char **argv) {
  if (argc != 2) return 2;
  sw_options *o;
  sw_breaker *b;
  sw_decision d;
  sw_options_create(&o);
  sw_options_set(o, SW_OPT_BREAKER_STRATEGY, SW_BREAKER_ERROR_RATIO);
  sw_options_set_double(o, SW_OPT_BREAKER_COUNT, 0.5);
  sw_options_set(o, SW_OPT_BREAKER_MIN_REQUESTS, 4);
  sw_options_set(o, SW_OPT_BREAKER_STAT_INTERVAL_MS, 86400000);
  sw_options_set_double(o, SW_OPT_BREAKER_TIME_WINDOW_SEC, 600);
  if (sw_breaker_open(&b, argv[1], o, SW_SEGMENT_RESET) < 0) {
    fprintf(stderr, "breaker_fixture: %s\n", sw_last_error());
    return 1;
  }
  sw_options_free(o);
  for (int i = 0; i < 5; i++) {
    sw_breaker_entry(b, &d);
    sw_breaker_exit(b, &d, 7, i >= 2 ? SW_EXIT_ERROR : 0);
  }
  for (int i = 0; i < 2; i++) sw_breaker_entry(b, &d);
  printf("ready verdict=%d\n", d.verdict);
  sw_breaker_free(b);
  return d.verdict == SW_VERDICT_BLOCK ? 0 : 1;
}
