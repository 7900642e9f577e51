/* SPDX-License-Identifier: Apache-2.0 */
/* libsw.web's fast path in C, installed by swpy_web_install() when
 * libsw.web is imported (libsw/web/_outcome.py): a request admitted at once
 * by the one rule of its route costs the middleware a few C calls and no
 * Python frame of its own beyond the adapter's.
 *
 *   _web_enter(rule, key, rules)  the entry of key into rule's table: the
 *                                 request's Outcome, or the entry's result
 *                                 (an int: the adapter's Python path goes on)
 *   _web_fields(rule, style, remaining, policy)
 *                                 the rate-limit fields of an admitted request
 *   _web_start(start_response, extra, status, headers, exc_info=None)
 *                                 a WSGI start_response adding extra's fields
 *                                 that headers does not set (with
 *                                 functools.partial: no Python frame)
 *   Outcome.release               the end of an Outcome's one entry
 *
 * The classes' attributes are slots, read at their offsets; rules here are
 * "simple" (libsw/web/_rules.py): one unit, libsw's clock or a scaled one,
 * no deduct_when. The rest is libsw.web's Python. */
#include <Python.h>
#include <math.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "swpy_pyutil.h"

static PyTypeObject *swpy_outcome_type;
/* Rule's slots: site, wl (window length, ms of its clock), period_ms,
 * limit_field, policy_id; Outcome's: rule, remaining, rules, _tok, _held. */
static Py_ssize_t swpy_r_site, swpy_r_wl, swpy_r_period, swpy_r_limit, swpy_r_limit_raw, swpy_r_policy_id;
static Py_ssize_t swpy_u_rule, swpy_u_remaining, swpy_u_rules, swpy_u_tok, swpy_u_held;
static PyObject *swpy_h_remaining, *swpy_h_reset, *swpy_h_ratelimit, *swpy_b_remaining, *swpy_b_reset,
    *swpy_b_ratelimit,
    *swpy_s_release_failed;

static int swpy_outcome_end(PyObject *self, int err);

#define SWPY_STYLE_X 1
#define SWPY_STYLE_IETF 2

/* The entry of key into rule's table: the request's Outcome on a plain
 * pass, else the entry's result (an int); NULL with an exception. */
