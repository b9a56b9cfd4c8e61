/* profiler_api.c - what Python sees of nvtx_cffi.Profile's C engine (part of nvtx_cffi._speedups;
 * _profile.py drives it): the module's prof_* functions, which start and stop the engine, and the
 * ProfileFunction type, profile_func's obj as sys.getprofile() shows it. */
#include "profiler.h"

#include <limits.h>
#include <stdlib.h>

/* ---- ProfileFunction ---------------------------------------------------------------------------- */

static PyObject *token_call(PyObject *self, PyObject *args, PyObject *kwargs)
{
    PyObject *frame, *event, *arg;
    if (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0) {
        PyErr_SetString(PyExc_TypeError, "nvtx_cffi profile function takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_UnpackTuple(args, "nvtx_cffi profile function", 3, 3, &frame, &event, &arg))
        return NULL;
    profile_named(self, frame, event, arg);
    Py_RETURN_NONE;
}

static void token_dealloc(PyObject *self)
{
    Py_CLEAR(((token_t *)self)->restore);
    Py_TYPE(self)->tp_free(self);
}

static PyTypeObject token_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "nvtx_cffi._speedups.ProfileFunction",
    .tp_basicsize = sizeof(token_t),
    .tp_dealloc = token_dealloc,
    .tp_call = token_call,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "nvtx_cffi.Profile's C profile function, as sys.getprofile() shows it; callable as "
              "a Python profile function (frame, event, arg).",
};

static PyObject *token_new(PyObject *restore)
{
    token_t *token = PyObject_New(token_t, &token_type);
    if (token == NULL)
        return NULL;
    token->generation = E.generation;
    token->restore = restore;
    Py_XINCREF(restore);
    return (PyObject *)token;
}

/* ---- entry points (the module's prof_* functions) ------------------------------------------------------------------------- */

static void release_references(void)
{
    Py_CLEAR(E.classify);
    Py_CLEAR(E.classify_cfunc);
    Py_CLEAR(E.push_code);
    Py_CLEAR(E.push_name);
    Py_CLEAR(E.token);
    Py_CLEAR(E.disable);
    Py_CLEAR(E.hooks);
}

static int start_engine(PyObject *hooks, int mode, int domain, int cfuncs, int max_depth)
{
    PyObject *callbacks, *result;
    if (E.active || E.hooks != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "the nvtx_cffi C profiler is already running");
        return -1;
    }
    if (mode != NVTXCFFI_PROF_SETPROFILE && !(HAVE_MONITORING && mode == NVTXCFFI_PROF_MONITORING)) {
        PyErr_SetString(PyExc_ValueError, "unsupported nvtx_cffi profiler mode");
        return -1;
    }
    E.hooks = new_ref(hooks);
    if ((E.classify = PyObject_GetAttrString(hooks, "c_classify")) == NULL
        || (E.classify_cfunc = PyObject_GetAttrString(hooks, "c_classify_cfunc")) == NULL
        || (E.push_code = PyObject_GetAttrString(hooks, "c_push_code")) == NULL
        || (E.push_name = PyObject_GetAttrString(hooks, "c_push_name")) == NULL)
        goto fail;
    E.generation++;
    if ((E.token = token_new(NULL)) == NULL)
        goto fail;
    callbacks = engine_callbacks(mode);
    if (callbacks == NULL)
        goto fail;
    E.mode = mode;
    E.domain = domain;
    E.cfuncs = cfuncs;
    E.limit = max_depth > 0 ? max_depth : INT_MAX;
    E.overflow = 0;
    result = PyObject_CallMethod(hooks, "c_callbacks", "(O)", callbacks);
    Py_DECREF(callbacks);
    if (result == NULL)
        goto fail;
    Py_DECREF(result);
    E.active = 1;
    return 0;
fail:
    release_references();
    return -1;
}

PyDoc_STRVAR(prof_start_doc,
"prof_start(hooks, mode, domain, cfuncs, max_depth)\n--\n\n"
"Start the engine in ``mode`` (PROF_*); ``hooks`` is the Python engine (c_classify, "
"c_classify_cfunc, c_push_code, c_push_name, c_callbacks, c_left); max_depth 0 = no limit.");

