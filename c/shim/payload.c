/* payload.c - counters and extended payloads over NVTX's payload and counters extensions
 * (see payload.h for the model). Plain C: no Python C API. */
#include "payload.h"

#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtCounters.h>
#include <nvtx3/nvToolsExtPayload.h>
#include <nvtx3/nvToolsExtSemanticsCounters.h>
#include <nvtx3/nvToolsExtSemanticsTime.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "nvtx_shim.h"
#include "shim_internal.h"

#define CHUNK_SHIFT 10
#define CHUNK_SIZE (1 << CHUNK_SHIFT)
#define CHUNK_MASK (CHUNK_SIZE - 1)

typedef struct {
    nvtxDomainHandle_t domain;
    uint64_t id;
} counter_t;

static counter_t *counter_chunks[NVTXCFFI_MAX_COUNTERS / CHUNK_SIZE];
static atomic_int counter_count;
static int fast_of[2]; /* fast sample functions handed out: [0] int64, [1] float64 */
static counter_t fast_i64[NVTXCFFI_FAST_COUNTERS];
static counter_t fast_f64[NVTXCFFI_FAST_COUNTERS];

/* Which fast function each counter got (-1: none). Written under the counters lock, before the count
 * that makes the counter visible is published. */
static int16_t *fast_chunks[NVTXCFFI_MAX_COUNTERS / CHUNK_SIZE];

void nvtxcffi_internal_counter_semantics(nvtxSemanticsCounter_t *dst, const nvtxcffi_counter_semantics *src)
{
    memset(dst, 0, sizeof *dst);
    dst->header.structSize = sizeof(nvtxSemanticsCounter_t);
    dst->header.semanticId = NVTX_SEMANTIC_ID_COUNTERS_V1;
    dst->header.version = NVTX_COUNTER_SEMANTIC_VERSION;
    dst->header.next = NULL;
    dst->flags = src->flags;
    dst->unit = src->unit;
    dst->unitScaleNumerator = src->scale_numerator;
    dst->unitScaleDenominator = src->scale_denominator;
    dst->limitType = src->limit_type;
    memcpy(&dst->min, &src->min_bits, sizeof dst->min);
    memcpy(&dst->max, &src->max_bits, sizeof dst->max);
}

int nvtxcffi_internal_schema_attr(nvtxPayloadSchemaAttr_t *attr, nvtxcffi_schema_storage *storage,
                                  uint64_t field_mask, uint64_t schema_type, uint64_t schema_flags,
                                  size_t static_size, const nvtxcffi_schema_entry *entries, size_t count,
                                  const nvtxcffi_counter_semantics *semantics, size_t semantics_count)
{
    storage->entries = NULL;
    storage->semantics = NULL;
    if (entries == NULL || count == 0 || count > NVTXCFFI_MAX_SCHEMA_ENTRIES || semantics_count > count)
        return -1;
    nvtxPayloadSchemaEntry_t *e = calloc(count, sizeof *e);
    nvtxSemanticsCounter_t *s = semantics_count ? calloc(semantics_count, sizeof *s) : NULL;
    if (e == NULL || (semantics_count && s == NULL)) {
        free(e);
        free(s);
        return -2;
    }
    for (size_t i = 0; i < semantics_count; ++i)
        nvtxcffi_internal_counter_semantics(&s[i], &semantics[i]);
    for (size_t i = 0; i < count; ++i) {
        e[i].flags = entries[i].flags;
        e[i].type = entries[i].type;
        e[i].name = entries[i].name;
        e[i].description = entries[i].description;
        e[i].arrayOrUnionDetail = entries[i].array_detail;
        e[i].offset = entries[i].offset;
        int k = entries[i].semantics;
        e[i].semantics = (k >= 0 && (size_t)k < semantics_count) ? &s[k].header : NULL;
        e[i].reserved = NULL;
    }
    memset(attr, 0, sizeof *attr);
    attr->fieldMask = field_mask;
    attr->name = NULL;
    attr->type = schema_type;
    attr->flags = schema_flags;
    attr->entries = e;
    attr->numEntries = count;
    attr->payloadStaticSize = static_size;
    storage->entries = e;
    storage->semantics = s;
    return 0;
}

void nvtxcffi_internal_schema_free(nvtxcffi_schema_storage *storage)
{
    free(storage->entries);
    free(storage->semantics);
}

uint64_t nvtxcffi_schema_register(int domain, uint64_t field_mask, uint64_t schema_type,
                                  uint64_t schema_flags, size_t static_size,
                                  const nvtxcffi_schema_entry *entries, size_t count,
                                  const nvtxcffi_counter_semantics *semantics, size_t semantics_count)
{
    nvtxDomainHandle_t handle;
    nvtxPayloadSchemaAttr_t attr;
    nvtxcffi_schema_storage storage;
    if (nvtxcffi_internal_domain(domain, &handle) != 0
        || nvtxcffi_internal_schema_attr(&attr, &storage, field_mask, schema_type, schema_flags, static_size,
                                         entries, count, semantics, semantics_count) != 0)
        return 0;
    uint64_t id = nvtxPayloadSchemaRegister(handle, &attr);
    nvtxcffi_internal_schema_free(&storage);
    return id;
}

