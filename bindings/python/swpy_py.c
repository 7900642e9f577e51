/* The special methods of `with` and `async with` of libsw.RateLimiter,
 * written against the Python C API and installed on the class by
 * swpy_install() (libsw/_limiter.py calls it once).
 *
 * Why in C: the interpreter calls __enter__ and __aenter__ from C, which
 * costs a new interpreter frame when they are Python functions (about as
 * much as the rest of the entry), and `async with` awaits what __aenter__
 * and __aexit__ return: coroutines, unless they return an awaitable that is
 * already done. Here each is one call of swpy.c (the GIL released around it,
 * as CFFI does) and, for `async with`, a done awaitable. Whatever is not a
 * plain pass or a plain exit goes to the Python methods of the limiter
 * (_enter_slow, _aenter_slow, _exit_slow), which decide and raise as
 * before. */
#include <Python.h>

#include "swpy.h"

static PyObject *swpy_ref(PyObject *o) {
  Py_INCREF(o);
  return o;
}

/* ------------------------------------------------- a done awaitable */

/* Awaiting it gives value at once, without suspending. */
typedef struct {
  PyObject_HEAD PyObject *value;
} swpy_done;

static PyTypeObject *swpy_done_type;
static PyObject *swpy_done_none; /* gives None: what __aexit__ returns */

static PyObject *swpy_done_new(PyObject *value) {
  swpy_done *d = PyObject_New(swpy_done, swpy_done_type);
  if (d != NULL) d->value = swpy_ref(value);
  return (PyObject *)d;
}

static void swpy_done_dealloc(PyObject *self) {
  PyTypeObject *tp = Py_TYPE(self);
  Py_DECREF(((swpy_done *)self)->value);
  PyObject_Free(self);
  Py_DECREF(tp); /* an instance of a heap type holds its type */
}

static PyObject *swpy_done_await(PyObject *self) { return swpy_ref(self); }

/* The iterator protocol (awaiting without am_send): StopIteration(value). */
static PyObject *swpy_done_next(PyObject *self) {
  PyObject *e = PyObject_CallFunctionObjArgs(PyExc_StopIteration, ((swpy_done *)self)->value, NULL);
  if (e != NULL) {
    PyErr_SetObject(PyExc_StopIteration, e);
    Py_DECREF(e);
  }
  return NULL;
}

#if PY_VERSION_HEX >= 0x030A0000
static PySendResult swpy_done_send(PyObject *self, PyObject *arg, PyObject **result) {
  (void)arg;
  *result = swpy_ref(((swpy_done *)self)->value);
  return PYGEN_RETURN;
}
#endif

static PyType_Slot swpy_done_slots[] = {
    {Py_tp_dealloc, (void *)swpy_done_dealloc},
    {Py_am_await, (void *)swpy_done_await},
    {Py_tp_iter, (void *)swpy_done_await},
    {Py_tp_iternext, (void *)swpy_done_next},
#if PY_VERSION_HEX >= 0x030A0000
    {Py_am_send, (void *)swpy_done_send},
#endif
    {Py_tp_doc, (void *)"An awaitable that is done (libsw's async with)."},
    {0, NULL},
};

static PyType_Spec swpy_done_spec = {
    "libsw._libsw.Done", sizeof(swpy_done), 0, Py_TPFLAGS_DEFAULT, swpy_done_slots,
};

/* ------------------------------------------------------ the methods */

static PyObject *swpy_s_site, *swpy_s_enter_slow, *swpy_s_aenter_slow, *swpy_s_exit_slow;

/* The limiter's site (its attribute _site_addr), or -1 with an exception. */
static int64_t swpy_site_of(PyObject *self) {
  PyObject *o = PyObject_GetAttr(self, swpy_s_site);
  if (o == NULL) return -1;
  int64_t site = PyLong_AsLongLong(o);
  Py_DECREF(o);
  return site;
}

static int64_t swpy_enter_now(PyObject *self) {
  int64_t site = swpy_site_of(self), rc;
  if (site < 0) return SW_EINVAL;
  Py_BEGIN_ALLOW_THREADS
  rc = swpy_with_enter(site);
  Py_END_ALLOW_THREADS
  return rc;
}

/* slow(rc, error): a Python method of the limiter. */
static PyObject *swpy_slow(PyObject *self, PyObject *name, int64_t rc, PyObject *error) {
  if (PyErr_Occurred()) return NULL;
  PyObject *r = PyLong_FromLongLong(rc);
  if (r == NULL) return NULL;
  PyObject *out = PyObject_CallMethodObjArgs(self, name, r, error, NULL);
  Py_DECREF(r);
  return out;
}

