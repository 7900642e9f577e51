/* SPDX-License-Identifier: Apache-2.0 */
/* Memory that cannot run out later: a segment of every kind (registry,
 * keyed table, breaker) reserves its pages when it is created, so a
 * /dev/shm or a tmpfs too small for it is SW_ENOMEM at the open — naming
 * the segment, its size, the free space and the setting to change — and
 * never a SIGBUS at a later first touch. On small file systems mounted in a
 * private mount namespace (root): a /dev/shm too small, a tmpfs that holds
 * exactly N segments, one filled between the free-space check and the
 * reservation, ramfs (no fallocate: pages written instead). Also: a creator
 * killed or stopped while it reserves, and files shorter or longer than
 * their header says (SW_ECORRUPT, not a SIGBUS). */
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/statvfs.h>

#include "segutil.h"

enum { REG, KEYED, BRK, NKINDS };
static const char *const kind_name[NKINDS] = {"registry", "keyed", "breaker"};
static char g_msg[2048]; /* the message of the last open_kind */

/* A rule every kind takes (a keyed table counts at most 2^20 a window);
 * made without Check's asserts, which a victim process cannot use. */
static const sw_options *opts(void) {
  static sw_options *o;
  if (o == NULL && sw_options_create(&o) == SW_OK)
    sw_options_set_double(o, SW_OPT_THRESHOLD, 1000);
  return o;
}

/* Open (and close) a segment of a kind; its capacity for a registry or a
 * keyed table. The code, and the message in g_msg. */
static int open_kind(int kind, const char *name, uint32_t cap, uint32_t flags) {
  const sw_options *o = flags & (SW_SEGMENT_READONLY | SW_SEGMENT_ATTACH) ? NULL : opts();
  int rc;
  if (kind == REG) {
    sw_segment *s = NULL;
    rc = sw_segment_open(&s, name, cap, o, flags);
    snprintf(g_msg, sizeof g_msg, "%s", sw_last_error());
    sw_segment_close(s);
  } else if (kind == KEYED) {
    sw_keyed *k = NULL;
    rc = sw_keyed_open(&k, name, cap, o, flags);
    snprintf(g_msg, sizeof g_msg, "%s", sw_last_error());
    sw_keyed_free(k);
  } else {
    sw_breaker *b = NULL;
    rc = sw_breaker_open(&b, name, NULL, flags);
    snprintf(g_msg, sizeof g_msg, "%s", sw_last_error());
    sw_breaker_free(b);
  }
  return rc;
}

static struct stat file_stat(const char *name) {
  char path[256];
  seg_path(path, sizeof path, name);
  struct stat st;
  memset(&st, 0, sizeof st);
  if (stat(path, &st) < 0) st.st_size = -1;
  return st;
}

/* Bytes allocated to the file. */
static int64_t allocated(const char *name) {
  struct stat st = file_stat(name);
  return st.st_size < 0 ? -1 : (int64_t)st.st_blocks * 512;
}

static int64_t pages(int64_t bytes) { return (bytes + 4095) / 4096 * 4096; }

/* The size of a new segment of a kind (made in the test directory). */
static int64_t size_of(int kind, uint32_t cap) {
  char name[256];
  file_name(name, sizeof name, "measure");
  ck_assert_int_eq(open_kind(kind, name, cap, SW_SEGMENT_RESET), SW_OK);
  int64_t size = file_stat(name).st_size;
  ck_ok(sw_segment_unlink(name));
  return size;
}

/* Write into every page of the file at path through a shared mapping (the
 * bytes it has: nothing changes): a page without memory behind it is a
 * SIGBUS, which kills the child that calls this. */
static void touch_every_page(const char *path) {
  int fd = open(path, O_RDWR);
  CHILD_CHECK(fd >= 0, 70);
  struct stat st;
  CHILD_CHECK(fstat(fd, &st) == 0, 71);
  volatile unsigned char *p =
      mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  CHILD_CHECK(p != MAP_FAILED, 72);
  for (off_t off = 0; off < st.st_size; off += 4096) p[off] = p[off];
  munmap((void *)p, (size_t)st.st_size);
  close(fd);
}

