/* SPDX-License-Identifier: Apache-2.0 */
/* Random-kill stress of a shared breaker (issue 24): 4 worker processes
 * share one breaker segment and call through it as fast as they can, each
 * call good or bad at random; this driver SIGKILLs one of them at random
 * moments (and, one time in eight, SIGSTOPs it for a random while first)
 * and starts it again. A wedge is a breaker that refuses everyone for
 * longer than open_for + probe_timeout + a margin: a worker refused at t
 * when every entry since the streak began was refused. The driver then
 * counts it, resets the segment and starts every worker again.
 *
 * Usage: breaker_kill [--kills N] [--seconds S] [--calls HALF_OPEN_CALLS]
 *                     [--open-ms MS] [--probe-timeout-ms MS]
 * Prints one line of key=value figures (bench-like); exits 1 on a wedge. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sw/sw.h>

#define NWORKERS 4
static int OPEN_MS = 50, PROBE_TIMEOUT_MS = 100;
#define MARGIN_MS 1000 /* scheduling on a loaded machine, never the breaker's own time */

typedef struct shared {
  _Atomic int64_t streak_start; /* the first refusal since the last pass, 0: none */
  _Atomic int wedged;           /* a worker saw a refusal streak past the bound */
  _Atomic int64_t wedge_len;
  _Atomic int64_t wedge_retry;
  _Atomic int64_t calls;
} shared;

static char g_name[64];
static int g_calls = 1;

static sw_options *rule(void) {
  sw_options *o;
  if (sw_options_create(&o) != SW_OK) abort();
  sw_options_set(o, SW_OPT_BREAKER_STRATEGY, SW_BREAKER_ERROR_RATIO);
  sw_options_set_double(o, SW_OPT_BREAKER_COUNT, 0.3);
  sw_options_set(o, SW_OPT_BREAKER_MIN_REQUESTS, 5);
  sw_options_set(o, SW_OPT_BREAKER_STAT_INTERVAL_MS, 100);
  sw_options_set_double(o, SW_OPT_BREAKER_TIME_WINDOW_SEC, OPEN_MS / 1000.0);
  sw_options_set(o, SW_OPT_BREAKER_PROBE_TIMEOUT_MS, PROBE_TIMEOUT_MS);
  sw_options_set(o, SW_OPT_BREAKER_HALF_OPEN_CALLS, g_calls);
  return o;
}

static void sleep_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&ts, NULL);
}

static void worker(shared *sh) {
  sw_breaker *b;
  sw_options *o = rule();
  if (sw_breaker_open(&b, g_name, o, 0) != SW_OK) {
    fprintf(stderr, "worker: %s\n", sw_last_error());
    _exit(3);
  }
  sw_options_free(o);
  unsigned seed = (unsigned)getpid() ^ (unsigned)time(NULL);
  for (;;) {
    const int64_t t = sw_now_ms();
    sw_decision d;
    if (sw_breaker_entry_at(b, t, &d) != SW_OK) {
      fprintf(stderr, "worker: entry: %s\n", sw_last_error());
      _exit(4);
    }
    atomic_fetch_add_explicit(&sh->calls, 1, memory_order_relaxed);
    if (d.verdict == SW_VERDICT_BLOCK) {
      int64_t none = 0;
      if (!atomic_compare_exchange_strong(&sh->streak_start, &none, t) &&
          t - none > OPEN_MS + PROBE_TIMEOUT_MS + MARGIN_MS && !atomic_load(&sh->wedged)) {
        atomic_store(&sh->wedge_len, t - none);
        atomic_store(&sh->wedge_retry, d.retry_after_ms);
        atomic_store(&sh->wedged, 1);
      }
      sleep_us(200);
      continue;
    }
    atomic_store(&sh->streak_start, 0);
    /* the upstream: bad one time in three, a probe one time in two */
    const int bad = d.probe ? rand_r(&seed) % 2 : rand_r(&seed) % 3 == 0;
    if (rand_r(&seed) % 8 == 0) sleep_us(rand_r(&seed) % 300);
    if (sw_breaker_exit_at(b, sw_now_ms(), &d, 1, bad ? SW_EXIT_ERROR : 0) != SW_OK) {
      fprintf(stderr, "worker: exit: %s\n", sw_last_error());
      _exit(5);
    }
  }
}

static pid_t spawn(shared *sh) {
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    perror("fork");
    exit(2);
  }
  if (pid == 0) worker(sh);
  return pid;
}

static int64_t transitions(sw_breaker *b) {
  sw_breaker_info in;
  if (sw_breaker_stats_at(b, sw_now_ms(), &in) != SW_OK) return 0;
  return in.opened + in.half_opened + in.closed + in.reopened;
}

