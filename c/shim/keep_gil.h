/* keep_gil.h - included last in the CFFI preamble (build_ffi.py), after cffi's _cffi_include.h.
 *
 * cffi's API-mode wrappers (_cffi_f_NAME, CPython only) bracket every C call with
 * Py_BEGIN_ALLOW_THREADS and an errno save/restore: ~36 ns per call measured, several times what
 * NVTX itself costs. Every function of this module returns in nanoseconds and never blocks
 * (the registry mutex is only ever held for a handful of NVTX calls, never across Python code),
 * so releasing the GIL buys nothing; nor does anything here report through errno.
 * The wrappers are emitted after this preamble, so redefining the macros here removes both.
 *
 * Guard: nvtxcffi_gil_held() is called through the same kind of wrapper; tests/native/test_native.py
 * asserts it returns 1, so a cffi release that renames these macros fails the suite instead of
 * silently bringing the release back. PyPy calls the C functions directly (no wrappers there).
 */
#ifndef PYPY_VERSION
#undef Py_BEGIN_ALLOW_THREADS
#define Py_BEGIN_ALLOW_THREADS {
/* An NVTX tool may run Python code in its callbacks (NVIDIA's python test tool does) and leave an
 * exception set: the wrapper then returns NULL, so the exception propagates from the call (a
 * value returned with it would be CPython's SystemError "returned a result with an exception
 * set"). The wrapper's temporary copies of array arguments (its local large_args_free; wrappers
 * without one see the NULL below) are freed first. PyErr_Occurred is stable ABI and reads the
 * thread state: a nanosecond. */
static struct _cffi_freeme_s *const large_args_free = NULL;
#undef Py_END_ALLOW_THREADS
#define Py_END_ALLOW_THREADS                                                                        \
    }                                                                                               \
    if (PyErr_Occurred()) {                                                                         \
        if (large_args_free != NULL)                                                                \
            _cffi_free_array_arguments(large_args_free);                                            \
        return NULL;                                                                                \
    }
#undef _cffi_restore_errno
#define _cffi_restore_errno() ((void)0)
#undef _cffi_save_errno
#define _cffi_save_errno() ((void)0)
#endif

#ifndef PYPY_VERSION
#include <dlfcn.h>
#endif

/* 1: this thread holds the GIL; 0: it does not; -1: cannot tell (PyPy, or no PyGILState_Check).
 * PyGILState_Check is not in the stable ABI before 3.14 (every CPython >= 3.4 exports it, but an
 * abi3 module must not link to it), so the guard looks it up at run time: the module's imports stay
 * stable-ABI only. */
int nvtxcffi_gil_held(void)
{
#ifdef PYPY_VERSION
    return -1;
#else
    int (*check)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "PyGILState_Check");
    return check ? check() : -1;
#endif
}

/* shim_internal.h: whether the calling thread has a Python exception set (a tool's callback
 * raised). Only called with the GIL held (cffi's wrappers keep it, see above); 0 on PyPy. */
int nvtxcffi_tool_raised(void)
{
#ifdef PYPY_VERSION
    return 0;
#else
    return PyErr_Occurred() != NULL;
#endif
}

/* shim_internal.h: a registration lock's wait lets the GIL go (every call of this module holds it
 * on CPython, cffi's wrappers keeping it; PyPy's cffi calls C without it). */
void *nvtxcffi_lock_wait_begin(void)
{
#ifdef PYPY_VERSION
    return NULL;
#else
    return PyEval_SaveThread();
#endif
}

void nvtxcffi_lock_wait_end(void *state)
{
#ifndef PYPY_VERSION
    PyEval_RestoreThread((PyThreadState *)state);
#else
    (void)state;
#endif
}

#include "gil_release.h" /* the GIL release trace_decode.c's bulk calls do make */
