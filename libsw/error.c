/* SPDX-License-Identifier: Apache-2.0 */
/* Error codes (one X-macro table in <sw/sw.h>) and per-thread detail messages. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

static __thread char sw__errbuf[1024]; /* room for a path and what to do */
static __thread int sw__errcode;

int sw__fail(int err, const char *fmt, ...) {
  /* Format aside first: the arguments may include sw_last_error() itself. */
  char msg[sizeof sw__errbuf];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  memcpy(sw__errbuf, msg, sizeof msg);
  sw__errcode = err;
  return err;
}

int sw__last_code(void) { return sw__errcode ? sw__errcode : SW_ENOMEM; }

SW_API const char *sw_last_error(void) { return sw__errbuf; }

SW_API const char *sw_strerror(int err) {
  switch (err) {
  case SW_OK:
    return "success";
#define SW__ERR_MSG(name, value, msg) \
  case SW_##name:                     \
    return msg;
    SW_ERRNO_MAP(SW__ERR_MSG)
#undef SW__ERR_MSG
  default:
    return "unknown error";
  }
}

SW_API const char *sw_err_name(int err) {
  switch (err) {
  case SW_OK:
    return "SW_OK";
#define SW__ERR_NAME(name, value, msg) \
  case SW_##name:                      \
    return "SW_" #name;
    SW_ERRNO_MAP(SW__ERR_NAME)
#undef SW__ERR_NAME
  default:
    return "SW_UNKNOWN";
  }
}
