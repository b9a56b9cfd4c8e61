/* recorder.c - nvtx-cffi's NVTX v3 injection library that records every NVTX event to a file.
 *
 * See recorder.h for the environment variables and nvtxrec_format.h for the file format (version 2).
 *
 * Design:
 *  - All state is process-global: InitializeInjectionNvtx2 runs once per NVTX client copy (each
 *    library that includes the NVTX headers has its own dispatch table) and every call installs
 *    the same handlers. Domains are interned by name and string handles by (domain, text), so
 *    all clients share handles. Messages are interned too: an event carries a 32-bit string id,
 *    its text is written once per process (a STRING record). A per-thread cache keyed by the
 *    message pointer (checked with strcmp, so reused buffers are safe) finds the id without a lock.
 *  - Record path: a push is two 8-byte words (time, message), a pop one: one TSC read (rdtsc, no
 *    fence: order within a thread is all that matters, where the kernel's clocksource is the TSC;
 *    CLOCK_MONOTONIC otherwise), a per-thread cache probe for the message id, and the words stored
 *    straight into the thread's chunk of the file, mapped MAP_SHARED; no lock, no syscall, no
 *    atomic RMW. rec() is inlined into each handler, so a push or pop compiles to little more than
 *    that. A full chunk is replaced by a new one: claimed with a CAS on the file offset,
 *    posix_fallocate (disk space reserved up front: a full disk is counted, never a SIGBUS), mmap
 *    and MADV_POPULATE_WRITE (fresh file pages cost the kernel microseconds each). Chunks start at
 *    one page per thread and double up to the chunk bound; from there on a background thread (the
 *    "pool", recorder_pool.c) does that work ahead of time and unmaps full chunks, so a chunk switch on
 *    the annotated thread is taking a ready chunk. Records are in the page cache as soon as they
 *    are written, so they survive os._exit(), crashes and SIGKILL with no flush.
 *  - A record's first word is stored last (release); readers stop at a zero word.
 *  - Events that cannot be recorded (file bound, allocation failures, an NVTX call re-entered from
 *    a signal handler while the thread is recording) are counted, in memory and in the file.
 *  - fork: the prepare handler takes the registry lock so the child never inherits it held; the
 *    child handler drops the parent's mappings (nothing of the parent is unwritten: it all lives
 *    in the parent's file already), and the child opens its own file at its first event,
 *    re-recording the inherited domain, category and string definitions and payload schema,
 *    counter and scope registrations (flagged, not events).
 *  - The file's descriptor is checked (device, inode) before each new chunk: a program that closed
 *    it and reused the number for a file of its own never gets the recording (recorder_file.c: file_fd).
 *  - exec: a new image of the same process writes a new file with the next exec generation.
 *
 * This file holds the injection entry, the handlers and an event's record path; recorder_core.h
 * lists the others.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

#include "recorder_core.h"
#include "recorder_ext.h" /* payload/counters extensions (recorder_ext.c) */

#define EXPORT __attribute__((visibility("default")))
#define CAL_TICKS (1ull << 20) /* a thread writes a CLOCK pair at least this often (TSC ticks) */

static _Atomic uint64_t g_range_ids = 1;
static _Atomic uint64_t g_resource_ids = 1;

void range_ids_start_at(uint64_t first) { atomic_store(&g_range_ids, first); }

static inline uint32_t domain_id(nvtxDomainHandle_t d) { return (uint32_t)(uintptr_t)d; }

/* ---------------------------------------------------------------- the record path */

/* The calling thread's state, ready to record (mode open, not re-entered), with busy set; NULL when
 * not recording (counted as dropped unless the recorder is off). */
static inline __attribute__((always_inline)) struct tstate *begin(void) {
    struct tstate *t = t_state;
    if (UNLIKELY(!t || atomic_load_explicit(&g_mode, memory_order_relaxed) != MODE_OPEN)) {
        int m = atomic_load_explicit(&g_mode, memory_order_acquire);
        if (m == MODE_OFF) return NULL;
        if (m != MODE_OPEN && !ensure_open()) {
            count_drop();
            return NULL;
        }
        t = get_tstate();
        if (!t) {
            count_drop();
            return NULL;
        }
    }
    if (UNLIKELY(t->busy)) { /* re-entered from a signal handler */
        count_drop();
        return NULL;
    }
    t->busy = 1;
    atomic_signal_fence(memory_order_seq_cst);
    return t;
}

