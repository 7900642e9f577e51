/* SPDX-License-Identifier: Apache-2.0 */
/* Fleet-wide limits: tokens leased from Redis per bucket, admitted locally.
 *
 * Redis holds one hash per resource ("sw:{resource}"): bucket start (Redis
 * time, ms) -> tokens granted for it. A script grants a node
 * min(want, threshold - sum of the window's buckets), charged to the current
 * (or next) bucket, on Redis's own clock, and takes back what the node
 * refunds of a bucket it no longer uses. The node keeps its tokens in the
 * limiter (shared by all processes of a segment) and takes them with one CAS,
 * so no request waits on the network.
 *
 * While Redis is down, the failure policy admits locally; those passes are
 * recorded per local bucket and charged to the window's current bucket by
 * the first call that reaches Redis again (a negative refund), so that the
 * recovered window starts with them instead of a full budget.
 *
 * Times: local t >= 0 (checked); Redis time is t + offset, clamped to
 * 0..INT64_MAX, so that a reply far from local time (or forged) cannot make
 * the arithmetic overflow; a reply must be consistent with itself (its bucket
 * is the bucket of its time) or it is refused.
 *
 * This file holds the lease logic; the Redis calls are made by sw_cluster
 * (cluster.c, hiredis) or by the caller (e.g. OpenResty cosockets), through
 * sw_lease_next_call / sw_lease_apply / sw_lease_failed. */
#include <math.h>
#include <string.h>

#include "limiter.h"

#define SW__TAG_BITS 24
#define SW__TOKEN_BITS 40
#define SW__TOKEN_MASK ((UINT64_C(1) << SW__TOKEN_BITS) - 1)
#define SW__TAG_MASK ((UINT64_C(1) << SW__TAG_BITS) - 1)

/* Bucket numbers go through uint64_t: bno + 1 at the end of time wraps
 * instead of overflowing. */
static inline uint64_t sw__tag(uint64_t bucket_no) { return bucket_no & SW__TAG_MASK; }
static inline uint64_t sw__word(uint64_t bucket_no, int64_t tokens) {
  return sw__tag(bucket_no) << SW__TOKEN_BITS | ((uint64_t)tokens & SW__TOKEN_MASK);
}
static inline uint64_t sw__word_tag(uint64_t w) { return w >> SW__TOKEN_BITS; }
static inline int64_t sw__word_tokens(uint64_t w) { return (int64_t)(w & SW__TOKEN_MASK); }

SW_API const char *sw_lease_script(void) {
  /* KEYS[1]: the resource's hash. ARGV: threshold, want, bucket_ms, buckets,
   * target (0 current, 1 next bucket), refund, refund_bucket (refund < 0:
   * passes to charge to the current bucket).
   * Returns {bucket, granted, redis_now_ms, window_total}. */
  return "local key = KEYS[1]\n"
         "local threshold, want = tonumber(ARGV[1]), tonumber(ARGV[2])\n"
         "local bucket_ms, buckets = tonumber(ARGV[3]), tonumber(ARGV[4])\n"
         "local target, refund = tonumber(ARGV[5]), tonumber(ARGV[6])\n"
         "local t = redis.call('TIME')\n"
         "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
         "local current = now - now % bucket_ms\n"
         "local bucket = current + target * bucket_ms\n"
         "if refund > 0 then\n"
         "  local left = redis.call('HINCRBY', key, ARGV[7], -refund)\n"
         "  if left <= 0 then redis.call('HDEL', key, ARGV[7]) end\n"
         "elseif refund < 0 then\n" /* passes admitted while Redis was down */
         "  redis.call('HINCRBY', key, current, -refund)\n"
         "end\n"
         "local fields = {}\n"
         "for i = 1, 2 * buckets - 1 do fields[i] = bucket + (i - buckets) * bucket_ms end\n"
         "local vals = redis.call('HMGET', key, unpack(fields))\n"
         "local used = 0\n"
         "for s = 1, buckets do\n"
         "  local w = 0\n"
         "  for j = s, s + buckets - 1 do w = w + (tonumber(vals[j]) or 0) end\n"
         "  if w > used then used = w end\n"
         "end\n"
         "local grant = math.max(0, math.min(want, threshold - used))\n"
         "if grant > 0 then redis.call('HINCRBY', key, bucket, grant) end\n"
         "if redis.call('HLEN', key) > 2 * buckets + 4 then\n"
         "  for _, f in ipairs(redis.call('HKEYS', key)) do\n"
         "    if tonumber(f) < bucket - buckets * bucket_ms then redis.call('HDEL', key, f) end\n"
         "  end\n"
         "end\n"
         "redis.call('PEXPIRE', key, (buckets + 2) * bucket_ms)\n"
         "return {bucket, grant, now, used + grant}\n";
}

