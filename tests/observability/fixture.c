/* SPDX-License-Identifier: Apache-2.0 */
/* A segment with known traffic for the observability tests:
 *   api    threshold 10: in the second that ended two seconds ago,
 *          12 entries -> 10 pass, 2 block; 10 exits, RT 20 ms, 3 of them failing
 *   shadow dry-run, threshold 1: 4 entries -> 4 pass, 3 would block
 * Then, with "keep", it goes on making one entry per 10 ms on "steady"
 * (threshold 1000) until killed, and prints a dot to stdout every 100
 * entries it made (so a test can see the limiter keeps working).
 * With EXTRA, the segment also holds EXTRA idle resources with long names
 * (a large /metrics: about 1.5 KB each).
 * Usage: fixture SEGMENT [keep [EXTRA]] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sw/sw.h>

static sw_limiter *get(sw_registry *reg, const char *name, double threshold, int dry_run) {
  sw_options *o;
  sw_limiter *l = NULL;
  sw_options_create(&o);
  sw_options_set_double(o, SW_OPT_THRESHOLD, threshold);
  sw_options_set(o, SW_OPT_DRY_RUN, dry_run);
  if (sw_registry_get_ex(reg, name, o, &l) != SW_OK) fprintf(stderr, "%s\n", sw_last_error());
  sw_options_free(o);
  return l;
}

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  int extra = argc > 3 ? atoi(argv[3]) : 0;
  sw_segment *seg;
  sw_options *geo;
  sw_options_create(&geo);
  sw_options_set(geo, SW_OPT_STRIPES, 1); /* small limiters: EXTRA may be thousands */
  if (sw_segment_open(&seg, argv[1], 16 + (uint32_t)extra, geo,
                      SW_SEGMENT_CREATE | SW_SEGMENT_RESET) != SW_OK) {
    fprintf(stderr, "fixture: %s\n", sw_last_error());
    return 1;
  }
  sw_registry *reg = sw_segment_registry(seg);
  sw_limiter *api = get(reg, "api", 10, 0), *shadow = get(reg, "shadow", 1, 1);
  sw_limiter *steady = get(reg, "steady", 1000, 0);
  if (!api || !shadow || !steady) return 1;
  for (int i = 0; i < extra; i++) {
    char name[64];
    snprintf(name, sizeof name, "idle-resource-with-a-long-name-for-a-large-exposition-%06d", i % 1000000);
    if (get(reg, name, 100, 0) == NULL) return 1;
  }
  sw_options_free(geo);
  int64_t now = sw_now_ms(), second = now - now % 1000 - 2000;
  sw_decision d;
  for (int i = 0; i < 12; i++) {
    sw_limiter_entry_at(api, second + 10 * i, 1, 0, &d);
    if (d.verdict != SW_VERDICT_BLOCK)
      sw_limiter_exit_at(api, second + 10 * i + 5, 20, 1, i < 3 ? SW_EXIT_ERROR : 0);
  }
  for (int i = 0; i < 4; i++) {
    sw_limiter_entry_at(shadow, second + 100 + i, 1, 0, &d);
    sw_limiter_exit_at(shadow, second + 101 + i, 1, 1, 0);
  }
  printf("ready\n");
  fflush(stdout);
  if (argc > 2 && strcmp(argv[2], "keep") == 0) {
    for (long k = 1;; k++) {
      sw_limiter_entry(steady, 1, 0, &d);
      if (d.verdict != SW_VERDICT_BLOCK) sw_limiter_exit(steady, 1, 1, 0);
      if (k % 100 == 0) {
        putchar('.');
        fflush(stdout);
      }
      struct timespec ts = {0, 10000000};
      nanosleep(&ts, NULL);
    }
  }
  sw_segment_close(seg);
  return 0;
}
