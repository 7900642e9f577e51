/* SPDX-License-Identifier: Apache-2.0 */
/* libsw.web's ASGI middleware in C (see swpy_web.h): a send that adds the
 * rate-limit fields to the response's start, and the application's
 * awaitable ending the request's entry when it is done, so that an
 * admitted request costs the middleware no coroutine of its own. */
#include <Python.h>
#include <string.h>
#include <strings.h>

#include "swpy_web.h"


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

/* Whether a pair of a list may set one of libsw.web's fields
 * ("x-ratelimit-*", "ratelimit*", "retry-after", any case): when none
 * does, the fields are added without looking for each. */
static int swpy_ours_raw(PyObject *h) {
  PyObject *k;
  if (!PyTuple_Check(h) || PyTuple_GET_SIZE(h) < 1 || !PyBytes_Check(k = PyTuple_GET_ITEM(h, 0))) return 0;
  const char *s = PyBytes_AS_STRING(k);
  Py_ssize_t n = PyBytes_GET_SIZE(k);
  if (n >= 2 && strncasecmp(s, "x-", 2) == 0) {
    s += 2;
    n -= 2;
  }
  return (n >= 9 && strncasecmp(s, "ratelimit", 9) == 0) || (n == 11 && strncasecmp(s, "retry-after", 11) == 0);
}

/* send(message): the response's start gets the fields of wire its
 * headers do not set, in a copy of the message and of its header list
 * (the application's own are never changed: a Response object or a
 * message sent again would keep the fields of an earlier request). */