static inline void end(struct tstate *t) {
    atomic_signal_fence(memory_order_seq_cst);
    t->busy = 0;
}

/* Same text? Short messages are compared inline (a call to strcmp costs more than the compare). */
static inline int same_text(const char *a, const char *b) {
    for (int i = 0; i < 16; ++i) {
        if (a[i] != b[i]) return 0;
        if (!a[i]) return 1;
    }
    return strcmp(a + 16, b + 16) == 0;
}

static inline uint32_t ascii_id(struct tstate *t, const char *s, uint8_t api, uint64_t ts) {
    struct cache_slot *c = &t->cache[((uintptr_t)s >> 3) & (CACHE_SLOTS - 1)];
    if (LIKELY(c->ptr == s) && same_text(c->e->text, s)) return c->e->id;
    return text_id(t, s, strlen(s), api, ts, c);
}

/* ---------------------------------------------------------------- events */

/* Most words an event takes: head, ATTR, COLOR, CATEGORY, PAYLOAD, PAYLOAD_HI or PTYPE_RAW... */
#define EVENT_MAX_WORDS 9

/* Inlined into each handler: kind, api and often a (NULL) are constants there, so a push or a pop
 * compiles to a TSC read, a cache probe and two or three stores straight into the chunk. */
static inline __attribute__((always_inline)) void rec(uint8_t kind, uint8_t api, uint32_t domain,
                                                      const nvtxEventAttributes_t *a, uint64_t range_id,
                                                      const char *ascii, const wchar_t *wide) {
    /* A binary payload (payload extension) goes first, as blobs: recorder_ext.c */
    if (a && UNLIKELY((uint32_t)a->payloadType == 0xDFBD0009u)) nvtxrec_ext_event_payload(domain, a);
    struct tstate *t = begin();
    if (UNLIKELY(!t)) return;
    const int use_tsc = g_use_tsc; /* set before the file opened: the calls below cannot change it */
    uint64_t ts = rel_time();
    uint32_t msg = 0;
    if (a) {
        switch (a->messageType) {
        case NVTX_MESSAGE_TYPE_ASCII: ascii = a->message.ascii; break;
        case NVTX_MESSAGE_TYPE_UNICODE: wide = a->message.unicode; break;
        case NVTX_MESSAGE_TYPE_REGISTERED:
            if (a->message.registered)
                msg = ((const struct string_entry *)(const void *)a->message.registered)->id;
            break;
        default: break;
        }
    }
    /* first what may write records of its own (a new message's STRING, a clock pair) */
    if (ascii) msg = ascii_id(t, ascii, api, ts);
    else if (UNLIKELY(wide != NULL)) msg = wide_id(t, wide, api, ts);
    if (use_tsc && UNLIKELY((int64_t)(ts - t->last_cal) > (int64_t)CAL_TICKS)) write_clock(t);
    /* then the event, written in place (room for the largest: a chunk may end up to 8 words early) */
    uint64_t *p = t->pos;
    if (UNLIKELY(p == NULL || t->end - p < EVENT_MAX_WORDS)) {
        p = reserve(t, EVENT_MAX_WORDS);
        if (UNLIKELY(p == NULL)) {
            count_drop();
            end(t);
            return;
        }
    }
    uint32_t n = 1;
    if (api | domain | msg)
        p[n++] = NVTXREC_W_ATTR | (uint64_t)api << 8 | (uint64_t)(domain & 0xFFFF) << 16 | (uint64_t)msg << 32;
    if (a) {
        if (a->colorType == NVTX_COLOR_ARGB) p[n++] = NVTXREC_W_COLOR | (uint64_t)a->color << 32;
        if (a->category) p[n++] = NVTXREC_W_CATEGORY | (uint64_t)a->category << 32;
        if (a->payloadType != NVTX_PAYLOAD_UNKNOWN) {
            uint64_t v = a->payload.ullValue;
            uint64_t code;
            switch (a->payloadType) {
            case NVTX_PAYLOAD_TYPE_UNSIGNED_INT64: code = NVTXREC_PT_UINT64; break;
            case NVTX_PAYLOAD_TYPE_INT64: code = NVTXREC_PT_INT64; break;
            case NVTX_PAYLOAD_TYPE_DOUBLE: code = NVTXREC_PT_DOUBLE; break;
            case NVTX_PAYLOAD_TYPE_UNSIGNED_INT32: code = NVTXREC_PT_UINT32, v = a->payload.uiValue; break;
            case NVTX_PAYLOAD_TYPE_INT32: code = NVTXREC_PT_INT32, v = (uint32_t)a->payload.iValue; break;
            case NVTX_PAYLOAD_TYPE_FLOAT: {
                uint32_t bits;
                memcpy(&bits, &a->payload.fValue, 4);
                code = NVTXREC_PT_FLOAT, v = bits;
                break;
            }
            default: code = (uint32_t)a->payloadType == 0xDFBD0009u ? NVTXREC_PT_EXT : NVTXREC_PT_UNKNOWN; break;
            }
            p[n++] = NVTXREC_W_PAYLOAD | code << 8 | (v & 0xFFFFFFFFu) << 32;
            if (v >> 32) p[n++] = NVTXREC_W_PAYLOAD_HI | (v >> 32) << 32;
            if (code == NVTXREC_PT_UNKNOWN) p[n++] = NVTXREC_W_PTYPE_RAW | (uint64_t)(uint32_t)a->payloadType << 32;
        }
    }
    if (kind == NVTXREC_KIND_START || kind == NVTXREC_KIND_END) {
        p[n++] = NVTXREC_W_RANGE_ID | range_id << 8;
        if (range_id >> 56) p[n++] = NVTXREC_W_RANGE_ID_HI | (range_id >> 56) << 8;
    }
    __atomic_store_n(p, (uint64_t)kind | ts << 8, __ATOMIC_RELEASE); /* the head last */
    t->pos = p + n;
    end(t);
}

