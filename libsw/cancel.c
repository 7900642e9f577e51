/* SPDX-License-Identifier: Apache-2.0 */
/* sw_limiter_cancel: all or nothing across several limits. A cancel gives
 * back what an admitted entry counted, from the receipt its decision
 * carries (receipt.h): its passes in the windows that counted them, its
 * borrowed passes, its request in flight, its place in a pacing queue.
 *
 * Every give-back is lock-free, a CAS on one word at a time that never
 * takes a counter below zero, nor off its seal bit; a window is given back
 * to only while its slot holds it (the passes of a window whose slot was
 * reset since have left the interval: they are gone already). Kill points
 * sit before each write (cancel-second, cancel-future, cancel-minute,
 * cancel-put-back, cancel-in-flight, cancel-queue): a process killed at one
 * leaves the later give-backs undone — the entry stays counted in part,
 * nothing else changes — and holds no lock; one stopped there makes nobody
 * wait.
 *
 * Each CAS on a window's body comes right after a check that the slot still
 * holds that window. A canceller stopped between the check and the CAS
 * while the slot is reset twice holds a body that now counts a newer
 * window: its CAS fails (the word changed) and the next check sees the
 * slot moved on; if the word happens to hold the very value it read, the
 * CAS succeeds, and the check after it puts the take back. Only a kill in
 * that last gap, after such a stop and such a coincidence, would leave the
 * newer window short of what the cancel took. */
#include "limiter.h"
#include "receipt.h"

/* Take up to k from a counter word of a body of slot s found at seq,
 * keeping the word's seal bit: how many. Each try first checks that the
 * body still holds its window; the point is the gap between that check and
 * the write. */
static int64_t sw__take_word(_Atomic int64_t *w, int64_t k, sw__la_slot *s, uint64_t seq,
                             const char *point) {
  int64_t v = atomic_load_explicit(w, memory_order_relaxed);
  for (;;) {
    int64_t have = v & ~SW__SEALED, take = have < k ? have : k; /* a damaged word < 0: 0 */
    if (take <= 0 || !sw__la_still_valid(s, seq)) return 0;
    SW__KILL_POINT(point);
    if (atomic_compare_exchange_weak_explicit(w, &v, v - take, memory_order_relaxed,
                                              memory_order_relaxed))
      return take;
  }
}

/* After taking from a body of slot s found at seq: if the slot moved on
 * meanwhile, the take may have hit a newer window (a canceller paused
 * between its check and its CAS while the slot was reset twice, and the
 * word held the same value): put it back. */
static void sw__put_back(_Atomic int64_t *w, int64_t taken, sw__la_slot *s, uint64_t seq) {
  if (taken == 0 || sw__la_still_valid(s, seq)) return;
  SW__KILL_POINT("cancel-put-back");
  atomic_fetch_add_explicit(w, taken, memory_order_relaxed);
}

/* Give back k of ev in the window starting at start, if its slot holds it. */
static void sw__give_back(sw_leap_array *la, const sw__metric_cfg *cfg, int64_t start,
                          sw_event ev, int64_t k, const char *point) {
  if (k == 0) return;
  sw__la_slot *s = sw__la_slot_at(la, (uint32_t)((start / la->wl) % la->n));
  uint64_t seq;
  int64_t have;
  if (!sw__la_active(s, &seq, &have) || have != start) return;
  sw__mb_stripe *st = sw__la_body(la, s, (seq >> 1) & 1);
  int64_t taken = 0;
  for (uint32_t i = 0, stripes = sw__mb_stripes(cfg); i < stripes && taken < k; i++)
    taken += sw__take_word(&st[i].c[ev], k - taken, s, seq, point);
  sw__put_back(&st[0].c[ev], taken, s, seq);
}

/* Give back n passes at t in both arrays (per-second: unless uncounted). */
static void sw__give_back_passes(sw_node *node, int64_t t, int64_t n, bool second) {
  sw_metric *sec = &node->second, *min = &node->minute;
  if (second)
    sw__give_back(&sec->la, &sec->cfg, t - t % sec->la.wl, SW_EVENT_PASS, n, "cancel-second");
  sw__give_back(&min->la, &min->cfg, t - t % min->la.wl, SW_EVENT_PASS, n, "cancel-minute");
}

/* Give back k passes borrowed for the window starting at start: from the
 * borrow array while they wait there (the word not sealed), else from the
 * main window that they were carried into. */
static void sw__give_back_borrowed(sw_metric *m, int64_t start, int64_t k) {
  sw__la_slot *s = sw__la_slot_at(&m->future, (uint32_t)((start / m->future.wl) % m->future.n));
  uint64_t seq;
  int64_t have;
  if (sw__la_active(s, &seq, &have) && have == start) {
    sw__mb_stripe *st = sw__la_body(&m->future, s, (seq >> 1) & 1);
    _Atomic int64_t *w = &st->c[SW_EVENT_PASS];
    int64_t v = atomic_load_explicit(w, memory_order_relaxed);
    for (;;) { /* a carry that seals the word meanwhile fails the CAS */
      int64_t take = v < k ? v : k;
      if (v & SW__SEALED) break; /* carried: in the main window */
      if (take <= 0 || !sw__la_still_valid(s, seq)) return;
      SW__KILL_POINT("cancel-future");
      if (atomic_compare_exchange_weak_explicit(w, &v, v - take, memory_order_relaxed,
                                                memory_order_relaxed)) {
        sw__put_back(w, take, s, seq);
        return;
      }
    }
  }
  sw__give_back(&m->la, &m->cfg, start, SW_EVENT_PASS, k, "cancel-second");
}

