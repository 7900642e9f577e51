/* SPDX-License-Identifier: Apache-2.0 */
/* swctl: look into libsw shared segments. The commands, their options and
 * the exit codes are in the help texts below (swctl --help, swctl help
 * COMMAND) and in swctl(1) (man/swctl.1); docs/observability.md and
 * docs/shared-memory.md show them at work.
 *
 * A keyed table's segment is one resource: its totals, its key counts and
 * its top keys by passes and by blocks (--top N, default 10, at most
 * SWCTL_TOP_MAX); swctl dump adds one JSON line per key. A circuit
 * breaker's segment shows its state, ratio, probes and transitions.
 *
 * SEGMENT is a POSIX shared memory name (no '/') or a file path. swctl
 * attaches read-only: it never changes the segment. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
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

/* ------------------------------------------------------------ help texts */

typedef struct command {
  const char *name, *synopsis, *help;
  const char *options; /* those it takes, each between spaces */
} command;

#define LOG_OPTIONS " --seconds --log-dir --app --log-max-size --log-max-files "

#define SEGMENTS "SEGMENT... | --all"
#define SEGMENTS_HELP \
  "SEGMENT: a shared memory name (no '/'), a file path, or a glob of either ('libsw_*');\n" \
  "--all: every libsw segment in /dev/shm (swctl ls lists them).\n"

static const command commands[] = {
    {"ls", "ls [DIR...] [--json]",
     "The libsw segments of /dev/shm (or of the directories given), known by their\n"
     "header: kind, size (* when its pages are not reserved: made by an older libsw),\n"
     "the free space of its file system, capacity, names or keys in use, the creating\n"
     "process (\"gone\" if it has exited), its owner, when it was made, and its layout\n"
     "(\"current\": this swctl can read it; \"other\": made by another libsw version).\n"
     "  --json    one JSON array of objects instead of the table\n",
     " --json "},
    {"list", "list " SEGMENTS " [--top N] [--json]",
     "One line per resource: rates of the last second, response times, the rule.\n"
     "A keyed table: its rule, totals, keys, memory and top keys.\n" SEGMENTS_HELP
     "  --top N   a keyed table's top keys by passes and by blocks (default 10, at most 1000)\n"
     "  --json    one JSON array of the resources' objects (those of swctl dump) instead\n",
     " --top --json --all "},
    {"top", "top " SEGMENTS " [--seconds N] [--top N]",
     "The table of swctl list, refreshed every second like top(1), for N seconds\n"
     "(default: until interrupted; `swctl top SEGMENT N` says the same).\n" SEGMENTS_HELP,
     " --top --seconds --all "},
    {"dump", "dump " SEGMENTS " [--top N]",
     "One JSON object per resource, one per line (JSON Lines); a keyed table's line,\n"
     "then one line per key.\n" SEGMENTS_HELP,
     " --top --all "},
    {"serve", "serve " SEGMENTS " [--listen HOST:PORT] [--seconds N] [--log-dir DIR]\n"
              "            [--app NAME] [--log-max-size BYTES] [--log-max-files N]\n"
              "            [--max-connections N] [--read-timeout S] [--write-timeout S] [--top N]\n"
              "            [--rescan S]",
     "HTTP: /metrics (Prometheus), / (the live dashboard), /api/series (its data), for\n"
     "every segment given on one port, each series labelled by its segment. With --all,\n"
     "segments created later are served from the next rescan (every 5 s: --rescan).\n"
     SEGMENTS_HELP
     "  --listen HOST:PORT    where to serve, HOST an IP address (default 127.0.0.1:9464)\n"
     "  --seconds N           stop after N seconds (default: until SIGINT / SIGTERM)\n"
     "  --log-dir DIR         also write Sentinel's per-second metric log there, one file\n"
     "                        per segment: DIR/SEGMENT-metrics.log\n"
     "  --app NAME            log file name: NAME-metrics.log (one segment only)\n"
     "  --log-max-size BYTES  roll the log at this size (default 50 MiB)\n"
     "  --log-max-files N     keep N log files in all (default 6)\n"
     "  --max-connections N   connections open at once; more are refused (default 128)\n"
     "  --read-timeout S      a request must arrive within S seconds (default 10)\n"
     "  --write-timeout S     its reply must be taken within S seconds after (default 30)\n"
     "  --rescan S            with --all, look for new segments every S seconds (default 5)\n",
     " --top --all --listen --max-connections --read-timeout --write-timeout --rescan"
     LOG_OPTIONS},
    {"rules", "rules get SEGMENT | rules apply SEGMENT FILE | rules check FILE",
     "Flow rules as JSON, in Sentinel's FlowRule format (a list of objects: resource,\n"
     "grade, count, controlBehavior, warmUpPeriodSec, maxQueueingTimeMs, ...) with\n"
     "libsw's fields strict, dryRun, keyed and capacity (docs/rules.md).\n"
     "  get SEGMENT          print the segment's rules\n"
     "  apply SEGMENT FILE   change them live (FILE '-': standard input): every process\n"
     "                       attached sees a rule at its next entry, statistics kept; a\n"
     "                       resource not named keeps its rule, a new one is created.\n"
     "                       A file that does not parse, a bad value, or a rule that does\n"
     "                       not fit the segment changes nothing (exit status 3)\n"
     "  check FILE           parse and check FILE; print its rules as swctl rules get would\n",
     " "},
    {"log", "log SEGMENT --log-dir DIR [--app NAME] [--seconds N] [--log-max-size BYTES]\n"
            "          [--log-max-files N]",
     "Sentinel's per-second metric log only (the options of serve).\n",
     " --top" LOG_OPTIONS},
};
#define NCOMMANDS (int)(sizeof commands / sizeof commands[0])

