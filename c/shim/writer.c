/* writer.c - the client side of NVTXW for nvtx_cffi.writer (see writer.h). */
#define _GNU_SOURCE
#include "writer.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

/* nvidia-nvtx releases without the NVTXW headers (13.0.x) still build the shim: every call then
 * answers "not available" (nvtxcffi_w_available() == 0, nvtxcffi_w_load -2). */
#if defined(__has_include)
#if __has_include(<nvtxw3/nvtxw3_event_helpers.h>)
#define NVTXCFFI_HAVE_NVTXW 1
#endif
#endif

#ifndef NVTXCFFI_HAVE_NVTXW
#define NOT_AVAILABLE 7 /* NVTXW_RESULT_NOT_SUPPORTED */
int nvtxcffi_w_available(void) { return 0; }
int nvtxcffi_w_load(const char *path, void **lib, const void **iface, char *err, size_t err_len)
{
    (void)path, (void)lib, (void)iface;
    if (err && err_len) err[0] = 0;
    return -2;
}
void nvtxcffi_w_finalize(void *lib) { (void)lib; }
int nvtxcffi_w_session_begin(const void *i, const char *n, const char *c, void **o) { (void)i, (void)n, (void)c, (void)o; return NOT_AVAILABLE; }
int nvtxcffi_w_session_end(const void *i, void *s) { (void)i, (void)s; return NOT_AVAILABLE; }
int nvtxcffi_w_domain_register(const void *i, void *s, const char *n, void **o) { (void)i, (void)s, (void)n, (void)o; return NOT_AVAILABLE; }
int nvtxcffi_w_category_register(const void *i, void *d, uint32_t c, const char *n) { (void)i, (void)d, (void)c, (void)n; return NOT_AVAILABLE; }
int nvtxcffi_w_string_register(const void *i, void *d, const char *s, void **o) { (void)i, (void)d, (void)s, (void)o; return NOT_AVAILABLE; }
int nvtxcffi_w_scope_register(const void *i, void *d, const char *p, uint64_t pa, uint64_t *o) { (void)i, (void)d, (void)p, (void)pa, (void)o; return NOT_AVAILABLE; }
int nvtxcffi_w_schema_register(const void *i, void *d, uint64_t m, uint64_t t, uint64_t f, size_t ss,
                               const nvtxcffi_schema_entry *e, size_t n, const nvtxcffi_counter_semantics *se,
                               size_t sn, uint64_t *o)
{
    (void)i, (void)d, (void)m, (void)t, (void)f, (void)ss, (void)e, (void)n, (void)se, (void)sn, (void)o;
    return NOT_AVAILABLE;
}
int nvtxcffi_w_counter_register(const void *i, void *d, uint64_t s, const char *n, const char *de, uint64_t sc,
                                const nvtxcffi_counter_semantics *se, uint64_t *o)
{
    (void)i, (void)d, (void)s, (void)n, (void)de, (void)sc, (void)se, (void)o;
    return NOT_AVAILABLE;
}
int nvtxcffi_w_stream_open(const void *i, void *s, const char *n, void *d, uint64_t sc, uint64_t t, int16_t il,
                           int16_t o, int32_t sk, int64_t sa, void **out)
{
    (void)i, (void)s, (void)n, (void)d, (void)sc, (void)t, (void)il, (void)o, (void)sk, (void)sa, (void)out;
    return NOT_AVAILABLE;
}
int nvtxcffi_w_stream_close(const void *i, void *s) { (void)i, (void)s; return NOT_AVAILABLE; }
int nvtxcffi_w_event_schemas(const void *i, void *d, uint64_t *ids) { (void)i, (void)d, (void)ids; return NOT_AVAILABLE; }
int nvtxcffi_w_event(const void *i, void *s, const uint64_t *ids, int op, int64_t t0, int64_t t1, uint64_t r,
                     uint32_t c, uint32_t ca, void *h, const char *m, uint32_t ml, int u)
{
    (void)i, (void)s, (void)ids, (void)op, (void)t0, (void)t1, (void)r, (void)c, (void)ca, (void)h, (void)m, (void)ml,
        (void)u;
    return NOT_AVAILABLE;
}
int nvtxcffi_w_event_write(const void *i, void *s, uint64_t sc, const void *d, size_t n) { (void)i, (void)s, (void)sc, (void)d, (void)n; return NOT_AVAILABLE; }
int nvtxcffi_w_event_batch(const void *i, void *s, uint64_t sc, const void *d, size_t n, uint64_t scope, uint64_t f)
{
    (void)i, (void)s, (void)sc, (void)d, (void)n, (void)scope, (void)f;
    return NOT_AVAILABLE;
}
int nvtxcffi_w_counter_int64(const void *i, void *s, int64_t t, uint64_t c, int64_t v) { (void)i, (void)s, (void)t, (void)c, (void)v; return NOT_AVAILABLE; }
int nvtxcffi_w_counter_float64(const void *i, void *s, int64_t t, uint64_t c, double v) { (void)i, (void)s, (void)t, (void)c, (void)v; return NOT_AVAILABLE; }
int nvtxcffi_w_counter_raw(const void *i, void *s, int64_t t, uint64_t c, const void *d, size_t n) { (void)i, (void)s, (void)t, (void)c, (void)d, (void)n; return NOT_AVAILABLE; }
int nvtxcffi_w_counter_no_value(const void *i, void *s, int64_t t, uint64_t c, uint8_t r) { (void)i, (void)s, (void)t, (void)c, (void)r; return NOT_AVAILABLE; }
int nvtxcffi_w_counter_batch(const void *i, void *s, uint64_t c, const void *v, size_t vs, const int64_t *t, size_t ts,
                             uint64_t f)
{
    (void)i, (void)s, (void)c, (void)v, (void)vs, (void)t, (void)ts, (void)f;
    return NOT_AVAILABLE;
}
#else /* NVTXCFFI_HAVE_NVTXW */

