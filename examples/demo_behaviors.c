/* SPDX-License-Identifier: Apache-2.0 */
/* Reject, pacing and warm-up side by side: three limiters with the same
 * threshold (20 per second) receive the same simulated traffic, and the
 * table shows, per 100 ms, what each one lets through. Pacing admissions are
 * shown when they proceed (after their wait); warm-up starts cold after a
 * quiet period and ramps up to the threshold over its warm-up period.
 * Time is simulated (explicit *_at calls), so the output is exact. */
#include <stdio.h>
#include <string.h>

#include <sw/sw.h>

#define THRESHOLD 20
#define STEP 100   /* ms per row */
#define ROWS 60    /* 6 seconds */
#define T0 1000000 /* simulated start time, ms */

enum { REJECT, PACING, WARM_UP, KINDS };
static const char *const names[KINDS] = {"reject", "pacing", "warm-up"};

/* Offered load per 100 ms: 2 (20/s) for a second, a burst of 12 (120/s) for
 * half a second, then a steady 5 (50/s). */
static int offered(int row) { return row < 10 ? 2 : row < 15 ? 12 : 5; }

static sw_limiter *make(int behavior) {
  sw_options *o;
  sw_limiter *l = NULL;
  sw_options_create(&o);
  sw_options_set(o, SW_OPT_BEHAVIOR, behavior);
  sw_options_set_double(o, SW_OPT_THRESHOLD, THRESHOLD);
  sw_options_set(o, SW_OPT_MAX_QUEUE_MS, 500);
  sw_options_set(o, SW_OPT_WARM_UP_SEC, 4);
  if (sw_limiter_create(&l, o) != SW_OK) fprintf(stderr, "%s\n", sw_last_error());
  sw_options_free(o);
  return l;
}

int main(void) {
  const int behaviors[KINDS] = {SW_BEHAVIOR_REJECT, SW_BEHAVIOR_PACING, SW_BEHAVIOR_WARM_UP};
  sw_limiter *lim[KINDS];
  for (int k = 0; k < KINDS; k++)
    if ((lim[k] = make(behaviors[k])) == NULL) return 1;

  int admitted[KINDS][ROWS + 10], blocked[KINDS] = {0}, total[KINDS] = {0};
  memset(admitted, 0, sizeof admitted);
  for (int row = 0; row < ROWS; row++) {
    int n = offered(row);
    for (int i = 0; i < n; i++) {
      int64_t t = T0 + (int64_t)row * STEP + i * STEP / n;
      for (int k = 0; k < KINDS; k++) {
        sw_decision d;
        sw_limiter_entry_at(lim[k], t, 1, 0, &d);
        if (d.verdict == SW_VERDICT_BLOCK) {
          blocked[k]++;
          continue;
        }
        int64_t go = t + d.wait_ms; /* when the request proceeds */
        admitted[k][(go - T0) / STEP]++;
        total[k]++;
        sw_limiter_exit_at(lim[k], go, 5, 1, 0);
      }
    }
  }

  printf("threshold %d/s for all three; each row is 100 ms of simulated time\n", THRESHOLD);
  printf("pacing queues up to 500 ms; warm-up: 4 s from cold, cold factor 3\n\n");
  printf(" time(s) offered  reject pacing warm-up   reject    pacing    warm-up\n");
  for (int row = 0; row < ROWS; row++) {
    printf("  %4.1f     %3d     %3d    %3d    %3d     ", row * STEP / 1000.0, offered(row),
           admitted[REJECT][row], admitted[PACING][row], admitted[WARM_UP][row]);
    for (int k = 0; k < KINDS; k++) {
      int bar = admitted[k][row];
      for (int i = 0; i < 10; i++) putchar(i < bar ? '#' : ' ');
    }
    putchar('\n');
  }
  printf("\n");
  for (int k = 0; k < KINDS; k++)
    printf("%-8s admitted %3d, blocked %3d\n", names[k], total[k], blocked[k]);
  for (int k = 0; k < KINDS; k++) sw_limiter_free(lim[k]);
  return 0;
}