static const char exit_codes[] =
    "Exit status: 0 success; 1 an error at run time (a segment that cannot be opened,\n"
    "an address that cannot be listened on, no segment found, a failed write); 2 a\n"
    "usage error (an unknown command or option, a bad number); 3 rules refused\n"
    "(swctl rules apply / check: a file that does not parse, a bad value; nothing\n"
    "changed).\n";

static void overview(FILE *out) {
  fprintf(out, "usage: swctl COMMAND [ARGUMENTS]\n       swctl --help | --version\n"
               "       swctl help COMMAND | swctl COMMAND --help\n\n");
  for (int i = 0; i < NCOMMANDS; i++) fprintf(out, "  swctl %s\n", commands[i].synopsis);
  fprintf(out, "\nSEGMENT: a POSIX shared memory name (no '/') or a file path; swctl attaches\n"
               "read-only and never changes it.\n%s"
               "See swctl(1) and docs/observability.md.\n", exit_codes);
}

static const command *find_command(const char *name) {
  for (int i = 0; i < NCOMMANDS; i++)
    if (strcmp(commands[i].name, name) == 0) return &commands[i];
  return NULL;
}

static int command_help(const command *c) {
  printf("usage: swctl %s\n\n%s\n%s", c->synopsis, c->help, exit_codes);
  return 0;
}

/* A usage error: what was wrong, then where to look; exit status 2. */
static int usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int usage(const char *cmd, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "swctl: ");
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  const command *c = cmd ? find_command(cmd) : NULL;
  if (c)
    fprintf(stderr, "\nusage: swctl %s\n(swctl %s --help says more)\n", c->synopsis, c->name);
  else
    fprintf(stderr, "\n(swctl --help lists the commands)\n");
  return 2;
}

/* ------------------------------------------------------------- the output */

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
    char min_rt[32] = "-"; /* no request completed in the window */
    if (!isnan(r->min_rt)) snprintf(min_rt, sizeof min_rt, "%.0f", r->min_rt);
    printf("%-24.24s %9.1f %9.1f %9.1f %8.1f %7s %6lld %9g %s%s\n", r->name, r->pass_qps,
           r->block_qps, r->would_block_qps, r->avg_rt, min_rt, (long long)r->concurrency,
           r->threshold, swctl_rule_name(r->grade, r->behavior), r->dry_run ? " (dry run)" : "");
  }
}

