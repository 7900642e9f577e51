/* SPDX-License-Identifier: Apache-2.0 */
/* A limiter's receipts: what an admitted entry counted and where, in the
 * two words of sw_decision.receipt, so that sw_limiter_cancel (cancel.c)
 * can give it back. Zero: nothing to give back (a block, or cancelled).
 *
 *   receipt[1]  bit 0      the per-second array did not count the passes
 *                          (admitted uncounted: a slot held a newer window)
 *               bit 1      SW_ENTRY_NO_EXIT: not counted in flight
 *               bits 2-3   kind: PASS, BORROW or PACING
 *               bit 4      PASS: WOULD_BLOCK counted too (dry run);
 *                          BORROW, PACING: a bit of the limiter's tag
 *               bits 5-32  PASS: the limiter's tag (28 bits); BORROW and
 *                          PACING: 22 bits of their own (5-26), and the top
 *                          6 bits of the tag (27-32)
 *               bits 33-63 n
 *   receipt[0]  PASS:   t, where both arrays counted the passes
 *               BORROW: x = t, where the per-minute array counted them;
 *                       the per-second one counted them at t + wait (bits
 *                       5-26 of receipt[1]: wait < the occupy timeout < 2^22)
 *               PACING: x = t (bits 0-43: t < 2^44, pacing's range) and the
 *                       low 20 bits of q = next - t x 10^6 (the queue time
 *                       the entry set, ns, less its time), q's high 22 bits
 *                       in 5-26 of receipt[1]; q = 2^42 - 1: not recorded
 *               BORROW and PACING scramble x: x XOR the limiter's mask
 * The tag and the mask come from an id drawn when the limiter is made and
 * kept in its shared state, so every handle of a shared limiter agrees. A
 * decision of another limiter is refused (SW_EINVAL) unless its tag bits
 * match (1 in 2^28 for PASS, 2^7 for the others, whose time, unscrambled
 * with the wrong mask, then names windows that are not there). */
#ifndef SW_RECEIPT_H
#define SW_RECEIPT_H

#include <stdint.h>

#include "sw/sw.h"

#define SW__RC_UNCOUNTED UINT64_C(1)
#define SW__RC_NO_EXIT UINT64_C(2) /* = SW_ENTRY_NO_EXIT */
#define SW__RC_KIND_SHIFT 2
#define SW__RC_PASS UINT64_C(1)
#define SW__RC_BORROW UINT64_C(2)
#define SW__RC_PACING UINT64_C(3)
#define SW__RC_WOULD_BLOCK (UINT64_C(1) << 4)
#define SW__RC_TAG (((UINT64_C(1) << 28) - 1) << 5)
#define SW__RC_OWN_TAG ((((UINT64_C(1) << 6) - 1) << 27) | UINT64_C(1) << 4)
#define SW__RC_OWN_SHIFT 5
#define SW__RC_OWN ((UINT64_C(1) << 22) - 1)
#define SW__RC_N_SHIFT 33
#define SW__RC_T_BITS 44
#define SW__RC_Q_NONE ((INT64_C(1) << 42) - 1)

_Static_assert(SW_ENTRY_NO_EXIT == SW__RC_NO_EXIT, "the flag is its own receipt bit");
_Static_assert(INT64_MAX / 1000000 < INT64_C(1) << SW__RC_T_BITS, "pacing's times fit");

/* A limiter's tags (PASS's with its kind; the other kinds'), and its mask,
 * from its id. */
static inline uint64_t sw__receipt_tag(uint64_t id) {
  return (id << 5 & SW__RC_TAG) | SW__RC_PASS << SW__RC_KIND_SHIFT;
}
static inline uint64_t sw__receipt_own_tag(uint64_t id) {
  return (id << 5 & SW__RC_OWN_TAG & ~SW__RC_WOULD_BLOCK) | (id >> 40 & 1) << 4;
}
static inline uint64_t sw__receipt_mask(uint64_t id) { return id * UINT64_C(0x9e3779b97f4a7c15); }

/* An admission's receipt (the hot path: two stores): n passes at t. */
static inline __attribute__((always_inline)) void sw__receipt_pass(int64_t *rc, uint64_t tag,
                                                                   int64_t t, int64_t n,
                                                                   uint32_t flags) {
  rc[0] = t;
  rc[1] = (int64_t)(tag | (uint64_t)n << SW__RC_N_SHIFT | (flags & SW__RC_NO_EXIT));
}

/* Word 1 of a receipt of a kind that keeps 22 bits of its own. */
static inline uint64_t sw__receipt_own(uint64_t own_tag, uint64_t kind, int64_t n,
                                       uint32_t flags, uint64_t own) {
  return own_tag | kind << SW__RC_KIND_SHIFT | (uint64_t)n << SW__RC_N_SHIFT |
         (flags & SW__RC_NO_EXIT) | (own & SW__RC_OWN) << SW__RC_OWN_SHIFT;
}

#endif /* SW_RECEIPT_H */
