/* SPDX-License-Identifier: Apache-2.0 */
/* ngx_http_libsw_module: libsw's limits and circuit breakers in nginx,
 * without Lua (docs/nginx.md). Modelled on nginx's limit_req module: one
 * file, the directive table, the zones opened at the end of the http
 * block (the config phase, in the master: workers inherit the mappings),
 * one handler in the preaccess phase.
 *
 *   libsw_zone [KEY] zone=NAME[:SIZE] rate=10r/s [burst=N] ...   (http)
 *   libsw_limit zone=NAME [burst=N] [nodelay | delay=N];         (http, server, location)
 *   libsw_breaker_zone NAME error_ratio=0.5 ...;                  (http)
 *   libsw_breaker NAME;                                           (http, server, location)
 *
 * A zone is a libsw segment shared with swctl, resty.libsw and Python: a
 * keyed table when it has a key, else a registry holding one limiter
 * named as the zone. Every value read from a segment is checked by libsw;
 * every libsw call's return code is checked here, and an error lets the
 * request through with a log line (a limit never fails a request).
 *
 * Several limits on one request are all or nothing: each is entered in
 * turn, and when one refuses, the decisions of those that admitted are
 * cancelled (sw_keyed_cancel / sw_limiter_cancel), so a refused request is
 * counted as passed by none.
 *
 * The request's outcome lives in r->main->variables[$libsw_status]: it
 * costs no allocation, survives internal redirects (which clear module
 * contexts) and marks the request as decided, so that the handler runs
 * once per request (after a delay, or in a redirected location). */

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include <math.h>
#include <sw/sw.h>

#define NGX_HTTP_LIBSW_MAX_LIMITS 16
#define NGX_HTTP_LIBSW_CHECK_ONLY ngx_test_config /* nginx -t: check, change nothing */

typedef struct {
  ngx_str_t name;    /* the zone's name */
  ngx_str_t segment; /* libsw segment (NUL-terminated) */
  u_char *file;      /* where it was declared, for messages */
  ngx_uint_t line;
  ngx_uint_t keyed;  /* a keyed table (a key was given), else one limiter */
  ngx_http_complex_value_t key;
  ngx_int_t key_index; /* the key is one variable: its index; else -1 */
  ngx_uint_t key_addr; /* the key is $binary_remote_addr: read from the connection */
  double rate;         /* requests per second */
  ngx_uint_t pacing;   /* mode=pacing (limit_req's leaky bucket) or window */
  ngx_int_t burst;     /* pacing: requests queued beyond the rate; -1 unset */
  ngx_msec_t interval; /* the statistic's interval, ms */
  ngx_uint_t windows;
  ssize_t size;        /* zone=NAME:SIZE (bytes), or 0 */
  ngx_uint_t capacity; /* keys at once (0: from size) */
  ngx_uint_t key_bytes;
  ngx_uint_t on_full;
  ngx_uint_t dry_run;
  int64_t limit_count; /* RateLimit-Limit */
  sw_keyed *k;
  sw_segment *seg;
  sw_limiter *lim;
} ngx_http_libsw_zone_t;

typedef struct {
  ngx_str_t name;
  ngx_str_t segment;
  u_char *file;
  ngx_uint_t line;
  sw_options *opts;      /* SW_OPT_BREAKER_* */
  ngx_uint_t fail_status; /* an upstream status >= this fails */
  ngx_uint_t status;     /* the refusal's status */
  sw_breaker *b;
} ngx_http_libsw_breaker_t;

typedef struct {
  ngx_array_t zones;    /* ngx_http_libsw_zone_t * */
  ngx_array_t breakers; /* ngx_http_libsw_breaker_t * */
} ngx_http_libsw_main_conf_t;

typedef struct {
  ngx_http_libsw_zone_t *zone;
  ngx_uint_t nodelay;
  ngx_int_t delay; /* requests beyond the rate admitted at once; -1: none */
} ngx_http_libsw_limit_t;

typedef struct {
  ngx_array_t *limits; /* ngx_http_libsw_limit_t */
  ngx_http_libsw_breaker_t *breaker;
  ngx_uint_t status;
  ngx_uint_t log_level;
  ngx_uint_t delay_log_level;
  ngx_flag_t dry_run;
  ngx_flag_t retry_after;
  ngx_flag_t headers;
  ngx_uint_t breaker_set;
  ngx_uint_t fast; /* one limit keyed on a variable, no breaker, no headers */
} ngx_http_libsw_loc_conf_t;

/* The end of a breaker's entry, run when the request's pool goes. */
typedef struct {
  ngx_http_request_t *r;
  ngx_http_libsw_breaker_t *breaker;
  sw_decision d;
} ngx_http_libsw_breaker_ctx_t;

