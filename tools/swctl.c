/* swctl: look into a libsw shared segment.
 *
 *   swctl list SEGMENT            one line per resource: rates of the last second
 *   swctl top SEGMENT [SECONDS]   the same, refreshed every second like top(1)
 *   swctl dump SEGMENT            one JSON object per resource (JSON lines)
 *   swctl serve SEGMENT [OPTIONS] HTTP: /metrics (Prometheus), / (live dashboard)
 *   swctl log SEGMENT --log-dir DIR [OPTIONS]   Sentinel's metric log only
 *
 * A keyed table's segment is one resource: its totals, its key counts and
 * its top keys by passes and by blocks (--top N, default 10, at most
 * SWCTL_TOP_MAX); swctl dump adds one JSON line per key. A circuit
 * breaker's segment shows its state, ratio, probes and transitions.
 *
 * Options of serve and log:
 *   --listen HOST:PORT   where to serve (default 127.0.0.1:9464)
 *   --seconds N          stop after N seconds (default: until SIGINT/SIGTERM)
 *   --log-dir DIR        write Sentinel's per-second metric log there
 *   --app NAME           log file name: NAME-metrics.log (default: the segment's name)
 *   --log-max-size BYTES roll the log at this size (default 50 MiB)
 *   --log-max-files N    keep N files in all (default 6)
 * Options of serve only (see docs/observability.md):
 *   --max-connections N  connections open at once; more are closed (default 128)
 *   --read-timeout S     a request must arrive within S seconds of the connection (10)
 *   --write-timeout S    its reply must be taken within S seconds after (30)
 *
 * SEGMENT is a POSIX shared memory name (no '/') or a file path. swctl
 * attaches read-only: it never changes the segment. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "swctl.h"

static volatile int stop;
static void on_signal(int sig) {
  (void)sig;
  stop = 1;
}

static void print_table(swctl *c) {
  if (c->breaker) {
    swctl_breaker_print(c, stdout);
    return;
  }
  if (c->keyed) {
    swctl_keyed_print(c, stdout);
    return;
  }
  sw_registry *reg = sw_segment_registry(c->seg);
  printf("%s: %u of %u resources\n", c->segment_name, sw_registry_count(reg),
         sw_registry_capacity(reg));
  printf("%-24s %9s %9s %9s %8s %7s %6s %9s %s\n", "RESOURCE", "PASS/s", "BLOCK/s", "WOULD/s",
         "AVG_RT", "MIN_RT", "CONC", "LIMIT", "RULE");
  for (int i = 0; i < c->nres; i++) {
    const swctl_resource *r = &c->res[i];
    if (r->lim == NULL) {
      printf("#%d: %s\n", i, sw_last_error());
      continue;
    }
    printf("%-24.24s %9.1f %9.1f %9.1f %8.1f %7.0f %6lld %9g %s%s\n", r->name, r->pass_qps,
           r->block_qps, r->would_block_qps, r->avg_rt, r->min_rt, (long long)r->concurrency,
           r->threshold, swctl_rule_name(r->grade, r->behavior), r->dry_run ? " (dry run)" : "");
  }
}

static int dump(swctl *c) {
  if (c->keyed) return swctl_keyed_dump(c);
  if (c->breaker) return swctl_breaker_dump(c);
  swctl_buf b = {0};
  long long unix_ms = (long long)(sw_now_ms() + c->wall_offset);
  for (int i = 0; i < c->nres; i++) {
    const swctl_resource *r = &c->res[i];
    if (r->lim == NULL) continue;
    b.len = 0;
    swctl_printf(&b, "{\"ts\":%lld,\"segment\":", unix_ms);
    swctl_json_str(&b, c->segment_name);
    swctl_printf(&b, ",\"resource\":");
    swctl_json_str(&b, r->name);
    swctl_printf(&b, ",\"pass_qps\":%.3f,\"block_qps\":%.3f,\"would_block_qps\":%.3f,"
                     "\"avg_rt\":%.3f,\"min_rt\":%.0f,\"concurrency\":%lld,\"waiting\":%lld,"
                     "\"threshold\":%.17g,\"rule\":\"%s\",\"dry_run\":%s}\n",
                 r->pass_qps, r->block_qps, r->would_block_qps, r->avg_rt, r->min_rt,
                 (long long)r->concurrency, (long long)r->waiting, r->threshold,
                 swctl_rule_name(r->grade, r->behavior), r->dry_run ? "true" : "false");
    fwrite(b.data, 1, b.len, stdout);
  }
  free(b.data);
  return 0;
}

static int usage(void) {
  fprintf(stderr, "usage: swctl list SEGMENT [--top N]\n"
                  "       swctl top SEGMENT [SECONDS] [--top N]\n"
                  "       swctl dump SEGMENT [--top N]\n"
                  "       swctl serve SEGMENT [--listen HOST:PORT] [--seconds N] [--log-dir DIR]\n"
                  "                           [--app NAME] [--log-max-size BYTES] [--log-max-files N]\n"
                  "                           [--max-connections N] [--read-timeout S]\n"
                  "                           [--write-timeout S]\n"
                  "       swctl log SEGMENT --log-dir DIR [--app NAME] [--seconds N] ...\n"
                  "SEGMENT: a POSIX shared memory name (no '/') or a file path\n"
                  "--top N: a keyed table's top keys by passes and by blocks (default 10)\n");
  return 2;
}

/* A whole number in lo..hi, or -1 with a message. */
static long long number(const char *opt, const char *val, long long lo, long long hi) {
  char *end;
  errno = 0;
  long long v = strtoll(val, &end, 10);
  if (errno || end == val || *end || v < lo || v > hi) {
    fprintf(stderr, "swctl: %s %s: want a whole number in %lld..%lld\n", opt, val, lo, hi);
    return -1;
  }
  return v;
}

