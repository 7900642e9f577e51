/* SPDX-License-Identifier: Apache-2.0 */
/* Hostile files under a segment's name: a name another user took first, a
 * non-libsw file whose first bytes are zero, FIFOs, devices, symbolic
 * links, "." and "..", a process that holds the file's lock, segments
 * larger than allowed or than memory — each refused with its code and a
 * message, nothing changed, nothing left behind. Also: new segments are
 * reserved whole, and sw_segment_created says who created one. */
#include <signal.h>
#include <sys/file.h>
#include <sys/statvfs.h>

#include "segutil.h"

/* Open in a child bounded by alarm(): a call that blocks fails the test. */
static void refused_quickly(const char *name, uint32_t flags, int code, const char *words) {
  flush_all();
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    alarm(5);
    sw_segment *seg = NULL;
    int rc = sw_segment_open(&seg, name, 4, D, flags);
    CHILD_CHECK(rc == code, 2);
    CHILD_CHECK(words == NULL || strstr(sw_last_error(), words) != NULL, 3);
    _exit(0);
  }
  int rc = wait_child(pid);
  ck_assert_msg(rc == 0, "open of %s with flags 0x%x: child status %d%s", name, flags, rc,
                rc == 128 + SIGALRM ? " (blocked)" : "");
}

static mode_t mode_bits(const char *path) {
  struct stat st;
  ck_assert_int_eq(lstat(path, &st), 0);
  return st.st_mode & 07777;
}

/* Another user created the name first (an empty file, world-writable):
 * CREATE refuses to adopt it and leaves it as it was; the configured owner
 * (SW_OPT_SEGMENT_UID) may adopt it. As root only. */
START_TEST(test_squatted_name) {
  if (geteuid() != 0) {
    fprintf(stderr, "test_squatted_name: needs root, skipped\n");
    return;
  }
  char shm[64], file[256], path[256];
  shm_name(shm, sizeof shm, "squat");
  file_name(file, sizeof file, "squat");
  const char *names[] = {shm, file};
  for (int i = 0; i < 2; i++) {
    seg_path(path, sizeof path, names[i]);
    write_file(path, "", 0);
    ck_assert_int_eq(chown(path, 65534, 65534), 0);
    ck_assert_int_eq(chmod(path, 0666), 0);
    seg_refused(names[i], 4, D, SW_SEGMENT_CREATE, SW_EPERM, "belongs to uid 65534");
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(st.st_uid, 65534);
    ck_assert_int_eq(st.st_size, 0);
    ck_assert_int_eq(st.st_mode & 0777, 0666);
    sw_options *o = rule(1e9);
    ck_ok(sw_options_set(o, SW_OPT_SEGMENT_UID, 65534));
    sw_segment *seg = seg_open(names[i], 4, o, SW_SEGMENT_CREATE);
    ck_assert_int_eq(sw_segment_created(seg), 1);
    sw_segment_close(seg);
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0600);
    sw_options_free(o);
    ck_ok(sw_segment_unlink(names[i]));
  }
}
END_TEST

/* A file that is not libsw's, its first 8 bytes zero (truncated, then
 * written elsewhere): refused in every mode, CREATE included, bytes and
 * mode unchanged. */
START_TEST(test_zero_magic_file) {
  char name[256];
  file_name(name, sizeof name, "zeros");
  static unsigned char bytes[8192];
  for (size_t i = 8; i < sizeof bytes; i++) bytes[i] = (unsigned char)(i * 7);
  write_file(name, bytes, sizeof bytes);
  ck_assert_int_eq(chmod(name, 0640), 0);
  const uint32_t modes[] = {0, SW_SEGMENT_READONLY, SW_SEGMENT_CREATE};
  for (int i = 0; i < 3; i++) {
    seg_refused(name, 4, D, modes[i], SW_EFOREIGN, "not a libsw segment");
    size_t n;
    unsigned char *now = slurp(name, &n);
    ck_assert_uint_eq(n, sizeof bytes);
    ck_assert(memcmp(now, bytes, n) == 0);
    free(now);
    ck_assert_int_eq(mode_bits(name), 0640);
  }
  ck_ok(sw_segment_unlink(name));
}
END_TEST

/* FIFOs and devices are never opened for a segment (a FIFO's open would
 * block), never chmodded, never removed. */
