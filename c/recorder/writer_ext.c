/* writer_ext.c - what the NVTXW backend hands to the recorder's payload and counters extension
 * handlers (recorder_ext.c, linked in): schema, enum, scope, counter and time-domain registrations and
 * counter samples are serialized by those handlers, which record through the nvtxrec_blob_* calls
 * below, to the stream's chunk or to the session's kept definitions. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "writer_backend.h"

#define MAX_SCHEMAS 65536u
#define MAX_COUNTERS 65536u
#define MAX_ENTRIES 4096u

int InitializeInjectionNvtxExtension(nvtxExtModuleInfo_t *info); /* recorder_ext.c */

/* ---------------------------------------------------------------- the blob calls recorder_ext.c makes */

/* The chunk and time the extension handlers record to: set around each handler call. A NULL
 * chunk: the session's kept definitions. */
static __thread struct session *t_session;
static __thread struct chunk *t_chunk;
static __thread uint64_t t_time;

struct tstate *nvtxrec_blob_begin(void) { return t_session ? (struct tstate *)t_session : NULL; }

void nvtxrec_blob_write(struct tstate *t, uint8_t kind, uint32_t domain, uint64_t arg, const void *data,
                        uint32_t len, int truncated) {
    struct session *s = (struct session *)t;
    uint8_t flags = truncated ? NVTXREC_DFLAG_TRUNCATED : 0;
    if (len > NVTXREC_BLOB_MAX_BYTES) {
        len = NVTXREC_BLOB_MAX_BYTES;
        flags |= NVTXREC_DFLAG_TRUNCATED;
    }
    if (!s) return;
    if (t_chunk)
        put_data(s, t_chunk, NVTXREC_D_BLOB, flags, domain, t_time, arg, kind, data, len);
    else
        keep_def(s, NVTXREC_D_BLOB, flags, domain, arg, kind, data, len);
}

void nvtxrec_blob_end(struct tstate *t) { (void)t; }

void nvtxrec_blob_drop(void) {
    if (t_session) atomic_fetch_add(&t_session->dropped, 1);
}

void nvtxrec_emit_blob(uint8_t kind, uint32_t domain, uint64_t arg, const void *data, uint32_t len) {
    nvtxrec_blob_write(nvtxrec_blob_begin(), kind, domain, arg, data, len, 0);
}

int nvtxrec_recording(void) { return 1; }

/* The extension handlers, taken from recorder_ext.c the way NVTX hands them over. */
static intptr_t g_payload_slots[32], g_counter_slots[16];
static pthread_once_t g_handlers_once = PTHREAD_ONCE_INIT;

static void handlers_init(void) {
    nvtxExtModuleSegment_t seg = {0, 32, g_payload_slots};
    nvtxExtModuleInfo_t info;
    memset(&info, 0, sizeof info);
    info.structSize = sizeof info;
    info.moduleId = NVTX_EXT_PAYLOAD_MODULEID;
    info.segmentsCount = 1;
    info.segments = &seg;
    InitializeInjectionNvtxExtension(&info);
    nvtxExtModuleSegment_t seg2 = {0, 16, g_counter_slots};
    info.moduleId = NVTX_EXT_COUNTERS_MODULEID;
    info.segments = &seg2;
    InitializeInjectionNvtxExtension(&info);
}

void load_handlers(void) { pthread_once(&g_handlers_once, handlers_init); }

typedef uint64_t (*schema_fn)(nvtxDomainHandle_t, const nvtxPayloadSchemaAttr_t *);
typedef uint64_t (*enum_fn)(nvtxDomainHandle_t, const nvtxPayloadEnumAttr_t *);
typedef uint64_t (*scope_fn)(nvtxDomainHandle_t, const nvtxScopeAttr_t *);
typedef uint64_t (*timedomain_fn)(nvtxDomainHandle_t, const nvtxTimeDomainAttr_t *);
typedef uint64_t (*counter_fn)(nvtxDomainHandle_t, const nvtxCounterAttr_t *);
typedef void (*i64_fn)(nvtxDomainHandle_t, uint64_t, int64_t);
typedef void (*f64_fn)(nvtxDomainHandle_t, uint64_t, double);
typedef void (*raw_fn)(nvtxDomainHandle_t, uint64_t, const void *, size_t);
typedef void (*novalue_fn)(nvtxDomainHandle_t, uint64_t, uint8_t);
typedef void (*batch_fn)(nvtxDomainHandle_t, const nvtxCounterBatch_t *);

