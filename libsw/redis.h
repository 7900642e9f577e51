/* SPDX-License-Identifier: Apache-2.0 */
/* A small Redis client for the lease refiller, on hiredis in non-blocking
 * mode with poll() deadlines (hiredis 0.14's connect timeout does not bound
 * commands, and SO_RCVTIMEO fires late on a 250 Hz kernel). It speaks to one
 * server or to a Redis Cluster (slot map from CLUSTER SLOTS, MOVED / ASK).
 * Not thread-safe: one refiller owns it. */
#ifndef SW_REDIS_H
#define SW_REDIS_H

#include <stdint.h>

typedef struct sw__redis sw__redis;

/* One command of a pipeline and its outcome. */
typedef struct sw__redis_cmd {
  const char *key;     /* routes the command (cluster slot) */
  int argc;
  const char **argv;
  const size_t *argvlen;
  /* results */
  int ok;              /* 1: an integer array reply, copied to ints */
  long long ints[4];
  int nints;
  char error[96];      /* otherwise: the error */
  int64_t recv_ms;     /* sw__now_ms() when the reply arrived */
} sw__redis_cmd;

#define SW__REDIS_LIST_MAX 1023 /* bytes of a server list */
#define SW__REDIS_EVENTS 16

/* A server found down, or back up after it was down (for the log). */
typedef struct sw__redis_event {
  int up;
  char server[80];   /* "host:port" */
  char message[96];  /* why it is down */
} sw__redis_event;

/* servers: "host:port[,host:port...]" ("[v6 address]:port" too); every
 * entry is checked: SW_EINVAL naming a bad one. */
int sw__redis_open(sw__redis **out, const char *servers, int64_t timeout_ms);
void sw__redis_close(sw__redis *r);
/* AUTH [user] password, SELECT db on every new connection (the current ones
 * are closed). password NULL: no AUTH. Copies the strings. */
int sw__redis_set_auth(sw__redis *r, const char *user, const char *password);
void sw__redis_set_db(sw__redis *r, int64_t db);
/* Take up to cap events (oldest first); their number. */
int sw__redis_events(sw__redis *r, sw__redis_event *out, int cap);
/* Run cmds (EVALSHA of the lease script) as pipelines, one per node, within
 * the timeout; reloads the script on NOSCRIPT, follows MOVED / ASK once.
 * Returns SW_OK when every command got an answer (check each ok), or an
 * error when a node could not be reached in time (then nothing is ok). */
int sw__redis_run(sw__redis *r, sw__redis_cmd *cmds, int count);
/* Round trips made. */
int64_t sw__redis_round_trips(const sw__redis *r);
/* The SHA1 of the lease script, as EVALSHA wants it. */
const char *sw__redis_script_sha(const sw__redis *r);

#endif /* SW_REDIS_H */