uint64_t nvtxcffi_scope_register(int domain, const char *path)
{
    nvtxDomainHandle_t handle;
    if (path == NULL || nvtxcffi_internal_domain(domain, &handle) != 0)
        return NVTX_SCOPE_NONE;
    nvtxScopeAttr_t attr;
    memset(&attr, 0, sizeof attr);
    attr.structSize = sizeof attr;
    attr.path = path;
    attr.parentScope = NVTX_SCOPE_NONE;
    attr.scopeId = NVTX_SCOPE_NONE;
    return nvtxScopeRegister(handle, &attr);
}

int nvtxcffi_counter_register(int domain, uint64_t schema_id, const char *name,
                              const char *description, uint64_t scope_id, uint64_t time_domain,
                              const nvtxcffi_counter_semantics *semantics)
{
    nvtxDomainHandle_t handle;
    if (name == NULL || nvtxcffi_internal_domain(domain, &handle) != 0)
        return -1;
    nvtxSemanticsTime_t time_semantics;
    memset(&time_semantics, 0, sizeof time_semantics);
    time_semantics.header.structSize = sizeof time_semantics;
    time_semantics.header.semanticId = NVTX_SEMANTIC_ID_TIME_V1;
    time_semantics.header.version = NVTX_TIME_SEMANTIC_VERSION;
    time_semantics.header.next = NULL;
    time_semantics.timeDomainId = time_domain;
    nvtxSemanticsCounter_t counter_semantics;
    if (semantics != NULL) {
        nvtxcffi_internal_counter_semantics(&counter_semantics, semantics);
        time_semantics.header.next = &counter_semantics.header;
    }
    nvtxCounterAttr_t attr;
    memset(&attr, 0, sizeof attr);
    attr.structSize = sizeof attr;
    attr.schemaId = schema_id;
    attr.name = name;
    attr.description = description;
    attr.scopeId = scope_id;
    attr.semantics = &time_semantics.header;
    attr.counterId = NVTX_COUNTER_ID_NONE;

    int index = -1;
    nvtxcffi_internal_lock(NVTXCFFI_LOCK_COUNTERS); /* held across fork: see nvtx_shim.c */
    int n = atomic_load_explicit(&counter_count, memory_order_relaxed);
    if (n < NVTXCFFI_MAX_COUNTERS) {
        counter_t **chunk = &counter_chunks[n >> CHUNK_SHIFT];
        int16_t **fchunk = &fast_chunks[n >> CHUNK_SHIFT];
        if (*chunk == NULL)
            *chunk = calloc(CHUNK_SIZE, sizeof(counter_t));
        if (*fchunk == NULL)
            *fchunk = calloc(CHUNK_SIZE, sizeof(int16_t));
        if (*chunk != NULL && *fchunk != NULL) {
            counter_t *c = &(*chunk)[n & CHUNK_MASK];
            c->domain = handle;
            c->id = nvtxCounterRegister(handle, &attr);
            int16_t fast = -1;
            int kind = schema_id == NVTX_PAYLOAD_ENTRY_TYPE_INT64 ? 0
                     : schema_id == NVTX_PAYLOAD_ENTRY_TYPE_FLOAT64 ? 1 : -1;
            if (kind >= 0 && fast_of[kind] < NVTXCFFI_FAST_COUNTERS) {
                fast = (int16_t)fast_of[kind]++;
                (kind == 0 ? fast_i64 : fast_f64)[fast] = *c;
            }
            (*fchunk)[n & CHUNK_MASK] = fast;
            atomic_store_explicit(&counter_count, n + 1, memory_order_release);
            index = n;
        }
    }
    nvtxcffi_internal_unlock(NVTXCFFI_LOCK_COUNTERS);
    return index;
}

int nvtxcffi_counter_count(void) { return atomic_load(&counter_count); }

static inline const counter_t *counter_get(int counter)
{
    if ((unsigned)counter >= (unsigned)atomic_load_explicit(&counter_count, memory_order_acquire))
        return NULL;
    return &counter_chunks[counter >> CHUNK_SHIFT][counter & CHUNK_MASK];
}

uint64_t nvtxcffi_counter_id(int counter)
{
    const counter_t *c = counter_get(counter);
    return c ? c->id : 0;
}

int nvtxcffi_fast_counter(int counter)
{
    if (counter_get(counter) == NULL)
        return -1;
    return fast_chunks[counter >> CHUNK_SHIFT][counter & CHUNK_MASK];
}

void nvtxcffi_counter_sample_int64(int counter, int64_t value)
{
    const counter_t *c = counter_get(counter);
    if (c)
        nvtxCounterSampleInt64(c->domain, c->id, value);
}

void nvtxcffi_counter_sample_float64(int counter, double value)
{
    const counter_t *c = counter_get(counter);
    if (c)
        nvtxCounterSampleFloat64(c->domain, c->id, value);
}

void nvtxcffi_counter_sample(int counter, const void *data, size_t size)
{
    const counter_t *c = counter_get(counter);
    if (c && data)
        nvtxCounterSample(c->domain, c->id, data, size);
}

