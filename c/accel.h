/* accel.h - the one entry point of c/accel.c (CPython C-API fast paths), cdef'd like nvtx_shim.h
 * (build_ffi.py feeds both to ffi.cdef), but kept apart: it is not part of the shim's C API. */
#ifndef NVTX_CFFI_ACCEL_H
#define NVTX_CFFI_ACCEL_H

/* CPython only: create the C fast paths and register them as the module "nvtx_cffi._native._accel"
 * in sys.modules (nvtx_cffi/_accel.py wires them in). `active`: a tool is attached and NVTX_DISABLE
 * is unset. Returns 0 when done; -1 when not available (PyPy) or failed (the cause is printed). */
int nvtxcffi_accel_install(int active);

#endif
