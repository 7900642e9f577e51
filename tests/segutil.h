/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers of the shared-segment tests (check_segment.c, check_segment_files.c):
 * names under the runner's pid, opening and refusing, file bytes, child
 * processes, and the cleanup of whatever a failed test left behind. */
#ifndef SW_SEGUTIL_H
#define SW_SEGUTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#define ck_msg_has(text)                                                                   \
  ck_assert_msg(strstr(sw_last_error(), (text)) != NULL, "message \"%s\" lacks \"%s\"",    \
                sw_last_error(), (text))

/* The window all counting tests use: [T0, T0 + 500) of the per-second
 * array (2 x 500 ms), inside the second [T0, T0 + 1000). */
#define T0 INT64_C(1000000)

static char g_dir[128];   /* mkdtemp directory for file segments */
static int g_main_pid;    /* the runner's pid: prefix of every name */

/* ---------------------------------------------------------------- names */

static inline void shm_name(char *buf, size_t n, const char *tag) {
  snprintf(buf, n, "swck-%d-%d-%s", g_main_pid, (int)getpid(), tag);
  ck_assert_uint_le(strlen(buf), SW_NAME_MAX);
}

static inline void file_name(char *buf, size_t n, const char *tag) {
  snprintf(buf, n, "%s/%d-%s", g_dir, (int)getpid(), tag);
}

/* Where a segment's bytes are: /dev/shm/<name> or the path itself. */
static inline void seg_path(char *buf, size_t n, const char *name) {
  if (strchr(name, '/') == NULL)
    snprintf(buf, n, "/dev/shm/%s", name);
  else
    snprintf(buf, n, "%s", name);
}

/* -------------------------------------------------------------- helpers */

static inline sw_options *rule(double threshold) {
  sw_options *o = NULL;
  ck_ok(sw_options_create(&o));
  ck_ok(sw_options_set(o, SW_OPT_GRADE, SW_GRADE_QPS));
  ck_ok(sw_options_set_double(o, SW_OPT_THRESHOLD, threshold));
  return o;
}

/* Default options for the tests: a threshold nothing here reaches. */
static inline sw_options *std_opts(void) {
  static sw_options *o;
  if (o == NULL) o = rule(1e9);
  return o;
}
#define D std_opts()

static inline sw_segment *seg_open(const char *name, uint32_t capacity, const sw_options *o,
                            uint32_t flags) {
  sw_segment *seg = NULL;
  ck_ok(sw_segment_open(&seg, name, capacity, o, flags));
  ck_assert_ptr_nonnull(seg);
  ck_assert_ptr_nonnull(sw_segment_registry(seg));
  return seg;
}

/* Open must fail with code and leave *out NULL. */
static inline void seg_refused(const char *name, uint32_t capacity, const sw_options *o,
                        uint32_t flags, int code, const char *words) {
  sw_segment *seg = (sw_segment *)&seg;
  int rc = sw_segment_open(&seg, name, capacity, o, flags);
  ck_assert_msg(rc == code, "open %s flags 0x%x: %s (%s), expected %s", name, flags,
                sw_err_name(rc), sw_last_error(), sw_err_name(code));
  ck_assert_ptr_null(seg);
  if (words) ck_msg_has(words);
}

static inline sw_limiter *get(sw_segment *seg, const char *name) {
  sw_limiter *l = NULL;
  ck_ok(sw_registry_get(sw_segment_registry(seg), name, &l));
  ck_assert_ptr_nonnull(l);
  return l;
}

static inline sw_limiter *find(sw_segment *seg, const char *name) {
  sw_limiter *l = NULL;
  ck_sw(sw_registry_find(sw_segment_registry(seg), name, &l), 1);
  ck_assert_ptr_nonnull(l);
  return l;
}

static inline void absent(sw_segment *seg, const char *name) {
  sw_limiter *l = NULL;
  ck_sw(sw_registry_find(sw_segment_registry(seg), name, &l), 0);
}

/* n entries of one unit at t, all expected to pass. */
static inline void pass_n(sw_limiter *l, int64_t t, int n) {
  for (int i = 0; i < n; i++) {
    sw_decision d;
    ck_ok(sw_limiter_entry_at(l, t, 1, 0, &d));
    ck_assert_int_eq(d.verdict, SW_VERDICT_PASS);
  }
}

static inline int64_t window_pass(sw_limiter *l, int64_t t) {
  return sw_metric_window_pass_at(sw_node_second_metric(sw_limiter_node(l)), t);
}

