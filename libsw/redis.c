/* SPDX-License-Identifier: Apache-2.0 */
/* A small Redis (and Redis Cluster) client for the lease refiller (redis.h). */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#ifdef SW_HAVE_HIREDIS
#include <errno.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "internal.h"
#include "redis.h"

#define SW__REDIS_NODES 64
#define SW__SLOTS 16384

#define SW__HOST_MAX 63

typedef struct sw__redis_node {
  char host[SW__HOST_MAX + 1];
  int port;
  redisContext *ctx;
  int script_loaded;
  int state;       /* 0 unknown, 1 up, 2 down: an event on each change to down and back */
  char error[96];  /* why the last failure */
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
  char *user, *password;     /* AUTH on every new connection (password NULL: none) */
  int64_t db;                /* SELECT on every new connection when not 0 */
  sw__redis_event events[SW__REDIS_EVENTS];
  int nevents;
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

/* Record an event for the log (sw__redis_events): a full queue keeps the
 * newest. */
static void sw__event(sw__redis *r, const sw__redis_node *n, int up) {
  if (r->nevents == SW__REDIS_EVENTS) {
    memmove(r->events, r->events + 1, (SW__REDIS_EVENTS - 1) * sizeof r->events[0]);
    r->nevents--;
  }
  sw__redis_event *e = &r->events[r->nevents++];
  e->up = up;
  snprintf(e->server, sizeof e->server, "%s:%d", n->host, n->port);
  snprintf(e->message, sizeof e->message, "%s", up ? "" : n->error);
}

/* A node answered, or failed (why: printf-style): events on each change. */
static void sw__node_up(sw__redis *r, sw__redis_node *n) {
  if (n->state == 2) sw__event(r, n, 1);
  n->state = 1;
}
static void sw__node_down(sw__redis *r, sw__redis_node *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void sw__node_down(sw__redis *r, sw__redis_node *n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(n->error, sizeof n->error, fmt, ap);
  va_end(ap);
  if (n->state != 2) sw__event(r, n, 0);
  n->state = 2;
}

/* Why an exchange on n failed: hiredis's error, or the deadline. */
static void sw__io_failed(sw__redis *r, sw__redis_node *n) {
  if (n->ctx && n->ctx->err)
    sw__node_down(r, n, "%s", n->ctx->errstr);
  else
    sw__node_down(r, n, "no answer within %lld ms", (long long)r->timeout_ms);
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

/* AUTH and SELECT on a new connection, as one pipeline: 1, or 0 with the
 * node marked down (the server's refusal in its message). */
static int sw__handshake(sw__redis *r, sw__redis_node *n, int64_t deadline) {
  int k = 0;
  if (r->password) {
    if (r->user)
      redisAppendCommand(n->ctx, "AUTH %s %s", r->user, r->password);
    else
      redisAppendCommand(n->ctx, "AUTH %s", r->password);
    k++;
  }
  if (r->db != 0) {
    redisAppendCommand(n->ctx, "SELECT %lld", (long long)r->db);
    k++;
  }
  if (k == 0) return 1;
  redisReply *rep[2] = {NULL, NULL};
  int ok = sw__exchange(r, n, rep, k, deadline);
  if (!ok) sw__io_failed(r, n);
  for (int i = 0; i < k; i++) {
    if (ok && rep[i] && rep[i]->type == REDIS_REPLY_ERROR) {
      sw__node_down(r, n, "%s refused: %s", r->password && i == 0 ? "AUTH" : "SELECT",
                    rep[i]->str);
      ok = 0;
    }
    if (rep[i]) freeReplyObject(rep[i]);
  }
  return ok;
}

static int sw__connect(sw__redis *r, sw__redis_node *n, int64_t deadline) {
  if (n->ctx) return 1;
  redisContext *c = redisConnectNonBlock(n->host, n->port);
  if (c == NULL || c->err) {
    sw__node_down(r, n, "cannot connect: %s", c ? c->errstr : "out of memory");
    if (c) redisFree(c);
    return 0;
  }
  int err = 0;
  socklen_t len = sizeof err;
  if (!sw__wait(c->fd, POLLOUT, deadline)) {
    sw__node_down(r, n, "cannot connect within %lld ms", (long long)r->timeout_ms);
    redisFree(c);
    return 0;
  }
  if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err != 0) {
    sw__node_down(r, n, "cannot connect: %s", strerror(err ? err : errno));
    redisFree(c);
    return 0;
  }
  n->ctx = c;
  if (!sw__handshake(r, n, deadline)) {
    sw__drop(n);
    return 0;
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
    sw__io_failed(r, n);
    sw__drop(n);
    return NULL;
  }
  return reply;
}

/* A reply that says the server refuses this client: not one of its answers. */
static int sw__refusal(const redisReply *rep) {
  return rep->type == REDIS_REPLY_ERROR &&
         (strncmp(rep->str, "NOAUTH", 6) == 0 || strncmp(rep->str, "WRONGPASS", 9) == 0 ||
          strncmp(rep->str, "NOPERM", 6) == 0 || strncmp(rep->str, "LOADING", 7) == 0);
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
  } else if (rep) {
    sw__node_down(r, n, "SCRIPT LOAD: %s", rep->type == REDIS_REPLY_ERROR ? rep->str
                                                                         : "unexpected reply");
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
    if (sw__refusal(rep)) { /* NOAUTH, ...: this server does not serve us */
      sw__node_down(r, &r->nodes[i], "CLUSTER SLOTS: %s", rep->str);
      freeReplyObject(rep);
      continue;
    }
    sw__node_up(r, &r->nodes[i]);
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

/* One "host:port" or "[v6 address]:port" of a server list (len bytes at
 * entry) into host and port; 0, or an SW_EINVAL naming it. */
static int sw__parse_address(const char *entry, size_t len, const char *servers, char *host,
                             int *port) {
  char e[SW__REDIS_LIST_MAX + 1];
  memcpy(e, entry, len);
  e[len] = '\0';
  if (len == 0)
    return sw__fail(SW_EINVAL, "empty entry in the Redis server list \"%s\": want "
                    "host:port[,host:port...]", servers);
  const char *h = e, *colon = strrchr(e, ':');
  size_t hlen;
  if (e[0] == '[') { /* [::1]:6379 */
    const char *close = strchr(e, ']');
    if (close == NULL || close[1] != ':')
      return sw__fail(SW_EINVAL, "Redis address \"%s\" in \"%s\": want [address]:port", e,
                      servers);
    h = e + 1;
    hlen = (size_t)(close - h);
    colon = close + 1;
  } else {
    if (colon == NULL)
      return sw__fail(SW_EINVAL, "Redis address \"%s\" in \"%s\" has no port: want host:port",
                      e, servers);
    hlen = (size_t)(colon - e);
  }
  if (hlen == 0 || hlen > SW__HOST_MAX)
    return sw__fail(SW_EINVAL, "Redis address \"%s\" in \"%s\": the host must be 1..%d bytes", e,
                    servers, SW__HOST_MAX);
  for (size_t i = 0; i < hlen; i++)
    if ((unsigned char)h[i] <= ' ' || h[i] == '/' || h[i] == '[' || h[i] == ']' ||
        (h[i] == ':' && e[0] != '['))
      return sw__fail(SW_EINVAL, "Redis address \"%s\" in \"%s\": the host has a '%c' "
                      "(byte 0x%02x)", e, servers, (unsigned char)h[i] > ' ' ? h[i] : '?',
                      (unsigned char)h[i]);
  const char *p = colon + 1;
  long v = 0;
  size_t digits = strspn(p, "0123456789");
  if (digits == 0 || p[digits] != '\0' || digits > 5 || (v = strtol(p, NULL, 10)) < 1 ||
      v > 65535)
    return sw__fail(SW_EINVAL, "Redis address \"%s\" in \"%s\": port \"%s\" is not a number "
                    "in 1..65535", e, servers, p);
  memcpy(host, h, hlen);
  host[hlen] = '\0';
  *port = (int)v;
  return SW_OK;
}

int sw__redis_open(sw__redis **out, const char *servers, int64_t timeout_ms) {
  size_t total = strlen(servers);
  if (total == 0) return sw__fail(SW_EINVAL, "empty Redis server list: want host:port");
  if (total > SW__REDIS_LIST_MAX)
    return sw__fail(SW_EINVAL, "Redis server list of %zu bytes is longer than %d", total,
                    SW__REDIS_LIST_MAX);
  sw__redis *r = sw__calloc(1, sizeof *r);
  if (r == NULL) return sw__fail(SW_ENOMEM, "redis client");
  r->timeout_ms = timeout_ms;
  r->cluster = -1;
  for (const char *entry = servers;;) {
    size_t len = strcspn(entry, ",");
    char host[SW__HOST_MAX + 1];
    int port, rc = sw__parse_address(entry, len, servers, host, &port);
    if (rc == SW_OK && sw__add_node(r, host, port) < 0)
      rc = sw__fail(SW_EINVAL, "Redis server list \"%s\" names more than %d servers", servers,
                    SW__REDIS_NODES);
    if (rc < 0) {
      sw__free(r);
      return rc;
    }
    if (entry[len] == '\0') break;
    entry += len + 1;
  }
  r->nseeds = r->nnodes;
  *out = r;
  return SW_OK;
}

void sw__redis_close(sw__redis *r) {
  if (r == NULL) return;
  for (int i = 0; i < r->nnodes; i++) sw__drop(&r->nodes[i]);
  sw__free(r->user);
  sw__free(r->password);
  sw__free(r);
}

int sw__redis_set_auth(sw__redis *r, const char *user, const char *password) {
  char *u = NULL, *p = NULL;
  if (password && (p = sw__strdup(password)) == NULL) return sw__fail(SW_ENOMEM, "password");
  if (user && (u = sw__strdup(user)) == NULL) {
    sw__free(p);
    return sw__fail(SW_ENOMEM, "user name");
  }
  sw__free(r->user);
  sw__free(r->password);
  r->user = u;
  r->password = p;
  for (int i = 0; i < r->nnodes; i++) sw__drop(&r->nodes[i]); /* new connections use it */
  return SW_OK;
}

void sw__redis_set_db(sw__redis *r, int64_t db) {
  r->db = db;
  for (int i = 0; i < r->nnodes; i++) sw__drop(&r->nodes[i]);
}

int sw__redis_events(sw__redis *r, sw__redis_event *out, int cap) {
  int n = r->nevents < cap ? r->nevents : cap;
  memcpy(out, r->events, (size_t)n * sizeof *out);
  memmove(r->events, r->events + n, (size_t)(r->nevents - n) * sizeof *out);
  r->nevents -= n;
  return n;
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
  c->recv_ms = sw__now_ms();
  c->nints = (int)rep->elements;
  for (size_t i = 0; i < rep->elements; i++) c->ints[i] = rep->element[i]->integer;
  c->ok = 1;
}

/* One command alone (the retry path): to node idx, after ASKING if asked. */
static void sw__one(sw__redis *r, sw__redis_cmd *c, int idx, int asking, int64_t deadline) {
  sw__redis_node *n = &r->nodes[idx];
  if (!sw__load_script(r, n, deadline)) {
    sw__set_error(c, n->error);
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
    sw__set_error(c, n->error);
    return;
  }
  if (sw__refusal(rep)) sw__node_down(r, n, "%s", rep->str);
  else sw__node_up(r, n);
  sw__take(c, rep);
  freeReplyObject(rep);
}

int sw__redis_run(sw__redis *r, sw__redis_cmd *cmds, int count) {
  int64_t deadline = sw__mono_ms() + r->timeout_ms;
  for (int i = 0; i < count; i++) sw__set_error(&cmds[i], "not sent");
  if (r->cluster == 1 && r->stale && sw__refresh(r, deadline)) r->stale = 0;
  if (r->cluster < 0 && !sw__refresh(r, deadline))
    return sw__fail(SW_EIO, "no Redis server answered (%s:%d: %s)", r->nodes[0].host,
                    r->nodes[0].port, r->nodes[0].error[0] ? r->nodes[0].error : "?");
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
      sw__io_failed(r, n);
      sw__drop(n);
      for (int j = 0; j < k; j++)
        if (rep[j]) freeReplyObject(rep[j]);
      memset(replies, 0, (size_t)count * sizeof *replies);
      failed = 1;
      continue;
    }
    int j = 0, refused = 0;
    for (int i = 0; i < count; i++) {
      if ((r->cluster ? r->slots[sw__slot(cmds[i].key)] : 0) != node) continue;
      if (!refused && sw__refusal(rep[j])) {
        sw__node_down(r, n, "%s", rep[j]->str);
        refused = 1;
      }
      sw__take(&cmds[i], rep[j]);
      freeReplyObject(rep[j]);
      rep[j++] = NULL;
    }
    if (!refused) sw__node_up(r, n);
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
