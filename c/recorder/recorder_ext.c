/* recorder_ext.c - the recorder's tool side of NVTX's payload and counters extensions.
 *
 * NVTX hands an injection tool each extension module through InitializeInjectionNvtxExtension
 * (nvtxDetail/nvtxExtInit.h): moduleInfo->segments[0].functionSlots are the module's function
 * slots, indexed by NVTX3EXT_CBID_*, and the tool writes its handlers there. Slots left alone are
 * disabled by NVTX (calls become no-ops).
 *
 * Everything is recorded as blob records (recorder_internal.h), little-endian, all integers
 * naturally aligned in the layouts below (u8/u16/u32/u64; strings are raw UTF-8 with a length):
 *
 *   SCHEMA (arg: schema id)   u64 field_mask, type, flags, static_size, num_entries; u32 name_len, 0;
 *                             name; then per entry: u64 flags, type, array_detail, offset;
 *                             u32 name_len, desc_len, sem_len, 0; name, desc, semantics
 *   COUNTER_GROUP (arg: counter id)  u64 schema_id, scope_id; u32 name_len, desc_len, sem_len, 0;
 *                             name, desc, semantics
 *   COUNTER_SAMPLE (arg: counter id) u8 mode, u8 flags, u16 0, u32 item_size, u64 n; then
 *                             mode 0 int64 / 1 float64: 8 bytes; 2 raw: the sample's bytes
 *                             (item_size: its full size); 3 no value: u8 reason; 4 batch:
 *                             n x (i64 timestamp, item); 5 batch without timestamps: the values'
 *                             bytes.
 *                             flags bit 0: samples of this batch beyond MAX_BATCH_BYTES were dropped.
 *   PAYLOAD (arg: schema id)  the payload's bytes (cut at NVTXREC_BLOB_MAX_BYTES, flagged truncated)
 *   SCOPE (5, arg: scope id)  the scope path
 *
 * semantics: a sequence of (u32 semantic id, u32 body length, body): counters (5): u64 flags,
 * scale numerator, scale denominator, i64 limit type, u64 min bits, u64 max bits, unit (rest);
 * time (2): u64 time domain id. Others: id and length only.
 *
 * Bounds: a blob holds at most NVTXREC_BLOB_MAX_BYTES. Whatever is cut, the record is flagged
 * truncated, and every length word (and a schema's num_entries) describes what the record holds:
 * a string is cut to its field's bound (counter name 2048 bytes, description 1024, a semantics
 * chain 4096 with a counter unit cut to fit, a scope path or raw sample the blob bound) or to the
 * room left in the blob (a schema: the entry that reaches the bound is cut, later ones left out);
 * a semantics entry that does not fit whole is left out. A batch is split into records of whole
 * samples, at most MAX_BATCH_BYTES of values in all; a batch item too large for a record (over
 * NVTXREC_BLOB_MAX_BYTES - 24 bytes) goes one sample per mode-4 record, cut to fit (item_size:
 * its full size), each flagged truncated.
 *
 * Re-entry: handlers that allocate claim the thread's recording state (nvtxrec_blob_begin) before
 * they allocate, so an NVTX call from a signal handler meanwhile is counted as dropped and never
 * re-enters malloc. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtCounters.h>
#include <nvtx3/nvToolsExtPayload.h>
#include <nvtx3/nvToolsExtSemanticsCounters.h>
#include <nvtx3/nvToolsExtSemanticsTime.h>

#include "recorder_ext.h"
#include "recorder_internal.h"

#define EXPORT __attribute__((visibility("default")))
#define MAX_BATCH_BYTES (16u * NVTXREC_BLOB_MAX_BYTES)
#define MAX_SEMANTICS 8 /* semantics structs followed per chain */

static _Atomic uint64_t g_schema_ids = NVTX_PAYLOAD_SCHEMA_ID_DYNAMIC_START;
static _Atomic uint64_t g_counter_ids = NVTX_COUNTER_ID_DYNAMIC_START;
static _Atomic uint64_t g_scope_ids = NVTX_SCOPE_ID_DYNAMIC_START;

static inline uint32_t dom(nvtxDomainHandle_t d) { return (uint32_t)(uintptr_t)d; }

/* ---------------------------------------------------------------- a bounded byte buffer */

struct buf {
    unsigned char *p;
    size_t len, cap;
};

