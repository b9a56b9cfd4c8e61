/* writer_backend.c - nvtx-cffi's NVTXW backend (libnvtx_writer_backend.so): events and counter
 * samples submitted with explicit timestamps through the NVTXW interface (nvtxw3/nvtxw3.h) are
 * written in the recorder's record format (nvtxrec_format.h), so the tracer converts them like a
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
 *
 * This file holds the interface table, sessions and streams; writer_backend.h lists the others.
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

#include "writer_backend.h"

#define EXPORT __attribute__((visibility("default")))
#define MAX_SESSIONS 1024u

/* ---------------------------------------------------------------- sessions and handles */

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint32_t g_next_tid = 1; /* streams' thread ids (0: the definitions) */
static struct session *_Atomic g_sessions[MAX_SESSIONS]; /* slot 0 unused: handles are never NULL */

/* A domain handle: session slot << 16 | domain id (0: the default domain). */
struct session *session_of(nvtxDomainHandle_t d) {
    uintptr_t h = (uintptr_t)d;
    uintptr_t slot = h >> 16;
    if (!h || slot == 0 || slot >= MAX_SESSIONS) return NULL;
    return atomic_load_explicit(&g_sessions[slot], memory_order_acquire);
}

static uint64_t now_realtime(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

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
    load_handlers();
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
    (void)flock(s->fd, LOCK_SH); /* live until the session ends (nvtxrec_format.h: Liveness) */
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
