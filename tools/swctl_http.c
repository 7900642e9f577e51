/* SPDX-License-Identifier: Apache-2.0 */
/* swctl serve's HTTP side, on GNU libmicrohttpd (Debian's libmicrohttpd-dev):
 * the library parses requests, answers malformed ones (4xx) and runs every
 * connection on its own thread with non-blocking sockets, so an idle or a
 * slow client holds up nobody. This file adds what the library leaves to
 * its user:
 *
 *   - routes: /metrics, /api/series, the dashboard's files;
 *   - a connection cap: above --max-connections, the next SWCTL_OVERFLOW
 *     connections are answered 503 with Retry-After (a scraper says why it
 *     failed), and any more are closed at accept; both are counted in
 *     swctl_http_refused_total;
 *   - absolute deadlines (libmicrohttpd has only an idle timeout, which a
 *     client trickling one byte at a time never reaches): a request must
 *     have arrived --read-timeout seconds after the connection was
 *     accepted, and its reply must have been taken --write-timeout seconds
 *     after that; past either, the main thread resets the connection
 *     (SO_LINGER 0 + shutdown; the library then closes it);
 *   - replies rendered once per poll and shared: every scrape of the same
 *     second sends one buffer, whoever reads it slowly.
 *
 * Threads: the library's thread runs the callbacks below; the main thread
 * runs swctl_run (polls, the metric log) and reaps deadlines in its tick.
 * They share `server.mu` (the connection list) and `swctl.lock`. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "swctl.h"

#ifdef SWCTL_HAVE_MHD
#include <signal.h>

#include <microhttpd.h>

static int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* "host:port" (IPv4 or [IPv6]) -> a listening socket, or -1 with a message. */
static int listen_on(const char *listen_addr) {
  char host[128];
  const char *colon = strrchr(listen_addr, ':');
  long port = colon ? strtol(colon + 1, NULL, 10) : -1;
  size_t hlen = colon ? (size_t)(colon - listen_addr) : 0;
  if (!colon || port <= 0 || port > 65535 || hlen == 0 || hlen >= sizeof host) {
    fprintf(stderr, "swctl: bad listen address \"%s\": want host:port, e.g. 127.0.0.1:9464\n",
            listen_addr);
    return -1;
  }
  memcpy(host, listen_addr, hlen);
  host[hlen] = '\0';
  if (host[0] == '[' && host[hlen - 1] == ']') {
    memmove(host, host + 1, hlen - 2);
    host[hlen - 2] = '\0';
  }
  struct sockaddr_storage ss;
  socklen_t len;
  memset(&ss, 0, sizeof ss);
  struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
  struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
  if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons((uint16_t)port);
    len = sizeof *v4;
  } else if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons((uint16_t)port);
    len = sizeof *v6;
  } else {
    fprintf(stderr, "swctl: bad listen address \"%s\": the host must be an IP address\n",
            listen_addr);
    return -1;
  }
  int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  int one = 1;
  if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
      bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 128) < 0) {
    fprintf(stderr, "swctl: cannot listen on %s: %s\n", listen_addr, strerror(errno));
    if (fd >= 0) close(fd);
    return -1;
  }
  return fd;
}

/* Connections over the cap that still get a 503 (within --read-timeout,
 * at most 2 s); past those, connections are closed at accept. */
#define SWCTL_OVERFLOW 16
#define SWCTL_OVERFLOW_READ_MS 2000

/* A reply body shared by the requests of one poll; freed by the last. */
typedef struct shared_body {
  int refs; /* __atomic */
  swctl_buf buf;
} shared_body;

static void body_unref(shared_body *b) {
  if (b && __atomic_sub_fetch(&b->refs, 1, __ATOMIC_ACQ_REL) == 0) {
    free(b->buf.data);
    free(b);
  }
}

/* One open connection, for the cap and the deadlines. */
typedef struct conn {
  struct conn *prev, *next;
  int fd;
  int writing; /* 0: waiting for the request; 1: its reply is being sent */
  int reset;   /* the deadline passed and the connection was reset */
  int over;    /* over the cap: its request is answered 503 */
  int64_t deadline_ms;
} conn;

enum { CACHED_METRICS, CACHED_SERIES, NCACHED };