/* Fill the file system of dir to its last block (a file dir/filler). */
static void fill(const char *dir) {
  char path[256];
  snprintf(path, sizeof path, "%s/filler", dir);
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0600);
  CHILD_CHECK(fd >= 0, 73);
  static const char zeros[4096];
  while (write(fd, zeros, sizeof zeros) > 0) {
  }
  CHILD_CHECK(errno == ENOSPC, 74);
  close(fd);
}

/* In a child of a private mount namespace with a file system (tmpfs with
 * its mount options, or ramfs) mounted at dir: body(dir), which leaves by
 * CHILD_CHECK on failure. 0 when it could not run (not root). */
static int in_mount(const char *fstype, const char *options, const char *dir,
                    void (*body)(const char *dir)) {
  if (geteuid() != 0) {
    fprintf(stderr, "%s: skipped: mounting a %s needs root\n", __func__, fstype);
    return 0;
  }
  mkdir(dir, 0755);
  flush_all();
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    CHILD_CHECK(unshare(CLONE_NEWNS) == 0, 80);
    CHILD_CHECK(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0, 81);
    CHILD_CHECK(mount(fstype, dir, fstype, 0, options) == 0, 82);
    body(dir);
    _exit(0);
  }
  int rc = wait_child(pid);
  ck_assert_msg(rc == 0, "on a %s (%s) at %s: child status %d%s", fstype, options ? options : "",
                dir, rc, rc == 128 + SIGBUS ? " (SIGBUS)" : "");
  return 1;
}

/* ------------------------------------------------------ a /dev/shm too small */

static void dev_shm_too_small(const char *dir) {
  char name[64];
  const uint32_t caps[NKINDS] = {64, 100000, 0}; /* 2.4 MB, 6 MB or more; a breaker's few KB */
  for (int kind = 0; kind < NKINDS; kind++) {
    if (kind == BRK) fill(dir); /* smaller than a megabyte: no room at all */
    shm_name(name, sizeof name, kind_name[kind]);
    CHILD_CHECK(open_kind(kind, name, caps[kind], SW_SEGMENT_CREATE) == SW_ENOMEM, 10 + kind);
    char needs[128];
    snprintf(needs, sizeof needs, "%s needs ", name);
    fprintf(stderr, "  %s: %s\n", kind_name[kind], g_msg);
    CHILD_CHECK(strstr(g_msg, needs) != NULL, 20 + kind);
    CHILD_CHECK(strstr(g_msg, "; /dev/shm has ") != NULL && strstr(g_msg, "free of 1.0 MiB") != NULL,
                30 + kind);
    CHILD_CHECK(strstr(g_msg, "docker run --shm-size=") != NULL, 40 + kind);
    CHILD_CHECK(strstr(g_msg, "emptyDir with medium: Memory, sizeLimit: ") != NULL, 50 + kind);
    CHILD_CHECK((strstr(g_msg, "smaller capacity") != NULL) == (kind != BRK), 60 + kind);
    CHILD_CHECK(file_stat(name).st_size == -1, 65 + kind); /* nothing left behind */
  }
}

/* A 1 MiB /dev/shm (Docker's is 64 MB): a registry, a keyed table and a
 * breaker that do not fit are SW_ENOMEM, with what to do. */
START_TEST(test_dev_shm_too_small) {
  in_mount("tmpfs", "size=1m", "/dev/shm", dev_shm_too_small);
}
END_TEST

/* ------------------------------------------ a tmpfs that holds exactly N */

#define N_FIT 3
static const uint32_t g_fit_cap[NKINDS] = {2, 10000, 0};
static int64_t g_fit_size[NKINDS];
static int g_fit_kind;

