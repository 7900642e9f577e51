/* swctl: look into a libsw shared segment.
 *
 *   swctl list SEGMENT           one line per resource: rates of the last second
 *   swctl top SEGMENT [SECONDS]  the same, refreshed every second like top(1)
 *   swctl dump SEGMENT           one JSON object per resource (JSON lines)
 *
 * SEGMENT is a POSIX shared memory name (no '/') or a file path. swctl
 * attaches read-only: it never changes the segment. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sw/sw.h>

typedef struct row {
  const char *name;
  double pass, block, success, exception, avg_rt, min_rt, threshold;
  int64_t concurrency, total, waiting;
  int64_t grade, behavior;
} row;

static const char *const behaviors[] = {"reject", "warm-up", "pacing", "warm-up+pacing"};

static int read_row(sw_registry *reg, uint32_t i, int64_t t, row *r) {
  sw_limiter *l;
  int rc = sw_registry_at(reg, i, &l, &r->name);
  if (rc < 0) return rc;
  sw_node *n = sw_limiter_node(l);
  r->pass = sw_node_pass_qps_at(n, t);
  r->block = sw_node_block_qps_at(n, t);
  r->success = sw_node_success_qps_at(n, t);
  r->exception = sw_node_exception_qps_at(n, t);
  r->avg_rt = sw_node_avg_rt_at(n, t);
  r->min_rt = sw_node_min_rt_at(n, t);
  r->concurrency = sw_node_concurrency(n);
  r->total = sw_node_total_request_at(n, t);
  r->waiting = sw_node_waiting_at(n, t);
  sw_options *o;
  if (sw_options_create(&o) == SW_OK) {
    sw_limiter_get_rule(l, o);
    sw_options_get_double(o, SW_OPT_THRESHOLD, &r->threshold);
    sw_options_get(o, SW_OPT_GRADE, &r->grade);
    sw_options_get(o, SW_OPT_BEHAVIOR, &r->behavior);
    sw_options_free(o);
  }
  return SW_OK;
}

static void print_table(sw_segment *seg) {
  sw_registry *reg = sw_segment_registry(seg);
  int64_t t = sw_now_ms();
  uint32_t n = sw_registry_count(reg);
  printf("%s: %u of %u resources\n", sw_segment_name(seg), n, sw_registry_capacity(reg));
  printf("%-24s %9s %9s %9s %9s %8s %7s %6s %9s %s\n", "RESOURCE", "PASS/s", "BLOCK/s",
         "OK/s", "ERR/s", "AVG_RT", "MIN_RT", "CONC", "LIMIT", "RULE");
  for (uint32_t i = 0; i < n; i++) {
    row r;
    if (read_row(reg, i, t, &r) < 0) {
      printf("#%u: %s\n", i, sw_last_error());
      continue;
    }
    printf("%-24.24s %9.1f %9.1f %9.1f %9.1f %8.1f %7.0f %6lld %9g %s/%s\n", r.name, r.pass,
           r.block, r.success, r.exception, r.avg_rt, r.min_rt, (long long)r.concurrency,
           r.threshold, r.grade == SW_GRADE_QPS ? "qps" : "concurrency",
           behaviors[r.behavior & 3]);
  }
}

/* Print s as a JSON string. */
static void json_str(const char *s) {
  putchar('"');
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      printf("\\%c", c);
    else if (c < 0x20)
      printf("\\u%04x", c);
    else
      putchar(c);
  }
  putchar('"');
}

static void dump(sw_segment *seg) {
  sw_registry *reg = sw_segment_registry(seg);
  int64_t t = sw_now_ms();
  struct timespec wall;
  clock_gettime(CLOCK_REALTIME, &wall);
  long long unix_ms = (long long)wall.tv_sec * 1000 + wall.tv_nsec / 1000000;
  for (uint32_t i = 0; i < sw_registry_count(reg); i++) {
    row r;
    if (read_row(reg, i, t, &r) < 0) continue;
    printf("{\"ts\":%lld,\"segment\":", unix_ms);
    json_str(sw_segment_name(seg));
    printf(",\"resource\":");
    json_str(r.name);
    printf(",\"pass_qps\":%.3f,\"block_qps\":%.3f,\"success_qps\":%.3f,\"exception_qps\":%.3f,"
           "\"avg_rt\":%.3f,\"min_rt\":%.0f,\"concurrency\":%lld,\"waiting\":%lld,"
           "\"total_request_minute\":%lld,\"threshold\":%.17g,\"grade\":\"%s\","
           "\"behavior\":\"%s\"}\n",
           r.pass, r.block, r.success, r.exception, r.avg_rt, r.min_rt,
           (long long)r.concurrency, (long long)r.waiting, (long long)r.total, r.threshold,
           r.grade == SW_GRADE_QPS ? "qps" : "concurrency", behaviors[r.behavior & 3]);
  }
}

static volatile sig_atomic_t stop;
static void on_signal(int sig) {
  (void)sig;
  stop = 1;
}

static int usage(void) {
  fprintf(stderr, "usage: swctl list SEGMENT\n"
                  "       swctl top SEGMENT [SECONDS]\n"
                  "       swctl dump SEGMENT\n"
                  "SEGMENT: a POSIX shared memory name (no '/') or a file path\n");
  return 2;
}

int main(int argc, char **argv) {
  if (argc < 3) return usage();
  const char *cmd = argv[1];
  sw_segment *seg;
  if (sw_segment_open(&seg, argv[2], 0, NULL, SW_SEGMENT_READONLY) != SW_OK) {
    fprintf(stderr, "swctl: %s\n", sw_last_error());
    return 1;
  }
  int rc = 0;
  if (strcmp(cmd, "list") == 0) {
    print_table(seg);
  } else if (strcmp(cmd, "dump") == 0) {
    dump(seg);
  } else if (strcmp(cmd, "top") == 0) {
    long seconds = argc > 3 ? atol(argv[3]) : -1; /* -1: until interrupted */
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    for (long k = 0; !stop && (seconds < 0 || k < seconds); k++) {
      printf("\033[H\033[2J");
      print_table(seg);
      fflush(stdout);
      if (seconds < 0 || k + 1 < seconds) sleep(1);
    }
  } else {
    rc = usage();
  }
  sw_segment_close(seg);
  return rc;
}
