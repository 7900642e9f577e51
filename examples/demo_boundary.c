/* SPDX-License-Identifier: Apache-2.0 */
/* The seed documents' boundary example, side by side: a limit of 100
 * requests per second, enforced by a fixed one-second window and by libsw's
 * sliding window of two 500 ms windows. Traffic: 20 requests early in the
 * first second, 80 late in it (900..999 ms), 80 early in the next
 * (1000..1099 ms) and 20 late in it. The fixed window admits all 160 of the
 * burst around the boundary; the sliding window keeps every one-second span
 * made of whole windows at 100, and a finer window (10 x 100 ms) tightens
 * the spans in between. Time is simulated (explicit *_at calls), so the
 * output is exact. */
#include <stdio.h>

#include <sw/sw.h>

#define LIMIT 100
#define SPAN 2000

static int arrivals[SPAN]; /* requests arriving in each millisecond */

static void burst(int from_ms, int to_ms, int count) {
  for (int i = 0; i < count; i++) arrivals[from_ms + (to_ms - from_ms) * i / count]++;
}

/* Largest number of admissions in a span [t - 999, t] with t + 1 a multiple
 * of step (step 1: any span). */
static int worst_second(const int *admitted, int step) {
  int worst = 0, sum = 0;
  for (int t = 0; t < SPAN; t++) {
    sum += admitted[t] - (t >= 1000 ? admitted[t - 1000] : 0);
    if ((t + 1) % step == 0) worst = sum > worst ? sum : worst;
  }
  return worst;
}

/* Offer every arrival to a libsw sliding window of the given geometry. */
static int run_sliding(int32_t sample_count, int *admitted) {
  sw_metric *m;
  if (sw_metric_create(&m, sample_count, 1000, NULL) != SW_OK) {
    fprintf(stderr, "sw_metric_create: %s\n", sw_last_error());
    return -1;
  }
  for (int t = 0; t < SPAN; t++)
    for (int r = 0; r < arrivals[t]; r++)
      admitted[t] += sw_metric_try_pass_at(m, 1000000 + t, 1, LIMIT, NULL) == 1;
  sw_metric_free(m);
  return 0;
}

int main(void) {
  burst(0, 100, 20);
  burst(900, 1000, 80);
  burst(1000, 1100, 80);
  burst(1900, 2000, 20);

  static int fixed[SPAN], coarse[SPAN], fine[SPAN];
  int fixed_count = 0, fixed_second = -1;
  for (int t = 0; t < SPAN; t++) {
    for (int r = 0; r < arrivals[t]; r++) {
      if (t / 1000 != fixed_second) { /* fixed window: a counter reset every second */
        fixed_second = t / 1000;
        fixed_count = 0;
      }
      if (fixed_count < LIMIT) {
        fixed_count++;
        fixed[t]++;
      }
    }
  }
  if (run_sliding(2, coarse) < 0 || run_sliding(10, fine) < 0) return 1;

  printf("limit %d requests/second\n"
         "  fixed    one counter per calendar second\n"
         "  libsw    sliding window, 2 x 500 ms (Sentinel's default)\n"
         "  libsw10  sliding window, 10 x 100 ms\n\n", LIMIT);
  printf("  time (ms)    arrived  fixed  libsw  libsw10\n");
  int total[4] = {0, 0, 0, 0};
  for (int row = 0; row < SPAN; row += 100) {
    int a = 0, f = 0, c = 0, n = 0;
    for (int t = row; t < row + 100; t++) {
      a += arrivals[t];
      f += fixed[t];
      c += coarse[t];
      n += fine[t];
    }
    total[0] += a;
    total[1] += f;
    total[2] += c;
    total[3] += n;
    if (a == 0) continue;
    printf("  %4d-%4d      %3d     %3d    %3d    %3d   ", row, row + 99, a, f, c, n);
    for (int i = 0; i < c / 4; i++) putchar('#');
    for (int i = c / 4; i < f / 4; i++) putchar('+');
    putchar('\n');
  }
  printf("  total          %3d     %3d    %3d    %3d\n", total[0], total[1], total[2],
         total[3]);
  printf("  (# admitted by libsw, + admitted only by the fixed window)\n\n");
  printf("most admitted in one second      fixed  libsw  libsw10\n");
  printf("  spans of whole 500 ms windows   %3d    %3d    %3d\n", worst_second(fixed, 500),
         worst_second(coarse, 500), worst_second(fine, 500));
  printf("  spans of whole 100 ms windows   %3d    %3d    %3d\n", worst_second(fixed, 100),
         worst_second(coarse, 100), worst_second(fine, 100));
  printf("  any span, to the millisecond    %3d    %3d    %3d\n", worst_second(fixed, 1),
         worst_second(coarse, 1), worst_second(fine, 1));
  return worst_second(coarse, 500) <= LIMIT && worst_second(fine, 100) <= LIMIT ? 0 : 1;
}