/* A resource's JSON object (swctl dump's line, swctl list --json's item). */
static void resource_json(swctl *c, const swctl_resource *r, long long unix_ms, swctl_buf *b) {
  swctl_printf(b, "{\"ts\":%lld,\"segment\":", unix_ms);
  swctl_json_str(b, c->segment_name);
  swctl_printf(b, ",\"resource\":");
  swctl_json_str(b, r->name);
  char min_rt[32] = "null"; /* no request completed in the window */
  if (!isnan(r->min_rt)) snprintf(min_rt, sizeof min_rt, "%.0f", r->min_rt);
  swctl_printf(b, ",\"pass_qps\":%.3f,\"block_qps\":%.3f,\"would_block_qps\":%.3f,"
                  "\"avg_rt\":%.3f,\"min_rt\":%s,\"concurrency\":%lld,\"waiting\":%lld,"
                  "\"threshold\":%.17g,\"rule\":\"%s\",\"dry_run\":%s}",
               r->pass_qps, r->block_qps, r->would_block_qps, r->avg_rt, min_rt,
               (long long)r->concurrency, (long long)r->waiting, r->threshold,
               swctl_rule_name(r->grade, r->behavior), r->dry_run ? "true" : "false");
}

/* Every resource's object into b, each followed by sep. */
static void resources_json(swctl *c, swctl_buf *b, const char *sep) {
  long long unix_ms = (long long)(sw_now_ms() + c->wall_offset);
  if (c->keyed) {
    swctl_printf(b, "{\"ts\":%lld,\"segment\":", unix_ms);
    swctl_json_str(b, c->segment_name);
    swctl_printf(b, ",\"resource\":");
    swctl_json_str(b, c->res[0].name);
    swctl_append(b, ",", 1);
    swctl_keyed_json(c, b);
    swctl_printf(b, "}%s", sep);
    return;
  }
  for (int i = 0; i < c->nres; i++) {
    if (c->res[i].lim == NULL) continue;
    resource_json(c, &c->res[i], unix_ms, b);
    swctl_printf(b, "%s", sep);
  }
}

static int dump(swctl *c) {
  if (c->keyed) return swctl_keyed_dump(c);
  if (c->breaker) return swctl_breaker_dump(c);
  swctl_buf b = {0};
  resources_json(c, &b, "\n");
  if (b.len) fwrite(b.data, 1, b.len, stdout);
  free(b.data);
  return ferror(stdout) ? 1 : 0;
}

/* ------------------------------------------------------------ the options */

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

/* What the command line says, for every command. */
typedef struct args {
  const char *cmd;
  const char *pos[64]; /* the arguments that are not options */
  int npos;
  int json, all;
  long long topn;
  swctl_serve_opts so;
  const char *log_dir, *app;
  long long max_size;
  int max_files;
  long long rescan_s; /* serve --all: between two rescans */
} args;