static void put(struct buf *b, const void *data, size_t n) {
    size_t room = b->cap - b->len; /* len <= cap always */
    if (n > room) n = room;
    if (n) memcpy(b->p + b->len, data, n);
    b->len += n;
}
static void put64(struct buf *b, uint64_t v) { put(b, &v, 8); }
static void put32(struct buf *b, uint32_t v) { put(b, &v, 4); }
/* The length of s (NULL: 0) cut to cap; *cut set when it was longer. */
static uint32_t bounded(const char *s, size_t cap, int *cut) {
    size_t n = s ? strnlen(s, cap + 1) : 0;
    if (n > cap) {
        n = cap;
        *cut = 1;
    }
    return (uint32_t)n;
}

#define SEMANTICS_CAP 4096u /* bytes of one serialized semantics chain */

/* The semantics chain, serialized into out (at most cap bytes): whole entries only, each length word
 * what its body holds, a counter unit cut to the room left. *cut set when anything was cut or left
 * out. Returns the length. */
static size_t semantics(const nvtxSemanticsHeader_t *h, unsigned char *out, size_t cap, int *cut) {
    struct buf b = {out, 0, cap};
    for (int k = 0; h && k < MAX_SEMANTICS; h = h->next, ++k) {
        size_t room = cap - b.len;
        if (h->semanticId == NVTX_SEMANTIC_ID_COUNTERS_V1 && h->structSize >= sizeof(nvtxSemanticsCounter_t)) {
            const nvtxSemanticsCounter_t *c = (const nvtxSemanticsCounter_t *)h;
            if (room < 8 + 48) {
                *cut = 1;
                break;
            }
            uint32_t ulen = bounded(c->unit, room - 8 - 48, cut);
            put32(&b, h->semanticId);
            put32(&b, 48 + ulen);
            put64(&b, c->flags);
            put64(&b, c->unitScaleNumerator);
            put64(&b, c->unitScaleDenominator);
            put64(&b, (uint64_t)c->limitType);
            put(&b, &c->min, 8);
            put(&b, &c->max, 8);
            put(&b, c->unit, ulen);
        } else if (h->semanticId == NVTX_SEMANTIC_ID_TIME_V1 && h->structSize >= sizeof(nvtxSemanticsTime_t)) {
            const nvtxSemanticsTime_t *t = (const nvtxSemanticsTime_t *)h;
            if (room < 8 + 8) {
                *cut = 1;
                break;
            }
            put32(&b, h->semanticId);
            put32(&b, 8);
            put64(&b, t->timeDomainId);
        } else {
            if (room < 8) {
                *cut = 1;
                break;
            }
            put32(&b, h->semanticId);
            put32(&b, 0);
        }
    }
    return b.len;
}

/* ---------------------------------------------------------------- payload module */

static uint64_t h_SchemaRegister(nvtxDomainHandle_t d, const nvtxPayloadSchemaAttr_t *a) {
    uint64_t id = atomic_fetch_add_explicit(&g_schema_ids, 1, memory_order_relaxed);
    if (!a) return 0;
    if ((a->fieldMask & NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_SCHEMA_ID) && a->schemaId) id = a->schemaId;
    struct tstate *t = nvtxrec_blob_begin(); /* before malloc: see Re-entry above */
    if (!t) return id;
    const size_t cap = NVTXREC_BLOB_MAX_BYTES;
    unsigned char *mem = malloc(cap + SEMANTICS_CAP);
    if (!mem) {
        nvtxrec_blob_drop();
        nvtxrec_blob_end(t);
        return id;
    }
    unsigned char *scratch = mem + cap;
    struct buf b = {mem, 0, cap};
    int cut = 0;
    size_t n = (a->fieldMask & NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_NUM_ENTRIES) && a->entries ? a->numEntries : 0;
    const char *name = (a->fieldMask & NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_NAME) ? a->name : NULL;
    uint32_t nl = bounded(name, cap - 48, &cut);
    put64(&b, a->fieldMask);
    put64(&b, (a->fieldMask & NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_TYPE) ? a->type : 0);
    put64(&b, (a->fieldMask & NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_FLAGS) ? a->flags : 0);
    put64(&b, (a->fieldMask & NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_STATIC_SIZE) ? a->payloadStaticSize : 0);
    put64(&b, 0); /* num_entries: the entries written, set below */
    put32(&b, nl);
    put32(&b, 0);
    put(&b, name, nl);
    uint64_t written = 0;
    for (size_t i = 0; i < n; ++i) {
        if (cap - b.len < 48) { /* no room for this entry: it and the rest are left out */
            cut = 1;
            break;
        }
        const nvtxPayloadSchemaEntry_t *e = &a->entries[i];
        size_t room = cap - b.len - 48;
        uint32_t enl = bounded(e->name, room, &cut);
        room -= enl;
        uint32_t edl = bounded(e->description, room, &cut);
        room -= edl;
        size_t sl = semantics(e->semantics, scratch, room < SEMANTICS_CAP ? room : SEMANTICS_CAP, &cut);
        put64(&b, e->flags);
        put64(&b, e->type);
        put64(&b, e->arrayOrUnionDetail);
        put64(&b, e->offset);
        put32(&b, enl);
        put32(&b, edl);
        put32(&b, (uint32_t)sl);
        put32(&b, 0);
        put(&b, e->name, enl);
        put(&b, e->description, edl);
        put(&b, scratch, sl);
        ++written;
    }
    memcpy(mem + 32, &written, 8);
    nvtxrec_blob_write(t, NVTXREC_BLOB_SCHEMA, dom(d), id, mem, (uint32_t)b.len, cut);
    free(mem);
    nvtxrec_blob_end(t);
    return id;
}