START_TEST(test_fifo_and_device) {
  char fifo[256], shm[64], shm_path[256], link[256];
  file_name(fifo, sizeof fifo, "fifo");
  ck_assert_int_eq(mkfifo(fifo, 0644), 0);
  shm_name(shm, sizeof shm, "fifo");
  seg_path(shm_path, sizeof shm_path, shm);
  ck_assert_int_eq(mkfifo(shm_path, 0644), 0);
  const uint32_t modes[] = {0, SW_SEGMENT_READONLY, SW_SEGMENT_CREATE, SW_SEGMENT_RESET};
  for (int i = 0; i < 4; i++) {
    refused_quickly(fifo, modes[i], SW_EFOREIGN, "a FIFO");
    refused_quickly(shm, modes[i], SW_EFOREIGN, "a FIFO");
    ck_assert_int_eq(mode_bits(fifo), 0644);
  }
  ck_sw(sw_segment_unlink(fifo), SW_EFOREIGN);
  ck_assert_int_eq(unlink(fifo), 0);
  ck_assert_int_eq(unlink(shm_path), 0);

  mode_t before = mode_bits("/dev/null");
  for (int i = 0; i < 3; i++) refused_quickly("/dev/null", modes[i], SW_EFOREIGN, "device");
  ck_assert_int_eq(mode_bits("/dev/null"), before);
  ck_sw(sw_segment_unlink("/dev/null"), SW_EFOREIGN);
  /* through a link, followed on request: still a device */
  file_name(link, sizeof link, "null-link");
  ck_assert_int_eq(symlink("/dev/null", link), 0);
  refused_quickly(link, SW_SEGMENT_CREATE, SW_EPERM, "symbolic link");
  refused_quickly(link, SW_SEGMENT_CREATE | SW_SEGMENT_FOLLOW, SW_EFOREIGN, "device");
  ck_assert_int_eq(mode_bits("/dev/null"), before);
  ck_assert_int_eq(unlink(link), 0);
}
END_TEST

/* A symbolic link at the path is refused unless SW_SEGMENT_FOLLOW; a link
 * to nowhere is never created through. */
START_TEST(test_symlink) {
  char real[256], link[256], dangling[256], target[256];
  file_name(real, sizeof real, "real");
  file_name(link, sizeof link, "link");
  sw_segment *seg = seg_open(real, 4, D, SW_SEGMENT_CREATE);
  pass_n(get(seg, "a"), T0, 2);
  sw_segment_close(seg);
  ck_assert_int_eq(symlink(real, link), 0);
  const uint32_t modes[] = {0, SW_SEGMENT_READONLY, SW_SEGMENT_CREATE};
  for (int i = 0; i < 3; i++) seg_refused(link, 4, D, modes[i], SW_EPERM, "symbolic link");
  seg = seg_open(link, 4, D, SW_SEGMENT_FOLLOW);
  ck_assert_int_eq(window_pass(find(seg, "a"), T0), 2);
  sw_segment_close(seg);
  file_name(dangling, sizeof dangling, "dangling");
  file_name(target, sizeof target, "target");
  ck_assert_int_eq(symlink(target, dangling), 0);
  seg_refused(dangling, 4, D, SW_SEGMENT_CREATE, SW_EPERM, "symbolic link");
  ck_assert_int_eq(file_size(target), -1);
  ck_assert_int_eq(unlink(link), 0);
  ck_assert_int_eq(unlink(dangling), 0);
  ck_ok(sw_segment_unlink(real));
}
END_TEST

/* "." and ".." are not shared memory names (they would be /dev/shm itself
 * and /dev). */
START_TEST(test_dot_names) {
  const char *names[] = {".", ".."};
  for (int i = 0; i < 2; i++) {
    seg_refused(names[i], 4, D, SW_SEGMENT_CREATE, SW_ERANGE, "not a shared memory name");
    ck_sw(sw_segment_unlink(names[i]), SW_ERANGE);
  }
  struct stat st;
  ck_assert_int_eq(stat("/dev/shm", &st), 0);
  ck_assert(S_ISDIR(st.st_mode));
}
END_TEST

/* Any process that can read a segment can hold its flock: opens wait a
 * bounded time and say who holds it. */
START_TEST(test_lock_holder) {
  char name[256];
  file_name(name, sizeof name, "locked");
  sw_segment *seg = seg_open(name, 4, D, SW_SEGMENT_CREATE);
  sw_segment_close(seg);
  int ready[2];
  ck_assert_int_eq(pipe(ready), 0);
  flush_all();
  pid_t holder = fork();
  ck_assert_int_ge(holder, 0);
  if (holder == 0) {
    int fd = open(name, O_RDONLY);
    CHILD_CHECK(fd >= 0 && flock(fd, LOCK_SH) == 0, 2);
    CHILD_CHECK(write(ready[1], "x", 1) == 1, 3);
    pause();
    _exit(0);
  }
  char c;
  ck_assert_int_eq(read(ready[0], &c, 1), 1);
  char pid[32];
  snprintf(pid, sizeof pid, "process %d", (int)holder);
  seg_refused(name, 4, D, 0, SW_EBUSY, pid);
  seg_refused(name, 4, D, SW_SEGMENT_CREATE, SW_EBUSY, "more than 2000 ms");
  /* readers share the lock */
  seg = seg_open(name, 4, NULL, SW_SEGMENT_READONLY);
  sw_segment_close(seg);
  kill(holder, SIGKILL);
  wait_child(holder);
  seg = seg_open(name, 4, D, 0);
  sw_segment_close(seg);
  close(ready[0]);
  close(ready[1]);
  ck_ok(sw_segment_unlink(name));
}
END_TEST

