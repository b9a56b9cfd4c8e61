/* accel_function.c - a C callable standing for a Python function (part of nvtx_cffi._speedups): a
 * decorated function (push, call, pop even on error), or a module-level/Domain fast path whose body
 * accel.c's install() picks (its Python twin is __wrapped__); functools.wraps metadata lives in its
 * __dict__.
 */
#include "accel.h"

/* -- decorated functions: push, call, pop (also when the call raises) -- */

/* A Python function (guard off), called through its own vectorcall (a field of the function
 * object, as PyFunction_SetVectorcall sets it): PyObject_Vectorcall would look up the thread state
 * (a TLS call where libpython is shared) and check the result against the error indicator, which a
 * Python function always leaves consistent. */
static inline PyObject *call_python_function(PyObject *func, PyObject *const *args, size_t nargsf,
                                             PyObject *kwnames)
{
    vectorcallfunc call = ((PyFunctionObject *)func)->vectorcall;
    return LIKELY(call != NULL) ? call(func, args, nargsf, kwnames) : PyObject_Vectorcall(func, args, nargsf, kwnames);
}

/* The tool's push callback raised (a Python-based tool failed): close the range it opened, keep the
 * exception. */
static NOINLINE PyObject *decorated_push_raised(function_object *self)
{
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    nvtxcffi_shim.pop(self->domain_index);
    PyErr_Restore(type, value, traceback);
    return NULL;
}

/* Any decorated callable: guarded against recursion as CPython guards a call from C (a Python
 * function is guarded by its own frame), its attributes pushed from the slot or, where they have
 * none (a payload), through emit_push. */
static NOINLINE PyObject *decorated_call_any(function_object *self, PyObject *const *args, size_t nargsf,
                                             PyObject *kwnames)
{
    PyThreadState *tstate = PyThreadState_Get();
    int guard = self->guard_recursion;
    if (guard && Py_EnterRecursiveCall(" while calling an annotated function"))
        return NULL;
    if (self->slot >= 0)
        nvtxcffi_shim.push(self->slot);
    else if (emit_push(self->attributes) < 0) {
        if (guard)
            Py_LeaveRecursiveCall();
        return NULL;
    }
    if (TOOL_RAISED_IN(tstate)) {
        decorated_push_raised(self);
        if (guard)
            Py_LeaveRecursiveCall();
        return NULL;
    }
    PyObject *result = guard ? PyObject_Vectorcall(self->func, args, nargsf, kwnames)
                             : call_python_function(self->func, args, nargsf, kwnames);
    nvtxcffi_shim.pop(self->domain_index);
    if (result != NULL && TOOL_RAISED_IN(tstate))
        Py_CLEAR(result);
    if (guard)
        Py_LeaveRecursiveCall();
    return result;
}

/* The common case, a Python function with a pre-built slot, with nothing else live across its
 * calls. One thread-state lookup for both checks: on a shared libpython (3.12+) each lookup is a
 * __tls_get_addr call of ~5 ns, as much as the two NVTX calls. */
static PyObject *decorated_call(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    function_object *self = (function_object *)op;
    if (UNLIKELY(self->guard_recursion || self->slot < 0))
        return decorated_call_any(self, args, nargsf, kwnames);
    PyThreadState *tstate = PyThreadState_Get();
    nvtxcffi_shim.push(self->slot);
    if (UNLIKELY(TOOL_RAISED_IN(tstate)))
        return decorated_push_raised(self);
    PyObject *result = call_python_function(self->func, args, nargsf, kwnames);
    nvtxcffi_shim.pop(self->domain_index);
    if (result != NULL && UNLIKELY(TOOL_RAISED_IN(tstate)))
        Py_CLEAR(result);
    return result;
}

/* -- the type -- */

static int function_traverse(PyObject *op, visitproc visit, void *arg)
{
    function_object *self = (function_object *)op;
    Py_VISIT(self->func);
    Py_VISIT(self->attributes);
    Py_VISIT(self->dict);
    return 0;
}

static int function_clear(PyObject *op)
{
    function_object *self = (function_object *)op;
    Py_CLEAR(self->func);
    Py_CLEAR(self->attributes);
    Py_CLEAR(self->dict);
    return 0;
}

static void function_dealloc(PyObject *op)
{
    function_object *self = (function_object *)op;
    PyObject_GC_UnTrack(op);
    if (self->weakreflist != NULL)
        PyObject_ClearWeakRefs(op);
    function_clear(op);
    PyObject_GC_Del(op);
}