static inline int64_t file_size(const char *name) {
  char path[256];
  seg_path(path, sizeof path, name);
  struct stat st;
  if (stat(path, &st) < 0) return -1;
  return (int64_t)st.st_size;
}

static inline unsigned char *slurp(const char *path, size_t *size) {
  int fd = open(path, O_RDONLY);
  ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
  struct stat st;
  ck_assert_int_eq(fstat(fd, &st), 0);
  unsigned char *buf = malloc((size_t)st.st_size + 1);
  ck_assert_ptr_nonnull(buf);
  ck_assert_int_eq(pread(fd, buf, (size_t)st.st_size, 0), st.st_size);
  close(fd);
  *size = (size_t)st.st_size;
  return buf;
}

static inline void poke(const char *path, uint64_t off, const void *p, size_t n) {
  int fd = open(path, O_WRONLY);
  ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
  ck_assert_int_eq(pwrite(fd, p, n, (off_t)off), (ssize_t)n);
  close(fd);
}

static inline void poke_u32(const char *path, uint64_t off, uint32_t v) { poke(path, off, &v, 4); }
static inline void poke_u64(const char *path, uint64_t off, uint64_t v) { poke(path, off, &v, 8); }

static inline void write_file(const char *path, const void *p, size_t n) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ck_assert_msg(fd >= 0, "create %s: %s", path, strerror(errno));
  if (n) ck_assert_int_eq(write(fd, p, n), (ssize_t)n);
  close(fd);
}

static inline uint64_t rd_u64(const unsigned char *b, uint64_t off) {
  uint64_t v;
  memcpy(&v, b + off, 8);
  return v;
}

static inline uint32_t rd_u32(const unsigned char *b, uint64_t off) {
  uint32_t v;
  memcpy(&v, b + off, 4);
  return v;
}

static inline uint64_t fnv64(const unsigned char *p, size_t n) {
  uint64_t h = UINT64_C(14695981039346656037);
  while (n--) h = (h ^ *p++) * UINT64_C(1099511628211);
  return h;
}

/* The registry's name hash: 64-bit FNV-1a folded to 32 bits. */
static inline uint32_t name_hash(const char *s) {
  uint64_t h = fnv64((const unsigned char *)s, strlen(s));
  return (uint32_t)(h ^ (h >> 32));
}

static inline void boot_id(char out[40]) {
  memset(out, 0, 40);
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (f == NULL) return;
  if (fgets(out, 40, f) == NULL) out[0] = '\0';
  out[strcspn(out, "\n")] = '\0';
  fclose(f);
}

/* ------------------------------------------------------------ processes */

static inline void flush_all(void) {
  fflush(stdout);
  fflush(stderr);
}

/* In a child: report and leave with a code the parent checks. */
#define CHILD_CHECK(cond, code)                                                              \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      fprintf(stderr, "child %d: %s failed at line %d (last error: %s)\n", (int)getpid(),    \
              #cond, __LINE__, sw_last_error());                                             \
      _exit(code);                                                                           \
    }                                                                                        \
  } while (0)

/* 0 for a clean exit 0; the exit code; 128 + signal if killed. */
static inline int wait_child(pid_t pid) {
  int st = 0;
  while (waitpid(pid, &st, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  if (WIFEXITED(st)) return WEXITSTATUS(st);
  if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
  return -1;
}

static inline void drop_to_nobody(void) {
  CHILD_CHECK(setgroups(0, NULL) == 0, 90);
  CHILD_CHECK(setgid(65534) == 0, 91);
  CHILD_CHECK(setuid(65534) == 0, 92);
  CHILD_CHECK(geteuid() == 65534, 93);
}

static inline int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  remove(path);
  return 0;
}

static inline void cleanup(void) {
  nftw(g_dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
  char prefix[32];
  snprintf(prefix, sizeof prefix, "swck-%d-", g_main_pid);
  DIR *d = opendir("/dev/shm");
  if (d == NULL) return;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) sw_segment_unlink(e->d_name);
  closedir(d);
}

/* Every program starts with this: the temporary directory, the pid prefix. */
static inline int seg_setup(void) {
  g_main_pid = (int)getpid();
  snprintf(g_dir, sizeof g_dir, "/tmp/swck-segment-XXXXXX");
  if (mkdtemp(g_dir) == NULL) {
    perror("mkdtemp");
    return -1;
  }
  chmod(g_dir, 0755); /* uid 65534 reaches the files (tests that drop to nobody) */
  return 0;
}

#endif /* SW_SEGUTIL_H */