static void holds_n(const char *dir) {
  const int kind = g_fit_kind;
  char name[N_FIT + 1][256];
  for (int i = 0; i <= N_FIT; i++) snprintf(name[i], sizeof name[i], "%s/%s-%d", dir, kind_name[kind], i);
  for (int i = 0; i < N_FIT; i++) {
    CHILD_CHECK(open_kind(kind, name[i], g_fit_cap[kind], SW_SEGMENT_CREATE) == SW_OK, 10 + i);
    CHILD_CHECK(allocated(name[i]) == pages(g_fit_size[kind]), 20 + i); /* reserved, all of it */
  }
  struct statvfs vfs;
  CHILD_CHECK(statvfs(dir, &vfs) == 0 && vfs.f_bavail == 0, 30);
  sw_segment_info info; /* what swctl ls shows */
  CHILD_CHECK(sw_segment_probe(name[0], &info) == SW_OK && info.size == g_fit_size[kind], 36);
  CHILD_CHECK(info.allocated == pages(g_fit_size[kind]) && info.fs_free == 0, 37);
  CHILD_CHECK(info.fs_size == N_FIT * pages(g_fit_size[kind]), 38);
  CHILD_CHECK(open_kind(kind, name[N_FIT], g_fit_cap[kind], SW_SEGMENT_CREATE) == SW_ENOMEM, 31);
  char needs[300];
  snprintf(needs, sizeof needs, "%s needs %lld bytes", name[N_FIT], (long long)g_fit_size[kind]);
  CHILD_CHECK(strstr(g_msg, needs) != NULL, 32);
  CHILD_CHECK(strstr(g_msg, "has 0 bytes free") != NULL, 33);
  CHILD_CHECK(strstr(g_msg, "size= mount option") != NULL, 34);
  CHILD_CHECK(file_stat(name[N_FIT]).st_size == -1, 35);
  /* every page of the N segments has its memory: no SIGBUS, the tables work */
  for (int i = 0; i < N_FIT; i++) touch_every_page(name[i]);
  if (kind == KEYED) {
    sw_keyed *k;
    CHILD_CHECK(sw_keyed_open(&k, name[0], g_fit_cap[kind], opts(), 0) == SW_OK, 40);
    for (uint32_t i = 0; i < g_fit_cap[kind]; i++) {
      sw_decision d;
      CHILD_CHECK(sw_keyed_entry_at(k, T0, &i, sizeof i, 1, 0, &d) == SW_OK, 41);
    }
    sw_keyed_info in;
    CHILD_CHECK(sw_keyed_stats(k, &in) == SW_OK && in.keys == g_fit_cap[kind], 42);
    sw_keyed_free(k);
  }
}

/* A tmpfs of exactly N segments' pages: N are created (sw_segment_probe:
 * each holds its pages, none free), the next is SW_ENOMEM (sparse segments
 * would all be created, and die at a first touch); then every page of the
 * N is written: no SIGBUS. */
START_TEST(test_tmpfs_holds_exactly_n) {
  char dir[256], opt[64];
  snprintf(dir, sizeof dir, "%s/fit", g_dir);
  for (int kind = 0; kind < NKINDS; kind++) {
    g_fit_kind = kind;
    g_fit_size[kind] = size_of(kind, g_fit_cap[kind]);
    snprintf(opt, sizeof opt, "size=%lld", (long long)(N_FIT * pages(g_fit_size[kind])));
    in_mount("tmpfs", opt, dir, holds_n);
  }
}
END_TEST

/* --------------------------------- filled between the check and the reservation */

/* The victim: create a keyed table of capacity cap at name; its message
 * on stdout, its code negated as its exit status. */
static int victim_create(const char *name, uint32_t cap) {
  int rc = open_kind(KEYED, name, cap, SW_SEGMENT_CREATE);
  printf("%s\n", rc ? g_msg : "created");
  fprintf(stderr, "  victim: %s: %s\n", sw_err_name(rc), rc ? g_msg : "created");
  return -rc;
}

/* Start this program as a victim creating name, with env ("NAME=value"
 * strings, NULL last) added to its environment; its stdout into *out (a
 * pipe's end). No Check asserts: it runs in test children too. */
static pid_t victim_start(const char *name, uint32_t cap, const char *const *env, int *out) {
  int p[2];
  if (pipe(p) < 0) return -1;
  flush_all();
  pid_t pid = fork();
  if (pid == 0) {
    char c[16];
    snprintf(c, sizeof c, "%u", cap);
    for (; env && *env; env++) putenv((char *)*env);
    dup2(p[1], 1);
    close(p[0]);
    execl("/proc/self/exe", "victim", "--victim", name, c, (char *)NULL);
    _exit(99);
  }
  close(p[1]);
  *out = p[0];
  return pid;
}

/* A victim's end: its status (wait_child's) and its output into out. */
static int victim_end(pid_t pid, int fd, char *out, size_t cap) {
  ssize_t n, len = 0;
  while ((n = read(fd, out + len, cap - 1 - (size_t)len)) > 0) len += n;
  out[len] = '\0';
  close(fd);
  return wait_child(pid);
}