static PyObject *swpy_m_enter(PyObject *self, PyObject *unused) {
  (void)unused;
  int64_t rc = swpy_enter_now(self);
  return rc == 0 ? swpy_ref(self) : swpy_slow(self, swpy_s_enter_slow, rc, NULL);
}

static PyObject *swpy_m_aenter(PyObject *self, PyObject *unused) {
  (void)unused;
  int64_t rc = swpy_enter_now(self);
  return rc == 0 ? swpy_done_new(self) : swpy_slow(self, swpy_s_aenter_slow, rc, NULL);
}

/* __exit__(et, ev, tb): None, or the exception of _exit_slow. */
static PyObject *swpy_exit_now(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  if (nargs != 3) {
    PyErr_Format(PyExc_TypeError, "__exit__ takes 3 arguments (%zd given)", nargs);
    return NULL;
  }
  int error = args[0] != Py_None;
  int64_t site = swpy_site_of(self), rc;
  if (site < 0) return NULL;
  Py_BEGIN_ALLOW_THREADS
  rc = error ? swpy_with_exit_err(site) : swpy_with_exit(site);
  Py_END_ALLOW_THREADS
  if (rc == 0) Py_RETURN_NONE;
  return swpy_slow(self, swpy_s_exit_slow, rc, error ? Py_True : Py_False);
}

static PyObject *swpy_m_exit(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  return swpy_exit_now(self, args, nargs);
}

static PyObject *swpy_m_aexit(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  PyObject *r = swpy_exit_now(self, args, nargs);
  if (r == NULL) return NULL;
  Py_DECREF(r);
  return swpy_ref(swpy_done_none);
}

static PyMethodDef swpy_methods[] = {
    {"__enter__", swpy_m_enter, METH_NOARGS, "Enter the limiter (BlockedError when refused)."},
    {"__exit__", (PyCFunction)(void (*)(void))swpy_m_exit, METH_FASTCALL,
     "Exit the latest entry of this thread or task; an exception is counted."},
    {"__aenter__", swpy_m_aenter, METH_NOARGS, "async with: enter (waits with asyncio.sleep)."},
    {"__aexit__", (PyCFunction)(void (*)(void))swpy_m_aexit, METH_FASTCALL,
     "async with: exit the latest entry of this task."},
    {NULL, NULL, 0, NULL},
};

/* Install the methods on libsw._limiter.RateLimiter: 0, or -1 with the
 * Python error printed (the import then fails on a missing __enter__). */
int swpy_install(void) {
  PyGILState_STATE g = PyGILState_Ensure();
  int rc = -1;
  PyObject *mod = NULL, *cls = NULL;
  if (swpy_done_type == NULL) {
    swpy_done_type = (PyTypeObject *)PyType_FromSpec(&swpy_done_spec);
    if (swpy_done_type == NULL || (swpy_done_none = swpy_done_new(Py_None)) == NULL) goto out;
    swpy_s_site = PyUnicode_InternFromString("_site_addr");
    swpy_s_enter_slow = PyUnicode_InternFromString("_enter_slow");
    swpy_s_aenter_slow = PyUnicode_InternFromString("_aenter_slow");
    swpy_s_exit_slow = PyUnicode_InternFromString("_exit_slow");
    if (!swpy_s_site || !swpy_s_enter_slow || !swpy_s_aenter_slow || !swpy_s_exit_slow) goto out;
  }
  if ((mod = PyImport_ImportModule("libsw._limiter")) == NULL) goto out;
  if ((cls = PyObject_GetAttrString(mod, "RateLimiter")) == NULL) goto out;
  if (!PyType_Check(cls)) {
    PyErr_SetString(PyExc_TypeError, "libsw._limiter.RateLimiter is not a class");
    goto out;
  }
  for (PyMethodDef *m = swpy_methods; m->ml_name != NULL; m++) {
    PyObject *d = PyDescr_NewMethod((PyTypeObject *)cls, m);
    if (d == NULL || PyObject_SetAttrString(cls, m->ml_name, d) < 0) {
      Py_XDECREF(d);
      goto out;
    }
    Py_DECREF(d);
  }
  rc = 0;
out:
  if (rc < 0) PyErr_Print();
  Py_XDECREF(cls);
  Py_XDECREF(mod);
  PyGILState_Release(g);
  return rc;
}
