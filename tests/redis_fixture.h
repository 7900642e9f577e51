/* SPDX-License-Identifier: Apache-2.0 */
/* Redis servers for the tests: a redis-server (Debian's /usr/bin/redis-server)
 * or a 3-master Redis Cluster on 127.0.0.1 high ports, without persistence,
 * started with fork + exec and stopped by PID.
 *
 * Everything is bounded in time. No server outlives the test program: each
 * server gets PR_SET_PDEATHSIG (SIGKILL when the process that started it dies,
 * even by a Check timeout), every PID is also registered for an atexit
 * cleanup, and each test stops its own servers.
 *
 *   rf_init() / rf_finish()             in main(): a directory for the run's servers
 *   rf_available()                      redis-server and redis-cli installed
 *   rf_start(&s) / rf_stop(&s)          one server on a free port
 *   rf_kill(&s)                         SIGKILL, reaped (the port stays s.port)
 *   rf_restart(&s)                      a new, empty server on the same port
 *   rf_pause(&s) / rf_resume(&s)        SIGSTOP / SIGCONT
 *   rf_cli(port, out, cap, ms, args)    run redis-cli -p port args..., stdout in out
 *   rf_cluster_start(&c) / rf_cluster_stop(&c)
 *                                       3 masters, created and cluster_state:ok
 */
#ifndef SW_REDIS_FIXTURE_H
#define SW_REDIS_FIXTURE_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef RF_SERVER
#define RF_SERVER "/usr/bin/redis-server"
#endif
#ifndef RF_CLI
#define RF_CLI "/usr/bin/redis-cli"
#endif
#define RF_START_MS 5000    /* longest wait for a server to accept connections */
#define RF_STOP_MS 3000     /* SIGTERM, then SIGKILL after this */
#define RF_CLUSTER_MS 20000 /* longest wait for cluster_state:ok */

typedef struct rf_server {
  pid_t pid;     /* 0: not running */
  int port;
  int cluster;   /* started with --cluster-enabled yes */
  char dir[80];  /* its working directory (mkdtemp) */
} rf_server;

typedef struct rf_cluster {
  rf_server node[4]; /* 3 masters, and node[3] when a replica was added */
} rf_cluster;

static inline int64_t rf_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline void rf_sleep_ms(int64_t ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static inline int rf_available(void) {
  return access(RF_SERVER, X_OK) == 0 && access(RF_CLI, X_OK) == 0;
}

/* ------------------------------------------------ PIDs to kill at exit */

#define RF_MAX_PIDS 32
static pid_t rf_pids[RF_MAX_PIDS];      /* servers to kill at exit */
static char rf_dirs[RF_MAX_PIDS][80];   /* directories to remove at exit */
static pid_t rf_owner;                  /* the process that registered them */

static inline void rf_rmdir(const char *dir);

static inline void rf_cleanup_all(void) {
  if (getpid() != rf_owner) return; /* a forked child inherited the tables */
  for (int i = 0; i < RF_MAX_PIDS; i++)
    if (rf_pids[i] > 0) {
      kill(rf_pids[i], SIGKILL);
      waitpid(rf_pids[i], NULL, 0);
      rf_pids[i] = 0;
    }
  for (int i = 0; i < RF_MAX_PIDS; i++)
    if (rf_dirs[i][0]) {
      rf_rmdir(rf_dirs[i]);
      rf_dirs[i][0] = '\0';
    }
}

static inline void rf_own(void) {
  static int registered;
  if (rf_owner != getpid()) { /* first use in this (forked) process */
    memset(rf_pids, 0, sizeof rf_pids);
    memset(rf_dirs, 0, sizeof rf_dirs);
    rf_owner = getpid();
  }
  if (!registered) {
    atexit(rf_cleanup_all);
    registered = 1;
  }
}

static inline void rf_track(pid_t pid) {
  rf_own();
  for (int i = 0; i < RF_MAX_PIDS; i++)
    if (rf_pids[i] == 0) {
      rf_pids[i] = pid;
      return;
    }
}

static inline void rf_untrack(pid_t pid) {
  for (int i = 0; i < RF_MAX_PIDS; i++)
    if (rf_pids[i] == pid) rf_pids[i] = 0;
}

static inline void rf_track_dir(const char *dir) {
  rf_own();
  for (int i = 0; i < RF_MAX_PIDS; i++)
    if (rf_dirs[i][0] == '\0') {
      snprintf(rf_dirs[i], sizeof rf_dirs[i], "%s", dir);
      return;
    }
}

/* Wait for pid until the deadline: 1 reaped, 0 still running. */
static inline int rf_reap(pid_t pid, int64_t deadline, int *status) {
  for (;;) {
    pid_t r = waitpid(pid, status, WNOHANG);
    if (r == pid || (r < 0 && errno == ECHILD)) return 1;
    if (rf_now_ms() >= deadline) return 0;
    rf_sleep_ms(2);
  }
}

/* SIGTERM (or sig), then SIGKILL after RF_STOP_MS; always reaped. */
static inline void rf_terminate(pid_t pid, int sig) {
  if (pid <= 0) return;
  kill(pid, sig);
  if (sig != SIGKILL) kill(pid, SIGCONT); /* a stopped server must see it */
  if (!rf_reap(pid, rf_now_ms() + RF_STOP_MS, NULL)) {
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
  }
  rf_untrack(pid);
}

/* In a child about to exec: die with the parent, quiet stdio. */
static inline void rf_child_setup(pid_t parent, int out_fd) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(127);
  int null = open("/dev/null", O_RDWR);
  if (null >= 0) {
    dup2(null, 0);
    dup2(out_fd >= 0 ? out_fd : null, 1);
    dup2(null, 2);
    if (null > 2) close(null);
  }
}