/* Bind like a Python function: a bound method on an instance, the function itself on a class. */
static PyObject *function_descr_get(PyObject *op, PyObject *obj, PyObject *type)
{
    (void)type;
    if (obj == NULL || obj == Py_None) {
        Py_INCREF(op);
        return op;
    }
    return PyMethod_New(op, obj);
}

static PyObject *function_repr(PyObject *op)
{
    PyObject *name = PyObject_GetAttrString(op, "__qualname__");
    if (name == NULL) {
        PyErr_Clear();
        return PyUnicode_FromFormat("<nvtx_cffi function at %p>", op);
    }
    PyObject *repr = PyUnicode_FromFormat("<nvtx_cffi function %S at %p>", name, op);
    Py_DECREF(name);
    return repr;
}

/* Pickled by reference, like a function: its module and qualified name (pickle checks that the
 * name leads back to this very object). */
static PyObject *function_reduce(PyObject *op, PyObject *unused)
{
    (void)unused;
    return PyObject_GetAttrString(op, "__qualname__");
}

static PyMethodDef function_methods[] = {
    {"__reduce__", function_reduce, METH_NOARGS, "Pickled by qualified name, like a function."},
    {NULL, NULL, 0, NULL},
};

#if PY_VERSION_HEX >= 0x030E0000
/* 3.14+ (PEP 649/749): functools.wraps copies __annotate__, not __annotations__, and a function's
 * __annotations__ is computed from __annotate__ on first access. Both live in the instance dict
 * and behave as a Python function's do, so typing.get_type_hints, inspect.signature(eval_str=True)
 * and annotationlib see the decorated function's annotations. (Before 3.14 functools.wraps copies
 * __annotations__ into the dict, which plain attribute lookup finds.) */

static PyObject *key_annotations, *key_annotate; /* interned "__annotations__", "__annotate__" */

/* The instance dict (made on first use) as a borrowed reference; NULL with an exception. */
static PyObject *function_dict(PyObject *op)
{
    function_object *self = (function_object *)op;
    if ((key_annotations == NULL && (key_annotations = PyUnicode_InternFromString("__annotations__")) == NULL)
        || (key_annotate == NULL && (key_annotate = PyUnicode_InternFromString("__annotate__")) == NULL))
        return NULL;
    if (self->dict == NULL)
        self->dict = PyDict_New();
    return self->dict;
}

static PyObject *function_get_annotations(PyObject *op, void *closure)
{
    (void)closure;
    PyObject *dict = function_dict(op), *found = NULL, *annotate = NULL;
    if (dict == NULL)
        return NULL;
    int present = PyDict_GetItemRef(dict, key_annotations, &found);
    if (present != 0)
        return present < 0 ? NULL : found;
    if (PyDict_GetItemRef(dict, key_annotate, &annotate) < 0)
        return NULL;
    if (annotate != NULL && annotate != Py_None) {
        PyObject *format = PyLong_FromLong(1); /* annotationlib.Format.VALUE */
        found = format == NULL ? NULL : PyObject_CallOneArg(annotate, format);
        Py_XDECREF(format);
        if (found != NULL && !PyDict_Check(found)) {
            PyErr_Format(PyExc_TypeError, "__annotate__ returned non-dict of type '%.100s'",
                         Py_TYPE(found)->tp_name);
            Py_CLEAR(found);
        }
    } else {
        found = PyDict_New();
    }
    Py_XDECREF(annotate);
    if (found == NULL)
        return NULL;
    if (PyDict_SetItem(dict, key_annotations, found) < 0) { /* computed once, as for functions */
        Py_DECREF(found);
        return NULL;
    }
    return found;
}

static int function_set_annotations(PyObject *op, PyObject *value, void *closure)
{
    (void)closure;
    PyObject *dict = function_dict(op);
    if (dict == NULL)
        return -1;
    if (value != NULL && !PyDict_Check(value)) {
        PyErr_SetString(PyExc_TypeError, "__annotations__ must be set to a dict object");
        return -1;
    }
    if (value == NULL ? PyDict_Pop(dict, key_annotations, NULL) < 0 : PyDict_SetItem(dict, key_annotations, value) < 0)
        return -1;
    return PyDict_SetItem(dict, key_annotate, Py_None); /* set directly: no __annotate__ any more */
}

