/* A small Redis (and Redis Cluster) client for the lease refiller (redis.h). */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#ifdef SW_HAVE_HIREDIS
#include <errno.h>
#include <hiredis/hiredis.h>
#include <stdatomic.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "internal.h"
#include "redis.h"

#define SW__REDIS_NODES 64
#define SW__SLOTS 16384

typedef struct sw__redis_node {
  char host[64];
  int port;
  redisContext *ctx;
  int script_loaded;
} sw__redis_node;

struct sw__redis {
  sw__redis_node nodes[SW__REDIS_NODES];
  int nnodes, nseeds;
  int cluster;               /* -1 unknown, 0 one server, 1 Redis Cluster */
  int stale;                 /* a node failed: refresh the slot map first */
  uint8_t slots[SW__SLOTS];  /* node index per slot (cluster) */
  int64_t timeout_ms;
  _Atomic int64_t round_trips; /* read by other threads (sw_cluster_round_trips) */
  char sha[41];
};

static int64_t sw__mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait for fd to be ready for events until the deadline: 1 ready, 0 not. */
static int sw__wait(int fd, short events, int64_t deadline) {
  for (;;) {
    int64_t left = deadline - sw__mono_ms();
    if (left <= 0) return 0;
    struct pollfd p = {fd, events, 0};
    int rc = poll(&p, 1, (int)left);
    if (rc > 0) return 1;
    if (rc == 0) return 0;
    if (errno != EINTR) return 0;
  }
}

static int sw__add_node(sw__redis *r, const char *host, int port) {
  for (int i = 0; i < r->nnodes; i++)
    if (r->nodes[i].port == port && strcmp(r->nodes[i].host, host) == 0) return i;
  if (r->nnodes == SW__REDIS_NODES || strlen(host) >= sizeof r->nodes[0].host) return -1;
  sw__redis_node *n = &r->nodes[r->nnodes];
  memset(n, 0, sizeof *n);
  snprintf(n->host, sizeof n->host, "%s", host);
  n->port = port;
  return r->nnodes++;
}

static void sw__drop(sw__redis_node *n) {
  if (n->ctx) redisFree(n->ctx); /* a context that timed out is unusable */
  n->ctx = NULL;
  n->script_loaded = 0;
}

static int sw__connect(sw__redis *r, sw__redis_node *n, int64_t deadline) {
  if (n->ctx) return 1;
  redisContext *c = redisConnectNonBlock(n->host, n->port);
  if (c == NULL || c->err) {
    if (c) redisFree(c);
    return 0;
  }
  int err = 0;
  socklen_t len = sizeof err;
  if (!sw__wait(c->fd, POLLOUT, deadline) ||
      getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err != 0) {
    redisFree(c);
    return 0;
  }
  n->ctx = c;
  return 1;
}

/* Send what is buffered and read count replies into replies[]. */
static int sw__exchange(sw__redis *r, sw__redis_node *n, redisReply **replies, int count,
                        int64_t deadline) {
  int done = 0;
  while (!done) {
    if (redisBufferWrite(n->ctx, &done) == REDIS_ERR) return 0;
    if (!done && !sw__wait(n->ctx->fd, POLLOUT, deadline)) return 0;
  }
  r->round_trips++;
  for (int i = 0; i < count; i++) {
    void *reply = NULL;
    for (;;) {
      if (redisGetReply(n->ctx, &reply) == REDIS_ERR) return 0;
      if (reply) break;
      if (!sw__wait(n->ctx->fd, POLLIN, deadline) || redisBufferRead(n->ctx) == REDIS_ERR)
        return 0;
    }
    replies[i] = reply;
  }
  return 1;
}

/* One command on one node, with the deadline: the reply or NULL. */
static redisReply *sw__command(sw__redis *r, sw__redis_node *n, int64_t deadline, int argc,
                               const char **argv, const size_t *argvlen) {
  if (!sw__connect(r, n, deadline)) return NULL;
  redisReply *reply = NULL;
  if (redisAppendCommandArgv(n->ctx, argc, argv, argvlen) != REDIS_OK ||
      !sw__exchange(r, n, &reply, 1, deadline)) {
    sw__drop(n);
    return NULL;
  }
  return reply;
}

static int sw__load_script(sw__redis *r, sw__redis_node *n, int64_t deadline) {
  if (n->script_loaded) return 1;
  const char *argv[] = {"SCRIPT", "LOAD", sw_lease_script()};
  size_t len[] = {6, 4, strlen(argv[2])};
  redisReply *rep = sw__command(r, n, deadline, 3, argv, len);
  int ok = rep && rep->type == REDIS_REPLY_STRING && rep->len == 40;
  if (ok) {
    memcpy(r->sha, rep->str, 40);
    r->sha[40] = '\0';
    n->script_loaded = 1;
  }
  if (rep) freeReplyObject(rep);
  return ok;
}

