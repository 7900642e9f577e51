/* SPDX-License-Identifier: Apache-2.0 */
/* Cluster rules on Redis (issue 8).
 *
 * Usage:
 *   bench_cluster hot local|cluster OPS
 *       check-and-count cost of a cluster rule admitting from a full lease
 *       against the same rule without SW_OPT_CLUSTER (no Redis involved: the
 *       lease comes from a fake reply). ns per entry; under callgrind count
 *       only run_case (see bench/run.sh). Both use 2 x 5 s buckets, so that a
 *       slow run (valgrind) stays in one bucket of the lease.
 *   bench_cluster calls HOST:PORT L OPS
 *       Redis calls per 100k admissions with lease size L: one process, a
 *       budget that is never reached, entries as fast as the lease allows.
 *   bench_cluster share HOST:PORT THRESHOLD L SECONDS
 *       2 processes, each offering 0.8 x THRESHOLD per second (1.6 x the
 *       fleet's limit) for SECONDS: admissions per window of 2 buckets of
 *       Redis time, overshoot and undershoot of the budget, Redis calls.
 *   bench_cluster edges kill|stop local|open|closed THRESHOLD L OFFERED_X [RUNS]
 *       the failure and recovery edges: a redis-server of its own, 2
 *       processes (2 nodes) offering OFFERED_X x THRESHOLD per second in all;
 *       Redis is killed (then restarted empty on the same port) or stopped
 *       (then continued) 1.5 s in, for 2 s; 2 s more after it is back. The
 *       most admitted in a window of 2 buckets of Redis time before the
 *       failure, while down, and in the windows that hold the recovery or
 *       follow it (2 s), RUNS times (default 5).
 *   bench_cluster first HOST:PORT QPS L [RUNS]
 *       the first second of a process (issue 13, item 7): a new limiter and
 *       sw_cluster (1 node, local fallback) offered a burst of 2 x QPS entries
 *       the moment they are made (before Redis has answered), then an entry
 *       every 0.5 ms; admissions per 250 ms of local time for 2 s, per bucket
 *       of Redis time, and the most in a window of 2 buckets of Redis time. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sw/sw.h>

#include "../tests/redis_fixture.h"

__attribute__((noinline)) long run_case(sw_limiter *l, long ops);
__attribute__((noinline)) long run_case(sw_limiter *l, long ops) {
  sw_decision d;
  long passed = 0;
  for (long i = 0; i < ops; i++) {
    sw_limiter_entry(l, 1, 0, &d);
    passed += d.verdict == SW_VERDICT_PASS;
  }
  return passed;
}

static int64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_ms(int64_t ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static void sleep_until_ns(int64_t due) {
  struct timespec ts = {(time_t)(due / 1000000000), (long)(due % 1000000000)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
  }
}

static void die(const char *what) {
  fprintf(stderr, "%s: %s\n", what, sw_last_error());
  exit(1);
}

static sw_options *cluster_opts(double threshold, int64_t lease) {
  sw_options *o;
  if (sw_options_create(&o)) die("options");
  sw_options_set_double(o, SW_OPT_THRESHOLD, threshold);
  sw_options_set(o, SW_OPT_CLUSTER, 1);
  sw_options_set(o, SW_OPT_CLUSTER_LEASE, lease);
  sw_options_set(o, SW_OPT_CLUSTER_NODES, 2);
  return o;
}

static int wait_up(sw_limiter *l, int64_t ms) {
  for (int64_t end = sw_now_ms() + ms; sw_now_ms() < end; sleep_ms(1)) {
    sw_lease_info in;
    sw_lease_stats(l, sw_now_ms(), &in);
    if (in.up) return 1;
  }
  return 0;
}

/* ------------------------------------------------------------------ hot */

