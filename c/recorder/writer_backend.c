/* writer_backend.c - nvtx-cffi's NVTXW backend (libnvtx_writer_backend.so): events and counter
 * samples submitted with explicit timestamps through the NVTXW interface (nvtxw3/nvtxw3.h) are
 * written in the recorder's record format (recorder.h), so the tracer converts them like a
 * recording (nvtx_cffi.recorder, python -m nvtx_cffi trace's conversion).
 *
 * One session is one record file "<dir>/nvtx-<pid>-e0-<ns hex>.nvtxrec" (header clock MONOTONIC,
 * start_ns 0: a record's time is the timestamp given, in ns, 0 <= t < 2^56; anything else is
 * NVTXW_RESULT_INVALID_ARGUMENT). <dir>: the session config's "dir=" key, else NVTX_CFFI_RECORD_DIR,
 * else the session name (created, one level, when missing).
 *
 * A stream is a thread of the recording (tid 1, 2, ... in open order in the process, named after
 * the stream). It
 * fills one chunk (CHUNK_BYTES) in memory and appends it to the file when full and at close: calls
 * on one stream need no lock (NVTXW: calls on the same stream must not overlap), appending takes the
 * session's. Definitions (domains, categories, registered strings, schemas, counters, scopes,
 * stream names) are kept until the session ends and written then with the time of the session's
 * earliest event, so they never widen the recording's time span.
 *
 * Events: EventWrite / EventBatchWrite payloads are read through their schema (its event kind
 * flag: NVTX_PAYLOAD_SCHEMA_FLAG_MARK, RANGE_*; entries with the TIMESTAMP + MARK / RANGE_BEGIN /
 * RANGE_END flags, COLOR_ARGB, CATEGORY, RANGE_ID, and an EVENT_MESSAGE entry: a registered string
 * handle, a fixed-size UTF-8 array, or a further payload whose schema holds only a message, as
 * nvtxw3_event_helpers.h writes). A push/pop range becomes a push and a pop, a start/end range a
 * start and an end with a range id of the backend's own (bit 63 set). Schema, counter and scope
 * registrations and counter samples are serialized by the recorder's own payload/counters
 * extension handlers (recorder_ext.c, linked in), which record through the nvtxrec_blob_* calls
 * this file implements; a counter batch whose rows embed their timestamp (a TIMESTAMP entry in the
 * counter's schema) is recorded with the timestamps taken out as well, as the reader expects.
 * Time-domain conversions and resources are not supported
 * (NVTXW_RESULT_NOT_SUPPORTED); time domains are accepted and their timestamps taken as ns.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtCounters.h>
#include <nvtx3/nvToolsExtPayload.h>
#include <nvtxw3/nvtxw3.h>

#include "recorder.h"
#include "recorder_internal.h"

#define EXPORT __attribute__((visibility("default")))
#define PAGE 4096u
#define CHUNK_BYTES (256u * 1024u) /* holds the largest record: a 64 KiB blob */
#define CHUNK_WORDS (CHUNK_BYTES / 8u)
#define MAX_SESSIONS 1024u
#define MAX_DOMAINS 0xFFFFu
#define MAX_SCHEMAS 65536u
#define MAX_COUNTERS 65536u
#define MAX_ENTRIES 4096u
#define MAX_TEXT 65536u /* bytes of one message / name kept (longer: cut, flagged truncated) */
#define MSG_CACHE 256u  /* messages interned per stream (direct-mapped) */
#define M56 ((UINT64_C(1) << 56) - 1)

int InitializeInjectionNvtxExtension(nvtxExtModuleInfo_t *info); /* recorder_ext.c */

/* ---------------------------------------------------------------- types */

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

/* ---------------------------------------------------------------- sessions and handles */

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint32_t g_next_tid = 1; /* streams' thread ids (0: the definitions) */
static struct session *_Atomic g_sessions[MAX_SESSIONS]; /* slot 0 unused: handles are never NULL */

/* A domain handle: session slot << 16 | domain id (0: the default domain). */
static struct session *session_of(nvtxDomainHandle_t d) {
    uintptr_t h = (uintptr_t)d;
    uintptr_t slot = h >> 16;
    if (!h || slot == 0 || slot >= MAX_SESSIONS) return NULL;
    return atomic_load_explicit(&g_sessions[slot], memory_order_acquire);
}
static uint32_t domain_id(uintptr_t handle) { return (uint32_t)(handle & 0xFFFF); }

/* ---------------------------------------------------------------- records */

