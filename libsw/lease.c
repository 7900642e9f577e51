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

static inline uint64_t sw__tag(int64_t bucket_no) { return (uint64_t)bucket_no & SW__TAG_MASK; }
static inline uint64_t sw__word(int64_t bucket_no, int64_t tokens) {
  return sw__tag(bucket_no) << SW__TOKEN_BITS | ((uint64_t)tokens & SW__TOKEN_MASK);
}
static inline uint64_t sw__word_tag(uint64_t w) { return w >> SW__TOKEN_BITS; }
static inline int64_t sw__word_tokens(uint64_t w) { return (int64_t)(w & SW__TOKEN_MASK); }

SW_API const char *sw_lease_script(void) {
  /* KEYS[1]: the resource's hash. ARGV: threshold, want, bucket_ms, buckets,
   * target (0 current, 1 next bucket), refund, refund_bucket.
   * Returns {bucket, granted, redis_now_ms, window_total}. */
  return "local key = KEYS[1]\n"
         "local threshold, want = tonumber(ARGV[1]), tonumber(ARGV[2])\n"
         "local bucket_ms, buckets = tonumber(ARGV[3]), tonumber(ARGV[4])\n"
         "local target, refund = tonumber(ARGV[5]), tonumber(ARGV[6])\n"
         "local t = redis.call('TIME')\n"
         "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
         "local bucket = now - now % bucket_ms + target * bucket_ms\n"
         "if refund > 0 then\n"
         "  local left = redis.call('HINCRBY', key, ARGV[7], -refund)\n"
         "  if left <= 0 then redis.call('HDEL', key, ARGV[7]) end\n"
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

static int64_t sw__fleet_threshold(const sw_limiter *l, const sw__rule *r) {
  double v = floor(r->threshold * (double)l->node.second.la.interval / 1000.0);
  return v < 1e15 ? (int64_t)v : INT64_C(1000000000000000);
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
    int64_t now = t + atomic_load_explicit(&ls->offset, memory_order_relaxed);
    int64_t bno = now / wl, bucket = bno * wl;
    _Atomic uint64_t *slot = &ls->slot[bno & 1];
    uint64_t w = atomic_load_explicit(slot, memory_order_relaxed);
    while (sw__word_tag(w) == sw__tag(bno) && sw__word_tokens(w) >= n) {
      if (atomic_compare_exchange_weak_explicit(slot, &w, w - (uint64_t)n, memory_order_relaxed,
                                                memory_order_relaxed)) {
        int64_t left = sw__word_tokens(w) - n;
        if (left * 100 < r->lease * r->low_water_pct) sw__lease_want(ls, t);
        sw__node_count_pass(&l->node, t, n, false, true);
        d->remaining = left;
        return SW_OK;
      }
    }
    if (sw__word_tag(w) == sw__tag(bno) &&
        atomic_load_explicit(&ls->spent_bucket, memory_order_relaxed) == bucket) {
      /* The fleet spent this bucket's budget: the next bucket may have room. */
      d->verdict = SW_VERDICT_BLOCK;
      d->retry_after_ms = bucket + wl - now;
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
  /* Redis is down, or was never reached: the failure policy. */
  switch (r->failure) {
  case SW_CLUSTER_FAIL_OPEN:
    sw__node_count_pass(&l->node, t, n, false, true);
    d->remaining = INT32_MAX;
    return SW_OK;
  case SW_CLUSTER_FAIL_CLOSED:
    d->verdict = SW_VERDICT_BLOCK;
    d->retry_after_ms = r->retry_ms;
    return SW_OK;
  default:
    sw__limiter_decide_qps(l, r, t, n, flags, r->threshold / (r->nodes > 0 ? r->nodes : 1), d);
    return SW_OK;
  }
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
static void sw__retire_slot(sw__lease *ls, int64_t bno, int64_t wl) {
  _Atomic uint64_t *slot = &ls->slot[bno & 1];
  uint64_t w = atomic_load(slot);
  if (sw__word_tag(w) == sw__tag(bno)) return;
  w = atomic_exchange(slot, sw__word(bno, 0));
  int64_t left = sw__word_tokens(w);
  if (left > 0 && w != 0) {
    /* the bucket it held: the latest one with that tag before bno */
    int64_t old_no = bno - (int64_t)((sw__tag(bno) - sw__word_tag(w)) & SW__TAG_MASK);
    atomic_store(&ls->refund_bucket, old_no * wl);
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
  int64_t now = t + atomic_load(&ls->offset), bno = now / wl;
  uint64_t cur = atomic_load(&ls->slot[bno & 1]), next = atomic_load(&ls->slot[(bno + 1) & 1]);
  bool have = synced && sw__word_tag(cur) == sw__tag(bno);
  bool spent = have && atomic_load(&ls->spent_bucket) == bno * wl;
  int64_t need_since = atomic_load(&ls->need);
  bool need = need_since != 0;
  bool low = !have ? (!synced || need)
                   : (!spent && sw__word_tokens(cur) * 100 < r.lease * r.low_water_pct);
  /* In the last quarter of a bucket, lease the next one, so that entries at
   * the boundary find tokens. */
  bool ahead = synced && !low && (bno + 1) * wl - now <= wl / 4 &&
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
  if (synced) sw__retire_slot(ls, bno + target, wl);
  memset(call, 0, sizeof *call);
  call->threshold = sw__fleet_threshold(l, &r);
  call->want = r.lease;
  call->bucket_ms = wl;
  call->buckets = l->node.second.la.n;
  call->target = target;
  call->refund = atomic_exchange(&ls->refund, 0);
  call->refund_bucket = atomic_load(&ls->refund_bucket);
  call->started_ms = t;
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
  sw__lease *ls = &l->st->lease;
  atomic_store(&ls->offset, redis_now_ms - t);
  atomic_store_explicit(&ls->synced, 1, memory_order_release);
  atomic_store(&ls->down_since, 0);
  int64_t bno = bucket / wl;
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
  atomic_store(&ls->retry_at, t + r.retry_ms);
  if (call->refund > 0) { /* not given back: try with the next call */
    atomic_store(&ls->refund_bucket, call->refund_bucket);
    atomic_fetch_add(&ls->refund, call->refund);
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
  int64_t bno = (t + info->offset_ms) / wl;
  uint64_t w = atomic_load(&ls->slot[bno & 1]);
  info->tokens = sw__word_tag(w) == sw__tag(bno) ? sw__word_tokens(w) : 0;
  info->need = atomic_load(&ls->need) != 0;
  return SW_OK;
}
