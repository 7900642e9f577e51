/* SPDX-License-Identifier: Apache-2.0 */
/* sw_cluster: the Redis side of cluster rules for C and Python programs. It
 * owns the connections (redis.c) and a refiller thread that, every tick,
 * asks each of its limiters whether it needs a lease call
 * (sw_lease_next_call), runs the calls as one pipeline per Redis node, and
 * hands the replies back (sw_lease_apply / sw_lease_failed). Entries never
 * wait for it. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "limiter.h"
#include "redis.h"

#define SW__CLUSTER_CHECK(c)                                                          \
  do {                                                                                \
    if (sw__unlikely((c) == NULL)) return sw__fail(SW_ENULL, "cluster is NULL");      \
  } while (0)

#ifndef SW_HAVE_HIREDIS

static int sw__not_built(void) {
  return sw__fail(SW_ENOTSUP, "cluster support not built (libsw was configured without "
                  "hiredis)");
}
SW_API int sw_cluster_create(sw_cluster **out, const char *servers, const sw_options *opts) {
  if (out) *out = NULL;
  return sw__not_built();
}
SW_API void sw_cluster_free(sw_cluster *c) {}
SW_API int sw_cluster_add(sw_cluster *c, sw_limiter *l, const char *resource) {
  return sw__not_built();
}
SW_API int sw_cluster_refill(sw_cluster *c) { return sw__not_built(); }
SW_API int sw_cluster_remove(sw_cluster *c, sw_limiter *l) { return sw__not_built(); }
SW_API int sw_cluster_start(sw_cluster *c) { return sw__not_built(); }
SW_API int64_t sw_cluster_round_trips(const sw_cluster *c) { return sw__not_built(); }
SW_API int sw_cluster_entry_exact(sw_cluster *c, sw_limiter *l, int64_t n, sw_decision *d) {
  return sw__not_built();
}
SW_API int sw_cluster_set_auth(sw_cluster *c, const char *user, const char *password) {
  return sw__not_built();
}
SW_API int sw_cluster_set_database(sw_cluster *c, int64_t db) { return sw__not_built(); }
SW_API int sw_cluster_set_log(sw_cluster *c, sw_cluster_log_fn fn, void *user) {
  return sw__not_built();
}

#else

typedef struct sw__cluster_item {
  sw_limiter *l;
  char key[SW_NAME_MAX + 8]; /* "sw:{resource}" */
} sw__cluster_item;

struct sw_cluster {
  sw__redis *redis;
  pthread_mutex_t lock; /* the item list, the Redis client and the log callback */
  sw__cluster_item *items;
  int count, cap;
  pthread_t thread;
  _Atomic int running;
  int64_t tick_ms;
  sw_cluster_log_fn log_fn;
  void *log_user;
};

#define SW__PASSWORD_MAX 1024

SW_API int sw_cluster_create(sw_cluster **out, const char *servers, const sw_options *opts) {
  SW__CHECK_NULL(out, "out");
  *out = NULL;
  SW__CHECK_NULL(servers, "servers");
  int64_t timeout;
  sw_options_get(opts, SW_OPT_CLUSTER_TIMEOUT_MS, &timeout);
  sw_cluster *c = sw__calloc(1, sizeof *c);
  if (c == NULL) return sw__fail(SW_ENOMEM, "cluster");
  int rc = sw__redis_open(&c->redis, servers, timeout);
  if (rc < 0) {
    sw__free(c);
    return rc;
  }
  pthread_mutex_init(&c->lock, NULL);
  c->tick_ms = 1;
  *out = c;
  return SW_OK;
}

static void sw__cluster_stop(sw_cluster *c) {
  if (atomic_exchange(&c->running, 0)) pthread_join(c->thread, NULL);
}

SW_API void sw_cluster_free(sw_cluster *c) {
  if (c == NULL) return;
  sw__cluster_stop(c);
  for (int i = 0; i < c->count; i++) atomic_store(&c->items[i].l->cluster, NULL);
  sw__redis_close(c->redis);
  pthread_mutex_destroy(&c->lock);
  sw__free(c->items);
  sw__free(c);
}