static int bench_hot(int cluster, long ops) {
  sw_options *o;
  sw_options_create(&o);
  sw_options_set_double(o, SW_OPT_THRESHOLD, 1e15);
  sw_options_set(o, SW_OPT_SECOND_INTERVAL_MS, 10000); /* 2 x 5 s buckets */
  sw_options_set(o, SW_OPT_SECOND_SAMPLE_COUNT, 2);
  if (cluster) {
    sw_options_set(o, SW_OPT_CLUSTER, 1);
    sw_options_set(o, SW_OPT_CLUSTER_LEASE, 1000000000);
  }
  sw_limiter *l;
  if (sw_limiter_create(&l, o)) die("limiter");
  if (cluster) { /* a full lease: a fake reply, Redis time at a bucket's start */
    sw_lease_call call;
    int64_t t = sw_now_ms(), bucket = INT64_C(1700000000000);
    if (sw_lease_next_call(l, t, &call) != 1 ||
        sw_lease_apply(l, t, &call, bucket, call.want, bucket))
      die("lease");
  }
  int64_t t0 = mono_ns();
  long passed = run_case(l, ops);
  double dt = (double)(mono_ns() - t0);
  printf("rule=%s ops=%ld ns_per_entry=%.1f passed=%ld\n", cluster ? "cluster" : "local", ops,
         dt / (double)ops, passed);
  sw_limiter_free(l);
  sw_options_free(o);
  return passed == ops ? 0 : 1;
}

/* ---------------------------------------------------------------- calls */

static int bench_calls(const char *addr, int64_t lease, long ops) {
  sw_options *o = cluster_opts(1e9, lease);
  sw_limiter *l;
  sw_cluster *c;
  char resource[64];
  snprintf(resource, sizeof resource, "bench-calls-%d-%lld", (int)getpid(), (long long)lease);
  if (sw_limiter_create(&l, o)) die("limiter");
  if (sw_cluster_create(&c, addr, o) || sw_cluster_add(c, l, resource) || sw_cluster_start(c))
    die("cluster");
  if (!wait_up(l, 5000)) die("lease not up");
  sw_lease_info a, b;
  sw_lease_stats(l, sw_now_ms(), &a);
  int64_t rt0 = sw_cluster_round_trips(c), t0 = mono_ns();
  long admitted = 0, blocked = 0;
  sw_decision d;
  while (admitted < ops) {
    sw_limiter_entry(l, 1, 0, &d);
    if (d.verdict == SW_VERDICT_PASS) admitted++;
    else blocked++;
  }
  double dt = (double)(mono_ns() - t0) / 1e9;
  sw_lease_stats(l, sw_now_ms(), &b);
  int64_t calls = b.calls - a.calls, rts = sw_cluster_round_trips(c) - rt0;
  printf("lease=%lld admitted=%ld calls=%lld calls_per_100k=%.1f round_trips=%lld "
         "admissions_per_s=%.0f blocked_waiting_for_refill=%ld\n",
         (long long)lease, admitted, (long long)calls, (double)calls * 1e5 / (double)admitted,
         (long long)rts, (double)admitted / dt, blocked);
  sw_cluster_free(c);
  sw_limiter_free(l);
  sw_options_free(o);
  return 0;
}

/* ---------------------------------------------------------------- share */

#define BK 256
typedef struct proc_out {
  int64_t bno[BK], count[BK];
  int64_t offered, admitted, calls, r_start, r_end;
  int rc;
} proc_out;
typedef struct share_mem {
  _Atomic int ready, go;
  proc_out p[2];
} share_mem;

