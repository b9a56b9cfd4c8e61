/* counters_speedups.c - the C sample of int64/float64 counters, and array payloads, in nvtx_cffi._speedups.
 *
 * CounterBase (below) is the C base of nvtx_cffi/_counters.py's counter classes: its C method
 * `sample` converts its argument to int64 or double and calls the shim's
 * nvtxcffi_counter_sample_int64/_float64(counter, value). Those two functions' addresses come from
 * the CFFI module (ffi.addressof), checked against the two the shim exports when bound
 * (bind_samplers), so no other address is ever called.
 * Values convert as nvtx 0.2.16's Cython methods convert them (int64: through __int__, so a float
 * truncates; float64: PyFloat_AsDouble), with the same exception types. */
#include "speedups.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef void (*sample_i64_fn)(int, int64_t);
typedef void (*sample_f64_fn)(int, double);

static sample_i64_fn g_i64;
static sample_f64_fn g_f64;

/* sample() of a value of the wrong type: TypeError naming the value's type (type(v).__name__, as the
 * pure path names it) and the counter's. */
static PyObject *sample_type_error(PyObject *v, int is_float)
{
    PyObject *name = PyType_GetName(Py_TYPE(v));
    if (name == NULL)
        return NULL;
    PyErr_Format(PyExc_TypeError, "sample() of %s takes %s, not %U",
                 is_float ? "a float64 counter" : "an int64 counter",
                 is_float ? "a real number" : "an int (or a number that int() truncates)", name);
    Py_DECREF(name);
    return NULL;
}

/* sample()'s conversion of `v` failed: the same exception type, a message naming the value and the
 * counter's type (other exceptions, from a user's __index__ or __float__, pass unchanged). */
static PyObject *sample_error(PyObject *v, int is_float)
{
    if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
        PyErr_Clear();
        PyErr_Format(PyExc_OverflowError, "sample() of %s: value is out of range (%s)",
                     is_float ? "a float64 counter" : "an int64 counter",
                     is_float ? "too large for a double" : "it must fit in int64");
    } else if (PyErr_ExceptionMatches(PyExc_TypeError)) {
        PyErr_Clear();
        sample_type_error(v, is_float);
    }
    return NULL;
}

/* int(v) (its __int__) failed in an int64 counter's sample(): a TypeError as sample_error's; an
 * exact ValueError or OverflowError (a NaN's, an infinity's) the same type, its message after
 * "sample() of an int64 counter: "; anything else (a subclass, a user's own exception) unchanged. */
static PyObject *sample_int_error(PyObject *v)
{
    if (PyErr_ExceptionMatches(PyExc_TypeError))
        return sample_error(v, 0);
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *exc = PyErr_GetRaisedException();
    PyObject *type = (PyObject *)Py_TYPE(exc);
    if (type != PyExc_ValueError && type != PyExc_OverflowError) {
        PyErr_SetRaisedException(exc);
        return NULL;
    }
    PyObject *text = PyObject_Str(exc);
    Py_DECREF(exc); /* (type: ValueError or OverflowError, builtins that outlive it) */
#else
    PyObject *type, *exc, *tb;
    PyErr_Fetch(&type, &exc, &tb);
    if (type != PyExc_ValueError && type != PyExc_OverflowError) {
        PyErr_Restore(type, exc, tb);
        return NULL;
    }
    PyErr_NormalizeException(&type, &exc, &tb);
    PyObject *text = PyObject_Str(exc);
    Py_XDECREF(exc);
    Py_XDECREF(tb);
#endif
    if (text != NULL) {
        PyErr_Format(type, "sample() of an int64 counter: %U", text);
        Py_DECREF(text);
    }
#if PY_VERSION_HEX < 0x030C0000
    Py_DECREF(type);
#endif
    return NULL;
}

/* Two C function addresses (ints from ffi.addressof) for `what`, into *a and *b: 0 with an error
 * set when they are not two non-NULL addresses, or differ from those bound before (cur_a, cur_b). */
static int two_addresses(const char *what, PyObject *const *args, Py_ssize_t nargs, void *cur_a, void *cur_b,
                         void **a, void **b)
{
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "%s takes two function addresses", what);
        return 0;
    }
    *a = PyLong_AsVoidPtr(args[0]);
    *b = PyLong_AsVoidPtr(args[1]);
    if (PyErr_Occurred())
        return 0;
    if (*a == NULL || *b == NULL) {
        PyErr_Format(PyExc_ValueError, "%s: NULL address", what);
        return 0;
    }
    if ((cur_a != NULL && cur_a != *a) || (cur_b != NULL && cur_b != *b)) {
        PyErr_Format(PyExc_ValueError, "%s: already bound to other functions", what);
        return 0;
    }
    return 1;
}