SW_API int sw_cluster_add(sw_cluster *c, sw_limiter *l, const char *resource) {
  SW__CLUSTER_CHECK(c);
  SW__CHECK_NULL(l, "limiter");
  SW__CHECK_NULL(resource, "resource");
  size_t len = strlen(resource);
  if (len == 0 || len > SW_NAME_MAX)
    return sw__fail(SW_ERANGE, "resource name of %zu bytes is outside 1..%d", len, SW_NAME_MAX);
  sw__rule r;
  sw__limiter_rule(l, &r);
  if (!r.cluster) return sw__fail(SW_ESTATE, "the limiter's rule is not a cluster rule");
  pthread_mutex_lock(&c->lock);
  int rc = SW_OK;
  if (atomic_load(&l->cluster) != NULL && l->cluster_pid == getpid()) /* (a parent's: stale) */
    rc = sw__fail(SW_ESTATE, "the limiter is already added to a cluster (sw_cluster_remove first)");
  else if (c->count == c->cap) {
    int cap = c->cap ? 2 * c->cap : 8;
    sw__cluster_item *items = sw__calloc((size_t)cap, sizeof *items);
    if (items == NULL) {
      rc = sw__fail(SW_ENOMEM, "cluster items");
    } else {
      if (c->count) memcpy(items, c->items, (size_t)c->count * sizeof *items);
      sw__free(c->items);
      c->items = items;
      c->cap = cap;
    }
  }
  if (rc == SW_OK) {
    atomic_store(&l->cluster, c);
    l->cluster_pid = getpid();
    c->items[c->count].l = l;
    snprintf(c->items[c->count].key, sizeof c->items[0].key, "sw:{%s}", resource);
    c->count++;
  }
  pthread_mutex_unlock(&c->lock);
  return rc;
}

SW_API int sw_cluster_set_auth(sw_cluster *c, const char *user, const char *password) {
  SW__CLUSTER_CHECK(c);
  if (user && !password)
    return sw__fail(SW_EINVAL, "a Redis user name (\"%.64s\") needs a password", user);
  if (password && (password[0] == '\0' || strlen(password) > SW__PASSWORD_MAX))
    return sw__fail(SW_EINVAL, "Redis password of %zu bytes: want 1..%d", strlen(password),
                    SW__PASSWORD_MAX);
  if (user && (user[0] == '\0' || strlen(user) > SW__PASSWORD_MAX))
    return sw__fail(SW_EINVAL, "Redis user name of %zu bytes: want 1..%d", strlen(user),
                    SW__PASSWORD_MAX);
  pthread_mutex_lock(&c->lock);
  int rc = sw__redis_set_auth(c->redis, user, password);
  pthread_mutex_unlock(&c->lock);
  return rc;
}

SW_API int sw_cluster_set_database(sw_cluster *c, int64_t db) {
  SW__CLUSTER_CHECK(c);
  if (db < 0 || db > INT32_MAX)
    return sw__fail(SW_ERANGE, "Redis database %lld is outside 0..%d", (long long)db, INT32_MAX);
  pthread_mutex_lock(&c->lock);
  sw__redis_set_db(c->redis, db);
  pthread_mutex_unlock(&c->lock);
  return SW_OK;
}

SW_API int sw_cluster_set_log(sw_cluster *c, sw_cluster_log_fn fn, void *user) {
  SW__CLUSTER_CHECK(c);
  pthread_mutex_lock(&c->lock);
  c->log_fn = fn;
  c->log_user = fn ? user : NULL;
  pthread_mutex_unlock(&c->lock);
  return SW_OK;
}

/* The Redis client's events, taken under the lock. */
typedef struct sw__log_batch {
  sw__redis_event ev[SW__REDIS_EVENTS];
  int n;
  sw_cluster_log_fn fn;
  void *user;
} sw__log_batch;

static void sw__log_take(sw_cluster *c, sw__log_batch *b) {
  b->n = sw__redis_events(c->redis, b->ev, SW__REDIS_EVENTS);
  b->fn = c->log_fn;
  b->user = c->log_user;
}

/* ... and logged once the lock is released. */
static void sw__log_emit(const sw__log_batch *b) {
  for (int i = 0; b->fn && i < b->n; i++) {
    char msg[256];
    const sw__redis_event *e = &b->ev[i];
    if (e->up)
      snprintf(msg, sizeof msg, "Redis %s is back up: cluster rules take leases again",
               e->server);
    else
      snprintf(msg, sizeof msg, "Redis %s is down (%s): cluster rules follow their failure "
               "policy", e->server, e->message);
    b->fn(b->user, e->up, e->server, msg);
  }
}

