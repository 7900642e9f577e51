/* SPDX-License-Identifier: Apache-2.0 */
/* libsw.web's Flask extension in C (see swpy_web.h): its before-request
 * hook for a view whose plan has one simple rule keyed on an environ
 * variable, and the wsgi_app around Flask's (the response's start adding
 * the request's fields, the request's entry ended when Flask is done with
 * it). Everything else is libsw/web/flask.py's Python, entered where this
 * path leaves off. */
#include <Python.h>

#include "swpy_web.h"

static PyObject *swpy_f_core, *swpy_f_endpoint, *swpy_f_enabled, *swpy_f_method, *swpy_f_environ,
    *swpy_f_style, *swpy_f_before_py, *swpy_f_before_rc, *swpy_f_fields_py, *swpy_f_release, *swpy_f_outcome,
    *swpy_f_plan, *swpy_f_fields, *swpy_f_status, *swpy_f_kw_error, *swpy_f_url_rule;
/* flask.wrappers.Request.endpoint (a property: url_rule's endpoint, or None) */
static PyObject *swpy_f_endpoint_prop;

static int swpy_flask_endpoint_prop(void) {
  PyObject *m = PyImport_ImportModule("flask.wrappers"), *req = m != NULL ? PyObject_GetAttrString(m, "Request") : NULL;
  Py_XDECREF(m);
  if (req == NULL || !PyType_Check(req) || !(swpy_f_url_rule = PyUnicode_InternFromString("url_rule"))) {
    Py_XDECREF(req);
    return -1;
  }
  swpy_f_endpoint_prop = _PyType_Lookup((PyTypeObject *)req, swpy_f_endpoint);
  Py_XINCREF(swpy_f_endpoint_prop);
  Py_DECREF(req);
  return 0;
}

/* request.endpoint: Flask's property read here (its url_rule's endpoint,
 * or None) unless the request's class has its own. */
static PyObject *swpy_flask_endpoint(PyObject *req) {
  if (swpy_f_endpoint_prop == NULL || _PyType_Lookup(Py_TYPE(req), swpy_f_endpoint) != swpy_f_endpoint_prop)
    return PyObject_GetAttr(req, swpy_f_endpoint);
  PyObject *rule = PyObject_GetAttr(req, swpy_f_url_rule);
  if (rule == NULL || rule == Py_None) return rule;
  Py_SETREF(rule, PyObject_GetAttr(rule, swpy_f_endpoint));
  return rule;
}

static int swpy_flask_names(void) {
  if (swpy_f_core != NULL) return 0;
  return (swpy_f_core = PyUnicode_InternFromString("core")) && (swpy_f_endpoint = PyUnicode_InternFromString("endpoint")) &&
                 (swpy_f_enabled = PyUnicode_InternFromString("enabled")) &&
                 (swpy_f_method = PyUnicode_InternFromString("method")) &&
                 (swpy_f_environ = PyUnicode_InternFromString("environ")) &&
                 (swpy_f_style = PyUnicode_InternFromString("style")) &&
                 (swpy_f_before_py = PyUnicode_InternFromString("_before")) &&
                 (swpy_f_before_rc = PyUnicode_InternFromString("_before_rc")) &&
                 (swpy_f_fields_py = PyUnicode_InternFromString("_pass_fields")) &&
                 (swpy_f_release = PyUnicode_InternFromString("release")) &&
                 (swpy_f_outcome = PyUnicode_InternFromString("libsw.outcome")) &&
                 (swpy_f_plan = PyUnicode_InternFromString("libsw.plan")) &&
                 (swpy_f_fields = PyUnicode_InternFromString("libsw.fields")) &&
                 (swpy_f_status = PyUnicode_InternFromString("libsw.status")) &&
                 (swpy_f_kw_error = Py_BuildValue("(s)", "error"))
             ? swpy_flask_endpoint_prop()
             : -1;
}

