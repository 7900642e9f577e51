/* SPDX-License-Identifier: Apache-2.0 */
/* The fast paths of every form of a limiter, written against the Python C
 * API and installed by swpy_install() (libsw/_limiter.py calls it once):
 * RateLimiter's __enter__, __exit__, __aenter__, __aexit__ and
 * try_acquire, Permit's release, and the decorator's entry and exits
 * (functions of libsw._limiter).
 *
 * Why in C: a Python method costs an interpreter frame, and the interpreter
 * calls __enter__ and __aenter__ from C, which costs a new one; `async with`
 * awaits what __aenter__ and __aexit__ return: coroutines, unless they
 * return an awaitable that is already done. Each method here is one call of
 * swpy.c (and, for `async with`, a done awaitable), made with the GIL held:
 * these calls never wait (a wait is the Python slow path's), and take about
 * 100 ns, less than what releasing and retaking the GIL costs (about 680
 * instructions a decorated call, a fifth of its cost; docs/python.md,
 * "Threads, the GIL, speed"). Whatever is not a plain pass or a plain exit
 * goes to the Python methods (_enter_slow, _aenter_slow, _exit_slow,
 * _try_acquire, _try_acquired, Permit._failed), which decide and raise as
 * before, through CFFI, which releases the GIL. The attributes read here are
 * slots, read at their offsets. */
#include <Python.h>
#include <structmember.h>

#if PY_VERSION_HEX < 0x03090000
#define PyObject_Vectorcall _PyObject_Vectorcall
#endif

#include "swpy_pyutil.h"

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

/* ------------------------------------------------------------ slots */

static PyObject *swpy_s_enter_slow, *swpy_s_aenter_slow, *swpy_s_exit_slow, *swpy_s_try_acquire,
    *swpy_s_try_acquired, *swpy_s_try_acquired_key, *swpy_s_failed, *swpy_s_key, *swpy_s_error;
static PyTypeObject *swpy_permit_type, *swpy_kpermit_type;
static PyObject *swpy_zero, *swpy_one;
/* Offsets of slots: RateLimiter's _site_addr, _fast_site and _kfast_site,
 * Permit's, KeyPermit's _key. */
static Py_ssize_t swpy_o_site, swpy_o_fast, swpy_o_kfast, swpy_o_lim, swpy_o_n, swpy_o_tok, swpy_o_rem,
    swpy_o_key;

/* ---------------------------------------------------- with, async with */

/* The limiter's site (its slot _site_addr), or -1 with an exception. */
static int64_t swpy_site_of(PyObject *self) {
  int64_t site = swpy_slot_int(self, swpy_o_site);
  if (site <= 0 && !PyErr_Occurred()) PyErr_SetString(PyExc_AttributeError, "_site_addr");
  return site <= 0 ? -1 : site;
}

