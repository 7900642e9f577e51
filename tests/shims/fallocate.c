/* SPDX-License-Identifier: Apache-2.0 */
/* fallocate as a file system or a signal may answer it, for
 * tests/check_segment_space.c (LD_PRELOAD into a victim process).
 * SW_SHIM_FALLOCATE in the environment:
 *   eintr:N     the first N calls fail with EINTR (as tmpfs does when a
 *               signal arrives while it allocates), then the real one;
 *   eintr       every call fails with EINTR;
 *   eopnotsupp  every call fails with EOPNOTSUPP (a file system that cannot
 *               allocate ahead). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

int fallocate(int fd, int mode, off_t offset, off_t len);
int fallocate64(int fd, int mode, off_t offset, off_t len);

static long calls;

int fallocate(int fd, int mode, off_t offset, off_t len) {
  const char *how = getenv("SW_SHIM_FALLOCATE");
  calls++;
  if (how && strcmp(how, "eopnotsupp") == 0) {
    errno = EOPNOTSUPP;
    return -1;
  }
  if (how && (strcmp(how, "eintr") == 0 ||
              (strncmp(how, "eintr:", 6) == 0 && calls <= atol(how + 6)))) {
    errno = EINTR;
    return -1;
  }
  int (*real)(int, int, off_t, off_t) = (int (*)(int, int, off_t, off_t))dlsym(RTLD_NEXT, "fallocate");
  return real(fd, mode, offset, len);
}

int fallocate64(int fd, int mode, off_t offset, off_t len) { return fallocate(fd, mode, offset, len); }