/* A naming / definition record with text (s, or the wide w converted to UTF-8). */
static void def_text(uint8_t tag, uint8_t api, uint8_t flags, uint32_t domain, uint64_t arg, uint8_t aux,
                     const char *s, const wchar_t *w) {
    struct tstate *t = begin();
    if (!t) return;
    uint64_t ts = rel_time();
    char *owned = NULL;
    size_t n = 0;
    if (w) {
        owned = wide_dup_cap(w, (size_t)g_text_cap + 1, &n);
        s = owned;
    }
    if (!s) s = "", n = 0;
    else if (!owned) n = strnlen(s, (size_t)g_text_cap + 1);
    if (!data_record(t, tag, (uint8_t)(flags | api << NVTXREC_DFLAG_API_SHIFT), domain, ts, arg, aux, s,
                     (uint32_t)n))
        count_drop();
    free(owned);
    end(t);
}

/* ---------------------------------------------------------------- handlers */

static int push_level(uint32_t domain) {
    struct tstate *t = t_state ? t_state : get_tstate();
    if (!t) return 0;
    return t->depth[domain < DEPTH_SLOTS ? domain : DEPTH_SLOTS - 1]++;
}

static int pop_level(uint32_t domain) {
    struct tstate *t = t_state ? t_state : get_tstate();
    if (!t) return -1;
    int32_t *d = &t->depth[domain < DEPTH_SLOTS ? domain : DEPTH_SLOTS - 1];
    if (*d <= 0) return -1;
    return --*d;
}

static nvtxRangeId_t new_range_id(void) {
    return atomic_fetch_add_explicit(&g_range_ids, 1, memory_order_relaxed);
}

#define K(x) NVTXREC_KIND_##x
#define A(x) NVTXREC_API_##x