static PyObject *swpy_asend_vcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
  swpy_asend *a = (swpy_asend *)self;
  if (PyVectorcall_NARGS(nargsf) != 1 || kwnames != NULL) {
    PyErr_SetString(PyExc_TypeError, "send(message)");
    return NULL;
  }
  PyObject *msg = args[0];
  PyObject *type = PyDict_Check(msg) ? PyDict_GetItemWithError(msg, swpy_k_type) : NULL;
  if (type == NULL && PyErr_Occurred()) return NULL;
  int start = type == swpy_v_start || (type != NULL && PyUnicode_Check(type) &&
                                       PyUnicode_Compare(type, swpy_v_start) == 0);
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
  int check = 0; /* the application sets a field of ours: each is looked for */
  for (Py_ssize_t i = 0; i < n && !check; i++) check = swpy_ours_raw(PyList_GET_ITEM(headers, i));
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(a->wire); i++) {
    PyObject *f = PyList_GET_ITEM(a->wire, i);
    if (!PyTuple_Check(f) || PyTuple_GET_SIZE(f) != 2 || !PyBytes_Check(PyTuple_GET_ITEM(f, 0))) continue;
    if ((!check || !swpy_sets_raw(headers, n, PyTuple_GET_ITEM(f, 0))) && PyList_Append(headers, f) < 0) goto fail;
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

static PyMemberDef swpy_asend_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(swpy_asend, vectorcall), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot swpy_asend_slots[] = {
    {Py_tp_call, (void *)PyVectorcall_Call},
    {Py_tp_members, (void *)swpy_asend_members},
    {Py_tp_traverse, (void *)swpy_asend_traverse},
    {Py_tp_clear, (void *)swpy_asend_clear},
    {Py_tp_dealloc, (void *)swpy_gc_dealloc},
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
  swpy_outcome_end_raising(out, error);
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

static PyObject *swpy_await_new(PyObject *aw, PyObject *out) {
  swpy_await *a = PyObject_GC_New(swpy_await, swpy_await_type);
  if (a == NULL) return NULL;
  a->it = NULL;
  a->aw = swpy_ref(aw);
  a->out = swpy_ref(out);
  PyObject_GC_Track(a);
  return (PyObject *)a;
}

static PyObject *swpy_asend_new(PyObject *send, PyObject *wire) {
  swpy_asend *a = PyObject_GC_New(swpy_asend, swpy_asend_type);
  if (a == NULL) return NULL;
  a->send = swpy_ref(send);
  a->wire = swpy_ref(wire);
  a->vectorcall = swpy_asend_vcall;
  PyObject_GC_Track(a);
  return (PyObject *)a;
}

/* _asgi_call(awaitable, outcome): awaitable, ending outcome's entry when done. */
PyObject *swpy_f_asgi_call(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
  (void)mod;
  if (nargs != 2) {
    PyErr_SetString(PyExc_TypeError, "_asgi_call(awaitable, outcome)");
    return NULL;
  }
  return swpy_await_new(args[0], args[1]);
}

/* _asgi_send(send, wire): send adding wire's fields to the response's start. */
PyObject *swpy_f_asgi_send(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
  (void)mod;
  if (nargs != 2) {
    PyErr_SetString(PyExc_TypeError, "_asgi_send(send, wire)");
    return NULL;
  }
  return swpy_asend_new(args[0], args[1]);
}


/* The ASGI middleware's call in C (_web_install_asgi): its class's tp_call,
 * its Python __call__ (kept: the servers that ask see a coroutine
 * function) the path of everything but a request of a plain plan whose
 * one rule is simple. */
static PyObject *swpy_a_pycall, *swpy_a_client, *swpy_a_plain, *swpy_a_app, *swpy_a_enabled, *swpy_a_style, *swpy_a_http,
    *swpy_a_state, *swpy_a_libsw, *swpy_a_audit_due, *swpy_a_call_rc;
/* Plan's slots: rules, single, policy_raw, needs_response; Rule's: asgi,
 * prefix, asgi_client, wsgi_missing. */
static Py_ssize_t swpy_ap_rules, swpy_ap_single, swpy_ap_raw, swpy_ap_needs, swpy_ar_asgi, swpy_ar_prefix,
    swpy_ar_client, swpy_ar_missing;
static int swpy_atick; /* requests until the limiter's next look at its audit clock */

/* self.name(args...) (the Python path), args[0] a new reference to self. */
static PyObject *swpy_asgi_py(PyObject *name, PyObject **args, size_t n) {
  return PyObject_VectorcallMethod(name, args, n | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

/* Whether plan's one rule has the fast path (simple, a key read from the
 * scope): the rule, else NULL (no exception). */
static PyObject *swpy_asgi_rule(PyObject *plan) {
  PyObject *rule = *swpy_slot(plan, swpy_ap_single), *needs = *swpy_slot(plan, swpy_ap_needs);
  if (rule == NULL || rule == Py_None || needs != Py_False || *swpy_slot(plan, swpy_ap_rules) == NULL ||
      *swpy_slot(plan, swpy_ap_raw) == NULL)
    return NULL;
  PyObject *get = *swpy_slot(rule, swpy_ar_asgi);
  return get != NULL && get != Py_None && *swpy_slot(rule, swpy_ar_prefix) != NULL ? rule : NULL;
}

/* The key of the rule's table for a request: the client's address read
 * here (remote_address's _asgi_peer: client[0], or "-" without a client),
 * else the rule's asgi(scope). A new reference, or NULL. */
static PyObject *swpy_asgi_key(PyObject *rule, PyObject *scope) {
  if (*swpy_slot(rule, swpy_ar_client) == Py_True) {
    PyObject *client = PyDict_GetItemWithError(scope, swpy_a_client), *missing = *swpy_slot(rule, swpy_ar_missing);
    if (client == NULL && PyErr_Occurred()) return NULL;
    if ((client == NULL || client == Py_None) && missing != NULL) return swpy_ref(missing);
    if (PyTuple_CheckExact(client) && PyTuple_GET_SIZE(client) > 0) return swpy_ref(PyTuple_GET_ITEM(client, 0));
    if (PyList_CheckExact(client) && PyList_GET_SIZE(client) > 0) return swpy_ref(PyList_GET_ITEM(client, 0));
  }
  return PyObject_CallOneArg(*swpy_slot(rule, swpy_ar_asgi), scope);
}

/* The Python __call__ (self, *args, **kwargs). */
static PyObject *swpy_asgi_slow(PyObject *self, PyObject *args, PyObject *kwargs) {
  PyObject *m = PyMethod_New(swpy_a_pycall, self);
  PyObject *r = m != NULL ? PyObject_Call(m, args, kwargs) : NULL;
  Py_XDECREF(m);
  return r;
}

/* RateLimitMiddleware(scope, receive, send): what its Python __call__
 * does, for an http request of a plain plan (every request, no routes)
 * whose one rule is simple; the rest goes to __call__ before anything is
 * done, or to _call_rc when the entry is not a plain pass. */
static PyObject *swpy_asgi_tp_call(PyObject *self, PyObject *args, PyObject *kwargs) {
  if ((kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0) || PyTuple_GET_SIZE(args) != 3 ||
      !PyDict_CheckExact(PyTuple_GET_ITEM(args, 0)))
    return swpy_asgi_slow(self, args, kwargs);
  PyObject *scope = PyTuple_GET_ITEM(args, 0), *receive = PyTuple_GET_ITEM(args, 1),
           *send = PyTuple_GET_ITEM(args, 2);
  PyObject *type = PyDict_GetItemWithError(scope, swpy_k_type);
  if (type == NULL && PyErr_Occurred()) return NULL;
  if (type != swpy_a_http && (type == NULL || !PyUnicode_CheckExact(type) ||
                              PyUnicode_Compare(type, swpy_a_http) != 0))
    return swpy_asgi_slow(self, args, kwargs);
  PyObject *fast = PyObject_GetAttr(self, swpy_a_plain);
  if (fast == NULL) return NULL;
  PyObject *plan = PyTuple_CheckExact(fast) && PyTuple_GET_SIZE(fast) == 2 ? PyTuple_GET_ITEM(fast, 0) : NULL;
  PyObject *lim = plan != NULL ? PyTuple_GET_ITEM(fast, 1) : NULL;
  PyObject *rule = plan != NULL ? swpy_asgi_rule(plan) : NULL;
  PyObject *en = rule != NULL ? PyObject_GetAttr(lim, swpy_a_enabled) : NULL;
  int enabled = en != NULL ? PyObject_IsTrue(en) : 0;
  Py_XDECREF(en);
  if (PyErr_Occurred()) {
    Py_DECREF(fast);
    return NULL;
  }
  if (!enabled) {
    Py_DECREF(fast);
    return swpy_asgi_slow(self, args, kwargs);
  }
  PyObject *key = NULL, *out = NULL, *wire = NULL, *snd = NULL, *app = NULL, *aw = NULL, *r = NULL;
  if (--swpy_atick <= 0) {
    swpy_atick = 32;
    PyObject *x = PyObject_CallMethodNoArgs(lim, swpy_a_audit_due);
    if (x == NULL) goto done;
    Py_DECREF(x);
  }
  PyObject *prefix = *swpy_slot(rule, swpy_ar_prefix);
  if ((key = swpy_asgi_key(rule, scope)) == NULL) goto done;
  if (PyUnicode_CheckExact(key) && PyUnicode_Check(prefix) && PyUnicode_GET_LENGTH(prefix) > 0) {
    Py_SETREF(key, PyUnicode_Concat(prefix, key));
    if (key == NULL) goto done;
  }
  if ((out = swpy_web_enter(rule, key, *swpy_slot(plan, swpy_ap_rules))) == NULL) goto done;
  if (PyLong_CheckExact(out)) { /* not a plain pass */
    PyObject *a[7] = {self, scope, receive, send, plan, key, out};
    r = swpy_asgi_py(swpy_a_call_rc, a, 7);
    goto done;
  }
  PyObject *state = PyDict_GetItemWithError(scope, swpy_a_state);
  if (state == NULL || state == Py_None) {
    if (PyErr_Occurred() || (state = PyDict_New()) == NULL) goto fail;
    int bad = PyDict_SetItem(scope, swpy_a_state, state);
    Py_DECREF(state);
    if (bad < 0) goto fail;
  }
  if (PyObject_SetItem(state, swpy_a_libsw, out) < 0) goto fail;
  PyObject *st = PyObject_GetAttr(lim, swpy_a_style);
  int64_t style = st != NULL ? PyLong_AsLongLong(st) : -1;
  Py_XDECREF(st);
  if (style == -1 && PyErr_Occurred()) goto fail;
  if (style != 0) {
    wire = swpy_web_fields(rule, style, swpy_slot_int(out, swpy_u_remaining), *swpy_slot(plan, swpy_ap_raw), 1);
    if (wire == NULL) goto fail;
    if (PyList_Check(wire) && PyList_GET_SIZE(wire) > 0 && (snd = swpy_asend_new(send, wire)) == NULL) goto fail;
  }
  if ((app = PyObject_GetAttr(self, swpy_a_app)) == NULL) goto fail;
  PyObject *call[3] = {scope, receive, snd != NULL ? snd : send};
  if ((aw = PyObject_Vectorcall(app, call, 3, NULL)) == NULL) goto fail;
  if ((r = swpy_await_new(aw, out)) != NULL) goto done;
fail: /* the request's entry ends with the exception */
  swpy_outcome_end_raising(out, 1);
done:
  Py_DECREF(fast);
  Py_XDECREF(key);
  Py_XDECREF(out);
  Py_XDECREF(wire);
  Py_XDECREF(snd);
  Py_XDECREF(app);
  Py_XDECREF(aw);
  return r;
}

/* _web_install_asgi(middleware_class, plan_class): the class's calls in C
 * (swpy_asgi_tp_call), its __call__ (a Python function) the path of the
 * rest. Its subclasses made later call their own __call__. */
PyObject *swpy_f_install_asgi(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
  (void)mod;
  if (nargs != 2 || !PyType_Check(args[0]) || !(((PyTypeObject *)args[0])->tp_flags & Py_TPFLAGS_HEAPTYPE)) {
    PyErr_SetString(PyExc_TypeError, "_web_install_asgi(middleware_class, plan_class)");
    return NULL;
  }
  PyObject *rules = PyImport_ImportModule("libsw.web._rules");
  PyObject *rule = rules != NULL ? PyObject_GetAttrString(rules, "Rule") : NULL;
  Py_XDECREF(rules);
  if (rule == NULL) return NULL;
  int bad = (swpy_ap_rules = swpy_slot_offset(args[1], "rules")) < 0 ||
            (swpy_ap_single = swpy_slot_offset(args[1], "single")) < 0 ||
            (swpy_ap_raw = swpy_slot_offset(args[1], "policy_raw")) < 0 ||
            (swpy_ap_needs = swpy_slot_offset(args[1], "needs_response")) < 0 ||
            (swpy_ar_asgi = swpy_slot_offset(rule, "asgi")) < 0 ||
            (swpy_ar_prefix = swpy_slot_offset(rule, "prefix")) < 0 ||
            (swpy_ar_client = swpy_slot_offset(rule, "asgi_client")) < 0 ||
            (swpy_ar_missing = swpy_slot_offset(rule, "wsgi_missing")) < 0;
  Py_DECREF(rule);
  if (bad) return NULL;
  PyObject *call = PyObject_GetAttrString(args[0], "__call__");
  if (call == NULL) return NULL;
  if (!PyFunction_Check(call)) {
    Py_DECREF(call);
    PyErr_SetString(PyExc_TypeError, "_web_install_asgi: the class's __call__ is not a Python function");
    return NULL;
  }
  Py_XSETREF(swpy_a_pycall, call);
  if (swpy_a_plain == NULL &&
      (!(swpy_a_plain = PyUnicode_InternFromString("_plain")) || !(swpy_a_app = PyUnicode_InternFromString("app")) ||
       !(swpy_a_enabled = PyUnicode_InternFromString("enabled")) ||
       !(swpy_a_style = PyUnicode_InternFromString("style")) || !(swpy_a_http = PyUnicode_InternFromString("http")) ||
       !(swpy_a_state = PyUnicode_InternFromString("state")) ||
       !(swpy_a_libsw = PyUnicode_InternFromString("libsw")) ||
       !(swpy_a_audit_due = PyUnicode_InternFromString("audit_due")) ||
       !(swpy_a_call_rc = PyUnicode_InternFromString("_call_rc")) ||
       !(swpy_a_client = PyUnicode_InternFromString("client"))))
    return NULL;
  ((PyTypeObject *)args[0])->tp_call = swpy_asgi_tp_call;
  Py_RETURN_NONE;
}

int swpy_asgi_init(void) {
  if (swpy_asend_type != NULL) return 0;
  if (!(swpy_k_type = PyUnicode_InternFromString("type")) ||
      !(swpy_k_headers = PyUnicode_InternFromString("headers")) ||
      !(swpy_v_start = PyUnicode_InternFromString("http.response.start")) ||
      !(swpy_await_type = (PyTypeObject *)PyType_FromSpec(&swpy_await_spec)) ||
      !(swpy_asend_type = (PyTypeObject *)PyType_FromSpec(&swpy_asend_spec)))
    return -1;
  return 0;
}