#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtCounters.h>
#include <nvtx3/nvToolsExtPayload.h>
#include <nvtx3/nvToolsExtSemanticsCounters.h>
#include <nvtxw3/nvtxw3.h>
#include <nvtxw3/nvtxw3_counter_helpers.h>
#include <nvtxw3/nvtxw3_event_helpers.h>

#include <stdlib.h>

#include "shim_internal.h" /* nvtxcffi_internal_counter_semantics (payload.c) */

/* Call an interface function (a backend without it: NOT_SUPPORTED). The GIL stays held, as in
 * nvtx's Cython: Python threads never overlap calls into a backend, whose rules forbid overlapping
 * calls on one stream. */
#define IFACE(i) ((const nvtxwInterface_t *)(i))
#define CALL(iface, fn, ...)                                                    \
    do {                                                                        \
        if (!(iface) || !IFACE(iface)->fn) return NVTXW_RESULT_NOT_SUPPORTED;   \
        return IFACE(iface)->fn(__VA_ARGS__);                                   \
    } while (0)
#define RETURN(expr) return (expr)

int nvtxcffi_w_available(void) { return 1; }

int nvtxcffi_w_load(const char *path, void **lib, const void **iface, char *err, size_t err_len)
{
    if (err && err_len) err[0] = 0;
    if (!path || !lib || !iface) return NVTXW_RESULT_INVALID_ARGUMENT;
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        if (err && err_len) snprintf(err, err_len, "%s", e ? e : path);
        return -1;
    }
    nvtxwGetInterface_t get = (nvtxwGetInterface_t)(uintptr_t)dlsym(h, NVTXW_GET_INTERFACE_SYMBOL_NAME);
    if (!get) {
        *lib = h; /* stays loaded, as a library ctypes loaded would */
        return NVTXW_RESULT_LIBRARY_SYMBOL_MISSING;
    }
    const void *table = NULL;
    nvtxwResultCode_t rc = get(NVTXW_INTERFACE_VERSION, &table);
    *lib = h;
    if (rc != NVTXW_RESULT_SUCCESS) return rc;
    if (!table) return NVTXW_RESULT_FAILED;
    *iface = table;
    return NVTXW_RESULT_SUCCESS;
}

void nvtxcffi_w_finalize(void *lib)
{
    if (!lib) return;
    void (*fin)(void) = (void (*)(void))(uintptr_t)dlsym(lib, NVTXW_FINALIZE_SYMBOL_NAME);
    if (fin) fin();
}

int nvtxcffi_w_session_begin(const void *iface, const char *name, const char *config, void **out)
{
    nvtxwSessionAttributes_t attr;
    memset(&attr, 0, sizeof attr);
    attr.structSize = sizeof attr;
    attr.name = name;
    attr.configString = config;
    CALL(iface, SessionBegin, &attr, (nvtxwSessionHandle_t *)out);
}

int nvtxcffi_w_session_end(const void *iface, void *session)
{
    CALL(iface, SessionEnd, (nvtxwSessionHandle_t)session);
}

int nvtxcffi_w_domain_register(const void *iface, void *session, const char *name, void **out)
{
    nvtxwDomainAttributes_t attr;
    memset(&attr, 0, sizeof attr);
    attr.structSize = sizeof attr;
    attr.name = name;
    CALL(iface, DomainRegister, (nvtxwSessionHandle_t)session, &attr, (nvtxDomainHandle_t *)out);
}

