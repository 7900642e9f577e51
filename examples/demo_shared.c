/* SPDX-License-Identifier: Apache-2.0 */
/* One limit shared by processes: four worker processes each try 30000
 * requests against one limiter of 100000 per second in a shared segment,
 * all at once, at one instant. Strict mode makes check-and-count one
 * atomic step across processes: exactly 100000 are admitted, whatever the
 * interleaving. Usage: demo_shared [SEGMENT] (a segment named here is left
 * in place for swctl; without one, a temporary one is used). */
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sw/sw.h>

#define WORKERS 4
#define TRIES 30000
static int worker(const char *name, int id, int64_t t0, int go, int out) {
  sw_segment *seg;
  sw_limiter *l;
  if (sw_segment_open(&seg, name, 8, NULL, 0) != SW_OK ||
      sw_registry_get(sw_segment_registry(seg), "checkout", &l) != SW_OK) {
    fprintf(stderr, "worker %d: %s\n", id, sw_last_error());
    return 1;
  }
  char start;
  if (read(go, &start, 1) != 1) return 1; /* every worker starts together */
  int passed = 0;
  for (int i = 0; i < TRIES; i++) {
    sw_decision d;
    int64_t t = t0; /* one instant for all: the race is on one window */
    sw_limiter_entry_at(l, t, 1, 0, &d);
    if (d.verdict == SW_VERDICT_PASS) {
      passed++;
      sw_limiter_exit_at(l, t + 2, 2, 1, 0);
    }
  }
  if (write(out, &passed, sizeof passed) != sizeof passed) return 1;
  sw_segment_close(seg);
  return 0;
}

int main(int argc, char **argv) {
  char temp[64];
  snprintf(temp, sizeof temp, "sw-demo-%d", (int)getpid());
  const char *name = argc > 1 ? argv[1] : temp;
  sw_options *o;
  sw_segment *seg;
  sw_limiter *l;
  sw_options_create(&o);
  sw_options_set_double(o, SW_OPT_THRESHOLD, 100000);
  if (sw_segment_open(&seg, name, 8, o, SW_SEGMENT_CREATE | SW_SEGMENT_RESET) != SW_OK ||
      sw_registry_get(sw_segment_registry(seg), "checkout", &l) != SW_OK) {
    fprintf(stderr, "demo_shared: %s\n", sw_last_error());
    return 1;
  }
  int fds[2], go[2];
  if (pipe(fds) < 0 || pipe(go) < 0) return 1;
  int64_t t0 = sw_now_ms();
  for (int i = 0; i < WORKERS; i++)
    if (fork() == 0) _exit(worker(name, i, t0, go[0], fds[1]));
  if (write(go[1], "gogo", WORKERS) != WORKERS) return 1;
  int total = 0;
  for (int i = 0; i < WORKERS; i++) {
    int passed = 0;
    wait(NULL);
    if (read(fds[0], &passed, sizeof passed) == sizeof passed) {
      printf("  process %d: %4d of %d admitted\n", i + 1, passed, TRIES);
      total += passed;
    }
  }
  sw_metric *sec = sw_node_second_metric(sw_limiter_node(l));
  printf("  together: %d of %d admitted (limit 100000 per second); the shared windows "
         "counted %lld passes\n", total, WORKERS * TRIES,
         (long long)sw_metric_pass_at(sec, t0 + 300));
  sw_segment_close(seg);
  if (argc < 2) sw_segment_unlink(name);
  sw_options_free(o);
  return total == 100000 ? 0 : 1;
}
