/* writer_backend.h - what the files of libnvtx_writer_backend.so share (writer_backend.c describes
 * the backend).
 *
 * writer_backend.c  the NVTXW interface table and nvtxwGetInterface; sessions and streams
 * writer_records.c  records: a stream's chunk, data records, the definitions kept for the session's
 *                   end, and the registrations that are such definitions (domains, categories, strings)
 * writer_events.c   events: EventWrite / EventBatchWrite payloads read through their schema
 * writer_ext.c      what goes through the recorder's extension handlers (recorder_ext.c, linked in):
 *                   schema, enum, scope, counter and time-domain registrations, counter samples, and
 *                   the nvtxrec_blob_* calls those handlers make
 *
 * A per-event path's helpers are static inline here, so that each file inlines them as one file did;
 * what the files share besides has hidden visibility: direct calls, as for static functions, and
 * nothing exported from the library but nvtxwGetInterface (and recorder_ext.c's entry).
 */
#ifndef NVTX_CFFI_WRITER_BACKEND_H
#define NVTX_CFFI_WRITER_BACKEND_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtCounters.h>
#include <nvtx3/nvToolsExtPayload.h>
#include <nvtxw3/nvtxw3.h>

#include "recorder.h"
#include "recorder_internal.h"

#define PAGE 4096u
#define CHUNK_BYTES (256u * 1024u) /* holds the largest record: a 64 KiB blob */
#define CHUNK_WORDS (CHUNK_BYTES / 8u)
#define MAX_TEXT 65536u /* bytes of one message / name kept (longer: cut, flagged truncated) */
#define MSG_CACHE 256u  /* messages interned per stream (direct-mapped) */
#define M56 ((UINT64_C(1) << 56) - 1)

struct chunk { /* one thread's chunk being filled */
    uint64_t *w;
    size_t n; /* words used, the 4 header words included */
    uint32_t tid;
    int defs; /* the session's definitions */
};

struct entry {
    uint64_t flags, type, detail, offset;
};

struct schema {
    uint64_t id, flags, static_size, type;
    size_t n;
    struct entry *e;
};

struct counter {
    uint64_t id, schema;
};

struct session;

struct msg_slot {
    uint32_t id, len;
    uint64_t hash;
    char *text;
};

struct stream {
    struct session *s;
    pthread_mutex_t mu; /* writes (NVTXW forbids overlapping calls on a stream; this makes them safe) */
    struct chunk c;
    uintptr_t domain; /* the domain handle */
    int64_t first;    /* earliest event time written (INT64_MAX: none) */
    struct stream *next, *prev;
    struct msg_slot cache[MSG_CACHE];
};

struct session {
    pthread_mutex_t mu;
    int fd;
    uint32_t slot;
    uint64_t off, seq; /* next chunk offset, last chunk seq */
    uint16_t next_domain;
    _Atomic uint32_t next_string;
    _Atomic uint64_t next_range;
    _Atomic uint64_t dropped, write_errors;
    int64_t first;
    unsigned char *defs; /* definitions kept for the end: struct def heads + bytes, 8-aligned */
    size_t defs_len, defs_cap;
    struct schema *schemas;
    size_t n_schemas;
    struct counter *counters;
    size_t n_counters;
    struct stream *streams; /* open ones */
};

struct def { /* a kept definition record; its bytes follow, padded to 8 */
    uint8_t tag, flags, aux, pad;
    uint32_t len;
    uint32_t domain, pad2;
    uint64_t arg;
};

/* The domain id of a handle (writer_backend.c: session_of). */
static inline uint32_t domain_id(uintptr_t handle) { return (uint32_t)(handle & 0xFFFF); }

static inline int valid_time(int64_t t) { return t >= 0 && (uint64_t)t <= M56; }

/* The write entry points: one write at a time per stream. */
#define LOCKED(call)                          \
    do {                                      \
        if (!st) return NVTXW_RESULT_INVALID_ARGUMENT; \
        pthread_mutex_lock(&st->mu);          \
        nvtxwResultCode_t rc_ = (call);       \
        pthread_mutex_unlock(&st->mu);        \
        return rc_;                           \
    } while (0)

#pragma GCC visibility push(hidden)

/* ---- writer_backend.c */
struct session *session_of(nvtxDomainHandle_t d); /* the session of a domain handle, or NULL */

