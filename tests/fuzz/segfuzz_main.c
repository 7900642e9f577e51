/* SPDX-License-Identifier: Apache-2.0 */
/* The segment fuzzer's driver: for one kind, COUNT damaged copies of its
 * base segments (seeded: copy i of a seed is always the same damage), each
 * in a forked child that opens it in every mode, drives it through the
 * kind's calls and runs swctl ls / list / dump on it, every call bounded
 * by alarm(); the parent counts outcomes and saves each failing copy.
 *
 * Usage: segfuzz KIND [--seed S] [--count N] [--jobs J] [--save DIR]
 *                     [--call-bound SECONDS] [--index I] [--replay FILE --variant V]
 *   KIND: registry, keyed or breaker. --index I: only copy I, its output
 *   shown. --replay FILE: a saved copy (of variant V) instead.
 * Exit status: 0 no crash, hang or sanitizer report; 1 some; 2 usage or setup. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sanitizer/common_interface_defs.h>

#include "segfuzz.h"

int swctl_main(int argc, char **argv); /* tools/swctl.c, its main renamed */

/* The sanitizers' defaults when run by hand as well as by segments.sh: the
 * children leave by _exit (no leak check there; the parent's bases live to
 * the end). */
const char *__asan_default_options(void);
const char *__asan_default_options(void) {
  return "detect_leaks=0:handle_abort=1:handle_sigill=1";
}
const char *__ubsan_default_options(void);
const char *__ubsan_default_options(void) { return "print_stacktrace=1"; }

const char *const fz_mode_names[FZ_NMODES] = {"create-or-attach", "attach", "read-only"};
const uint32_t fz_mode_flags[FZ_NMODES] = {SW_SEGMENT_CREATE, SW_SEGMENT_ATTACH,
                                           SW_SEGMENT_READONLY};

fz_res *fz_cur;
unsigned fz_call_bound = 5;

/* ------------------------------------------------------ calls, bounded */

static int64_t call_started_ms;

static int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void fz_begin(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(fz_cur->step, sizeof fz_cur->step, fmt, ap);
  va_end(ap);
  call_started_ms = mono_ms();
  alarm(fz_call_bound);
}

int64_t fz_end(int64_t rc) {
  fz_cur->calls++;
  uint64_t i = rc < 0 ? -(uint64_t)rc : 0; /* a damaged count may be INT64_MIN */
  fz_cur->rc_count[i < FZ_NRC ? i : FZ_NRC - 1]++;
  if (mono_ms() - call_started_ms >= 1000) { /* a lock wait, bounded: the copy ends here */
    fz_cur->slow++;
    alarm(0);
    _exit(0);
  }
  return rc;
}

double fz_end_d(double v) {
  fz_end(v < 0 ? (int64_t)v : 0);
  return v;
}

#define FZ_EXIT_HANG 124
#define FZ_EXIT_HARNESS 3

static void on_alarm(int sig) {
  (void)sig;
  static const char msg[] = "\nsegfuzz: HANG: a call took longer than its bound, in: ";
  write(2, msg, sizeof msg - 1);
  write(2, fz_cur->step, strnlen(fz_cur->step, sizeof fz_cur->step));
  write(2, "\n", 1);
  __sanitizer_print_stack_trace();
  _exit(FZ_EXIT_HANG);
}

static pid_t parent_pid;

void fz_die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "segfuzz: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  if (getpid() != parent_pid) _exit(FZ_EXIT_HARNESS);
  exit(2);
}

sw_options *fz_opts(void) {
  sw_options *o = NULL;
  FZ_MUST(sw_options_create(&o));
  return o;
}

void fz_set(sw_options *o, sw_option key, double v) {
  FZ_MUST(sw_options_set_double(o, key, v));
}

void fz_tick(void) { nanosleep(&(struct timespec){0, 2000000}, NULL); }

void fz_probe(const char *path) {
  sw_segment_info in;
  FZ(sw_segment_probe(path, &in), "sw_segment_probe");
}