static PyObject *swpy_web_enter(PyObject *rule, PyObject *key, PyObject *rules) {
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

/* Append the decimal digits of v to buf at *n (buf has room for 20 more). */
static void swpy_digits(char *buf, size_t *n, int64_t v) {
  char tmp[24];
  size_t k = 0;
  uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
  do {
    tmp[k++] = (char)('0' + u % 10);
    u /= 10;
  } while (u != 0);
  if (v < 0) buf[(*n)++] = '-';
  while (k > 0) buf[(*n)++] = tmp[--k];
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
static PyObject *swpy_web_fields(PyObject *rule, int64_t style, int64_t remaining, PyObject *policy, int raw) {
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

/* ------------------------------------------------------------- ASGI */

/* An ASGI send that adds the fields of wire (bytes pairs) the
 * response's start does not set: a plain callable returning send's
 * awaitable (no coroutine of its own). */
typedef struct {
  PyObject_HEAD PyObject *send;
  PyObject *wire;
  vectorcallfunc vectorcall;
} swpy_asend;

static PyTypeObject *swpy_asend_type;
static PyObject *swpy_k_type, *swpy_k_headers, *swpy_v_start;

/* Whether a list of (bytes, bytes) pairs sets name (lower-case bytes). */
static int swpy_sets_raw(PyObject *headers, Py_ssize_t count, PyObject *name) {
  const char *n = PyBytes_AS_STRING(name);
  Py_ssize_t nlen = PyBytes_GET_SIZE(name);
  for (Py_ssize_t i = 0; i < count; i++) {
    PyObject *h = PyList_GET_ITEM(headers, i), *k;
    if (!PyTuple_Check(h) || PyTuple_GET_SIZE(h) < 1 || !PyBytes_Check(k = PyTuple_GET_ITEM(h, 0))) continue;
    if (PyBytes_GET_SIZE(k) == nlen && strncasecmp(PyBytes_AS_STRING(k), n, (size_t)nlen) == 0) return 1;
  }
  return 0;
}

static PyObject *swpy_asend_vcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
  swpy_asend *a = (swpy_asend *)self;
  if (PyVectorcall_NARGS(nargsf) != 1 || kwnames != NULL) {
    PyErr_SetString(PyExc_TypeError, "send(message)");
    return NULL;
  }
  PyObject *msg = args[0];
  PyObject *type = PyDict_Check(msg) ? PyDict_GetItemWithError(msg, swpy_k_type) : NULL;
  if (type == NULL && PyErr_Occurred()) return NULL;
  int start = type != NULL && PyUnicode_Check(type) ? PyUnicode_Compare(type, swpy_v_start) == 0 : 0;
  if (!start || !PyList_Check(a->wire) || PyList_GET_SIZE(a->wire) == 0) return PyObject_CallOneArg(a->send, msg);
  PyObject *have = PyDict_GetItemWithError(msg, swpy_k_headers);
  if (have == NULL && PyErr_Occurred()) return NULL;
  PyObject *headers = have != NULL ? PySequence_List(have) : PyList_New(0);
  PyObject *copy = headers != NULL ? PyDict_Copy(msg) : NULL;
  if (copy == NULL) {
    Py_XDECREF(headers);
    return NULL;
  }
  Py_ssize_t n = PyList_GET_SIZE(headers);
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(a->wire); i++) {
    PyObject *f = PyList_GET_ITEM(a->wire, i);
    if (!PyTuple_Check(f) || PyTuple_GET_SIZE(f) != 2 || !PyBytes_Check(PyTuple_GET_ITEM(f, 0))) continue;
    if (!swpy_sets_raw(headers, n, PyTuple_GET_ITEM(f, 0)) && PyList_Append(headers, f) < 0) goto fail;
  }
  if (PyDict_SetItem(copy, swpy_k_headers, headers) < 0) goto fail;
  Py_DECREF(headers);
  PyObject *r = PyObject_CallOneArg(a->send, copy);
  Py_DECREF(copy);
  return r;
fail:
  Py_DECREF(headers);
  Py_DECREF(copy);
  return NULL;
}

static int swpy_asend_traverse(PyObject *self, visitproc visit, void *arg) {
  Py_VISIT(((swpy_asend *)self)->send);
  Py_VISIT(((swpy_asend *)self)->wire);
  Py_VISIT(Py_TYPE(self));
  return 0;
}

static int swpy_asend_clear(PyObject *self) {
  Py_CLEAR(((swpy_asend *)self)->send);
  Py_CLEAR(((swpy_asend *)self)->wire);
  return 0;
}

static void swpy_asend_dealloc(PyObject *self) {
  PyTypeObject *tp = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  swpy_asend_clear(self);
  PyObject_GC_Del(self);
  Py_DECREF(tp);
}

static PyMemberDef swpy_asend_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(swpy_asend, vectorcall), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot swpy_asend_slots[] = {
    {Py_tp_call, (void *)PyVectorcall_Call},
    {Py_tp_members, (void *)swpy_asend_members},
    {Py_tp_traverse, (void *)swpy_asend_traverse},
    {Py_tp_clear, (void *)swpy_asend_clear},
    {Py_tp_dealloc, (void *)swpy_asend_dealloc},
    {Py_tp_doc, (void *)"An ASGI send adding libsw.web's rate-limit fields."},
    {0, NULL},
};

static PyType_Spec swpy_asend_spec = {"libsw._libsw.AsgiSend", sizeof(swpy_asend), 0,
                                      Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
                                      swpy_asend_slots};


/* The application's awaitable with the request's entry ended when it is
 * done (returned, raised, or closed unfinished): what a coroutine of the
 * middleware would do around `await app(...)`, without one. It delegates
 * send, throw and close to the application's iterator. */
typedef struct {
  PyObject_HEAD PyObject *it; /* the application's awaitable's iterator; NULL before the first use */
  PyObject *aw;               /* the application's awaitable, until then */
  PyObject *out;              /* the Outcome, until it is released */
} swpy_await;

static PyTypeObject *swpy_await_type;

/* Release the Outcome once (with an exception: error), keeping the
 * current exception. */
static void swpy_await_end(swpy_await *a, int error) {
  PyObject *out = a->out;
  if (out == NULL) return;
  a->out = NULL;
  PyObject *et, *ev, *tb;
  PyErr_Fetch(&et, &ev, &tb);
  if (swpy_outcome_end(out, error) < 0) PyErr_Clear();
  PyErr_Restore(et, ev, tb);
  Py_DECREF(out);
}

static int swpy_await_start(swpy_await *a) {
  if (a->it != NULL) return 0;
  if (a->aw == NULL) {
    PyErr_SetString(PyExc_RuntimeError, "cannot reuse already awaited response");
    return -1;
  }
  PyObject *aw = a->aw;
  a->aw = NULL;
  unaryfunc getter = Py_TYPE(aw)->tp_as_async != NULL ? Py_TYPE(aw)->tp_as_async->am_await : NULL;
  a->it = getter != NULL ? getter(aw) : NULL;
  if (getter == NULL) PyErr_Format(PyExc_TypeError, "the application returned %.100s, not an awaitable",
                                   Py_TYPE(aw)->tp_name);
  Py_DECREF(aw);
  if (a->it == NULL) swpy_await_end(a, 1);
  return a->it != NULL ? 0 : -1;
}

/* StopIteration(value), as a generator's return raises it. */
static void swpy_stop(PyObject *value) {
  PyObject *e = PyObject_CallOneArg(PyExc_StopIteration, value);
  if (e != NULL) {
    PyErr_SetObject(PyExc_StopIteration, e);
    Py_DECREF(e);
  }
}

static PySendResult swpy_await_send(PyObject *self, PyObject *arg, PyObject **result) {
  swpy_await *a = (swpy_await *)self;
  if (swpy_await_start(a) < 0) {
    *result = NULL;
    return PYGEN_ERROR;
  }
  PySendResult r = PyIter_Send(a->it, arg, result);
  if (r != PYGEN_NEXT) swpy_await_end(a, r == PYGEN_ERROR);
  return r;
}

static PyObject *swpy_await_next(PyObject *self) {
  PyObject *result;
  PySendResult r = swpy_await_send(self, Py_None, &result);
  if (r == PYGEN_NEXT) return result;
  if (r == PYGEN_RETURN) {
    if (result != Py_None) swpy_stop(result);
    Py_DECREF(result);
  }
  return NULL;
}

static PyObject *swpy_await_self(PyObject *self) { return swpy_ref(self); }

/* throw(...) and close(): to the application's iterator; its end ends the entry. */
static PyObject *swpy_await_delegate(swpy_await *a, const char *name, PyObject *const *args, Py_ssize_t n) {
  if (a->it == NULL) { /* never started: nothing of the application ran */
    Py_CLEAR(a->aw);
    if (strcmp(name, "close") == 0) {
      swpy_await_end(a, 0);
      Py_RETURN_NONE;
    }
    swpy_await_end(a, 1);
    if (n >= 1) {
      PyObject *typ = args[0], *val = n >= 2 ? args[1] : NULL;
      if (PyExceptionInstance_Check(typ))
        PyErr_SetObject((PyObject *)Py_TYPE(typ), typ);
      else
        PyErr_SetObject(typ, val);
    }
    return NULL;
  }
  PyObject *m = PyObject_GetAttrString(a->it, name);
  PyObject *r = m != NULL ? PyObject_Vectorcall(m, args, (size_t)n, NULL) : NULL;
  Py_XDECREF(m);
  if (r == NULL) {
    int done = PyErr_ExceptionMatches(PyExc_StopIteration) || PyErr_ExceptionMatches(PyExc_GeneratorExit);
    swpy_await_end(a, !done);
  } else if (strcmp(name, "close") == 0) {
    swpy_await_end(a, 1); /* closed unfinished: the request did not complete */
  }
  return r;
}

static PyObject *swpy_await_throw(PyObject *self, PyObject *const *args, Py_ssize_t n) {
  return swpy_await_delegate((swpy_await *)self, "throw", args, n);
}

static PyObject *swpy_await_close(PyObject *self, PyObject *unused) {
  (void)unused;
  return swpy_await_delegate((swpy_await *)self, "close", NULL, 0);
}

static PyObject *swpy_await_send_m(PyObject *self, PyObject *arg) {
  PyObject *result;
  PySendResult r = swpy_await_send(self, arg, &result);
  if (r == PYGEN_NEXT) return result;
  if (r == PYGEN_RETURN) {
    swpy_stop(result);
    Py_DECREF(result);
  }
  return NULL;
}

static int swpy_await_traverse(PyObject *self, visitproc visit, void *arg) {
  Py_VISIT(((swpy_await *)self)->it);
  Py_VISIT(((swpy_await *)self)->aw);
  Py_VISIT(((swpy_await *)self)->out);
  Py_VISIT(Py_TYPE(self));
  return 0;
}

static int swpy_await_clear(PyObject *self) {
  Py_CLEAR(((swpy_await *)self)->it);
  Py_CLEAR(((swpy_await *)self)->aw);
  Py_CLEAR(((swpy_await *)self)->out);
  return 0;
}

static void swpy_await_dealloc(PyObject *self) {
  PyTypeObject *tp = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  swpy_await_end((swpy_await *)self, 1); /* never awaited to its end */
  swpy_await_clear(self);
  PyObject_GC_Del(self);
  Py_DECREF(tp);
}

static PyMethodDef swpy_await_methods[] = {
    {"send", swpy_await_send_m, METH_O, "send(value)\n--\n\nTo the application's awaitable."},
    {"throw", (PyCFunction)(void (*)(void))swpy_await_throw, METH_FASTCALL,
     "throw(...)\n--\n\nTo the application's awaitable."},
    {"close", swpy_await_close, METH_NOARGS, "close()\n--\n\nTo the application's awaitable."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot swpy_await_slots[] = {
    {Py_am_await, (void *)swpy_await_self},
    {Py_am_send, (void *)swpy_await_send},
    {Py_tp_iter, (void *)swpy_await_self},
    {Py_tp_iternext, (void *)swpy_await_next},
    {Py_tp_methods, (void *)swpy_await_methods},
    {Py_tp_traverse, (void *)swpy_await_traverse},
    {Py_tp_clear, (void *)swpy_await_clear},
    {Py_tp_dealloc, (void *)swpy_await_dealloc},
    {Py_tp_doc, (void *)"The application's awaitable, ending the request's entry when done (libsw.web)."},
    {0, NULL},
};

static PyType_Spec swpy_await_spec = {"libsw._libsw.AsgiCall", sizeof(swpy_await), 0,
                                      Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, swpy_await_slots};

/* _asgi_call(awaitable, outcome): awaitable, ending outcome's entry when done. */
static PyObject *swpy_f_asgi_call(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
  (void)mod;
  if (nargs != 2) {
    PyErr_SetString(PyExc_TypeError, "_asgi_call(awaitable, outcome)");
    return NULL;
  }
  swpy_await *a = PyObject_GC_New(swpy_await, swpy_await_type);
  if (a == NULL) return NULL;
  a->it = NULL;
  a->aw = swpy_ref(args[0]);
  a->out = swpy_ref(args[1]);
  PyObject_GC_Track(a);
  return (PyObject *)a;
}

/* _asgi_send(send, wire): send adding wire's fields to the response's start. */
static PyObject *swpy_f_asgi_send(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
  (void)mod;
  if (nargs != 2) {
    PyErr_SetString(PyExc_TypeError, "_asgi_send(send, wire)");
    return NULL;
  }
  swpy_asend *a = PyObject_GC_New(swpy_asend, swpy_asend_type);
  if (a == NULL) return NULL;
  a->send = swpy_ref(args[0]);
  a->wire = swpy_ref(args[1]);
  a->vectorcall = swpy_asend_vcall;
  PyObject_GC_Track(a);
  return (PyObject *)a;
}

/* Whether the first n (name, value) pairs of a list set name,
 * case-insensitively. */
static int swpy_sets(PyObject *headers, Py_ssize_t count, PyObject *name) {
  Py_ssize_t nlen;
  const char *n = PyUnicode_AsUTF8AndSize(name, &nlen);
  if (n == NULL) return -1;
  for (Py_ssize_t i = 0; i < count && i < PyList_GET_SIZE(headers); i++) {
    PyObject *h = PyList_GET_ITEM(headers, i);
    if (!PyTuple_Check(h) || PyTuple_GET_SIZE(h) < 1 || !PyUnicode_Check(PyTuple_GET_ITEM(h, 0))) continue;
    Py_ssize_t hlen;
    const char *s = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(h, 0), &hlen);
    if (s == NULL) return -1;
    if (hlen == nlen && strncasecmp(s, n, (size_t)nlen) == 0) return 1;
  }
  return 0;
}

/* Whether a field name may be one of libsw.web's ("X-RateLimit-*",
 * "RateLimit*", "Retry-After"), case-insensitively: -1 with an exception. */
static int swpy_ours(PyObject *name) {
  Py_ssize_t n;
  const char *s = PyUnicode_Check(name) ? PyUnicode_AsUTF8AndSize(name, &n) : NULL;
  if (s == NULL) return PyErr_Occurred() ? -1 : 0;
  if (n >= 2 && strncasecmp(s, "x-", 2) == 0) {
    s += 2;
    n -= 2;
  }
  return (n >= 9 && strncasecmp(s, "ratelimit", 9) == 0) || (n == 11 && strncasecmp(s, "retry-after", 11) == 0);
}

/* start_response(status, headers + the fields of extra headers does not
 * set, exc_info). */
static PyObject *swpy_web_start(PyObject *sr, PyObject *extra, PyObject *status, PyObject *headers,
                                PyObject *exc_info) {
  PyObject *merged = PySequence_List(headers);
  if (merged == NULL) return NULL;
  Py_ssize_t have = PyList_GET_SIZE(merged);
  int check = 0; /* the application sets a field of ours: each is looked for */
  for (Py_ssize_t i = 0; i < have && !check; i++) {
    PyObject *h = PyList_GET_ITEM(merged, i);
    check = PyTuple_Check(h) && PyTuple_GET_SIZE(h) >= 1 ? swpy_ours(PyTuple_GET_ITEM(h, 0)) : 0;
    if (check < 0) {
      Py_DECREF(merged);
      return NULL;
    }
  }
  if (PyList_Check(extra)) {
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(extra); i++) {
      PyObject *f = PyList_GET_ITEM(extra, i);
      int set = !check ? 0
                : PyTuple_Check(f) && PyTuple_GET_SIZE(f) == 2 ? swpy_sets(merged, have, PyTuple_GET_ITEM(f, 0))
                                                               : 1;
      if (set < 0 || (set == 0 && PyList_Append(merged, f) < 0)) {
        Py_DECREF(merged);
        return NULL;
      }
    }
  }
  PyObject *call[3] = {status, merged, exc_info};
  PyObject *r = PyObject_Vectorcall(sr, call, 3, NULL);
  Py_DECREF(merged);
  return r;
}

/* _web_start(start_response, extra, status, headers, exc_info=None). */
static PyObject *swpy_f_web_start(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
  (void)mod;
  if (nargs < 4 || nargs > 5) {
    PyErr_SetString(PyExc_TypeError, "start_response(status, headers, exc_info=None)");
    return NULL;
  }
  return swpy_web_start(args[0], args[1], args[2], args[3], nargs == 5 ? args[4] : Py_None);
}

/* The end of an Outcome's one entry (once): 0, or -1 with an exception of
 * its _release_failed (a failure is logged there, not raised). */
static int swpy_outcome_end(PyObject *self, int err) {
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

/* ------------------------------------------------------------- WSGI */

/* A start_response that adds the fields of extra the application's
 * headers do not set: made per admitted request. */
typedef struct {
  PyObject_HEAD PyObject *sr;
  PyObject *extra;
  vectorcallfunc vectorcall;
} swpy_start;

/* The application's response iterable: close() releases the Outcome (the
 * response is sent), after the application's own close(). */
typedef struct {
  PyObject_HEAD PyObject *result;
  PyObject *out;
} swpy_released;

static PyTypeObject *swpy_start_type, *swpy_released_type;
static PyObject *swpy_s_plain, *swpy_s_enabled, *swpy_s_style, *swpy_s_call, *swpy_s_call_plan, *swpy_s_call_rc,
    *swpy_s_audit_due, *swpy_s_outcome_key, *swpy_s_close;
/* Plan's slots: rules, single, policy_field; Rule's: wsgi_env, wsgi_missing. */
static Py_ssize_t swpy_p_rules, swpy_p_single, swpy_p_policy, swpy_r_env, swpy_r_missing;
static int swpy_tick; /* requests until the limiter's next look at its audit clock */

/* start_response(status, headers, exc_info=None). */
static PyObject *swpy_start_vcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
  swpy_start *s = (swpy_start *)self;
  Py_ssize_t nargs = PyVectorcall_NARGS(nargsf), nkw = kwnames != NULL ? PyTuple_GET_SIZE(kwnames) : 0;
  PyObject *a[3] = {NULL, NULL, Py_None};
  for (Py_ssize_t i = 0; i < nargs && i < 3; i++) a[i] = args[i];
  for (Py_ssize_t i = 0; i < nkw; i++) {
    const char *k = PyUnicode_AsUTF8(PyTuple_GET_ITEM(kwnames, i));
    int at = k == NULL ? -1 : strcmp(k, "status") == 0 ? 0 : strcmp(k, "headers") == 0 ? 1
                              : strcmp(k, "exc_info") == 0 ? 2 : -1;
    if (at < 0 || at < nargs) {
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "start_response(status, headers, exc_info=None)");
      return NULL;
    }
    a[at] = args[nargs + i];
  }
  if (nargs > 3 || a[0] == NULL || a[1] == NULL) {
    PyErr_SetString(PyExc_TypeError, "start_response(status, headers, exc_info=None)");
    return NULL;
  }
  return swpy_web_start(s->sr, s->extra, a[0], a[1], a[2]);
}

