/* accel.c - CPython C-API fast paths for nvtx_cffi's hottest calls (part of nvtx_cffi._speedups).
 *
 * Why: after the CFFI work (keep_gil.h, slot caches) what remains of a call's cost is CPython
 * running Python frames (an empty __enter__/__exit__ pair is ~80 ns, a 5-default function ~20 ns).
 * Only C callables avoid that. This file and its parts (accel_*.c, listed in accel.h) are compiled
 * into the optional module nvtx_cffi._speedups (speedups.c), not into the CFFI shim: they reach the
 * shim's slot and domain tables through the shim's function table (nvtxcffi_shim,
 * c/shim/nvtx_api.h), bound by nvtx_cffi/_accel.py.
 *
 * How Python reaches it: nvtx_cffi/_accel.py imports nvtx_cffi._speedups, binds it to the shim and
 * calls install(active) once; then the setup functions (setup_annotate, setup_ranges, setup_domain,
 * setup_first_sight, each in its part) receive the Python classes and twins. The state both sides
 * read and fill (the caches of prepared calls, Domain's and EventAttributes' fields) lives in the
 * types of accel_types.c, which the Python code uses (nvtx_cffi/_bases.py).
 *
 * What it holds (all opt-in from Python, which passes in its classes and Python twins):
 *   AnnotateBase  base class of nvtx_cffi.annotate: C __enter__/__exit__ (push a slot / pop a
 *                 domain), plus a vectorcall for the annotate class itself that answers repeated
 *                 annotate(...) calls from annotate's own instance caches (a miss runs
 *                 annotate.__new__, in Python).
 *   function      a callable with functools.wraps metadata (a __dict__) whose body is C: either a
 *                 decorated function (push, call, pop even on error) or a module-level/Domain call
 *                 (push_range, mark, ...) that answers from the Python caches and otherwise calls
 *                 its Python twin (__wrapped__) with the same arguments, so first use, payloads and
 *                 every error message stay exactly those of the Python code.
 * The Python implementation stays complete: PyPy, NVTX_CFFI_PURE_PYTHON=1 and installs without
 * this module use it alone.
 *
 * Thread safety: every entry point runs with the GIL held (they are Python callables; setup.py
 * does not build this module for free-threaded CPython), and the C tables are lock-free to read.
 * State is process-wide (one interpreter; the module is single-phase).
 */
#include "accel.h"

/* Here: which body each fast path gets (install, accelerate), and the module's init. */

int active;           /* _state.ACTIVE: a tool is attached and NVTX_DISABLE is unset */
static int installed; /* install() ran: `active` is decided for the process */

static const struct {
    const char *name;
    vectorcallfunc with_tool, without_tool;
} KINDS[] = {
    {"push_range", push_range_call, noop5_call},
    {"mark", mark_call, noop5_call},
    {"start_range", start_range_call, noop5_call},
    {"pop_range", pop_range_call, noop_pop_call},
    {"end_range", end_range_call, noop_end_call},
    {"Domain.push_range", domain_push_call, domain_push_call},
    {"Domain.mark", domain_mark_call, domain_mark_call},
    {"Domain.start_range", domain_start_call, domain_start_call},
    {"Domain.end_range", domain_end_call, domain_end_call},
    {"Domain.get_event_attributes", domain_attributes_call, domain_attributes_call},
};

/* Fast paths made before install() decided: they call their twin (which decides NVTX's state on
 * its first call, nvtx_cffi/_state.py) until install() gives each its with/without-tool body.
 * Filled at import (one per KINDS entry and import of the Python modules): bounded. */
#define MAX_PENDING 64
static struct {
    function_object *function; /* strong reference: module-level functions live for the process */
    size_t kind;
} pending[MAX_PENDING];
static int pending_count;

static PyObject *undecided_call(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    return twin(op, args, nargsf, kwnames);
}

PyDoc_STRVAR(accelerate_doc,
"accelerate(kind, twin)\n--\n\n"
"The C fast path of the Python function ``twin`` (``kind``: its qualified name, e.g. "
"'push_range' or 'Domain.mark'); calls it for everything the fast path does not answer, and for "
"every call until install() decided. Copy the metadata with functools.update_wrapper.");

static PyObject *accelerate(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2 || !PyUnicode_Check(args[0]) || !PyCallable_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "accelerate(kind: str, twin: callable)");
        return NULL;
    }
    for (size_t i = 0; i < sizeof KINDS / sizeof KINDS[0]; i++) {
        if (PyUnicode_CompareWithASCIIString(args[0], KINDS[i].name) != 0)
            continue;
        if (installed)
            return function_new(active ? KINDS[i].with_tool : KINDS[i].without_tool, args[1]);
        if (pending_count >= MAX_PENDING) {
            PyErr_SetString(PyExc_RuntimeError, "accelerate(): too many fast paths before install()");
            return NULL;
        }
        PyObject *function = function_new(undecided_call, args[1]);
        if (function == NULL)
            return NULL;
        Py_INCREF(function);
        pending[pending_count].function = (function_object *)function;
        pending[pending_count].kind = i;
        pending_count++;
        return function;
    }
    PyErr_Format(PyExc_ValueError, "no fast path for %R", args[0]);
    return NULL;
}

PyDoc_STRVAR(install_doc,
"install(active)\n--\n\n"
"Decide, once per process, whether the fast paths call NVTX (``active``: a tool is attached and "
"NVTX_DISABLE is unset) or are the do-nothing versions; fast paths made before it (which called "
"their twins) get their bodies now. Needs bind() first.");

static PyObject *install(PyObject *module, PyObject *arg)
{
    int is_active = PyObject_IsTrue(arg);
    if (is_active < 0)
        return NULL;
    if (!NVTXCFFI_SHIM_BOUND()) {
        PyErr_SetString(PyExc_RuntimeError, "nvtx_cffi._speedups: bind() the shim first");
        return NULL;
    }
    if (installed && (!is_active) != (!active)) {
        PyErr_SetString(PyExc_RuntimeError, "nvtx_cffi._speedups: install() decided otherwise already");
        return NULL;
    }
    active = is_active;
    installed = 1;
    for (int i = 0; i < pending_count; i++) {
        size_t kind = pending[i].kind;
        pending[i].function->vectorcall = active ? KINDS[kind].with_tool : KINDS[kind].without_tool;
        Py_CLEAR(pending[i].function);
    }
    pending_count = 0;
    annotate_seal();
    if (PyModule_AddIntConstant(module, "active", is_active) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef accel_functions[] = {
    {"install", install, METH_O, install_doc},
    {"accelerate", FUNC_CAST(accelerate), METH_FASTCALL, accelerate_doc},
    {NULL, NULL, 0, NULL},
};

int nvtxcffi_accel_init(PyObject *module)
{
    if (accel_types_init(module) < 0 || accel_caches_init(module) < 0 || accel_payloads_init(module) < 0 || accel_first_sight_init(module) < 0
        || accel_annotate_init(module) < 0 || accel_annotate_call_init(module) < 0 || accel_ranges_init(module) < 0
        || accel_domain_init(module) < 0 || accel_function_init(module) < 0)
        return -1;
    return PyModule_AddFunctions(module, accel_functions);
}