static int64_t swpy_enter_now(PyObject *self) {
  int64_t site = swpy_site_of(self);
  return site < 0 ? SW_EINVAL : swpy_with_enter(site);
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
  int64_t site = swpy_site_of(self);
  if (site < 0) return NULL;
  int64_t rc = error ? swpy_with_exit_err(site) : swpy_with_exit(site);
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

/* ------------------------------------------------------ the decorator */

/* _decorator_enter(site) and _decorator_exit_ok / _exit_err(token) of
 * libsw._limiter: swpy_enter_site and swpy_exit_ok / _err as functions of
 * one int, called by the decorator's wrapper in place of their CFFI
 * wrappers (which release the GIL and save errno around each call). */
static int64_t swpy_arg(PyObject *o) {
  int64_t v = PyLong_AsLongLong(o);
  return v == -1 && PyErr_Occurred() ? INT64_MIN : v;
}

static PyObject *swpy_f_enter(PyObject *mod, PyObject *site) {
  (void)mod;
  int64_t s = swpy_arg(site);
  return s == INT64_MIN ? NULL : PyLong_FromLongLong(swpy_enter_site(s));
}

static inline PyObject *swpy_f_exit(PyObject *token, int (*exit_token)(int64_t)) {
  int64_t t = swpy_arg(token);
  return t == INT64_MIN ? NULL : PyLong_FromLong(exit_token(t));
}

static PyObject *swpy_f_exit_ok(PyObject *mod, PyObject *token) {
  (void)mod;
  return swpy_f_exit(token, swpy_exit_ok);
}

static PyObject *swpy_f_exit_err(PyObject *mod, PyObject *token) {
  (void)mod;
  return swpy_f_exit(token, swpy_exit_err);
}

/* ---------------------------------------------------------- keyed */

/* _kenter(site, key, n): swpy_kacquire of a key (str or bytes). */
static PyObject *swpy_f_kenter(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
  (void)mod;
  if (nargs != 3) {
    PyErr_SetString(PyExc_TypeError, "_kenter(site, key, n)");
    return NULL;
  }
  int64_t site = swpy_int_arg(args[0]), n = swpy_int_arg(args[2]);
  if (site == INT64_MIN || n == INT64_MIN) return NULL;
  return PyLong_FromLongLong(swpy_kenter_obj(site, 0, 0, args[1], n));
}

/* _kenter_at(site, t, key, n): at t of the site's custom clock. */
static PyObject *swpy_f_kenter_at(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
  (void)mod;
  if (nargs != 4) {
    PyErr_SetString(PyExc_TypeError, "_kenter_at(site, t, key, n)");
    return NULL;
  }
  int64_t site = swpy_int_arg(args[0]), t = swpy_int_arg(args[1]), n = swpy_int_arg(args[3]);
  if (site == INT64_MIN || t == INT64_MIN || n == INT64_MIN) return NULL;
  return PyLong_FromLongLong(swpy_kenter_obj(site, t, 1, args[2], n));
}

/* _release(token) / _release_err(token): the remaining count (>= 0), or a
 * negative result (SWPY_STALE: released before). */
static PyObject *swpy_f_release(PyObject *mod, PyObject *token) {
  (void)mod;
  int64_t t = swpy_int_arg(token);
  return t == INT64_MIN ? NULL : PyLong_FromLongLong(swpy_release_ok(t));
}

static PyObject *swpy_f_release_err(PyObject *mod, PyObject *token) {
  (void)mod;
  int64_t t = swpy_int_arg(token);
  return t == INT64_MIN ? NULL : PyLong_FromLongLong(swpy_release_err(t));
}

/* _remaining(): the remaining count of this thread's last decision. */
static PyObject *swpy_f_remaining(PyObject *mod, PyObject *unused) {
  (void)mod;
  (void)unused;
  return PyLong_FromLongLong(swpy_remaining());
}

static PyMethodDef swpy_kfunctions[] = {
    {"_kenter", (PyCFunction)(void (*)(void))swpy_f_kenter, METH_FASTCALL,
     "_kenter(site, key, n, /)\n--\n\nswpy_kacquire: a token, or a negative result."},
    {"_kenter_at", (PyCFunction)(void (*)(void))swpy_f_kenter_at, METH_FASTCALL,
     "_kenter_at(site, t, key, n, /)\n--\n\nswpy_kacquire_at: a token, or a negative result."},
    {"_release", swpy_f_release, METH_O,
     "_release(token, /)\n--\n\nswpy_release_ok: the remaining count, or a negative result."},
    {"_release_err", swpy_f_release_err, METH_O,
     "_release_err(token, /)\n--\n\nswpy_release_err: the remaining count, or a negative result."},
    {"_remaining", swpy_f_remaining, METH_NOARGS,
     "_remaining()\n--\n\nThe remaining count of this thread's last decision."},
    {NULL, NULL, 0, NULL},
};

static PyMethodDef swpy_functions[] = {
    {"_decorator_enter", swpy_f_enter, METH_O,
     "_decorator_enter(site, /)\n--\n\nswpy_enter_site(site): a token, or a negative result."},
    {"_decorator_exit_ok", swpy_f_exit_ok, METH_O,
     "_decorator_exit_ok(token, /)\n--\n\nswpy_exit_ok(token): 0 or a negative sw_err code."},
    {"_decorator_exit_err", swpy_f_exit_err, METH_O,
     "_decorator_exit_err(token, /)\n--\n\nswpy_exit_err(token): 0 or a negative sw_err code."},
    {NULL, NULL, 0, NULL},
};

/* ------------------------------------------------ try_acquire, release */

/* A new permit of type tp (Permit or KeyPermit: no __new__ or __init__ of
 * their own, so their allocation is their making) for token tok of self. */
static PyObject *swpy_new_permit(PyTypeObject *tp, PyObject *self, int64_t tok) {
  PyObject *t = PyLong_FromLongLong(tok);
  PyObject *p = t == NULL ? NULL : tp->tp_alloc(tp, 0);
  if (p == NULL) { /* (the entry stays in flight, like a permit never released) */
    Py_XDECREF(t);
    return NULL;
  }
  swpy_slot_set(p, swpy_o_lim, swpy_ref(self));
  swpy_slot_set(p, swpy_o_n, swpy_ref(swpy_one));
  swpy_slot_set(p, swpy_o_tok, t);
  return p;
}

/* try_acquire(n=1, *, key=None): one unit and no custom clock here, with a
 * key of a keyed table (str or bytes) or none. */
static PyObject *swpy_m_try_acquire(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                    PyObject *kwnames) {
  int plain = nargs == 0 || (nargs == 1 && args[0] == swpy_one); /* (the small int 1: not True) */
  PyObject *key = Py_None;
  if (plain && kwnames != NULL) {
    plain = PyTuple_GET_SIZE(kwnames) == 1 &&
            PyUnicode_Compare(PyTuple_GET_ITEM(kwnames, 0), swpy_s_key) == 0;
    if (plain) key = args[nargs];
  }
  int64_t site = plain ? swpy_slot_int(self, key == Py_None ? swpy_o_fast : swpy_o_kfast) : 0;
  if (PyErr_Occurred()) return NULL;
  if (site > 0 && key == Py_None) {
    int64_t tok = swpy_acquire_site(site);
    if (tok <= 0) return swpy_slow(self, swpy_s_try_acquired, tok, NULL);
    return swpy_new_permit(swpy_permit_type, self, tok);
  }
  if (site > 0) {
    int64_t tok = swpy_kenter_obj(site, 0, 0, key, 1);
    if (tok > 0) {
      PyObject *p = swpy_new_permit(swpy_kpermit_type, self, tok);
      if (p != NULL) swpy_slot_set(p, swpy_o_key, swpy_ref(key));
      return p;
    }
    if (tok == SWPY_NOT_PASS) { /* _try_acquired_key(rc, key): the decision, from Python */
      PyObject *rc = PyLong_FromLongLong(tok), *r = NULL;
      if (rc != NULL) r = PyObject_CallMethodObjArgs(self, swpy_s_try_acquired_key, rc, key, NULL);
      Py_XDECREF(rc);
      return r;
    }
  } /* nothing entered (another form, a key the record cannot keep, an error): Python's path */
  PyObject *m = PyObject_GetAttr(self, swpy_s_try_acquire);
  if (m == NULL) return NULL;
  PyObject *r = PyObject_Vectorcall(m, args, nargs, kwnames);
  Py_DECREF(m);
  return r;
}

/* Permit.release(error=False). */
static PyObject *swpy_m_release(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames) {
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  if (nargs + nkw > 1 || (nkw == 1 && PyUnicode_Compare(PyTuple_GET_ITEM(kwnames, 0), swpy_s_error))) {
    PyErr_SetString(PyExc_TypeError, "release() takes one argument, error");
    return NULL;
  }
  int error = nargs + nkw == 1 ? PyObject_IsTrue(args[0]) : 0;
  if (error < 0) return NULL;
  int64_t tok = swpy_slot_int(self, swpy_o_tok);
  if (tok <= 0) {
    if (PyErr_Occurred()) return NULL;
    Py_RETURN_NONE; /* released already, or refused */
  }
  int64_t rem = error ? swpy_release_err(tok) : swpy_release_ok(tok);
  if (rem < 0) { /* Permit._failed(tok, rc) */
    PyObject *t = PyLong_FromLongLong(tok), *c = PyLong_FromLongLong(rem), *r = NULL;
    if (t != NULL && c != NULL) r = PyObject_CallMethodObjArgs(self, swpy_s_failed, t, c, NULL);
    Py_XDECREF(t);
    Py_XDECREF(c);
    return r;
  }
  PyObject *r = PyLong_FromLongLong(rem);
  if (r == NULL) return NULL;
  swpy_slot_set(self, swpy_o_rem, r);
  swpy_slot_set(self, swpy_o_tok, swpy_ref(swpy_zero));
  Py_RETURN_NONE;
}

/* tp_finalize of the permit classes: a permit dropped unreleased leaves
 * its entry in flight (docs/python.md) but gives its token's record back. */
static void swpy_permit_finalize(PyObject *self) {
  PyObject *tok = *swpy_slot(self, swpy_o_tok);
  if (tok == NULL || !PyLong_CheckExact(tok)) return;
  PyObject *et, *ev, *tb;
  PyErr_Fetch(&et, &ev, &tb);
  int64_t t = PyLong_AsLongLong(tok);
  if (t > 0) swpy_abandon(t);
  PyErr_Clear();
  PyErr_Restore(et, ev, tb);
}

static PyMethodDef swpy_methods[] = {
    {"__enter__", swpy_m_enter, METH_NOARGS,
     "__enter__($self, /)\n--\n\nEnter with one unit: BlockedError when refused, unless the "
     "limiter blocks; a wait is waited for (time.sleep)."},
    {"__exit__", (PyCFunction)(void (*)(void))swpy_m_exit, METH_FASTCALL,
     "__exit__($self, et, ev, tb, /)\n--\n\nEnd the latest entry of this limiter in this thread "
     "or task (an exception counted when et is not None); RuntimeError without one."},
    {"__aenter__", swpy_m_aenter, METH_NOARGS,
     "__aenter__($self, /)\n--\n\n__enter__ for `async with`: waits with asyncio.sleep."},
    {"__aexit__", (PyCFunction)(void (*)(void))swpy_m_aexit, METH_FASTCALL,
     "__aexit__($self, et, ev, tb, /)\n--\n\n__exit__ for `async with`."},
    {"try_acquire", (PyCFunction)(void (*)(void))swpy_m_try_acquire, METH_FASTCALL | METH_KEYWORDS,
     "try_acquire($self, /, n=1, *, key=None)\n--\n\nEnter with n units without raising on a "
     "refusal: a Permit, true when admitted (release it when done), false with retry_after when "
     "refused. An admission that must wait (pacing) is waited for with time.sleep first."},
    {NULL, NULL, 0, NULL},
};

static PyMethodDef swpy_permit_methods[] = {
    {"release", (PyCFunction)(void (*)(void))swpy_m_release, METH_FASTCALL | METH_KEYWORDS,
     "release($self, /, error=False)\n--\n\nEnd the admitted work (once; later calls do "
     "nothing): records its response time, a success, or an exception with error=True."},
    {NULL, NULL, 0, NULL},
};

/* Set methods on cls: 0 or -1. */
static int swpy_set_methods(PyObject *cls, PyMethodDef *defs) {
  for (PyMethodDef *m = defs; m->ml_name != NULL; m++) {
    PyObject *d = PyDescr_NewMethod((PyTypeObject *)cls, m);
    if (d == NULL || PyObject_SetAttrString(cls, m->ml_name, d) < 0) {
      Py_XDECREF(d);
      return -1;
    }
    Py_DECREF(d);
  }
  return 0;
}

/* Set functions on module mod: 0 or -1. */
static int swpy_set_functions(const char *mod, PyMethodDef *defs) {
  PyObject *m = PyImport_ImportModule(mod);
  if (m == NULL) return -1;
  int rc = 0;
  for (PyMethodDef *d = defs; rc == 0 && d->ml_name != NULL; d++) {
    PyObject *f = PyCFunction_NewEx(d, NULL, NULL);
    rc = f == NULL ? -1 : PyObject_SetAttrString(m, d->ml_name, f);
    Py_XDECREF(f);
  }
  Py_DECREF(m);
  return rc;
}

/* The class name of module libsw.<mod>: a new reference, or NULL. */
static PyObject *swpy_class(const char *mod, const char *name) {
  PyObject *m = PyImport_ImportModule(mod), *c;
  if (m == NULL) return NULL;
  c = PyObject_GetAttrString(m, name);
  Py_DECREF(m);
  if (c != NULL && !PyType_Check(c)) {
    PyErr_Format(PyExc_TypeError, "%s.%s is not a class", mod, name);
    Py_CLEAR(c);
  }
  return c;
}

static PyObject *swpy_intern(const char *s) { return PyUnicode_InternFromString(s); }

/* Install the methods on libsw._limiter.RateLimiter and libsw._permit.Permit:
 * 0, or -1 with the Python error printed. */
int swpy_install(void) {
  PyGILState_STATE g = PyGILState_Ensure();
  int rc = -1;
  PyObject *lim = NULL, *permit = NULL, *kpermit = NULL;
  if (swpy_done_type == NULL) {
    swpy_done_type = (PyTypeObject *)PyType_FromSpec(&swpy_done_spec);
    if (swpy_done_type == NULL || (swpy_done_none = swpy_done_new(Py_None)) == NULL) goto out;
    if (!(swpy_s_enter_slow = swpy_intern("_enter_slow")) ||
        !(swpy_s_aenter_slow = swpy_intern("_aenter_slow")) ||
        !(swpy_s_exit_slow = swpy_intern("_exit_slow")) ||
        !(swpy_s_try_acquire = swpy_intern("_try_acquire")) ||
        !(swpy_s_try_acquired = swpy_intern("_try_acquired")) ||
        !(swpy_s_try_acquired_key = swpy_intern("_try_acquired_key")) ||
        !(swpy_s_failed = swpy_intern("_failed")) || !(swpy_s_key = swpy_intern("key")) ||
        !(swpy_s_error = swpy_intern("error")) || !(swpy_zero = PyLong_FromLong(0)) ||
        !(swpy_one = PyLong_FromLong(1)))
      goto out;
  }
  if (!(lim = swpy_class("libsw._limiter", "RateLimiter")) ||
      !(permit = swpy_class("libsw._permit", "Permit")) ||
      !(kpermit = swpy_class("libsw._keyed", "KeyPermit")))
    goto out;
  if ((swpy_o_site = swpy_slot_offset(lim, "_site_addr")) < 0 ||
      (swpy_o_fast = swpy_slot_offset(lim, "_fast_site")) < 0 ||
      (swpy_o_kfast = swpy_slot_offset(lim, "_kfast_site")) < 0 ||
      (swpy_o_key = swpy_slot_offset(kpermit, "_key")) < 0 ||
      (swpy_o_lim = swpy_slot_offset(permit, "_lim")) < 0 ||
      (swpy_o_n = swpy_slot_offset(permit, "n")) < 0 ||
      (swpy_o_tok = swpy_slot_offset(permit, "_tok")) < 0 ||
      (swpy_o_rem = swpy_slot_offset(permit, "_rem")) < 0)
    goto out;
  Py_XSETREF(swpy_permit_type, (PyTypeObject *)swpy_ref(permit));
  Py_XSETREF(swpy_kpermit_type, (PyTypeObject *)swpy_ref(kpermit));
  if (swpy_set_methods(lim, swpy_methods) < 0 || swpy_set_methods(permit, swpy_permit_methods) < 0 ||
      swpy_set_finalizer(permit, swpy_permit_finalize) < 0 ||
      swpy_set_functions("libsw._limiter", swpy_functions) < 0 ||
      swpy_set_functions("libsw._keyed", swpy_kfunctions) < 0)
    goto out;
  rc = 0;
out:
  if (rc < 0) PyErr_Print();
  Py_XDECREF(lim);
  Py_XDECREF(permit);
  Py_XDECREF(kpermit);
  PyGILState_Release(g);
  return rc;
}