static PyObject *swpy_start_new(PyObject *sr, PyObject *extra) {
  swpy_start *s = PyObject_GC_New(swpy_start, swpy_start_type);
  if (s == NULL) return NULL;
  s->sr = swpy_ref(sr);
  s->extra = swpy_ref(extra);
  s->vectorcall = swpy_start_vcall;
  PyObject_GC_Track(s);
  return (PyObject *)s;
}

static int swpy_start_traverse(PyObject *self, visitproc visit, void *arg) {
  Py_VISIT(((swpy_start *)self)->sr);
  Py_VISIT(((swpy_start *)self)->extra);
  Py_VISIT(Py_TYPE(self));
  return 0;
}

static int swpy_start_clear(PyObject *self) {
  Py_CLEAR(((swpy_start *)self)->sr);
  Py_CLEAR(((swpy_start *)self)->extra);
  return 0;
}

static void swpy_start_dealloc(PyObject *self) {
  PyTypeObject *tp = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  swpy_start_clear(self);
  PyObject_GC_Del(self);
  Py_DECREF(tp);
}

static PyMemberDef swpy_start_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(swpy_start, vectorcall), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot swpy_start_slots[] = {
    {Py_tp_call, (void *)PyVectorcall_Call},
    {Py_tp_members, (void *)swpy_start_members},
    {Py_tp_traverse, (void *)swpy_start_traverse},
    {Py_tp_clear, (void *)swpy_start_clear},
    {Py_tp_dealloc, (void *)swpy_start_dealloc},
    {Py_tp_doc, (void *)"start_response adding libsw.web's rate-limit fields."},
    {0, NULL},
};

