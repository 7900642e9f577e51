/* A small HTTP/1.0 server for /metrics and the dashboard: one thread, one
 * request per connection, GET only, bounded reads. The segment is polled
 * once a second between requests. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "swctl.h"

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
  int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
      bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 64) < 0) {
    fprintf(stderr, "swctl: cannot listen on %s: %s\n", listen_addr, strerror(errno));
    if (fd >= 0) close(fd);
    return -1;
  }
  return fd;
}

static const char *reason(int status) {
  return status == 200 ? "OK" : status == 404 ? "Not Found" : status == 405 ? "Method Not Allowed" : "Bad Request";
}

/* Read one request (up to the blank line, 8 KiB, 2 s) and answer it. */
static void handle(swctl *c, int fd, swctl_handler handler) {
  char req[8192];
  size_t got = 0;
  int64_t deadline = mono_ms() + 2000;
  while (got < sizeof req - 1 && !memmem(req, got, "\r\n\r\n", 4) && !memmem(req, got, "\n\n", 2)) {
    struct pollfd p = {fd, POLLIN, 0};
    int64_t left = deadline - mono_ms();
    if (left <= 0 || poll(&p, 1, (int)left) <= 0) return;
    ssize_t n = read(fd, req + got, sizeof req - 1 - got);
    if (n <= 0) return;
    got += (size_t)n;
  }
  req[got] = '\0';
  char method[8], path[1024];
  swctl_reply out = {400, "text/plain; charset=utf-8", {0}};
  if (sscanf(req, "%7s %1023s", method, path) != 2) {
    swctl_printf(&out.body, "bad request\n");
  } else if (strcmp(method, "GET") != 0) {
    out.status = 405;
    swctl_printf(&out.body, "only GET\n");
  } else {
    char *q = strchr(path, '?');
    if (q) *q = '\0';
    handler(c, path, &out);
  }
  char head[256];
  int hn = snprintf(head, sizeof head,
                    "HTTP/1.0 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                    "Cache-Control: no-store\r\nConnection: close\r\n\r\n",
                    out.status, reason(out.status), out.type, out.body.len);
  const char *parts[2] = {head, out.body.data};
  size_t lens[2] = {(size_t)hn, out.body.len};
  for (int i = 0; i < 2; i++)
    for (size_t off = 0; off < lens[i];) {
      ssize_t n = write(fd, parts[i] + off, lens[i] - off);
      if (n <= 0) break;
      off += (size_t)n;
    }
  free(out.body.data);
}

static int loop(swctl *c, int lfd, long seconds, swctl_handler handler, volatile int *stop) {
  int64_t end = seconds < 0 ? INT64_MAX : mono_ms() + seconds * 1000, next_poll = 0;
  while (!*stop && mono_ms() < end) {
    int64_t now = mono_ms();
    if (now >= next_poll) {
      swctl_poll(c);
      next_poll = now + 1000;
    }
    int64_t wait = next_poll - mono_ms();
    if (wait > end - mono_ms()) wait = end - mono_ms();
    if (wait < 0) wait = 0;
    if (lfd < 0) {
      struct timespec ts = {wait / 1000, (wait % 1000) * 1000000};
      nanosleep(&ts, NULL);
      continue;
    }
    struct pollfd p = {lfd, POLLIN, 0};
    if (poll(&p, 1, (int)wait) > 0) {
      int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
      if (fd >= 0) {
        handle(c, fd, handler);
        close(fd);
      }
    }
  }
  return 0;
}

int swctl_serve(swctl *c, const char *listen_addr, long seconds, swctl_handler handler,
                volatile int *stop) {
  int lfd = listen_on(listen_addr);
  if (lfd < 0) return 1;
  fprintf(stderr, "swctl: serving %s on http://%s/ (metrics at /metrics)\n", c->segment_name,
          listen_addr);
  int rc = loop(c, lfd, seconds, handler, stop);
  close(lfd);
  return rc;
}

int swctl_run(swctl *c, long seconds, volatile int *stop) {
  return loop(c, -1, seconds, NULL, stop);
}