/* --------------------------------------------------------- redis-cli */

/* Run redis-cli -p port argv... (NULL-terminated), stdout into out (may be
 * NULL). Returns the exit status, or -1 (could not run, timed out). */
static inline int rf_cliv(int port, char *out, size_t cap, int64_t timeout_ms,
                          const char *const *args) {
  const char *argv[48];
  char portbuf[16];
  snprintf(portbuf, sizeof portbuf, "%d", port);
  int n = 0;
  argv[n++] = RF_CLI;
  argv[n++] = "-h";
  argv[n++] = "127.0.0.1";
  argv[n++] = "-p";
  argv[n++] = portbuf;
  for (int i = 0; args[i] && n < 47; i++) argv[n++] = args[i];
  argv[n] = NULL;
  int fds[2];
  if (pipe(fds) != 0) return -1;
  pid_t parent = getpid(), pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return -1;
  }
  if (pid == 0) {
    close(fds[0]);
    rf_child_setup(parent, fds[1]);
    execv(RF_CLI, (char *const *)argv);
    _exit(127);
  }
  close(fds[1]);
  fcntl(fds[0], F_SETFL, O_NONBLOCK);
  size_t len = 0;
  int64_t deadline = rf_now_ms() + timeout_ms;
  int status = -1, done = 0, eof = 0;
  char sink[4096];
  while (!(done && eof)) {
    if (!eof) {
      for (;;) {
        char *dst = out && len + 1 < cap ? out + len : sink;
        size_t room = out && len + 1 < cap ? cap - 1 - len : sizeof sink;
        ssize_t r = read(fds[0], dst, room);
        if (r > 0) {
          if (dst != sink) len += (size_t)r;
          continue;
        }
        if (r == 0) eof = 1;
        break;
      }
    }
    if (!done) {
      pid_t r = waitpid(pid, &status, WNOHANG);
      if (r == pid) done = 1;
    }
    if (done && eof) break;
    if (rf_now_ms() >= deadline) {
      if (!done) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
      }
      status = -1;
      done = 2;
      break;
    }
    rf_sleep_ms(1);
  }
  close(fds[0]);
  if (out && cap) out[len < cap ? len : cap - 1] = '\0';
  if (done == 2 || status == -1) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* rf_cli(port, out, cap, timeout_ms, "arg", ..., NULL) */
static inline int rf_cli(int port, char *out, size_t cap, int64_t timeout_ms, ...) {
  const char *args[40];
  int n = 0;
  va_list ap;
  va_start(ap, timeout_ms);
  for (const char *a; n < 39 && (a = va_arg(ap, const char *)) != NULL;) args[n++] = a;
  va_end(ap);
  args[n] = NULL;
  return rf_cliv(port, out, cap, timeout_ms, args);
}

/* ------------------------------------------------------------ servers */

/* 1 if nothing listens on 127.0.0.1:port and it can be bound. */
static inline int rf_port_free(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
  close(fd);
  return ok;
}

/* A port in 15000..21999 that is free, with its cluster bus port (+10000,
 * below the ephemeral range) and the next `span - 1` ports free too. */
