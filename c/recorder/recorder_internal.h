/* recorder_internal.h - in-library C API of libnvtx_recorder.so for other C files linked into it
 * (the NVTX payload-extension tool side). Not exported from the shared library.
 *
 * nvtxrec_emit_blob records one variable-length "blob" record on the calling thread: a kind
 * (NVTXREC_BLOB_*), the NVTX domain (the recorder's domain id: (uint32_t)(uintptr_t) of the
 * nvtxDomainHandle_t the recorder returned; 0 for the default domain), a 64-bit argument of the
 * caller's choosing (schema id, counter id, ...), a CLOCK_MONOTONIC timestamp taken now, the
 * thread id, and len raw bytes. At most NVTXREC_BLOB_MAX_BYTES bytes are kept; longer data is
 * cut and the record flagged truncated. Thread-safe, lock-free on the hot path like every other
 * record; a call while the recorder is off is a no-op, one that cannot be recorded (bound reached,
 * disk full, re-entered from a signal handler) is counted in the file's dropped counter.
 *
 * SCHEMA, COUNTER_GROUP and SCOPE blobs are registrations: the recorder keeps a copy (bounded,
 * the latest per (kind, domain, arg)) and a forked child's file starts with them (flag INHERITED).
 *
 * The reader yields each blob as an Event of kind "blob" (name: the kind's name below, target: arg,
 * data: the bytes, truncated) and, in the columnar API, as recorder.Blob entries of EventBlock.blobs.
 */
#ifndef NVTX_CFFI_RECORDER_INTERNAL_H
#define NVTX_CFFI_RECORDER_INTERNAL_H

#include <stdint.h>

#define NVTXREC_BLOB_SCHEMA 1         /* a payload schema registration (nvtxPayloadSchemaRegister) */
#define NVTXREC_BLOB_COUNTER_GROUP 2  /* a counter (group) registration */
#define NVTXREC_BLOB_COUNTER_SAMPLE 3 /* one sample of a counter (group) */
#define NVTXREC_BLOB_PAYLOAD 4        /* a binary payload attached to an event */
#define NVTXREC_BLOB_SCOPE 5          /* a counter scope registration (its path) */
/* 6..63 reserved for nvtx-cffi; 64..255 free for experiments */

#define NVTXREC_BLOB_MAX_BYTES 65536u

#ifdef __cplusplus
extern "C" {
#endif

__attribute__((visibility("hidden"))) void nvtxrec_emit_blob(uint8_t kind, uint32_t domain, uint64_t arg,
                                                              const void *data, uint32_t len);

/* nvtxrec_emit_blob in steps, for a caller that allocates or serializes before it records (and for
 * several records under one claim). nvtxrec_blob_begin claims the calling thread's recording state
 * (its re-entry guard) first, before the caller allocates anything: an NVTX call made meanwhile
 * from a signal handler is then counted as dropped, as in every other handler, instead of
 * re-entering malloc. It returns NULL when nothing is to be recorded (recorder off: a no-op; not
 * recordable or re-entered: counted as dropped); else the caller makes any number of
 * nvtxrec_blob_write calls and then nvtxrec_blob_end, on the same thread. nvtxrec_blob_write is
 * nvtxrec_emit_blob's record with truncated != 0 also flagging it truncated (data the caller cut
 * before: a string past its field's bound) whatever its length. nvtxrec_blob_drop counts one
 * record the caller could not produce (out of memory) in the dropped counter. */
struct tstate;
__attribute__((visibility("hidden"))) struct tstate *nvtxrec_blob_begin(void);
__attribute__((visibility("hidden"))) void nvtxrec_blob_write(struct tstate *t, uint8_t kind, uint32_t domain,
                                                               uint64_t arg, const void *data, uint32_t len,
                                                               int truncated);
__attribute__((visibility("hidden"))) void nvtxrec_blob_end(struct tstate *t);
__attribute__((visibility("hidden"))) void nvtxrec_blob_drop(void);
/* 1 when this process records (NVTX_CFFI_RECORD_DIR set and the file usable), else 0. */
__attribute__((visibility("hidden"))) int nvtxrec_recording(void);

#ifdef __cplusplus
}
#endif

#endif