static int64_t custom_clock(void *user) {
  (void)user;
  return FZ_NOW;
}

/* -------------------------------------------------------------- a copy */

static void write_copy(const char *path, const unsigned char *b, size_t n) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0 || (n && write(fd, b, n) != (ssize_t)n)) fz_die("cannot write %s", path);
  close(fd);
}

/* In the child: every mode, then swctl's reads; stdout to /dev/null. */
static void __attribute__((noreturn)) child(const fz_kind *k, int v, const char *dir,
                                            const unsigned char *b, size_t n) {
  char path[512];
  snprintf(path, sizeof path, "%s/seg", dir);
  signal(SIGALRM, on_alarm);
  int null = open("/dev/null", O_WRONLY);
  if (null >= 0) dup2(null, 1);
  for (int m = 0; m < FZ_NMODES; m++) fz_cur->open_rc[m] = 1;
  for (int m = 0; m < FZ_NMODES; m++) {
    write_copy(path, b, n);
    k->drive(v, path, m);
  }
  write_copy(path, b, n);
  char *ls[] = {"swctl", "ls", (char *)dir, "--json", NULL};
  char *list[] = {"swctl", "list", path, NULL};
  char *dump[] = {"swctl", "dump", path, "--top", "50", NULL};
  char **cmds[] = {ls, list, dump};
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
    int argc = 0;
    while (cmds[i][argc]) argc++;
    fz_begin("swctl %s%s", cmds[i][1], argc > 3 ? " ..." : "");
    fz_end(-swctl_main(argc, cmds[i])); /* exit status 1: an error said, not a crash */
    fflush(stdout);
  }
  alarm(0);
  _exit(0);
}

enum { FZ_OK, FZ_HANG, FZ_CRASH, FZ_SANITIZER, FZ_HARNESS, FZ_NOUTCOME };
static const char *const outcome_names[FZ_NOUTCOME] = {"ok", "hang", "crash",
                                                       "sanitizer report", "harness error"};

static bool file_has(const char *path, const char *what) {
  FILE *f = fopen(path, "r");
  if (f == NULL) return false;
  char line[1024];
  bool found = false;
  while (!found && fgets(line, sizeof line, f)) found = strstr(line, what) != NULL;
  fclose(f);
  return found;
}

static int classify(int st, const char *err) {
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return FZ_OK;
  if (WIFEXITED(st) && WEXITSTATUS(st) == FZ_EXIT_HANG) return FZ_HANG;
  if (WIFEXITED(st) && WEXITSTATUS(st) == FZ_EXIT_HARNESS) return FZ_HARNESS;
  if (file_has(err, "SEGV on") || file_has(err, "BUS on") || file_has(err, "FPE on") ||
      file_has(err, "stack-overflow on") || WIFSIGNALED(st))
    return FZ_CRASH;
  return FZ_SANITIZER;
}

/* Run one copy in a child; its outcome. show: its stderr shown after. */
static int run_copy(const fz_kind *k, int v, const char *dir, const unsigned char *b, size_t n,
                    fz_res *res, bool show, int *status) {
  char err[512];
  snprintf(err, sizeof err, "%s/stderr", dir);
  memset(res, 0, sizeof *res);
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) fz_die("fork: %s", strerror(errno));
  if (pid == 0) {
    fz_cur = res;
    int fd = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) dup2(fd, 2);
    child(k, v, dir, b, n);
  }
  int st;
  while (waitpid(pid, &st, 0) < 0)
    if (errno != EINTR) fz_die("waitpid: %s", strerror(errno));
  *status = st;
  if (show) {
    fz_bytes e = fz_read_file(err);
    fwrite(e.p, 1, e.n, stdout);
    fz_bytes_free(&e);
  }
  return classify(st, err);
}

/* ---------------------------------------------------------------- main */

