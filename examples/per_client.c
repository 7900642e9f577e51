/* A limit per client, keyed by name: a registry holds one limiter per client
 * (10 requests per second each), created on a client's first request. The
 * capacity is fixed: a new client beyond it is refused with SW_EFULL, and the
 * program chooses what to do (here: fail open, let it through unlimited). */
#include <stdio.h>

#include <sw/sw.h>

#define T0 5000000 /* simulated time, ms */

int main(void) {
  sw_options *o;
  sw_registry *reg;
  sw_options_create(&o);
  sw_options_set_double(o, SW_OPT_THRESHOLD, 10);
  sw_options_set(o, SW_OPT_STRIPES, 1); /* many small limiters: one stripe each */
  if (sw_registry_create(&reg, 3, o) != SW_OK) {
    fprintf(stderr, "sw_registry_create: %s\n", sw_last_error());
    return 1;
  }
  sw_options_free(o);
  /* Four clients in one second: alice sends 25, bob 8, carol 12, dave 3. */
  const char *clients[] = {"10.0.0.1/alice", "10.0.0.2/bob", "10.0.0.3/carol", "10.0.0.4/dave"};
  const int sends[] = {25, 8, 12, 3};
  printf("%-16s %5s %6s %7s\n", "client", "sent", "passed", "blocked");
  for (int c = 0; c < 4; c++) {
    int passed = 0, blocked = 0, unlimited = 0;
    for (int i = 0; i < sends[c]; i++) {
      sw_limiter *lim;
      int rc = sw_registry_get(reg, clients[c], &lim);
      if (rc == SW_EFULL) { /* policy of this program: fail open */
        unlimited++;
        continue;
      }
      sw_decision d;
      sw_limiter_entry_at(lim, T0 + i * 10, 1, 0, &d);
      if (d.verdict == SW_VERDICT_BLOCK) {
        blocked++;
      } else {
        passed++;
        sw_limiter_exit_at(lim, T0 + i * 10 + 1, 1, 1, 0);
      }
    }
    if (unlimited)
      printf("%-16s %5d  registry full (%u of %u): let through unlimited\n", clients[c],
             sends[c], sw_registry_count(reg), sw_registry_capacity(reg));
    else
      printf("%-16s %5d %6d %7d\n", clients[c], sends[c], passed, blocked);
  }
  sw_registry_free(reg);
  return 0;
}