/* bind_samplers(i64_address, f64_address): the shim's two sample functions (ffi.addressof). */
static PyObject *bind_samplers(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    void *a, *b;
    if (!two_addresses("bind_samplers", args, nargs, (void *)g_i64, (void *)g_f64, &a, &b))
        return NULL;
    g_i64 = (sample_i64_fn)a;
    g_f64 = (sample_f64_fn)b;
    Py_RETURN_NONE;
}

/* The arguments of a call as the Python function fn(names...) binds them (positional or by keyword,
 * all required): 0, or -1 with the TypeError Python gives, checked in Python's order (keywords, then
 * the positional count). The count is of the arguments given: the pure path's sample is a function
 * (no self), and a method's "takes 2 positional arguments but 3 were given" reads as nonsense. */
static int check_args(const char *fn, const char *const *names, Py_ssize_t want, PyObject *const *args,
                      size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    (void)args;
    int seen = 0; /* bit i: argument i given (want is 1 or 2) */
    for (Py_ssize_t i = 0; i < n && i < want; ++i)
        seen |= 1 << i;
    for (Py_ssize_t k = 0; k < nkw; ++k) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, k);
        Py_ssize_t i = 0;
        for (; i < want; ++i)
            if (PyUnicode_CompareWithASCIIString(key, names[i]) == 0)
                break;
        if (i == want) {
            PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", fn, key);
            return -1;
        }
        if (seen & (1 << i)) {
            PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%s'", fn, names[i]);
            return -1;
        }
        seen |= 1 << i;
    }
    if (n > want) {
        PyErr_Format(PyExc_TypeError, "%s() takes %zd positional argument%s but %zd were given", fn, want,
                     want == 1 ? "" : "s", n);
        return -1;
    }
    const char *missing[2];
    Py_ssize_t m = 0;
    for (Py_ssize_t i = 0; i < want && m < 2; ++i)
        if (!(seen & (1 << i)))
            missing[m++] = names[i];
    if (m == 1)
        PyErr_Format(PyExc_TypeError, "%s() missing 1 required positional argument: '%s'", fn, missing[0]);
    else if (m == 2) /* (want is at most 2) */
        PyErr_Format(PyExc_TypeError, "%s() missing 2 required positional arguments: '%s' and '%s'", fn, missing[0],
                     missing[1]);
    return m == 0 ? 0 : -1;
}

/* CounterBase: the C base of nvtx_cffi's counter classes. `sample` is a METH_FASTCALL method of the
 * type, so `counter.sample(v)` is CPython's specialised method-descriptor call (no bound object, no
 * argument tuple) and sample(value=v) works too; the Python subclasses set the index with
 * _bind_sample(counter, is_float). */
typedef struct {
    PyObject_HEAD
    int counter;
    int kind; /* 0: not bound (sample raises), 1: int64, 2: float64 */
} CounterBase;

/* The int64 of a sample as nvtx converts it (Cython's int64_t argument): an int, or what int() takes
 * through __int__ (a float truncated, a NumPy scalar, a Decimal), not a str nor an object with
 * __index__ alone. 0, or -1 with the error set (__int__'s: see sample_int_error). */
static int sample_int64_of(PyObject *v, long long *x)
{
    PyObject *i;
    if (PyLong_Check(v)) {
        i = Py_NewRef(v);
    } else {
        PyNumberMethods *nb = Py_TYPE(v)->tp_as_number;
        if (nb == NULL || nb->nb_int == NULL) {
            sample_type_error(v, 0);
            return -1;
        }
        i = PyNumber_Long(v); /* nb_int first */
        if (i == NULL) {
            sample_int_error(v);
            return -1;
        }
    }
    *x = PyLong_AsLongLong(i);
    Py_DECREF(i);
    if (*x == -1 && PyErr_Occurred()) {
        sample_error(v, 0);
        return -1;
    }
    return 0;
}

static PyObject *value_name; /* "value", interned: sample(value=v)'s kwnames hold this object */

/* sample(value) with any arguments and any value: checked as nvtx checks them, converted as nvtx
 * converts them. */