static sw_breaker *reset(void) {
  sw_breaker *b;
  sw_options *o = rule();
  if (sw_breaker_open(&b, g_name, o, SW_SEGMENT_RESET) != SW_OK) {
    fprintf(stderr, "driver: %s\n", sw_last_error());
    exit(2);
  }
  sw_options_free(o);
  return b;
}

int main(int argc, char **argv) {
  long kills_wanted = 0;
  double seconds = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--kills") == 0) kills_wanted = atol(argv[i + 1]);
    else if (strcmp(argv[i], "--seconds") == 0) seconds = atof(argv[i + 1]);
    else if (strcmp(argv[i], "--calls") == 0) g_calls = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--open-ms") == 0) OPEN_MS = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--probe-timeout-ms") == 0) PROBE_TIMEOUT_MS = atoi(argv[i + 1]);
  }
  if ((kills_wanted <= 0 && seconds <= 0) || g_calls < 1 || g_calls > 32 || OPEN_MS < 1 ||
      PROBE_TIMEOUT_MS < 1) {
    fprintf(stderr, "usage: %s [--kills N] [--seconds S] [--calls 1..32] [--open-ms MS] "
            "[--probe-timeout-ms MS]\n", argv[0]);
    return 2;
  }
  snprintf(g_name, sizeof g_name, "swstress-breaker-%d", (int)getpid());
  shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (sh == MAP_FAILED) return 2;
  memset(sh, 0, sizeof *sh);
  sw_breaker *b = reset();
  pid_t kids[NWORKERS];
  for (int i = 0; i < NWORKERS; i++) kids[i] = spawn(sh);
  unsigned seed = (unsigned)getpid();
  long kills = 0, pauses = 0, wedges = 0;
  int64_t trans = 0, max_wedge = 0, calls = 0;
  const int64_t t0 = sw_now_ms();
  for (;;) {
    const double elapsed = (double)(sw_now_ms() - t0) / 1000.0;
    if ((kills_wanted > 0 && kills >= kills_wanted) || (seconds > 0 && elapsed >= seconds)) break;
    sleep_us(1000 + rand_r(&seed) % 9000);
    const int v = rand_r(&seed) % NWORKERS;
    if (rand_r(&seed) % 8 == 0) { /* a pause, up to open_for + probe_timeout, then death */
      kill(kids[v], SIGSTOP);
      sleep_us((rand_r(&seed) % (OPEN_MS + PROBE_TIMEOUT_MS)) * 1000L);
      pauses++;
    }
    kill(kids[v], SIGKILL);
    waitpid(kids[v], NULL, 0);
    kills++;
    kids[v] = spawn(sh);
    for (int i = 0; i < NWORKERS; i++) { /* a worker that failed by itself */
      int status;
      if (waitpid(kids[i], &status, WNOHANG) == kids[i]) {
        fprintf(stderr, "driver: worker exited by itself (status %d)\n", status);
        return 2;
      }
    }
    if (atomic_load(&sh->wedged)) {
      wedges++;
      if (atomic_load(&sh->wedge_len) > max_wedge) max_wedge = atomic_load(&sh->wedge_len);
      sw_breaker_info in;
      sw_breaker_stats_at(b, sw_now_ms(), &in);
      fprintf(stderr,
              "wedge %ld after %ld kills: refused for %lld ms (retry after %lld), state %d, "
              "%lld probes in flight\n",
              wedges, kills, (long long)atomic_load(&sh->wedge_len),
              (long long)atomic_load(&sh->wedge_retry), in.state, (long long)in.probes_in_flight);
      for (int i = 0; i < NWORKERS; i++) {
        kill(kids[i], SIGKILL);
        waitpid(kids[i], NULL, 0);
      }
      trans += transitions(b);
      sw_breaker_free(b);
      b = reset();
      atomic_store(&sh->streak_start, 0);
      atomic_store(&sh->wedged, 0);
      for (int i = 0; i < NWORKERS; i++) kids[i] = spawn(sh);
    }
  }
  for (int i = 0; i < NWORKERS; i++) {
    kill(kids[i], SIGKILL);
    waitpid(kids[i], NULL, 0);
  }
  trans += transitions(b);
  calls = atomic_load(&sh->calls);
  sw_breaker_free(b);
  sw_segment_unlink(g_name);
  printf("case=breaker_random_kill workers=%d half_open_calls=%d open_ms=%d probe_timeout_ms=%d "
         "margin_ms=%d seconds=%.1f kills=%ld pauses=%ld calls=%lld transitions=%lld wedges=%ld "
         "longest_wedge_ms=%lld\n",
         NWORKERS, g_calls, OPEN_MS, PROBE_TIMEOUT_MS, MARGIN_MS,
         (double)(sw_now_ms() - t0) / 1000.0, kills, pauses, (long long)calls, (long long)trans,
         wedges, (long long)max_wedge);
  return wedges == 0 ? 0 : 1;
}