/* Geometry of a limiter's buckets: the per-second array's windows. */
static inline int64_t sw__bucket_ms(const sw_limiter *l) { return l->node.second.la.wl; }

int64_t sw__lease_threshold(const sw_limiter *l, const sw__rule *r) {
  double v = floor(r->threshold * (double)l->node.second.la.interval / 1000.0);
  return v < 1e15 ? (int64_t)v : INT64_C(1000000000000000);
}

/* Redis time at local t (>= 0): t + offset, clamped to 0..INT64_MAX. */
static inline int64_t sw__redis_time(int64_t t, int64_t offset) {
  int64_t now;
  if (__builtin_add_overflow(t, offset, &now)) return INT64_MAX; /* both > 0 */
  return now < 0 ? 0 : now;
}

/* ------------------------------------------------- passes of the policy */

#define SW__POLICY_SLOTS 3

/* Count n passes of the failure policy in local bucket lb. */
static void sw__policy_add(sw__lease *ls, int64_t lb, int64_t n) {
  _Atomic uint64_t *slot = &ls->policy[(uint64_t)lb % SW__POLICY_SLOTS];
  uint64_t w = atomic_load_explicit(slot, memory_order_relaxed), v;
  do {
    int64_t have = sw__word_tag(w) == sw__tag((uint64_t)lb) ? sw__word_tokens(w) : 0;
    int64_t sum = have + n; /* n <= INT32_MAX, have < 2^40 */
    v = sw__word((uint64_t)lb, sum < (int64_t)SW__TOKEN_MASK ? sum : (int64_t)SW__TOKEN_MASK);
  } while (!atomic_compare_exchange_weak_explicit(slot, &w, v, memory_order_relaxed,
                                                  memory_order_relaxed));
}

/* Take the policy's passes of local buckets lb - 2 .. lb: every pass that
 * can be in a window of 2 buckets of Redis time ending at t, whatever the
 * offset between the clocks. */
static int64_t sw__policy_take(sw__lease *ls, int64_t lb) {
  int64_t sum = 0;
  for (int k = 0; k < SW__POLICY_SLOTS; k++) {
    uint64_t w = atomic_exchange(&ls->policy[k], 0);
    uint64_t age = (sw__tag((uint64_t)lb) - sw__word_tag(w)) & SW__TAG_MASK;
    if (w != 0 && age < SW__POLICY_SLOTS) sum += sw__word_tokens(w);
  }
  return sum;
}

/* --------------------------------------------------------------- entries */

/* Ask for a refill: the time of the oldest request not yet served. */
static inline int64_t sw__lease_want(sw__lease *ls, int64_t t) {
  int64_t since = atomic_load_explicit(&ls->need, memory_order_relaxed);
  if (since != 0) return since;
  since = t > 0 ? t : 1;
  atomic_store_explicit(&ls->need, since, memory_order_relaxed);
  return since;
}

