/* SPDX-License-Identifier: Apache-2.0 */
/* What the C methods of the binding (swpy_py.c, swpy_web.c) share: slots
 * of Python classes read and written at their offsets, int arguments, and
 * a key object's bytes for a keyed entry. */
#ifndef SWPY_PYUTIL_H
#define SWPY_PYUTIL_H

#include <Python.h>
#include <structmember.h>

#include "swpy.h"

static inline PyObject *swpy_ref(PyObject *o) {
  Py_INCREF(o);
  return o;
}

/* tp_dealloc of a GC heap type whose tp_clear drops every reference it
 * holds: an instance holds its type. */
static inline void swpy_gc_dealloc(PyObject *self) {
  PyTypeObject *tp = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  tp->tp_clear(self);
  PyObject_GC_Del(self);
  Py_DECREF(tp);
}

static inline PyObject **swpy_slot(PyObject *o, Py_ssize_t off) {
  return (PyObject **)((char *)o + off);
}

/* An int slot (0 when unset). */
static inline int64_t swpy_slot_int(PyObject *o, Py_ssize_t off) {
  PyObject *v = *swpy_slot(o, off);
  return v == NULL ? 0 : PyLong_AsLongLong(v);
}

/* Set a slot to a new reference (value stolen). */
static inline void swpy_slot_set(PyObject *o, Py_ssize_t off, PyObject *value) {
  PyObject **slot = swpy_slot(o, off), *old = *slot;
  *slot = value;
  Py_XDECREF(old);
}

/* The offset of slot name of cls; -1 with an exception. */
static inline Py_ssize_t swpy_slot_offset(PyObject *cls, const char *name) {
  PyObject *d = PyObject_GetAttrString(cls, name);
  if (d == NULL) return -1;
  Py_ssize_t off = -1;
  if (Py_TYPE(d) == &PyMemberDescr_Type && ((PyMemberDescrObject *)d)->d_member->type == T_OBJECT_EX)
    off = ((PyMemberDescrObject *)d)->d_member->offset;
  else
    PyErr_Format(PyExc_TypeError, "%s is not a slot", name);
  Py_DECREF(d);
  return off;
}

/* A key's bytes: a str's UTF-8 (cached by the str) or a bytes' own; -1
 * (no exception) for anything else, which Python's path encodes. */
static inline int swpy_key_bytes(PyObject *key, const char **p, Py_ssize_t *len) {
  if (PyUnicode_CheckExact(key)) {
    *p = PyUnicode_AsUTF8AndSize(key, len);
    if (*p != NULL) return 0;
    PyErr_Clear(); /* lone surrogates: Python's path (surrogateescape) */
    return -1;
  }
  if (PyBytes_CheckExact(key)) {
    *p = PyBytes_AS_STRING(key);
    *len = PyBytes_GET_SIZE(key);
    return 0;
  }
  return -1;
}

/* swpy_kacquire(_at) of a key object: a token, SWPY_SLOW (nothing entered:
 * not a str or bytes, or over the 65,535 bytes a table takes, which
 * Python's path digests or refuses), or a result. */
static inline int64_t swpy_kenter_obj(int64_t site, int64_t t, int clocked, PyObject *key, int64_t n) {
  const char *p;
  Py_ssize_t len;
  if (swpy_key_bytes(key, &p, &len) < 0 || len > 65535) return SWPY_SLOW;
  return clocked ? swpy_kacquire_at(site, t, p, (size_t)len, n)
                 : swpy_kacquire(site, p, (size_t)len, n);
}

/* An int argument, or INT64_MIN with an exception. */
static inline int64_t swpy_int_arg(PyObject *o) {
  int64_t v = PyLong_AsLongLong(o);
  return v == -1 && PyErr_Occurred() ? INT64_MIN : v;
}

/* Give a class and its subclasses made so far the finalizer fn (a record
 * of an entry a dropped object held goes back): 0 or -1. */
static inline int swpy_set_finalizer(PyObject *cls, destructor fn) {
  PyTypeObject *tp = (PyTypeObject *)cls;
  tp->tp_finalize = fn;
  PyType_Modified(tp);
  PyObject *subs = PyObject_CallMethod(cls, "__subclasses__", NULL);
  if (subs == NULL) return -1;
  int rc = 0;
  for (Py_ssize_t i = 0; rc == 0 && i < PyList_GET_SIZE(subs); i++)
    rc = swpy_set_finalizer(PyList_GET_ITEM(subs, i), fn);
  Py_DECREF(subs);
  return rc;
}

#endif
