/* speedups.h - what the parts of the optional accelerator module nvtx_cffi._speedups share.
 *
 * speedups.c           the module: PyInit__speedups, bind() (the shim's function table), version stamp
 * accel*.c             C fast paths of annotate, decorated functions, module-level and Domain calls
 *                      (accel.h lists the files)
 * profiler*.c          the C engine of nvtx_cffi.Profile (profiler.h lists the files)
 * counters_speedups.c  counters' sample() and array payloads
 *
 * CPython only (setup.py builds it for neither PyPy nor free-threaded builds). It reaches the CFFI
 * shim only through nvtxcffi_shim, a copy of the shim's nvtxcffi_api_t (c/shim/nvtx_api.h) made by
 * _speedups.bind(); nvtx_shim.h is included for its constants, never to call the shim directly.
 */
#ifndef NVTX_CFFI_SPEEDUPS_H
#define NVTX_CFFI_SPEEDUPS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "nvtx_api.h"
#include "nvtx_shim.h"

/* Branch hints, and a rare path kept out of its caller (so the caller keeps fewer registers). */
#if defined(__GNUC__)
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)
#define NOINLINE __attribute__((noinline))
#else
#define LIKELY(x) (x)
#define UNLIKELY(x) (x)
#define NOINLINE
#endif

/* After a call into NVTX: a tool may run Python in its callbacks (NVIDIA's python test tool does)
 * and leave an exception set. The call then raises it: returning a value with it set would be
 * CPython's SystemError, and the next unrelated call would find it. */
#define TOOL_RAISED() (PyErr_Occurred() != NULL)
#define RETURN_NONE_AFTER_NVTX() return TOOL_RAISED() ? NULL : Py_NewRef(Py_None)

/* The same check where a path makes several NVTX calls: the thread state looked up once, its error
 * indicator read at each check (as Cython's generated code reads it). PyErr_Occurred looks the
 * thread state up at every call, a __tls_get_addr call where libpython is a shared library. The
 * thread state cannot change under a running C call: a call that swaps it swaps it back. */
#if PY_VERSION_HEX >= 0x030C0000
#define TOOL_RAISED_IN(tstate) ((tstate)->current_exception != NULL)
#else
#define TOOL_RAISED_IN(tstate) ((tstate)->curexc_type != NULL)
#endif

/* The shim's table; all zero (magic 0) until bind() succeeded. */
extern nvtxcffi_api_t nvtxcffi_shim;
#define NVTXCFFI_SHIM_BOUND() (nvtxcffi_shim.magic == NVTXCFFI_API_MAGIC)

/* Profile engine modes (profiler*.c; exported as _speedups.PROF_*). */
#define NVTXCFFI_PROF_SETPROFILE 0
#define NVTXCFFI_PROF_MONITORING 1

/* Each part adds its functions, types and constants to the module (0, or -1 with an exception). */
int nvtxcffi_accel_init(PyObject *module);
int nvtxcffi_prof_init(PyObject *module);
int nvtxcffi_counters_init(PyObject *module); /* counters_speedups.c: counters, array payloads */

/* An exact int that fits in one machine word of CPython's representation (|v| < 2**30 on 3.11,
 * "compact" on 3.12+): *out, 1; else 0 and nothing raised. Public API only: ob_digit of the
 * 3.11 struct (cpython/longintrepr.h, included by Python.h), PyUnstable_Long_* from 3.12. */
static inline int small_int(PyObject *v, long long *out)
{
#if PY_VERSION_HEX >= 0x030C0000
    if (PyLong_CheckExact(v) && PyUnstable_Long_IsCompact((PyLongObject *)v)) {
        *out = (long long)PyUnstable_Long_CompactValue((PyLongObject *)v);
        return 1;
    }
#else
    if (PyLong_CheckExact(v)) {
        Py_ssize_t size = Py_SIZE(v);
        if (size >= -1 && size <= 1) {
            *out = (long long)size * (long long)((PyLongObject *)v)->ob_digit[0];
            return 1;
        }
    }
#endif
    return 0;
}

/* A METH_FASTCALL / METH_NOARGS function cast for PyMethodDef, without -Wcast-function-type. */
#define FUNC_CAST(f) ((PyCFunction)(void (*)(void))(f))

#endif
