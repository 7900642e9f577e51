/* SPDX-License-Identifier: Apache-2.0 */
/* A limiter around a function: at most 50 calls per second, paced (evenly
 * spaced, queueing up to 100 ms) — the C equivalent of a rate-limit
 * decorator. Uses the real clock. */
#include <stdio.h>
#include <time.h>

#include <sw/sw.h>

static int work(int i) { return i * i; } /* the function being limited */

static void sleep_ms(int64_t ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
  nanosleep(&ts, NULL);
}

/* Call work(i) under the limiter: -1 if refused. */
static int limited_work(sw_limiter *lim, int i, int *result) {
  sw_decision d;
  if (sw_limiter_entry(lim, 1, 0, &d) != SW_OK) return -1;
  if (d.verdict == SW_VERDICT_BLOCK) return -1;
  if (d.verdict == SW_VERDICT_WAIT) sleep_ms(d.wait_ms); /* the caller waits, never libsw */
  int64_t start = sw_now_ns(); /* a response time: the precise clock */
  *result = work(i);
  sw_limiter_exit(lim, (sw_now_ns() - start) / 1000000, 1, 0);
  return 0;
}

int main(void) {
  sw_options *o;
  sw_limiter *lim;
  sw_options_create(&o);
  sw_options_set(o, SW_OPT_BEHAVIOR, SW_BEHAVIOR_PACING);
  sw_options_set_double(o, SW_OPT_THRESHOLD, 50); /* one call every 20 ms */
  sw_options_set(o, SW_OPT_MAX_QUEUE_MS, 100);
  if (sw_limiter_create(&lim, o) != SW_OK) {
    fprintf(stderr, "sw_limiter_create: %s\n", sw_last_error());
    return 1;
  }
  sw_options_free(o);
  int done = 0, refused = 0;
  int64_t start = sw_now_ns();
  for (int i = 0; i < 8; i++) {
    int r;
    if (limited_work(lim, i, &r) == 0)
      done++;
    else
      refused++;
  }
  int64_t took = (sw_now_ns() - start) / 1000000;
  printf("8 calls in a row at 50/s, queueing up to 100 ms: %d done in %lld ms, %d refused\n",
         done, (long long)took, refused);
  sw_limiter_free(lim);
  return done >= 1 ? 0 : 1;
}
