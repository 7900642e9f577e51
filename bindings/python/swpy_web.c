/* SPDX-License-Identifier: Apache-2.0 */
/* libsw.web's fast path in C (swpy_web.h), installed by swpy_web_install()
 * when libsw.web is imported (libsw/web/_outcome.py): the entry of a
 * request into one rule and its Outcome (_web_enter), the rate-limit
 * fields of an admitted request (_web_fields), the end of an Outcome's one
 * entry (Outcome.release, and its finalizer). */
#include <Python.h>
#include <math.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "swpy_web.h"

PyTypeObject *swpy_outcome_type;
/* Rule's slots: site, wl (window length, ms of its clock), period_ms,
 * limit_field, policy_id; Outcome's: rule, remaining, rules, _tok, _held. */
static Py_ssize_t swpy_r_site, swpy_r_wl, swpy_r_period, swpy_r_limit, swpy_r_limit_raw, swpy_r_policy_id;
Py_ssize_t swpy_u_remaining;
static Py_ssize_t swpy_u_rule, swpy_u_rules, swpy_u_tok, swpy_u_held;
static PyObject *swpy_h_remaining, *swpy_h_reset, *swpy_h_ratelimit, *swpy_b_remaining, *swpy_b_reset,
    *swpy_b_ratelimit, *swpy_s_release_failed;

PyObject *swpy_web_enter(PyObject *rule, PyObject *key, PyObject *rules) {
  int64_t site = swpy_slot_int(rule, swpy_r_site);
  if (site <= 0) return PyErr_Occurred() ? NULL : PyLong_FromLong(SW_ENULL);
  int64_t tok = swpy_kenter_obj(site, 0, 0, key, 1);
  if (tok <= 0) return PyLong_FromLongLong(tok);
  PyObject *t = PyLong_FromLongLong(tok), *rem = PyLong_FromLongLong(swpy_remaining());
  PyObject *o = t != NULL && rem != NULL ? swpy_outcome_type->tp_alloc(swpy_outcome_type, 0) : NULL;
  if (o == NULL) {
    Py_XDECREF(t);
    Py_XDECREF(rem);
    swpy_release_err(tok);
    return NULL;
  }
  swpy_slot_set(o, swpy_u_rule, swpy_ref(rule));
  swpy_slot_set(o, swpy_u_remaining, rem);
  swpy_slot_set(o, swpy_u_rules, swpy_ref(rules));
  swpy_slot_set(o, swpy_u_tok, t);
  swpy_slot_set(o, swpy_u_held, swpy_ref(Py_None));
  return o;
}

/* _web_enter(rule, key, rules): an Outcome on a plain pass, else the entry's
 * result (int). */
static PyObject *swpy_f_web_enter(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
  (void)mod;
  if (nargs != 3) {
    PyErr_SetString(PyExc_TypeError, "_web_enter(rule, key, rules)");
    return NULL;
  }
  return swpy_web_enter(args[0], args[1], args[2]);
}

/* "00" to "99": two digits a division (swpy_digits). */
static const char swpy_pairs[] = "0001020304050607080910111213141516171819"
                                 "2021222324252627282930313233343536373839"
                                 "4041424344454647484950515253545556575859"
                                 "6061626364656667686970717273747576777879"
                                 "8081828384858687888990919293949596979899";

/* Append the decimal digits of v to buf at *n (buf has room for 20 more). */
static void swpy_digits(char *buf, size_t *n, int64_t v) {
  char tmp[24];
  size_t k = sizeof tmp;
  uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
  while (u >= 100) {
    const char *d = swpy_pairs + 2 * (u % 100);
    u /= 100;
    tmp[--k] = d[1];
    tmp[--k] = d[0];
  }
  if (u >= 10) {
    tmp[--k] = swpy_pairs[2 * u + 1];
    tmp[--k] = swpy_pairs[2 * u];
  } else {
    tmp[--k] = (char)('0' + u);
  }
  if (v < 0) buf[(*n)++] = '-';
  memcpy(buf + *n, tmp + k, sizeof tmp - k);
  *n += sizeof tmp - k;
}

/* The decimal str (raw: bytes) of v (PyUnicode_FromFormat costs a printf). */
static PyObject *swpy_decimal(int64_t v, int raw) {
  char buf[24];
  size_t n = 0;
  swpy_digits(buf, &n, v);
  return raw ? PyBytes_FromStringAndSize(buf, (Py_ssize_t)n)
             : PyUnicode_FromKindAndData(PyUnicode_1BYTE_KIND, buf, (Py_ssize_t)n);
}