/* Parse argv[2..]: 0, or the exit status (a message said why). */
static int parse(args *a, int argc, char **argv) {
  const command *c = find_command(a->cmd);
  for (int i = 2; i < argc; i++) {
    const char *opt = argv[i];
    if (strcmp(opt, "--help") == 0 || strcmp(opt, "-h") == 0) return -1; /* help */
    if (opt[0] != '-' || opt[1] == '\0') {
      if (a->npos == (int)(sizeof a->pos / sizeof a->pos[0]))
        return usage(a->cmd, "too many arguments");
      a->pos[a->npos++] = opt;
      continue;
    }
    char spaced[64];
    snprintf(spaced, sizeof spaced, " %s ", opt);
    if (strlen(opt) > 40 || strstr(c->options, spaced) == NULL)
      return usage(a->cmd, "%s: not an option of swctl %s", opt, a->cmd);
    if (strcmp(opt, "--json") == 0 || strcmp(opt, "--all") == 0) {
      *(opt[2] == 'j' ? &a->json : &a->all) = 1;
      continue;
    }
    if (i + 1 >= argc) return usage(a->cmd, "%s wants a value", opt);
    const char *val = argv[++i];
    long long v = 0;
    if (strcmp(opt, "--listen") == 0)
      a->so.listen = val;
    else if (strcmp(opt, "--log-dir") == 0)
      a->log_dir = val;
    else if (strcmp(opt, "--app") == 0)
      a->app = val;
    else if (strcmp(opt, "--top") == 0 && (v = number(opt, val, 0, SWCTL_TOP_MAX)) >= 0)
      a->topn = v;
    else if (strcmp(opt, "--seconds") == 0 && (v = number(opt, val, 0, 1LL << 40)) >= 0)
      a->so.seconds = (long)v;
    else if (strcmp(opt, "--log-max-size") == 0 && (v = number(opt, val, 0, INT64_MAX)) >= 0)
      a->max_size = v;
    else if (strcmp(opt, "--log-max-files") == 0 && (v = number(opt, val, 0, 1000)) >= 0)
      a->max_files = (int)v;
    else if (strcmp(opt, "--max-connections") == 0 && (v = number(opt, val, 1, 100000)) >= 0)
      a->so.max_connections = (unsigned)v;
    else if (strcmp(opt, "--read-timeout") == 0 && (v = number(opt, val, 1, 86400)) >= 0)
      a->so.read_timeout_s = (unsigned)v;
    else if (strcmp(opt, "--write-timeout") == 0 && (v = number(opt, val, 1, 86400)) >= 0)
      a->so.write_timeout_s = (unsigned)v;
    else if (strcmp(opt, "--rescan") == 0 && (v = number(opt, val, 1, 86400)) >= 0)
      a->rescan_s = v;
    if (v < 0) return 2;
  }
  return 0;
}

/* ------------------------------------------------------------ the commands */

/* The metric log of segment s (a path: its file name), when asked for:
 * 0, or the exit status. */
static int start_log(swctl *s, const args *a) {
  if (a->log_dir == NULL) return 0;
  swctl_log *log = malloc(sizeof *log);
  const char *base = strrchr(s->segment_name, '/');
  if (log == NULL || swctl_log_open(log, a->log_dir, a->app ? a->app : base ? base + 1
                                                                         : s->segment_name,
                                    a->max_size, a->max_files) < 0) {
    free(log);
    return 2;
  }
  s->on_second = swctl_log_second;
  s->on_second_user = log;
  return 0;
}

/* A segment of the chain: its log closed, its name freed. */
static void close_served(swctl *s) {
  char *name = (char *)s->segment_name;
  if (s->on_second_user) {
    swctl_log_close(s->on_second_user);
    free(s->on_second_user);
  }
  swctl_close(s);
  free(name);
  free(s);
}

/* A segment opened for serve (name taken), or NULL (said why). */
static swctl *open_served(char *name, const args *a) {
  swctl *s = calloc(1, sizeof *s);
  if (s == NULL || swctl_open(s, name, (uint32_t)a->topn) != SW_OK) {
    fprintf(stderr, "swctl: %s\n", s ? sw_last_error() : "out of memory");
    free(s);
    free(name);
    return NULL;
  }
  s->segment_name = name;
  if (start_log(s, a) != 0) {
    close_served(s);
    return NULL;
  }
  return s;
}

/* What a rescan needs (host->rescan_user). */
typedef struct rescan_ctx {
  const args *a;
  swctl_list failed; /* segments that could not be opened: not tried again */
} rescan_ctx;

/* name is served already: by any segment of the chain (a registry, a keyed
 * table, a breaker), never by the host that heads it */
static int in_chain(const swctl *c, const char *name) {
  for (; c; c = c->next)
    if (!swctl_is_host(c) && strcmp(c->segment_name, name) == 0) return 1;
  return 0;
}

/* --all: the segments of /dev/shm not served yet, opened. */
static swctl *rescan(swctl *host) {
  rescan_ctx *ctx = host->rescan_user;
  swctl_list l;
  swctl *added = NULL, **tail = &added;
  if (swctl_find(NULL, 0, 1, &l) < 0) return NULL;
  for (int i = 0; i < l.n; i++) {
    int failed = 0;
    for (int k = 0; k < ctx->failed.n && !failed; k++)
      failed = strcmp(ctx->failed.names[k], l.names[i]) == 0;
    if (failed || in_chain(host, l.names[i])) continue;
    swctl *s = open_served(strdup(l.names[i]), ctx->a);
    if (s == NULL) { /* said why; not tried again */
      swctl_list_add(&ctx->failed, l.names[i]);
      l.names[i] = NULL;
      continue;
    }
    *tail = s;
    tail = &s->next;
  }
  swctl_list_free(&l);
  return added;
}