typedef struct server {
  swctl *c;
  swctl_serve_opts o;
  pthread_mutex_t mu; /* guards the fields up to `cache` */
  conn *conns;
  unsigned open;
  uint64_t refused, timed_out;
  int64_t refused_logged_ms, timeout_logged_ms;
  uint64_t refused_unlogged, timed_out_unlogged;
  int64_t log_window_ms;
  int log_lines;
  /* the library's thread only */
  struct {
    uint64_t generation;
    shared_body *body;
  } cache[NCACHED];
} server;

/* libmicrohttpd's own messages (a socket error, a request it refused to
 * parse): prefixed, and at most 10 lines a minute. */
static void mhd_log(void *cls, const char *fmt, va_list ap) {
  server *s = cls;
  int64_t now = mono_ms();
  pthread_mutex_lock(&s->mu);
  if (now - s->log_window_ms >= 60000) {
    s->log_window_ms = now;
    s->log_lines = 0;
  }
  int show = s->log_lines++ < 10;
  pthread_mutex_unlock(&s->mu);
  if (!show) return;
  char line[512];
  vsnprintf(line, sizeof line, fmt, ap);
  size_t n = strlen(line);
  while (n > 0 && line[n - 1] == '\n') line[--n] = '\0';
  fprintf(stderr, "swctl: http: %s\n", line);
}

/* At most one line a minute per kind, with how many happened since:
 * "swctl: N <what>". */
static void report(int64_t *logged_ms, uint64_t *unlogged, int64_t now, const char *what) {
  (*unlogged)++;
  if (*logged_ms && now - *logged_ms < 60000) return;
  fprintf(stderr, "swctl: %llu %s\n", (unsigned long long)*unlogged, what);
  *logged_ms = now;
  *unlogged = 0;
}

static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr, socklen_t len) {
  server *s = cls;
  (void)addr;
  (void)len;
  pthread_mutex_lock(&s->mu);
  int ok = s->open < s->o.max_connections + SWCTL_OVERFLOW;
  if (!ok) {
    s->refused++;
    char what[160];
    snprintf(what, sizeof what,
             "connection(s) closed at accept: %u open, over the cap of %u "
             "(--max-connections) and the %d more answered 503",
             s->open, s->o.max_connections, SWCTL_OVERFLOW);
    report(&s->refused_logged_ms, &s->refused_unlogged, mono_ms(), what);
  }
  pthread_mutex_unlock(&s->mu);
  return ok ? MHD_YES : MHD_NO;
}

/* The socket context of a connection that could not be tracked (no
 * memory): counted, but not in the list (the library's idle timeout still
 * closes it). A context still NULL at CLOSED was never STARTED. */
static conn untracked;

static void on_connection(void *cls, struct MHD_Connection *mc, void **ctx,
                          enum MHD_ConnectionNotificationCode what) {
  server *s = cls;
  if (what == MHD_CONNECTION_NOTIFY_STARTED) {
    conn *k = calloc(1, sizeof *k);
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
    pthread_mutex_lock(&s->mu);
    s->open++;
    if (k && info) {
      int64_t read_ms = (int64_t)s->o.read_timeout_s * 1000;
      k->fd = info->connect_fd;
      k->over = s->open > s->o.max_connections;
      if (k->over && read_ms > SWCTL_OVERFLOW_READ_MS) read_ms = SWCTL_OVERFLOW_READ_MS;
      k->deadline_ms = mono_ms() + read_ms;
      k->next = s->conns;
      if (s->conns) s->conns->prev = k;
      s->conns = k;
    } else {
      free(k);
      k = &untracked;
    }
    pthread_mutex_unlock(&s->mu);
    *ctx = k;
  } else if (what == MHD_CONNECTION_NOTIFY_CLOSED) {
    /* The library closes the socket only after this returns: holding mu,
     * the reaper never shuts down a descriptor that was reused. */
    conn *k = *ctx;
    if (k == NULL) return;
    pthread_mutex_lock(&s->mu);
    s->open--;
    if (k != &untracked) {
      if (k->prev) k->prev->next = k->next;
      else s->conns = k->next;
      if (k->next) k->next->prev = k->prev;
    }
    pthread_mutex_unlock(&s->mu);
    if (k != &untracked) free(k);
    *ctx = NULL;
  }
}