static uint64_t h_EnumRegister(nvtxDomainHandle_t d, const nvtxPayloadEnumAttr_t *a) {
    (void)d;
    if (a && (a->fieldMask & NVTX_PAYLOAD_ENUM_ATTR_FIELD_SCHEMA_ID) && a->schemaId) return a->schemaId;
    return atomic_fetch_add_explicit(&g_schema_ids, 1, memory_order_relaxed);
}

static uint8_t h_DomainIsEnabled(nvtxDomainHandle_t d) {
    (void)d;
    return 1;
}

static uint64_t h_ScopeRegister(nvtxDomainHandle_t d, const nvtxScopeAttr_t *a) {
    uint64_t id = atomic_fetch_add_explicit(&g_scope_ids, 1, memory_order_relaxed);
    if (!a) return 0;
    if (a->scopeId) id = a->scopeId;
    /* a path past the blob bound: one byte more than the bound, so the recorder cuts and flags it */
    int cut = 0;
    uint32_t n = bounded(a->path, NVTXREC_BLOB_MAX_BYTES, &cut);
    nvtxrec_emit_blob(NVTXREC_BLOB_SCOPE, dom(d), id, a->path ? a->path : "", cut ? n + 1 : n);
    return id;
}

static int64_t h_TimestampGet(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts); /* the recorder's clock: events and samples share it */
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static uint64_t h_TimeDomainRegister(nvtxDomainHandle_t d, const nvtxTimeDomainAttr_t *a) {
    (void)d;
    if (a && a->timeDomainId) return a->timeDomainId;
    return atomic_fetch_add_explicit(&g_scope_ids, 1, memory_order_relaxed);
}

void nvtxrec_ext_event_payload(uint32_t domain, const nvtxEventAttributes_t *a) {
    if (!a || a->payloadType != NVTXREC_PAYLOAD_TYPE_EXT) return;
    const nvtxPayloadData_t *pd = (const nvtxPayloadData_t *)(uintptr_t)a->payload.ullValue;
    uint32_t count = a->reserved0 > 0 ? (uint32_t)a->reserved0 : 0;
    if (!pd || count > 64) return; /* a garbage count is not followed */
    for (uint32_t i = 0; i < count; ++i) {
        size_t n = pd[i].payload ? pd[i].size : 0;
        uint32_t len = n > NVTXREC_BLOB_MAX_BYTES ? NVTXREC_BLOB_MAX_BYTES + 1 : (uint32_t)n;
        nvtxrec_emit_blob(NVTXREC_BLOB_PAYLOAD, domain, pd[i].schemaId, pd[i].payload, len);
    }
}

/* ---------------------------------------------------------------- counters module */