int nvtxcffi_w_category_register(const void *iface, void *domain, uint32_t category, const char *name)
{
    CALL(iface, CategoryRegister, (nvtxDomainHandle_t)domain, category, name);
}

int nvtxcffi_w_string_register(const void *iface, void *domain, const char *string, void **out)
{
    CALL(iface, StringRegister, (nvtxDomainHandle_t)domain, string, (nvtxStringHandle_t *)out);
}

int nvtxcffi_w_scope_register(const void *iface, void *domain, const char *path, uint64_t parent, uint64_t *out)
{
    nvtxScopeAttr_t attr;
    memset(&attr, 0, sizeof attr);
    attr.structSize = sizeof attr;
    attr.path = path;
    attr.parentScope = parent;
    attr.scopeId = NVTX_SCOPE_NONE;
    CALL(iface, ScopeRegister, (nvtxDomainHandle_t)domain, &attr, out);
}

int nvtxcffi_w_schema_register(const void *iface, void *domain, uint64_t field_mask, uint64_t schema_type,
                               uint64_t schema_flags, size_t static_size, const nvtxcffi_schema_entry *entries,
                               size_t count, const nvtxcffi_counter_semantics *semantics, size_t semantics_count,
                               uint64_t *out)
{
    if (!iface || !IFACE(iface)->SchemaRegister) return NVTXW_RESULT_NOT_SUPPORTED;
    if (!out)
        return NVTXW_RESULT_INVALID_ARGUMENT;
    nvtxPayloadSchemaAttr_t attr;
    nvtxcffi_schema_storage storage;
    int made = nvtxcffi_internal_schema_attr(&attr, &storage, field_mask, schema_type, schema_flags, static_size,
                                             entries, count, semantics, semantics_count);
    if (made != 0)
        return made == -1 ? NVTXW_RESULT_INVALID_ARGUMENT : NVTXW_RESULT_FAILED;
    nvtxwResultCode_t rc = IFACE(iface)->SchemaRegister((nvtxDomainHandle_t)domain, &attr, out);
    nvtxcffi_internal_schema_free(&storage);
    return rc;
}

int nvtxcffi_w_counter_register(const void *iface, void *domain, uint64_t schema_id, const char *name,
                                const char *description, uint64_t scope_id,
                                const nvtxcffi_counter_semantics *semantics, uint64_t *out)
{
    nvtxSemanticsCounter_t sem;
    nvtxCounterAttr_t attr;
    memset(&attr, 0, sizeof attr);
    attr.structSize = sizeof attr;
    attr.schemaId = schema_id;
    attr.name = name;
    attr.description = description;
    attr.scopeId = scope_id;
    if (semantics) {
        nvtxcffi_internal_counter_semantics(&sem, semantics);
        attr.semantics = &sem.header;
    }
    attr.counterId = NVTX_COUNTER_ID_NONE;
    CALL(iface, CounterRegister, (nvtxDomainHandle_t)domain, &attr, out);
}

int nvtxcffi_w_stream_open(const void *iface, void *session, const char *name, void *domain, uint64_t scope,
                           uint64_t time_domain, int16_t interleaving, int16_t ordering, int32_t skid,
                           int64_t skid_amount, void **out)
{
    nvtxwStreamAttributes_t attr;
    memset(&attr, 0, sizeof attr);
    attr.structSize = sizeof attr;
    attr.name = name;
    attr.domain = (nvtxDomainHandle_t)domain;
    attr.scopeId = scope;
    attr.timeDomainId = time_domain;
    attr.orderInterleaving = interleaving;
    attr.orderingType = ordering;
    attr.orderingSkid = skid;
    attr.orderingSkidAmount = skid_amount;
    CALL(iface, StreamOpen, (nvtxwSessionHandle_t)session, &attr, (nvtxwStreamHandle_t *)out);
}

int nvtxcffi_w_stream_close(const void *iface, void *stream)
{
    CALL(iface, StreamClose, (nvtxwStreamHandle_t)stream);
}

_Static_assert(sizeof(nvtxwEventHelperSchemaIds_t) == NVTXCFFI_W_SCHEMA_IDS * sizeof(uint64_t),
               "nvtxwEventHelperSchemaIds_t is 13 uint64_t");

int nvtxcffi_w_event_schemas(const void *iface, void *domain, uint64_t *ids)
{
    nvtxwEventHelperSchemaIds_t out;
    memset(&out, 0, sizeof out);
    nvtxwResultCode_t rc = nvtxwEventSchemasRegister(IFACE(iface), (nvtxDomainHandle_t)domain,
                                                     NVTXW_EVENT_HELPER_SCHEMA_ALL, &out);
    memcpy(ids, &out, sizeof out);
    return rc;
}