static void h_MarkEx(const nvtxEventAttributes_t *a) { rec(K(MARK), A(EX), 0, a, 0, NULL, NULL); }
static void h_MarkA(const char *m) { rec(K(MARK), A(ASCII), 0, NULL, 0, m, NULL); }
static void h_MarkW(const wchar_t *m) { rec(K(MARK), A(UNICODE), 0, NULL, 0, NULL, m); }
static nvtxRangeId_t h_RangeStartEx(const nvtxEventAttributes_t *a) {
    nvtxRangeId_t id = new_range_id();
    rec(K(START), A(EX), 0, a, id, NULL, NULL);
    return id;
}
static nvtxRangeId_t h_RangeStartA(const char *m) {
    nvtxRangeId_t id = new_range_id();
    rec(K(START), A(ASCII), 0, NULL, id, m, NULL);
    return id;
}
static nvtxRangeId_t h_RangeStartW(const wchar_t *m) {
    nvtxRangeId_t id = new_range_id();
    rec(K(START), A(UNICODE), 0, NULL, id, NULL, m);
    return id;
}
static void h_RangeEnd(nvtxRangeId_t id) { rec(K(END), A(EX), 0, NULL, id, NULL, NULL); }
static int h_RangePushEx(const nvtxEventAttributes_t *a) {
    rec(K(PUSH), A(EX), 0, a, 0, NULL, NULL);
    return push_level(0);
}
static int h_RangePushA(const char *m) {
    rec(K(PUSH), A(ASCII), 0, NULL, 0, m, NULL);
    return push_level(0);
}
static int h_RangePushW(const wchar_t *m) {
    rec(K(PUSH), A(UNICODE), 0, NULL, 0, NULL, m);
    return push_level(0);
}
static int h_RangePop(void) {
    rec(K(POP), A(EX), 0, NULL, 0, NULL, NULL);
    return pop_level(0);
}

static void name_category(uint8_t api, uint32_t domain, uint32_t id, const char *s, const wchar_t *w) {
    char *owned = w ? wide_dup(w) : NULL;
    const char *name = w ? (owned ? owned : "") : (s ? s : "");
    remember_category(domain, id, name);
    def_text(NVTXREC_D_CATEGORY, api, 0, domain, id, 0, name, NULL);
    free(owned);
}
static void h_NameCategoryA(uint32_t c, const char *n) { name_category(A(ASCII), 0, c, n, NULL); }
static void h_NameCategoryW(uint32_t c, const wchar_t *n) { name_category(A(UNICODE), 0, c, NULL, n); }
static void h_NameOsThreadA(uint32_t tid, const char *n) {
    def_text(NVTXREC_D_THREAD_NAME, A(ASCII), 0, 0, tid, 0, n, NULL);
}
static void h_NameOsThreadW(uint32_t tid, const wchar_t *n) {
    def_text(NVTXREC_D_THREAD_NAME, A(UNICODE), 0, 0, tid, 0, NULL, n);
}

