/* SPDX-License-Identifier: Apache-2.0 */
/* Keyed tables with known contents for tests/observability/keyed.sh:
 *
 *   keyed_fixture NAME exact [TRIGGER]
 *       capacity 1000, 1 pass per second per key over 600 s (2 windows);
 *       every entry at one explicit time t0, the start of a 300 s window, so
 *       that the counts stay in the interval for at least 5 minutes:
 *         10.0.0.1      700 entries -> 600 pass, 100 block
 *         10.0.0.2      650 -> 600, 50        2001:db8::1   610 -> 600, 10
 *         192.168.1.3   300 -> 300            alice 200, bob 100 (text)
 *         0123456789abcdef (16 printable bytes: text)     20
 *         customer-with-a-very-long-api-key-0000000001 (a digest)   50
 *         the 3 bytes 01 02 ff (hex)                       5
 *       exits: alice 200 x 10 ms; bob 100 x 30 ms, 4 of them errors.
 *       With TRIGGER: once the file TRIGGER exists, one burst at now —
 *       burst 30 pass, 10.0.0.1 5 block, 12 exits of burst x 20 ms (2
 *       errors) — then it waits until killed.
 *   keyed_fixture NAME churn
 *       capacity 16, dry run, 1 per second over 1 s: 40 keys 10 s ago (the
 *       table full of active keys: evictions), 40 keys 5 s ago (into idle
 *       places: reclaimed), 3 entries each (1 pass, 2 would block).
 *   keyed_fixture NAME big N
 *       capacity N, N distinct IPv4 keys (10.0.0.0 up), one pass each, now
 *       (10 per second per key over 600 s: active for 10 minutes).
 *
 * Each prints "stats" and the table's sw_keyed_stats, then "ready". */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sw/sw.h>

static void die(const char *what) {
  fprintf(stderr, "keyed_fixture: %s: %s\n", what, sw_last_error());
  exit(1);
}

static sw_keyed *open_table(const char *name, uint32_t capacity, double threshold,
                            int64_t interval_ms, int dry_run) {
  sw_options *o;
  sw_keyed *k;
  sw_options_create(&o);
  sw_options_set_double(o, SW_OPT_THRESHOLD, threshold);
  sw_options_set(o, SW_OPT_SECOND_INTERVAL_MS, interval_ms);
  sw_options_set(o, SW_OPT_SECOND_SAMPLE_COUNT, 2);
  sw_options_set(o, SW_OPT_DRY_RUN, dry_run);
  if (sw_keyed_open(&k, name, capacity, o, SW_SEGMENT_CREATE | SW_SEGMENT_RESET) != SW_OK)
    die(name);
  sw_options_free(o);
  return k;
}

/* n entries of one unit for key at t. */
static void enter(sw_keyed *k, int64_t t, const void *key, size_t len, int n) {
  sw_decision d;
  for (int i = 0; i < n; i++)
    if (sw_keyed_entry_at(k, t, key, len, 1, 0, &d) != SW_OK) die("entry");
}

static void leave(sw_keyed *k, int64_t t, const char *key, int n, int64_t rt, int errors) {
  for (int i = 0; i < n; i++)
    if (sw_keyed_exit_at(k, t, key, strlen(key), rt, 1, i < errors ? SW_EXIT_ERROR : 0) != SW_OK)
      die("exit");
}

static void enter_text(sw_keyed *k, int64_t t, const char *key, int n) {
  enter(k, t, key, strlen(key), n);
}

static void enter_addr(sw_keyed *k, int64_t t, int af, const char *text, int n) {
  unsigned char a[16];
  if (inet_pton(af, text, a) != 1) die(text);
  enter(k, t, a, af == AF_INET ? 4 : 16, n);
}

static void exact(sw_keyed *k) {
  int64_t now = sw_now_ms(), t0 = now - now % 300000;
  enter_addr(k, t0, AF_INET, "10.0.0.1", 700);
  enter_addr(k, t0, AF_INET, "10.0.0.2", 650);
  enter_addr(k, t0, AF_INET6, "2001:db8::1", 610);
  enter_addr(k, t0, AF_INET, "192.168.1.3", 300);
  enter_text(k, t0, "alice", 200);
  enter_text(k, t0, "bob", 100);
  enter_text(k, t0, "0123456789abcdef", 20);
  enter_text(k, t0, "customer-with-a-very-long-api-key-0000000001", 50);
  enter(k, t0, "\x01\x02\xff", 3, 5);
  leave(k, t0, "alice", 200, 10, 0);
  leave(k, t0, "bob", 100, 30, 4);
}

static void burst(sw_keyed *k, const char *trigger) {
  while (access(trigger, F_OK) != 0) {
    struct timespec ts = {0, 10000000};
    nanosleep(&ts, NULL);
  }
  int64_t t = sw_now_ms();
  enter_text(k, t, "burst", 30);
  enter_addr(k, t, AF_INET, "10.0.0.1", 5);
  leave(k, t, "burst", 12, 20, 2);
  printf("burst\n");
  fflush(stdout);
}

static void churn(sw_keyed *k) {
  int64_t now = sw_now_ms();
  char key[32];
  for (int wave = 0; wave < 2; wave++)
    for (int i = 0; i < 40; i++) {
      snprintf(key, sizeof key, "wave%d-key%02d", wave, i);
      enter_text(k, now - 10000 + 5000 * wave, key, 3);
    }
}

static void big(sw_keyed *k, uint32_t n) {
  int64_t t = sw_now_ms();
  for (uint32_t i = 0; i < n; i++) {
    uint32_t a = htonl((10u << 24) + i);
    enter(k, t, &a, 4, 1);
  }
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: keyed_fixture NAME exact [TRIGGER] | churn | big N\n");
    return 2;
  }
  const char *name = argv[1], *what = argv[2];
  sw_keyed *k;
  if (strcmp(what, "exact") == 0) {
    k = open_table(name, 1000, 1, 600000, 0);
    exact(k);
  } else if (strcmp(what, "churn") == 0) {
    k = open_table(name, 16, 1, 1000, 1);
    churn(k);
  } else if (strcmp(what, "big") == 0 && argc > 3) {
    uint32_t n = (uint32_t)strtoul(argv[3], NULL, 10);
    k = open_table(name, n, 10, 600000, 0);
    big(k, n);
  } else {
    return 2;
  }
  sw_keyed_info s;
  sw_keyed_stats(k, &s);
  printf("stats keys=%lld inserted=%lld reclaimed=%lld evicted=%lld refused=%lld pass=%lld "
         "block=%lld would_block=%lld success=%lld exception=%lld rt=%lld capacity=%u bytes=%lld\n",
         (long long)s.keys, (long long)s.inserted, (long long)s.reclaimed, (long long)s.evicted,
         (long long)s.refused, (long long)s.pass, (long long)s.block, (long long)s.would_block,
         (long long)s.success, (long long)s.exception, (long long)s.rt, s.capacity,
         (long long)s.bytes);
  printf("ready\n");
  fflush(stdout);
  if (strcmp(what, "exact") == 0 && argc > 3) {
    burst(k, argv[3]);
    pause();
  }
  sw_keyed_free(k);
  return 0;
}
