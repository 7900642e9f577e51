/* SPDX-License-Identifier: Apache-2.0 */
/* A limit per client: one keyed table, 10 requests per second per client,
 * room for 100,000 clients at once (125,000 places of 49 bytes). A client whose windows
 * have slid out gives its place to the next new one (reclaimed, nothing
 * lost); only a table full of clients active right now evicts the least
 * recently active. Explicit time: the program runs in an instant. */
#include <stdio.h>
#include <string.h>

#include <sw/sw.h>

#define T0 5000000 /* simulated time, ms */

static int enter(sw_keyed *k, int64_t t, const void *key, size_t len) {
  sw_decision d;
  if (sw_keyed_entry_at(k, t, key, len, 1, 0, &d) != SW_OK) {
    fprintf(stderr, "sw_keyed_entry_at: %s\n", sw_last_error());
    return -1;
  }
  return d.verdict == SW_VERDICT_BLOCK;
}

/* n distinct IPv4 clients (10.x.y.z from first on), one request each at t. */
static void crowd(sw_keyed *k, int64_t t, uint32_t first, uint32_t n) {
  for (uint32_t i = first; i < first + n; i++) {
    unsigned char ip[4] = {10, (unsigned char)(i >> 16), (unsigned char)(i >> 8),
                           (unsigned char)i};
    enter(k, t, ip, sizeof ip);
  }
}

static void show(const sw_keyed *k, const char *when) {
  sw_keyed_info in;
  sw_keyed_stats(k, &in);
  printf("%-36s keys %6lld  inserted %6lld  reclaimed %6lld  evicted %6lld\n", when,
         (long long)in.keys, (long long)in.inserted, (long long)in.reclaimed,
         (long long)in.evicted);
}

int main(void) {
  sw_options *o;
  sw_keyed *k;
  sw_options_create(&o);
  sw_options_set_double(o, SW_OPT_THRESHOLD, 10);
  int rc = sw_keyed_create(&k, 100000, o);
  sw_options_free(o);
  if (rc != SW_OK) {
    fprintf(stderr, "sw_keyed_create: %s\n", sw_last_error());
    return 1;
  }
  /* Four clients in one second: alice sends 25, bob 8, carol 12, dave 3. */
  const char *clients[] = {"alice", "bob", "carol", "dave"};
  const int sends[] = {25, 8, 12, 3};
  printf("%-8s %5s %6s %7s\n", "client", "sent", "passed", "blocked");
  for (int c = 0; c < 4; c++) {
    int blocked = 0;
    for (int i = 0; i < sends[c]; i++)
      blocked += enter(k, T0 + i * 10, clients[c], strlen(clients[c])) == 1;
    printf("%-8s %5d %6d %7d\n", clients[c], sends[c], sends[c] - blocked, blocked);
  }
  printf("\n");
  crowd(k, T0 + 500, 0, 150000);
  show(k, "150,000 clients in the same second:");
  crowd(k, T0 + 5000, 150000, 100000);
  show(k, "100,000 new clients 4.5 s later:");
  sw_keyed_info in;
  sw_keyed_stats(k, &in);
  printf("\nthe table: %.1f MB for %u clients at once (%lld bytes a client)\n", in.bytes / 1e6,
         in.capacity, (long long)in.bytes_per_key);
  sw_keyed_free(k);
  return 0;
}