/* ---- writer_records.c */
/* Append chunk c to the file (page-rounded, zero-padded) and start it over. */
void chunk_flush(struct session *s, struct chunk *c);
/* Room for k words in c (flushing it when full); 0 when there is no chunk. Inline: every event asks. */
static inline int chunk_room(struct session *s, struct chunk *c, size_t k) {
    if (!c->w) return 0;
    if (c->n + k > CHUNK_WORDS) chunk_flush(s, c);
    return c->n + k <= CHUNK_WORDS;
}
/* A data record (nvtxrec_format.h: head, then the 17 fixed bytes and the data in 7-byte words). */
void put_data(struct session *s, struct chunk *c, uint8_t tag, uint8_t flags, uint32_t domain, uint64_t time,
              uint64_t arg, uint8_t aux, const void *data, uint32_t len);
/* Keep a definition for the end of the session (under s->mu). */
void keep_def(struct session *s, uint8_t tag, uint8_t flags, uint32_t domain, uint64_t arg, uint8_t aux,
              const void *data, uint32_t len);
/* keep_def of a text (NULL: empty), cut at MAX_TEXT bytes. */
void keep_text(struct session *s, uint8_t tag, uint8_t flags, uint32_t domain, uint64_t arg, const char *text);
nvtxwResultCode_t DomainRegister(nvtxwSessionHandle_t handle, const nvtxwDomainAttributes_t *attr,
                                 nvtxDomainHandle_t *out);
nvtxwResultCode_t CategoryRegister(nvtxDomainHandle_t d, uint32_t category, const char *name);
nvtxwResultCode_t StringRegister(nvtxDomainHandle_t d, const char *string, nvtxStringHandle_t *out);
nvtxwResultCode_t ResourceRegister(nvtxDomainHandle_t d, const nvtxResourceAttributes_t *attr);

/* ---- writer_events.c */
/* Schema id's description, copied into *out (the table may grow meanwhile: a registration on
 * another thread; its entries stay put until the session ends). NULL when unknown. */
const struct schema *find_schema(struct session *s, uint64_t id, struct schema *out);
nvtxwResultCode_t EventWrite(nvtxwStreamHandle_t h, const nvtxPayloadData_t *payloads, size_t count);
nvtxwResultCode_t EventBatchWrite(nvtxwStreamHandle_t h, const nvtxEventBatch_t *batch);
nvtxwResultCode_t TimeSyncPointWrite(nvtxwStreamHandle_t st, uint64_t a, uint64_t b, int64_t ta, int64_t tb);
nvtxwResultCode_t TimeSyncPointTableWrite(nvtxwStreamHandle_t st, uint64_t a, uint64_t b,
                                          const nvtxSyncPoint_t *points, size_t count);
nvtxwResultCode_t TimestampConversionFactorWrite(nvtxwStreamHandle_t st, uint64_t a, uint64_t b, double slope,
                                                 int64_t ta, int64_t tb);

/* ---- writer_ext.c */
void load_handlers(void); /* recorder_ext.c's handlers, taken once */
nvtxwResultCode_t ScopeRegister(nvtxDomainHandle_t d, const nvtxScopeAttr_t *attr, uint64_t *out);
nvtxwResultCode_t SchemaRegister(nvtxDomainHandle_t d, const nvtxPayloadSchemaAttr_t *attr, uint64_t *out);
nvtxwResultCode_t EnumRegister(nvtxDomainHandle_t d, const nvtxPayloadEnumAttr_t *attr, uint64_t *out);
nvtxwResultCode_t CounterRegister(nvtxDomainHandle_t d, const nvtxCounterAttr_t *attr, uint64_t *out);
nvtxwResultCode_t TimeDomainRegister(nvtxDomainHandle_t d, const nvtxTimeDomainAttr_t *attr, uint64_t *out);
nvtxwResultCode_t CounterWrite(nvtxwStreamHandle_t h, int64_t t, uint64_t id, const void *data, size_t size);
nvtxwResultCode_t CounterNoValueWrite(nvtxwStreamHandle_t h, int64_t t, uint64_t id, uint8_t reason);
nvtxwResultCode_t CounterBatchWrite(nvtxwStreamHandle_t h, const nvtxCounterBatch_t *batch);

#pragma GCC visibility pop

#endif