/* CLUSTER SLOTS from any node: the slot map, or one-server mode. */
static int sw__refresh(sw__redis *r, int64_t deadline) {
  for (int i = 0; i < r->nnodes; i++) {
    const char *argv[] = {"CLUSTER", "SLOTS"};
    size_t len[] = {7, 5};
    redisReply *rep = sw__command(r, &r->nodes[i], deadline, 2, argv, len);
    if (rep == NULL) continue;
    if (rep->type == REDIS_REPLY_ERROR) { /* "cluster support disabled": one server */
      freeReplyObject(rep);
      r->cluster = 0;
      if (i != 0) { /* keep the server that answered as node 0 */
        sw__drop(&r->nodes[0]);
        r->nodes[0] = r->nodes[i];
        memset(&r->nodes[i], 0, sizeof r->nodes[i]);
      }
      for (int k = 1; k < r->nnodes; k++) sw__drop(&r->nodes[k]);
      r->nnodes = 1;
      return 1;
    }
    int ok = rep->type == REDIS_REPLY_ARRAY;
    for (size_t k = 0; ok && k < rep->elements; k++) {
      redisReply *e = rep->element[k];
      if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 || e->element[2]->type != REDIS_REPLY_ARRAY ||
          e->element[2]->elements < 2) {
        ok = 0;
        break;
      }
      long long lo = e->element[0]->integer, hi = e->element[1]->integer;
      redisReply *master = e->element[2];
      int idx = sw__add_node(r, master->element[0]->str, (int)master->element[1]->integer);
      if (idx < 0 || lo < 0 || hi >= SW__SLOTS || lo > hi) {
        ok = 0;
        break;
      }
      for (long long s = lo; s <= hi; s++) r->slots[s] = (uint8_t)idx;
    }
    freeReplyObject(rep);
    if (ok) {
      r->cluster = 1;
      return 1;
    }
  }
  return 0;
}

/* CRC16 (XMODEM) of the key's hash tag, as Redis Cluster computes slots. */
static unsigned sw__slot(const char *key) {
  size_t len = strlen(key);
  const char *open = strchr(key, '{');
  if (open) {
    const char *close = strchr(open + 1, '}');
    if (close && close > open + 1) {
      key = open + 1;
      len = (size_t)(close - open - 1);
    }
  }
  unsigned crc = 0;
  for (size_t i = 0; i < len; i++) {
    crc ^= (unsigned)(unsigned char)key[i] << 8;
    for (int b = 0; b < 8; b++) crc = crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1;
    crc &= 0xffff;
  }
  return crc % SW__SLOTS;
}

int sw__redis_open(sw__redis **out, const char *servers, int64_t timeout_ms) {
  sw__redis *r = sw__calloc(1, sizeof *r);
  if (r == NULL) return sw__fail(SW_ENOMEM, "redis client");
  r->timeout_ms = timeout_ms;
  r->cluster = -1;
  char buf[1024];
  snprintf(buf, sizeof buf, "%s", servers);
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    char *colon = strrchr(tok, ':');
    int port = colon ? atoi(colon + 1) : 6379;
    if (colon) *colon = '\0';
    if (port <= 0 || port > 65535 || *tok == '\0' || sw__add_node(r, tok, port) < 0) {
      sw__free(r);
      return sw__fail(SW_EINVAL, "bad Redis server list \"%s\": want host:port[,host:port]",
                      servers);
    }
  }
  if (r->nnodes == 0) {
    sw__free(r);
    return sw__fail(SW_EINVAL, "empty Redis server list");
  }
  r->nseeds = r->nnodes;
  *out = r;
  return SW_OK;
}

void sw__redis_close(sw__redis *r) {
  if (r == NULL) return;
  for (int i = 0; i < r->nnodes; i++) sw__drop(&r->nodes[i]);
  sw__free(r);
}

int64_t sw__redis_round_trips(const sw__redis *r) { return r->round_trips; }
const char *sw__redis_script_sha(const sw__redis *r) { return r->sha; }

static void sw__set_error(sw__redis_cmd *c, const char *msg) {
  c->ok = 0;
  snprintf(c->error, sizeof c->error, "%s", msg);
}

/* Copy an integer-array reply into the command; errors into its message. */
static void sw__take(sw__redis_cmd *c, const redisReply *rep) {
  if (rep->type == REDIS_REPLY_ERROR) {
    sw__set_error(c, rep->str);
    return;
  }
  if (rep->type != REDIS_REPLY_ARRAY || rep->elements > 4) {
    sw__set_error(c, "unexpected reply");
    return;
  }
  c->recv_ms = sw_now_ms();
  c->nints = (int)rep->elements;
  for (size_t i = 0; i < rep->elements; i++) c->ints[i] = rep->element[i]->integer;
  c->ok = 1;
}