typedef struct fz_opts_t {
  const fz_kind *kind;
  uint64_t seed;
  long count, index;
  int jobs;
  const char *save, *replay, *variant, *argv0;
} fz_args;

/* Per copy, in memory shared by the workers. */
typedef struct fz_slot {
  fz_res res;
  int outcome;
  int variant;
  int status; /* the child's, from waitpid */
} fz_slot;

static void copy_file(const char *from, const char *to) {
  fz_bytes b = fz_read_file(from);
  write_copy(to, b.p, b.n);
  fz_bytes_free(&b);
}

/* Save a failing copy and its log; say where, and the log's first lines. */
static void report_failure(const fz_args *a, const fz_base *base, long i, const char *dir,
                           const unsigned char *b, size_t n, const fz_slot *s,
                           const char *desc) {
  char seg[1024], log[1024], err[512];
  mkdir(a->save, 0755);
  snprintf(seg, sizeof seg, "%s/%s-%s-seed%llu-copy%ld.seg", a->save, a->kind->name,
           base->variant, (unsigned long long)a->seed, i);
  snprintf(log, sizeof log, "%s/%s-%s-seed%llu-copy%ld.log", a->save, a->kind->name,
           base->variant, (unsigned long long)a->seed, i);
  snprintf(err, sizeof err, "%s/stderr", dir);
  write_copy(seg, b, n);
  copy_file(err, log);
  FILE *f = fopen(log, "a");
  if (f) {
    fprintf(f, "\nsegfuzz: %s, copy %ld, seed %llu, variant %s: %s in: %s\ndamage:%s\n",
            a->kind->name, i, (unsigned long long)a->seed, base->variant,
            outcome_names[s->outcome], s->res.step, desc);
    fclose(f);
  }
  char how[32];
  snprintf(how, sizeof how, WIFSIGNALED(s->status) ? "signal %d" : "exit status %d",
           WIFSIGNALED(s->status) ? WTERMSIG(s->status) : WEXITSTATUS(s->status));
  printf("FAIL %s copy %ld (seed %llu, variant %s): %s (%s) in `%s`\n  damage:%s\n  saved: %s\n"
         "  again: %s %s --seed %llu --index %ld   or   %s %s --replay %s --variant %s\n",
         a->kind->name, i, (unsigned long long)a->seed, base->variant, outcome_names[s->outcome],
         how, s->res.step, desc, seg, a->argv0, a->kind->name, (unsigned long long)a->seed, i,
         a->argv0, a->kind->name, seg, base->variant);
  FILE *e = fopen(err, "r");
  char line[512];
  int shown = 0;
  while (e && shown < 24 && fgets(line, sizeof line, e)) {
    if (strstr(line, "ERROR") || strstr(line, "runtime error") || strstr(line, "HANG") ||
        strstr(line, "    #") || shown) {
      printf("    %s", line);
      shown++;
    }
  }
  if (e) fclose(e);
  fflush(stdout);
}

static char *make_dir(const char *what) {
  char *dir = malloc(256);
  snprintf(dir, 256, "/dev/shm/segfuzz-%d-%s-XXXXXX", (int)getpid(), what);
  if (mkdtemp(dir) == NULL) fz_die("mkdtemp %s: %s", dir, strerror(errno));
  return dir;
}