SW_API int sw_cluster_remove(sw_cluster *c, sw_limiter *l) {
  SW__CLUSTER_CHECK(c);
  SW__CHECK_NULL(l, "limiter");
  int rc = sw__fail(SW_ENOTFOUND, "the limiter was not added to this cluster");
  pthread_mutex_lock(&c->lock); /* a refill round in progress finishes first */
  for (int i = 0; i < c->count; i++)
    if (c->items[i].l == l) {
      atomic_store(&l->cluster, NULL);
      c->items[i] = c->items[--c->count];
      rc = SW_OK;
      break;
    }
  pthread_mutex_unlock(&c->lock);
  return rc;
}

/* The arguments of one lease call, as strings. */
typedef struct sw__call_args {
  char num[7][24];
  const char *argv[11];
  size_t len[11];
} sw__call_args;

static void sw__build(sw__call_args *a, const char *key, const sw_lease_call *call) {
  const long long v[7] = {call->threshold, call->want,   call->bucket_ms,    call->buckets,
                          call->target,    call->refund, call->refund_bucket};
  a->argv[0] = "EVALSHA";
  a->argv[1] = ""; /* the script's SHA, filled in by redis.c */
  a->argv[2] = "1";
  a->argv[3] = key;
  for (int i = 0; i < 7; i++) {
    snprintf(a->num[i], sizeof a->num[i], "%lld", v[i]);
    a->argv[4 + i] = a->num[i];
  }
  for (int i = 0; i < 11; i++) a->len[i] = strlen(a->argv[i]);
}

/* Apply a command's outcome to its limiter: a reply that sw_lease_apply
 * refuses (not the script's) counts as a failure. */
static void sw__settle(sw_limiter *l, const sw_lease_call *call, const sw__redis_cmd *cmd) {
  int64_t now = sw__now_ms();
  if (cmd->ok && cmd->nints >= 3 &&
      sw_lease_apply(l, cmd->recv_ms ? cmd->recv_ms : now, call, cmd->ints[0], cmd->ints[1],
                     cmd->ints[2]) == SW_OK)
    return;
  sw_lease_failed(l, now, call);
}

SW_API int sw_cluster_refill(sw_cluster *c) {
  SW__CLUSTER_CHECK(c);
  pthread_mutex_lock(&c->lock);
  int n = 0, rc = SW_OK;
  sw_lease_call *calls = sw__calloc((size_t)c->count + 1, sizeof *calls);
  sw__call_args *args = sw__calloc((size_t)c->count + 1, sizeof *args);
  sw__redis_cmd *cmds = sw__calloc((size_t)c->count + 1, sizeof *cmds);
  int *which = sw__calloc((size_t)c->count + 1, sizeof *which);
  if (!calls || !args || !cmds || !which) {
    rc = sw__fail(SW_ENOMEM, "refill round");
    goto out;
  }
  int64_t now = sw__now_ms();
  for (int i = 0; i < c->count; i++) {
    if (sw_lease_next_call(c->items[i].l, now, &calls[n]) != 1) continue;
    sw__build(&args[n], c->items[i].key, &calls[n]);
    cmds[n] = (sw__redis_cmd){.key = c->items[i].key, .argc = 11, .argv = args[n].argv,
                              .argvlen = args[n].len};
    which[n++] = i;
  }
  if (n > 0) {
    rc = sw__redis_run(c->redis, cmds, n);
    for (int k = 0; k < n; k++) sw__settle(c->items[which[k]].l, &calls[k], &cmds[k]);
  }
out:;
  sw__log_batch log;
  sw__log_take(c, &log);
  pthread_mutex_unlock(&c->lock);
  sw__log_emit(&log);
  sw__free(calls);
  sw__free(args);
  sw__free(cmds);
  sw__free(which);
  return rc < 0 ? rc : n;
}

static void *sw__refiller(void *arg) {
  sw_cluster *c = arg;
  while (atomic_load(&c->running)) {
    sw_cluster_refill(c);
    struct timespec ts = {0, c->tick_ms * 1000000};
    nanosleep(&ts, NULL);
  }
  return NULL;
}