int sw__decide_cluster(sw_limiter *l, const sw__rule *r, int64_t t, int64_t n, uint32_t flags,
                       sw_decision *d) {
  sw__lease *ls = &l->st->lease;
  const int64_t wl = sw__bucket_ms(l);
  if (atomic_load_explicit(&ls->synced, memory_order_acquire)) {
    int64_t now = sw__redis_time(t, atomic_load_explicit(&ls->offset, memory_order_relaxed));
    int64_t bno = now / wl, bucket = bno * wl;
    _Atomic uint64_t *slot = &ls->slot[bno & 1];
    uint64_t w = atomic_load_explicit(slot, memory_order_relaxed);
    while (sw__word_tag(w) == sw__tag((uint64_t)bno) && sw__word_tokens(w) >= n) {
      if (atomic_compare_exchange_weak_explicit(slot, &w, w - (uint64_t)n, memory_order_relaxed,
                                                memory_order_relaxed)) {
        int64_t left = sw__word_tokens(w) - n;
        if (left * 100 < r->lease * r->low_water_pct) sw__lease_want(ls, t);
        sw__node_count_pass(&l->node, t, n, false, sw__in_flight(flags));
        d->remaining = left;
        return SW_OK;
      }
    }
    if (sw__word_tag(w) == sw__tag((uint64_t)bno) &&
        atomic_load_explicit(&ls->spent_bucket, memory_order_relaxed) == bucket) {
      /* The fleet spent this bucket's budget: the next bucket may have room. */
      d->verdict = SW_VERDICT_BLOCK;
      d->retry_after_ms = wl - (now - bucket);
      return SW_OK;
    }
    int64_t since = sw__lease_want(ls, t);
    if (atomic_load_explicit(&ls->down_since, memory_order_relaxed) == 0) {
      if (t - since <= 2 * r->timeout_ms + wl) {
        d->verdict = SW_VERDICT_BLOCK; /* a refill is on its way */
        d->retry_after_ms = 1;
        return SW_OK;
      }
      /* Nobody has come for the tokens asked for (the refiller was removed,
       * stopped or died): as good as down. */
      int64_t zero = 0;
      atomic_compare_exchange_strong(&ls->down_since, &zero, t > 0 ? t : 1);
    }
  }
  /* Redis is down, or was never reached: the failure policy. Its passes
   * are recorded, to be charged to the window when Redis is back. */
  switch (r->failure) {
  case SW_CLUSTER_FAIL_OPEN:
    sw__node_count_pass(&l->node, t, n, false, sw__in_flight(flags));
    d->remaining = INT32_MAX;
    break;
  case SW_CLUSTER_FAIL_CLOSED:
    d->verdict = SW_VERDICT_BLOCK;
    d->retry_after_ms = r->retry_ms;
    return SW_OK;
  default:
    sw__limiter_decide_qps(l, r, t, n, flags, r->threshold / (r->nodes > 0 ? r->nodes : 1), d);
  }
  if (d->verdict != SW_VERDICT_BLOCK && n > 0) sw__policy_add(ls, t / wl, n);
  return SW_OK;
}

/* ------------------------------------------------------------- the calls */

static sw_limiter *sw__cluster_limiter(sw_limiter *l, sw__rule *r) {
  if (l == NULL) {
    sw__fail(SW_ENULL, "limiter is NULL");
    return NULL;
  }
  sw__limiter_rule(l, r);
  if (!r->cluster) {
    sw__fail(SW_ESTATE, "the limiter's rule is not a cluster rule (SW_OPT_CLUSTER=0)");
    return NULL;
  }
  if (l->readonly) {
    sw__fail(SW_EPERM, "attached read-only: no writes");
    return NULL;
  }
  return l;
}

/* Take the tokens out of a slot that holds another bucket than bno, for a
 * refund; the slot then holds bno with no tokens. */
static void sw__retire_slot(sw__lease *ls, uint64_t bno, int64_t wl) {
  _Atomic uint64_t *slot = &ls->slot[bno & 1];
  uint64_t w = atomic_load(slot);
  if (sw__word_tag(w) == sw__tag(bno)) return;
  w = atomic_exchange(slot, sw__word(bno, 0));
  int64_t left = sw__word_tokens(w);
  /* the bucket it held: the latest one with that tag before bno (a number
   * below 0, which no reply can name, holds nothing to give back) */
  uint64_t back = (sw__tag(bno) - sw__word_tag(w)) & SW__TAG_MASK;
  if (left > 0 && w != 0 && back <= bno) {
    atomic_store(&ls->refund_bucket, (int64_t)(bno - back) * wl); /* <= now */
    atomic_store(&ls->refund, left);
  }
}