/* policy_id + ";r=" + remaining + ";t=" + reset: RateLimit's value. */
static PyObject *swpy_ratelimit_value(PyObject *policy_id, int64_t remaining, int64_t reset, int raw) {
  Py_ssize_t plen;
  const char *p = PyUnicode_AsUTF8AndSize(policy_id, &plen);
  if (p == NULL) return NULL;
  char buf[128];
  if (plen > (Py_ssize_t)sizeof buf - 48) return PyUnicode_FromFormat("%U;r=%lld;t=%lld", policy_id,
                                                                     (long long)remaining, (long long)reset);
  size_t n = (size_t)plen;
  memcpy(buf, p, n);
  memcpy(buf + n, ";r=", 3);
  n += 3;
  swpy_digits(buf, &n, remaining);
  memcpy(buf + n, ";t=", 3);
  n += 3;
  swpy_digits(buf, &n, reset);
  return raw ? PyBytes_FromStringAndSize(buf, (Py_ssize_t)n) : PyUnicode_DecodeUTF8(buf, (Py_ssize_t)n, NULL);
}

/* (name, value) with value a new reference (stolen), or NULL. */
static PyObject *swpy_field(PyObject *name, PyObject *value) {
  if (value == NULL) return NULL;
  PyObject *f = PyTuple_Pack(2, name, value);
  Py_DECREF(value);
  return f;
}

/* The fields of an admitted request whose nearest rule is rule: a list, or
 * None when the rule's clock is a custom one (Python computes them).
 * style: 1 x, 2 ietf, 3 both; policy: the request's RateLimit-Policy field
 * (a (name, value) pair). */
PyObject *swpy_web_fields(PyObject *rule, int64_t style, int64_t remaining, PyObject *policy, int raw) {
  int64_t site = swpy_slot_int(rule, swpy_r_site), wl = swpy_slot_int(rule, swpy_r_wl);
  int64_t period = swpy_slot_int(rule, swpy_r_period);
  if (PyErr_Occurred()) return NULL;
  int64_t t = site > 0 ? swpy_know(site) : SWPY_CLOCKED;
  if (t == SWPY_CLOCKED || wl <= 0) Py_RETURN_NONE;
  /* everything counted now has slid out at the end of the current window
   * plus the interval (1000 ms of the rule's clock, period_ms real) */
  double reset = (double)((t - t % wl) + 1000 - t) * (double)period / 1e6;
  int64_t reset_s = (int64_t)ceil(reset - 1e-9);
  if (reset_s < 0) reset_s = 0;
  if (remaining < 0) remaining = 0;
  PyObject *f[5] = {NULL, NULL, NULL, NULL, NULL};
  Py_ssize_t nf = 0;
  int ok = 1;
  if (style & SWPY_STYLE_X) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double at = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9 + (double)reset_s;
    PyObject *lim = *swpy_slot(rule, raw ? swpy_r_limit_raw : swpy_r_limit); /* ("X-RateLimit-Limit", N) */
    f[nf++] = lim != NULL ? swpy_ref(lim) : NULL;
    f[nf++] = swpy_field(raw ? swpy_b_remaining : swpy_h_remaining, swpy_decimal(remaining, raw));
    f[nf++] = swpy_field(raw ? swpy_b_reset : swpy_h_reset, swpy_decimal((int64_t)ceil(at), raw));
  }
  if (style & SWPY_STYLE_IETF) {
    PyObject *pid = *swpy_slot(rule, swpy_r_policy_id);
    f[nf++] = swpy_ref(policy); /* ("RateLimit-Policy", the request's rates) */
    f[nf++] = pid != NULL ? swpy_field(raw ? swpy_b_ratelimit : swpy_h_ratelimit,
                                       swpy_ratelimit_value(pid, remaining, reset_s, raw))
                          : NULL;
  }
  PyObject *out = PyList_New(nf);
  for (Py_ssize_t i = 0; i < nf; i++) {
    if (f[i] == NULL) ok = 0;
    if (out != NULL)
      PyList_SET_ITEM(out, i, f[i] != NULL ? f[i] : swpy_ref(Py_None));
    else
      Py_XDECREF(f[i]);
  }
  if (out != NULL && !ok) {
    Py_CLEAR(out);
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_AttributeError, "a Rule without its fields");
  }
  return out;
}

/* _web_fields(rule, style, remaining, policy, raw=False): raw, the fields
 * as an ASGI server takes them (lower-case names, bytes). */
static PyObject *swpy_f_web_fields(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
  (void)mod;
  if (nargs != 4 && nargs != 5) {
    PyErr_SetString(PyExc_TypeError, "_web_fields(rule, style, remaining, policy, raw=False)");
    return NULL;
  }
  int64_t style = swpy_int_arg(args[1]), remaining = swpy_int_arg(args[2]);
  int raw = nargs == 5 ? PyObject_IsTrue(args[4]) : 0;
  if (PyErr_Occurred() || raw < 0) return NULL;
  return swpy_web_fields(args[0], style, remaining, args[3], raw);
}