static int share_child(share_mem *m, proc_out *p, const char *addr, const char *resource,
                       double threshold, int64_t lease, double seconds) {
  sw_options *o = cluster_opts(threshold, lease);
  sw_limiter *l;
  sw_cluster *c;
  if (sw_limiter_create(&l, o) || sw_cluster_create(&c, addr, o) ||
      sw_cluster_add(c, l, resource) || sw_cluster_start(c) || !wait_up(l, 5000))
    return 1;
  atomic_fetch_add(&m->ready, 1);
  for (int64_t end = sw_now_ms() + 10000; !atomic_load(&m->go) && sw_now_ms() < end;) sleep_ms(1);
  const int64_t wl = 500; /* default geometry: 2 x 500 ms */
  sw_lease_info a;
  sw_lease_stats(l, sw_now_ms(), &a);
  int64_t calls0 = a.calls;
  const int64_t period = (int64_t)(1e9 / (0.8 * threshold)), t0 = mono_ns();
  for (int64_t i = 0; (double)(i * period) < seconds * 1e9; i++) {
    sleep_until_ns(t0 + i * period);
    int64_t t = sw_now_ms();
    sw_decision d;
    sw_lease_stats(l, t, &a);
    sw_limiter_entry_at(l, t, 1, 0, &d);
    p->offered++;
    if (p->r_start == 0) p->r_start = t + a.offset_ms;
    p->r_end = t + a.offset_ms;
    if (d.verdict != SW_VERDICT_PASS) continue;
    p->admitted++;
    int64_t bno = (t + a.offset_ms) / wl;
    int k = (int)(bno % BK);
    if (p->count[k] && p->bno[k] != bno) return 1;
    p->bno[k] = bno;
    p->count[k]++;
  }
  sw_lease_stats(l, sw_now_ms(), &a);
  p->calls = a.calls - calls0;
  sw_cluster_free(c);
  sw_limiter_free(l);
  sw_options_free(o);
  return 0;
}

static int64_t bucket_count(const share_mem *m, int64_t bno) {
  int64_t n = 0;
  for (int i = 0; i < 2; i++)
    if (m->p[i].bno[bno % BK] == bno) n += m->p[i].count[bno % BK];
  return n;
}