/* The main thread's tick: reset the connections past their deadline. */
static void reap(void *user) {
  server *s = user;
  int64_t now = mono_ms();
  pthread_mutex_lock(&s->mu);
  for (conn *k = s->conns; k; k = k->next) {
    if (k->reset || now < k->deadline_ms) continue;
    struct linger lg = {1, 0}; /* drop what is unsent: close() sends RST */
    setsockopt(k->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    shutdown(k->fd, SHUT_RDWR); /* wakes the library's thread */
    k->reset = 1;
    s->timed_out++;
    char what[160];
    snprintf(what, sizeof what,
             "connection(s) reset past their deadline (--read-timeout %us, --write-timeout %us)",
             s->o.read_timeout_s, s->o.write_timeout_s);
    report(&s->timeout_logged_ms, &s->timed_out_unlogged, now, what);
  }
  pthread_mutex_unlock(&s->mu);
}

/* swctl's own series, appended to /metrics at each scrape. */
static void server_metrics(server *s, swctl_buf *b) {
  pthread_mutex_lock(&s->mu);
  unsigned open = s->open;
  unsigned long long refused = s->refused, timed_out = s->timed_out;
  pthread_mutex_unlock(&s->mu);
  swctl_printf(b,
               "# HELP swctl_http_connections Connections open to swctl serve.\n"
               "# TYPE swctl_http_connections gauge\nswctl_http_connections %u\n"
               "# HELP swctl_http_refused_total Connections over --max-connections "
               "(answered 503, or closed at accept).\n"
               "# TYPE swctl_http_refused_total counter\nswctl_http_refused_total %llu\n"
               "# HELP swctl_http_timeouts_total Connections reset past --read-timeout or "
               "--write-timeout.\n"
               "# TYPE swctl_http_timeouts_total counter\nswctl_http_timeouts_total %llu\n",
               open, refused, timed_out);
}

/* The body of path rendered at the last poll, shared (one reference more
 * for the caller), or NULL when path is not a rendered one. */
static shared_body *rendered(server *s, int which) {
  swctl *c = s->c;
  pthread_rwlock_rdlock(c->lock);
  shared_body *b = s->cache[which].body;
  if (b == NULL || s->cache[which].generation != c->generation) {
    b = calloc(1, sizeof *b);
    if (b) {
      b->refs = 1; /* the cache's */
      if (which == CACHED_METRICS)
        swctl_prometheus(c, &b->buf);
      else
        swctl_api_series(c, &b->buf);
      body_unref(s->cache[which].body);
      s->cache[which].body = b;
      s->cache[which].generation = c->generation;
    }
  }
  if (b) __atomic_add_fetch(&b->refs, 1, __ATOMIC_ACQ_REL);
  pthread_rwlock_unlock(c->lock);
  return b;
}

typedef struct reply_parts {
  shared_body *body;
  swctl_buf tail;
} reply_parts;

static void parts_free(void *cls) {
  reply_parts *p = cls;
  body_unref(p->body);
  free(p->tail.data);
  free(p);
}

static struct MHD_Response *text(const char *msg) {
  return MHD_create_response_from_buffer(strlen(msg), (void *)msg, MHD_RESPMEM_PERSISTENT);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *mc, const char *url,
                                  const char *method, const char *version,
                                  const char *upload, size_t *upload_size, void **req) {
  server *s = cls;
  (void)version;
  (void)upload;
  (void)upload_size;
  (void)req;
  const union MHD_ConnectionInfo *info =
      MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  conn *k = info ? info->socket_context : NULL;
  if (k == &untracked) k = NULL;
  int over = 0;
  if (k) {
    pthread_mutex_lock(&s->mu);
    if (!k->writing) {
      k->writing = 1;
      k->deadline_ms = mono_ms() + (int64_t)s->o.write_timeout_s * 1000;
      if (k->over) s->refused++;
    }
    over = k->over;
    pthread_mutex_unlock(&s->mu);
  }

  unsigned status = MHD_HTTP_OK;
  const char *type = "text/plain; charset=utf-8";
  struct MHD_Response *r = NULL;
  if (over) {
    status = MHD_HTTP_SERVICE_UNAVAILABLE;
    r = text("swctl: too many connections (--max-connections), try again\n");
    if (r) MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
  } else if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0) {
    status = MHD_HTTP_METHOD_NOT_ALLOWED;
    r = text("only GET and HEAD\n");
    if (r) MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
  } else if (strcmp(url, "/metrics") == 0 || strcmp(url, "/api/series") == 0) {
    int metrics = url[1] == 'm';
    reply_parts *p = calloc(1, sizeof *p);
    if (p) p->body = rendered(s, metrics ? CACHED_METRICS : CACHED_SERIES);
    if (p && p->body) {
      if (metrics) server_metrics(s, &p->tail);
      struct MHD_IoVec iov[2] = {{p->body->buf.data, p->body->buf.len},
                                 {p->tail.data, p->tail.len}};
      r = MHD_create_response_from_iovec(iov, p->tail.len ? 2 : 1, parts_free, p);
      if (r == NULL) parts_free(p);
    } else if (p) {
      free(p);
    }
    type = metrics ? "text/plain; version=0.0.4; charset=utf-8" : "application/json";
  } else {
    const unsigned char *data;
    size_t len;
    if (swctl_asset(strcmp(url, "/") == 0 ? "/index.html" : url, &type, &data, &len)) {
      r = MHD_create_response_from_buffer(len, (void *)data, MHD_RESPMEM_PERSISTENT);
    } else {
      status = MHD_HTTP_NOT_FOUND;
      r = text("not found\n");
    }
  }
  if (r == NULL) return MHD_NO; /* out of memory: the library closes the connection */
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
  MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
  MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
  enum MHD_Result rc = MHD_queue_response(mc, status, r);
  MHD_destroy_response(r);
  return rc;
}

