/* speedups.c - the optional accelerator module nvtx_cffi._speedups (CPython only).
 *
 * A separate extension from the CFFI shim (nvtx_cffi._native._ffi, abi3): the shim uses only the
 * limited API, while this module uses CPython's version-specific C API (vectorcall types,
 * PyEval_SetProfile, ...). The package works without it (pure-Python path); nvtx_cffi/_accel.py
 * imports it when it exists, checks its version stamp, and binds it to the shim:
 *
 *     _speedups.bind(int(ffi.cast("uintptr_t", lib.nvtxcffi_api())))
 *
 * bind() checks the table (magic, version, size, the shim's build stamp against ours) and copies
 * it; nothing in this module calls the shim before that.
 */
#include "speedups.h"

#include <string.h>

#ifndef NVTXCFFI_VERSION
#error "setup.py defines NVTXCFFI_VERSION (the package version this module belongs to)"
#endif

nvtxcffi_api_t nvtxcffi_shim;

/* The interpreter the module serves. Its state is process-wide C (m_size -1: a legacy
 * subinterpreter gets the same module, isolated ones cannot import the shim at all), and it holds
 * that interpreter's classes and caches, so only the first interpreter to bind it uses it; others
 * run the Python implementation (bind raises ImportError there). */
static PyInterpreterState *owner;

PyDoc_STRVAR(bind_doc,
"bind(address)\n--\n\n"
"Use the shim's function table at ``address`` (what ``lib.nvtxcffi_api()`` returns, as an int). "
"Raises ImportError when it is not a table this module understands or belongs to another build.");

static PyObject *bind(PyObject *module, PyObject *address)
{
    (void)module;
    void *p = PyLong_AsVoidPtr(address);
    if (p == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "bind(address): address is NULL");
        return NULL;
    }
    if (owner != NULL && owner != PyInterpreterState_Get()) {
        PyErr_SetString(PyExc_ImportError,
                        "nvtx_cffi._speedups serves the interpreter that loaded it first, not a subinterpreter");
        return NULL;
    }
    const nvtxcffi_api_t *table = p;
    if (table->magic != NVTXCFFI_API_MAGIC || table->version != NVTXCFFI_API_VERSION
        || table->size < sizeof(nvtxcffi_api_t)) {
        PyErr_Format(PyExc_ImportError,
                     "nvtx_cffi._speedups: the shim's function table has version %u, size %u "
                     "(this module needs version %u, size %u)",
                     (unsigned)table->version, (unsigned)table->size, (unsigned)NVTXCFFI_API_VERSION,
                     (unsigned)sizeof(nvtxcffi_api_t));
        return NULL;
    }
    if (table->build_version == NULL || strcmp(table->build_version, NVTXCFFI_VERSION) != 0) {
        PyErr_Format(PyExc_ImportError, "nvtx_cffi._speedups was built for version %s, the shim for %s",
                     NVTXCFFI_VERSION, table->build_version ? table->build_version : "(none)");
        return NULL;
    }
    if (NVTXCFFI_SHIM_BOUND() && memcmp(&nvtxcffi_shim, table, sizeof nvtxcffi_shim) != 0) {
        PyErr_SetString(PyExc_ImportError, "nvtx_cffi._speedups is already bound to another shim");
        return NULL;
    }
    memcpy(&nvtxcffi_shim, table, sizeof nvtxcffi_shim);
    owner = PyInterpreterState_Get();
    Py_RETURN_NONE;
}

static PyMethodDef speedups_functions[] = {
    {"bind", bind, METH_O, bind_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef speedups_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "nvtx_cffi._speedups",
    .m_doc = "Optional CPython fast paths of nvtx_cffi and Profile's C engine (c/speedups/); "
             "nvtx_cffi/_accel.py loads and binds them.",
    .m_size = -1, /* process-wide state (one interpreter): the C tables are the shim's */
    .m_methods = speedups_functions,
};

PyMODINIT_FUNC PyInit__speedups(void)
{
    PyObject *module = PyModule_Create(&speedups_def);
    if (module == NULL)
        return NULL;
    if (PyModule_AddStringConstant(module, "build_version", NVTXCFFI_VERSION) < 0
        || nvtxcffi_accel_init(module) < 0 || nvtxcffi_prof_init(module) < 0
        || nvtxcffi_counters_init(module) < 0 /* counters_speedups.c */) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