static ngx_int_t ngx_http_libsw_add_variables(ngx_conf_t *cf);
static ngx_int_t ngx_http_libsw_init(ngx_conf_t *cf);
static void *ngx_http_libsw_create_main_conf(ngx_conf_t *cf);
static void *ngx_http_libsw_create_loc_conf(ngx_conf_t *cf);
static char *ngx_http_libsw_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child);
static char *ngx_http_libsw_zone(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *ngx_http_libsw_limit(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *ngx_http_libsw_breaker_zone(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *ngx_http_libsw_breaker(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);

static ngx_conf_enum_t ngx_http_libsw_log_levels[] = {
    {ngx_string("info"), NGX_LOG_INFO},
    {ngx_string("notice"), NGX_LOG_NOTICE},
    {ngx_string("warn"), NGX_LOG_WARN},
    {ngx_string("error"), NGX_LOG_ERR},
    {ngx_null_string, 0}};

static ngx_conf_num_bounds_t ngx_http_libsw_status_bounds = {ngx_conf_check_num_bounds, 400,
                                                              599};

static ngx_command_t ngx_http_libsw_commands[] = {
    {ngx_string("libsw_zone"), NGX_HTTP_MAIN_CONF | NGX_CONF_1MORE, ngx_http_libsw_zone, 0, 0,
     NULL},
    {ngx_string("libsw_limit"),
     NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_CONF_TAKE123,
     ngx_http_libsw_limit, NGX_HTTP_LOC_CONF_OFFSET, 0, NULL},
    {ngx_string("libsw_status"),
     NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_CONF_TAKE1,
     ngx_conf_set_num_slot, NGX_HTTP_LOC_CONF_OFFSET,
     offsetof(ngx_http_libsw_loc_conf_t, status), &ngx_http_libsw_status_bounds},
    {ngx_string("libsw_log_level"),
     NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_CONF_TAKE1,
     ngx_conf_set_enum_slot, NGX_HTTP_LOC_CONF_OFFSET,
     offsetof(ngx_http_libsw_loc_conf_t, log_level), &ngx_http_libsw_log_levels},
    {ngx_string("libsw_dry_run"),
     NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_CONF_FLAG,
     ngx_conf_set_flag_slot, NGX_HTTP_LOC_CONF_OFFSET,
     offsetof(ngx_http_libsw_loc_conf_t, dry_run), NULL},
    {ngx_string("libsw_retry_after"),
     NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_CONF_FLAG,
     ngx_conf_set_flag_slot, NGX_HTTP_LOC_CONF_OFFSET,
     offsetof(ngx_http_libsw_loc_conf_t, retry_after), NULL},
    {ngx_string("libsw_ratelimit_headers"),
     NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_CONF_FLAG,
     ngx_conf_set_flag_slot, NGX_HTTP_LOC_CONF_OFFSET,
     offsetof(ngx_http_libsw_loc_conf_t, headers), NULL},
    {ngx_string("libsw_breaker_zone"), NGX_HTTP_MAIN_CONF | NGX_CONF_1MORE,
     ngx_http_libsw_breaker_zone, 0, 0, NULL},
    {ngx_string("libsw_breaker"),
     NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_CONF_TAKE1,
     ngx_http_libsw_breaker, NGX_HTTP_LOC_CONF_OFFSET, 0, NULL},
    ngx_null_command};

static ngx_http_module_t ngx_http_libsw_module_ctx = {
    ngx_http_libsw_add_variables,    /* preconfiguration */
    ngx_http_libsw_init,             /* postconfiguration */
    ngx_http_libsw_create_main_conf, /* create main configuration */
    NULL,                            /* init main configuration */
    NULL,                            /* create server configuration */
    NULL,                            /* merge server configuration */
    ngx_http_libsw_create_loc_conf,  /* create location configuration */
    ngx_http_libsw_merge_loc_conf    /* merge location configuration */
};

ngx_module_t ngx_http_libsw_module = {NGX_MODULE_V1,
                                      &ngx_http_libsw_module_ctx, /* module context */
                                      ngx_http_libsw_commands,    /* module directives */
                                      NGX_HTTP_MODULE,            /* module type */
                                      NULL,                       /* init master */
                                      NULL,                       /* init module */
                                      NULL,                       /* init process */
                                      NULL,                       /* init thread */
                                      NULL,                       /* exit thread */
                                      NULL,                       /* exit process */
                                      NULL,                       /* exit master */
                                      NGX_MODULE_V1_PADDING};

/* ------------------------------------------------------------- $libsw_status */

static ngx_str_t ngx_http_libsw_status_name = ngx_string("libsw_status");
static ngx_int_t ngx_http_libsw_status_index = NGX_ERROR;

enum {
  NGX_HTTP_LIBSW_PASSED = 0,
  NGX_HTTP_LIBSW_DELAYED,
  NGX_HTTP_LIBSW_REJECTED,
  NGX_HTTP_LIBSW_DELAYED_DRY_RUN,
  NGX_HTTP_LIBSW_REJECTED_DRY_RUN,
  NGX_HTTP_LIBSW_BREAKER_OPEN,
  NGX_HTTP_LIBSW_UNLIMITED
};

static ngx_str_t ngx_http_libsw_outcomes[] = {
    ngx_string("PASSED"),           ngx_string("DELAYED"),
    ngx_string("REJECTED"),         ngx_string("DELAYED_DRY_RUN"),
    ngx_string("REJECTED_DRY_RUN"), ngx_string("BREAKER_OPEN"),
    ngx_string("UNLIMITED")};

/* Reached only before the handler decided (or where it never runs). */
static ngx_int_t ngx_http_libsw_status_variable(ngx_http_request_t *r,
                                                ngx_http_variable_value_t *v, uintptr_t data) {
  v->not_found = 1;
  return NGX_OK;
}

/* The outcomes as variable values (valid, cacheable), filled at init. */
static ngx_http_variable_value_t ngx_http_libsw_values[NGX_HTTP_LIBSW_UNLIMITED + 1];

static void ngx_http_libsw_set_outcome(ngx_http_request_t *r, ngx_uint_t outcome) {
  r->main->variables[ngx_http_libsw_status_index] = ngx_http_libsw_values[outcome];
}

static ngx_int_t ngx_http_libsw_add_variables(ngx_conf_t *cf) {
  for (ngx_uint_t i = 0; i <= NGX_HTTP_LIBSW_UNLIMITED; i++) {
    ngx_http_libsw_values[i].len = ngx_http_libsw_outcomes[i].len;
    ngx_http_libsw_values[i].data = ngx_http_libsw_outcomes[i].data;
    ngx_http_libsw_values[i].valid = 1;
  }
  ngx_http_variable_t *var = ngx_http_add_variable(cf, &ngx_http_libsw_status_name, 0);
  if (var == NULL) return NGX_ERROR;
  var->get_handler = ngx_http_libsw_status_variable;
  return NGX_OK;
}

/* ---------------------------------------------------------------- handler */

static void ngx_http_libsw_delay(ngx_http_request_t *r) {
  ngx_event_t *wev = r->connection->write;
  if (!wev->timedout) {
    if (ngx_handle_write_event(wev, 0) != NGX_OK)
      ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
    return;
  }
  wev->timedout = 0;
  if (ngx_handle_read_event(r->connection->read, 0) != NGX_OK) {
    ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
    return;
  }
  r->read_event_handler = ngx_http_block_reading;
  r->write_event_handler = ngx_http_core_run_phases;
  ngx_http_core_run_phases(r); /* the handler sees the request decided: declines */
}

static ngx_table_elt_t *ngx_http_libsw_header(ngx_http_request_t *r, const char *name,
                                              int64_t value) {
  ngx_table_elt_t *h = ngx_list_push(&r->headers_out.headers);
  if (h == NULL) return NULL;
  u_char *p = ngx_pnalloc(r->pool, NGX_INT64_LEN);
  if (p == NULL) {
    h->hash = 0;
    return NULL;
  }
  h->hash = 1;
  h->key.data = (u_char *)name;
  h->key.len = ngx_strlen(name);
  h->value.data = p;
  h->value.len = ngx_sprintf(p, "%L", value) - p;
  return h;
}

/* Seconds, rounded up, at least 1. */
static int64_t ngx_http_libsw_seconds(int64_t ms) {
  int64_t s = (ms + 999) / 1000;
  return s < 1 ? 1 : s;
}

/* Give back what the admitted entries counted (all or nothing). */
static void ngx_http_libsw_cancel(ngx_http_request_t *r, ngx_http_libsw_limit_t **zones,
                                  sw_decision *ds, ngx_uint_t n) {
  static ngx_uint_t unsupported_logged;
  while (n--) {
    ngx_http_libsw_zone_t *z = zones[n]->zone;
    int rc = z->keyed ? sw_keyed_cancel(z->k, &ds[n]) : sw_limiter_cancel(z->lim, &ds[n]);
    if (rc == SW_ENOTSUP) {
      if (!unsupported_logged) { /* a libsw without cancels: say it once per worker */
        unsupported_logged = 1;
        ngx_log_error(NGX_LOG_NOTICE, r->connection->log, 0,
                      "libsw: cancel not supported by this libsw (%s): a request refused by "
                      "one limit stays counted by the limits before it",
                      sw_version_string());
      }
    } else if (rc < 0) {
      ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                    "libsw: zone \"%V\": cancel: %s: %s", &z->name, sw_err_name(rc),
                    sw_last_error());
    }
  }
}

static void ngx_http_libsw_breaker_exit(void *data) {
  ngx_http_libsw_breaker_ctx_t *c = data;
  ngx_http_request_t *r = c->r;
  ngx_http_libsw_breaker_t *b = c->breaker;
  uint32_t flags = SW_EXIT_CANCEL; /* no upstream was tried: nothing to count */
  int64_t rt = 0;
  ngx_uint_t status = 0;
  if (r->upstream_states != NULL && r->upstream_states->nelts > 0) {
    ngx_http_upstream_state_t *st = r->upstream_states->elts;
    st = &st[r->upstream_states->nelts - 1];
    status = st->status;
    rt = st->response_time == (ngx_msec_t)-1 ? 0 : (int64_t)st->response_time;
    if (rt > INT32_MAX) rt = INT32_MAX;
    flags = (status == 0 || status >= b->fail_status) ? SW_EXIT_ERROR : 0;
  }
  int rc = sw_breaker_exit_at(b->b, (int64_t)ngx_current_msec, &c->d, rt, flags);
  if (rc < 0)
    ngx_log_error(NGX_LOG_ERR, ngx_cycle->log, 0, "libsw breaker \"%V\": exit: %s: %s",
                  &b->name, sw_err_name(rc), sw_last_error());
}

static const char *ngx_http_libsw_state_names[] = {"closed", "open", "half_open"};

static void ngx_http_libsw_breaker_listener(void *user, int32_t from, int32_t to, int64_t t,
                                            double value) {
  ngx_http_libsw_breaker_t *b = user;
  if (from < 0 || from > 2 || to < 0 || to > 2) return;
  ngx_log_error(NGX_LOG_WARN, ngx_cycle->log, 0, "libsw breaker \"%V\": %s -> %s (%.3f)",
                &b->name, ngx_http_libsw_state_names[from], ngx_http_libsw_state_names[to],
                value);
}

/* RateLimit-Remaining of a window zone: requests left in the window (a
 * decision's remaining counts per second); fallback if it cannot tell. */
static int64_t ngx_http_libsw_window_left(ngx_http_libsw_zone_t *z, int64_t now, ngx_str_t *key,
                                          int64_t fallback) {
  int64_t pass;
  if (z->keyed) {
    sw_keyed_key kk;
    if (sw_keyed_lookup_at(z->k, now, key->data, key->len, &kk) != 1) return fallback;
    pass = kk.pass;
  } else {
    pass = sw_metric_pass_at(sw_node_second_metric(sw_limiter_node(z->lim)), now);
    if (pass < 0) return fallback;
  }
  return pass >= z->limit_count ? 0 : z->limit_count - pass;
}

/* A key of one variable: $binary_remote_addr's bytes read from the
 * connection as nginx's variable reads them (after realip), any other
 * variable by its index. NGX_DECLINED: no key (not limited). */
static ngx_inline ngx_int_t ngx_http_libsw_var_key(ngx_http_request_t *r,
                                                   const ngx_http_libsw_zone_t *z, ngx_str_t *key) {
  if (z->key_addr) {
    ngx_connection_t *c = r->connection;
    switch (c->sockaddr->sa_family) {
#if (NGX_HAVE_INET6)
    case AF_INET6:
      key->data = ((struct sockaddr_in6 *)c->sockaddr)->sin6_addr.s6_addr;
      key->len = sizeof(struct in6_addr);
      return NGX_OK;
#endif
#if (NGX_HAVE_UNIX_DOMAIN)
    case AF_UNIX:
      *key = c->addr_text;
      return NGX_OK;
#endif
    default:
      key->data = (u_char *)&((struct sockaddr_in *)c->sockaddr)->sin_addr;
      key->len = sizeof(in_addr_t);
      return NGX_OK;
    }
  }
  ngx_http_variable_value_t *v = ngx_http_get_indexed_variable(r, z->key_index);
  if (v == NULL || v->not_found) return NGX_DECLINED;
  key->data = v->data;
  key->len = v->len;
  return NGX_OK;
}

/* Every limit of the location in turn, then its breaker. first: the first
 * limit's entry already made by the fast path (its code and decision), or
 * NULL. */
static ngx_int_t ngx_http_libsw_run(ngx_http_request_t *r, ngx_http_libsw_loc_conf_t *lcf,
                                    int64_t now, int first_rc, const sw_decision *first) {
  ngx_http_libsw_limit_t *admitted[NGX_HTTP_LIBSW_MAX_LIMITS];
  sw_decision ds[NGX_HTTP_LIBSW_MAX_LIMITS];
  ngx_uint_t n = 0, dry = 0, unlimited = 0;
  int64_t wait = 0, remaining = INT64_MAX, limit_count = 0, reset_ms = 0, refill_ms = 0;
  ngx_http_libsw_limit_t *refused = NULL, *waiting = NULL;
  sw_decision *d = NULL;

  if (lcf->limits != NULL) {
    ngx_http_libsw_limit_t *limits = lcf->limits->elts;
    for (ngx_uint_t i = 0; i < lcf->limits->nelts; i++) {
      ngx_http_libsw_limit_t *l = &limits[i];
      ngx_http_libsw_zone_t *z = l->zone;
      d = &ds[n];
      int rc;
      ngx_str_t key = ngx_null_string;
      if (i == 0 && first != NULL) { /* the short path's (no RateLimit headers) */
        rc = first_rc;
        *d = *first;
      } else if (z->keyed) {
        if (z->key_index >= 0) {
          /* no key: not limited, as limit_req */
          if (ngx_http_libsw_var_key(r, z, &key) != NGX_OK) continue;
        } else if (ngx_http_complex_value(r, &z->key, &key) != NGX_OK) {
          return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
        if (key.len == 0) continue;
        if (key.len > 65535) {
          ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                        "libsw: zone \"%V\": the key is more than 65535 bytes: \"%V\"",
                        &z->name, &z->key.value);
          continue;
        }
        rc = sw_keyed_entry_at(z->k, now, key.data, key.len, 1, 0, d);
      } else {
        rc = sw_limiter_entry_at(z->lim, now, 1, SW_ENTRY_NO_EXIT, d);
      }
      if (rc < 0) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "libsw: zone \"%V\": %s: %s (request let through)", &z->name,
                      sw_err_name(rc), sw_last_error());
        unlimited = 1;
        continue;
      }
      if (d->verdict == SW_VERDICT_BLOCK) {
        refused = l;
        break;
      }
      if (d->full) { /* on_full=open: a new key passed uncounted */
        unlimited = 1;
        continue;
      }
      admitted[n++] = l;
      if (d->would_block) { /* a dry-run zone: counted as "would block" */
        dry = 1;
        ngx_log_error(lcf->log_level, r->connection->log, 0,
                      "libsw: limiting requests, dry run, by zone \"%V\", retry after %L ms",
                      &z->name, d->retry_after_ms);
      }
      int64_t left = d->remaining; /* pacing: places left in the queue */
      if (lcf->headers && !z->pacing) left = ngx_http_libsw_window_left(z, now, &key, left);
      if (left < remaining) {
        remaining = left;
        limit_count = z->limit_count;
        refill_ms = z->pacing ? (int64_t)((double)(z->limit_count - d->remaining) * 1000.0 / z->rate)
                              : (int64_t)z->interval;
      }
      if (d->verdict == SW_VERDICT_WAIT && !l->nodelay) {
        int64_t w = d->wait_ms;
        if (l->delay > 0) w -= (int64_t)((double)l->delay * 1000.0 / z->rate);
        if (w > wait) {
          wait = w;
          waiting = l;
        }
      }
    }
  }

  if (refused != NULL && lcf->dry_run) { /* not enforced: the request goes on (to the breaker) */
    ngx_log_error(lcf->log_level, r->connection->log, 0,
                  "libsw: limiting requests, dry run, by zone \"%V\", retry after %L ms",
                  &refused->zone->name, d->retry_after_ms);
    dry = 1;
  } else if (refused != NULL) {
    ngx_http_libsw_zone_t *z = refused->zone;
    ngx_http_libsw_cancel(r, admitted, ds, n);
    int64_t retry = d->retry_after_ms;
    ngx_log_error(lcf->log_level, r->connection->log, 0,
                  "libsw: limiting requests by zone \"%V\", retry after %L ms", &z->name, retry);
    ngx_http_libsw_set_outcome(r, NGX_HTTP_LIBSW_REJECTED);
    if (lcf->retry_after && retry >= 0)
      (void)ngx_http_libsw_header(r, "Retry-After", ngx_http_libsw_seconds(retry));
    if (lcf->headers) {
      (void)ngx_http_libsw_header(r, "RateLimit-Limit", z->limit_count);
      (void)ngx_http_libsw_header(r, "RateLimit-Remaining", 0);
      (void)ngx_http_libsw_header(r, "RateLimit-Reset",
                                  retry >= 0 ? ngx_http_libsw_seconds(retry) : 0);
    }
    return lcf->status;
  }

  if (lcf->breaker != NULL) {
    ngx_http_libsw_breaker_t *b = lcf->breaker;
    sw_decision bd;
    int rc = sw_breaker_entry_at(b->b, now, &bd);
    if (rc < 0) {
      ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                    "libsw breaker \"%V\": %s: %s (request let through)", &b->name,
                    sw_err_name(rc), sw_last_error());
    } else if (bd.verdict == SW_VERDICT_BLOCK) {
      ngx_http_libsw_cancel(r, admitted, ds, n);
      ngx_log_error(lcf->log_level, r->connection->log, 0,
                    "libsw breaker \"%V\" is open, retry after %L ms", &b->name,
                    bd.retry_after_ms);
      ngx_http_libsw_set_outcome(r, NGX_HTTP_LIBSW_BREAKER_OPEN);
      if (lcf->retry_after && bd.retry_after_ms >= 0)
        (void)ngx_http_libsw_header(r, "Retry-After",
                                    ngx_http_libsw_seconds(bd.retry_after_ms));
      return b->status;
    } else {
      ngx_pool_cleanup_t *cln =
          ngx_pool_cleanup_add(r->main->pool, sizeof(ngx_http_libsw_breaker_ctx_t));
      if (cln == NULL) {
        (void)sw_breaker_exit_at(b->b, now, &bd, 0, SW_EXIT_CANCEL);
        ngx_http_libsw_cancel(r, admitted, ds, n);
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
      }
      ngx_http_libsw_breaker_ctx_t *c = cln->data;
      c->r = r->main;
      c->breaker = b;
      c->d = bd;
      cln->handler = ngx_http_libsw_breaker_exit;
      if (bd.probe)
        ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                      "libsw breaker \"%V\": half-open, probing the upstream", &b->name);
    }
  }

  if (lcf->headers && remaining != INT64_MAX) {
    /* until the quota is whole again, at most: a window zone's window; a
       pacing zone's queue drains at the rate */
    reset_ms = refill_ms;
    (void)ngx_http_libsw_header(r, "RateLimit-Limit", limit_count);
    (void)ngx_http_libsw_header(r, "RateLimit-Remaining", remaining < 0 ? 0 : remaining);
    (void)ngx_http_libsw_header(r, "RateLimit-Reset", (reset_ms + 999) / 1000);
  }

  if (n == 0 && !unlimited && !dry && lcf->breaker == NULL) return NGX_DECLINED; /* no key */
  if (wait <= 0) {
    ngx_http_libsw_set_outcome(r, dry ? NGX_HTTP_LIBSW_REJECTED_DRY_RUN
                                  : n == 0 && unlimited ? NGX_HTTP_LIBSW_UNLIMITED
                                                        : NGX_HTTP_LIBSW_PASSED);
    return NGX_DECLINED;
  }
  if (lcf->dry_run) {
    ngx_http_libsw_set_outcome(r, NGX_HTTP_LIBSW_DELAYED_DRY_RUN);
    return NGX_DECLINED;
  }
  ngx_http_libsw_set_outcome(r, NGX_HTTP_LIBSW_DELAYED);
  ngx_log_error(lcf->delay_log_level, r->connection->log, 0,
                "libsw: delaying request by %L ms, by zone \"%V\"", wait,
                &waiting->zone->name);
  if (ngx_handle_read_event(r->connection->read, 0) != NGX_OK)
    return NGX_HTTP_INTERNAL_SERVER_ERROR;
  r->read_event_handler = ngx_http_test_reading;
  r->write_event_handler = ngx_http_libsw_delay;
  ngx_add_timer(r->connection->write, (ngx_msec_t)wait);
  return NGX_AGAIN;
}

