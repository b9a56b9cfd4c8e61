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
/* Not in the limited API that cffi compiles against, but exported by every CPython >= 3.4. */
PyAPI_FUNC(int) PyGILState_Check(void);
#endif

int nvtxcffi_gil_held(void)
{
#ifdef PYPY_VERSION
    return -1;
#else
    return PyGILState_Check();
#endif
}

#include "gil_release.h" /* the GIL release c/trace_decode.c's bulk calls do make */