static void h_DomainMarkEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) {
    rec(K(MARK), A(DOMAIN), domain_id(d), a, 0, NULL, NULL);
}
static nvtxRangeId_t h_DomainRangeStartEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) {
    nvtxRangeId_t id = new_range_id();
    rec(K(START), A(DOMAIN), domain_id(d), a, id, NULL, NULL);
    return id;
}
static void h_DomainRangeEnd(nvtxDomainHandle_t d, nvtxRangeId_t id) {
    rec(K(END), A(DOMAIN), domain_id(d), NULL, id, NULL, NULL);
}
static int h_DomainRangePushEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) {
    rec(K(PUSH), A(DOMAIN), domain_id(d), a, 0, NULL, NULL);
    return push_level(domain_id(d));
}
static int h_DomainRangePop(nvtxDomainHandle_t d) {
    rec(K(POP), A(DOMAIN), domain_id(d), NULL, 0, NULL, NULL);
    return pop_level(domain_id(d));
}
static nvtxResourceHandle_t h_DomainResourceCreate(nvtxDomainHandle_t d, nvtxResourceAttributes_t *a) {
    (void)d;
    (void)a;
    uint64_t id = atomic_fetch_add_explicit(&g_resource_ids, 1, memory_order_relaxed);
    return (nvtxResourceHandle_t)(uintptr_t)id;
}
static void h_DomainResourceDestroy(nvtxResourceHandle_t r) { (void)r; }
static void h_DomainNameCategoryA(nvtxDomainHandle_t d, uint32_t c, const char *n) {
    name_category(A(ASCII), domain_id(d), c, n, NULL);
}
static void h_DomainNameCategoryW(nvtxDomainHandle_t d, uint32_t c, const wchar_t *n) {
    name_category(A(UNICODE), domain_id(d), c, NULL, n);
}
static nvtxStringHandle_t register_string(uint8_t api, nvtxDomainHandle_t d, const char *s) {
    int created;
    struct string_entry *e = intern_string(domain_id(d), s, s ? strlen(s) : 0, &created);
    def_text(NVTXREC_D_STRING, api, 0, domain_id(d), e->id, 0, string_text(e), NULL);
    return (nvtxStringHandle_t)(void *)e;
}
static nvtxStringHandle_t h_DomainRegisterStringA(nvtxDomainHandle_t d, const char *s) {
    return register_string(A(ASCII), d, s);
}
static nvtxStringHandle_t h_DomainRegisterStringW(nvtxDomainHandle_t d, const wchar_t *w) {
    char *s = w ? wide_dup(w) : NULL;
    nvtxStringHandle_t h = register_string(A(UNICODE), d, s);
    free(s);
    return h;
}
static nvtxDomainHandle_t create_domain(uint8_t api, char *owned_name) {
    uint32_t id = intern_domain(owned_name ? strdup(owned_name) : NULL);
    def_text(NVTXREC_D_DOMAIN, api, 0, id, id, 0, owned_name ? owned_name : "", NULL);
    free(owned_name);
    return (nvtxDomainHandle_t)(uintptr_t)id;
}
static nvtxDomainHandle_t h_DomainCreateA(const char *name) {
    return create_domain(A(ASCII), name ? strdup(name) : NULL);
}
static nvtxDomainHandle_t h_DomainCreateW(const wchar_t *name) {
    return create_domain(A(UNICODE), name ? wide_dup(name) : NULL);
}
static void h_DomainDestroy(nvtxDomainHandle_t d) { (void)d; /* domains stay interned */ }
static void h_Initialize(const void *reserved) { (void)reserved; }

/* ---------------------------------------------------------------- CUDA naming */

static void name_resource(uint8_t res, uint8_t api, uint64_t handle, const char *s, const wchar_t *w) {
    def_text(NVTXREC_D_RESOURCE_NAME, api, 0, 0, handle, res, w ? NULL : (s ? s : ""), w);
}
#define RES_HANDLERS(Name, Type, Res, ToU64)                                                        \
    static void h_##Name##A(Type v, const char *n) { name_resource(Res, NVTXREC_API_ASCII, ToU64, n, NULL); } \
    static void h_##Name##W(Type v, const wchar_t *n) {                                             \
        name_resource(Res, NVTXREC_API_UNICODE, ToU64, n ? NULL : "", n);                            \
    }
RES_HANDLERS(NameCuDevice, nvtx_CUdevice, NVTXREC_RES_CUDA_DEVICE, (uint64_t)(int64_t)v)
RES_HANDLERS(NameCuContext, nvtx_CUcontext, NVTXREC_RES_CUDA_CONTEXT, (uint64_t)(uintptr_t)v)
RES_HANDLERS(NameCuStream, nvtx_CUstream, NVTXREC_RES_CUDA_STREAM, (uint64_t)(uintptr_t)v)
RES_HANDLERS(NameCuEvent, nvtx_CUevent, NVTXREC_RES_CUDA_EVENT, (uint64_t)(uintptr_t)v)
RES_HANDLERS(NameCudaDevice, int, NVTXREC_RES_CUDA_DEVICE, (uint64_t)(int64_t)v)
RES_HANDLERS(NameCudaStream, nvtx_cudaStream_t, NVTXREC_RES_CUDA_STREAM, (uint64_t)(uintptr_t)v)
RES_HANDLERS(NameCudaEvent, nvtx_cudaEvent_t, NVTXREC_RES_CUDA_EVENT, (uint64_t)(uintptr_t)v)

/* ---------------------------------------------------------------- installation */

#define FN(f) ((NvtxFunctionPointer)(f))