/* serve: every segment named (or --all) on one port; log: one segment. */
static int serve(const args *a, int listen_too) {
  if (listen_too && !swctl_can_serve()) return swctl_serve(NULL, &a->so, &stop);
  if (a->npos == 0 && !a->all) return usage(a->cmd, "which segment?%s", listen_too ? " (or --all)" : "");
  if (!listen_too && (a->npos > 1 || a->all)) return usage(a->cmd, "log takes one segment");
  if (!listen_too && a->log_dir == NULL) return usage(a->cmd, "log wants --log-dir DIR");
  swctl_list l;
  if (swctl_find(a->pos, a->npos, 0, &l) < 0) return 1;
  if (a->app && (a->all || l.n != 1)) {
    swctl_list_free(&l);
    return usage(a->cmd, "--app names the log of one segment (several: DIR/SEGMENT-metrics.log)");
  }
  if (l.n == 0 && !a->all) {
    fprintf(stderr, "swctl: no libsw segment matches\n");
    return 1;
  }
  swctl host;
  swctl_host(&host);
  rescan_ctx ctx = {a, {0}};
  char what[64];
  snprintf(what, sizeof what, a->all ? "every segment of /dev/shm" : "%d segment%s", l.n,
           l.n == 1 ? "" : "s");
  host.segment_name = what;
  if (a->all) {
    host.rescan = rescan;
    host.rescan_user = &ctx;
    host.rescan_ms = a->rescan_s * 1000;
  }
  int rc = 0;
  swctl **tail = &host.next;
  for (int i = 0; i < l.n && rc == 0; i++) {
    if (in_chain(host.next, l.names[i])) continue;
    swctl *s = open_served(l.names[i], a);
    l.names[i] = NULL;
    if (s == NULL) rc = 1;
    else {
      *tail = s;
      tail = &s->next;
    }
  }
  swctl_list_free(&l);
  if (rc == 0) {
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGPIPE, SIG_IGN);
    rc = listen_too ? swctl_serve(&host, &a->so, &stop)
                    : swctl_run(&host, a->so.seconds, &stop, NULL, NULL);
  }
  while (host.next) {
    swctl *s = host.next;
    host.next = s->next;
    close_served(s);
  }
  swctl_list_free(&ctx.failed);
  return rc;
}

/* The segments of list, top and dump, open: 0, or the exit status. A
 * segment that cannot be opened is said on stderr and left out (status 1
 * at the end: *partial). */
static int open_all(const args *a, swctl **out, int *n, int *partial) {
  swctl_list l;
  if (swctl_find(a->pos, a->npos, a->all, &l) < 0) return 1;
  *out = calloc(l.n ? (size_t)l.n : 1, sizeof **out);
  *n = 0;
  for (int i = 0; out && i < l.n; i++) {
    swctl *c = &(*out)[*n];
    if (swctl_open(c, l.names[i], (uint32_t)a->topn) != SW_OK) {
      fprintf(stderr, "swctl: %s\n", sw_last_error());
      *partial = 1;
      continue;
    }
    c->segment_name = l.names[i]; /* kept: the list's names are freed at close_all */
    l.names[i] = NULL;
    /* one-shot: no need to keep what a scan of a keyed table read mapped */
    if (c->keyed) c->keyed->drop_pages = strcmp(a->cmd, "top") != 0;
    (*n)++;
  }
  int none = l.n == 0;
  swctl_list_free(&l);
  if (*n == 0) {
    if (none) fprintf(stderr, "swctl: no libsw segment %s\n",
                      a->all ? "in /dev/shm" : "matches");
    free(*out);
    return 1;
  }
  return 0;
}

static void close_all(swctl *cs, int n) {
  for (int i = 0; i < n; i++) {
    char *name = (char *)cs[i].segment_name;
    swctl_close(&cs[i]);
    free(name);
  }
  free(cs);
}