static PyType_Spec swpy_start_spec = {"libsw._libsw.StartResponse", sizeof(swpy_start), 0,
                                      Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
                                      swpy_start_slots};

static PyObject *swpy_released_new(PyObject *result, PyObject *out) {
  swpy_released *r = PyObject_GC_New(swpy_released, swpy_released_type);
  if (r == NULL) return NULL;
  r->result = swpy_ref(result);
  r->out = swpy_ref(out);
  PyObject_GC_Track(r);
  return (PyObject *)r;
}

static PyObject *swpy_released_iter(PyObject *self) {
  PyObject *result = ((swpy_released *)self)->result;
  if (result == NULL) {
    PyErr_SetString(PyExc_ValueError, "the response was closed");
    return NULL;
  }
  return PyObject_GetIter(result);
}

/* close(): the application's close(), then the release of the Outcome,
 * whatever the first did (once). */
static PyObject *swpy_released_close(PyObject *self, PyObject *unused) {
  (void)unused;
  swpy_released *r = (swpy_released *)self;
  PyObject *result = r->result, *out = r->out;
  r->result = r->out = NULL;
  int failed = 0;
  if (result != NULL) {
    PyObject *close = NULL;
    int has = PyList_CheckExact(result) || PyTuple_CheckExact(result)
                  ? 0
                  : _PyObject_LookupAttr(result, swpy_s_close, &close); /* no AttributeError made */
    if (has < 0) {
      failed = 1;
    } else if (has > 0) {
      PyObject *x = PyObject_CallNoArgs(close);
      Py_DECREF(close);
      if (x == NULL) failed = 1;
      Py_XDECREF(x);
    }
    Py_DECREF(result);
  }
  if (out != NULL) {
    PyObject *et = NULL, *ev = NULL, *tb = NULL;
    if (failed) PyErr_Fetch(&et, &ev, &tb);
    int e = swpy_outcome_end(out, 0);
    Py_DECREF(out);
    if (failed)
      PyErr_Restore(et, ev, tb);
    else if (e < 0)
      failed = 1;
  }
  if (failed) return NULL;
  Py_RETURN_NONE;
}