/* The handler of the preaccess phase. The common case (one limit keyed
 * on a variable, no breaker, no RateLimit headers) takes a short path when
 * admitted; anything else goes the general way. */
static ngx_int_t ngx_http_libsw_handler(ngx_http_request_t *r) {
  ngx_http_libsw_loc_conf_t *lcf = ngx_http_get_module_loc_conf(r, ngx_http_libsw_module);
  if (lcf->limits == NULL && lcf->breaker == NULL) return NGX_DECLINED;
  if (r->main->variables[ngx_http_libsw_status_index].valid) return NGX_DECLINED;
  const int64_t now = (int64_t)ngx_current_msec;
  if (lcf->fast) {
    ngx_http_libsw_zone_t *z = ((ngx_http_libsw_limit_t *)lcf->limits->elts)->zone;
    ngx_str_t key;
    if (ngx_http_libsw_var_key(r, z, &key) == NGX_OK && key.len > 0 && key.len <= 65535) {
      sw_decision d;
      int rc = sw_keyed_entry_at(z->k, now, key.data, key.len, 1, 0, &d);
      if (rc == SW_OK && d.verdict == SW_VERDICT_PASS && !d.would_block && !d.full) {
        ngx_http_libsw_set_outcome(r, NGX_HTTP_LIBSW_PASSED);
        return NGX_DECLINED;
      }
      return ngx_http_libsw_run(r, lcf, now, rc, &d);
    }
  }
  return ngx_http_libsw_run(r, lcf, now, 0, NULL);
}

