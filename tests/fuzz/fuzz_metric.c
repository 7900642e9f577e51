/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer harness: the same operation sequence on libsw's sw_metric and on
 * the model of model.h; any difference aborts.
 *
 * Input: 3 bytes of geometry (sample count 1..8, window length 1..600 ms,
 * flags: occupiable, stripes), then 4-byte operations:
 *   [op] [time step, signed, scaled] [count] [event]
 * Build and run: tests/fuzz/run.sh (clang, -fsanitize=fuzzer,address). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

#define CHECK(expr, what)                                                            \
  do {                                                                               \
    int64_t real_ = (expr), model_ = (what);                                         \
    if (real_ != model_) {                                                           \
      fprintf(stderr, "mismatch at t=%lld: %s = %lld, model %lld\n", (long long)t,   \
              #expr, (long long)real_, (long long)model_);                           \
      abort();                                                                       \
    }                                                                                \
  } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 3) return 0;
  int32_t n = 1 + data[0] % 8;
  int64_t wl = 1 + (int64_t)(data[1] * 600 / 256);
  bool occupiable = data[2] & 1;
  int64_t stripes = (int64_t)1 << ((data[2] >> 1) & 3);
  const int64_t max_rt = 5000;
  sw_options *o;
  sw_metric *m;
  if (sw_options_create(&o) != SW_OK) return 0;
  sw_options_set(o, SW_OPT_OCCUPIABLE, occupiable);
  sw_options_set(o, SW_OPT_STRIPES, stripes);
  if (sw_metric_create(&m, n, n * wl, o) != SW_OK) abort();
  model md;
  model_init(&md, n, wl, occupiable, max_rt);

  int64_t t = 1000000;
  for (size_t i = 3; i + 4 <= size; i += 4) {
    uint8_t op = data[i] % 10, ev = data[i + 3] % SW_EVENT_COUNT;
    int64_t k = data[i + 2];
    /* Steps mostly forward and small, sometimes back, sometimes a leap. */
    int8_t step = (int8_t)data[i + 1];
    int64_t dt = step * (int64_t)(op == 9 ? 97 * wl : (wl + 3) / 4);
    t = t + dt < 0 ? 0 : t + dt;
    switch (op) {
    case 0:
    case 1:
    case 2:
      if (sw_metric_add_at(m, t, (sw_event)ev, k) != SW_OK) abort();
      model_add(&md, t, (sw_event)ev, k);
      break;
    case 3:
      if (occupiable) {
        int64_t future = t + (int64_t)(data[i + 3]) * wl / 16;
        if (sw_metric_add_waiting(m, future, k) != SW_OK) abort();
        model_add_waiting(&md, future, k);
      }
      break;
    case 4:
      CHECK(sw_metric_sum_at(m, t, (sw_event)ev), model_sum(&md, t, (sw_event)ev, false));
      break;
    case 5: {
      int64_t max = model_sum(&md, t, SW_EVENT_SUCCESS, true);
      CHECK(sw_metric_max_success_at(m, t), max > 1 ? max : 1);
      CHECK(sw_metric_min_rt_at(m, t), model_min_rt(&md, t));
      break;
    }
    case 6:
      CHECK(sw_metric_waiting_at(m, t), model_waiting(&md, t));
      CHECK(sw_metric_window_pass_at(m, t), model_window_pass(&md, t));
      break;
    case 7:
      CHECK(sw_metric_previous_window_pass_at(m, t), model_previous_pass(&md, t));
      break;
    default: { /* 8, 9: the listing */
      sw_window w[MODEL_MAX_SLOTS];
      int64_t starts[MODEL_MAX_SLOTS];
      int count = sw_leap_array_list_at(sw_metric_leap_array(m), t, w, MODEL_MAX_SLOTS);
      int expect = model_list(&md, t, starts);
      CHECK(count, expect);
      for (int j = 0; j < count; j++) CHECK(w[j].start_ms, starts[j]);
      for (int e = 0; e < SW_EVENT_COUNT; e++)
        CHECK(sw_metric_sum_at(m, t, (sw_event)e), model_sum(&md, t, (sw_event)e, false));
      /* the details hold every window of the interval: their passes sum to pass_at */
      sw_metric_record rec[2 * MODEL_MAX_SLOTS];
      int nrec = sw_metric_details_at(m, t, rec, 2 * MODEL_MAX_SLOTS);
      int64_t pass = 0;
      for (int j = 0; j < nrec; j++) pass += rec[j].pass;
      CHECK(pass, model_sum(&md, t, SW_EVENT_PASS, false));
    }
    }
  }
  sw_metric_free(m);
  sw_options_free(o);
  return 0;
}