/* Move a pacing queue's last admission back by the entry's cost, if it is
 * still the time the entry set (no later entry queued after it). The cost
 * is the entry's at the rate in force now: the same unless the threshold,
 * or the warm-up rate (a new second's refill), changed in between. */
static void sw__give_back_place(sw_limiter *l, int64_t t, int64_t q, int64_t n) {
  sw__rule r;
  sw__limiter_rule(l, &r);
  double qps;
  if (r.behavior == SW_BEHAVIOR_PACING)
    qps = r.threshold;
  else if (r.behavior == SW_BEHAVIOR_WARM_UP_PACING)
    qps = sw__warm_rate(&r, atomic_load_explicit(&l->st->stored_tokens, memory_order_relaxed));
  else
    return; /* another behaviour since: its queue was restarted */
  const int64_t cost = sw__pacing_cost(n, qps);
  if (cost < 0 || q == SW__RC_Q_NONE) return;
  int64_t next = t * SW__NS_PER_MS + q, back = next - cost;
  if (back < SW__PACING_NONE) back = SW__PACING_NONE; /* never before a new queue */
  SW__KILL_POINT("cancel-queue");
  atomic_compare_exchange_strong(&l->st->latest_passed, &next, back);
}

SW_API int sw_limiter_cancel(sw_limiter *l, sw_decision *d) {
  SW__CHECK_NULL(l, "limiter");
  SW__CHECK_WRITABLE(l);
  SW__CHECK_NULL(d, "decision");
  const uint64_t r1 = (uint64_t)d->receipt[1];
  if ((d->receipt[0] | d->receipt[1]) == 0) return SW_OK; /* a block, or cancelled before */
  const uint64_t kind = r1 >> SW__RC_KIND_SHIFT & 3, own = r1 >> SW__RC_OWN_SHIFT & SW__RC_OWN;
  const uint64_t r0 = (uint64_t)d->receipt[0] ^ (kind == SW__RC_PASS ? 0 : l->receipt_mask);
  const bool tagged = kind == SW__RC_PASS ? (r1 & SW__RC_TAG) == (l->receipt_tag & SW__RC_TAG)
                                          : (r1 & SW__RC_OWN_TAG) == l->receipt_own_tag;
  const int64_t n = (int64_t)(r1 >> SW__RC_N_SHIFT);
  int64_t t = (int64_t)r0, q = 0;
  if (kind == SW__RC_PACING) {
    t = (int64_t)(r0 & ((UINT64_C(1) << SW__RC_T_BITS) - 1));
    q = (int64_t)(r0 >> SW__RC_T_BITS | own << (64 - SW__RC_T_BITS));
  }
  if (kind == 0 || !tagged || t < 0 ||
      (kind == SW__RC_BORROW && (!l->node.second.hdr->occupiable || t > INT64_MAX - (int64_t)own)) ||
      (kind == SW__RC_PACING && t > SW__PACING_MAX_MS))
    return sw__fail(SW_EINVAL, "decision with receipt {0x%016llx, 0x%016llx} is not one of this "
                    "limiter's", (unsigned long long)d->receipt[0],
                    (unsigned long long)d->receipt[1]);
  d->receipt[0] = d->receipt[1] = 0;
  sw_node *node = &l->node;
  if (kind == SW__RC_BORROW) {
    if (!(r1 & SW__RC_UNCOUNTED)) {
      const int64_t at = t + (int64_t)own;
      sw__give_back_borrowed(&node->second, at - at % node->second.la.wl, n);
    }
    sw_metric *min = &node->minute;
    const int64_t ws = t - t % min->la.wl;
    sw__give_back(&min->la, &min->cfg, ws, SW_EVENT_PASS, n, "cancel-minute");
    sw__give_back(&min->la, &min->cfg, ws, SW_EVENT_OCCUPIED_PASS, n, "cancel-minute");
  } else {
    sw__give_back_passes(node, t, n, !(r1 & SW__RC_UNCOUNTED));
    if (kind == SW__RC_PASS && (r1 & SW__RC_WOULD_BLOCK)) {
      sw_metric *m[2] = {&node->second, &node->minute};
      for (int i = 0; i < 2; i++)
        sw__give_back(&m[i]->la, &m[i]->cfg, t - t % m[i]->la.wl, SW_EVENT_WOULD_BLOCK, n,
                      i ? "cancel-minute" : "cancel-second");
    }
    if (kind == SW__RC_PACING) sw__give_back_place(l, t, q, n);
  }
  if (!(r1 & SW__RC_NO_EXIT)) {
    SW__KILL_POINT("cancel-in-flight");
    sw__node_leave(node);
  }
  return SW_OK;
}