SW_API int sw_cluster_start(sw_cluster *c) {
  SW__CLUSTER_CHECK(c);
  if (atomic_exchange(&c->running, 1)) return SW_OK;
  int rc = pthread_create(&c->thread, NULL, sw__refiller, c);
  if (rc != 0) {
    atomic_store(&c->running, 0);
    return sw__fail(SW_ENOMEM, "cannot start the refiller thread: %s", strerror(rc));
  }
  return SW_OK;
}

SW_API int64_t sw_cluster_round_trips(const sw_cluster *c) {
  SW__CLUSTER_CHECK(c);
  return sw__redis_round_trips(c->redis);
}

SW_API int sw_cluster_entry_exact(sw_cluster *c, sw_limiter *l, int64_t n, sw_decision *d) {
  SW__CLUSTER_CHECK(c);
  SW__CHECK_NULL(l, "limiter");
  SW__CHECK_WRITABLE(l);
  SW__CHECK_NULL(d, "decision");
  if (n < 0 || n > INT32_MAX)
    return sw__fail(SW_ERANGE, "n=%lld is outside 0..%d", (long long)n, INT32_MAX);
  sw__rule r;
  sw__limiter_rule(l, &r);
  if (!r.cluster) return sw__fail(SW_ESTATE, "the limiter's rule is not a cluster rule");
  const char *key = NULL;
  pthread_mutex_lock(&c->lock);
  for (int i = 0; i < c->count && !key; i++)
    if (c->items[i].l == l) key = c->items[i].key;
  if (key == NULL) {
    pthread_mutex_unlock(&c->lock);
    return sw__fail(SW_ENOTFOUND, "the limiter was not added to this cluster");
  }
  int64_t t = sw__now_ms();
  sw_lease_call call = {.threshold = sw__lease_threshold(l, &r), .want = n,
                        .bucket_ms = l->node.second.la.wl, .buckets = l->node.second.la.n,
                        .started_ms = t};
  sw__call_args a;
  sw__build(&a, key, &call);
  sw__redis_cmd cmd = {.key = key, .argc = 11, .argv = a.argv, .argvlen = a.len};
  sw__redis_run(c->redis, &cmd, 1);
  sw__log_batch log;
  sw__log_take(c, &log);
  pthread_mutex_unlock(&c->lock);
  sw__log_emit(&log);
  memset(d, 0, sizeof *d);
  int64_t wl = l->node.second.la.wl, bucket = cmd.ints[0], now_r = cmd.ints[2];
  /* Only the script's reply counts: {bucket of its time, 0..n granted, time,
   * window total}; anything else (or no reply) is Redis down. */
  if (!(cmd.ok && cmd.nints >= 4 && now_r >= 0 && bucket == now_r - now_r % wl &&
        cmd.ints[1] >= 0 && cmd.ints[1] <= n && cmd.ints[3] >= 0)) {
    sw_lease_failed(l, t, &call); /* the rule's failure policy */
    sw__decide_cluster(l, &r, t, n, 0, d);
    sw__limiter_settle(l, &r, t, n, 0, d);
    return SW_OK;
  }
  if (cmd.ints[1] >= n) {
    sw__node_count_pass(&l->node, t, n, false, true);
    d->remaining = call.threshold > cmd.ints[3] ? call.threshold - cmd.ints[3] : 0;
  } else {
    /* a partial grant goes back at once */
    if (cmd.ints[1] > 0) {
      sw_lease_call back = call;
      back.want = 0;
      back.refund = cmd.ints[1];
      back.refund_bucket = bucket;
      sw__build(&a, key, &back);
      sw__redis_cmd undo = {.key = key, .argc = 11, .argv = a.argv, .argvlen = a.len};
      pthread_mutex_lock(&c->lock);
      sw__redis_run(c->redis, &undo, 1);
      sw__log_take(c, &log);
      pthread_mutex_unlock(&c->lock);
      sw__log_emit(&log);
    }
    d->verdict = SW_VERDICT_BLOCK;
    d->retry_after_ms = wl - (now_r - bucket);
    sw__limiter_settle(l, &r, t, n, 0, d);
  }
  return SW_OK;
}

#endif /* SW_HAVE_HIREDIS */