#define HANDLER(table, cbid, type) ((type)(table)[cbid])

/* Run a handler with its records going to chunk c (NULL: the kept definitions, under s->mu). */
#define WITH_TARGET(s, c, t, call)          \
    do {                                    \
        t_session = (s);                    \
        t_chunk = (c);                      \
        t_time = (t);                       \
        call;                               \
        t_session = NULL;                   \
        t_chunk = NULL;                     \
    } while (0)

/* ---------------------------------------------------------------- interface: registrations */

nvtxwResultCode_t ScopeRegister(nvtxDomainHandle_t d, const nvtxScopeAttr_t *attr, uint64_t *out) {
    struct session *s = session_of(d);
    if (!s || !attr || !out) return NVTXW_RESULT_INVALID_ARGUMENT;
    load_handlers();
    scope_fn f = HANDLER(g_payload_slots, NVTX3EXT_CBID_nvtxScopeRegister, scope_fn);
    pthread_mutex_lock(&s->mu);
    WITH_TARGET(s, NULL, 0, *out = f(d, attr));
    pthread_mutex_unlock(&s->mu);
    return *out ? NVTXW_RESULT_SUCCESS : NVTXW_RESULT_FAILED;
}

nvtxwResultCode_t SchemaRegister(nvtxDomainHandle_t d, const nvtxPayloadSchemaAttr_t *attr, uint64_t *out) {
    struct session *s = session_of(d);
    if (!s || !attr || !out) return NVTXW_RESULT_INVALID_ARGUMENT;
    size_t n = (attr->fieldMask & NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_NUM_ENTRIES) && attr->entries ? attr->numEntries : 0;
    if (n > MAX_ENTRIES) return NVTXW_RESULT_INVALID_ARGUMENT;
    struct entry *e = n ? calloc(n, sizeof *e) : NULL;
    if (n && !e) return NVTXW_RESULT_FAILED;
    for (size_t i = 0; i < n; ++i) {
        e[i].flags = attr->entries[i].flags;
        e[i].type = attr->entries[i].type;
        e[i].detail = attr->entries[i].arrayOrUnionDetail;
        e[i].offset = attr->entries[i].offset;
    }
    load_handlers();
    schema_fn f = HANDLER(g_payload_slots, NVTX3EXT_CBID_nvtxPayloadSchemaRegister, schema_fn);
    pthread_mutex_lock(&s->mu);
    if (s->n_schemas >= MAX_SCHEMAS) {
        pthread_mutex_unlock(&s->mu);
        free(e);
        return NVTXW_RESULT_FAILED;
    }
    struct schema *grown = realloc(s->schemas, (s->n_schemas + 1) * sizeof *grown);
    if (!grown) {
        pthread_mutex_unlock(&s->mu);
        free(e);
        return NVTXW_RESULT_FAILED;
    }
    s->schemas = grown;
    uint64_t id = 0;
    WITH_TARGET(s, NULL, 0, id = f(d, attr));
    struct schema *sc = &s->schemas[s->n_schemas++];
    sc->id = id;
    sc->flags = (attr->fieldMask & NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_FLAGS) ? attr->flags : 0;
    sc->type = (attr->fieldMask & NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_TYPE) ? attr->type : 0;
    sc->static_size = (attr->fieldMask & NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_STATIC_SIZE) ? attr->payloadStaticSize : 0;
    sc->n = n;
    sc->e = e;
    pthread_mutex_unlock(&s->mu);
    *out = id;
    return NVTXW_RESULT_SUCCESS;
}