static void install(const NvtxExportTableCallbacks *cb, NvtxCallbackModule module,
                    const NvtxFunctionPointer *fns, unsigned int n) {
    NvtxFunctionTable table = NULL;
    unsigned int size = 0;
    if (!cb->GetModuleFunctionTable(module, &table, &size) || !table) return;
    for (unsigned int i = 1; i < n && i <= size; ++i) {
        if (fns[i] && table[i]) *table[i] = fns[i];
    }
}

EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t getExportTable) {
    recorder_init();
    if (!getExportTable) return 0;
    const NvtxExportTableCallbacks *cb = getExportTable(NVTX_ETID_CALLBACKS);
    if (!cb || cb->struct_size < sizeof *cb || !cb->GetModuleFunctionTable) return 0;

    static const NvtxFunctionPointer core[NVTX_CBID_CORE_SIZE] = {
        [NVTX_CBID_CORE_MarkEx] = FN(h_MarkEx),
        [NVTX_CBID_CORE_MarkA] = FN(h_MarkA),
        [NVTX_CBID_CORE_MarkW] = FN(h_MarkW),
        [NVTX_CBID_CORE_RangeStartEx] = FN(h_RangeStartEx),
        [NVTX_CBID_CORE_RangeStartA] = FN(h_RangeStartA),
        [NVTX_CBID_CORE_RangeStartW] = FN(h_RangeStartW),
        [NVTX_CBID_CORE_RangeEnd] = FN(h_RangeEnd),
        [NVTX_CBID_CORE_RangePushEx] = FN(h_RangePushEx),
        [NVTX_CBID_CORE_RangePushA] = FN(h_RangePushA),
        [NVTX_CBID_CORE_RangePushW] = FN(h_RangePushW),
        [NVTX_CBID_CORE_RangePop] = FN(h_RangePop),
        [NVTX_CBID_CORE_NameCategoryA] = FN(h_NameCategoryA),
        [NVTX_CBID_CORE_NameCategoryW] = FN(h_NameCategoryW),
        [NVTX_CBID_CORE_NameOsThreadA] = FN(h_NameOsThreadA),
        [NVTX_CBID_CORE_NameOsThreadW] = FN(h_NameOsThreadW),
    };
    static const NvtxFunctionPointer core2[NVTX_CBID_CORE2_SIZE] = {
        [NVTX_CBID_CORE2_DomainMarkEx] = FN(h_DomainMarkEx),
        [NVTX_CBID_CORE2_DomainRangeStartEx] = FN(h_DomainRangeStartEx),
        [NVTX_CBID_CORE2_DomainRangeEnd] = FN(h_DomainRangeEnd),
        [NVTX_CBID_CORE2_DomainRangePushEx] = FN(h_DomainRangePushEx),
        [NVTX_CBID_CORE2_DomainRangePop] = FN(h_DomainRangePop),
        [NVTX_CBID_CORE2_DomainResourceCreate] = FN(h_DomainResourceCreate),
        [NVTX_CBID_CORE2_DomainResourceDestroy] = FN(h_DomainResourceDestroy),
        [NVTX_CBID_CORE2_DomainNameCategoryA] = FN(h_DomainNameCategoryA),
        [NVTX_CBID_CORE2_DomainNameCategoryW] = FN(h_DomainNameCategoryW),
        [NVTX_CBID_CORE2_DomainRegisterStringA] = FN(h_DomainRegisterStringA),
        [NVTX_CBID_CORE2_DomainRegisterStringW] = FN(h_DomainRegisterStringW),
        [NVTX_CBID_CORE2_DomainCreateA] = FN(h_DomainCreateA),
        [NVTX_CBID_CORE2_DomainCreateW] = FN(h_DomainCreateW),
        [NVTX_CBID_CORE2_DomainDestroy] = FN(h_DomainDestroy),
        [NVTX_CBID_CORE2_Initialize] = FN(h_Initialize),
    };
    static const NvtxFunctionPointer cuda[NVTX_CBID_CUDA_SIZE] = {
        [NVTX_CBID_CUDA_NameCuDeviceA] = FN(h_NameCuDeviceA),
        [NVTX_CBID_CUDA_NameCuDeviceW] = FN(h_NameCuDeviceW),
        [NVTX_CBID_CUDA_NameCuContextA] = FN(h_NameCuContextA),
        [NVTX_CBID_CUDA_NameCuContextW] = FN(h_NameCuContextW),
        [NVTX_CBID_CUDA_NameCuStreamA] = FN(h_NameCuStreamA),
        [NVTX_CBID_CUDA_NameCuStreamW] = FN(h_NameCuStreamW),
        [NVTX_CBID_CUDA_NameCuEventA] = FN(h_NameCuEventA),
        [NVTX_CBID_CUDA_NameCuEventW] = FN(h_NameCuEventW),
    };
    static const NvtxFunctionPointer cudart[NVTX_CBID_CUDART_SIZE] = {
        [NVTX_CBID_CUDART_NameCudaDeviceA] = FN(h_NameCudaDeviceA),
        [NVTX_CBID_CUDART_NameCudaDeviceW] = FN(h_NameCudaDeviceW),
        [NVTX_CBID_CUDART_NameCudaStreamA] = FN(h_NameCudaStreamA),
        [NVTX_CBID_CUDART_NameCudaStreamW] = FN(h_NameCudaStreamW),
        [NVTX_CBID_CUDART_NameCudaEventA] = FN(h_NameCudaEventA),
        [NVTX_CBID_CUDART_NameCudaEventW] = FN(h_NameCudaEventW),
    };
    install(cb, NVTX_CB_MODULE_CORE, core, NVTX_CBID_CORE_SIZE);
    install(cb, NVTX_CB_MODULE_CORE2, core2, NVTX_CBID_CORE2_SIZE);
    install(cb, NVTX_CB_MODULE_CUDA, cuda, NVTX_CBID_CUDA_SIZE);
    install(cb, NVTX_CB_MODULE_CUDART, cudart, NVTX_CBID_CUDART_SIZE);
    ensure_open(); /* create the file now, so current_file() names it before the first event */
    return 1;
}

