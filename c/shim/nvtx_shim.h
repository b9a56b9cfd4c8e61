/* nvtx_shim.h - the C API of nvtx-cffi's shim over NVTX v3.
 *
 * build_ffi.py feeds this file (minus its preprocessor lines) to ffi.cdef(), so it must stay
 * plain declarations that both a C compiler and pycparser accept.
 *
 * Model: everything that can be prepared is prepared once, under a lock, and kept in C tables that
 * never move or shrink (so the hot calls read them without a lock):
 *   - domains   (index 0 is NVTX's default domain, the NULL handle),
 *   - strings   (registered nvtxStringHandle_t, per domain),
 *   - slots     (complete nvtxEventAttributes_t plus their domain).
 * Hot calls take a slot or domain index; an out-of-range index is ignored, never dereferenced.
 * Every table is bounded; creating past a bound returns -1 and the caller falls back to the
 * per-call path (nvtxcffi_emit), which builds the attributes on the stack and keeps nothing.
 */
#ifndef NVTX_CFFI_SHIM_H
#define NVTX_CFFI_SHIM_H

#include <stdint.h>

#define NVTXCFFI_MAX_DOMAINS 256
#define NVTXCFFI_MAX_STRINGS 65536
#define NVTXCFFI_MAX_SLOTS 131072
/* Texts longer than this are registered with NVTX at each use (not kept); the texts kept for
 * registration (see nvtxcffi_string_register) take at most NVTXCFFI_MAX_STRING_TOTAL_BYTES. */
#define NVTXCFFI_MAX_STRING_BYTES 4096
#define NVTXCFFI_MAX_STRING_TOTAL_BYTES 16777216

/* A message's first NVTXCFFI_PREPARE_AT - 1 calls (module-level calls, annotate(), Domain keyword
 * calls) send it with the call, registered (nvtxcffi_emit); its NVTXCFFI_PREPARE_AT-th prepares it
 * (a string entry, a slot, a cached call). A preparation costs about as much as twenty calls sent
 * with their message, so a message used a few times never pays it and one used often pays it once. */
#define NVTXCFFI_PREPARE_AT 32
/* The most NVTX_CFFI_PREPARE_AT may set (nvtx_cffi/_domain.py PREPARE_AT; c/speedups/accel_first_sight.c
 * counts in 6 bits). */
#define NVTXCFFI_PREPARE_AT_MAX 64

/* op for nvtxcffi_emit / nvtxcffi_emit_slot */
#define NVTXCFFI_OP_PUSH 0
#define NVTXCFFI_OP_START 1
#define NVTXCFFI_OP_MARK 2

/* payload kinds */
#define NVTXCFFI_PAYLOAD_NONE 0
#define NVTXCFFI_PAYLOAD_INT64 1
#define NVTXCFFI_PAYLOAD_UINT64 2
#define NVTXCFFI_PAYLOAD_DOUBLE 3

/* Initialise NVTX now (it would otherwise happen at the first call) and report whether a tool
 * filled the domain range/mark slots: 1 attached, 0 none. Idempotent. */
int nvtxcffi_initialize(void);

/* The package version this module was built for (build_ffi.py passes it as NVTXCFFI_VERSION);
 * nvtx_cffi/_native/__init__.py refuses a module built from other Python files. */
const char *nvtxcffi_build_version(void);

/* Diagnostics for tests: does a call through this module's CFFI wrappers hold the GIL?
 * 1 yes, 0 no, -1 not CPython. */
int nvtxcffi_gil_held(void);

/* Registration (thread-safe, takes a mutex). All return -1 on a full table or a bad argument.
 * A text is registered with NVTX (nvtxDomainRegisterStringA) once per domain while it stays in the
 * shim's bounded table of registered texts, whichever call meets it first (string_register, or an
 * event sent with its message per call): NVTX tools see what nvtx 0.2.16 sends, a registration
 * before the text's first event and registered messages only. */
int nvtxcffi_domain_create(const char *name);
int nvtxcffi_string_register(int domain, const char *text);
/* Register `text` in domain `domain` now if it is not kept (no string-table entry: an event whose
 * message goes with it registers it before what else the event registers, as nvtx does). 0, or -1
 * for a bad argument. */
int nvtxcffi_string_keep(int domain, const char *text);
int nvtxcffi_category_name(int domain, uint32_t category, const char *name);
int nvtxcffi_slot_create(int domain, int string_id, uint32_t color, uint32_t category);
int nvtxcffi_domain_count(void);
int nvtxcffi_string_count(void);
int nvtxcffi_slot_count(void);

/* Hot calls: one C call each, no allocation, no lock. */
void nvtxcffi_push(int slot);
void nvtxcffi_pop(int domain);
/* nvtxcffi_pop(0) with no argument: CFFI wraps 0-argument functions as METH_NOARGS, its cheapest
 * call (no argument conversion), and popping the default domain is the most common call of all. */
void nvtxcffi_pop_default(void);
uint64_t nvtxcffi_start(int slot);
void nvtxcffi_end(int domain, uint64_t range_id);
/* nvtxcffi_end(0, range_id) as a 1-argument function (METH_O: no argument tuple to unpack). */
void nvtxcffi_end_default(uint64_t range_id);
void nvtxcffi_mark(int slot);

/* A prepared slot with a per-call payload (kind NVTXCFFI_PAYLOAD_*; ints travel as int64 bits). */
uint64_t nvtxcffi_emit_slot(int op, int slot, int payload_kind, int64_t ivalue, double fvalue);

/* Nothing prepared: message (UTF-8, may be NULL), colour, category and payload given per call. The
 * message is registered (see above) and sent as NVTX_MESSAGE_TYPE_REGISTERED. */
uint64_t nvtxcffi_emit(int op, int domain, const char *message, uint32_t color, uint32_t category,
                       int payload_kind, int64_t ivalue, double fvalue);

/* Thread naming: the calling thread's OS id, and nvtxNameOsThreadA. */
uint32_t nvtxcffi_os_thread_id(void);
void nvtxcffi_name_os_thread(uint32_t os_thread_id, const char *name);

/* ---- CUDA resource naming (nvToolsExtCuda.h) ---------------------------------------------------
 * Handles travel as integers so that neither this header nor the cdef needs CUDA's types:
 * a device is its ordinal (CUdevice is an int), contexts, streams and events are pointers.
 * The shim builds without the CUDA toolkit (see cuda.h). */
void nvtxcffi_name_cuda_device(int device, const char *name);
void nvtxcffi_name_cuda_context(uintptr_t context, const char *name);
void nvtxcffi_name_cuda_stream(uintptr_t stream, const char *name);
void nvtxcffi_name_cuda_event(uintptr_t event, const char *name);

/* The function table of nvtx_api.h (a const nvtxcffi_api_t *), for the optional accelerator
 * module nvtx_cffi._speedups; Python passes its address on (nvtx_cffi/_accel.py). */
const void *nvtxcffi_api(void);

#endif