nvtxwResultCode_t EnumRegister(nvtxDomainHandle_t d, const nvtxPayloadEnumAttr_t *attr, uint64_t *out) {
    if (!session_of(d) || !attr || !out) return NVTXW_RESULT_INVALID_ARGUMENT;
    load_handlers();
    *out = HANDLER(g_payload_slots, NVTX3EXT_CBID_nvtxPayloadEnumRegister, enum_fn)(d, attr);
    return NVTXW_RESULT_SUCCESS;
}

nvtxwResultCode_t CounterRegister(nvtxDomainHandle_t d, const nvtxCounterAttr_t *attr, uint64_t *out) {
    struct session *s = session_of(d);
    if (!s || !attr || !out || attr->structSize < sizeof(nvtxCounterAttr_t)) return NVTXW_RESULT_INVALID_ARGUMENT;
    load_handlers();
    counter_fn f = HANDLER(g_counter_slots, NVTX3EXT_CBID_nvtxCounterRegister, counter_fn);
    pthread_mutex_lock(&s->mu);
    if (s->n_counters >= MAX_COUNTERS) {
        pthread_mutex_unlock(&s->mu);
        return NVTXW_RESULT_FAILED;
    }
    struct counter *grown = realloc(s->counters, (s->n_counters + 1) * sizeof *grown);
    if (!grown) {
        pthread_mutex_unlock(&s->mu);
        return NVTXW_RESULT_FAILED;
    }
    s->counters = grown;
    uint64_t id = 0;
    WITH_TARGET(s, NULL, 0, id = f(d, attr));
    s->counters[s->n_counters].id = id;
    s->counters[s->n_counters].schema = attr->schemaId;
    s->n_counters++;
    pthread_mutex_unlock(&s->mu);
    *out = id;
    return NVTXW_RESULT_SUCCESS;
}

nvtxwResultCode_t TimeDomainRegister(nvtxDomainHandle_t d, const nvtxTimeDomainAttr_t *attr, uint64_t *out) {
    if (!session_of(d) || !out) return NVTXW_RESULT_INVALID_ARGUMENT;
    load_handlers();
    *out = HANDLER(g_payload_slots, NVTX3EXT_CBID_nvtxTimeDomainRegister, timedomain_fn)(d, attr);
    return NVTXW_RESULT_SUCCESS;
}

/* ---------------------------------------------------------------- counters */

static uint64_t counter_schema(struct session *s, uint64_t id) {
    uint64_t schema = 0;
    pthread_mutex_lock(&s->mu);
    for (size_t i = s->n_counters; i-- > 0;)
        if (s->counters[i].id == id) {
            schema = s->counters[i].schema;
            break;
        }
    pthread_mutex_unlock(&s->mu);
    return schema;
}

static nvtxwResultCode_t CounterWrite_locked(nvtxwStreamHandle_t handle, int64_t timestamp, uint64_t counterId,
                                      const void *data, size_t size) {
    struct stream *st = (struct stream *)handle;
    if (!st || !data || !size || !valid_time(timestamp)) return NVTXW_RESULT_INVALID_ARGUMENT;
    nvtxDomainHandle_t d = (nvtxDomainHandle_t)st->domain;
    uint64_t schema = counter_schema(st->s, counterId);
    if (size == 8 && (schema == NVTX_PAYLOAD_ENTRY_TYPE_INT64 || schema == NVTX_PAYLOAD_ENTRY_TYPE_LONGLONG)) {
        int64_t v;
        memcpy(&v, data, 8);
        WITH_TARGET(st->s, &st->c, (uint64_t)timestamp,
                    HANDLER(g_counter_slots, NVTX3EXT_CBID_nvtxCounterSampleInt64, i64_fn)(d, counterId, v));
    } else if (size == 8 && (schema == NVTX_PAYLOAD_ENTRY_TYPE_FLOAT64 || schema == NVTX_PAYLOAD_ENTRY_TYPE_DOUBLE)) {
        double v;
        memcpy(&v, data, 8);
        WITH_TARGET(st->s, &st->c, (uint64_t)timestamp,
                    HANDLER(g_counter_slots, NVTX3EXT_CBID_nvtxCounterSampleFloat64, f64_fn)(d, counterId, v));
    } else {
        WITH_TARGET(st->s, &st->c, (uint64_t)timestamp,
                    HANDLER(g_counter_slots, NVTX3EXT_CBID_nvtxCounterSample, raw_fn)(d, counterId, data, size));
    }
    if (timestamp < st->first) st->first = timestamp;
    return NVTXW_RESULT_SUCCESS;
}