SW_API int sw_lease_next_call(sw_limiter *l, int64_t t, sw_lease_call *call) {
  sw__rule r;
  if (sw__cluster_limiter(l, &r) == NULL) return sw__last_code();
  SW__CHECK_NULL(call, "call");
  SW__CHECK_TIME(t);
  sw__lease *ls = &l->st->lease;
  const int64_t wl = sw__bucket_ms(l);
  int64_t since = atomic_load(&ls->call_since);
  if (since != 0 && t - since < 2 * r.timeout_ms) return 0; /* one call at a time */
  int64_t down = atomic_load(&ls->down_since);
  if (down != 0 && t < atomic_load(&ls->retry_at)) return 0; /* wait before retrying */
  bool synced = atomic_load(&ls->synced);
  int64_t now = sw__redis_time(t, atomic_load(&ls->offset));
  uint64_t bno = (uint64_t)(now / wl);
  uint64_t cur = atomic_load(&ls->slot[bno & 1]), next = atomic_load(&ls->slot[(bno + 1) & 1]);
  bool have = synced && sw__word_tag(cur) == sw__tag(bno);
  bool spent = have && atomic_load(&ls->spent_bucket) == (int64_t)bno * wl;
  int64_t need_since = atomic_load(&ls->need);
  bool need = need_since != 0;
  bool low = !have ? (!synced || need)
                   : (!spent && sw__word_tokens(cur) * 100 < r.lease * r.low_water_pct);
  /* In the last quarter of a bucket, lease the next one, so that entries at
   * the boundary find tokens. */
  bool ahead = synced && !low && wl - now % wl <= wl / 4 &&
               sw__word_tag(next) != sw__tag(bno + 1) &&
               (need || (have && sw__word_tokens(cur) < r.lease)); /* the bucket is in use */
  if (!low && !ahead && down == 0) {
    /* Nothing to ask (tokens enough, or the fleet spent the bucket): an
     * entry's request is answered, so it cannot grow old and pass for an
     * abandoned lease. An entry asking meanwhile keeps its request. */
    if (need) atomic_compare_exchange_strong(&ls->need, &need_since, 0);
    return 0;
  }
  if (!atomic_compare_exchange_strong(&ls->call_since, &since, t)) return 0;
  int32_t target = low || down != 0 ? 0 : 1;
  if (synced) sw__retire_slot(ls, bno + (uint64_t)target, wl);
  memset(call, 0, sizeof *call);
  call->threshold = sw__lease_threshold(l, &r);
  call->want = r.lease;
  call->bucket_ms = wl;
  call->buckets = l->node.second.la.n;
  call->target = target;
  call->started_ms = t;
  int64_t charge = sw__policy_take(ls, t / wl);
  if (charge > 0) { /* Redis is back: the window starts with the policy's passes */
    call->refund = -(charge < call->threshold ? charge : call->threshold);
    call->refund_bucket = (int64_t)bno * wl;
  } else {
    call->refund = atomic_exchange(&ls->refund, 0);
    call->refund_bucket = atomic_load(&ls->refund_bucket);
  }
  atomic_store(&ls->need, 0);
  atomic_fetch_add(&ls->calls, 1);
  return 1;
}

