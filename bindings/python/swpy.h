/* SPDX-License-Identifier: Apache-2.0 */
/* The Python binding's glue (swpy.c): the calls of the binding's hot paths,
 * each taking one integer where it can (a single argument is converted
 * without building an argument tuple), with the clock reads, the response
 * times and the records of entries in flight kept in C. build_libsw.py
 * declares the same functions to CFFI, whose calls release the GIL; the
 * fast paths of every form call them from swpy_py.c with the GIL held. No
 * statistics logic here: these call libsw's public API only.
 *
 * Times: without a custom clock an entry's start (t0) is sw_now_ns() (the
 * duration clock) and entries call sw_limiter_entry (which places them on
 * the window clock and paces on the duration clock); the *_at twins take the
 * time of a clock= callable in milliseconds, and t0 is then in ms too. A
 * response time is (end - t0) in whole milliseconds, clamped to
 * 0..INT32_MAX. */
#ifndef SWPY_H
#define SWPY_H

#include <stddef.h>
#include <stdint.h>

#include <sw/sw.h>

/* Results besides a token, an entry time, a remaining count and the
 * negative sw_err codes (-1..-99). */
#define SWPY_NOT_PASS (-1000)   /* not a plain pass: the decision is in swpy_decision() */
#define SWPY_NO_CONTEXT (-1001) /* this thread has no Python context yet: make one, retry */
#define SWPY_NO_ENTRY (-1002)   /* a `with` exit without an entry of this thread or task */
#define SWPY_STALE (-1003)      /* a token already released (by another thread) */
#define SWPY_CLOCKED (-1004)    /* a site of a limiter with a custom clock: use the *_at call */
#define SWPY_SLOW (-1005)       /* nothing entered: a key the record cannot keep (see below) */

/* Key bytes a keyed token's record keeps: longer keys take Python's path. */
#define SWPY_KEY_INLINE 256

/* ---- plain calls on a handle (slow paths, custom clocks, n != 1) ---- */

/* Enter: the entry's t0 (>= 0) on a PASS verdict, SWPY_NOT_PASS, or an error. */
int64_t swpy_enter(sw_limiter *l, int64_t n, uint32_t flags);
int64_t swpy_enter_at(sw_limiter *l, int64_t t, int64_t n, uint32_t flags);
/* Exit an entry that started at t0. */
int swpy_exit(sw_limiter *l, int64_t t0, int64_t n, uint32_t flags);
int swpy_exit_at(sw_limiter *l, int64_t t, int64_t t0, int64_t n, uint32_t flags);
/* The calling thread's last decision (of any swpy entry). */
sw_decision *swpy_decision(void);
int64_t swpy_remaining(void);
/* 1 when called with the GIL held (the tests check that calls release it). */
int swpy_gil_held(void);

/* ---- sites: a limiter and its entry flags, named by a small integer ---- */
/* A new site (> 0), or SW_ENOMEM. clocked: the limiter has a custom clock,
 * whose time the *_at calls take. */
int64_t swpy_site_new(sw_limiter *l, uint32_t flags, int clocked);
/* After this, entries through the site fail with SW_ENULL (a closed limiter). */
void swpy_site_clear(int64_t site);
/* The site's number may name another site after this. */
void swpy_site_free(int64_t site);

/* ---- tokens: an admitted entry as one integer (> 0) ----
 * A token names a record of the entry (limiter, t0, n, remaining) and its
 * generation, below 2^30: a token's exit ends the entry once; a second exit
 * of the same token, from any thread, returns SWPY_STALE and does nothing.
 * Records are kept per thread for reuse and never freed. */

/* The decorator's entry, one unit: a token on a PASS verdict (dry run
 * included), SWPY_NOT_PASS, or an error (SW_ENULL once the site is cleared). */
int64_t swpy_enter_site(int64_t site);
/* A permit's entry: a token on a plain PASS (not a dry run's would-block),
 * whose record keeps the decision's remaining; SWPY_NOT_PASS, or an error. */
int64_t swpy_acquire_site(int64_t site);
int64_t swpy_acquire_site_n(int64_t site, int64_t n);
/* A token for an entry of l a slow path admitted at t0. */
int64_t swpy_token(sw_limiter *l, int64_t t0, int64_t n, int64_t remaining);
/* End the entry of a decorator's token now (with an exception): 0, or an
 * error of the exit. The token must be in flight (no second exit). */
