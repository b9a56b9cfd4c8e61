/* shim_internal.h - what payload.c needs from nvtx_shim.c's tables (not part of the cdef). */
#ifndef NVTX_CFFI_SHIM_INTERNAL_H
#define NVTX_CFFI_SHIM_INTERNAL_H

#include <nvtx3/nvToolsExt.h>

/* The handle of domain `domain` in *handle; 0 if the index is valid, -1 if not. */
int nvtxcffi_internal_domain(int domain, nvtxDomainHandle_t *handle);
/* A copy of slot `slot`'s attributes and its domain handle; 0 if valid, -1 if not. */
int nvtxcffi_internal_slot(int slot, nvtxEventAttributes_t *attr, nvtxDomainHandle_t *handle);

/* The registered handle of UTF-8 `text` in domain `domain` (registered now if not kept: see
 * nvtxcffi_string_register); NULL for an invalid domain. */
nvtxStringHandle_t nvtxcffi_internal_string(int domain, const char *text);

/* Whether a Python exception is set on this thread (an NVTX tool's callback may run Python and
 * raise): keep_gil.h defines it in the CFFI module. A registration that raised is not kept. */
int nvtxcffi_tool_raised(void);

/* Around a wait for a registration lock another thread holds: let other Python threads run (the
 * GIL released, keep_gil.h) and take the GIL back. No-ops where the caller holds no GIL. */
void *nvtxcffi_lock_wait_begin(void);
void nvtxcffi_lock_wait_end(void *state);

/* A counter's semantics as NVTX takes them, from the cdef's struct (payload.c; the writer's
 * counters too). */
#include <nvtx3/nvToolsExtSemanticsCounters.h>
#include "payload.h"
void nvtxcffi_internal_counter_semantics(nvtxSemanticsCounter_t *dst, const nvtxcffi_counter_semantics *src);

/* The nvtxPayloadSchemaAttr_t of a schema as the cdef describes it (payload.c; the writer's
 * schemas too): its entries and semantics are allocated in *storage, freed by
 * nvtxcffi_internal_schema_free after the registration. 0, -1 a bad argument, -2 no memory. */
#include <nvtx3/nvToolsExtPayload.h>
typedef struct {
    nvtxPayloadSchemaEntry_t *entries;
    nvtxSemanticsCounter_t *semantics;
} nvtxcffi_schema_storage;
int nvtxcffi_internal_schema_attr(nvtxPayloadSchemaAttr_t *attr, nvtxcffi_schema_storage *storage,
                                  uint64_t field_mask, uint64_t schema_type, uint64_t schema_flags,
                                  size_t static_size, const nvtxcffi_schema_entry *entries, size_t count,
                                  const nvtxcffi_counter_semantics *semantics, size_t semantics_count);
void nvtxcffi_internal_schema_free(nvtxcffi_schema_storage *storage);

/* The registration locks, owned by nvtx_shim.c (held across fork()). */
enum { NVTXCFFI_LOCK_REGISTRY, NVTXCFFI_LOCK_COUNTERS, NVTXCFFI_LOCK_COUNT };
void nvtxcffi_internal_lock(int which);
void nvtxcffi_internal_unlock(int which);

#endif
