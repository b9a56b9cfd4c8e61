/* The interpreter's floor for each call shape of asv_bench/compare.py: C objects that accept what
 * the annotations accept and do nothing, so that a shape spelled with them costs only what CPython
 * charges for the spelling itself (the call, its arguments, the `with`, the wrapper's call of f).
 * Benchmarks only: asv_bench/benchmarks/floor.py builds it for the running interpreter; it is never
 * part of the package. Public C API only.
 *
 *   Floor(*args, **kwargs)   the type's one object (its own vectorcall: no argument is looked at,
 *                             nothing allocated; a library may hand out a cached object too)
 *   with obj:                 __enter__ (METH_NOARGS) returns obj, __exit__ (METH_FASTCALL) None;
 *                             up to 3.13 bound once (see BoundOnce)
 *   obj.noargs()              METH_NOARGS                    the cheapest call of each arity:
 *   obj.one(x)                METH_O                         CPython specialises all three
 *   obj.call(*args, **kw)     METH_FASTCALL | METH_KEYWORDS
 *   wrap(f)(*args, **kw)      f(*args, **kw) through a C object's vectorcall (a decorator's floor)
 *   noop(*args)               a builtin function doing nothing (a sys.monitoring callback)
 *   setprofile() / unsetprofile()   a PyEval_SetProfile function doing nothing, on / off
 *   error_checks(n)           n calls of PyErr_Occurred() from C: what one thread-state lookup costs
 *                             (a check for an exception a tool callback set looks the state up)
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>

typedef struct {
    PyObject_HEAD
} FloorObject;

/* The one Floor object, made at import and never freed (the module holds it). */
static PyObject *the_floor;

static PyObject *Floor_vectorcall(PyObject *type, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    (void)type;
    (void)args;
    (void)nargsf;
    (void)kwnames;
    Py_INCREF(the_floor);
    return the_floor;
}

static PyObject *Floor_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    (void)type;
    (void)args;
    (void)kwargs;
    Py_INCREF(the_floor);
    return the_floor;
}

static PyObject *Floor_enter(PyObject *self, PyObject *unused)
{
    (void)unused;
    Py_INCREF(self);
    return self;
}

static PyObject *Floor_nothing_fast(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    (void)args;
    (void)nargs;
    Py_RETURN_NONE;
}

static PyObject *Floor_noargs(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    Py_RETURN_NONE;
}

static PyObject *Floor_one(PyObject *self, PyObject *arg)
{
    (void)self;
    (void)arg;
    Py_RETURN_NONE;
}

static PyObject *Floor_call(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    (void)self;
    (void)args;
    (void)nargs;
    (void)kwnames;
    Py_RETURN_NONE;
}

static PyMethodDef Floor_methods[] = {
    {"__enter__", Floor_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)(void (*)(void))Floor_nothing_fast, METH_FASTCALL, NULL},
    {"noargs", Floor_noargs, METH_NOARGS, NULL},
    {"one", Floor_one, METH_O, NULL},
    {"call", (PyCFunction)(void (*)(void))Floor_call, METH_FASTCALL | METH_KEYWORDS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject Floor_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_nvtx_floor.Floor",
    .tp_basicsize = sizeof(FloorObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Accepts any arguments and does nothing; a no-op context manager.",
    .tp_methods = Floor_methods,
    .tp_new = Floor_new,
    .tp_vectorcall = Floor_vectorcall,
};

#if PY_VERSION_HEX < 0x030E0000
/* Up to 3.13, `with obj:` looks __enter__ and __exit__ up on the type and binds them to obj: two
 * method objects allocated per `with` (~45 ns each on 3.11) unless the descriptor hands out one
 * made before, as nvtx-cffi's annotate objects do. This descriptor, put in Floor's dict over each
 * method descriptor, binds its method to the one Floor object once. From 3.14 `with` calls the
 * method descriptors unbound, so the plain ones are the floor there. */
typedef struct {
    PyObject_HEAD
    PyObject *method; /* the method descriptor */
    PyObject *bound;  /* it, bound to the_floor (made at first use) */
} BoundOnceObject;

static PyObject *BoundOnce_get(PyObject *op, PyObject *obj, PyObject *type)
{
    BoundOnceObject *self = (BoundOnceObject *)op;
    descrgetfunc bind = Py_TYPE(self->method)->tp_descr_get;
    if (obj != the_floor)
        return bind(self->method, obj, type);
    if (self->bound == NULL && (self->bound = bind(self->method, obj, type)) == NULL)
        return NULL;
    Py_INCREF(self->bound);
    return self->bound;
}

static void BoundOnce_dealloc(PyObject *op)
{
    Py_DECREF(((BoundOnceObject *)op)->method);
    Py_XDECREF(((BoundOnceObject *)op)->bound);
    PyObject_Free(op);
}

static PyTypeObject BoundOnce_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_nvtx_floor.BoundOnce",
    .tp_basicsize = sizeof(BoundOnceObject),
    .tp_dealloc = BoundOnce_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A method of Floor, bound to the Floor object once.",
    .tp_descr_get = BoundOnce_get,
};