static inline int rf_pick_port(int span) {
  static unsigned seed;
  if (seed == 0) seed = (unsigned)getpid() * 2654435761u ^ (unsigned)rf_now_ms();
  for (int tries = 0; tries < 200; tries++) {
    seed = seed * 1103515245u + 12345u;
    int port = 15000 + (int)((seed >> 8) % (7000u - (unsigned)span));
    int ok = 1;
    for (int k = 0; k < span && ok; k++) ok = rf_port_free(port + k) && rf_port_free(port + k + 10000);
    if (ok) return port;
  }
  return -1;
}

/* 1 when the server answers PING with +PONG (or -LOADING) within the deadline. */
static inline int rf_ping(int port, int64_t deadline) {
  while (rf_now_ms() < deadline) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return 0;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = {0, 200000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    int ok = 0;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0 && write(fd, "PING\r\n", 6) == 6) {
      char buf[64];
      ssize_t r = read(fd, buf, sizeof buf - 1);
      ok = r >= 5 && memcmp(buf, "+PONG", 5) == 0;
    }
    close(fd);
    if (ok) return 1;
    rf_sleep_ms(10);
  }
  return 0;
}

/* Remove the files of a server's directory, then the directory. */
static inline void rf_rmdir(const char *dir) {
  if (dir[0] == '\0') return;
  for (int i = 0; i < RF_MAX_PIDS; i++)
    if (rf_dirs[i] != dir && strcmp(rf_dirs[i], dir) == 0) rf_dirs[i][0] = '\0';
  DIR *d = opendir(dir);
  if (d) {
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
      if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
      char path[512];
      snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
      unlink(path);
    }
    closedir(d);
  }
  rmdir(dir);
}

/* Start redis-server on s->port in s->dir; 0 when it answers PING. */
static inline int rf_spawn(rf_server *s) {
  char port[16], conf[128], logf[128];
  snprintf(port, sizeof port, "%d", s->port);
  snprintf(conf, sizeof conf, "nodes-%d.conf", s->port);
  snprintf(logf, sizeof logf, "%s/redis.log", s->dir);
  const char *argv[32];
  int n = 0;
  argv[n++] = RF_SERVER;
  argv[n++] = "--port";
  argv[n++] = port;
  argv[n++] = "--bind";
  argv[n++] = "127.0.0.1";
  argv[n++] = "--save";
  argv[n++] = "";
  argv[n++] = "--appendonly";
  argv[n++] = "no";
  argv[n++] = "--daemonize";
  argv[n++] = "no";
  argv[n++] = "--dir";
  argv[n++] = s->dir;
  argv[n++] = "--logfile";
  argv[n++] = logf;
  if (s->cluster) {
    argv[n++] = "--cluster-enabled";
    argv[n++] = "yes";
    argv[n++] = "--cluster-config-file";
    argv[n++] = conf;
    argv[n++] = "--cluster-node-timeout";
    argv[n++] = "1000";
  }
  argv[n] = NULL;
  pid_t parent = getpid(), pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    rf_child_setup(parent, -1);
    execv(RF_SERVER, (char *const *)argv);
    _exit(127);
  }
  s->pid = pid;
  rf_track(pid);
  int64_t deadline = rf_now_ms() + RF_START_MS;
  while (rf_now_ms() < deadline) {
    if (rf_ping(s->port, rf_now_ms() + 50)) return 0;
    if (waitpid(pid, NULL, WNOHANG) == pid) { /* exited: port taken? */
      rf_untrack(pid);
      s->pid = 0;
      return -1;
    }
  }
  rf_terminate(pid, SIGKILL);
  s->pid = 0;
  return -1;
}

/* Where the servers' directories go: a directory of this run (rf_init), or /tmp. */
static char rf_base[40];

/* Put every server's directory under one directory of this run, which
 * rf_finish removes with whatever a test that died left in it (Check ends a
 * failing test with _exit: no atexit there). Call both from main(). */
static inline void rf_init(void) {
  snprintf(rf_base, sizeof rf_base, "/tmp/sw-redis-run-XXXXXX");
  if (mkdtemp(rf_base) == NULL) rf_base[0] = '\0';
}

static inline void rf_finish(void) {
  rf_cleanup_all();
  if (rf_base[0] == '\0') return;
  DIR *d = opendir(rf_base);
  if (d) {
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
      if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
      char path[512];
      snprintf(path, sizeof path, "%s/%s", rf_base, e->d_name);
      rf_rmdir(path);
    }
    closedir(d);
  }
  rmdir(rf_base);
  rf_base[0] = '\0';
}