/* The end of an Outcome's one entry (once): 0, or -1 with an exception of
 * its _release_failed (a failure is logged there, not raised). */
int swpy_outcome_end(PyObject *self, int err) {
  int64_t tok = swpy_slot_int(self, swpy_u_tok);
  if (tok <= 0) return PyErr_Occurred() ? -1 : 0;
  PyObject *zero = PyLong_FromLong(0);
  if (zero == NULL) return -1;
  swpy_slot_set(self, swpy_u_tok, zero);
  int64_t rc = err ? swpy_release_err(tok) : swpy_release_ok(tok);
  if (rc >= 0 || rc == SWPY_STALE) return 0;
  PyObject *c = PyLong_FromLongLong(rc);
  PyObject *r = c != NULL ? PyObject_CallMethodObjArgs(self, swpy_s_release_failed, c, NULL) : NULL;
  Py_XDECREF(c);
  Py_XDECREF(r);
  return r != NULL ? 0 : -1;
}

/* Outcome.release(error=False, response=None): the end of its one entry (a
 * second call does nothing); a failure goes to _release_failed(rc). */
static PyObject *swpy_m_outcome_release(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                        PyObject *kwnames) {
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  if (nargs + nkw > 2) {
    PyErr_SetString(PyExc_TypeError, "release(error=False, response=None)");
    return NULL;
  }
  PyObject *error = nargs > 0 ? args[0] : NULL;
  for (Py_ssize_t i = 0; i < nkw; i++) {
    const char *k = PyUnicode_AsUTF8(PyTuple_GET_ITEM(kwnames, i));
    if (k == NULL) return NULL;
    if (strcmp(k, "error") == 0)
      error = args[nargs + i];
    else if (strcmp(k, "response") != 0) {
      PyErr_Format(PyExc_TypeError, "release() got an unexpected keyword argument '%s'", k);
      return NULL;
    }
  }
  int err = error != NULL ? PyObject_IsTrue(error) : 0;
  if (err < 0 || swpy_outcome_end(self, err) < 0) return NULL;
  Py_RETURN_NONE;
}

void swpy_outcome_end_raising(PyObject *self, int err) {
  PyObject *et, *ev, *tb;
  PyErr_Fetch(&et, &ev, &tb);
  if (swpy_outcome_end(self, err) < 0) PyErr_Clear();
  PyErr_Restore(et, ev, tb);
}

/* tp_finalize of the Outcome classes: an Outcome dropped unreleased (a
 * server that never closed the response) gives its tokens' records back;
 * its entries stay in flight. */
static void swpy_outcome_finalize(PyObject *self) {
  PyObject *et, *ev, *tb;
  PyErr_Fetch(&et, &ev, &tb);
  PyObject *tok = *swpy_slot(self, swpy_u_tok), *held = *swpy_slot(self, swpy_u_held);
  if (tok != NULL && PyLong_CheckExact(tok)) {
    int64_t t = PyLong_AsLongLong(tok);
    if (t > 0) swpy_abandon(t);
  }
  if (held != NULL && PyList_Check(held)) {
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(held); i++) {
      PyObject *h = PyList_GET_ITEM(held, i);
      if (PyTuple_Check(h) && PyTuple_GET_SIZE(h) == 2 && PyLong_CheckExact(PyTuple_GET_ITEM(h, 1))) {
        int64_t t = PyLong_AsLongLong(PyTuple_GET_ITEM(h, 1));
        if (t > 0) swpy_abandon(t);
      }
    }
  }
  PyErr_Clear();
  PyErr_Restore(et, ev, tb);
}

static PyMethodDef swpy_web_functions[] = {
    {"_web_enter", (PyCFunction)(void (*)(void))swpy_f_web_enter, METH_FASTCALL,
     "_web_enter(rule, key, rules, /)\n--\n\nAn Outcome of a pass at once, else the entry's result."},
    {"_web_fields", (PyCFunction)(void (*)(void))swpy_f_web_fields, METH_FASTCALL,
     "_web_fields(rule, style, remaining, policy, /)\n--\n\nThe fields of an admitted request."},
    {"_asgi_call", (PyCFunction)(void (*)(void))swpy_f_asgi_call, METH_FASTCALL,
     "_asgi_call(awaitable, outcome, /)\n--\n\nThe application's awaitable, ending the outcome's entry when "
     "done."},
    {"_asgi_send", (PyCFunction)(void (*)(void))swpy_f_asgi_send, METH_FASTCALL,
     "_asgi_send(send, wire, /)\n--\n\nAn ASGI send adding wire's fields to the response's start."},
    {"_web_install_wsgi", (PyCFunction)(void (*)(void))swpy_f_install_wsgi, METH_FASTCALL,
     "_web_install_wsgi(middleware_class, plan_class, /)\n--\n\nThe WSGI middleware's __call__ in C."},
    {"_web_install_asgi", (PyCFunction)(void (*)(void))swpy_f_install_asgi, METH_FASTCALL,
     "_web_install_asgi(middleware_class, plan_class, /)\n--\n\nThe ASGI middleware's calls in C."},
    {"_flask_before", (PyCFunction)(void (*)(void))swpy_f_flask_before, METH_FASTCALL,
     "_flask_before(extension, request, plans, /)\n--\n\nThe Flask extension's before-request hook."},
    {"_flask_wsgi", (PyCFunction)(void (*)(void))swpy_f_flask_wsgi, METH_FASTCALL,
     "_flask_wsgi(wsgi_app, end_request, /)\n--\n\nFlask's wsgi_app with the extension's start_response "
     "and end."},
    {"_web_start", (PyCFunction)(void (*)(void))swpy_f_web_start, METH_FASTCALL,
     "_web_start(start_response, extra, status, headers, exc_info=None, /)\n--\n\n"
     "start_response with extra's fields that headers does not set."},
    {NULL, NULL, 0, NULL},
};

