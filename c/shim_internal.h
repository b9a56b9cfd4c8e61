/* shim_internal.h - what c/payload.c needs from c/nvtx_shim.c's tables (not part of the cdef). */
#ifndef NVTX_CFFI_SHIM_INTERNAL_H
#define NVTX_CFFI_SHIM_INTERNAL_H

#include <nvtx3/nvToolsExt.h>

/* The handle of domain `domain` in *handle; 0 if the index is valid, -1 if not. */
int nvtxcffi_internal_domain(int domain, nvtxDomainHandle_t *handle);
/* A copy of slot `slot`'s attributes and its domain handle; 0 if valid, -1 if not. */
int nvtxcffi_internal_slot(int slot, nvtxEventAttributes_t *attr, nvtxDomainHandle_t *handle);

/* The registration locks, owned by nvtx_shim.c (held across fork()). */
enum { NVTXCFFI_LOCK_REGISTRY, NVTXCFFI_LOCK_COUNTERS, NVTXCFFI_LOCK_COUNT };
void nvtxcffi_internal_lock(int which);
void nvtxcffi_internal_unlock(int which);

#endif