/* A new server on a free port (cluster: with cluster mode). 0 or -1. */
static inline int rf_start_ex(rf_server *s, int cluster, int port) {
  memset(s, 0, sizeof *s);
  s->cluster = cluster;
  snprintf(s->dir, sizeof s->dir, "%s/sw-redis-XXXXXX", rf_base[0] ? rf_base : "/tmp");
  if (mkdtemp(s->dir) == NULL) {
    s->dir[0] = '\0';
    return -1;
  }
  rf_track_dir(s->dir);
  for (int tries = 0; tries < 5; tries++) {
    s->port = port > 0 ? port : rf_pick_port(1);
    if (s->port < 0) break;
    if (rf_spawn(s) == 0) return 0;
    if (port > 0) break;
  }
  rf_rmdir(s->dir);
  s->dir[0] = '\0';
  return -1;
}

static inline int rf_start(rf_server *s) { return rf_start_ex(s, 0, 0); }

/* Stop (SIGTERM, then SIGKILL) and remove its directory. */
static inline void rf_stop(rf_server *s) {
  if (s->pid > 0) rf_terminate(s->pid, SIGTERM);
  s->pid = 0;
  rf_rmdir(s->dir);
  s->dir[0] = '\0';
}

/* SIGKILL, reaped; the directory and port stay for rf_restart. */
static inline void rf_kill(rf_server *s) {
  if (s->pid > 0) rf_terminate(s->pid, SIGKILL);
  s->pid = 0;
}

/* A new empty server on the same port (no persistence: no data, no scripts). */
static inline int rf_restart(rf_server *s) {
  if (s->pid > 0) rf_kill(s);
  for (int tries = 0; tries < 20; tries++) { /* the port may linger a moment */
    if (rf_spawn(s) == 0) return 0;
    rf_sleep_ms(50);
  }
  return -1;
}

static inline int rf_pause(rf_server *s) { return s->pid > 0 ? kill(s->pid, SIGSTOP) : -1; }
static inline int rf_resume(rf_server *s) { return s->pid > 0 ? kill(s->pid, SIGCONT) : -1; }

/* ------------------------------------------------------------ cluster */

static inline void rf_cluster_stop(rf_cluster *c) {
  for (int i = 0; i < 4; i++) rf_stop(&c->node[i]);
}

/* 1 when CLUSTER INFO on port says cluster_state:ok. */
static inline int rf_cluster_ok(int port) {
  char out[2048];
  return rf_cli(port, out, sizeof out, 2000, "CLUSTER", "INFO", (char *)NULL) == 0 &&
         strstr(out, "cluster_state:ok") != NULL;
}

/* Three masters on free ports P, P+1, P+2, created with redis-cli --cluster
 * create and waited for until every node says cluster_state:ok. 0 or -1. */
static inline int rf_cluster_start(rf_cluster *c) {
  memset(c, 0, sizeof *c);
  for (int attempt = 0; attempt < 3; attempt++) {
    int base = rf_pick_port(3), ok = base > 0;
    for (int i = 0; ok && i < 3; i++) ok = rf_start_ex(&c->node[i], 1, base + i) == 0;
    if (!ok) {
      rf_cluster_stop(c);
      continue;
    }
    char a[3][32];
    for (int i = 0; i < 3; i++) snprintf(a[i], sizeof a[i], "127.0.0.1:%d", c->node[i].port);
    char out[8192];
    int rc = rf_cli(c->node[0].port, out, sizeof out, 15000, "--cluster", "create", a[0], a[1],
                    a[2], "--cluster-replicas", "0", "--cluster-yes", (char *)NULL);
    if (rc != 0) {
      rf_cluster_stop(c);
      continue;
    }
    int64_t deadline = rf_now_ms() + RF_CLUSTER_MS;
    while (rf_now_ms() < deadline) {
      int all = 1;
      for (int i = 0; i < 3 && all; i++) all = rf_cluster_ok(c->node[i].port);
      if (all) return 0;
      rf_sleep_ms(100);
    }
    rf_cluster_stop(c);
  }
  return -1;
}

/* The node id of the server on port (CLUSTER MYID), into id[41]. */
static inline int rf_cluster_myid(int port, char *id) {
  char out[128];
  if (rf_cli(port, out, sizeof out, 2000, "CLUSTER", "MYID", (char *)NULL) != 0) return -1;
  size_t len = strcspn(out, "\r\n");
  if (len != 40) return -1;
  memcpy(id, out, 40);
  id[40] = '\0';
  return 0;
}