int swpy_exit_ok(int64_t token);
int swpy_exit_err(int64_t token);
/* The same for a permit: the remaining count of its entry (>= 0),
 * SWPY_STALE, or an error of the exit; at t of a custom clock, with flags
 * (SW_EXIT_ERROR). */
int64_t swpy_release_ok(int64_t token);
int64_t swpy_release_err(int64_t token);
int64_t swpy_exit_token_at(int64_t token, int64_t t, uint32_t flags);
/* The remaining count of a token's entry, or -1 once its record is reused. */
int64_t swpy_token_remaining(int64_t token);
/* Forget a token whose entry will never end (its permit was dropped
 * unreleased): the entry stays in flight, its record is reused. 0 or
 * SWPY_STALE. */
int64_t swpy_abandon(int64_t token);
/* All or nothing (sw_limiter_cancel, sw_keyed_cancel): give back what the
 * token's entry counted, which ends it (no exit follows): 0, SWPY_STALE, or
 * an error. SW_ENOTSUP while libsw has no cancel: the entry is then ended
 * by a plain exit (it stays counted). t: a custom clock's time, else -1. */
int64_t swpy_cancel(int64_t token, int64_t t);

/* ---- `with`: entries kept per thread, matched by site and Python context ----
 * An entry records the context (contextvars.Context) current in the calling
 * thread: an asyncio task's, a greenlet's, or the thread's own. The exit
 * ends the latest entry of the same site and context, so `with` and `async
 * with` nest and interleave across threads and tasks as contextvars would. */

/* Enter the site's limiter with one unit and record it: 0, SWPY_NOT_PASS,
 * SWPY_NO_CONTEXT or SWPY_CLOCKED (nothing entered), or an error. */
int64_t swpy_with_enter(int64_t site);
int64_t swpy_with_enter_at(int64_t site, int64_t t);
/* Record an entry of l (the site's) a slow path admitted at t0: 0,
 * SWPY_NO_CONTEXT or SW_ENOMEM. */
int64_t swpy_with_push(int64_t site, sw_limiter *l, int64_t t0);
/* End the latest entry of the site in this context: 0, SWPY_NO_ENTRY,
 * SWPY_CLOCKED (nothing done), or an error. */
int64_t swpy_with_exit(int64_t site);
int64_t swpy_with_exit_err(int64_t site);
int64_t swpy_with_exit_at(int64_t site, int64_t t, uint32_t flags);

/* ---- the fast paths as Python methods and functions (swpy_py.c) ---- */
/* Install RateLimiter's __enter__, __exit__, __aenter__, __aexit__ and
 * try_acquire, Permit's release, and the decorator's _decorator_enter,
 * _decorator_exit_ok and _decorator_exit_err in libsw._limiter: 0, or -1
 * (the error printed). */
int swpy_install(void);
/* Install libsw.web's fast path (swpy_web.c): the functions _web_enter,
 * _web_fields and _web_start of libsw.web._outcome, and Outcome.release:
 * 0, or -1 (the error printed). */
int swpy_web_install(void);

/* ---- keyed tables: sites and tokens as above ----
 * A keyed site names a table and its clock: period_ms 1000 and epoch 0,
 * libsw's; another period, a clock whose 1000 ms are period_ms of libsw's,
 * from epoch (libsw.web's rules of other periods); 0, a custom clock, whose
 * time the *_at calls take. A token's record keeps the key (1 to
 * SWPY_KEY_INLINE bytes; SWPY_SLOW, nothing entered, otherwise) for the
 * exit; release and cancel it as any token. */
int64_t swpy_ksite_new(sw_keyed *k, int64_t period_ms, int64_t epoch);
/* Enter key with n units: a token on a plain pass; SWPY_NOT_PASS when the
 * decision (swpy_decision()) is not one (a wait, a block, a dry run's
 * would-block, a new key that found no place), SWPY_SLOW, or an error. */
int64_t swpy_kacquire(int64_t site, const char *key, size_t len, int64_t n);
int64_t swpy_kacquire_at(int64_t site, int64_t t, const char *key, size_t len, int64_t n);
/* A token for an entry of key a slow path admitted at t0 with decision d. */
int64_t swpy_ktoken(int64_t site, const char *key, size_t len, int64_t t0, int64_t n,
                    int64_t remaining, const sw_decision *d);
/* The site's clock now (ms), or SWPY_CLOCKED for a custom clock. */
int64_t swpy_know(int64_t site);

#endif