static int inspect(const args *a) {
  const char *cmd = a->cmd;
  int is_top = strcmp(cmd, "top") == 0, npos = a->npos;
  long seconds = a->so.seconds; /* top: -1 until interrupted */
  if (is_top && npos == 2 && strspn(a->pos[1], "0123456789") == strlen(a->pos[1])) {
    long long v = number("SECONDS", a->pos[1], 1, 1LL << 40); /* swctl top SEGMENT N */
    if (v < 0) return 2;
    seconds = (long)v;
    npos = 1;
  }
  if (npos == 0 && !a->all) return usage(cmd, "which segment? (or --all)");
  args b = *a;
  b.npos = npos;
  swctl *cs;
  int n, partial = 0, rc = open_all(&b, &cs, &n, &partial);
  if (rc) return rc;
  swctl_buf json = {0};
  if (is_top) {
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
  }
  for (long k = 0; !stop && (!is_top || seconds < 0 || k < seconds); k++) {
    if (is_top) printf("\033[H\033[2J");
    for (int i = 0; i < n; i++) {
      swctl_poll(&cs[i]);
      if (a->json)
        resources_json(&cs[i], &json, ",");
      else if (strcmp(cmd, "dump") == 0)
        rc |= dump(&cs[i]);
      else {
        if (i) putchar('\n');
        print_table(&cs[i]);
      }
    }
    if (!is_top) break;
    fflush(stdout);
    if (seconds < 0 || k + 1 < seconds) sleep(1);
  }
  if (a->json) {
    if (json.len) json.len--; /* the last comma */
    printf("[%.*s]\n", (int)json.len, json.data ? json.data : "");
    free(json.data);
  }
  close_all(cs, n);
  return rc || partial || ferror(stdout) ? 1 : 0;
}

static int rules(const args *a) {
  const char *what = a->npos ? a->pos[0] : "";
  int want = strcmp(what, "apply") == 0 ? 3 : 2;
  if (*what == '\0') return usage(a->cmd, "rules get, apply or check?");
  if (strcmp(what, "get") && strcmp(what, "apply") && strcmp(what, "check"))
    return usage(a->cmd, "rules %s: want get, apply or check", what);
  if (a->npos != want)
    return usage(a->cmd, "rules %s takes %s", what,
                 want == 3 ? "a segment and a file" : strcmp(what, "get") ? "a file" : "a segment");
  return swctl_rules(what, a->pos[1], want == 3 ? a->pos[2] : NULL);
}

static int run(const args *a) {
  const char *cmd = a->cmd;
  if (strcmp(cmd, "ls") == 0) return swctl_ls(a->pos, a->npos, a->json);
  if (strcmp(cmd, "rules") == 0) return rules(a);
  if (strcmp(cmd, "serve") == 0 || strcmp(cmd, "log") == 0)
    return serve(a, strcmp(cmd, "serve") == 0);
  return inspect(a);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    overview(stderr);
    return 2;
  }
  const char *cmd = argv[1];
  if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 ||
      (strcmp(cmd, "help") == 0 && argc == 2)) {
    overview(stdout);
    return 0;
  }
  if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) {
    printf("swctl (libsw) %s\nlibrary %s\n", SW_VERSION_STRING, sw_version_string());
    return 0;
  }
  if (strcmp(cmd, "help") == 0) {
    const command *c = find_command(argv[2]);
    return c ? command_help(c) : usage(NULL, "help %s: no such command", argv[2]);
  }
  const command *c = find_command(cmd);
  if (c == NULL) return usage(NULL, "%s: no such command", cmd);
  args a = {.cmd = cmd,
            .topn = 10,
            .so = {"127.0.0.1:9464", -1, SWCTL_MAX_CONNECTIONS, SWCTL_READ_TIMEOUT_S,
                   SWCTL_WRITE_TIMEOUT_S},
            .max_size = 50LL << 20,
            .max_files = 6};
  int rc = parse(&a, argc, argv);
  if (rc < 0) return command_help(c);
  if (rc > 0) return rc;
  return run(&a);
}