static NOINLINE PyObject *counter_sample_any(CounterBase *c, PyObject *const *args, Py_ssize_t nargs,
                                             PyObject *kwnames)
{
    static const char *const names[] = {"value"};
    int one_value = nargs == 1 ? kwnames == NULL /* sample(v), or sample(value=v) spelt as Python spells it */
                               : nargs == 0 && kwnames != NULL && PyTuple_GET_SIZE(kwnames) == 1
                                     && PyTuple_GET_ITEM(kwnames, 0) == value_name;
    if (!one_value && check_args("sample", names, 1, args, (size_t)nargs, kwnames) < 0)
        return NULL;
    PyObject *v = args[0]; /* sample(v) or sample(value=v) */
    if (c->kind == 2) {
        double d = PyFloat_Check(v) ? PyFloat_AS_DOUBLE(v) : PyFloat_AsDouble(v);
        if (d == -1.0 && PyErr_Occurred())
            return sample_error(v, 1);
        g_f64(c->counter, d);
    } else if (c->kind == 1) {
        long long x;
        if (!small_int(v, &x) && sample_int64_of(v, &x) < 0)
            return NULL;
        g_i64(c->counter, (int64_t)x);
    } else {
        PyErr_SetString(PyExc_NotImplementedError, "Use Domain.get_counter() to create a concrete counter.");
        return NULL;
    }
    RETURN_NONE_AFTER_NVTX();
}

/* sample(v) of a small int or a float, the common case, with nothing live across the NVTX call;
 * anything else is counter_sample_any's. */
static PyObject *counter_sample(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    CounterBase *c = (CounterBase *)self;
    if (LIKELY(nargs == 1 && kwnames == NULL)) {
        PyObject *v = args[0];
        long long x;
        if (c->kind == 1 && small_int(v, &x))
            g_i64(c->counter, (int64_t)x);
        else if (c->kind == 2 && PyFloat_CheckExact(v))
            g_f64(c->counter, PyFloat_AS_DOUBLE(v));
        else
            return counter_sample_any(c, args, nargs, kwnames);
        RETURN_NONE_AFTER_NVTX();
    }
    return counter_sample_any(c, args, nargs, kwnames);
}

static PyObject *counter_bind_sample(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    CounterBase *c = (CounterBase *)self;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "_bind_sample(counter, is_float)");
        return NULL;
    }
    if (g_i64 == NULL || g_f64 == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_bind_sample: bind_samplers() was not called");
        return NULL;
    }
    long counter = PyLong_AsLong(args[0]);
    if (counter == -1 && PyErr_Occurred())
        return NULL;
    int is_float = PyObject_IsTrue(args[1]);
    if (is_float < 0)
        return NULL;
    if (counter < 0 || counter > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "_bind_sample: counter index out of range");
        return NULL;
    }
    c->counter = (int)counter;
    c->kind = is_float ? 2 : 1;
    Py_RETURN_NONE;
}