/* Larger than SW_OPT_SEGMENT_MAX_MB, or than its file system's free space
 * (/dev/shm is sized from RAM): refused before anything is written, and a
 * file the open created is removed. */
START_TEST(test_oversize) {
  char shm[64];
  shm_name(shm, sizeof shm, "huge");
  sw_options *o = rule(1e9);
  ck_ok(sw_options_set(o, SW_OPT_SEGMENT_MAX_MB, 1));
  seg_refused(shm, 100, o, SW_SEGMENT_CREATE, SW_ESIZE, "SW_OPT_SEGMENT_MAX_MB=1");
  ck_assert_int_eq(file_size(shm), -1);

  struct statvfs vfs;
  ck_assert_int_eq(statvfs("/dev/shm", &vfs), 0);
  uint64_t free_bytes = (uint64_t)vfs.f_bavail * vfs.f_frsize;
  /* one limiter of the default geometry: about 37 KB; ask for more than fits */
  uint64_t want = free_bytes / 30000 + 1000;
  if (want > (1u << 24)) {
    fprintf(stderr, "test_oversize: /dev/shm has %llu bytes free, too many to exceed\n",
            (unsigned long long)free_bytes);
  } else {
    ck_ok(sw_options_set(o, SW_OPT_SEGMENT_MAX_MB, 1 << 24));
    seg_refused(shm, (uint32_t)want, o, SW_SEGMENT_CREATE, SW_ENOMEM, "free");
    ck_assert_int_eq(file_size(shm), -1);
  }
  sw_options_free(o);
}
END_TEST

/* A new segment has its memory from the start: 10,000 names of 1 stripe
 * (135 MB) are reserved whole at creation (docs/shared-memory.md, "Size";
 * a full file system: tests/check_segment_space.c). */
START_TEST(test_new_segment_is_reserved) {
  char name[256];
  file_name(name, sizeof name, "reserved");
  sw_options *o = rule(1e9);
  ck_ok(sw_options_set(o, SW_OPT_STRIPES, 1));
  sw_segment *seg = seg_open(name, 10000, o, SW_SEGMENT_CREATE);
  struct stat st;
  ck_assert_int_eq(stat(name, &st), 0);
  ck_assert_int_gt(st.st_size, 100 << 20);
  ck_assert_int_ge((int64_t)st.st_blocks * 512, st.st_size);
  pass_n(get(seg, "a"), T0, 1);
  sw_segment_close(seg);
  sw_options_free(o);
  ck_ok(sw_segment_unlink(name));
}
END_TEST

/* sw_segment_created: 1 for the open that created (or reset) it, 0 for
 * the ones that attached. */
START_TEST(test_created_flag) {
  char name[256];
  file_name(name, sizeof name, "created");
  sw_segment *seg = seg_open(name, 4, D, SW_SEGMENT_CREATE);
  ck_assert_int_eq(sw_segment_created(seg), 1);
  sw_segment *again = seg_open(name, 4, D, SW_SEGMENT_CREATE);
  ck_assert_int_eq(sw_segment_created(again), 0);
  sw_segment_close(again);
  again = seg_open(name, 4, NULL, SW_SEGMENT_READONLY);
  ck_assert_int_eq(sw_segment_created(again), 0);
  sw_segment_close(again);
  sw_segment_close(seg);
  seg = seg_open(name, 4, D, SW_SEGMENT_RESET);
  ck_assert_int_eq(sw_segment_created(seg), 1);
  sw_segment_close(seg);
  ck_sw(sw_segment_created(NULL), SW_ENULL);
  ck_ok(sw_segment_unlink(name));
}
END_TEST

int main(void) {
  if (seg_setup() < 0) return EXIT_FAILURE;
  Suite *s = suite_create("segment_files");
  SW_TCASE(s, "hostile", test_squatted_name, test_zero_magic_file, test_fifo_and_device,
           test_symlink, test_dot_names, test_lock_holder, test_oversize);
  SW_TCASE(s, "creation", test_new_segment_is_reserved, test_created_flag);
  int rc = sw_test_run(s);
  cleanup();
  return rc;
}
