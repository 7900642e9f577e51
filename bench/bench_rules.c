/* SPDX-License-Identifier: Apache-2.0 */
/* Rules as data: the CPU time sw_rules_parse takes for a list of N flow
 * rules (each its own resource, QPS, reject: the duplicate check and the
 * per-rule validation are what grows with N).
 *   parse N     one list of N rules, parsed once
 * Prints: case=rules_parse rules=N cpu_s=... ms_per_1000_rules=... */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sw/sw.h>

static double cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
  if (argc != 3 || strcmp(argv[1], "parse") != 0) {
    fprintf(stderr, "usage: %s parse N\n", argv[0]);
    return 2;
  }
  long n = atol(argv[2]);
  if (n < 1) return 2;
  size_t cap = (size_t)n * 64 + 16, len = 0;
  char *json = malloc(cap);
  if (json == NULL) return 1;
  json[len++] = '[';
  for (long i = 0; i < n; i++)
    len += (size_t)snprintf(json + len, cap - len, "%s{\"resource\":\"r%ld\",\"count\":%ld}",
                            i ? "," : "", i, 10 + i % 90);
  json[len++] = ']';
  double t0 = cpu_s();
  sw_rules *r;
  int rc = sw_rules_parse(&r, json, len);
  double t = cpu_s() - t0;
  if (rc < 0) {
    fprintf(stderr, "bench_rules: %s\n", sw_last_error());
    return 1;
  }
  printf("case=rules_parse rules=%ld cpu_s=%.3f ms_per_1000_rules=%.2f\n", n, t, t * 1e6 / n);
  sw_rules_free(r);
  free(json);
  return 0;
}
