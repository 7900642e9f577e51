/* SPDX-License-Identifier: Apache-2.0 */
/* Keyed cancels (all or nothing across limits): what an admitted entry
 * counted given back from its receipt, each thing with one CAS (keyed.h). */
#include "keyed.h"

/* Take n passes of window wid (its low 31 bits) out of slot idx's ring,
 * if the window is still there in the generation of the receipt. */
static void sw__kt_take_back(sw_keyed *k, uint32_t idx, uint32_t gen, uint64_t wid, int64_t n) {
  sw__kt_w *win = sw__kt_win(k, idx);
  for (uint32_t i = 0; i < k->windows; i++) {
    uint64_t lo = sw__kt_lo_of(&win[i]), hi = sw__kt_hi_of(&win[i]);
    for (int steps = 0; steps < SW__KT_STEPS; steps++) {
      if (sw__kt_hgen(hi) != gen || sw__kt_wid(lo) != (wid & SW__KT_WID_MASK) ||
          sw__kt_count(lo) == 0)
        break;
      const int64_t c = sw__kt_count(lo);
      if (sw__kt_cas(&win[i], &lo, &hi,
                     (lo & ~(uint64_t)SW__KT_COUNT_MAX) | (uint64_t)(c > n ? c - n : 0), hi))
        return;
    }
  }
}

/* Each step gives back one thing with one CAS, so a cancel killed midway
 * has given back only some (keyed-cancel): never more, never another
 * key's; the request in flight it leaves is as a killed process's. */
SW_API int sw_keyed_cancel(sw_keyed *k, sw_decision *d) {
  SW__KT_CHECK(k);
  SW__CHECK_NULL(d, "decision");
  const uint64_t r0 = (uint64_t)d->receipt[0], r1 = (uint64_t)d->receipt[1];
  if (r0 == 0 && r1 == 0) return SW_OK; /* blocked, uncounted, or cancelled before */
  SW__CHECK_WRITABLE(k);
  const uint32_t idx = (uint32_t)(r0 & SW__KT_RECEIPT_IDX), gen = sw__kt_mgen(r0);
  const int64_t n = (int64_t)(r1 & 0xffffffffu);
  if (sw__kt_state(r0) != SW__KT_READY || idx >= k->nbuckets * SW__KT_WAYS || n > INT32_MAX)
    return sw__fail(SW_EINVAL, "decision receipt 0x%016llx 0x%016llx is not one of this table's",
                    (unsigned long long)r0, (unsigned long long)r1);
  d->receipt[0] = d->receipt[1] = 0;
  const uint64_t what = r1 >> 32; /* the window's low bits, or the queue's (pacing) */
  if (k->kind == SW__KT_PACING) {
    sw__rule r;
    sw__rule_box_load(&k->hdr->rule, &r, true);
    sw__kt_w *aux = sw__kt_aux(k, idx);
    const double ticks = r.threshold > 0 ? (double)n / r.threshold * 1000.0 * SW__KT_TICKS_PER_MS : 0;
    const int64_t cost = ticks < (double)(INT64_C(1) << 60) ? (int64_t)(ticks + 0.5) : 0; /* as the entry's */
    uint64_t a = sw__kt_lo_of(aux), h = sw__kt_hi_of(aux);
    /* the last admission it set: a, or before a (later admissions came) */
    const int64_t next = (int64_t)(a - ((a - what) & 0xffffffffu));
    /* its place in the queue, if no later admission came after it */
    for (int steps = 0; steps < SW__KT_STEPS && sw__kt_hgen(h) == gen && (int64_t)a == next &&
                        next > cost;
         steps++)
      if (sw__kt_cas(aux, &a, &h, (uint64_t)(next - cost), h)) break;
    SW__KILL_POINT("keyed-cancel"); /* its place given back, its pass not yet */
    sw__kt_take_back(k, idx, gen, (uint64_t)sw__kt_pacing_wid(k, next, d->wait_ms), n);
  } else {
    /* the window: the most recent one with those low bits */
    sw__kt_take_back(k, idx, gen, what, n);
    SW__KILL_POINT("keyed-cancel"); /* its pass given back; the request in flight, the total not */
  }
  if (k->kind == SW__KT_CONCURRENCY) { /* its request in flight */
    sw__kt_w *aux = sw__kt_aux(k, idx);
    uint64_t a = sw__kt_lo_of(aux), h = sw__kt_hi_of(aux);
    for (int steps = 0; steps < SW__KT_STEPS && sw__kt_hgen(h) == gen && a > 0; steps++)
      if (sw__kt_cas(aux, &a, &h, a - 1, h)) break;
  }
  atomic_fetch_sub_explicit(&sw__kt_my_totals(k)->pass, n, memory_order_relaxed);
  return SW_OK;
}