/* The slot of key (CLUSTER KEYSLOT), or -1. */
static inline int rf_keyslot(int port, const char *key) {
  char out[64];
  if (rf_cli(port, out, sizeof out, 2000, "CLUSTER", "KEYSLOT", key, (char *)NULL) != 0) return -1;
  return atoi(out);
}

/* The port of the master that serves slot (slot >= 0), or the number of
 * slots of the master at port -1 - slot (slot < 0), from CLUSTER NODES on
 * port; -1 if unknown. */
static inline int rf_slots_query(int port, int slot) {
  int count = 0;
  char out[8192];
  if (rf_cli(port, out, sizeof out, 2000, "CLUSTER", "NODES", (char *)NULL) != 0) return -1;
  for (char *save = NULL, *line = strtok_r(out, "\n", &save); line;
       line = strtok_r(NULL, "\n", &save)) {
    char id[64], addr[64], flags[128];
    int off = 0;
    if (sscanf(line, "%63s %63s %127s %*s %*s %*s %*s %*s%n", id, addr, flags, &off) < 3) continue;
    if (off == 0 || strstr(flags, "master") == NULL || strstr(flags, "fail") != NULL) continue;
    char *colon = strchr(addr, ':');
    int owner = colon ? atoi(colon + 1) : -1;
    /* the slot ranges: "lo-hi" or "n"; "[...]" entries are migrations */
    char *p = line + off;
    while (*p) {
      while (*p == ' ') p++;
      if (*p == '\0') break;
      if (*p == '[') {
        p += strcspn(p, " ");
        continue;
      }
      int lo = atoi(p), hi = lo;
      char *dash = strchr(p, '-'), *end = p + strcspn(p, " ");
      if (dash && dash < end) hi = atoi(dash + 1);
      if (slot >= 0 && slot >= lo && slot <= hi) return owner;
      if (slot < 0 && owner == -1 - slot) count += hi - lo + 1;
      p = end;
    }
  }
  return slot < 0 ? count : -1;
}

static inline int rf_slot_owner(int port, int slot) { return rf_slots_query(port, slot); }
/* Slots served by the master at node_port. */
static inline int rf_slot_count(int port, int node_port) { return rf_slots_query(port, -1 - node_port); }

/* CONFIG SET name value on every running node; 0 or -1. */
static inline int rf_cluster_config(rf_cluster *c, const char *name, const char *value) {
  for (int i = 0; i < 4; i++) {
    char out[64];
    if (c->node[i].pid <= 0) continue;
    if (rf_cli(c->node[i].port, out, sizeof out, 2000, "CONFIG", "SET", name, value,
               (char *)NULL) != 0 || strncmp(out, "OK", 2) != 0)
      return -1;
  }
  return 0;
}

/* node[3]: a replica of node[master], added with redis-cli --cluster add-node
 * and waited for until its link to the master is up and every node says
 * cluster_state:ok. 0 or -1. */
static inline int rf_cluster_add_replica(rf_cluster *c, int master) {
  char id[41], a_new[32], a_old[32], out[8192];
  if (rf_cluster_myid(c->node[master].port, id) != 0) return -1;
  if (rf_start_ex(&c->node[3], 1, 0) != 0) return -1;
  snprintf(a_new, sizeof a_new, "127.0.0.1:%d", c->node[3].port);
  snprintf(a_old, sizeof a_old, "127.0.0.1:%d", c->node[0].port);
  if (rf_cli(c->node[0].port, out, sizeof out, 15000, "--cluster", "add-node", a_new, a_old,
             "--cluster-slave", "--cluster-master-id", id, (char *)NULL) != 0)
    return -1;
  int64_t deadline = rf_now_ms() + RF_CLUSTER_MS;
  while (rf_now_ms() < deadline) {
    int ok = rf_cli(c->node[3].port, out, sizeof out, 2000, "INFO", "replication", (char *)NULL) == 0 &&
             strstr(out, "master_link_status:up") != NULL;
    for (int i = 0; i < 4 && ok; i++) ok = rf_cluster_ok(c->node[i].port);
    if (ok) return 0;
    rf_sleep_ms(100);
  }
  return -1;
}

#endif /* SW_REDIS_FIXTURE_H */