/* A victim run to its end. */
static int victim_run(const char *name, uint32_t cap, const char *const *env, char *out,
                      size_t outcap) {
  int fd;
  pid_t pid = victim_start(name, cap, env, &fd);
  return pid < 0 ? -1 : victim_end(pid, fd, out, outcap);
}

/* The environment of a victim whose fallocate answers as how says
 * (tests/shims/fallocate.c), preloaded (ASan: after its runtime). */
static const char *const *shim_env(const char *how) {
  static char preload[512], what[64], asan[512];
  static const char *env[4];
  const char *was = getenv("ASAN_OPTIONS");
  snprintf(preload, sizeof preload, "LD_PRELOAD=%s", SW_FALLOCATE_SHIM);
  snprintf(what, sizeof what, "SW_SHIM_FALLOCATE=%s", how);
  snprintf(asan, sizeof asan, "ASAN_OPTIONS=%s%sverify_asan_link_order=0", was ? was : "",
           was && *was ? ":" : "");
  env[0] = preload;
  env[1] = what;
  env[2] = asan;
  env[3] = NULL;
  return env;
}

/* fallocate as the file system has it, and one that cannot allocate ahead
 * (its pages written instead) */
static void filled_meanwhile(const char *dir) {
  for (int emulated = 0; emulated < 2; emulated++) {
    char name[256], out[2048];
    snprintf(name, sizeof name, "%s/late", dir);
    /* stopped once its mark is written: after the free-space check */
    const char *const *shim = shim_env("eopnotsupp");
    const char *const env[] = {"SW_TEST_KILL_AT=segment-marked:1:stop",
                               emulated ? shim[0] : NULL, shim[1], shim[2], NULL};
    int fd, st;
    pid_t pid = victim_start(name, 10000, env, &fd);
    CHILD_CHECK(pid > 0 && waitpid(pid, &st, WUNTRACED) == pid && WIFSTOPPED(st), 11);
    fill(dir);
    kill(pid, SIGCONT);
    CHILD_CHECK(victim_end(pid, fd, out, sizeof out) == -SW_ENOMEM, 12);
    CHILD_CHECK(strstr(out, emulated ? "(writing its pages: No space left on device)"
                                     : "(fallocate: No space left on device)") != NULL, 13);
    CHILD_CHECK(file_stat(name).st_size == -1, 14);
    char filler[256];
    snprintf(filler, sizeof filler, "%s/filler", dir);
    CHILD_CHECK(unlink(filler) == 0, 15);
    if (emulated) { /* with room, the pages written make a whole table */
      CHILD_CHECK(victim_run(name, 10000, env + 1, out, sizeof out) == 0, 16);
    } else {
      CHILD_CHECK(open_kind(KEYED, name, 10000, SW_SEGMENT_CREATE) == SW_OK, 16);
    }
    struct stat fst = file_stat(name);
    CHILD_CHECK((int64_t)fst.st_blocks * 512 == pages(fst.st_size), 17);
    touch_every_page(name);
    CHILD_CHECK(unlink(name) == 0, 18);
  }
}

/* The file system fills up after the free-space check: the reservation
 * itself refuses (SW_ENOMEM), with fallocate and with the pages written
 * where fallocate is not supported; the file goes, and the next open
 * creates it. */
START_TEST(test_filled_after_the_check) {
  char dir[256];
  snprintf(dir, sizeof dir, "%s/late", g_dir);
  in_mount("tmpfs", "size=4m", dir, filled_meanwhile);
}
END_TEST

/* ------------------------------------------ a file system without fallocate */

static void ramfs_pages(const char *dir) {
  const uint32_t caps[NKINDS] = {2, 10000, 0};
  for (int kind = 0; kind < NKINDS; kind++) {
    char name[256];
    snprintf(name, sizeof name, "%s/%s", dir, kind_name[kind]);
    CHILD_CHECK(open_kind(kind, name, caps[kind], SW_SEGMENT_CREATE) == SW_OK, 10 + kind);
    struct stat st = file_stat(name);
    CHILD_CHECK(st.st_size > 0 && (int64_t)st.st_blocks * 512 >= st.st_size, 20 + kind);
    CHILD_CHECK(open_kind(kind, name, caps[kind], 0) == SW_OK, 30 + kind);
  }
}