/* ---------------------------------------------------------------- internal API (recorder_internal.h) */

struct tstate *nvtxrec_blob_begin(void) { return begin(); }

void nvtxrec_blob_write(struct tstate *t, uint8_t kind, uint32_t domain, uint64_t arg, const void *data,
                        uint32_t len, int truncated) {
    uint64_t ts = rel_time();
    uint8_t flags = truncated ? NVTXREC_DFLAG_TRUNCATED : 0;
    if (len > NVTXREC_BLOB_MAX_BYTES) {
        len = NVTXREC_BLOB_MAX_BYTES;
        flags = NVTXREC_DFLAG_TRUNCATED;
    }
    remember_def(kind, domain, arg, data, data ? len : 0, flags); /* for forked children */
    if (!data_record(t, NVTXREC_D_BLOB, flags, domain, ts, arg, kind, data ? data : "", data ? len : 0))
        count_drop();
}

void nvtxrec_blob_end(struct tstate *t) { end(t); }

void nvtxrec_blob_drop(void) { count_drop(); }

void nvtxrec_emit_blob(uint8_t kind, uint32_t domain, uint64_t arg, const void *data, uint32_t len) {
    struct tstate *t = begin();
    if (!t) return;
    nvtxrec_blob_write(t, kind, domain, arg, data, len, 0);
    end(t);
}

int nvtxrec_recording(void) {
    recorder_init();
    return ensure_open();
}

/* ---------------------------------------------------------------- in-process API */

EXPORT int nvtx_recorder_flush(void) {
    recorder_init();
    if (!ensure_open()) return -1;
    struct tstate *t = begin();
    if (t) {
        if (t->pos) write_clock(t); /* a clock pair after everything this thread recorded */
        end(t);
    }
    atomic_thread_fence(memory_order_seq_cst); /* MAP_SHARED: the page cache already has it all */
    return 0;
}

EXPORT uint64_t nvtx_recorder_dropped(void) { return dropped_count(); }

EXPORT const char *nvtx_recorder_file(void) {
    recorder_init();
    return ensure_open() ? record_file_path() : NULL;
}