static PyMethodDef swpy_outcome_release_def = {
    "release", (PyCFunction)(void (*)(void))swpy_m_outcome_release, METH_FASTCALL | METH_KEYWORDS,
    "release($self, /, error=False, response=None)\n--\n\nEnd the request's entries (once; later "
    "calls do nothing): response times and successes, an exception with error=True."};


int swpy_web_install(void) {
  PyGILState_STATE g = PyGILState_Ensure();
  int rc = -1;
  PyObject *mod = NULL, *rules = NULL, *outcome = NULL, *rule = NULL, *d = NULL;
  if (!(mod = PyImport_ImportModule("libsw.web._outcome")) ||
      !(rules = PyImport_ImportModule("libsw.web._rules")) ||
      !(outcome = PyObject_GetAttrString(mod, "Outcome")) || !(rule = PyObject_GetAttrString(rules, "Rule")))
    goto out;
  if ((swpy_r_site = swpy_slot_offset(rule, "site")) < 0 || (swpy_r_wl = swpy_slot_offset(rule, "wl")) < 0 ||
      (swpy_r_period = swpy_slot_offset(rule, "period_ms")) < 0 ||
      (swpy_r_limit = swpy_slot_offset(rule, "limit_field")) < 0 ||
      (swpy_r_limit_raw = swpy_slot_offset(rule, "limit_raw")) < 0 ||
      (swpy_r_policy_id = swpy_slot_offset(rule, "policy_id")) < 0 ||
      (swpy_u_rule = swpy_slot_offset(outcome, "rule")) < 0 ||
      (swpy_u_remaining = swpy_slot_offset(outcome, "remaining")) < 0 ||
      (swpy_u_rules = swpy_slot_offset(outcome, "rules")) < 0 ||
      (swpy_u_tok = swpy_slot_offset(outcome, "_tok")) < 0 ||
      (swpy_u_held = swpy_slot_offset(outcome, "_held")) < 0)
    goto out;
  if (swpy_h_remaining == NULL &&
      (!(swpy_h_remaining = PyUnicode_InternFromString("X-RateLimit-Remaining")) ||
       !(swpy_h_reset = PyUnicode_InternFromString("X-RateLimit-Reset")) ||
       !(swpy_h_ratelimit = PyUnicode_InternFromString("RateLimit")) ||
       !(swpy_b_remaining = PyBytes_FromString("x-ratelimit-remaining")) ||
       !(swpy_b_reset = PyBytes_FromString("x-ratelimit-reset")) ||
       !(swpy_b_ratelimit = PyBytes_FromString("ratelimit")) ||
       !(swpy_s_release_failed = PyUnicode_InternFromString("_release_failed"))))
    goto out;
  if (swpy_asgi_init() < 0) goto out;
  Py_XSETREF(swpy_outcome_type, (PyTypeObject *)swpy_ref(outcome));
  if (!(d = PyDescr_NewMethod((PyTypeObject *)outcome, &swpy_outcome_release_def)) ||
      PyObject_SetAttrString(outcome, "release", d) < 0 || swpy_set_finalizer(outcome, swpy_outcome_finalize) < 0)
    goto out;
  for (PyMethodDef *m = swpy_web_functions; m->ml_name != NULL; m++) {
    PyObject *f = PyCFunction_NewEx(m, NULL, NULL);
    if (f == NULL || PyObject_SetAttrString(mod, m->ml_name, f) < 0) {
      Py_XDECREF(f);
      goto out;
    }
    Py_DECREF(f);
  }
  rc = 0;
out:
  if (rc < 0) PyErr_Print();
  Py_XDECREF(d);
  Py_XDECREF(mod);
  Py_XDECREF(rules);
  Py_XDECREF(outcome);
  Py_XDECREF(rule);
  PyGILState_Release(g);
  return rc;
}