/* One command alone (the retry path): to node idx, after ASKING if asked. */
static void sw__one(sw__redis *r, sw__redis_cmd *c, int idx, int asking, int64_t deadline) {
  sw__redis_node *n = &r->nodes[idx];
  if (!sw__load_script(r, n, deadline)) {
    sw__set_error(c, "timeout or connection error");
    return;
  }
  c->argv[1] = r->sha;
  ((size_t *)c->argvlen)[1] = 40;
  if (asking) {
    const char *argv[] = {"ASKING"};
    size_t len[] = {6};
    redisReply *rep = sw__command(r, n, deadline, 1, argv, len);
    if (rep) freeReplyObject(rep);
  }
  redisReply *rep = sw__command(r, n, deadline, c->argc, c->argv, c->argvlen);
  if (rep == NULL) {
    sw__set_error(c, "timeout or connection error");
    return;
  }
  sw__take(c, rep);
  freeReplyObject(rep);
}

int sw__redis_run(sw__redis *r, sw__redis_cmd *cmds, int count) {
  int64_t deadline = sw__mono_ms() + r->timeout_ms;
  for (int i = 0; i < count; i++) sw__set_error(&cmds[i], "not sent");
  if (r->cluster == 1 && r->stale && sw__refresh(r, deadline)) r->stale = 0;
  if (r->cluster < 0 && !sw__refresh(r, deadline))
    return sw__fail(SW_EIO, "no Redis server answered within %lld ms (%s:%d first)",
                    (long long)r->timeout_ms, r->nodes[0].host, r->nodes[0].port);
  int failed = 0;
  redisReply **replies = sw__calloc((size_t)count, sizeof *replies);
  if (replies == NULL) return sw__fail(SW_ENOMEM, "replies");
  /* One pipeline per node. */
  for (int node = 0; node < r->nnodes; node++) {
    int mine = 0;
    for (int i = 0; i < count; i++)
      mine += (r->cluster ? r->slots[sw__slot(cmds[i].key)] : 0) == node;
    if (mine == 0) continue;
    sw__redis_node *n = &r->nodes[node];
    deadline = sw__mono_ms() + r->timeout_ms; /* a slow node leaves the others their time */
    if (!sw__load_script(r, n, deadline)) {
      failed = 1;
      continue;
    }
    int k = 0;
    for (int i = 0; i < count; i++) {
      if ((r->cluster ? r->slots[sw__slot(cmds[i].key)] : 0) != node) continue;
      cmds[i].argv[1] = r->sha;
      ((size_t *)cmds[i].argvlen)[1] = 40;
      redisAppendCommandArgv(n->ctx, cmds[i].argc, cmds[i].argv, cmds[i].argvlen);
      k++;
    }
    redisReply **rep = replies;
    if (!sw__exchange(r, n, rep, k, deadline)) {
      sw__drop(n);
      for (int j = 0; j < k; j++)
        if (rep[j]) freeReplyObject(rep[j]);
      memset(replies, 0, (size_t)count * sizeof *replies);
      failed = 1;
      continue;
    }
    int j = 0;
    for (int i = 0; i < count; i++) {
      if ((r->cluster ? r->slots[sw__slot(cmds[i].key)] : 0) != node) continue;
      sw__take(&cmds[i], rep[j]);
      freeReplyObject(rep[j]);
      rep[j++] = NULL;
    }
  }
  sw__free(replies);
  /* Redirections and a script the server forgot: once more, one by one. */
  for (int i = 0; i < count; i++) {
    sw__redis_cmd *c = &cmds[i];
    if (c->ok) continue;
    deadline = sw__mono_ms() + r->timeout_ms;
    int idx = r->cluster ? r->slots[sw__slot(c->key)] : 0;
    if (strncmp(c->error, "NOSCRIPT", 8) == 0) {
      r->nodes[idx].script_loaded = 0;
      sw__one(r, c, idx, 0, deadline);
    } else if (strncmp(c->error, "MOVED", 5) == 0 && r->cluster) {
      if (sw__refresh(r, deadline)) sw__one(r, c, r->slots[sw__slot(c->key)], 0, deadline);
    } else if (strncmp(c->error, "ASK ", 4) == 0 && r->cluster) {
      char host[64];
      int slot, port;
      if (sscanf(c->error, "ASK %d %63[^:]:%d", &slot, host, &port) == 3) {
        int target = sw__add_node(r, host, port);
        if (target >= 0) sw__one(r, c, target, 1, deadline);
      }
    }
  }
  if (failed && r->cluster == 1) r->stale = 1;
  if (failed)
    return sw__fail(SW_EIO, "a Redis node did not answer within %lld ms",
                    (long long)r->timeout_ms);
  return SW_OK;
}

#endif /* SW_HAVE_HIREDIS */
