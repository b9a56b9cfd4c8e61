/* gil_release.h - included in the preamble of a CFFI module that compiles trace_decode.c (after
 * Python.h): the GIL release of its bulk calls, which run for up to seconds. PyPy's cffi calls C
 * without the GIL already. */
#ifndef NVTX_CFFI_GIL_RELEASE_H
#define NVTX_CFFI_GIL_RELEASE_H

/* Release the GIL; the state for nvtxcffi_gil_restore (NULL: nothing to restore). */
void *nvtxcffi_gil_release(void)
{
#ifdef PYPY_VERSION
    return NULL;
#else
    return PyEval_SaveThread();
#endif
}

void nvtxcffi_gil_restore(void *state)
{
#ifndef PYPY_VERSION
    PyEval_RestoreThread((PyThreadState *)state);
#else
    (void)state;
#endif
}

#endif