void nvtxcffi_counter_sample_no_value(int counter, uint8_t reason)
{
    const counter_t *c = counter_get(counter);
    if (c)
        nvtxCounterSampleNoValue(c->domain, c->id, reason);
}

void nvtxcffi_counter_batch(int counter, const void *values, size_t values_size,
                            const int64_t *timestamps, size_t timestamps_size, uint64_t flags)
{
    const counter_t *c = counter_get(counter);
    if (c == NULL)
        return;
    nvtxCounterBatch_t batch;
    memset(&batch, 0, sizeof batch);
    batch.counterId = c->id;
    batch.counters = values_size ? values : NULL;
    batch.countersSize = values_size;
    batch.flags = flags;
    batch.timestamps = timestamps_size ? timestamps : NULL;
    batch.timestampsSize = timestamps_size;
    nvtxCounterBatchSubmit(c->domain, &batch);
}

int64_t nvtxcffi_timestamp(void) { return nvtxTimestampGet(); }

uint64_t nvtxcffi_emit_ext(int op, int slot, int domain, const char *message, uint32_t color,
                           uint32_t category, uint64_t schema_id, const void *data, size_t size)
{
    nvtxEventAttributes_t attr;
    nvtxDomainHandle_t handle;
    if (slot >= 0) {
        if (nvtxcffi_internal_slot(slot, &attr, &handle) != 0)
            return 0;
    } else {
        if (nvtxcffi_internal_domain(domain, &handle) != 0)
            return 0;
        memset(&attr, 0, sizeof attr);
        attr.version = NVTX_VERSION;
        attr.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
        attr.colorType = NVTX_COLOR_ARGB;
        attr.color = color;
        attr.category = category;
        if (message != NULL) { /* registered, as nvtx_shim.c's nvtxcffi_emit sends it */
            attr.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
            attr.message.registered = nvtxcffi_internal_string(domain, message);
            if (nvtxcffi_tool_raised()) /* the registration raised: the call fails, no event */
                return 0;
        }
    }
    nvtxPayloadData_t payload;
    payload.schemaId = schema_id;
    payload.size = size;
    payload.payload = data;
    attr.payloadType = NVTX_PAYLOAD_TYPE_EXT;
    attr.payload.ullValue = (uint64_t)(uintptr_t)&payload;
    attr.reserved0 = 1; /* number of nvtxPayloadData_t */
    switch (op) {
    case NVTXCFFI_OP_PUSH:
        nvtxDomainRangePushEx(handle, &attr);
        return 0;
    case NVTXCFFI_OP_START:
        return nvtxDomainRangeStartEx(handle, &attr);
    case NVTXCFFI_OP_MARK:
        nvtxDomainMarkEx(handle, &attr);
        return 0;
    default:
        return 0;
    }
}

uint64_t nvtxcffi_emit_ext_counted(int op, int slot, int domain, const char *message, uint32_t color,
                                   uint32_t category, uint64_t schema_id, const void *data, size_t nbytes,
                                   uint64_t count)
{
    uint64_t stack[512]; /* 4 KiB, 8-aligned */
    size_t size = sizeof count + nbytes;
    unsigned char *buf = size <= sizeof stack ? (unsigned char *)stack : malloc(size);
    if (buf == NULL || (nbytes && data == NULL))
        return nvtxcffi_emit_ext(op, slot, domain, message, color, category, 0, NULL, 0);
    memcpy(buf, &count, sizeof count);
    if (nbytes)
        memcpy(buf + sizeof count, data, nbytes);
    uint64_t result = nvtxcffi_emit_ext(op, slot, domain, message, color, category, schema_id, buf, size);
    if (buf != (unsigned char *)stack)
        free(buf);
    return result;
}

void nvtxcffi_counter_sample_bytes(int counter, const char *data, size_t size)
{
    nvtxcffi_counter_sample(counter, data, size);
}

/* ---- one-argument samples ----------------------------------------------------------------------
 * fast_i64[K] / fast_f64[K] are written once, under the counters lock, before the registering call
 * returns K to Python (which then binds the function); a function whose K was never handed out
 * finds a zero counter (NULL domain handle, id 0), which tools ignore. */
#define FAST(K)                                                                                     \
    void nvtxcffi_sample_i64_##K(int64_t v) { nvtxCounterSampleInt64(fast_i64[K].domain, fast_i64[K].id, v); } \
    void nvtxcffi_sample_f64_##K(double v) { nvtxCounterSampleFloat64(fast_f64[K].domain, fast_f64[K].id, v); }
FAST(0) FAST(1) FAST(2) FAST(3) FAST(4) FAST(5) FAST(6) FAST(7)
FAST(8) FAST(9) FAST(10) FAST(11) FAST(12) FAST(13) FAST(14) FAST(15)
FAST(16) FAST(17) FAST(18) FAST(19) FAST(20) FAST(21) FAST(22) FAST(23)
FAST(24) FAST(25) FAST(26) FAST(27) FAST(28) FAST(29) FAST(30) FAST(31)
_Static_assert(NVTXCFFI_FAST_COUNTERS == 32, "one FAST(K) per fast counter");