/* ext.name(args...), args[0] being ext. */
static PyObject *swpy_flask_py(PyObject *name, PyObject **args, size_t n) {
  return PyObject_VectorcallMethod(name, args, n | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

/* _flask_before(ext, request, plans): Limiter._before of flask.py for
 * request (Flask's, of the current context; plans: ext._plans), in C while
 * the request's view has a plan of one simple rule keyed on an environ
 * variable and the entry is a plain pass: None, or what _before (a plan
 * not made yet, another key) or _before_rc (not a plain pass) returns. */
PyObject *swpy_f_flask_before(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
  (void)mod;
  if (nargs != 3) {
    PyErr_SetString(PyExc_TypeError, "_flask_before(extension, request, plans)");
    return NULL;
  }
  if (swpy_flask_names() < 0) return NULL;
  PyObject *ext = args[0], *req = args[1], *plans = args[2];
  PyObject *core = NULL, *endpoint = NULL, *method = NULL, *environ = NULL, *key = NULL, *out = NULL,
           *fields = NULL, *r = NULL;
  if ((core = PyObject_GetAttr(ext, swpy_f_core)) == NULL || (endpoint = swpy_flask_endpoint(req)) == NULL)
    goto done;
  if (core == Py_None || endpoint == Py_None) {
    r = swpy_ref(Py_None);
    goto done;
  }
  PyObject *en = PyObject_GetAttr(core, swpy_f_enabled);
  int enabled = en != NULL ? PyObject_IsTrue(en) : -1;
  Py_XDECREF(en);
  if (enabled <= 0) {
    if (enabled == 0) r = swpy_ref(Py_None);
    goto done;
  }
  if ((method = PyObject_GetAttr(req, swpy_f_method)) == NULL) goto done;
  PyObject *by_method = PyDict_CheckExact(plans) ? PyDict_GetItemWithError(plans, endpoint) : NULL;
  PyObject *plan = by_method != NULL && PyDict_CheckExact(by_method) ? PyDict_GetItemWithError(by_method, method) : NULL;
  if (plan == NULL && PyErr_Occurred()) goto done;
  if (plan == Py_None) { /* exempt */
    r = swpy_ref(Py_None);
    goto done;
  }
  if (plan != NULL && Py_TYPE(plan) != swpy_plan_type) plan = NULL;
  PyObject *rule = plan != NULL ? *swpy_slot(plan, swpy_p_single) : NULL;
  PyObject *rules = plan != NULL ? *swpy_slot(plan, swpy_p_rules) : NULL;
  PyObject *policy = plan != NULL ? *swpy_slot(plan, swpy_p_policy) : NULL;
  if (rule != NULL && rule != Py_None && rules != NULL && policy != NULL &&
      (environ = PyObject_GetAttr(req, swpy_f_environ)) != NULL && PyDict_CheckExact(environ))
    key = swpy_wsgi_key(rule, environ);
  if (key == NULL) { /* the plan not made yet, another key: the Python path */
    if (!PyErr_Occurred()) {
      PyObject *a[2] = {ext, req};
      r = swpy_flask_py(swpy_f_before_py, a, 2);
    }
    goto done;
  }
  if ((out = swpy_web_enter(rule, key, rules)) == NULL) goto done;
  if (PyLong_CheckExact(out)) { /* not a plain pass */
    PyObject *a[5] = {ext, req, plan, key, out};
    r = swpy_flask_py(swpy_f_before_rc, a, 5);
    goto done;
  }
  /* (the request's environ: cheaper than flask.g) */
  if (PyDict_SetItem(environ, swpy_f_outcome, out) < 0 || PyDict_SetItem(environ, swpy_f_plan, plan) < 0) goto fail;
  PyObject *st = PyObject_GetAttr(core, swpy_f_style);
  int64_t style = st != NULL ? PyLong_AsLongLong(st) : -1;
  Py_XDECREF(st);
  if (style == -1 && PyErr_Occurred()) goto fail;
  if (style != 0) { /* the fields, added by wsgi_app's start_response */
    fields = swpy_web_fields(rule, style, swpy_slot_int(out, swpy_u_remaining), policy, 0);
    if (fields == Py_None) { /* a custom clock */
      PyObject *a[3] = {ext, out, plan};
      Py_SETREF(fields, swpy_flask_py(swpy_f_fields_py, a, 3));
    }
    if (fields == NULL || PyDict_SetItem(environ, swpy_f_fields, fields) < 0) goto fail;
  }
  r = swpy_ref(Py_None);
  goto done;
fail: /* the request's entry ends with the exception */
  swpy_outcome_end_raising(out, 1);
done:
  Py_XDECREF(core);
  Py_XDECREF(endpoint);
  Py_XDECREF(method);
  Py_XDECREF(environ);
  Py_XDECREF(key);
  Py_XDECREF(out);
  Py_XDECREF(fields);
  return r;
}


/* Flask's wsgi_app with the extension's start_response and end: made by
 * _flask_wsgi(inner, end_request) once per application. */
typedef struct {
  PyObject_HEAD PyObject *inner; /* Flask's wsgi_app */
  PyObject *end;                 /* _wsgi.end_request: the end of any other request */
  vectorcallfunc vectorcall;
} swpy_fwsgi;

static PyTypeObject *swpy_fwsgi_type;

/* A status line's code ("200 OK": 200), or -1 when it does not start with
 * three digits (end_request's int() decides then). */
static int swpy_status_code(PyObject *status) {
  if (!PyUnicode_Check(status) || PyUnicode_READY(status) < 0 || PyUnicode_KIND(status) != PyUnicode_1BYTE_KIND ||
      PyUnicode_GET_LENGTH(status) < 3) {
    PyErr_Clear();
    return -1;
  }
  const Py_UCS1 *s = PyUnicode_1BYTE_DATA(status);
  int code = 0;
  for (int i = 0; i < 3; i++) {
    if (s[i] < '0' || s[i] > '9') return -1;
    code = code * 10 + (s[i] - '0');
  }
  return code;
}

/* The end of the request of environ (its "libsw.outcome"; once): here for
 * an Outcome of the fast path whose plan reads no response, else
 * end_request. 0 or -1. */
static int swpy_fwsgi_end(swpy_fwsgi *f, PyObject *environ) {
  PyObject *out = PyDict_CheckExact(environ) ? PyDict_GetItemWithError(environ, swpy_f_outcome) : NULL;
  if (out == NULL && PyErr_Occurred()) return -1;
  if (PyDict_CheckExact(environ) && (out == NULL || out == Py_None)) return 0;
  PyObject *plan = out != NULL ? PyDict_GetItemWithError(environ, swpy_f_plan) : NULL;
  PyObject *st = plan != NULL ? PyDict_GetItemWithError(environ, swpy_f_status) : NULL;
  if (PyErr_Occurred()) return -1;
  int code = st == NULL ? 500
             : PyTuple_CheckExact(st) && PyTuple_GET_SIZE(st) == 2 ? swpy_status_code(PyTuple_GET_ITEM(st, 0))
                                                                  : -1;
  if (out != NULL && Py_TYPE(out) == swpy_outcome_type && plan != NULL && Py_TYPE(plan) == swpy_plan_type &&
      *swpy_slot(plan, swpy_p_needs) == Py_False && code >= 0)
    return swpy_outcome_end(out, code >= 500);
  PyObject *r = PyObject_CallOneArg(f->end, environ);
  Py_XDECREF(r);
  return r != NULL ? 0 : -1;
}

static PyObject *swpy_fwsgi_vcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
  swpy_fwsgi *f = (swpy_fwsgi *)self;
  if (PyVectorcall_NARGS(nargsf) != 2 || kwnames != NULL) {
    PyErr_SetString(PyExc_TypeError, "wsgi_app(environ, start_response)");
    return NULL;
  }
  if (swpy_flask_names() < 0) return NULL;
  PyObject *environ = args[0], *start = swpy_start_new(args[1], environ);
  if (start == NULL) return NULL;
  PyObject *call[2] = {environ, start};
  PyObject *result = PyObject_Vectorcall(f->inner, call, 2, NULL);
  Py_DECREF(start);
  if (result == NULL) { /* the request's entry ends with the exception */
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    PyObject *out = PyDict_Check(environ) ? PyDict_GetItemWithError(environ, swpy_f_outcome) : NULL;
    int bad = out == NULL && PyErr_Occurred();
    if (out != NULL && out != Py_None) { /* out.release(error=True) */
      Py_INCREF(out);
      if (Py_TYPE(out) == swpy_outcome_type) {
        bad = swpy_outcome_end(out, 1) < 0;
      } else {
        PyObject *a[2] = {out, Py_True};
        PyObject *r = PyObject_VectorcallMethod(swpy_f_release, a, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, swpy_f_kw_error);
        bad = r == NULL;
        Py_XDECREF(r);
      }
      Py_DECREF(out);
    }
    if (bad) /* what the release raised, in the context of the application's exception */
      _PyErr_ChainExceptions(et, ev, tb);
    else
      PyErr_Restore(et, ev, tb);
    return NULL;
  }
  if (swpy_fwsgi_end(f, environ) < 0) {
    Py_DECREF(result);
    return NULL;
  }
  return result;
}

static int swpy_fwsgi_traverse(PyObject *self, visitproc visit, void *arg) {
  Py_VISIT(((swpy_fwsgi *)self)->inner);
  Py_VISIT(((swpy_fwsgi *)self)->end);
  Py_VISIT(Py_TYPE(self));
  return 0;
}

static int swpy_fwsgi_clear(PyObject *self) {
  Py_CLEAR(((swpy_fwsgi *)self)->inner);
  Py_CLEAR(((swpy_fwsgi *)self)->end);
  return 0;
}

static PyMemberDef swpy_fwsgi_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(swpy_fwsgi, vectorcall), READONLY, NULL},
    {"wrapped", T_OBJECT, offsetof(swpy_fwsgi, inner), READONLY, "Flask's own wsgi_app."},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot swpy_fwsgi_slots[] = {
    {Py_tp_call, (void *)PyVectorcall_Call},
    {Py_tp_members, (void *)swpy_fwsgi_members},
    {Py_tp_traverse, (void *)swpy_fwsgi_traverse},
    {Py_tp_clear, (void *)swpy_fwsgi_clear},
    {Py_tp_dealloc, (void *)swpy_gc_dealloc},
    {Py_tp_doc, (void *)"Flask's wsgi_app adding libsw.web's fields and ending the request's entry."},
    {0, NULL},
};

static PyType_Spec swpy_fwsgi_spec = {"libsw._libsw.FlaskWsgiApp", sizeof(swpy_fwsgi), 0,
                                      Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
                                      swpy_fwsgi_slots};

/* _flask_wsgi(inner, end_request): the application's wsgi_app around inner. */
PyObject *swpy_f_flask_wsgi(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
  (void)mod;
  if (nargs != 2) {
    PyErr_SetString(PyExc_TypeError, "_flask_wsgi(wsgi_app, end_request)");
    return NULL;
  }
  if (swpy_flask_names() < 0) return NULL;
  if (swpy_fwsgi_type == NULL && (swpy_fwsgi_type = (PyTypeObject *)PyType_FromSpec(&swpy_fwsgi_spec)) == NULL)
    return NULL;
  swpy_fwsgi *f = PyObject_GC_New(swpy_fwsgi, swpy_fwsgi_type);
  if (f == NULL) return NULL;
  f->inner = swpy_ref(args[0]);
  f->end = swpy_ref(args[1]);
  f->vectorcall = swpy_fwsgi_vcall;
  PyObject_GC_Track(f);
  return (PyObject *)f;
}