/* ------------------------------------------------------- zones: parsing */

static void *ngx_http_libsw_create_main_conf(ngx_conf_t *cf) {
  ngx_http_libsw_main_conf_t *mcf = ngx_pcalloc(cf->pool, sizeof(*mcf));
  if (mcf == NULL) return NULL;
  if (ngx_array_init(&mcf->zones, cf->pool, 4, sizeof(ngx_http_libsw_zone_t *)) != NGX_OK ||
      ngx_array_init(&mcf->breakers, cf->pool, 4, sizeof(ngx_http_libsw_breaker_t *)) !=
          NGX_OK)
    return NULL;
  return mcf;
}

static void *ngx_http_libsw_create_loc_conf(ngx_conf_t *cf) {
  ngx_http_libsw_loc_conf_t *conf = ngx_pcalloc(cf->pool, sizeof(*conf));
  if (conf == NULL) return NULL;
  conf->status = NGX_CONF_UNSET_UINT;
  conf->log_level = NGX_CONF_UNSET_UINT;
  conf->dry_run = NGX_CONF_UNSET;
  conf->retry_after = NGX_CONF_UNSET;
  conf->headers = NGX_CONF_UNSET;
  return conf;
}

static char *ngx_http_libsw_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child) {
  ngx_http_libsw_loc_conf_t *prev = parent, *conf = child;
  if (conf->limits == NULL) conf->limits = prev->limits;
  if (!conf->breaker_set) {
    conf->breaker = prev->breaker;
    conf->breaker_set = prev->breaker_set;
  }
  ngx_conf_merge_uint_value(conf->status, prev->status, 429);
  ngx_conf_merge_uint_value(conf->log_level, prev->log_level, NGX_LOG_ERR);
  conf->delay_log_level = conf->log_level == NGX_LOG_INFO ? NGX_LOG_INFO : conf->log_level + 1;
  ngx_conf_merge_value(conf->dry_run, prev->dry_run, 0);
  ngx_conf_merge_value(conf->retry_after, prev->retry_after, 1);
  ngx_conf_merge_value(conf->headers, prev->headers, 0);
  conf->fast = conf->limits != NULL && conf->limits->nelts == 1 && conf->breaker == NULL &&
               !conf->headers;
  if (conf->fast) {
    ngx_http_libsw_zone_t *z = ((ngx_http_libsw_limit_t *)conf->limits->elts)->zone;
    conf->fast = z->keyed && z->key_index >= 0;
  }
  return NGX_CONF_OK;
}

/* value of "name=value" if arg starts with name=, else NULL (s filled). */
static ngx_int_t ngx_http_libsw_param(ngx_str_t *arg, const char *name, ngx_str_t *s) {
  size_t len = ngx_strlen(name);
  if (arg->len <= len || ngx_strncmp(arg->data, name, len) != 0 || arg->data[len] != '=')
    return 0;
  s->data = arg->data + len + 1;
  s->len = arg->len - len - 1;
  return 1;
}

/* A decimal number >= 0 (fractions allowed): NGX_OK and *out. */
static ngx_int_t ngx_http_libsw_number(ngx_str_t *s, double *out) {
  u_char buf[64];
  if (s->len == 0 || s->len >= sizeof(buf)) return NGX_ERROR;
  for (size_t i = 0; i < s->len; i++)
    if (!((s->data[i] >= '0' && s->data[i] <= '9') || s->data[i] == '.')) return NGX_ERROR;
  ngx_memcpy(buf, s->data, s->len);
  buf[s->len] = '\0';
  char *end;
  double v = strtod((char *)buf, &end);
  if (*end != '\0' || !(v >= 0) || !isfinite(v)) return NGX_ERROR;
  *out = v;
  return NGX_OK;
}

/* A whole number in lo..hi, or NGX_ERROR. */
static ngx_int_t ngx_http_libsw_int(ngx_str_t *s, ngx_int_t lo, ngx_int_t hi) {
  ngx_int_t v = ngx_atoi(s->data, s->len);
  return v == NGX_ERROR || v < lo || v > hi ? NGX_ERROR : v;
}

/* A segment name of 1..63 bytes, or a path (libsw checks the rest). */
static char *ngx_http_libsw_segment_name(ngx_conf_t *cf, ngx_str_t *out, ngx_str_t *given,
                                         const char *prefix, ngx_str_t *zone) {
  size_t plen = ngx_strlen(prefix);
  size_t len = given ? given->len : plen + zone->len;
  if (len == 0 || len > 4095) {
    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid segment name \"%V\"", given ? given : zone);
    return NGX_CONF_ERROR;
  }
  out->data = ngx_pnalloc(cf->pool, len + 1);
  if (out->data == NULL) return NGX_CONF_ERROR;
  u_char *p = given ? ngx_cpymem(out->data, given->data, given->len)
                    : ngx_cpymem(ngx_cpymem(out->data, prefix, plen), zone->data, zone->len);
  *p = '\0';
  out->len = len;
  return NGX_CONF_OK;
}