static uint64_t h_CounterRegister(nvtxDomainHandle_t d, const nvtxCounterAttr_t *a) {
    if (!a || a->structSize < sizeof(nvtxCounterAttr_t)) return NVTX_COUNTER_ID_NONE;
    uint64_t id = a->counterId ? a->counterId : atomic_fetch_add_explicit(&g_counter_ids, 1, memory_order_relaxed);
    unsigned char mem[32 + 2048 + 1024 + SEMANTICS_CAP];
    unsigned char scratch[SEMANTICS_CAP];
    struct buf b = {mem, 0, sizeof mem};
    int cut = 0;
    size_t sl = semantics(a->semantics, scratch, sizeof scratch, &cut);
    uint32_t nl = bounded(a->name, 2048, &cut), dl = bounded(a->description, 1024, &cut);
    put64(&b, a->schemaId);
    put64(&b, a->scopeId);
    put32(&b, nl);
    put32(&b, dl);
    put32(&b, (uint32_t)sl);
    put32(&b, 0);
    put(&b, a->name, nl);
    put(&b, a->description, dl);
    put(&b, scratch, sl);
    struct tstate *t = nvtxrec_blob_begin();
    if (!t) return id;
    nvtxrec_blob_write(t, NVTXREC_BLOB_COUNTER_GROUP, dom(d), id, mem, (uint32_t)b.len, cut);
    nvtxrec_blob_end(t);
    return id;
}

struct sample_head {
    uint8_t mode, flags;
    uint16_t reserved;
    uint32_t item_size;
    uint64_t n;
};
_Static_assert(sizeof(struct sample_head) == 16, "sample header layout");

static void small_sample(nvtxDomainHandle_t d, uint64_t id, uint8_t mode, const void *v, uint32_t size) {
    unsigned char mem[16 + 8];
    struct sample_head h = {mode, 0, 0, size, 1};
    memcpy(mem, &h, 16);
    memcpy(mem + 16, v, size);
    nvtxrec_emit_blob(NVTXREC_BLOB_COUNTER_SAMPLE, dom(d), id, mem, 16 + size);
}

static void h_SampleInt64(nvtxDomainHandle_t d, uint64_t id, int64_t v) { small_sample(d, id, 0, &v, 8); }
static void h_SampleFloat64(nvtxDomainHandle_t d, uint64_t id, double v) { small_sample(d, id, 1, &v, 8); }

static void h_Sample(nvtxDomainHandle_t d, uint64_t id, const void *v, size_t size) {
    if (!v) size = 0;
    struct tstate *t = nvtxrec_blob_begin(); /* before malloc: see Re-entry above */
    if (!t) return;
    uint32_t keep = size > NVTXREC_BLOB_MAX_BYTES - 16 ? NVTXREC_BLOB_MAX_BYTES - 16 : (uint32_t)size;
    unsigned char *mem = malloc(16 + (size_t)keep);
    if (!mem) {
        nvtxrec_blob_drop();
        nvtxrec_blob_end(t);
        return;
    }
    struct sample_head h = {2, 0, 0, (uint32_t)(size > UINT32_MAX ? UINT32_MAX : size), 1};
    memcpy(mem, &h, 16);
    if (keep) memcpy(mem + 16, v, keep);
    nvtxrec_blob_write(t, NVTXREC_BLOB_COUNTER_SAMPLE, dom(d), id, mem, 16 + keep, keep < size);
    free(mem);
    nvtxrec_blob_end(t);
}

static void h_SampleNoValue(nvtxDomainHandle_t d, uint64_t id, uint8_t reason) {
    small_sample(d, id, 3, &reason, 1);
}