static int bind_specials_once(void)
{
    static const char *const names[] = {"__enter__", "__exit__"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        PyObject *method = PyDict_GetItemString(Floor_Type.tp_dict, names[i]);
        if (method == NULL) {
            PyErr_Format(PyExc_SystemError, "Floor has no %s", names[i]);
            return -1;
        }
        BoundOnceObject *special = PyObject_New(BoundOnceObject, &BoundOnce_Type);
        if (special == NULL)
            return -1;
        Py_INCREF(method);
        special->method = method;
        special->bound = NULL;
        int failed = PyDict_SetItemString(Floor_Type.tp_dict, names[i], (PyObject *)special);
        Py_DECREF(special);
        if (failed)
            return -1;
    }
    PyType_Modified(&Floor_Type);
    return 0;
}
#endif

typedef struct {
    PyObject_HEAD
    PyObject *wrapped;
    vectorcallfunc vectorcall;
} WrapObject;

static PyObject *Wrap_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    return PyObject_Vectorcall(((WrapObject *)self)->wrapped, args, nargsf, kwnames);
}

static void Wrap_dealloc(PyObject *self)
{
    Py_DECREF(((WrapObject *)self)->wrapped);
    PyObject_Free(self);
}

static PyTypeObject Wrap_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_nvtx_floor.Wrap",
    .tp_basicsize = sizeof(WrapObject),
    .tp_dealloc = Wrap_dealloc,
    .tp_vectorcall_offset = offsetof(WrapObject, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "Calls the function it wraps with the arguments it is called with.",
};

static PyObject *wrap(PyObject *module, PyObject *function)
{
    (void)module;
    WrapObject *self = PyObject_New(WrapObject, &Wrap_Type);
    if (self == NULL)
        return NULL;
    Py_INCREF(function);
    self->wrapped = function;
    self->vectorcall = Wrap_vectorcall;
    return (PyObject *)self;
}

static int noop_profile(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg)
{
    (void)obj;
    (void)frame;
    (void)what;
    (void)arg;
    return 0;
}

static PyObject *setprofile(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    PyEval_SetProfile(noop_profile, NULL);
    Py_RETURN_NONE;
}

static PyObject *unsetprofile(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    PyEval_SetProfile(NULL, NULL);
    Py_RETURN_NONE;
}

static PyObject *error_checks(PyObject *module, PyObject *arg)
{
    (void)module;
    long n = PyLong_AsLong(arg);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    long set = 0;
    for (long i = 0; i < n; i++)
        set += PyErr_Occurred() != NULL; /* a call into libpython: the compiler cannot hoist it */
    return PyLong_FromLong(set);
}

static PyMethodDef module_methods[] = {
    {"wrap", wrap, METH_O, "wrap(f): a C object whose call is f's call."},
    {"noop", (PyCFunction)(void (*)(void))Floor_nothing_fast, METH_FASTCALL, "Does nothing."},
    {"setprofile", setprofile, METH_NOARGS, "Installs a profile function that does nothing."},
    {"unsetprofile", unsetprofile, METH_NOARGS, "Removes this thread's profile function."},
    {"error_checks", error_checks, METH_O, "error_checks(n): n calls of PyErr_Occurred(); returns 0."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef floor_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_nvtx_floor",
    .m_doc = "No-op C objects: the interpreter's floor for compare.py's call shapes.",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__nvtx_floor(void)
{
    if (PyType_Ready(&Floor_Type) < 0 || PyType_Ready(&Wrap_Type) < 0)
        return NULL;
#if PY_VERSION_HEX < 0x030E0000
    if (PyType_Ready(&BoundOnce_Type) < 0 || bind_specials_once() < 0)
        return NULL;
#endif
    if (the_floor == NULL && (the_floor = (PyObject *)PyObject_New(FloorObject, &Floor_Type)) == NULL)
        return NULL;
    PyObject *module = PyModule_Create(&floor_module);
    if (module == NULL)
        return NULL;
    Py_INCREF(&Floor_Type);
    if (PyModule_AddObject(module, "Floor", (PyObject *)&Floor_Type) < 0) {
        Py_DECREF(&Floor_Type);
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