static PyObject *prof_start(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    int values[4];
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "prof_start(hooks, mode, domain, cfuncs, max_depth)");
        return NULL;
    }
    for (int i = 0; i < 4; i++) {
        long v = PyLong_AsLong(args[i + 1]);
        if (v == -1 && PyErr_Occurred())
            return NULL;
        if (v < INT_MIN || v > INT_MAX) {
            PyErr_SetString(PyExc_OverflowError, "prof_start: argument out of range");
            return NULL;
        }
        values[i] = (int)v;
    }
    if (!NVTXCFFI_SHIM_BOUND()) {
        PyErr_SetString(PyExc_RuntimeError, "nvtx_cffi._speedups: bind() the shim first");
        return NULL;
    }
    if (start_engine(args[0], values[0], values[1], values[2], values[3]) < 0)
        return NULL;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(prof_install_thread_doc,
"prof_install_thread(restore=None)\n--\n\n"
"Setprofile mode: install the C profile function on the calling thread, with a token of its own: "
"``restore()`` is called once on this thread if it finds the engine stopped at an event (stop() ran "
"on another thread). False when not running.");

static PyObject *prof_install_thread(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs > 1) {
        PyErr_SetString(PyExc_TypeError, "prof_install_thread(restore=None)");
        return NULL;
    }
    PyObject *restore = nargs == 1 && args[0] != Py_None ? args[0] : NULL;
    if (E.active && E.token != NULL && E.mode == NVTXCFFI_PROF_SETPROFILE) {
        PyObject *token = token_new(restore);
        if (token == NULL)
            return NULL;
        PyEval_SetProfile(profile_func, token); /* holds its own reference */
        Py_DECREF(token);
        Py_RETURN_TRUE;
    }
    Py_RETURN_FALSE;
}

PyDoc_STRVAR(prof_stop_doc,
"prof_stop()\n--\n\n"
"Stop: pop the calling thread's open ranges (returns how many), report other threads' through "
"hooks.c_left(os_tid, count), drop the caches.");

static PyObject *prof_stop(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    int closed = 0;
    if (!E.active)
        return PyLong_FromLong(0);
    E.active = 0;
    thread_state_t *me = my_thread;
    if (me != NULL && me->generation == E.generation) {
        for (; me->open > 0; me->open--, closed++)
            NVTX_FROM_HOOK(nvtxcffi_shim.pop(me->domain));
        me->depth = 0;
    }
    /* Other threads' open ranges: collected under the threads' lock, reported to Python after it. */
    size_t n;
    left_t *left = threads_left(me, E.generation, &n);
    for (size_t i = 0; i < n; i++) {
        PyObject *result = PyObject_CallMethod(E.hooks, "c_left", "ki", (unsigned long)left[i].os_tid,
                                               left[i].open);
        if (result == NULL)
            PyErr_WriteUnraisable(E.hooks);
        Py_XDECREF(result);
    }
    free(left);
    clear_caches();
    release_references();
    return PyLong_FromLong(closed);
}

PyDoc_STRVAR(prof_cache_size_doc,
"prof_cache_size()\n--\n\nCached code objects + C function names.");

static PyObject *prof_cache_size(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return PyLong_FromSize_t(E.codes.count + E.names.count);
}

PyDoc_STRVAR(prof_set_cache_limit_doc,
"prof_set_cache_limit(limit)\n--\n\nThe bound of each cache (negative: the default).");

static PyObject *prof_set_cache_limit(PyObject *module, PyObject *arg)
{
    (void)module;
    Py_ssize_t limit = PyLong_AsSsize_t(arg);
    if (limit == -1 && PyErr_Occurred())
        return NULL;
    set_cache_limit(limit);
    Py_RETURN_NONE;
}

static PyMethodDef prof_functions[] = {
    {"prof_start", FUNC_CAST(prof_start), METH_FASTCALL, prof_start_doc},
    {"prof_install_thread", FUNC_CAST(prof_install_thread), METH_FASTCALL, prof_install_thread_doc},
    {"prof_stop", prof_stop, METH_NOARGS, prof_stop_doc},
    {"prof_cache_size", prof_cache_size, METH_NOARGS, prof_cache_size_doc},
    {"prof_set_cache_limit", prof_set_cache_limit, METH_O, prof_set_cache_limit_doc},
    {NULL, NULL, 0, NULL},
};

int nvtxcffi_prof_init(PyObject *module)
{
    /* PROF_AVAILABLE: 1 < 3.12 (setprofile mode), 2 from 3.12 (monitoring too). */
    if (PyType_Ready(&token_type) < 0)
        return -1;
    Py_INCREF(&token_type);
    if (PyModule_AddObject(module, "ProfileFunction", (PyObject *)&token_type) < 0) {
        Py_DECREF(&token_type);
        return -1;
    }
    if (PyModule_AddFunctions(module, prof_functions) < 0
        || PyModule_AddIntConstant(module, "PROF_AVAILABLE", HAVE_MONITORING ? 2 : 1) < 0
        || PyModule_AddIntConstant(module, "PROF_SETPROFILE", NVTXCFFI_PROF_SETPROFILE) < 0
        || PyModule_AddIntConstant(module, "PROF_MONITORING", NVTXCFFI_PROF_MONITORING) < 0)
        return -1;
    return 0;
}