/* serve and log: the loop with an optional listener and an optional log. */
static int serve(swctl *c, int argc, char **argv, int listen_too) {
  const char *dir = NULL, *app = c->segment_name;
  swctl_serve_opts so = {"127.0.0.1:9464", -1, SWCTL_MAX_CONNECTIONS, SWCTL_READ_TIMEOUT_S,
                         SWCTL_WRITE_TIMEOUT_S};
  long long max_size = 50LL << 20, v = 0;
  int max_files = 6;
  for (int i = 3; i < argc; i += 2) {
    const char *opt = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
    if (val == NULL) return usage();
    if (strcmp(opt, "--listen") == 0)
      so.listen = val;
    else if (strcmp(opt, "--log-dir") == 0)
      dir = val;
    else if (strcmp(opt, "--app") == 0)
      app = val;
    else if (strcmp(opt, "--seconds") == 0 && (v = number(opt, val, 0, 1LL << 40)) >= 0)
      so.seconds = (long)v;
    else if (strcmp(opt, "--log-max-size") == 0 && (v = number(opt, val, 0, INT64_MAX)) >= 0)
      max_size = v;
    else if (strcmp(opt, "--log-max-files") == 0 && (v = number(opt, val, 0, 1000)) >= 0)
      max_files = (int)v;
    else if (listen_too && strcmp(opt, "--max-connections") == 0 &&
             (v = number(opt, val, 1, 100000)) >= 0)
      so.max_connections = (unsigned)v;
    else if (listen_too && strcmp(opt, "--read-timeout") == 0 &&
             (v = number(opt, val, 1, 86400)) >= 0)
      so.read_timeout_s = (unsigned)v;
    else if (listen_too && strcmp(opt, "--write-timeout") == 0 &&
             (v = number(opt, val, 1, 86400)) >= 0)
      so.write_timeout_s = (unsigned)v;
    else
      return v < 0 ? 2 : usage();
  }
  if (!listen_too && dir == NULL) return usage();
  if (listen_too && !swctl_can_serve()) return swctl_serve(c, &so, &stop);
  swctl_log log;
  if (dir) {
    if (swctl_log_open(&log, dir, app, max_size, max_files) < 0) return 2;
    c->on_second = swctl_log_second;
    c->on_second_user = &log;
  }
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  signal(SIGPIPE, SIG_IGN);
  int rc = listen_too ? swctl_serve(c, &so, &stop) : swctl_run(c, so.seconds, &stop, NULL, NULL);
  if (dir) swctl_log_close(&log);
  return rc;
}

/* Take --top N out of argv (any command): N, 10 if absent, -1 (said why) if bad. */
static long long take_top(int *argc, char **argv) {
  long long n = 10;
  for (int i = 3; i < *argc; i++) {
    if (strcmp(argv[i], "--top") != 0) continue;
    if (i + 1 >= *argc) {
      usage();
      return -1;
    }
    if ((n = number("--top", argv[i + 1], 0, SWCTL_TOP_MAX)) < 0) return -1;
    memmove(argv + i, argv + i + 2, (size_t)(*argc - i - 1) * sizeof *argv); /* and NULL */
    *argc -= 2;
    i--;
  }
  return n;
}

int main(int argc, char **argv) {
  if (argc < 3) return usage();
  const char *cmd = argv[1];
  long long topn = take_top(&argc, argv);
  if (topn < 0) return 2;
  swctl c;
  if (swctl_open(&c, argv[2], (uint32_t)topn) != SW_OK) {
    fprintf(stderr, "swctl: %s\n", sw_last_error());
    return 1;
  }
  int rc = 0;
  /* one-shot: no need to keep what a scan of a keyed table read mapped */
  if (c.keyed) c.keyed->drop_pages = strcmp(cmd, "list") == 0 || strcmp(cmd, "dump") == 0;
  if (strcmp(cmd, "list") == 0) {
    swctl_poll(&c);
    print_table(&c);
  } else if (strcmp(cmd, "dump") == 0) {
    swctl_poll(&c);
    rc = dump(&c);
  } else if (strcmp(cmd, "top") == 0) {
    long seconds = argc > 3 ? atol(argv[3]) : -1; /* -1: until interrupted */
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    for (long k = 0; !stop && (seconds < 0 || k < seconds); k++) {
      swctl_poll(&c);
      printf("\033[H\033[2J");
      print_table(&c);
      fflush(stdout);
      if (seconds < 0 || k + 1 < seconds) sleep(1);
    }
  } else if (strcmp(cmd, "serve") == 0) {
    rc = serve(&c, argc, argv, 1);
  } else if (strcmp(cmd, "log") == 0) {
    rc = serve(&c, argc, argv, 0);
  } else {
    rc = usage();
  }
  swctl_close(&c);
  return rc;
}