static int bench_share(const char *addr, double threshold, int64_t lease, double seconds) {
  share_mem *m = mmap(NULL, sizeof *m, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return 1;
  memset(m, 0, sizeof *m);
  char resource[64];
  snprintf(resource, sizeof resource, "bench-share-%d", (int)getpid());
  pid_t pid[2], parent = getpid();
  for (int i = 0; i < 2; i++) {
    pid[i] = fork();
    if (pid[i] == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(1);
      m->p[i].rc = share_child(m, &m->p[i], addr, resource, threshold, lease, seconds);
      _exit(0);
    }
  }
  for (int64_t end = sw_now_ms() + 10000; atomic_load(&m->ready) < 2 && sw_now_ms() < end;)
    sleep_ms(1);
  atomic_store(&m->go, 1);
  for (int i = 0; i < 2; i++) waitpid(pid[i], NULL, 0);
  if (m->p[0].rc || m->p[1].rc || m->p[0].admitted == 0) {
    fprintf(stderr, "share: a process failed\n");
    return 1;
  }
  const int64_t wl = 500, budget = (int64_t)threshold; /* per window of 1 s */
  int64_t r0 = m->p[0].r_start > m->p[1].r_start ? m->p[0].r_start : m->p[1].r_start;
  int64_t r1 = m->p[0].r_end < m->p[1].r_end ? m->p[0].r_end : m->p[1].r_end;
  int64_t over_max = 0, windows = 0, under_sum = 0, under_max = 0, over_windows = 0;
  for (int64_t b = r0 / wl - 1; b <= r1 / wl + 1; b++) {
    int64_t w = bucket_count(m, b - 1) + bucket_count(m, b);
    if (w > budget) {
      over_windows++;
      if (w - budget > over_max) over_max = w - budget;
    }
    if ((b - 1) * wl >= r0 && (b + 1) * wl <= r1) { /* a whole window under load */
      windows++;
      int64_t u = budget - w > 0 ? budget - w : 0;
      under_sum += u;
      if (u > under_max) under_max = u;
    }
  }
  int64_t admitted = m->p[0].admitted + m->p[1].admitted;
  int64_t offered = m->p[0].offered + m->p[1].offered;
  int64_t calls = m->p[0].calls + m->p[1].calls;
  printf("threshold=%.0f lease=%lld seconds=%.1f offered=%lld admitted=%lld windows=%lld "
         "overshoot_windows=%lld overshoot_max=%lld undershoot_mean_pct=%.2f "
         "undershoot_max_pct=%.2f calls=%lld calls_per_100k=%.0f\n",
         threshold, (long long)lease, seconds, (long long)offered, (long long)admitted,
         (long long)windows, (long long)over_windows, (long long)over_max,
         windows ? 100.0 * (double)under_sum / (double)windows / (double)budget : 0.0,
         100.0 * (double)under_max / (double)budget, (long long)calls,
         (double)calls * 1e5 / (double)admitted);
  munmap(m, sizeof *m);
  return over_windows ? 2 : 0;
}


/* ---------------------------------------------------------------- first */

static int bench_first(const char *addr, double qps, int64_t lease, int runs) {
  for (int r = 0; r < runs; r++) {
    sw_options *o = cluster_opts(qps, lease);
    sw_options_set(o, SW_OPT_CLUSTER_NODES, 1);
    char resource[64];
    snprintf(resource, sizeof resource, "bench-first-%d-%d", (int)getpid(), r);
    sw_limiter *l;
    sw_cluster *c;
    if (sw_limiter_create(&l, o) || sw_cluster_create(&c, addr, o) ||
        sw_cluster_add(c, l, resource) || sw_cluster_start(c))
      die("first");
    enum { Q = 8, MAXP = 100000 };
    static int64_t at[MAXP]; /* local ms of each admission */
    int64_t quarter[Q] = {0}, n = 0, policy = 0;
    const int64_t t0 = mono_ns(), period = 500000;
    for (int64_t i = -(int64_t)(2 * qps); i * period < Q * 250000000LL; i++) {
      if (i > 0) sleep_until_ns(t0 + i * period);
      sw_decision d;
      sw_lease_info a;
      int64_t t = sw_now_ms();
      sw_lease_stats(l, t, &a);
      sw_limiter_entry_at(l, t, 1, 0, &d);
      if (d.verdict != SW_VERDICT_PASS) continue;
      quarter[(mono_ns() - t0) / 250000000]++;
      policy += !a.up;
      if (n < MAXP) at[n++] = t;
    }
    /* by bucket of Redis time, with the offset measured (stable: one host) */
    sw_lease_info a;
    sw_lease_stats(l, sw_now_ms(), &a);
    int64_t b0 = (at[0] + a.offset_ms) / 500, rb[Q] = {0}, worst = 0;
    for (int64_t k = 0; k < n; k++) {
      int64_t b = (at[k] + a.offset_ms) / 500 - b0;
      if (b >= 0 && b < Q) rb[b]++;
    }
    for (int b = 1; b < Q; b++)
      if (rb[b - 1] + rb[b] > worst) worst = rb[b - 1] + rb[b];
    printf("first qps=%.0f lease=%lld run=%d per_250ms=[", qps, (long long)lease, r);
    for (int q = 0; q < Q; q++) printf("%s%lld", q ? ", " : "", (long long)quarter[q]);
    printf("] per_redis_bucket=[");
    for (int b = 0; b < Q; b++) printf("%s%lld", b ? ", " : "", (long long)rb[b]);
    printf("] by_failure_policy=%lld max_window_redis_buckets=%lld\n", (long long)policy,
           (long long)worst);
    sw_cluster_free(c);
    sw_limiter_free(l);
    sw_options_free(o);
  }
  return 0;
}

/* ---------------------------------------------------------------- edges */

typedef struct edge_mem {
  _Atomic int ready, go;
  _Atomic int64_t r_up; /* Redis time (ms) Redis was back; 0: not yet */
  proc_out p[2];
  int64_t after[2][BK]; /* of p[i].count: admitted from r_up on, by a node back on leases */
} edge_mem;

static int edge_child(edge_mem *m, int me, int port, const char *resource, int policy,
                      double threshold, int64_t lease, double rate, int64_t ms) {
  char addr[64];
  proc_out *p = &m->p[me];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
  sw_options *o = cluster_opts(threshold, lease);
  sw_options_set(o, SW_OPT_CLUSTER_FAILURE, policy);
  sw_limiter *l;
  sw_cluster *c;
  if (sw_limiter_create(&l, o) || sw_cluster_create(&c, addr, o) ||
      sw_cluster_add(c, l, resource) || sw_cluster_start(c) || !wait_up(l, 5000))
    return 1;
  atomic_fetch_add(&m->ready, 1);
  for (int64_t end = sw_now_ms() + 10000; !atomic_load(&m->go) && sw_now_ms() < end;) sleep_ms(1);
  const int64_t wl = 500;
  const int64_t period = (int64_t)(1e9 / rate), t0 = mono_ns();
  for (int64_t i = 0; i * period < ms * 1000000; i++) {
    sleep_until_ns(t0 + i * period);
    int64_t t = sw_now_ms();
    sw_decision d;
    sw_lease_info a;
    sw_lease_stats(l, t, &a); /* Redis time = local + offset (kept while down) */
    sw_limiter_entry_at(l, t, 1, 0, &d);
    p->offered++;
    if (p->r_start == 0) p->r_start = t + a.offset_ms;
    p->r_end = t + a.offset_ms;
    if (d.verdict != SW_VERDICT_PASS) continue;
    p->admitted++;
    int64_t bno = (t + a.offset_ms) / wl;
    int k = (int)(bno % BK);
    if (p->count[k] && p->bno[k] != bno) return 1;
    p->bno[k] = bno;
    p->count[k]++;
    int64_t up = atomic_load(&m->r_up);
    if (up && t + a.offset_ms >= up && a.up) m->after[me][k]++; /* this node is back */
  }
  sw_cluster_free(c);
  sw_limiter_free(l);
  sw_options_free(o);
  return 0;
}

static int64_t redis_ms(int port) {
  char out[128];
  long long sec, usec;
  if (rf_cli(port, out, sizeof out, 2000, "TIME", (char *)NULL) != 0 ||
      sscanf(out, "%lld %lld", &sec, &usec) != 2)
    return -1;
  return sec * 1000 + usec / 1000;
}

static int edges_once(int stop, int policy, double threshold, int64_t lease, double x, int run,
                      int64_t out[4]) {
  rf_server s;
  if (rf_start(&s) != 0) {
    fprintf(stderr, "edges: cannot start redis-server\n");
    return 1;
  }
  edge_mem *m = mmap(NULL, sizeof *m, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return 1;
  memset(m, 0, sizeof *m);
  char resource[64];
  snprintf(resource, sizeof resource, "bench-edges-%d-%d", (int)getpid(), run);
  const int64_t ms = 5500, down_at = 1500, up_at = 3500, wl = 500;
  pid_t pid[2], parent = getpid();
  for (int i = 0; i < 2; i++) {
    pid[i] = fork();
    if (pid[i] == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(1);
      m->p[i].rc = edge_child(m, i, s.port, resource, policy, threshold, lease,
                              x * threshold / 2, ms);
      _exit(0);
    }
  }
  for (int64_t end = sw_now_ms() + 10000; atomic_load(&m->ready) < 2 && sw_now_ms() < end;)
    sleep_ms(1);
  int64_t off = redis_ms(s.port) - sw_now_ms(), t0 = sw_now_ms();
  atomic_store(&m->go, 1);
  sleep_ms(down_at);
  int64_t r_down = sw_now_ms() + off;
  if (stop) rf_pause(&s);
  else rf_kill(&s);
  sleep_ms(t0 + up_at - sw_now_ms());
  int64_t r_up = sw_now_ms() + off;
  atomic_store(&m->r_up, r_up);
  int rc = stop ? rf_resume(&s) : rf_restart(&s);
  for (int i = 0; i < 2; i++) waitpid(pid[i], NULL, 0);
  rf_stop(&s);
  if (rc || m->p[0].rc || m->p[1].rc) {
    fprintf(stderr, "edges: a process failed\n");
    return 1;
  }
  /* the most admitted in a window of buckets (b-1, b): before the failure,
   * while down (windows ending before the recovery); and in the windows
   * that hold the recovery or follow it, the admissions of nodes back on
   * leases beyond the threshold, or beyond what the window held otherwise
   * if that was more (fail-open admits everything while down) */
  share_mem sm; /* bucket_count reads two proc_outs */
  memcpy(sm.p, m->p, sizeof sm.p);
  int64_t lo = m->p[0].r_start / wl + 1, hi = m->p[0].r_end / wl;
  out[0] = out[1] = out[2] = out[3] = 0;
  for (int64_t b = lo; b <= hi; b++) {
    int64_t w = bucket_count(&sm, b - 1) + bucket_count(&sm, b), after = 0;
    for (int i = 0; i < 2; i++)
      for (int64_t k = b - 1; k <= b; k++)
        if (m->p[i].bno[k % BK] == k) after += m->after[i][k % BK];
    int phase = (b + 1) * wl <= r_down ? 0 : (b + 1) * wl <= r_up ? 1 : 2;
    if (w > out[phase]) out[phase] = w;
    int64_t held = w - after > (int64_t)threshold ? w - after : (int64_t)threshold;
    if (phase == 2 && w - held > out[3]) out[3] = w - held;
  }
  munmap(m, sizeof *m);
  return 0;
}

static int bench_edges(const char *kind, const char *pol, double threshold, int64_t lease,
                       double x, int runs) {
  int stop = strcmp(kind, "stop") == 0;
  int policy = strcmp(pol, "open") == 0     ? SW_CLUSTER_FAIL_OPEN
               : strcmp(pol, "closed") == 0 ? SW_CLUSTER_FAIL_CLOSED
                                            : SW_CLUSTER_FALLBACK_LOCAL;
  if (!rf_available()) {
    printf("edges: redis-server not installed: skipped\n");
    return 0;
  }
  rf_init();
  int64_t worst[4] = {0, 0, 0, 0};
  int rc = 0;
  for (int r = 0; r < runs && rc == 0; r++) {
    int64_t w[4];
    rc = edges_once(stop, policy, threshold, lease, x, r, w);
    if (rc) break;
    printf("edges kind=%s policy=%s threshold=%.0f lease=%lld offered_x=%.1f run=%d "
           "max_window_before=%lld max_window_down=%lld max_window_recovery=%lld "
           "recovery_overshoot=%lld\n",
           kind, pol, threshold, (long long)lease, x, r, (long long)w[0], (long long)w[1],
           (long long)w[2], (long long)w[3]);
    for (int i = 0; i < 4; i++)
      if (w[i] > worst[i]) worst[i] = w[i];
  }
  printf("edges kind=%s policy=%s threshold=%.0f lease=%lld offered_x=%.1f runs=%d "
         "worst_before=%lld worst_down=%lld worst_recovery=%lld worst_recovery_overshoot=%lld\n",
         kind, pol, threshold, (long long)lease, x, runs, (long long)worst[0],
         (long long)worst[1], (long long)worst[2], (long long)worst[3]);
  rf_finish();
  return rc;
}

int main(int argc, char **argv) {
  if (argc >= 4 && strcmp(argv[1], "hot") == 0)
    return bench_hot(strcmp(argv[2], "cluster") == 0, atol(argv[3]));
  if (argc >= 5 && strcmp(argv[1], "calls") == 0)
    return bench_calls(argv[2], atoll(argv[3]), atol(argv[4]));
  if (argc >= 6 && strcmp(argv[1], "share") == 0)
    return bench_share(argv[2], atof(argv[3]), atoll(argv[4]), atof(argv[5]));
  if (argc >= 5 && strcmp(argv[1], "first") == 0)
    return bench_first(argv[2], atof(argv[3]), atoll(argv[4]), argc >= 6 ? atoi(argv[5]) : 3);
  if (argc >= 7 && strcmp(argv[1], "edges") == 0)
    return bench_edges(argv[2], argv[3], atof(argv[4]), atoll(argv[5]), atof(argv[6]),
                       argc >= 8 ? atoi(argv[7]) : 5);
  fprintf(stderr,
          "usage: %s hot local|cluster OPS\n"
          "       %s calls HOST:PORT L OPS\n"
          "       %s share HOST:PORT THRESHOLD L SECONDS\n"
          "       %s edges kill|stop local|open|closed THRESHOLD L OFFERED_X [RUNS]\n"
          "       %s first HOST:PORT QPS L [RUNS]\n",
          argv[0], argv[0], argv[0], argv[0], argv[0]);
  return 2;
}