static ngx_int_t ngx_http_libsw_isalnum(u_char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static ngx_int_t ngx_http_libsw_zone_name_ok(ngx_str_t *name) {
  if (name->len == 0 || name->len > 40) return 0;
  for (size_t i = 0; i < name->len; i++) {
    u_char c = name->data[i];
    if (!(ngx_http_libsw_isalnum(c) || c == '_' || c == '-' || c == '.')) return 0;
  }
  return 1;
}

static ngx_http_libsw_zone_t *ngx_http_libsw_find_zone(ngx_http_libsw_main_conf_t *mcf,
                                                       ngx_str_t *name) {
  ngx_http_libsw_zone_t **zones = mcf->zones.elts;
  for (ngx_uint_t i = 0; i < mcf->zones.nelts; i++)
    if (zones[i]->name.len == name->len &&
        ngx_strncmp(zones[i]->name.data, name->data, name->len) == 0)
      return zones[i];
  return NULL;
}

static char *ngx_http_libsw_zone(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) {
  ngx_http_libsw_main_conf_t *mcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_libsw_module);
  ngx_str_t *value = cf->args->elts, s, segment = ngx_null_string;
  ngx_uint_t i = 1, have_segment = 0, have_rate = 0;
  ngx_http_libsw_zone_t *z = ngx_pcalloc(cf->pool, sizeof(*z));
  if (z == NULL) return NGX_CONF_ERROR;
  z->key_index = -1;
  z->pacing = 1;
  z->burst = -1;
  z->interval = 1000;
  z->windows = 2;
  z->key_bytes = 16;
  z->on_full = SW_FULL_EVICT;
  z->file = cf->conf_file->file.name.data;
  z->line = cf->conf_file->line;

  if (!ngx_http_libsw_param(&value[1], "zone", &s)) { /* the key */
    ngx_http_compile_complex_value_t ccv;
    ngx_memzero(&ccv, sizeof(ccv));
    ccv.cf = cf;
    ccv.value = &value[1];
    ccv.complex_value = &z->key;
    if (ngx_http_compile_complex_value(&ccv) != NGX_OK) return NGX_CONF_ERROR;
    z->keyed = 1;
    /* one variable ("$binary_remote_addr"): read it without the script engine */
    ngx_str_t v = value[1];
    if (v.len > 1 && v.data[0] == '$') {
      ngx_uint_t plain = 1;
      for (size_t j = 1; j < v.len; j++)
        if (!(ngx_http_libsw_isalnum(v.data[j]) || v.data[j] == '_')) plain = 0;
      if (plain) {
        v.data++;
        v.len--;
        z->key_index = ngx_http_get_variable_index(cf, &v);
        if (z->key_index == NGX_ERROR) return NGX_CONF_ERROR;
        /* (a builtin no "set" can change: its bytes are the connection's address) */
        z->key_addr = v.len == 18 && ngx_strncmp(v.data, "binary_remote_addr", 18) == 0;
      }
    }
    i = 2;
  }

  for (; i < cf->args->nelts; i++) {
    ngx_str_t *a = &value[i];
    if (ngx_http_libsw_param(a, "zone", &s)) {
      u_char *colon = ngx_strlchr(s.data, s.data + s.len, ':');
      z->name.data = s.data;
      z->name.len = colon ? (size_t)(colon - s.data) : s.len;
      if (colon) {
        ngx_str_t size = {s.len - z->name.len - 1, colon + 1};
        z->size = ngx_parse_size(&size);
        if (z->size == NGX_ERROR || z->size < 65536) {
          ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                             "invalid zone size \"%V\": use a size of at least 64k (zone=%V:10m) "
                             "or capacity=N",
                             a, &z->name);
          return NGX_CONF_ERROR;
        }
      }
      if (!ngx_http_libsw_zone_name_ok(&z->name)) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid zone name \"%V\": 1..40 characters of [A-Za-z0-9_.-]", a);
        return NGX_CONF_ERROR;
      }
    } else if (ngx_http_libsw_param(a, "rate", &s)) {
      double scale = 0;
      if (s.len > 3 && ngx_strncmp(s.data + s.len - 3, "r/s", 3) == 0) scale = 1;
      else if (s.len > 3 && ngx_strncmp(s.data + s.len - 3, "r/m", 3) == 0) scale = 60;
      ngx_str_t num = {s.len - 3, s.data};
      if (scale == 0 || ngx_http_libsw_number(&num, &z->rate) != NGX_OK) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid rate \"%V\": a number of requests per second or minute "
                           "(rate=10r/s, rate=600r/m, rate=0.5r/s)",
                           a);
        return NGX_CONF_ERROR;
      }
      z->rate /= scale;
      if (scale == 60 && !have_rate) z->interval = 60000; /* a window zone counts per minute */
      have_rate = 1;
    } else if (ngx_http_libsw_param(a, "burst", &s)) {
      if ((z->burst = ngx_http_libsw_int(&s, 0, 100000000)) == NGX_ERROR) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid burst \"%V\"", a);
        return NGX_CONF_ERROR;
      }
    } else if (ngx_http_libsw_param(a, "mode", &s)) {
      if (s.len == 6 && ngx_strncmp(s.data, "pacing", 6) == 0) z->pacing = 1;
      else if (s.len == 6 && ngx_strncmp(s.data, "window", 6) == 0) z->pacing = 0;
      else {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid mode \"%V\": pacing (limit_req's leaky bucket, the default) "
                           "or window (a sliding window)",
                           a);
        return NGX_CONF_ERROR;
      }
    } else if (ngx_http_libsw_param(a, "window", &s)) {
      ngx_int_t ms = ngx_parse_time(&s, 0);
      if (ms == NGX_ERROR || ms <= 0 || ms > 3600000) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid window \"%V\": a time of 1ms..1h (window=1s, window=500ms)", a);
        return NGX_CONF_ERROR;
      }
      z->interval = (ngx_msec_t)ms;
      have_rate = 1; /* an explicit window wins over r/m's default */
    } else if (ngx_http_libsw_param(a, "windows", &s)) {
      if ((ngx_int_t)(z->windows = ngx_http_libsw_int(&s, 1, 64)) == NGX_ERROR) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid windows \"%V\": 1..64", a);
        return NGX_CONF_ERROR;
      }
    } else if (ngx_http_libsw_param(a, "capacity", &s)) {
      if ((ngx_int_t)(z->capacity = ngx_http_libsw_int(&s, 1, 1 << 28)) == NGX_ERROR) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid capacity \"%V\": 1..268435456 keys", a);
        return NGX_CONF_ERROR;
      }
    } else if (ngx_http_libsw_param(a, "key_bytes", &s)) {
      if ((ngx_int_t)(z->key_bytes = ngx_http_libsw_int(&s, 16, 128)) == NGX_ERROR) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid key_bytes \"%V\": 16..128", a);
        return NGX_CONF_ERROR;
      }
    } else if (ngx_http_libsw_param(a, "on_full", &s)) {
      if (s.len == 5 && ngx_strncmp(s.data, "evict", 5) == 0) z->on_full = SW_FULL_EVICT;
      else if (s.len == 4 && ngx_strncmp(s.data, "open", 4) == 0) z->on_full = SW_FULL_OPEN;
      else if (s.len == 6 && ngx_strncmp(s.data, "closed", 6) == 0) z->on_full = SW_FULL_CLOSED;
      else {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid on_full \"%V\": evict, open or closed",
                           a);
        return NGX_CONF_ERROR;
      }
    } else if (ngx_http_libsw_param(a, "segment", &s)) {
      segment = s;
      have_segment = 1;
    } else if (a->len == 7 && ngx_strncmp(a->data, "dry_run", 7) == 0) {
      z->dry_run = 1;
    } else {
      ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid parameter \"%V\"", a);
      return NGX_CONF_ERROR;
    }
  }

  if (z->name.len == 0) {
    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "\"%V\" must have the \"zone\" parameter",
                       &cmd->name);
    return NGX_CONF_ERROR;
  }
  if (z->rate == 0 && !have_rate) {
    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "\"%V\" must have the \"rate\" parameter (rate=10r/s)",
                       &cmd->name);
    return NGX_CONF_ERROR;
  }
  if (!z->keyed && (z->size || z->capacity || z->on_full != SW_FULL_EVICT)) {
    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "zone \"%V\" has no key (one limit for every request): a size, capacity or "
                       "on_full needs a key (libsw_zone $binary_remote_addr zone=%V:10m ...)",
                       &z->name, &z->name);
    return NGX_CONF_ERROR;
  }
  if (!z->pacing && z->burst >= 0) {
    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "zone \"%V\": burst is for mode=pacing; a window zone admits its whole "
                       "rate at once",
                       &z->name);
    return NGX_CONF_ERROR;
  }
  if (!z->pacing && z->rate * (double)z->interval / 1000.0 != floor(z->rate) *
                                                           (double)z->interval / 1000.0) {
    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "zone \"%V\": rate %.3fr/s is not a whole number per second: a window zone "
                       "counts whole requests per second over its window; use mode=pacing or a "
                       "rate in whole r/s (or a multiple of 60 r/m)",
                       &z->name, z->rate);
    return NGX_CONF_ERROR;
  }
  if (z->keyed && z->size == 0 && z->capacity == 0) z->capacity = 10000;
  if (ngx_http_libsw_find_zone(mcf, &z->name)) {
    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "duplicate zone \"%V\"", &z->name);
    return NGX_CONF_ERROR;
  }
  if (ngx_http_libsw_segment_name(cf, &z->segment, have_segment ? &segment : NULL, "libsw_",
                                  &z->name) != NGX_CONF_OK)
    return NGX_CONF_ERROR;
  ngx_http_libsw_zone_t **slot = ngx_array_push(&mcf->zones);
  if (slot == NULL) return NGX_CONF_ERROR;
  *slot = z;
  return NGX_CONF_OK;
}