static void remove_dir(const char *dir) {
  DIR *d = opendir(dir);
  struct dirent *e;
  char p[1024];
  while (d && (e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    unlink(p);
  }
  if (d) closedir(d);
  rmdir(dir);
}

/* One worker: copies w, w + jobs, ... */
static void worker(const fz_args *a, const fz_base *bases, int w, fz_slot *slots,
                   bool *failed) {
  char *dir = make_dir("w");
  char desc[1024];
  for (long i = w; i < a->count; i += a->jobs) {
    if (a->index >= 0 && i != a->index) continue;
    fz_rng r = fz_rng_for(a->seed, a->kind->name, (uint64_t)i);
    int v = (int)fz_below(&r, (uint64_t)a->kind->nvariants);
    unsigned char *b;
    size_t n;
    fz_damage(&bases[v], &r, &b, &n, desc, sizeof desc);
    fz_slot *s = &slots[i];
    s->variant = v;
    s->outcome = run_copy(a->kind, v, dir, b, n, &s->res, a->index >= 0, &s->status);
    if (s->outcome != FZ_OK) {
      *failed = true;
      report_failure(a, &bases[v], i, dir, b, n, s, desc);
    } else if (a->index >= 0) {
      printf("copy %ld (variant %s): ok; damage:%s\n", i, bases[v].variant, desc);
    }
    free(b);
  }
  remove_dir(dir);
  free(dir);
}

static void print_counts(const char *what, const uint32_t *count) {
  printf("  %-24s", what);
  for (int i = 0; i < FZ_NRC; i++)
    if (count[i])
      printf(" %s %u", i == 0 ? "ok" : i == FZ_NRC - 1 ? "other-negative" : sw_err_name(-i),
             count[i]);
  printf("\n");
}

static void summary(const fz_args *a, const fz_base *bases, const fz_slot *slots, double secs) {
  uint32_t open_rc[FZ_NMODES][FZ_NRC] = {{0}}, calls[FZ_NRC] = {0};
  long outcome[FZ_NOUTCOME] = {0}, per_variant[16] = {0}, ncalls = 0, slow = 0, run = 0;
  for (long i = 0; i < a->count; i++) {
    const fz_slot *s = &slots[i];
    if (s->outcome < 0) continue;
    run++;
    outcome[s->outcome]++;
    per_variant[s->variant]++;
    for (int m = 0; m < FZ_NMODES; m++)
      if (s->res.open_rc[m] <= 0) open_rc[m][-s->res.open_rc[m] < FZ_NRC ? -s->res.open_rc[m] : 0]++;
    for (int c = 0; c < FZ_NRC; c++) calls[c] += s->res.rc_count[c];
    ncalls += s->res.calls;
    slow += s->res.slow;
  }
  printf("segfuzz %s: seed %llu, %ld damaged copies (", a->kind->name,
         (unsigned long long)a->seed, run);
  for (int v = 0; v < a->kind->nvariants; v++)
    printf("%s%s %ld", v ? ", " : "", bases[v].variant, per_variant[v]);
  printf(") in %.1f s, each opened in %d modes\n", secs, FZ_NMODES);
  for (int m = 0; m < FZ_NMODES; m++) {
    char what[64];
    snprintf(what, sizeof what, "open %s:", fz_mode_names[m]);
    print_counts(what, open_rc[m]);
  }
  char what[64];
  snprintf(what, sizeof what, "%ld calls:", ncalls);
  print_counts(what, calls);
  printf("  copies ended early by a call of 1 s or more (a bounded lock wait): %ld\n", slow);
  printf("  crashes %ld, hangs %ld, sanitizer reports %ld, harness errors %ld\n",
         outcome[FZ_CRASH], outcome[FZ_HANG], outcome[FZ_SANITIZER], outcome[FZ_HARNESS]);
}

static int usage(void) {
  fprintf(stderr, "usage: segfuzz registry|keyed|breaker [--seed S] [--count N] [--jobs J] "
                  "[--save DIR] [--call-bound SECONDS] [--index I] "
                  "[--replay FILE --variant V]\n");
  return 2;
}

static int replay(const fz_args *a, const fz_base *bases) {
  int v = -1;
  for (int i = 0; i < a->kind->nvariants; i++)
    if (a->variant && strcmp(a->variant, bases[i].variant) == 0) v = i;
  if (v < 0) return usage();
  fz_bytes b = fz_read_file(a->replay);
  char *dir = make_dir("replay");
  fz_res *res = mmap(NULL, sizeof *res, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  int st;
  int outcome = run_copy(a->kind, v, dir, b.p, b.n, res, true, &st);
  printf("replay %s (variant %s): %s%s%s\n", a->replay, bases[v].variant, outcome_names[outcome],
         outcome ? " in " : "", outcome ? res->step : "");
  remove_dir(dir);
  return outcome == FZ_OK ? 0 : 1;
}

int main(int argc, char **argv) {
  parent_pid = getpid();
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc < 2) return usage();
  fz_args a = {.seed = 1, .count = 2000, .index = -1, .jobs = 2, .save = "segfuzz-failures",
               .argv0 = argv[0]};
  const fz_kind *kinds[] = {&fz_registry_kind, &fz_keyed_kind, &fz_breaker_kind};
  for (int i = 0; i < 3; i++)
    if (strcmp(argv[1], kinds[i]->name) == 0) a.kind = kinds[i];
  if (a.kind == NULL) return usage();
  for (int i = 2; i < argc; i++) {
    const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (v == NULL) return usage();
    i++;
    if (strcmp(o, "--seed") == 0) a.seed = strtoull(v, NULL, 0);
    else if (strcmp(o, "--count") == 0) a.count = strtol(v, NULL, 0);
    else if (strcmp(o, "--jobs") == 0) a.jobs = atoi(v);
    else if (strcmp(o, "--save") == 0) a.save = v;
    else if (strcmp(o, "--call-bound") == 0) fz_call_bound = (unsigned)atoi(v);
    else if (strcmp(o, "--index") == 0) a.index = strtol(v, NULL, 0);
    else if (strcmp(o, "--replay") == 0) a.replay = v;
    else if (strcmp(o, "--variant") == 0) a.variant = v;
    else return usage();
  }
  if (a.count < 1 || a.jobs < 1 || fz_call_bound < 1) return usage();
  if (a.index >= a.count) a.count = a.index + 1;
  if (a.index >= 0) a.jobs = 1;
  sw_clock_set_custom(custom_clock, NULL);

  /* the base segments, made by the library itself */
  char *mk = make_dir("make");
  fz_base *bases = calloc((size_t)a.kind->nvariants, sizeof *bases);
  for (int v = 0; v < a.kind->nvariants; v++) a.kind->make(v, mk, &bases[v]);
  remove_dir(mk);
  if (a.replay) return replay(&a, bases);
  for (int v = 0; v < a.kind->nvariants; v++)
    fprintf(stderr, "segfuzz %s/%s: %zu bytes; words to damage: %zu structure, %zu layout, "
            "%zu state\n", a.kind->name, bases[v].variant, bases[v].bytes.n,
            bases[v].tg.n[FZ_STRUCT], bases[v].tg.n[FZ_LAYOUT], bases[v].tg.n[FZ_STATE]);

  size_t shared = (size_t)a.count * sizeof(fz_slot) + sizeof(bool);
  fz_slot *slots = mmap(NULL, shared, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (slots == MAP_FAILED) fz_die("mmap: %s", strerror(errno));
  bool *failed = (bool *)(slots + a.count);
  for (long i = 0; i < a.count; i++) slots[i].outcome = -1;
  int64_t started = mono_ms();
  pid_t *workers = calloc((size_t)a.jobs, sizeof *workers);
  for (int w = 0; w < a.jobs; w++) {
    fflush(NULL);
    if ((workers[w] = fork()) == 0) {
      parent_pid = getpid(); /* a worker dies on a harness error as the parent would */
      worker(&a, bases, w, slots, failed);
      exit(0);
    }
  }
  int bad_worker = 0;
  for (int w = 0; w < a.jobs; w++) {
    int st;
    if (waitpid(workers[w], &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) bad_worker = 1;
  }
  if (a.index < 0) summary(&a, bases, slots, (double)(mono_ms() - started) / 1000.0);
  if (bad_worker) fprintf(stderr, "segfuzz: a worker failed\n");
  return *failed || bad_worker ? 1 : 0;
}