static uint64_t now_realtime(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Append chunk c to the file (page-rounded, zero-padded) and start it over. */
static void chunk_flush(struct session *s, struct chunk *c) {
    if (!c->w || c->n <= 4) return;
    uint64_t size = ((uint64_t)c->n * 8 + PAGE - 1) / PAGE * PAGE;
    pthread_mutex_lock(&s->mu);
    /* the definitions' chunks (written at the end) take seq 0: readers take them first */
    uint64_t off = s->off, seq = c->defs ? 0 : ++s->seq;
    s->off += size;
    pthread_mutex_unlock(&s->mu);
    uint32_t check = NVTXREC_CHUNK_CHECK ^ (uint32_t)size ^ c->tid ^ (uint32_t)off ^ (uint32_t)seq;
    c->w[0] = NVTXREC_CHUNK_TAG | (size << 32);
    c->w[1] = (uint64_t)c->tid | ((uint64_t)check << 32);
    c->w[2] = off;
    c->w[3] = seq;
    const unsigned char *p = (const unsigned char *)c->w;
    size_t left = (size_t)size;
    while (left) {
        ssize_t k = pwrite(s->fd, p, left, (off_t)off);
        if (k <= 0) {
            if (k < 0 && errno == EINTR) continue;
            atomic_fetch_add(&s->write_errors, 1);
            break;
        }
        p += k;
        off += (uint64_t)k;
        left -= (size_t)k;
    }
    memset(c->w, 0, (size_t)size);
    c->n = 4;
}

/* Room for k words in c (flushing it when full); 0 when there is no chunk. */
static int chunk_room(struct session *s, struct chunk *c, size_t k) {
    if (!c->w) return 0;
    if (c->n + k > CHUNK_WORDS) chunk_flush(s, c);
    return c->n + k <= CHUNK_WORDS;
}

/* A data record (recorder.h: head, then the 17 fixed bytes and the data in 7-byte words). */
static void put_data(struct session *s, struct chunk *c, uint8_t tag, uint8_t flags, uint32_t domain,
                     uint64_t time, uint64_t arg, uint8_t aux, const void *data, uint32_t len) {
    if (len > MAX_TEXT + 8) {
        len = MAX_TEXT + 8;
        flags |= NVTXREC_DFLAG_TRUNCATED;
    }
    uint32_t total = NVTXREC_DATA_FIXED + len;
    size_t k = (total + 6) / 7;
    if (!chunk_room(s, c, 1 + k)) {
        atomic_fetch_add(&s->dropped, 1);
        return;
    }
    uint64_t *w = c->w + c->n;
    unsigned char fixed[NVTXREC_DATA_FIXED];
    memcpy(fixed, &time, 8);
    memcpy(fixed + 8, &arg, 8);
    fixed[16] = aux;
    const unsigned char *d = data;
    for (size_t i = 0; i < k; ++i) {
        uint64_t v = 0;
        for (uint32_t b = 0; b < 7; ++b) {
            uint32_t at = (uint32_t)i * 7 + b;
            if (at >= total) break;
            unsigned char byte = at < NVTXREC_DATA_FIXED ? fixed[at] : d[at - NVTXREC_DATA_FIXED];
            v |= (uint64_t)byte << (8 * b);
        }
        w[1 + i] = NVTXREC_W_CONT | (v << 8);
    }
    w[0] = tag | ((uint64_t)flags << 8) | ((uint64_t)(domain & 0xFFFF) << 16) | ((uint64_t)total << 32);
    c->n += 1 + k;
}

/* Keep a definition for the end of the session (under s->mu). */
static void keep_def(struct session *s, uint8_t tag, uint8_t flags, uint32_t domain, uint64_t arg, uint8_t aux,
                     const void *data, uint32_t len) {
    if (len > MAX_TEXT + 8) {
        len = MAX_TEXT + 8;
        flags |= NVTXREC_DFLAG_TRUNCATED;
    }
    size_t need = sizeof(struct def) + ((len + 7u) & ~7u);
    if (s->defs_len + need > s->defs_cap) {
        size_t cap = s->defs_cap ? s->defs_cap : 4096;
        while (cap < s->defs_len + need) cap *= 2;
        unsigned char *p = realloc(s->defs, cap);
        if (!p) {
            atomic_fetch_add(&s->dropped, 1);
            return;
        }
        s->defs = p;
        s->defs_cap = cap;
    }
    struct def h = {tag, flags, aux, 0, len, domain, 0, arg};
    memcpy(s->defs + s->defs_len, &h, sizeof h);
    if (len) memcpy(s->defs + s->defs_len + sizeof h, data, len);
    s->defs_len += need;
}

static void keep_text(struct session *s, uint8_t tag, uint8_t flags, uint32_t domain, uint64_t arg,
                      const char *text) {
    size_t n = text ? strnlen(text, MAX_TEXT + 1) : 0;
    if (n > MAX_TEXT) {
        n = MAX_TEXT;
        flags |= NVTXREC_DFLAG_TRUNCATED;
    }
    keep_def(s, tag, flags, domain, arg, 0, text, (uint32_t)n);
}

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

/* ---------------------------------------------------------------- interface: sessions */

struct config {
    char dir[4096];
};

static int config_pair(void *state, const char *kb, const char *ke, const char *vb, const char *ve) {
    struct config *c = state;
    if (ke - kb == 3 && strncmp(kb, "dir", 3) == 0) {
        size_t n = (size_t)(ve - vb);
        if (n >= sizeof c->dir) n = sizeof c->dir - 1;
        memcpy(c->dir, vb, n);
        c->dir[n] = 0;
    }
    return 0;
}

/* nvtxwConsumeConfigString's rules (nvtxw3_loader.h): lines of key=value, '#' comments. */
static void parse_config(const char *config, struct config *out) {
    const char *p = config;
    while (p && *p) {
        const char *line = p + strspn(p, " \t\v");
        const char *end = line + strcspn(line, "|\n\r");
        p = end + strspn(end, "|\n\r");
        if (line == end || *line == '#') continue;
        const char *eq = memchr(line, '=', (size_t)(end - line));
        if (!eq || eq == line) continue;
        const char *ke = eq, *vb = eq + 1 + strspn(eq + 1, " \t\v"), *ve = end;
        while (ke > line && strchr(" \t\v", ke[-1])) --ke;
        while (ve > vb && strchr(" \t\v", ve[-1])) --ve;
        if (vb >= ve) continue;
        config_pair(out, line, ke, vb, ve);
    }
}

static nvtxwResultCode_t SessionBegin(const nvtxwSessionAttributes_t *attr, nvtxwSessionHandle_t *out) {
    if (!attr || !out || attr->structSize < sizeof(nvtxwSessionAttributes_t)) return NVTXW_RESULT_INVALID_ARGUMENT;
    pthread_once(&g_handlers_once, handlers_init);
    struct config cfg;
    memset(&cfg, 0, sizeof cfg);
    parse_config(attr->configString, &cfg);
    if (!cfg.dir[0]) {
        const char *env = getenv("NVTX_CFFI_RECORD_DIR");
        const char *d = env && *env ? env : attr->name;
        if (!d || !*d) return NVTXW_RESULT_INVALID_ARGUMENT;
        snprintf(cfg.dir, sizeof cfg.dir, "%s", d);
    }
    if (mkdir(cfg.dir, 0777) != 0 && errno != EEXIST) return NVTXW_RESULT_FAILED;
    struct session *s = calloc(1, sizeof *s);
    if (!s) return NVTXW_RESULT_FAILED;
    pthread_mutex_init(&s->mu, NULL);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t mono = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    char path[4200];
    static _Atomic uint64_t uniq;
    snprintf(path, sizeof path, "%s/nvtx-%d-e0-%llx%llx.nvtxrec", cfg.dir, (int)getpid(), (unsigned long long)mono,
             (unsigned long long)atomic_fetch_add(&uniq, 1));
    s->fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (s->fd < 0) {
        free(s);
        return NVTXW_RESULT_FAILED;
    }
    (void)flock(s->fd, LOCK_SH); /* live until the session ends (recorder.h: Liveness) */
    s->off = NVTXREC_HEADER_SIZE;
    s->next_domain = 1;
    s->first = INT64_MAX;
    atomic_init(&s->next_string, 1);
    atomic_init(&s->next_range, 1);
    pthread_mutex_lock(&g_mu);
    for (uint32_t i = 1; i < MAX_SESSIONS; ++i) {
        if (!atomic_load(&g_sessions[i])) {
            s->slot = i;
            atomic_store_explicit(&g_sessions[i], s, memory_order_release);
            break;
        }
    }
    pthread_mutex_unlock(&g_mu);
    if (!s->slot) { /* too many sessions at once */
        close(s->fd);
        unlink(path);
        free(s);
        return NVTXW_RESULT_FAILED;
    }
    /* The header now (a reader sees a recording at once); dropped counts are rewritten at the end. */
    struct nvtxrec_file_header h;
    unsigned char page[NVTXREC_HEADER_SIZE];
    memset(&h, 0, sizeof h);
    memset(page, 0, sizeof page);
    memcpy(h.magic, NVTXREC_MAGIC, 8);
    h.version = NVTXREC_VERSION;
    h.header_size = NVTXREC_HEADER_SIZE;
    h.page_size = PAGE;
    h.pid = (uint32_t)getpid();
    h.ppid = (uint32_t)getppid();
    h.start_ns = 0;
    h.start_realtime_ns = now_realtime() - mono;
    h.max_bytes = UINT64_MAX;
    h.clock = NVTXREC_CLOCK_MONOTONIC;
    h.chunk_max = CHUNK_BYTES;
    memcpy(page, &h, sizeof h);
    if (pwrite(s->fd, page, sizeof page, 0) != (ssize_t)sizeof page) atomic_fetch_add(&s->write_errors, 1);
    *out = (nvtxwSessionHandle_t)s;
    return NVTXW_RESULT_SUCCESS;
}

static void stream_free(struct stream *st) {
    pthread_mutex_destroy(&st->mu);
    for (size_t i = 0; i < MSG_CACHE; ++i) free(st->cache[i].text);
    free(st->c.w);
    free(st);
}

/* Close st (flush its chunk); st already unlinked from the session's list. */
static void stream_finish(struct session *s, struct stream *st) {
    pthread_mutex_lock(&st->mu); /* a write still running finishes first */
    chunk_flush(s, &st->c);
    pthread_mutex_unlock(&st->mu);
    pthread_mutex_lock(&s->mu);
    if (st->first < s->first) s->first = st->first;
    pthread_mutex_unlock(&s->mu);
    stream_free(st);
}

static nvtxwResultCode_t SessionEnd(nvtxwSessionHandle_t handle) {
    struct session *s = (struct session *)handle;
    if (!s) return NVTXW_RESULT_INVALID_ARGUMENT;
    for (;;) { /* streams still open */
        pthread_mutex_lock(&s->mu);
        struct stream *st = s->streams;
        if (st) s->streams = st->next;
        pthread_mutex_unlock(&s->mu);
        if (!st) break;
        stream_finish(s, st);
    }
    /* the kept definitions, at the time of the earliest event */
    uint64_t t = s->first == INT64_MAX ? 0 : (uint64_t)s->first;
    /* tid 0: readers order blobs by thread, then time; registrations precede every stream's samples */
    struct chunk c = {calloc(CHUNK_WORDS, 8), 4, 0, 1};
    if (c.w) {
        for (size_t at = 0; at < s->defs_len;) {
            struct def d;
            memcpy(&d, s->defs + at, sizeof d);
            put_data(s, &c, d.tag, d.flags, d.domain, t, d.arg, d.aux, s->defs + at + sizeof d, d.len);
            at += sizeof d + ((d.len + 7u) & ~7u);
        }
        chunk_flush(s, &c);
        free(c.w);
    } else if (s->defs_len) {
        atomic_fetch_add(&s->dropped, 1);
    }
    uint64_t counts[2] = {atomic_load(&s->dropped), atomic_load(&s->write_errors)};
    if (pwrite(s->fd, counts, sizeof counts, offsetof(struct nvtxrec_file_header, dropped)) != (ssize_t)sizeof counts) {
        /* nothing more to do: the header keeps its earlier counts */
    }
    close(s->fd); /* drops the lock: the recording is finished */
    pthread_mutex_lock(&g_mu);
    atomic_store(&g_sessions[s->slot], NULL);
    pthread_mutex_unlock(&g_mu);
    for (size_t i = 0; i < s->n_schemas; ++i) free(s->schemas[i].e);
    free(s->schemas);
    free(s->counters);
    free(s->defs);
    pthread_mutex_destroy(&s->mu);
    free(s);
    return NVTXW_RESULT_SUCCESS;
}

/* ---------------------------------------------------------------- interface: registrations */

static nvtxwResultCode_t DomainRegister(nvtxwSessionHandle_t handle, const nvtxwDomainAttributes_t *attr,
                                        nvtxDomainHandle_t *out) {
    struct session *s = (struct session *)handle;
    if (!s || !out || (attr && attr->structSize < sizeof(nvtxwDomainAttributes_t))) return NVTXW_RESULT_INVALID_ARGUMENT;
    const char *name = attr ? attr->name : NULL;
    uint32_t id = 0;
    pthread_mutex_lock(&s->mu);
    if (name && *name) {
        if (s->next_domain == 0 || s->next_domain > MAX_DOMAINS - 1) {
            pthread_mutex_unlock(&s->mu);
            return NVTXW_RESULT_FAILED;
        }
        id = s->next_domain++;
        keep_text(s, NVTXREC_D_DOMAIN, NVTXREC_API_DOMAIN << NVTXREC_DFLAG_API_SHIFT, 0, id, name);
    }
    pthread_mutex_unlock(&s->mu);
    *out = (nvtxDomainHandle_t)(((uintptr_t)s->slot << 16) | id);
    return NVTXW_RESULT_SUCCESS;
}

static nvtxwResultCode_t CategoryRegister(nvtxDomainHandle_t d, uint32_t category, const char *name) {
    struct session *s = session_of(d);
    if (!s || !name) return NVTXW_RESULT_INVALID_ARGUMENT;
    pthread_mutex_lock(&s->mu);
    keep_text(s, NVTXREC_D_CATEGORY, NVTXREC_API_DOMAIN << NVTXREC_DFLAG_API_SHIFT, domain_id((uintptr_t)d),
              category, name);
    pthread_mutex_unlock(&s->mu);
    return NVTXW_RESULT_SUCCESS;
}

static nvtxwResultCode_t StringRegister(nvtxDomainHandle_t d, const char *string, nvtxStringHandle_t *out) {
    struct session *s = session_of(d);
    if (!s || !string || !out) return NVTXW_RESULT_INVALID_ARGUMENT;
    uint32_t id = atomic_fetch_add(&s->next_string, 1);
    pthread_mutex_lock(&s->mu);
    keep_text(s, NVTXREC_D_STRING, NVTXREC_API_DOMAIN << NVTXREC_DFLAG_API_SHIFT, domain_id((uintptr_t)d), id,
              string);
    pthread_mutex_unlock(&s->mu);
    *out = (nvtxStringHandle_t)(uintptr_t)id;
    return NVTXW_RESULT_SUCCESS;
}

static nvtxwResultCode_t ResourceRegister(nvtxDomainHandle_t d, const nvtxResourceAttributes_t *attr) {
    (void)d;
    (void)attr;
    return NVTXW_RESULT_NOT_SUPPORTED;
}

static nvtxwResultCode_t ScopeRegister(nvtxDomainHandle_t d, const nvtxScopeAttr_t *attr, uint64_t *out) {
    struct session *s = session_of(d);
    if (!s || !attr || !out) return NVTXW_RESULT_INVALID_ARGUMENT;
    pthread_once(&g_handlers_once, handlers_init);
    scope_fn f = HANDLER(g_payload_slots, NVTX3EXT_CBID_nvtxScopeRegister, scope_fn);
    pthread_mutex_lock(&s->mu);
    WITH_TARGET(s, NULL, 0, *out = f(d, attr));
    pthread_mutex_unlock(&s->mu);
    return *out ? NVTXW_RESULT_SUCCESS : NVTXW_RESULT_FAILED;
}

static nvtxwResultCode_t SchemaRegister(nvtxDomainHandle_t d, const nvtxPayloadSchemaAttr_t *attr, uint64_t *out) {
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
    pthread_once(&g_handlers_once, handlers_init);
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

static nvtxwResultCode_t EnumRegister(nvtxDomainHandle_t d, const nvtxPayloadEnumAttr_t *attr, uint64_t *out) {
    if (!session_of(d) || !attr || !out) return NVTXW_RESULT_INVALID_ARGUMENT;
    pthread_once(&g_handlers_once, handlers_init);
    *out = HANDLER(g_payload_slots, NVTX3EXT_CBID_nvtxPayloadEnumRegister, enum_fn)(d, attr);
    return NVTXW_RESULT_SUCCESS;
}

static nvtxwResultCode_t CounterRegister(nvtxDomainHandle_t d, const nvtxCounterAttr_t *attr, uint64_t *out) {
    struct session *s = session_of(d);
    if (!s || !attr || !out || attr->structSize < sizeof(nvtxCounterAttr_t)) return NVTXW_RESULT_INVALID_ARGUMENT;
    pthread_once(&g_handlers_once, handlers_init);
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

static nvtxwResultCode_t TimeDomainRegister(nvtxDomainHandle_t d, const nvtxTimeDomainAttr_t *attr, uint64_t *out) {
    if (!session_of(d) || !out) return NVTXW_RESULT_INVALID_ARGUMENT;
    pthread_once(&g_handlers_once, handlers_init);
    *out = HANDLER(g_payload_slots, NVTX3EXT_CBID_nvtxTimeDomainRegister, timedomain_fn)(d, attr);
    return NVTXW_RESULT_SUCCESS;
}

/* ---------------------------------------------------------------- interface: streams */

static nvtxwResultCode_t StreamOpen(nvtxwSessionHandle_t handle, const nvtxwStreamAttributes_t *attr,
                                    nvtxwStreamHandle_t *out) {
    struct session *s = (struct session *)handle;
    if (!s || !attr || !out || attr->structSize < sizeof(nvtxwStreamAttributes_t)) return NVTXW_RESULT_INVALID_ARGUMENT;
    if (attr->domain && session_of(attr->domain) != s) return NVTXW_RESULT_INVALID_ARGUMENT;
    struct stream *st = calloc(1, sizeof *st);
    if (!st) return NVTXW_RESULT_FAILED;
    st->c.w = calloc(CHUNK_WORDS, 8);
    if (!st->c.w) {
        free(st);
        return NVTXW_RESULT_FAILED;
    }
    st->c.n = 4;
    st->s = s;
    pthread_mutex_init(&st->mu, NULL);
    st->domain = attr->domain ? (uintptr_t)attr->domain : ((uintptr_t)s->slot << 16);
    st->first = INT64_MAX;
    pthread_mutex_lock(&s->mu);
    st->c.tid = atomic_fetch_add(&g_next_tid, 1); /* unique in the process: sessions may share a folder */
    if (attr->name && *attr->name)
        keep_text(s, NVTXREC_D_THREAD_NAME, 0, 0, st->c.tid, attr->name);
    st->next = s->streams;
    if (s->streams) s->streams->prev = st;
    s->streams = st;
    pthread_mutex_unlock(&s->mu);
    *out = (nvtxwStreamHandle_t)st;
    return NVTXW_RESULT_SUCCESS;
}

static nvtxwResultCode_t StreamClose(nvtxwStreamHandle_t handle) {
    struct stream *st = (struct stream *)handle;
    if (!st) return NVTXW_RESULT_INVALID_ARGUMENT;
    struct session *s = st->s;
    pthread_mutex_lock(&s->mu);
    if (st->prev) st->prev->next = st->next;
    else s->streams = st->next;
    if (st->next) st->next->prev = st->prev;
    pthread_mutex_unlock(&s->mu);
    stream_finish(s, st);
    return NVTXW_RESULT_SUCCESS;
}

/* ---------------------------------------------------------------- events */

struct event {
    int kind; /* NVTXREC_KIND_*, or 0x10 push/pop pair, 0x11 start/end pair */
    int64_t t0, t1;
    uint64_t range_id;
    uint32_t color, category, message;
    int has_t0, has_t1;
};

static uint64_t fnv(const char *p, size_t n) {
    uint64_t h = 1469598103934665603u;
    for (size_t i = 0; i < n; ++i) h = (h ^ (unsigned char)p[i]) * 1099511628211u;
    return h;
}

/* The string id of message text (interned per stream; a new one is written before its event). */
static uint32_t intern(struct stream *st, const char *text, size_t n) {
    uint8_t flags = NVTXREC_DFLAG_MESSAGE | (NVTXREC_API_DOMAIN << NVTXREC_DFLAG_API_SHIFT);
    if (n > MAX_TEXT) {
        n = MAX_TEXT;
        flags |= NVTXREC_DFLAG_TRUNCATED;
    }
    uint64_t h = fnv(text, n);
    struct msg_slot *slot = &st->cache[h % MSG_CACHE];
    if (slot->text && slot->hash == h && slot->len == n && memcmp(slot->text, text, n) == 0) return slot->id;
    uint32_t id = atomic_fetch_add(&st->s->next_string, 1);
    put_data(st->s, &st->c, NVTXREC_D_STRING, flags, 0, 0, id, 0, text, (uint32_t)n);
    if (n <= 4096) {
        char *copy = malloc(n ? n : 1);
        if (copy) {
            if (n) memcpy(copy, text, n);
            free(slot->text);
            slot->text = copy;
            slot->id = id;
            slot->len = (uint32_t)n;
            slot->hash = h;
        }
    }
    return id;
}

static int valid_time(int64_t t) { return t >= 0 && (uint64_t)t <= M56; }

static void put_event(struct stream *st, int kind, int64_t t, uint32_t message, uint32_t color, uint32_t category,
                      int with_range, uint64_t range_id) {
    uint32_t dom = domain_id(st->domain);
    size_t k = 2 + (color != 0) + (category != 0) + (with_range ? 2 : 0);
    if (!chunk_room(st->s, &st->c, k)) {
        atomic_fetch_add(&st->s->dropped, 1);
        return;
    }
    uint64_t *w = st->c.w + st->c.n;
    size_t i = 1;
    uint64_t api = dom ? NVTXREC_API_DOMAIN : NVTXREC_API_EX;
    w[i++] = NVTXREC_W_ATTR | (api << 8) | ((uint64_t)dom << 16) | ((uint64_t)message << 32);
    if (color) w[i++] = NVTXREC_W_COLOR | ((uint64_t)color << 32);
    if (category) w[i++] = NVTXREC_W_CATEGORY | ((uint64_t)category << 32);
    if (with_range) {
        w[i++] = NVTXREC_W_RANGE_ID | ((range_id & M56) << 8);
        if (range_id >> 56) w[i++] = NVTXREC_W_RANGE_ID_HI | ((range_id >> 56) << 8);
    }
    w[0] = (uint64_t)kind | ((uint64_t)t << 8);
    st->c.n += i;
    if (t < st->first) st->first = t;
}

/* Schema id's description, copied into *out (the table may grow meanwhile: a registration on
 * another thread; its entries stay put until the session ends). NULL when unknown. */
static const struct schema *find_schema(struct session *s, uint64_t id, struct schema *out) {
    const struct schema *found = NULL;
    pthread_mutex_lock(&s->mu);
    for (size_t i = s->n_schemas; i-- > 0;)
        if (s->schemas[i].id == id) {
            *out = s->schemas[i];
            found = out;
            break;
        }
    pthread_mutex_unlock(&s->mu);
    return found;
}

static uint64_t read_uint(const unsigned char *p, size_t size) {
    uint64_t v = 0;
    if (size == 8) memcpy(&v, p, 8);
    else if (size == 4) {
        uint32_t u;
        memcpy(&u, p, 4);
        v = u;
    }
    return v;
}

#define KIND_OF(flags) ((flags) & (UINT64_C(0xF) << 3))

/* Read one row of an event schema. Returns NVTXW_RESULT_*; text/text_len: an inline message. */
static nvtxwResultCode_t read_row(const struct schema *sc, const unsigned char *row, size_t size, struct event *ev,
                                  const char **text, size_t *text_len) {
    memset(ev, 0, sizeof *ev);
    *text = NULL;
    *text_len = 0;
    switch (KIND_OF(sc->flags)) {
    case NVTX_PAYLOAD_SCHEMA_FLAG_MARK: ev->kind = NVTXREC_KIND_MARK; break;
    case NVTX_PAYLOAD_SCHEMA_FLAG_RANGE_PUSH: ev->kind = NVTXREC_KIND_PUSH; break;
    case NVTX_PAYLOAD_SCHEMA_FLAG_RANGE_POP: ev->kind = NVTXREC_KIND_POP; break;
    case NVTX_PAYLOAD_SCHEMA_FLAG_RANGE_START: ev->kind = NVTXREC_KIND_START; break;
    case NVTX_PAYLOAD_SCHEMA_FLAG_RANGE_END: ev->kind = NVTXREC_KIND_END; break;
    case NVTX_PAYLOAD_SCHEMA_FLAG_RANGE_PUSHPOP: ev->kind = 0x10; break;
    case NVTX_PAYLOAD_SCHEMA_FLAG_RANGE_STARTEND: ev->kind = 0x11; break;
    default: return NVTXW_RESULT_INVALID_ARGUMENT; /* not an event schema */
    }
    for (size_t i = 0; i < sc->n; ++i) {
        const struct entry *e = &sc->e[i];
        if (e->offset >= size) continue;
        const unsigned char *p = row + e->offset;
        size_t room = size - (size_t)e->offset;
        uint64_t role = e->flags & (UINT64_C(7) << 12);
        if ((e->flags & NVTX_PAYLOAD_ENTRY_FLAG_TIMESTAMP) && room >= 8) {
            int64_t t;
            memcpy(&t, p, 8);
            if (role == NVTX_PAYLOAD_ENTRY_FLAG_RANGE_END) {
                ev->t1 = t;
                ev->has_t1 = 1;
            } else {
                ev->t0 = t;
                ev->has_t0 = 1;
            }
        } else if (e->type == NVTX_PAYLOAD_ENTRY_TYPE_COLOR_ARGB && room >= 4) {
            ev->color = (uint32_t)read_uint(p, 4);
        } else if (e->type == NVTX_PAYLOAD_ENTRY_TYPE_CATEGORY && room >= 4) {
            ev->category = (uint32_t)read_uint(p, 4);
        } else if (e->type == NVTX_PAYLOAD_ENTRY_TYPE_RANGE_ID && room >= 8) {
            ev->range_id = read_uint(p, 8);
        } else if (e->type == NVTX_PAYLOAD_ENTRY_TYPE_NVTX_REGISTERED_STRING_HANDLE && room >= sizeof(void *)) {
            ev->message = (uint32_t)read_uint(p, sizeof(void *));
        } else if ((e->flags & NVTX_PAYLOAD_ENTRY_FLAG_EVENT_MESSAGE)
                   && (e->type == NVTX_PAYLOAD_ENTRY_TYPE_CSTRING_UTF8 || e->type == NVTX_PAYLOAD_ENTRY_TYPE_CSTRING
                       || e->type == NVTX_PAYLOAD_ENTRY_TYPE_CHAR)) {
            size_t cap = e->detail && e->detail < room ? (size_t)e->detail : room;
            *text = (const char *)p;
            *text_len = strnlen((const char *)p, cap);
        }
    }
    /* the event's time roles (EntryKind) must be there */
    if (ev->kind >= 0x10 ? !(ev->has_t0 && ev->has_t1) : !(ev->has_t0 || ev->has_t1))
        return NVTXW_RESULT_INVALID_ARGUMENT;
    if (ev->kind < 0x10 && !ev->has_t0) ev->t0 = ev->t1;
    if (!valid_time(ev->t0) || (ev->kind >= 0x10 && !valid_time(ev->t1))) return NVTXW_RESULT_INVALID_ARGUMENT;
    return NVTXW_RESULT_SUCCESS;
}

/* A message-only schema (nvtxw3_event_helpers.h's UTF-8 message payload): no event kind, one
 * EVENT_MESSAGE string entry at offset 0. */
static int message_schema(const struct schema *sc) {
    return sc && KIND_OF(sc->flags) == 0 && sc->n == 1 && (sc->e[0].flags & NVTX_PAYLOAD_ENTRY_FLAG_EVENT_MESSAGE)
           && sc->e[0].offset == 0
           && (sc->e[0].type == NVTX_PAYLOAD_ENTRY_TYPE_CSTRING_UTF8 || sc->e[0].type == NVTX_PAYLOAD_ENTRY_TYPE_CSTRING);
}

static void write_event(struct stream *st, const struct event *ev, uint32_t message) {
    switch (ev->kind) {
    case 0x10:
        put_event(st, NVTXREC_KIND_PUSH, ev->t0, message, ev->color, ev->category, 0, 0);
        put_event(st, NVTXREC_KIND_POP, ev->t1, 0, 0, 0, 0, 0);
        break;
    case 0x11: {
        uint64_t rid = (UINT64_C(1) << 63) | atomic_fetch_add(&st->s->next_range, 1);
        put_event(st, NVTXREC_KIND_START, ev->t0, message, ev->color, ev->category, 1, rid);
        put_event(st, NVTXREC_KIND_END, ev->t1, 0, 0, 0, 1, rid);
        break;
    }
    case NVTXREC_KIND_POP: put_event(st, NVTXREC_KIND_POP, ev->t0, 0, 0, 0, 0, 0); break;
    case NVTXREC_KIND_END: put_event(st, NVTXREC_KIND_END, ev->t0, 0, 0, 0, 1, ev->range_id); break;
    case NVTXREC_KIND_START:
        put_event(st, NVTXREC_KIND_START, ev->t0, message, ev->color, ev->category, 1, ev->range_id);
        break;
    default: put_event(st, ev->kind, ev->t0, message, ev->color, ev->category, 0, 0); break;
    }
}

static nvtxwResultCode_t EventWrite_locked(nvtxwStreamHandle_t handle, const nvtxPayloadData_t *payloads, size_t count) {
    struct stream *st = (struct stream *)handle;
    if (!st || !payloads || !count || !payloads[0].payload) return NVTXW_RESULT_INVALID_ARGUMENT;
    struct schema copy, extra;
    const struct schema *sc = find_schema(st->s, payloads[0].schemaId, &copy);
    if (!sc) return NVTXW_RESULT_INVALID_ARGUMENT;
    if (sc->static_size && payloads[0].size < sc->static_size) return NVTXW_RESULT_INVALID_ARGUMENT;
    struct event ev;
    const char *text;
    size_t text_len;
    nvtxwResultCode_t rc = read_row(sc, payloads[0].payload, payloads[0].size, &ev, &text, &text_len);
    if (rc != NVTXW_RESULT_SUCCESS) return rc;
    for (size_t i = 1; i < count; ++i) {
        if (!payloads[i].payload || !payloads[i].size) continue;
        if (message_schema(find_schema(st->s, payloads[i].schemaId, &extra))) {
            text = payloads[i].payload;
            text_len = strnlen(text, payloads[i].size);
        }
    }
    uint32_t message = ev.message;
    if (text && text_len) message = intern(st, text, text_len);
    write_event(st, &ev, message);
    return NVTXW_RESULT_SUCCESS;
}

static nvtxwResultCode_t EventBatchWrite_locked(nvtxwStreamHandle_t handle, const nvtxEventBatch_t *batch) {
    struct stream *st = (struct stream *)handle;
    if (!st || !batch || (!batch->events && batch->size)) return NVTXW_RESULT_INVALID_ARGUMENT;
    struct schema copy;
    const struct schema *sc = find_schema(st->s, batch->eventSchemaId, &copy);
    if (!sc || !sc->static_size || batch->size % sc->static_size) return NVTXW_RESULT_INVALID_ARGUMENT;
    const unsigned char *rows = batch->events;
    for (size_t off = 0; off < batch->size; off += sc->static_size) {
        struct event ev;
        const char *text;
        size_t text_len;
        nvtxwResultCode_t rc = read_row(sc, rows + off, sc->static_size, &ev, &text, &text_len);
        if (rc != NVTXW_RESULT_SUCCESS) return rc;
        write_event(st, &ev, text && text_len ? intern(st, text, text_len) : ev.message);
    }
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

/* The write entry points: one write at a time per stream. */
#define LOCKED(call)                          \
    do {                                      \
        if (!st) return NVTXW_RESULT_INVALID_ARGUMENT; \
        pthread_mutex_lock(&st->mu);          \
        nvtxwResultCode_t rc_ = (call);       \
        pthread_mutex_unlock(&st->mu);        \
        return rc_;                           \
    } while (0)

static nvtxwResultCode_t EventWrite(nvtxwStreamHandle_t h, const nvtxPayloadData_t *payloads, size_t count) {
    struct stream *st = (struct stream *)h;
    LOCKED(EventWrite_locked(h, payloads, count));
}
static nvtxwResultCode_t EventBatchWrite(nvtxwStreamHandle_t h, const nvtxEventBatch_t *batch) {
    struct stream *st = (struct stream *)h;
    LOCKED(EventBatchWrite_locked(h, batch));
}
static nvtxwResultCode_t CounterWrite(nvtxwStreamHandle_t h, int64_t t, uint64_t id, const void *data, size_t size) {
    struct stream *st = (struct stream *)h;
    LOCKED(CounterWrite_locked(h, t, id, data, size));
}
static nvtxwResultCode_t CounterNoValueWrite(nvtxwStreamHandle_t h, int64_t t, uint64_t id, uint8_t reason) {
    struct stream *st = (struct stream *)h;
    LOCKED(CounterNoValueWrite_locked(h, t, id, reason));
}
static nvtxwResultCode_t CounterBatchWrite(nvtxwStreamHandle_t h, const nvtxCounterBatch_t *batch) {
    struct stream *st = (struct stream *)h;
    LOCKED(CounterBatchWrite_locked(h, batch));
}

static nvtxwResultCode_t TimeSyncPointWrite(nvtxwStreamHandle_t st, uint64_t a, uint64_t b, int64_t ta, int64_t tb) {
    (void)st, (void)a, (void)b, (void)ta, (void)tb;
    return NVTXW_RESULT_NOT_SUPPORTED;
}

static nvtxwResultCode_t TimeSyncPointTableWrite(nvtxwStreamHandle_t st, uint64_t a, uint64_t b,
                                                 const nvtxSyncPoint_t *points, size_t count) {
    (void)st, (void)a, (void)b, (void)points, (void)count;
    return NVTXW_RESULT_NOT_SUPPORTED;
}

static nvtxwResultCode_t TimestampConversionFactorWrite(nvtxwStreamHandle_t st, uint64_t a, uint64_t b, double slope,
                                                        int64_t ta, int64_t tb) {
    (void)st, (void)a, (void)b, (void)slope, (void)ta, (void)tb;
    return NVTXW_RESULT_NOT_SUPPORTED;
}

/* ---------------------------------------------------------------- entry point */

static const nvtxwInterface_v2_t g_iface = {
    .SessionBegin = SessionBegin,
    .SessionEnd = SessionEnd,
    .DomainRegister = DomainRegister,
    .CategoryRegister = CategoryRegister,
    .StringRegister = StringRegister,
    .ResourceRegister = ResourceRegister,
    .ScopeRegister = ScopeRegister,
    .SchemaRegister = SchemaRegister,
    .EnumRegister = EnumRegister,
    .CounterRegister = CounterRegister,
    .TimeDomainRegister = TimeDomainRegister,
    .StreamOpen = StreamOpen,
    .StreamClose = StreamClose,
    .EventWrite = EventWrite,
    .EventBatchWrite = EventBatchWrite,
    .CounterWrite = CounterWrite,
    .CounterNoValueWrite = CounterNoValueWrite,
    .CounterBatchWrite = CounterBatchWrite,
    .TimeSyncPointWrite = TimeSyncPointWrite,
    .TimeSyncPointTableWrite = TimeSyncPointTableWrite,
    .TimestampConversionFactorWrite = TimestampConversionFactorWrite,
};

EXPORT nvtxwResultCode_t nvtxwGetInterface(nvtxwInterfaceVersion_t version, const void **out) {
    if (!out) return NVTXW_RESULT_INVALID_ARGUMENT;
    if (version != 2) return NVTXW_RESULT_INTERFACE_VERSION_NOT_SUPPORTED;
    *out = &g_iface;
    return NVTXW_RESULT_SUCCESS;
}