static char *ngx_http_libsw_limit(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) {
  ngx_http_libsw_loc_conf_t *lcf = conf;
  ngx_http_libsw_main_conf_t *mcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_libsw_module);
  ngx_str_t *value = cf->args->elts, s, name = ngx_null_string;
  ngx_int_t burst = -1;
  ngx_http_libsw_limit_t l = {NULL, 0, -1};
  for (ngx_uint_t i = 1; i < cf->args->nelts; i++) {
    ngx_str_t *a = &value[i];
    if (ngx_http_libsw_param(a, "zone", &s)) {
      name = s;
    } else if (ngx_http_libsw_param(a, "burst", &s)) {
      if ((burst = ngx_http_libsw_int(&s, 0, 100000000)) == NGX_ERROR) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid burst \"%V\"", a);
        return NGX_CONF_ERROR;
      }
    } else if (a->len == 7 && ngx_strncmp(a->data, "nodelay", 7) == 0) {
      l.nodelay = 1;
    } else if (ngx_http_libsw_param(a, "delay", &s)) {
      if ((l.delay = ngx_http_libsw_int(&s, 0, 100000000)) == NGX_ERROR) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid delay \"%V\"", a);
        return NGX_CONF_ERROR;
      }
    } else {
      ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid parameter \"%V\"", a);
      return NGX_CONF_ERROR;
    }
  }
  if (name.len == 0) {
    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "\"%V\" must have the \"zone\" parameter",
                       &cmd->name);
    return NGX_CONF_ERROR;
  }
  if (l.nodelay && l.delay >= 0) {
    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "\"nodelay\" and \"delay=\" exclude each other");
    return NGX_CONF_ERROR;
  }
  l.zone = ngx_http_libsw_find_zone(mcf, &name);
  if (l.zone == NULL) {
    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "unknown libsw_zone \"%V\" (declare it with libsw_zone before its use)",
                       &name);
    return NGX_CONF_ERROR;
  }
  if (burst >= 0) { /* limit_req's place for it: all uses of a zone must agree */
    if (!l.zone->pacing) {
      ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                         "zone \"%V\": burst is for mode=pacing; a window zone admits its "
                         "whole rate at once",
                         &name);
      return NGX_CONF_ERROR;
    }
    if (l.zone->burst >= 0 && l.zone->burst != burst) {
      ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                         "zone \"%V\" has burst=%i elsewhere: a zone has one burst (its queue is "
                         "shared); set it once, on libsw_zone",
                         &name, l.zone->burst);
      return NGX_CONF_ERROR;
    }
    l.zone->burst = burst;
  }
  if ((l.nodelay || l.delay >= 0) && !l.zone->pacing) {
    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "zone \"%V\": nodelay and delay= are for mode=pacing (a window zone never "
                       "delays)",
                       &name);
    return NGX_CONF_ERROR;
  }
  if (lcf->limits == NULL) {
    lcf->limits = ngx_array_create(cf->pool, 2, sizeof(ngx_http_libsw_limit_t));
    if (lcf->limits == NULL) return NGX_CONF_ERROR;
  }
  ngx_http_libsw_limit_t *limits = lcf->limits->elts;
  for (ngx_uint_t i = 0; i < lcf->limits->nelts; i++)
    if (limits[i].zone == l.zone) return "is duplicate";
  if (lcf->limits->nelts >= NGX_HTTP_LIBSW_MAX_LIMITS) return "is more than 16 limits in one place";
  ngx_http_libsw_limit_t *p = ngx_array_push(lcf->limits);
  if (p == NULL) return NGX_CONF_ERROR;
  *p = l;
  return NGX_CONF_OK;
}

/* ---------------------------------------------------- breakers: parsing */

static char *ngx_http_libsw_breaker_zone(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) {
  ngx_http_libsw_main_conf_t *mcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_libsw_module);
  ngx_str_t *value = cf->args->elts, s, segment;
  ngx_uint_t have_segment = 0, strategies = 0;
  ngx_http_libsw_breaker_t *b = ngx_pcalloc(cf->pool, sizeof(*b));
  if (b == NULL) return NGX_CONF_ERROR;
  b->name = value[1];
  b->fail_status = 500;
  b->status = 503;
  b->file = cf->conf_file->file.name.data;
  b->line = cf->conf_file->line;
  if (!ngx_http_libsw_zone_name_ok(&b->name)) {
    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "invalid breaker name \"%V\": 1..40 characters of [A-Za-z0-9_.-]",
                       &b->name);
    return NGX_CONF_ERROR;
  }
  if (sw_options_create(&b->opts) != SW_OK) return NGX_CONF_ERROR;
  ngx_pool_cleanup_t *cln = ngx_pool_cleanup_add(cf->pool, 0);
  if (cln == NULL) {
    sw_options_free(b->opts);
    return NGX_CONF_ERROR;
  }
  cln->handler = (ngx_pool_cleanup_pt)sw_options_free;
  cln->data = b->opts;

  for (ngx_uint_t i = 2; i < cf->args->nelts; i++) {
    ngx_str_t *a = &value[i];
    int rc = SW_OK;
    double v;
    ngx_int_t t;
    if (ngx_http_libsw_param(a, "segment", &s)) {
      segment = s;
      have_segment = 1;
      continue;
    }
    if (ngx_http_libsw_param(a, "error_ratio", &s) ||
        ngx_http_libsw_param(a, "error_count", &s) || ngx_http_libsw_param(a, "slow_ratio", &s)) {
      int strategy = a->data[0] == 's' ? SW_BREAKER_SLOW_RATIO
                     : a->data[6] == 'r' ? SW_BREAKER_ERROR_RATIO : SW_BREAKER_ERROR_COUNT;
      strategies++;
      if (ngx_http_libsw_number(&s, &v) != NGX_OK) goto invalid;
      rc = sw_options_set(b->opts, SW_OPT_BREAKER_STRATEGY, strategy);
      if (rc == SW_OK)
        rc = sw_options_set_double(b->opts,
                                   strategy == SW_BREAKER_SLOW_RATIO ? SW_OPT_BREAKER_SLOW_RATIO
                                                                     : SW_OPT_BREAKER_COUNT,
                                   v);
    } else if (ngx_http_libsw_param(a, "max_rt", &s)) {
      if ((t = ngx_parse_time(&s, 0)) == NGX_ERROR) goto invalid;
      rc = sw_options_set(b->opts, SW_OPT_BREAKER_COUNT, t);
    } else if (ngx_http_libsw_param(a, "min_requests", &s)) {
      if ((t = ngx_atoi(s.data, s.len)) == NGX_ERROR) goto invalid;
      rc = sw_options_set(b->opts, SW_OPT_BREAKER_MIN_REQUESTS, t);
    } else if (ngx_http_libsw_param(a, "interval", &s)) {
      if ((t = ngx_parse_time(&s, 0)) == NGX_ERROR) goto invalid;
      rc = sw_options_set(b->opts, SW_OPT_BREAKER_STAT_INTERVAL_MS, t);
    } else if (ngx_http_libsw_param(a, "windows", &s)) {
      if ((t = ngx_atoi(s.data, s.len)) == NGX_ERROR) goto invalid;
      rc = sw_options_set(b->opts, SW_OPT_BREAKER_SAMPLE_COUNT, t);
    } else if (ngx_http_libsw_param(a, "open_for", &s)) {
      if ((t = ngx_parse_time(&s, 0)) == NGX_ERROR) goto invalid;
      rc = sw_options_set_double(b->opts, SW_OPT_BREAKER_TIME_WINDOW_SEC, (double)t / 1000.0);
    } else if (ngx_http_libsw_param(a, "half_open_calls", &s)) {
      if ((t = ngx_atoi(s.data, s.len)) == NGX_ERROR) goto invalid;
      rc = sw_options_set(b->opts, SW_OPT_BREAKER_HALF_OPEN_CALLS, t);
    } else if (ngx_http_libsw_param(a, "probe_timeout", &s)) {
      if ((t = ngx_parse_time(&s, 0)) == NGX_ERROR) goto invalid;
      rc = sw_options_set(b->opts, SW_OPT_BREAKER_PROBE_TIMEOUT_MS, t);
    } else if (ngx_http_libsw_param(a, "fail_status", &s)) {
      if ((t = ngx_http_libsw_int(&s, 100, 599)) == NGX_ERROR) goto invalid;
      b->fail_status = (ngx_uint_t)t;
    } else if (ngx_http_libsw_param(a, "status", &s)) {
      if ((t = ngx_http_libsw_int(&s, 400, 599)) == NGX_ERROR) goto invalid;
      b->status = (ngx_uint_t)t;
    } else {
      ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid parameter \"%V\"", a);
      return NGX_CONF_ERROR;
    }
    if (rc != SW_OK) {
      ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid \"%V\": %s", a, sw_last_error());
      return NGX_CONF_ERROR;
    }
    continue;
  invalid:
    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid \"%V\"", a);
    return NGX_CONF_ERROR;
  }
  if (strategies != 1) {
    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "breaker \"%V\" needs one of error_ratio=, error_count=, slow_ratio= (with "
                       "max_rt=)",
                       &b->name);
    return NGX_CONF_ERROR;
  }
  ngx_http_libsw_breaker_t **bs = mcf->breakers.elts;
  for (ngx_uint_t i = 0; i < mcf->breakers.nelts; i++)
    if (bs[i]->name.len == b->name.len &&
        ngx_strncmp(bs[i]->name.data, b->name.data, b->name.len) == 0) {
      ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "duplicate breaker \"%V\"", &b->name);
      return NGX_CONF_ERROR;
    }
  if (ngx_http_libsw_segment_name(cf, &b->segment, have_segment ? &segment : NULL,
                                  "libsw-breaker-", &b->name) != NGX_CONF_OK)
    return NGX_CONF_ERROR;
  ngx_http_libsw_breaker_t **slot = ngx_array_push(&mcf->breakers);
  if (slot == NULL) return NGX_CONF_ERROR;
  *slot = b;
  return NGX_CONF_OK;
}