static PyObject *function_get_annotate(PyObject *op, void *closure)
{
    (void)closure;
    PyObject *dict = function_dict(op), *found = NULL;
    if (dict == NULL)
        return NULL;
    int present = PyDict_GetItemRef(dict, key_annotate, &found);
    if (present < 0)
        return NULL;
    return present ? found : Py_NewRef(Py_None);
}

static int function_set_annotate(PyObject *op, PyObject *value, void *closure)
{
    (void)closure;
    PyObject *dict = function_dict(op);
    if (dict == NULL)
        return -1;
    if (value == NULL) {
        PyErr_SetString(PyExc_TypeError, "__annotate__ cannot be deleted");
        return -1;
    }
    if (value != Py_None && !PyCallable_Check(value)) {
        PyErr_SetString(PyExc_TypeError, "__annotate__ must be callable or None");
        return -1;
    }
    if (PyDict_SetItem(dict, key_annotate, value) < 0)
        return -1;
    /* a new __annotate__ drops the annotations computed from the old one, as for functions */
    return value == Py_None ? 0 : PyDict_Pop(dict, key_annotations, NULL) < 0 ? -1 : 0;
}
#endif

static PyGetSetDef function_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
#if PY_VERSION_HEX >= 0x030E0000
    {"__annotations__", function_get_annotations, function_set_annotations, NULL, NULL},
    {"__annotate__", function_get_annotate, function_set_annotate, NULL, NULL},
#endif
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject function_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "nvtx_cffi._speedups.function",
    .tp_basicsize = sizeof(function_object),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL
              | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_doc = "A Python function's C fast path (its Python implementation is __wrapped__).",
    .tp_vectorcall_offset = offsetof(function_object, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_descr_get = function_descr_get,
    .tp_dictoffset = offsetof(function_object, dict),
    .tp_weaklistoffset = offsetof(function_object, weakreflist),
    .tp_traverse = function_traverse,
    .tp_clear = function_clear,
    .tp_dealloc = function_dealloc,
    .tp_repr = function_repr,
    .tp_methods = function_methods,
    .tp_getset = function_getset,
};

PyObject *function_new(vectorcallfunc call, PyObject *func)
{
    function_object *self = PyObject_GC_New(function_object, &function_type);
    if (self == NULL)
        return NULL;
    self->vectorcall = call;
    Py_INCREF(func);
    self->func = func;
    self->attributes = NULL;
    self->slot = -1;
    self->domain_index = 0;
    self->guard_recursion = 1;
    self->dict = NULL;
    self->weakreflist = NULL;
    PyObject_GC_Track((PyObject *)self);
    return (PyObject *)self;
}

PyDoc_STRVAR(decorated_doc,
"decorated(func, slot, domain_index, attributes)\n--\n\n"
"``func`` wrapped so that each call is one range: push ``slot`` (or, when it is -1, "
"``attributes._emit(OP_PUSH)``), call, pop ``domain_index``. Copy the metadata with "
"functools.update_wrapper.");

static PyObject *decorated(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 4 || !PyCallable_Check(args[0]) || !PyLong_Check(args[1]) || !PyLong_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "decorated(func, slot: int, domain_index: int, attributes)");
        return NULL;
    }
    long slot = PyLong_AsLong(args[1]), index = PyLong_AsLong(args[2]);
    if ((slot == -1 || index == -1) && PyErr_Occurred())
        return NULL;
    if (slot < -1 || slot > INT32_MAX || index < 0 || index > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "slot or domain_index out of range");
        return NULL;
    }
    function_object *self = (function_object *)function_new(decorated_call, args[0]);
    if (self == NULL)
        return NULL;
    self->slot = (int)slot;
    self->domain_index = (int)index;
    self->guard_recursion = !PyFunction_Check(args[0]);
    Py_INCREF(args[3]);
    self->attributes = args[3];
    return (PyObject *)self;
}

static PyMethodDef function_functions[] = {
    {"decorated", FUNC_CAST(decorated), METH_FASTCALL, decorated_doc},
    {NULL, NULL, 0, NULL},
};

int accel_function_init(PyObject *module)
{
    if (PyType_Ready(&function_type) < 0 || PyModule_AddFunctions(module, function_functions) < 0)
        return -1;
    Py_INCREF(&function_type);
    if (PyModule_AddObject(module, "function", (PyObject *)&function_type) < 0) {
        Py_DECREF(&function_type);
        return -1;
    }
    return 0;
}