int nvtxcffi_w_event(const void *iface, void *stream, const uint64_t *ids, int op, int64_t t0, int64_t t1,
                     uint64_t range_id, uint32_t color, uint32_t category, void *string_handle, const char *message,
                     uint32_t message_len, int utf8)
{
    nvtxwEventWriter_t w;
    w.iface = IFACE(iface);
    w.stream = (nvtxwStreamHandle_t)stream;
    memcpy(&w.schemaIds, ids, sizeof w.schemaIds);
    nvtxwEventAttributes_t a;
    a.color = color;
    a.category = category;
    a.message = (nvtxStringHandle_t)string_handle;
    nvtxwEventAttributesUtf8_t u;
    u.color = color;
    u.category = category;
    u.message = message;
    u.messageLength = message_len;
    switch (op) {
    case NVTXCFFI_W_MARK: RETURN(utf8 ? nvtxwMarkWriteUtf8(&w, t0, u) : nvtxwMarkWrite(&w, t0, a));
    case NVTXCFFI_W_PUSHPOP:
        RETURN(utf8 ? nvtxwRangePushPopWriteUtf8(&w, t0, t1, u) : nvtxwRangePushPopWrite(&w, t0, t1, a));
    case NVTXCFFI_W_STARTEND:
        RETURN(utf8 ? nvtxwRangeStartEndWriteUtf8(&w, t0, t1, u) : nvtxwRangeStartEndWrite(&w, t0, t1, a));
    case NVTXCFFI_W_PUSH: RETURN(utf8 ? nvtxwRangePushWriteUtf8(&w, t0, u) : nvtxwRangePushWrite(&w, t0, a));
    case NVTXCFFI_W_POP: RETURN(nvtxwRangePopWrite(&w, t0));
    case NVTXCFFI_W_START:
        RETURN(utf8 ? nvtxwRangeStartWriteUtf8(&w, t0, range_id, u) : nvtxwRangeStartWrite(&w, t0, range_id, a));
    case NVTXCFFI_W_END: RETURN(nvtxwRangeEndWrite(&w, t0, range_id));
    default: return NVTXW_RESULT_INVALID_ARGUMENT;
    }
}

int nvtxcffi_w_event_write(const void *iface, void *stream, uint64_t schema, const void *data, size_t size)
{
    nvtxPayloadData_t p;
    p.schemaId = schema;
    p.size = size;
    p.payload = data;
    CALL(iface, EventWrite, (nvtxwStreamHandle_t)stream, &p, 1);
}

int nvtxcffi_w_event_batch(const void *iface, void *stream, uint64_t schema, const void *data, size_t size,
                           uint64_t scope, uint64_t flags)
{
    nvtxEventBatch_t b;
    memset(&b, 0, sizeof b);
    b.eventSchemaId = schema;
    b.size = size;
    b.events = data;
    b.scope = scope;
    b.flags = flags;
    CALL(iface, EventBatchWrite, (nvtxwStreamHandle_t)stream, &b);
}

int nvtxcffi_w_counter_int64(const void *iface, void *stream, int64_t timestamp, uint64_t counter, int64_t value)
{
    RETURN(nvtxwCounterInt64Write(IFACE(iface), (nvtxwStreamHandle_t)stream, timestamp, counter, value));
}

int nvtxcffi_w_counter_float64(const void *iface, void *stream, int64_t timestamp, uint64_t counter, double value)
{
    RETURN(nvtxwCounterFloat64Write(IFACE(iface), (nvtxwStreamHandle_t)stream, timestamp, counter, value));
}

int nvtxcffi_w_counter_raw(const void *iface, void *stream, int64_t timestamp, uint64_t counter, const void *data,
                           size_t size)
{
    CALL(iface, CounterWrite, (nvtxwStreamHandle_t)stream, timestamp, counter, data, size);
}

int nvtxcffi_w_counter_no_value(const void *iface, void *stream, int64_t timestamp, uint64_t counter, uint8_t reason)
{
    CALL(iface, CounterNoValueWrite, (nvtxwStreamHandle_t)stream, timestamp, counter, reason);
}

int nvtxcffi_w_counter_batch(const void *iface, void *stream, uint64_t counter, const void *values,
                             size_t values_size, const int64_t *timestamps, size_t timestamps_size, uint64_t flags)
{
    nvtxCounterBatch_t b;
    memset(&b, 0, sizeof b);
    b.counterId = counter;
    b.counters = values;
    b.countersSize = values_size;
    b.timestamps = timestamps;
    b.timestampsSize = timestamps_size;
    b.flags = flags;
    CALL(iface, CounterBatchWrite, (nvtxwStreamHandle_t)stream, &b);
}
#endif /* NVTXCFFI_HAVE_NVTXW */