static nvtxwResultCode_t CounterNoValueWrite_locked(nvtxwStreamHandle_t handle, int64_t timestamp, uint64_t counterId,
                                             uint8_t reason) {
    struct stream *st = (struct stream *)handle;
    if (!st || !valid_time(timestamp)) return NVTXW_RESULT_INVALID_ARGUMENT;
    WITH_TARGET(st->s, &st->c, (uint64_t)timestamp,
                HANDLER(g_counter_slots, NVTX3EXT_CBID_nvtxCounterSampleNoValue, novalue_fn)(
                    (nvtxDomainHandle_t)st->domain, counterId, reason));
    if (timestamp < st->first) st->first = timestamp;
    return NVTXW_RESULT_SUCCESS;
}

static nvtxwResultCode_t CounterBatchWrite_locked(nvtxwStreamHandle_t handle, const nvtxCounterBatch_t *batch) {
    struct stream *st = (struct stream *)handle;
    if (!st || !batch || !batch->counters || !batch->countersSize) return NVTXW_RESULT_INVALID_ARGUMENT;
    nvtxCounterBatch_t split = *batch;
    int64_t *embedded = NULL;
    if (!batch->timestamps) { /* rows that embed their timestamp: recorded with it taken out as well */
        struct schema sc;
        const struct schema *found = find_schema(st->s, counter_schema(st->s, batch->counterId), &sc);
        size_t at = SIZE_MAX;
        for (size_t i = 0; found && i < sc.n; ++i)
            if ((sc.e[i].flags & NVTX_PAYLOAD_ENTRY_FLAG_TIMESTAMP) && sc.e[i].offset + 8 <= sc.static_size)
                at = (size_t)sc.e[i].offset;
        if (at == SIZE_MAX || !sc.static_size || batch->countersSize % sc.static_size)
            return NVTXW_RESULT_INVALID_ARGUMENT;
        size_t rows = batch->countersSize / sc.static_size;
        embedded = malloc(rows * 8);
        if (!embedded) return NVTXW_RESULT_FAILED;
        for (size_t i = 0; i < rows; ++i)
            memcpy(&embedded[i], (const unsigned char *)batch->counters + i * sc.static_size + at, 8);
        split.timestamps = embedded;
        split.timestampsSize = rows * 8;
    }
    size_t nts = split.timestampsSize / 8;
    int64_t t0 = 0;
    for (size_t i = 0; i < nts; ++i) {
        if (!valid_time(split.timestamps[i])) {
            free(embedded);
            return NVTXW_RESULT_INVALID_ARGUMENT;
        }
        if (i == 0 || split.timestamps[i] < t0) t0 = split.timestamps[i];
    }
    WITH_TARGET(st->s, &st->c, (uint64_t)t0,
                HANDLER(g_counter_slots, NVTX3EXT_CBID_nvtxCounterBatchSubmit, batch_fn)(
                    (nvtxDomainHandle_t)st->domain, &split));
    free(embedded);
    if (nts && t0 < st->first) st->first = t0;
    return NVTXW_RESULT_SUCCESS;
}

nvtxwResultCode_t CounterWrite(nvtxwStreamHandle_t h, int64_t t, uint64_t id, const void *data, size_t size) {
    struct stream *st = (struct stream *)h;
    LOCKED(CounterWrite_locked(h, t, id, data, size));
}
nvtxwResultCode_t CounterNoValueWrite(nvtxwStreamHandle_t h, int64_t t, uint64_t id, uint8_t reason) {
    struct stream *st = (struct stream *)h;
    LOCKED(CounterNoValueWrite_locked(h, t, id, reason));
}
nvtxwResultCode_t CounterBatchWrite(nvtxwStreamHandle_t h, const nvtxCounterBatch_t *batch) {
    struct stream *st = (struct stream *)h;
    LOCKED(CounterBatchWrite_locked(h, batch));
}