static void h_BatchSubmit(nvtxDomainHandle_t d, const nvtxCounterBatch_t *batch) {
    if (!batch || !batch->counters || !batch->countersSize) return;
    struct tstate *t = nvtxrec_blob_begin(); /* before malloc: see Re-entry above */
    if (!t) return;
    size_t nts = batch->timestamps ? batch->timestampsSize / 8 : 0;
    size_t item = nts ? batch->countersSize / nts : 0;
    unsigned char *mem = nts && !item ? NULL : malloc(NVTXREC_BLOB_MAX_BYTES);
    if (!mem) { /* out of memory, or fewer value bytes than timestamps: nothing recorded, counted */
        nvtxrec_blob_drop();
        nvtxrec_blob_end(t);
        return;
    }
    const unsigned char *values = batch->counters;
    if (nts == 0) { /* timestamps embedded in the samples (or none): the raw values */
        size_t total = batch->countersSize > MAX_BATCH_BYTES ? MAX_BATCH_BYTES : batch->countersSize;
        int dropped = batch->countersSize > MAX_BATCH_BYTES;
        for (size_t off = 0; off < total;) {
            size_t n = total - off > NVTXREC_BLOB_MAX_BYTES - 16 ? NVTXREC_BLOB_MAX_BYTES - 16 : total - off;
            struct sample_head h = {5, (uint8_t)(dropped && off + n >= total), 0, 0, n};
            memcpy(mem, &h, 16);
            memcpy(mem + 16, values + off, n);
            nvtxrec_blob_write(t, NVTXREC_BLOB_COUNTER_SAMPLE, dom(d), batch->counterId, mem, (uint32_t)(16 + n), 0);
            off += n;
        }
        free(mem);
        nvtxrec_blob_end(t);
        return;
    }
    /* an item too large for a record goes alone, cut to fit and flagged truncated (as a sample) */
    size_t keep = item > NVTXREC_BLOB_MAX_BYTES - 24 ? NVTXREC_BLOB_MAX_BYTES - 24 : item;
    size_t samples = MAX_BATCH_BYTES / keep; /* at most MAX_BATCH_BYTES of values recorded */
    if (samples > nts) samples = nts;
    int dropped = samples < nts;
    size_t per = (NVTXREC_BLOB_MAX_BYTES - 16) / (8 + keep);
    for (size_t i = 0; i < samples;) {
        size_t n = samples - i < per ? samples - i : per;
        struct sample_head h = {4, (uint8_t)(dropped && i + n >= samples), 0,
                                (uint32_t)(item > UINT32_MAX ? UINT32_MAX : item), n};
        memcpy(mem, &h, 16);
        unsigned char *p = mem + 16;
        for (size_t k = 0; k < n; ++k) {
            memcpy(p, &batch->timestamps[i + k], 8);
            memcpy(p + 8, values + (i + k) * item, keep);
            p += 8 + keep;
        }
        nvtxrec_blob_write(t, NVTXREC_BLOB_COUNTER_SAMPLE, dom(d), batch->counterId, mem, (uint32_t)(p - mem),
                           keep < item);
        i += n;
    }
    free(mem);
    nvtxrec_blob_end(t);
}

/* ---------------------------------------------------------------- installation */

#define SLOT(cbid, fn) [cbid] = (intptr_t)(fn)

EXPORT int InitializeInjectionNvtxExtension(nvtxExtModuleInfo_t *info) {
    if (!info || info->segmentsCount < 1 || !info->segments) return 0;
    (void)nvtxrec_recording(); /* global state is ready before any handler runs */
    nvtxExtModuleSegment_t *seg = &info->segments[0];
    if (!seg->functionSlots) return 0;
    if (info->moduleId == NVTX_EXT_PAYLOAD_MODULEID) {
        const intptr_t table[] = {
            SLOT(NVTX3EXT_CBID_nvtxPayloadSchemaRegister, h_SchemaRegister),
            SLOT(NVTX3EXT_CBID_nvtxPayloadEnumRegister, h_EnumRegister),
            SLOT(NVTX3EXT_CBID_nvtxDomainIsEnabled, h_DomainIsEnabled),
            SLOT(NVTX3EXT_CBID_nvtxScopeRegister, h_ScopeRegister),
            SLOT(NVTX3EXT_CBID_nvtxTimestampGet, h_TimestampGet),
            SLOT(NVTX3EXT_CBID_nvtxTimeDomainRegister, h_TimeDomainRegister),
        };
        for (size_t i = 0; i < sizeof table / sizeof table[0] && i < seg->slotCount; ++i)
            if (table[i]) seg->functionSlots[i] = table[i];
        return 1;
    }
    if (info->moduleId == NVTX_EXT_COUNTERS_MODULEID) {
        const intptr_t table[] = {
            SLOT(NVTX3EXT_CBID_nvtxCounterRegister, h_CounterRegister),
            SLOT(NVTX3EXT_CBID_nvtxCounterSampleInt64, h_SampleInt64),
            SLOT(NVTX3EXT_CBID_nvtxCounterSampleFloat64, h_SampleFloat64),
            SLOT(NVTX3EXT_CBID_nvtxCounterSample, h_Sample),
            SLOT(NVTX3EXT_CBID_nvtxCounterSampleNoValue, h_SampleNoValue),
            SLOT(NVTX3EXT_CBID_nvtxCounterBatchSubmit, h_BatchSubmit),
        };
        for (size_t i = 0; i < sizeof table / sizeof table[0] && i < seg->slotCount; ++i)
            if (table[i]) seg->functionSlots[i] = table[i];
        return 1;
    }
    return 1; /* other modules: nothing handled, their calls stay no-ops */
}
