/* SPDX-License-Identifier: Apache-2.0 */
/* The smallest libsw program: a 2 x 500 ms sliding window admitting at most
 * 3 passes per second. Built outside the tree by tests/pkgconfig-consumer.sh
 * with: cc consumer.c $(pkg-config --cflags --libs libsw) */
#include <stdio.h>

#include <sw/sw.h>

int main(void) {
  sw_metric *m;
  if (sw_metric_create(&m, 2, 1000, NULL) != SW_OK) {
    fprintf(stderr, "sw_metric_create: %s\n", sw_last_error());
    return 1;
  }
  int admitted = 0;
  for (int i = 0; i < 5; i++) admitted += sw_metric_try_pass_at(m, 1000 + i, 1, 3, NULL);
  printf("libsw %s: admitted %d of 5 (limit 3 per second)\n", sw_version_string(), admitted);
  sw_metric_free(m);
  return admitted == 3 ? 0 : 1;
}