static int swpy_released_traverse(PyObject *self, visitproc visit, void *arg) {
  Py_VISIT(((swpy_released *)self)->result);
  Py_VISIT(((swpy_released *)self)->out);
  Py_VISIT(Py_TYPE(self));
  return 0;
}

static int swpy_released_clear(PyObject *self) {
  Py_CLEAR(((swpy_released *)self)->result);
  Py_CLEAR(((swpy_released *)self)->out);
  return 0;
}

static void swpy_released_dealloc(PyObject *self) {
  PyTypeObject *tp = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  swpy_released_clear(self);
  PyObject_GC_Del(self);
  Py_DECREF(tp);
}

static PyMethodDef swpy_released_methods[] = {
    {"close", swpy_released_close, METH_NOARGS,
     "close()\n--\n\nClose the application's response, then end the request's entry."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot swpy_released_slots[] = {
    {Py_tp_iter, (void *)swpy_released_iter},
    {Py_tp_methods, (void *)swpy_released_methods},
    {Py_tp_traverse, (void *)swpy_released_traverse},
    {Py_tp_clear, (void *)swpy_released_clear},
    {Py_tp_dealloc, (void *)swpy_released_dealloc},
    {Py_tp_doc, (void *)"A WSGI response whose close() ends the request's entry (libsw.web)."},
    {0, NULL},
};

static PyType_Spec swpy_released_spec = {"libsw._libsw.Released", sizeof(swpy_released), 0,
                                         Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, swpy_released_slots};

/* self.name(args...): the Python path of the middleware. */
static PyObject *swpy_py_path(PyObject *self, PyObject *name, PyObject *const *args, size_t n) {
  PyObject *call[6] = {self, NULL, NULL, NULL, NULL, NULL};
  for (size_t i = 0; i < n && i < 5; i++) call[i + 1] = args[i];
  return PyObject_VectorcallMethod(name, call, (n + 1) | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

/* WSGIRateLimitMiddleware.__call__(environ, start_response): a request of
 * a middleware whose every request enters the same plan (no route
 * patterns, no exempt ones) with one simple rule keyed on an environ
 * variable, in C; anything else goes to _call, _call_plan or _call_rc
 * (Python) at the point where it leaves this path. */
static PyObject *swpy_wsgi_call(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  if (nargs != 2 || kwnames != NULL) {
    PyObject *m = PyObject_GetAttr(self, swpy_s_call);
    if (m == NULL) return NULL;
    PyObject *r = PyObject_Vectorcall(m, args, (size_t)nargs, kwnames);
    Py_DECREF(m);
    return r;
  }
  PyObject *environ = args[0], *sr = args[1];
  PyObject *fast, *plan, *lim, *app, *out = NULL, *extra = NULL, *start = NULL, *r = NULL;
  if ((fast = PyObject_GetAttr(self, swpy_s_plain)) == NULL) return NULL;
  if (!PyTuple_CheckExact(fast) || PyTuple_GET_SIZE(fast) != 3) {
    Py_DECREF(fast);
    return swpy_py_path(self, swpy_s_call, args, 2);
  }
  plan = PyTuple_GET_ITEM(fast, 0);
  lim = PyTuple_GET_ITEM(fast, 1);
  app = PyTuple_GET_ITEM(fast, 2);
  PyObject *en = PyObject_GetAttr(lim, swpy_s_enabled);
  int enabled = en != NULL ? PyObject_IsTrue(en) : -1;
  Py_XDECREF(en);
  if (enabled < 0) goto done;
  if (!enabled) {
    r = PyObject_Vectorcall(app, args, 2, NULL);
    goto done;
  }
  PyObject *rule = *swpy_slot(plan, swpy_p_single), *rules = *swpy_slot(plan, swpy_p_rules);
  PyObject *env = rule != NULL && rule != Py_None ? *swpy_slot(rule, swpy_r_env) : NULL;
  PyObject *key = NULL;
  if (env != NULL && PyUnicode_Check(env) && rules != NULL) {
    if (PyUnicode_GET_LENGTH(env) == 0) { /* a constant key */
      key = NULL;
    } else if (PyDict_CheckExact(environ)) {
      key = PyDict_GetItemWithError(environ, env);
      if (key == NULL && PyErr_Occurred()) goto done;
    }
    if (key == NULL || (PyUnicode_Check(key) && PyUnicode_GET_LENGTH(key) == 0))
      key = *swpy_slot(rule, swpy_r_missing);
  }
  if (key == NULL || key == Py_None || (!PyUnicode_CheckExact(key) && !PyBytes_CheckExact(key))) {
    PyObject *a[3] = {environ, sr, plan}; /* another key, or the rule does not apply */
    r = swpy_py_path(self, swpy_s_call_plan, a, 3);
    goto done;
  }
  if (--swpy_tick <= 0) {
    swpy_tick = 32;
    PyObject *x = PyObject_CallMethodNoArgs(lim, swpy_s_audit_due);
    if (x == NULL) goto done;
    Py_DECREF(x);
  }
  Py_INCREF(key); /* (held across the entry: the environ is the application's) */
  out = swpy_web_enter(rule, key, rules);
  if (out == NULL || PyLong_CheckExact(out)) {
    if (out != NULL) {
      PyObject *a[5] = {environ, sr, plan, key, out};
      r = swpy_py_path(self, swpy_s_call_rc, a, 5);
    }
    Py_DECREF(key);
    goto done;
  }
  Py_DECREF(key);
  if (PyObject_SetItem(environ, swpy_s_outcome_key, out) < 0) goto fail;
  PyObject *st = PyObject_GetAttr(lim, swpy_s_style);
  int64_t style = st != NULL ? PyLong_AsLongLong(st) : -1;
  Py_XDECREF(st);
  if (style < 0 && PyErr_Occurred()) goto fail;
  if (style > 0) {
    PyObject *policy = *swpy_slot(plan, swpy_p_policy);
    int64_t remaining = swpy_slot_int(out, swpy_u_remaining);
    if (policy == NULL || (extra = swpy_web_fields(rule, style, remaining, policy, 0)) == NULL) goto fail;
    if (extra != Py_None && (start = swpy_start_new(sr, extra)) == NULL) goto fail;
  }
  PyObject *call[2] = {environ, start != NULL ? start : sr};
  PyObject *result = PyObject_Vectorcall(app, call, 2, NULL);
  if (result == NULL) goto fail;
  r = swpy_released_new(result, out);
  Py_DECREF(result);
  if (r == NULL) goto fail;
  goto done;
fail: { /* the request's entry ends with the exception */
  PyObject *et, *ev, *tb;
  PyErr_Fetch(&et, &ev, &tb);
  if (swpy_outcome_end(out, 1) < 0) PyErr_Clear();
  PyErr_Restore(et, ev, tb);
}
done:
  Py_DECREF(fast);
  Py_XDECREF(out);
  Py_XDECREF(extra);
  Py_XDECREF(start);
  return r;
}

static PyMethodDef swpy_wsgi_call_def = {
    "__call__", (PyCFunction)(void (*)(void))swpy_wsgi_call, METH_FASTCALL | METH_KEYWORDS,
    "__call__($self, environ, start_response, /)\n--\n\nA request: entered into its rules, refused "
    "(429) or passed to the application, its entry released when the response is closed."};

/* _web_install_wsgi(cls, plan_cls): cls.__call__ in C (the WSGI middleware). */
static PyObject *swpy_f_install_wsgi(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
  (void)mod;
  if (nargs != 2) {
    PyErr_SetString(PyExc_TypeError, "_web_install_wsgi(middleware_class, plan_class)");
    return NULL;
  }
  PyObject *rules = PyImport_ImportModule("libsw.web._rules");
  PyObject *rule = rules != NULL ? PyObject_GetAttrString(rules, "Rule") : NULL;
  Py_XDECREF(rules);
  if (rule == NULL) return NULL;
  int bad = (swpy_p_rules = swpy_slot_offset(args[1], "rules")) < 0 ||
            (swpy_p_single = swpy_slot_offset(args[1], "single")) < 0 ||
            (swpy_p_policy = swpy_slot_offset(args[1], "policy_field")) < 0 ||
            (swpy_r_env = swpy_slot_offset(rule, "wsgi_env")) < 0 ||
            (swpy_r_missing = swpy_slot_offset(rule, "wsgi_missing")) < 0;
  Py_DECREF(rule);
  if (bad) return NULL;
  if (swpy_start_type == NULL) {
    if (!(swpy_start_type = (PyTypeObject *)PyType_FromSpec(&swpy_start_spec)) ||
        !(swpy_released_type = (PyTypeObject *)PyType_FromSpec(&swpy_released_spec)) ||
        !(swpy_s_plain = PyUnicode_InternFromString("_plain")) ||
        !(swpy_s_enabled = PyUnicode_InternFromString("enabled")) ||
        !(swpy_s_style = PyUnicode_InternFromString("style")) ||
        !(swpy_s_call = PyUnicode_InternFromString("_call")) ||
        !(swpy_s_call_plan = PyUnicode_InternFromString("_call_plan")) ||
        !(swpy_s_call_rc = PyUnicode_InternFromString("_call_rc")) ||
        !(swpy_s_audit_due = PyUnicode_InternFromString("audit_due")) ||
        !(swpy_s_outcome_key = PyUnicode_InternFromString("libsw.outcome")) ||
        !(swpy_s_close = PyUnicode_InternFromString("close")))
      return NULL;
  }
  PyObject *d = PyDescr_NewMethod((PyTypeObject *)args[0], &swpy_wsgi_call_def);
  if (d == NULL || PyObject_SetAttrString(args[0], "__call__", d) < 0) {
    Py_XDECREF(d);
    return NULL;
  }
  Py_DECREF(d);
  Py_RETURN_NONE;
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
    {"_web_start", (PyCFunction)(void (*)(void))swpy_f_web_start, METH_FASTCALL,
     "_web_start(start_response, extra, status, headers, exc_info=None, /)\n--\n\n"
     "start_response with extra's fields that headers does not set."},
    {NULL, NULL, 0, NULL},
};

static PyMethodDef swpy_outcome_release_def = {
    "release", (PyCFunction)(void (*)(void))swpy_m_outcome_release, METH_FASTCALL | METH_KEYWORDS,
    "release($self, /, error=False, response=None)\n--\n\nEnd the request's entries (once; later "
    "calls do nothing): response times and successes, an exception with error=True."};

static int swpy_web_finalizer(PyObject *cls) {
  PyTypeObject *tp = (PyTypeObject *)cls;
  tp->tp_finalize = swpy_outcome_finalize;
  PyType_Modified(tp);
  PyObject *subs = PyObject_CallMethod(cls, "__subclasses__", NULL);
  if (subs == NULL) return -1;
  int rc = 0;
  for (Py_ssize_t i = 0; rc == 0 && i < PyList_GET_SIZE(subs); i++)
    rc = swpy_web_finalizer(PyList_GET_ITEM(subs, i));
  Py_DECREF(subs);
  return rc;
}

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
       !(swpy_k_type = PyUnicode_InternFromString("type")) ||
       !(swpy_k_headers = PyUnicode_InternFromString("headers")) ||
       !(swpy_v_start = PyUnicode_InternFromString("http.response.start")) ||
       !(swpy_asend_type = (PyTypeObject *)PyType_FromSpec(&swpy_asend_spec)) ||
       !(swpy_await_type = (PyTypeObject *)PyType_FromSpec(&swpy_await_spec)) ||
       !(swpy_s_release_failed = PyUnicode_InternFromString("_release_failed"))))
    goto out;
  Py_XSETREF(swpy_outcome_type, (PyTypeObject *)swpy_ref(outcome));
  if (!(d = PyDescr_NewMethod((PyTypeObject *)outcome, &swpy_outcome_release_def)) ||
      PyObject_SetAttrString(outcome, "release", d) < 0 || swpy_web_finalizer(outcome) < 0)
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
