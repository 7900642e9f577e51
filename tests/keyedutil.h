/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers of the keyed-table tests (check_keyed_*.c): a rule's options, an
 * entry at an explicit time, the passes a key holds, the keys a scan sees. */
#ifndef SW_KEYEDUTIL_H
#define SW_KEYEDUTIL_H

#include <string.h>

#include "testutil.h"

static inline sw_options *kt_opts(int grade, int behavior, double threshold) {
  sw_options *o = NULL;
  ck_ok(sw_options_create(&o));
  ck_ok(sw_options_set(o, SW_OPT_GRADE, grade));
  ck_ok(sw_options_set(o, SW_OPT_BEHAVIOR, behavior));
  ck_ok(sw_options_set_double(o, SW_OPT_THRESHOLD, threshold));
  return o;
}

/* An entry of n units of key at t, which must not fail. */
static inline sw_decision kt_enter(sw_keyed *k, int64_t t, const char *key, int64_t n) {
  sw_decision d;
  ck_ok(sw_keyed_entry_at(k, t, key, strlen(key), n, 0, &d));
  return d;
}

/* The passes of key's interval at t; -1 when the table does not hold it
 * (a negative code when the lookup fails). */
static inline int64_t kt_pass(const sw_keyed *k, int64_t t, const char *key) {
  sw_keyed_key s;
  int rc = sw_keyed_lookup_at(k, t, key, strlen(key), &s);
  return rc == 1 ? s.pass : rc == 0 ? -1 : rc;
}

/* Places holding keys, as a scan sees them. */
static inline int64_t kt_scanned(const sw_keyed *k, int64_t t) {
  sw_keyed_key keys[64];
  uint64_t cursor = 0;
  int64_t n = 0;
  int got;
  while ((got = sw_keyed_scan_at(k, t, &cursor, keys, 64)) > 0) n += got;
  return got < 0 ? got : n;
}

#endif /* SW_KEYEDUTIL_H */