SW_API int sw_lease_apply(sw_limiter *l, int64_t t, const sw_lease_call *call, int64_t bucket,
                          int64_t granted, int64_t redis_now_ms) {
  sw__rule r;
  if (sw__cluster_limiter(l, &r) == NULL) return sw__last_code();
  SW__CHECK_NULL(call, "call");
  SW__CHECK_TIME(t);
  const int64_t wl = sw__bucket_ms(l);
  if (bucket < 0 || bucket % wl != 0 || granted < 0 || granted > (int64_t)SW__TOKEN_MASK ||
      redis_now_ms < 0)
    return sw__fail(SW_ERANGE, "reply bucket=%lld granted=%lld now=%lld does not fit buckets "
                    "of %lld ms", (long long)bucket, (long long)granted,
                    (long long)redis_now_ms, (long long)wl);
  /* The script's bucket is the one of its time (+ 1 for the next); its
   * grant is at most what was asked. Anything else is not its reply. */
  if (call->target < 0 || call->target > 1 ||
      (uint64_t)(bucket / wl) != (uint64_t)(redis_now_ms / wl) + (uint64_t)call->target)
    return sw__fail(SW_ERANGE, "reply bucket=%lld is not bucket %d after the one of Redis time "
                    "%lld (buckets of %lld ms)", (long long)bucket, (int)call->target,
                    (long long)redis_now_ms, (long long)wl);
  if (granted > call->want)
    return sw__fail(SW_ERANGE, "reply granted=%lld tokens, more than the %lld asked for",
                    (long long)granted, (long long)call->want);
  sw__lease *ls = &l->st->lease;
  atomic_store(&ls->offset, redis_now_ms - t);
  atomic_store_explicit(&ls->synced, 1, memory_order_release);
  atomic_store(&ls->down_since, 0);
  uint64_t bno = (uint64_t)(bucket / wl);
  _Atomic uint64_t *slot = &ls->slot[bno & 1];
  uint64_t w = atomic_load(slot), v;
  do {
    int64_t have = sw__word_tag(w) == sw__tag(bno) ? sw__word_tokens(w) : 0;
    int64_t sum = have + granted;
    v = sw__word(bno, sum < (int64_t)SW__TOKEN_MASK ? sum : (int64_t)SW__TOKEN_MASK);
  } while (!atomic_compare_exchange_weak(slot, &w, v));
  if (granted < call->want) atomic_store(&ls->spent_bucket, bucket);
  atomic_fetch_add(&ls->granted, granted);
  atomic_store(&ls->call_since, 0);
  return SW_OK;
}

SW_API int sw_lease_failed(sw_limiter *l, int64_t t, const sw_lease_call *call) {
  sw__rule r;
  if (sw__cluster_limiter(l, &r) == NULL) return sw__last_code();
  SW__CHECK_NULL(call, "call");
  SW__CHECK_TIME(t);
  sw__lease *ls = &l->st->lease;
  int64_t zero = 0;
  atomic_compare_exchange_strong(&ls->down_since, &zero, t > 0 ? t : 1);
  /* The next try at the next multiple of the retry interval in Redis time:
   * every node of the fleet tries at the same moments, so that they come
   * back together (a node back early takes leases that do not yet count
   * the passes of the others' failure policy). Never synced: t + retry. */
  int64_t wait = r.retry_ms;
  if (atomic_load(&ls->synced)) wait -= sw__redis_time(t, atomic_load(&ls->offset)) % r.retry_ms;
  atomic_store(&ls->retry_at, sw__sat_add(t, wait));
  if (call->refund > 0 && call->refund <= (int64_t)SW__TOKEN_MASK) { /* not given back: */
    atomic_store(&ls->refund_bucket, call->refund_bucket);          /* with the next call */
    atomic_store(&ls->refund, call->refund);
  } else if (call->refund < 0 && call->refund >= -(int64_t)SW__TOKEN_MASK &&
             call->started_ms >= 0) { /* a charge not made: with the next call */
    sw__policy_add(ls, call->started_ms / sw__bucket_ms(l), -call->refund);
  }
  atomic_store(&ls->call_since, 0);
  return SW_OK;
}

SW_API int sw_lease_stats(const sw_limiter *l, int64_t t, sw_lease_info *info) {
  SW__CHECK_NULL(l, "limiter");
  SW__CHECK_NULL(info, "info");
  SW__CHECK_TIME(t);
  const sw__lease *ls = &l->st->lease;
  memset(info, 0, sizeof *info);
  info->calls = atomic_load(&ls->calls);
  info->granted = atomic_load(&ls->granted);
  info->offset_ms = atomic_load(&ls->offset);
  info->down_since_ms = atomic_load(&ls->down_since);
  info->up = atomic_load(&ls->synced) && info->down_since_ms == 0;
  const int64_t wl = sw__bucket_ms(l);
  uint64_t bno = (uint64_t)(sw__redis_time(t, info->offset_ms) / wl);
  uint64_t w = atomic_load(&ls->slot[bno & 1]);
  info->tokens = sw__word_tag(w) == sw__tag(bno) ? sw__word_tokens(w) : 0;
  info->need = atomic_load(&ls->need) != 0;
  return SW_OK;
}