/* ramfs has no fallocate (EOPNOTSUPP) and no size (statvfs says 0 blocks):
 * a segment is created, every page allocated by a zero written into it. */
START_TEST(test_ramfs_without_fallocate) {
  char dir[256];
  snprintf(dir, sizeof dir, "%s/ramfs", g_dir);
  in_mount("ramfs", NULL, dir, ramfs_pages);
}
END_TEST

/* ------------------------------------------ killed or stopped while reserving */

/* A keyed table of 3 or more chunks of 8 MiB (capacity 400,000). */
#define BIG_CAP 400000u

/* A victim creating name with SW_TEST_KILL_AT=spec: killed there, or
 * stopped there (returned stopped) when spec ends in :stop. */
static pid_t victim_at(const char *spec, const char *name, uint32_t cap) {
  char var[96];
  snprintf(var, sizeof var, "SW_TEST_KILL_AT=%s", spec);
  const char *const env[] = {var, NULL};
  int fd, st;
  pid_t pid = victim_start(name, cap, env, &fd);
  ck_assert_int_gt(pid, 0);
  close(fd);
  ck_assert_int_eq(waitpid(pid, &st, WUNTRACED), pid);
  if (strstr(spec, ":stop")) {
    ck_assert_msg(WIFSTOPPED(st), "victim (%s) did not stop there: status %d", spec, st);
  } else {
    ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
                  "victim (%s) was not killed there: status %d", spec, st);
  }
  return pid;
}

/* A creator killed after its first chunk leaves a marked, partly reserved
 * file: refused without CREATE, created again (reserved once, whole) with
 * it. A small segment's only chunk, too. */
START_TEST(test_killed_while_reserving) {
  const uint32_t caps[] = {BIG_CAP, 16};
  for (int i = 0; i < 2; i++) {
    char name[64];
    shm_name(name, sizeof name, "reserving");
    victim_at("segment-reserving", name, caps[i]);
    struct stat st = file_stat(name);
    ck_assert_int_gt(st.st_size, 0);
    if (i == 0) ck_assert_int_eq(st.st_size, 8 << 20); /* one chunk of several */
    ck_assert_int_eq(open_kind(KEYED, name, caps[i], 0), SW_ECORRUPT);
    ck_assert_msg(strstr(g_msg, "never fully initialised"), "%s", g_msg);
    ck_assert_int_eq(open_kind(KEYED, name, caps[i], SW_SEGMENT_READONLY), SW_ECORRUPT);
    sw_keyed *k;
    ck_ok(sw_keyed_open(&k, name, caps[i], opts(), SW_SEGMENT_CREATE));
    ck_assert_int_eq(sw_keyed_created(k), 1);
    sw_decision d;
    ck_ok(sw_keyed_entry_at(k, T0, "a", 1, 1, 0, &d));
    sw_keyed_free(k);
    st = file_stat(name);
    ck_assert_int_eq((int64_t)st.st_blocks * 512, pages(st.st_size));
    ck_ok(sw_keyed_open(&k, name, caps[i], opts(), 0));
    sw_keyed_key s;
    ck_assert_int_eq(sw_keyed_lookup_at(k, T0, "a", 1, &s), 1);
    ck_assert_int_eq(s.pass, 1);
    sw_keyed_free(k);
    ck_ok(sw_segment_unlink(name));
  }
}
END_TEST

/* A creator stopped while it reserves holds the file's lock: other opens
 * wait at most 2 s and fail with SW_EBUSY naming it; once it is killed,
 * CREATE makes the table. */
START_TEST(test_stopped_while_reserving) {
  char name[64];
  shm_name(name, sizeof name, "stopped");
  pid_t pid = victim_at("segment-reserving:1:stop", name, BIG_CAP);
  ck_assert_int_eq(open_kind(KEYED, name, BIG_CAP, SW_SEGMENT_CREATE), SW_EBUSY);
  char holder[64];
  snprintf(holder, sizeof holder, "locked by process %d", (int)pid);
  ck_assert_msg(strstr(g_msg, holder), "%s", g_msg);
  ck_assert_int_eq(open_kind(KEYED, name, 0, SW_SEGMENT_READONLY), SW_EBUSY);
  kill(pid, SIGKILL);
  ck_assert_int_eq(wait_child(pid), 128 + SIGKILL);
  ck_assert_int_eq(open_kind(KEYED, name, BIG_CAP, SW_SEGMENT_CREATE), SW_OK);
  struct stat st = file_stat(name);
  ck_assert_int_eq((int64_t)st.st_blocks * 512, pages(st.st_size));
  ck_ok(sw_segment_unlink(name));
}
END_TEST

