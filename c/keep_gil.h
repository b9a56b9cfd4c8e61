/* keep_gil.h - included last in the CFFI preamble (build_ffi.py), after cffi's _cffi_include.h.
 *
 * cffi's API-mode wrappers (_cffi_f_NAME, CPython only) bracket every C call with
 * Py_BEGIN_ALLOW_THREADS and an errno save/restore: ~36 ns per call measured, several times what
 * NVTX itself costs. Every function of this module returns in nanoseconds and never blocks
 * (the registry mutex is only ever held for a handful of NVTX calls, never across Python code),
 * so releasing the GIL buys nothing; nor does anything here report through errno.
 * The wrappers are emitted after this preamble, so redefining the macros here removes both.
 *
 * Guard: nvtxcffi_gil_held() is called through the same kind of wrapper; tests/test_native.py
 * asserts it returns 1, so a cffi release that renames these macros fails the suite instead of
 * silently bringing the release back. PyPy calls the C functions directly (no wrappers there).
 */
#ifndef PYPY_VERSION
#undef Py_BEGIN_ALLOW_THREADS
#define Py_BEGIN_ALLOW_THREADS {
#undef Py_END_ALLOW_THREADS
#define Py_END_ALLOW_THREADS }
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

#include "gil_release.h" /* the GIL release c/trace_decode.c's bulk calls do make */