static PyMethodDef counter_base_methods[] = {
    {"sample", FUNC_CAST(counter_sample), METH_FASTCALL | METH_KEYWORDS,
     "sample(value): record one counter sample (C)."},
    {"_bind_sample", FUNC_CAST(counter_bind_sample), METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject CounterBaseType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "nvtx_cffi._speedups.CounterBase",
    .tp_basicsize = sizeof(CounterBase),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_new = PyType_GenericNew,
    .tp_methods = counter_base_methods,
    .tp_doc = "C base of nvtx_cffi's counters: sample() as a C method.",
};

/* NoOpCounterBase: the C base of the counter get_counter returns without a tool. Its methods do
 * nothing but check their arguments as the Python signatures would (sample(value),
 * sample_no_value(reason), batch_submit(values, timestamps): positional or by keyword). */
static PyObject *noop_sample(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    static const char *const names[] = {"value"};
    (void)self;
    if (PyVectorcall_NARGS(nargsf) == 1 && kwnames == NULL)
        Py_RETURN_NONE;
    if (check_args("sample", names, 1, args, nargsf, kwnames) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *noop_sample_no_value(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    static const char *const names[] = {"reason"};
    (void)self;
    if (check_args("sample_no_value", names, 1, args, nargsf, kwnames) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *noop_batch_submit(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    static const char *const names[] = {"values", "timestamps"};
    (void)self;
    if (check_args("batch_submit", names, 2, args, nargsf, kwnames) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef noop_methods[] = {
    {"sample", FUNC_CAST(noop_sample), METH_FASTCALL | METH_KEYWORDS, "Does nothing (no tool is attached)."},
    {"sample_no_value", FUNC_CAST(noop_sample_no_value), METH_FASTCALL | METH_KEYWORDS,
     "Does nothing (no tool is attached)."},
    {"batch_submit", FUNC_CAST(noop_batch_submit), METH_FASTCALL | METH_KEYWORDS,
     "Does nothing (no tool is attached)."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject NoOpCounterBaseType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "nvtx_cffi._speedups.NoOpCounterBase",
    .tp_basicsize = sizeof(PyObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_new = PyType_GenericNew,
    .tp_methods = noop_methods,
    .tp_doc = "C base of the do-nothing counter (no tool): its methods do nothing.",
};

/* ---- binary payloads: the per-call C part of nvtx_cffi/_payload.emit ----------------------------- */
typedef uint64_t (*emit_ext_fn)(int, int, int, const char *, uint32_t, uint32_t, uint64_t, const void *, size_t);
typedef uint64_t (*emit_counted_fn)(int, int, int, const char *, uint32_t, uint32_t, uint64_t, const void *, size_t,
                                    uint64_t);
static emit_ext_fn g_emit_ext;
static emit_counted_fn g_emit_counted;

/* bind_payloads(emit_ext_address, emit_ext_counted_address): the shim's two functions (ffi.addressof). */
static PyObject *bind_payloads(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    void *a, *b;
    if (!two_addresses("bind_payloads", args, nargs, (void *)g_emit_ext, (void *)g_emit_counted, &a, &b))
        return NULL;
    g_emit_ext = (emit_ext_fn)a;
    g_emit_counted = (emit_counted_fn)b;
    Py_RETURN_NONE;
}

/* emit_array(op, slot, domain, inline, scalar_schema, array_schema, array) -> the C call's result,
 * or None when this array is not for this path (not C-contiguous, empty, no buffer, a 0-d schema
 * missing...): then nothing was sent and the caller takes the general path. inline: None (the
 * prepared slot) or (message bytes, argb, category); array_schema 0: not registered yet. */
static PyObject *emit_array(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "emit_array(op, slot, domain, inline, scalar_schema, array_schema, array)");
        return NULL;
    }
    if (g_emit_ext == NULL || g_emit_counted == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "emit_array: bind_payloads() was not called");
        return NULL;
    }
    int op = (int)PyLong_AsLong(args[0]);
    int slot = (int)PyLong_AsLong(args[1]);
    int domain = (int)PyLong_AsLong(args[2]);
    unsigned long long scalar = PyLong_AsUnsignedLongLong(args[4]);
    unsigned long long vector = PyLong_AsUnsignedLongLong(args[5]);
    if (PyErr_Occurred())
        return NULL;
    const char *message = NULL;
    uint32_t argb = 0, category = 0;
    PyObject *inline_ = args[3];
    if (inline_ != Py_None) {
        if (!PyTuple_Check(inline_) || PyTuple_GET_SIZE(inline_) != 3 || !PyBytes_Check(PyTuple_GET_ITEM(inline_, 0)))
            Py_RETURN_NONE; /* (ffi.NULL, ...): the general path */
        message = PyBytes_AS_STRING(PyTuple_GET_ITEM(inline_, 0));
        argb = (uint32_t)PyLong_AsUnsignedLongMask(PyTuple_GET_ITEM(inline_, 1));
        category = (uint32_t)PyLong_AsUnsignedLongMask(PyTuple_GET_ITEM(inline_, 2));
        if (PyErr_Occurred())
            return NULL;
        slot = -1;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[6], &view, PyBUF_C_CONTIGUOUS) < 0) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    uint64_t result;
    if (view.len <= 0 || view.itemsize <= 0 || (view.ndim > 0 && vector == 0)) {
        PyBuffer_Release(&view);
        Py_RETURN_NONE;
    }
    if (view.ndim > 0)
        result = g_emit_counted(op, slot, domain, message, argb, category, vector, view.buf, (size_t)view.len,
                                (uint64_t)(view.len / view.itemsize));
    else
        result = g_emit_ext(op, slot, domain, message, argb, category, scalar, view.buf, (size_t)view.len);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLongLong(result);
}

static PyMethodDef counters_functions[] = {
    {"bind_payloads", FUNC_CAST(bind_payloads), METH_FASTCALL, "bind_payloads(emit_ext_address, emit_ext_counted_address)"},
    {"emit_array", FUNC_CAST(emit_array), METH_FASTCALL,
     "emit_array(op, slot, domain, inline, scalar_schema, array_schema, array) -> result, or None (not sent)"},
    {"bind_samplers", FUNC_CAST(bind_samplers), METH_FASTCALL, "bind_samplers(i64_address, f64_address)"},
    {NULL, NULL, 0, NULL},
};

int nvtxcffi_counters_init(PyObject *module)
{
    if (value_name == NULL && (value_name = PyUnicode_InternFromString("value")) == NULL)
        return -1;
    if (PyType_Ready(&CounterBaseType) < 0 || PyType_Ready(&NoOpCounterBaseType) < 0)
        return -1;
    Py_INCREF(&NoOpCounterBaseType);
    if (PyModule_AddObject(module, "NoOpCounterBase", (PyObject *)&NoOpCounterBaseType) < 0) {
        Py_DECREF(&NoOpCounterBaseType);
        return -1;
    }
    Py_INCREF(&CounterBaseType);
    if (PyModule_AddObject(module, "CounterBase", (PyObject *)&CounterBaseType) < 0) {
        Py_DECREF(&CounterBaseType);
        return -1;
    }
    return PyModule_AddFunctions(module, counters_functions);
}