static char *ngx_http_libsw_breaker(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) {
  ngx_http_libsw_loc_conf_t *lcf = conf;
  ngx_http_libsw_main_conf_t *mcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_libsw_module);
  ngx_str_t *value = cf->args->elts;
  if (lcf->breaker_set) return "is duplicate";
  lcf->breaker_set = 1;
  if (value[1].len == 3 && ngx_strncmp(value[1].data, "off", 3) == 0) return NGX_CONF_OK;
  ngx_http_libsw_breaker_t **bs = mcf->breakers.elts;
  for (ngx_uint_t i = 0; i < mcf->breakers.nelts; i++)
    if (bs[i]->name.len == value[1].len &&
        ngx_strncmp(bs[i]->name.data, value[1].data, value[1].len) == 0) {
      lcf->breaker = bs[i];
      return NGX_CONF_OK;
    }
  ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                     "unknown libsw_breaker_zone \"%V\" (declare it before its use)", &value[1]);
  return NGX_CONF_ERROR;
}

/* -------------------------------------------- zones: opened at the end */

/* The zone's rule and geometry as libsw options into o. */
static int ngx_http_libsw_zone_options(ngx_http_libsw_zone_t *z, sw_options *o) {
  int rc = sw_options_set(o, SW_OPT_BEHAVIOR, z->pacing ? SW_BEHAVIOR_PACING : SW_BEHAVIOR_REJECT);
  if (rc == SW_OK) rc = sw_options_set_double(o, SW_OPT_THRESHOLD, z->rate);
  if (rc == SW_OK && z->pacing) {
    double q = z->burst > 0 ? ceil((double)z->burst * 1000.0 / z->rate) : 0;
    if (z->rate == 0) q = 0;
    rc = sw_options_set_double(o, SW_OPT_MAX_QUEUE_MS, q);
  }
  if (rc == SW_OK) rc = sw_options_set(o, SW_OPT_SECOND_INTERVAL_MS, (int64_t)z->interval);
  if (rc == SW_OK) rc = sw_options_set(o, SW_OPT_SECOND_SAMPLE_COUNT, (int64_t)z->windows);
  if (rc == SW_OK) rc = sw_options_set(o, SW_OPT_DRY_RUN, z->dry_run);
  if (rc == SW_OK && z->keyed) rc = sw_options_set(o, SW_OPT_KEY_BYTES, (int64_t)z->key_bytes);
  if (rc == SW_OK && z->keyed) rc = sw_options_set(o, SW_OPT_KEYED_ON_FULL, (int64_t)z->on_full);
  if (rc == SW_OK && !z->keyed) rc = sw_options_set(o, SW_OPT_STRIPES, 1); /* as resty.libsw */
  return rc;
}

#define NGX_HTTP_LIBSW_ZONE_ERROR(z, fmt, ...)                                                  \
  ngx_log_error(NGX_LOG_EMERG, cf->log, 0, "libsw_zone \"%V\" (%s:%ui): " fmt, &(z)->name,   \
                (z)->file, (z)->line, __VA_ARGS__)

static void ngx_http_libsw_close_zone(void *data) {
  ngx_http_libsw_zone_t *z = data;
  sw_keyed_free(z->k);
  sw_segment_close(z->seg);
  z->k = NULL;
  z->seg = NULL;
  z->lim = NULL;
}

static const char *ngx_http_libsw_hint(int rc) {
  switch (rc) {
  case SW_EGEOMETRY:
  case SW_ETYPE:
    return ": a reload cannot change a segment's geometry (capacity, window, windows, "
           "key_bytes, mode, a key or none); keep it, or remove the segment (its state is "
           "lost) or name another with segment=";
  case SW_EVERSION:
    return ": laid out by another libsw version; remove it or name another with segment=";
  case SW_EPERM:
    return ": permissions (nginx opens zones in its master process, as root)";
  default:
    return "";
  }
}

