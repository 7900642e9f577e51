/* SPDX-License-Identifier: Apache-2.0 */
/* Traffic for tests/observability/rules.sh: a live rule change under load.
 *
 *   rules_fixture SEGMENT create       a segment (capacity 4) with "hot",
 *                                      1000 per second; prints "ready"
 *   rules_fixture SEGMENT work MS      enter "hot" about every 0.2 ms for MS
 *                                      ms, then print one line per whole
 *                                      second it saw: "second PASS BLOCK",
 *                                      and "total ENTRIES"
 *   rules_fixture SEGMENT now          print the window clock (ms)
 *   rules_fixture SEGMENT counted      print "counted PASS BLOCK": what the
 *                                      segment counted for "hot" over the
 *                                      last minute */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sw/sw.h>

#define SECONDS_MAX 120

int main(int argc, char **argv) {
  if (argc < 3) return 2;
  const char *name = argv[1], *what = argv[2];
  if (strcmp(what, "now") == 0) {
    printf("%lld\n", (long long)sw_now_ms());
    return 0;
  }
  sw_segment *seg;
  sw_options *o;
  sw_options_create(&o);
  sw_options_set_double(o, SW_OPT_THRESHOLD, 1000);
  int rc = sw_segment_open(&seg, name, 4, o, strcmp(what, "create") == 0 ? SW_SEGMENT_RESET : 0);
  sw_options_free(o);
  sw_limiter *hot = NULL;
  if (rc == SW_OK) rc = sw_registry_get(sw_segment_registry(seg), "hot", &hot);
  if (rc != SW_OK) {
    fprintf(stderr, "rules_fixture: %s\n", sw_last_error());
    return 1;
  }
  if (strcmp(what, "create") == 0) {
    puts("ready");
  } else if (strcmp(what, "counted") == 0) {
    sw_metric_record recs[64];
    /* after the second in progress: the records are of whole seconds */
    int64_t wait = 1000 - sw_now_ms() % 1000 + 20;
    struct timespec ts = {0, wait * 1000000};
    nanosleep(&ts, NULL);
    int64_t now = sw_now_ms(), pass = 0, block = 0;
    int n = sw_node_metrics_at(sw_limiter_node(hot), now, now - 61000, recs, 64);
    for (int i = 0; i < n; i++) {
      pass += recs[i].pass;
      block += recs[i].block;
    }
    printf("counted %lld %lld\n", (long long)pass, (long long)block);
  } else if (strcmp(what, "work") == 0 && argc > 3) {
    int64_t start = sw_now_ms(), end = start + atoll(argv[3]), entries = 0;
    int64_t first = start / 1000;
    static int64_t pass[SECONDS_MAX], block[SECONDS_MAX];
    for (int64_t t = start; t < end; t = sw_now_ms()) {
      sw_decision d;
      if (sw_limiter_entry_at(hot, t, 1, SW_ENTRY_NO_EXIT, &d) != SW_OK) {
        fprintf(stderr, "rules_fixture: %s\n", sw_last_error());
        return 1;
      }
      int64_t s = t / 1000 - first; /* the second it was counted in */
      if (s >= 0 && s < SECONDS_MAX) (d.verdict == SW_VERDICT_BLOCK ? block : pass)[s]++;
      entries++;
      struct timespec ts = {0, 200000};
      nanosleep(&ts, NULL);
    }
    for (int64_t s = 0; s < SECONDS_MAX; s++)
      if (pass[s] || block[s])
        printf("second %lld %lld %lld\n", (long long)((first + s) * 1000), (long long)pass[s],
               (long long)block[s]);
    printf("total %lld\n", (long long)entries);
  } else {
    return 2;
  }
  sw_segment_close(seg);
  return 0;
}
