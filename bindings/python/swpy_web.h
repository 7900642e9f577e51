/* SPDX-License-Identifier: Apache-2.0 */
/* libsw.web's fast path in C: what its three files share.
 *
 *   swpy_web.c   the entry of a request into one rule (its Outcome), the
 *                rate-limit fields of an admitted request, Outcome.release,
 *                and swpy_web_install() (libsw/web/_outcome.py calls it)
 *   swpy_wsgi.c  the WSGI middleware's __call__, start_response, response
 *   swpy_asgi.c  the ASGI middleware's call, send and awaitable
 *   swpy_flask.c the Flask extension's before-request hook and wsgi_app
 *
 * The Python classes' attributes are slots, read at their offsets; the
 * rules here are "simple" (libsw/web/_rules.py): one unit, libsw's clock or
 * a scaled one, no deduct_when. Everything else is libsw.web's Python. */
#ifndef SWPY_WEB_H
#define SWPY_WEB_H

#include "swpy_pyutil.h"

#define SWPY_STYLE_X 1    /* X-RateLimit-* */
#define SWPY_STYLE_IETF 2 /* RateLimit-Policy, RateLimit */

/* Outcome's slot "remaining" and class (set by swpy_web_install). */
extern Py_ssize_t swpy_u_remaining;
extern PyTypeObject *swpy_outcome_type;

/* The entry of key into rule's table: the request's Outcome on a plain
 * pass, else the entry's result (an int); NULL with an exception. */
PyObject *swpy_web_enter(PyObject *rule, PyObject *key, PyObject *rules);
/* The fields of an admitted request whose nearest rule is rule: a list of
 * (name, value) pairs (raw: lower-case bytes, as ASGI takes them), or None
 * for a rule on a custom clock; NULL with an exception. policy: the
 * request's RateLimit-Policy field. style: SWPY_STYLE_* bits. */
PyObject *swpy_web_fields(PyObject *rule, int64_t style, int64_t remaining, PyObject *policy, int raw);
/* The end of an Outcome's one entry (once): 0, or -1 with an exception. */
int swpy_outcome_end(PyObject *self, int err);
/* The same, keeping the current exception (if any): what the end raises
 * is dropped. */
void swpy_outcome_end_raising(PyObject *self, int err);

/* swpy_wsgi.c: _web_start(start_response, extra, status, headers,
 * exc_info=None) and _web_install_wsgi(middleware_class, plan_class). */
PyObject *swpy_f_web_start(PyObject *mod, PyObject *const *args, Py_ssize_t nargs);
PyObject *swpy_f_install_wsgi(PyObject *mod, PyObject *const *args, Py_ssize_t nargs);
/* ... and what swpy_flask.c uses of it: Plan's class and slots rules,
 * single, policy_field, needs_response (set by _web_install_wsgi); a
 * start_response adding extra's fields (a list, or an environ's
 * "libsw.fields"); a simple rule's key read from an environ, with its
 * prefix (NULL without an exception: the rule's wsgi(environ) gives it). */
extern PyTypeObject *swpy_plan_type;
extern Py_ssize_t swpy_p_rules, swpy_p_single, swpy_p_policy, swpy_p_needs;
PyObject *swpy_start_new(PyObject *sr, PyObject *extra);
PyObject *swpy_wsgi_key(PyObject *rule, PyObject *environ);

/* swpy_flask.c: _flask_before(extension, request, plans) and
 * _flask_wsgi(wsgi_app, end_request). */
PyObject *swpy_f_flask_before(PyObject *mod, PyObject *const *args, Py_ssize_t nargs);
PyObject *swpy_f_flask_wsgi(PyObject *mod, PyObject *const *args, Py_ssize_t nargs);

/* swpy_asgi.c: _asgi_send(send, wire), _asgi_call(awaitable, outcome),
 * _web_install_asgi(middleware_class, plan_class), and its types and names
 * made once: 0 or -1. */
PyObject *swpy_f_install_asgi(PyObject *mod, PyObject *const *args, Py_ssize_t nargs);
PyObject *swpy_f_asgi_send(PyObject *mod, PyObject *const *args, Py_ssize_t nargs);
PyObject *swpy_f_asgi_call(PyObject *mod, PyObject *const *args, Py_ssize_t nargs);
int swpy_asgi_init(void);

#endif