static ngx_int_t ngx_http_libsw_open_zone(ngx_conf_t *cf, ngx_http_libsw_zone_t *z) {
  sw_options *o;
  int rc = sw_options_create(&o);
  if (rc != SW_OK) {
    NGX_HTTP_LIBSW_ZONE_ERROR(z, "%s: %s", sw_err_name(rc), sw_last_error());
    return NGX_ERROR;
  }
  rc = ngx_http_libsw_zone_options(z, o);
  if (rc != SW_OK) {
    NGX_HTTP_LIBSW_ZONE_ERROR(z, "%s", sw_last_error());
    sw_options_free(o);
    return NGX_ERROR;
  }
  /* the rule checked on the heap first; zone=NAME:SIZE's capacity from its cost */
  if (z->keyed) {
    sw_keyed *probe;
    sw_keyed_info info;
    rc = sw_keyed_create(&probe, 1024, o);
    if (rc == SW_OK) {
      rc = sw_keyed_stats(probe, &info);
      sw_keyed_free(probe);
    }
    if (rc != SW_OK) {
      NGX_HTTP_LIBSW_ZONE_ERROR(z, "%s", sw_last_error());
      sw_options_free(o);
      return NGX_ERROR;
    }
    if (z->capacity == 0) {
      double c = floor((double)z->size * 1024.0 / (double)info.bytes);
      z->capacity = c < 1 ? 1 : c > (double)(1 << 28) ? (1 << 28) : (ngx_uint_t)c;
    }
    z->limit_count = z->pacing ? (z->burst > 0 ? z->burst : 0) + 1
                               : (int64_t)(floor(z->rate) * (double)z->interval / 1000.0);
  } else {
    sw_limiter *probe;
    rc = sw_limiter_create(&probe, o);
    sw_limiter_free(probe);
    if (rc != SW_OK) {
      NGX_HTTP_LIBSW_ZONE_ERROR(z, "%s", sw_last_error());
      sw_options_free(o);
      return NGX_ERROR;
    }
    z->limit_count = z->pacing ? (z->burst > 0 ? z->burst : 0) + 1
                               : (int64_t)(floor(z->rate) * (double)z->interval / 1000.0);
  }

  /* nginx -t: attach if it exists (its geometry checked), change nothing */
  uint32_t flags = NGX_HTTP_LIBSW_CHECK_ONLY ? 0 : SW_SEGMENT_CREATE;
  const char *seg = (const char *)z->segment.data;
  if (z->keyed) {
    rc = sw_keyed_open(&z->k, seg, (uint32_t)z->capacity, o, flags);
    if (rc == SW_OK && !NGX_HTTP_LIBSW_CHECK_ONLY && !sw_keyed_created(z->k))
      rc = sw_keyed_set_rule(z->k, o); /* a reload's new rate, now */
  } else {
    rc = sw_segment_open(&z->seg, seg, 1, o, flags);
    if (rc == SW_OK) {
      sw_registry *reg = sw_segment_registry(z->seg);
      /* the limiter is named as the zone (swctl, rules, resty.libsw) */
      u_char name[64];
      ngx_memcpy(name, z->name.data, z->name.len);
      name[z->name.len] = '\0';
      int found = sw_registry_find(reg, (const char *)name, &z->lim);
      if (found == 1 && !NGX_HTTP_LIBSW_CHECK_ONLY) rc = sw_limiter_set_rule(z->lim, o);
      else if (found == 0 && !NGX_HTTP_LIBSW_CHECK_ONLY)
        rc = sw_registry_get_ex(reg, (const char *)name, o, &z->lim);
      else if (found == 0 && sw_registry_count(reg) >= sw_registry_capacity(reg)) {
        rc = SW_EFULL;
        NGX_HTTP_LIBSW_ZONE_ERROR(z, "segment %s holds another limit (%ui of %ui names taken)%s",
                                  seg, (ngx_uint_t)sw_registry_count(reg),
                                  (ngx_uint_t)sw_registry_capacity(reg), "");
        sw_options_free(o);
        return NGX_ERROR;
      } else if (found < 0)
        rc = found;
    }
  }
  sw_options_free(o);
  if (rc == SW_ENOTFOUND && NGX_HTTP_LIBSW_CHECK_ONLY) return NGX_OK; /* made at start */
  if (rc != SW_OK) {
    NGX_HTTP_LIBSW_ZONE_ERROR(z, "segment %s: %s: %s%s", seg, sw_err_name(rc), sw_last_error(),
                              ngx_http_libsw_hint(rc));
    return NGX_ERROR;
  }
  return NGX_OK;
}

/* The rule differs from the breaker's in the segment. */
static ngx_int_t ngx_http_libsw_breaker_differs(sw_breaker *br, const sw_options *want) {
  sw_options *have;
  ngx_int_t differs = 0;
  if (sw_options_create(&have) != SW_OK) return 1;
  if (sw_breaker_get_rule(br, have) != SW_OK) differs = 1;
  for (int k = SW_OPT_BREAKER_STRATEGY; !differs && k <= SW_OPT_BREAKER_PROBE_TIMEOUT_MS; k++) {
    double a, b;
    if (sw_options_get_double(have, (sw_option)k, &a) != SW_OK ||
        sw_options_get_double(want, (sw_option)k, &b) != SW_OK || a != b)
      differs = 1;
  }
  sw_options_free(have);
  return differs;
}

static ngx_int_t ngx_http_libsw_open_breaker(ngx_conf_t *cf, ngx_http_libsw_breaker_t *b) {
  const char *seg = (const char *)b->segment.data;
  sw_breaker *probe;
  int rc = sw_breaker_create(&probe, b->opts); /* the rule checked on the heap */
  sw_breaker_free(probe);
  if (rc == SW_OK) {
    rc = sw_breaker_open(&b->b, seg, b->opts, NGX_HTTP_LIBSW_CHECK_ONLY ? 0 : SW_SEGMENT_CREATE);
    if (rc == SW_ENOTFOUND && NGX_HTTP_LIBSW_CHECK_ONLY) return NGX_OK;
    if ((rc == SW_EGEOMETRY || (rc == SW_OK && ngx_http_libsw_breaker_differs(b->b, b->opts)))) {
      /* a breaker's rule is its creator's: new thresholds start it anew */
      if (NGX_HTTP_LIBSW_CHECK_ONLY) {
        ngx_log_error(NGX_LOG_NOTICE, cf->log, 0,
                      "libsw_breaker_zone \"%V\" (%s:%ui): new thresholds: the breaker in %s "
                      "starts anew (closed, empty windows) when this configuration loads",
                      &b->name, b->file, b->line, seg);
        sw_breaker_free(b->b);
        b->b = NULL;
        return NGX_OK;
      }
      sw_breaker_free(b->b);
      b->b = NULL;
      ngx_log_error(NGX_LOG_NOTICE, cf->log, 0,
                    "libsw_breaker_zone \"%V\": new thresholds: the breaker in %s starts anew",
                    &b->name, seg);
      rc = sw_breaker_open(&b->b, seg, b->opts, SW_SEGMENT_RESET);
    }
  }
  if (rc == SW_OK) rc = sw_breaker_set_listener(b->b, ngx_http_libsw_breaker_listener, b);
  if (rc != SW_OK) {
    ngx_log_error(NGX_LOG_EMERG, cf->log, 0, "libsw_breaker_zone \"%V\" (%s:%ui): %s: %s: %s%s",
                  &b->name, b->file, b->line, seg, sw_err_name(rc), sw_last_error(),
                  ngx_http_libsw_hint(rc));
    return NGX_ERROR;
  }
  return NGX_OK;
}

static void ngx_http_libsw_close_breaker(void *data) {
  ngx_http_libsw_breaker_t *b = data;
  sw_breaker_free(b->b);
  b->b = NULL;
}

static ngx_int_t ngx_http_libsw_init(ngx_conf_t *cf) {
  ngx_http_libsw_main_conf_t *mcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_libsw_module);
  ngx_http_core_main_conf_t *cmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_core_module);
  ngx_http_libsw_status_index = ngx_http_get_variable_index(cf, &ngx_http_libsw_status_name);
  if (ngx_http_libsw_status_index == NGX_ERROR) return NGX_ERROR;
  /* nginx -s reads the configuration to find the pid file: its signal (a
     quit, a stop) must not depend on the segments; the master that
     reloads checks them */
  if (ngx_process == NGX_PROCESS_SIGNALLER) return NGX_OK;

  ngx_http_libsw_zone_t **zones = mcf->zones.elts;
  for (ngx_uint_t i = 0; i < mcf->zones.nelts; i++) {
    ngx_pool_cleanup_t *cln = ngx_pool_cleanup_add(cf->pool, 0);
    if (cln == NULL) return NGX_ERROR;
    cln->handler = ngx_http_libsw_close_zone;
    cln->data = zones[i];
    if (ngx_http_libsw_open_zone(cf, zones[i]) != NGX_OK) return NGX_ERROR;
  }
  ngx_http_libsw_breaker_t **bs = mcf->breakers.elts;
  for (ngx_uint_t i = 0; i < mcf->breakers.nelts; i++) {
    ngx_pool_cleanup_t *cln = ngx_pool_cleanup_add(cf->pool, 0);
    if (cln == NULL) return NGX_ERROR;
    cln->handler = ngx_http_libsw_close_breaker;
    cln->data = bs[i];
    if (ngx_http_libsw_open_breaker(cf, bs[i]) != NGX_OK) return NGX_ERROR;
  }
  if (mcf->zones.nelts == 0 && mcf->breakers.nelts == 0) return NGX_OK;
  if (NGX_HTTP_LIBSW_CHECK_ONLY) return NGX_OK; /* no handle: nothing to enter */

  ngx_http_handler_pt *h = ngx_array_push(&cmcf->phases[NGX_HTTP_PREACCESS_PHASE].handlers);
  if (h == NULL) return NGX_ERROR;
  *h = ngx_http_libsw_handler;
  return NGX_OK;
}