/* ------------------------------------------- interrupted, or not supported */

/* fallocate interrupted by signals (EINTR: the chunk given back): 50 in a
 * row, and the table is made, reserved whole; interrupted for ever, the
 * open fails after 1,000 with SW_EIO saying so, and the file is gone. */
START_TEST(test_interrupted_reservation) {
  char name[64], out[2048];
  shm_name(name, sizeof name, "eintr");
  int rc = victim_run(name, BIG_CAP, shim_env("eintr:50"), out, sizeof out);
  ck_assert_msg(rc == 0, "status %d: %s", rc, out);
  struct stat st = file_stat(name);
  ck_assert_int_eq((int64_t)st.st_blocks * 512, pages(st.st_size));
  ck_assert_int_eq(open_kind(KEYED, name, BIG_CAP, 0), SW_OK);
  ck_ok(sw_segment_unlink(name));
  rc = victim_run(name, 16, shim_env("eintr"), out, sizeof out);
  ck_assert_msg(rc == -SW_EIO, "status %d: %s", rc, out);
  ck_assert_msg(strstr(out, "interrupted by signals 1000 times in a row"), "%s", out);
  ck_assert_int_eq(file_stat(name).st_size, -1);
}
END_TEST

/* ----------------------------------------- shorter than the header says */

/* A file of each kind truncated below (or grown past) the size in its
 * header: SW_ECORRUPT in every mode, never a SIGBUS on a missing page;
 * its bytes back, it opens. */
START_TEST(test_size_differs_from_header) {
  const uint32_t caps[NKINDS] = {2, 1000, 0};
  const uint32_t modes[] = {0, SW_SEGMENT_CREATE, SW_SEGMENT_READONLY, SW_SEGMENT_ATTACH};
  for (int kind = 0; kind < NKINDS; kind++) {
    char name[256];
    file_name(name, sizeof name, kind_name[kind]);
    ck_assert_int_eq(open_kind(kind, name, caps[kind], SW_SEGMENT_CREATE), SW_OK);
    size_t len;
    unsigned char *bytes = slurp(name, &len);
    const int64_t size = (int64_t)len;
    const int64_t sizes[] = {size / 2, size - 1, size + 1, size + 4096}; /* a header's worth kept */
    for (int s = 0; s < 4; s++) {
      ck_assert_int_eq(truncate(name, (off_t)sizes[s]), 0);
      for (int m = 0; m < 4; m++) {
        ck_assert_msg(open_kind(kind, name, caps[kind], modes[m]) == SW_ECORRUPT,
                      "%s of %lld bytes, flags 0x%x: %s", kind_name[kind], (long long)sizes[s],
                      modes[m], g_msg);
        ck_assert_msg(strstr(g_msg, "header says"), "%s", g_msg);
      }
    }
    write_file(name, bytes, len);
    free(bytes);
    ck_assert_msg(open_kind(kind, name, caps[kind], 0) == SW_OK, "%s", g_msg);
    ck_ok(sw_segment_unlink(name));
  }
}
END_TEST

int main(int argc, char **argv) {
  if (argc == 4 && strcmp(argv[1], "--victim") == 0)
    return victim_create(argv[2], (uint32_t)atol(argv[3]));
  if (seg_setup() < 0) return EXIT_FAILURE;
  Suite *s = suite_create("segment_space");
  SW_TCASE(s, "full", test_dev_shm_too_small, test_tmpfs_holds_exactly_n,
           test_filled_after_the_check, test_ramfs_without_fallocate);
  SW_TCASE(s, "creation", test_killed_while_reserving, test_stopped_while_reserving,
           test_interrupted_reservation, test_size_differs_from_header);
  int rc = sw_test_run(s);
  cleanup();
  return rc;
}
