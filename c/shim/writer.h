/* writer.h - the client side of NVTXW (nvtxw3/nvtxw3.h) for nvtx_cffi.writer: load a backend
 * library and call its interface table (writer.c).
 *
 * build_ffi.py feeds this file (minus its preprocessor lines) to ffi.cdef(): plain declarations
 * only, no NVTXW types (handles are void *; nvtxcffi_schema_entry and nvtxcffi_counter_semantics
 * come from payload.h). Every call but nvtxcffi_w_load returns the backend's NVTXW_RESULT_* code
 * (0: success); a missing interface function is NVTXW_RESULT_NOT_SUPPORTED (7). The GIL stays
 * held (as in nvtx's Cython), so Python threads never overlap calls into a backend.
 */
#ifndef NVTX_CFFI_WRITER_H
#define NVTX_CFFI_WRITER_H

#include <stddef.h>
#include <stdint.h>

#include "payload.h"

/* the fields of nvtxwEventHelperSchemaIds_t */
#define NVTXCFFI_W_SCHEMA_IDS 13

/* event helper ops (nvtxw3_event_helpers.h) */
#define NVTXCFFI_W_MARK 0
#define NVTXCFFI_W_PUSHPOP 1
#define NVTXCFFI_W_STARTEND 2
#define NVTXCFFI_W_PUSH 3
#define NVTXCFFI_W_POP 4
#define NVTXCFFI_W_START 5
#define NVTXCFFI_W_END 6

/* 1: built with the NVTXW headers (nvtxw3/ of nvidia-nvtx); 0: without them (nvidia-nvtx 13.0.x),
 * every call answers NVTXW_RESULT_NOT_SUPPORTED and nvtxcffi_w_load -2. */
int nvtxcffi_w_available(void);
/* dlopen(path) and resolve nvtxwGetInterface, then ask it for interface version 2 (what
 * nvtxw3_loader.h's nvtxwLoad + nvtxwLoadInterface do). 0: *lib and *iface set; -1: dlopen failed
 * (err: dlerror's text); -2: built without NVTXW; else the NVTXW_RESULT_* code (5: no
 * nvtxwGetInterface symbol). */
int nvtxcffi_w_load(const char *path, void **lib, const void **iface, char *err, size_t err_len);
/* The backend's nvtxwFinalize, if it exports one (the library itself stays loaded). */
void nvtxcffi_w_finalize(void *lib);

int nvtxcffi_w_session_begin(const void *iface, const char *name, const char *config, void **out);
int nvtxcffi_w_session_end(const void *iface, void *session);
int nvtxcffi_w_domain_register(const void *iface, void *session, const char *name, void **out);
int nvtxcffi_w_category_register(const void *iface, void *domain, uint32_t category, const char *name);
int nvtxcffi_w_string_register(const void *iface, void *domain, const char *string, void **out);
int nvtxcffi_w_scope_register(const void *iface, void *domain, const char *path, uint64_t parent, uint64_t *out);
int nvtxcffi_w_schema_register(const void *iface, void *domain, uint64_t field_mask, uint64_t schema_type,
                               uint64_t schema_flags, size_t static_size, const nvtxcffi_schema_entry *entries,
                               size_t count, const nvtxcffi_counter_semantics *semantics, size_t semantics_count,
                               uint64_t *out);
int nvtxcffi_w_counter_register(const void *iface, void *domain, uint64_t schema_id, const char *name,
                                const char *description, uint64_t scope_id,
                                const nvtxcffi_counter_semantics *semantics, uint64_t *out);
int nvtxcffi_w_stream_open(const void *iface, void *session, const char *name, void *domain, uint64_t scope,
                           uint64_t time_domain, int16_t interleaving, int16_t ordering, int32_t skid,
                           int64_t skid_amount, void **out);
int nvtxcffi_w_stream_close(const void *iface, void *stream);

/* nvtxwEventSchemasRegister(NVTXW_EVENT_HELPER_SCHEMA_ALL): ids gets the 13 schema ids. */
int nvtxcffi_w_event_schemas(const void *iface, void *domain, uint64_t *ids);
/* One event through the nvtxw*Write helpers: op NVTXCFFI_W_*; utf8: the message is text (NULL:
 * none), else string_handle is a registered string's handle (NULL: none). */
int nvtxcffi_w_event(const void *iface, void *stream, const uint64_t *ids, int op, int64_t t0, int64_t t1,
                     uint64_t range_id, uint32_t color, uint32_t category, void *string_handle, const char *message,
                     uint32_t message_len, int utf8);
int nvtxcffi_w_event_write(const void *iface, void *stream, uint64_t schema, const void *data, size_t size);
int nvtxcffi_w_event_batch(const void *iface, void *stream, uint64_t schema, const void *data, size_t size,
                           uint64_t scope, uint64_t flags);

int nvtxcffi_w_counter_int64(const void *iface, void *stream, int64_t timestamp, uint64_t counter, int64_t value);
int nvtxcffi_w_counter_float64(const void *iface, void *stream, int64_t timestamp, uint64_t counter, double value);
int nvtxcffi_w_counter_raw(const void *iface, void *stream, int64_t timestamp, uint64_t counter, const void *data,
                           size_t size);
int nvtxcffi_w_counter_no_value(const void *iface, void *stream, int64_t timestamp, uint64_t counter, uint8_t reason);
int nvtxcffi_w_counter_batch(const void *iface, void *stream, uint64_t counter, const void *values,
                             size_t values_size, const int64_t *timestamps, size_t timestamps_size, uint64_t flags);

#endif
