/* nvtx_api.h - the shim's function table, for C extensions that are not the CFFI module.
 *
 * The optional accelerator (nvtx_cffi._speedups, c/speedups/) is a separate extension module. It
 * never links against the shim nor shares a compilation unit with it: nvtx_cffi/_accel.py passes
 * the address that the cdef'd nvtxcffi_api() returns to _speedups.bind(), which checks magic,
 * version, size and the build stamp, then copies the table. Not fed to ffi.cdef(): Python only
 * ever sees the table's address.
 *
 * Growing it: append members, bump NVTXCFFI_API_VERSION; a reader accepts a table at least as
 * large as the struct it was compiled with and of the same version.
 */
#ifndef NVTX_CFFI_API_H
#define NVTX_CFFI_API_H

#include <stdint.h>

#define NVTXCFFI_API_MAGIC 0x4e565458u /* "NVTX" */
#define NVTXCFFI_API_VERSION 3u

typedef struct {
    uint32_t magic;            /* NVTXCFFI_API_MAGIC */
    uint32_t version;          /* NVTXCFFI_API_VERSION */
    uint32_t size;             /* sizeof(nvtxcffi_api_t) of the shim */
    const char *build_version; /* nvtxcffi_build_version(): the package version of the shim */
    /* The hot calls of nvtx_shim.h, same contracts (bad indices ignored). */
    void (*push)(int slot);
    void (*pop)(int domain);
    void (*pop_default)(void);
    uint64_t (*start)(int slot);
    void (*end)(int domain, uint64_t range_id);
    void (*end_default)(uint64_t range_id);
    void (*mark)(int slot);
    uint32_t (*os_thread_id)(void);
    /* version 2: a prepared slot with a per-call payload (nvtxcffi_emit_slot) */
    uint64_t (*emit_slot)(int op, int slot, int payload_kind, int64_t ivalue, double fvalue);
    /* version 3: nothing prepared, the message inline (nvtxcffi_emit): a message's first sight */
    uint64_t (*emit)(int op, int domain, const char *message, uint32_t color, uint32_t category,
                     int payload_kind, int64_t ivalue, double fvalue);
} nvtxcffi_api_t;

#endif
