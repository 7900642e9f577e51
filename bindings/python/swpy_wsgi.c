/* SPDX-License-Identifier: Apache-2.0 */
/* libsw.web's WSGI middleware in C (see swpy_web.h): its __call__ for a
 * request of a plain plan with one simple rule, the start_response that
 * adds the rate-limit fields the application does not set, and the
 * response iterable whose close() ends the request's entry. */
#include <Python.h>
#include <string.h>
#include <strings.h>

#include "swpy_web.h"

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

static PyObject *swpy_s_fields, *swpy_s_status; /* "libsw.fields", "libsw.status" */

/* start_response(status, headers + the fields of extra headers does not
 * set, exc_info). extra: a list of (name, value) pairs, or a WSGI environ
 * whose "libsw.fields" is one (read now: the Flask extension's), which
 * then keeps (status, headers) as "libsw.status". */
static PyObject *swpy_web_start(PyObject *sr, PyObject *extra, PyObject *status, PyObject *headers,
                                PyObject *exc_info) {
  if (PyDict_Check(extra)) {
    if (swpy_s_fields == NULL && ((swpy_s_fields = PyUnicode_InternFromString("libsw.fields")) == NULL ||
                                  (swpy_s_status = PyUnicode_InternFromString("libsw.status")) == NULL))
      return NULL;
    PyObject *st = PyTuple_Pack(2, status, headers);
    int bad = st == NULL || PyDict_SetItem(extra, swpy_s_status, st) < 0;
    Py_XDECREF(st);
    if (bad) return NULL;
    extra = PyDict_GetItemWithError(extra, swpy_s_fields);
    if (extra == NULL && PyErr_Occurred()) return NULL;
    if (extra == NULL || !PyList_Check(extra) || PyList_GET_SIZE(extra) == 0) {
      PyObject *call[3] = {status, headers, exc_info};
      return PyObject_Vectorcall(sr, call, 3, NULL);
    }
  }
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
PyObject *swpy_f_web_start(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
  (void)mod;
  if (nargs < 4 || nargs > 5) {
    PyErr_SetString(PyExc_TypeError, "start_response(status, headers, exc_info=None)");
    return NULL;
  }
  return swpy_web_start(args[0], args[1], args[2], args[3], nargs == 5 ? args[4] : Py_None);
}


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
/* Plan's slots: rules, single, policy_field, needs_response; Rule's:
 * wsgi_env, wsgi_missing, prefix. */
Py_ssize_t swpy_p_rules, swpy_p_single, swpy_p_policy, swpy_p_needs;
PyTypeObject *swpy_plan_type;
static Py_ssize_t swpy_r_env, swpy_r_missing, swpy_r_prefix;
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

PyObject *swpy_start_new(PyObject *sr, PyObject *extra) {
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

static PyMemberDef swpy_start_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(swpy_start, vectorcall), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot swpy_start_slots[] = {
    {Py_tp_call, (void *)PyVectorcall_Call},
    {Py_tp_members, (void *)swpy_start_members},
    {Py_tp_traverse, (void *)swpy_start_traverse},
    {Py_tp_clear, (void *)swpy_start_clear},
    {Py_tp_dealloc, (void *)swpy_gc_dealloc},
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
    {Py_tp_dealloc, (void *)swpy_gc_dealloc},
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

/* The key of a simple rule for a WSGI request, read here: environ[wsgi_env]
 * (wsgi_missing when it is absent or empty; wsgi_env "": a constant, the
 * rule's wsgi_missing), with the rule's prefix; NULL without an exception
 * when the rule's wsgi(environ) (Python's path) must give it. A new
 * reference. */
PyObject *swpy_wsgi_key(PyObject *rule, PyObject *environ) {
  PyObject *env = *swpy_slot(rule, swpy_r_env), *prefix = *swpy_slot(rule, swpy_r_prefix), *key = NULL;
  if (env == NULL || !PyUnicode_CheckExact(env) || prefix == NULL) return NULL;
  if (PyUnicode_GET_LENGTH(env) != 0 && PyDict_CheckExact(environ)) {
    key = PyDict_GetItemWithError(environ, env);
    if (key == NULL && PyErr_Occurred()) return NULL;
  }
  if (PyUnicode_GET_LENGTH(env) == 0 || key == NULL || (PyUnicode_Check(key) && PyUnicode_GET_LENGTH(key) == 0) ||
      (PyBytes_Check(key) && PyBytes_GET_SIZE(key) == 0))
    key = *swpy_slot(rule, swpy_r_missing);
  if (key == NULL || (!PyUnicode_CheckExact(key) && !PyBytes_CheckExact(key))) return NULL;
  if (PyUnicode_CheckExact(key) && PyUnicode_Check(prefix) && PyUnicode_GET_LENGTH(prefix) > 0)
    return PyUnicode_Concat(prefix, key);
  return swpy_ref(key);
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
  PyObject *key = rule != NULL && rule != Py_None && rules != NULL ? swpy_wsgi_key(rule, environ) : NULL;
  if (key == NULL) {
    if (PyErr_Occurred()) goto done;
    PyObject *a[3] = {environ, sr, plan}; /* another key, or the rule does not apply */
    r = swpy_py_path(self, swpy_s_call_plan, a, 3);
    goto done;
  }
  if (--swpy_tick <= 0) {
    swpy_tick = 32;
    PyObject *x = PyObject_CallMethodNoArgs(lim, swpy_s_audit_due);
    if (x == NULL) {
      Py_DECREF(key);
      goto done;
    }
    Py_DECREF(x);
  }
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
fail: /* the request's entry ends with the exception */
  swpy_outcome_end_raising(out, 1);
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
PyObject *swpy_f_install_wsgi(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
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
            (swpy_r_missing = swpy_slot_offset(rule, "wsgi_missing")) < 0 ||
            (swpy_p_needs = swpy_slot_offset(args[1], "needs_response")) < 0 ||
            (swpy_r_prefix = swpy_slot_offset(rule, "prefix")) < 0;
  Py_DECREF(rule);
  if (bad) return NULL;
  if (!PyType_Check(args[1])) {
    PyErr_SetString(PyExc_TypeError, "_web_install_wsgi: plan_class is not a class");
    return NULL;
  }
  Py_XSETREF(swpy_plan_type, (PyTypeObject *)swpy_ref(args[1]));
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