int swctl_can_serve(void) { return 1; }

int swctl_serve(swctl *c, const swctl_serve_opts *o, volatile int *stop) {
  if (o->max_connections < 1 || o->read_timeout_s < 1 || o->write_timeout_s < 1) {
    fprintf(stderr, "swctl: want --max-connections, --read-timeout and --write-timeout >= 1\n");
    return 2;
  }
  int lfd = listen_on(o->listen);
  if (lfd < 0) return 1;
  server s;
  memset(&s, 0, sizeof s);
  s.c = c;
  s.o = *o;
  pthread_mutex_init(&s.mu, NULL);
  pthread_rwlockattr_t ra;
  pthread_rwlock_t lock;
  pthread_rwlockattr_init(&ra);
  /* the poll must not starve behind a stream of scrapes */
  pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
  pthread_rwlock_init(&lock, &ra);
  pthread_rwlockattr_destroy(&ra);
  c->lock = &lock;

  /* The library's thread inherits this mask: signals go to the main thread. */
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  sigaddset(&block, SIGTERM);
  sigaddset(&block, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &block, &old);
  unsigned idle = (o->read_timeout_s > o->write_timeout_s ? o->read_timeout_s
                                                          : o->write_timeout_s) + 1;
  struct MHD_Daemon *d = MHD_start_daemon(
      MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG, 0, on_accept, &s, on_request, &s,
      MHD_OPTION_EXTERNAL_LOGGER, mhd_log, &s, /* first, so that it takes every message */
      MHD_OPTION_LISTEN_SOCKET, lfd,
      /* ours is the cap (on_accept); the library's must never bind first */
      MHD_OPTION_CONNECTION_LIMIT, o->max_connections + 2 * SWCTL_OVERFLOW,
      MHD_OPTION_CONNECTION_TIMEOUT, idle, /* a backstop: reap() is exact */
      MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)16384, /* request head: 16 KiB */
      MHD_OPTION_NOTIFY_CONNECTION, on_connection, &s, MHD_OPTION_END);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  int rc = 0;
  if (d == NULL) {
    fprintf(stderr, "swctl: cannot serve on %s: libmicrohttpd refused to start: %s\n",
            o->listen, strerror(errno));
    close(lfd);
    rc = 1;
  } else {
    fprintf(stderr,
            "swctl: serving %s on http://%s/ (metrics at /metrics; at most %u connections, "
            "read %us, write %us)\n",
            c->segment_name, o->listen, o->max_connections, o->read_timeout_s,
            o->write_timeout_s);
    rc = swctl_run(c, o->seconds, stop, reap, &s);
    MHD_stop_daemon(d); /* closes lfd and every connection */
  }
  for (int i = 0; i < NCACHED; i++) body_unref(s.cache[i].body);
  c->lock = NULL;
  pthread_rwlock_destroy(&lock);
  pthread_mutex_destroy(&s.mu);
  return rc;
}

#else /* !SWCTL_HAVE_MHD */

int swctl_can_serve(void) { return 0; }

int swctl_serve(swctl *c, const swctl_serve_opts *o, volatile int *stop) {
  (void)c;
  (void)o;
  (void)stop;
  fprintf(stderr, "swctl: serve is unavailable: this swctl was built without libmicrohttpd "
                  "(install libmicrohttpd-dev, then configure and build again); "
                  "`swctl log SEGMENT --log-dir DIR` writes the metric log without serving\n");
  return 1;
}

#endif
