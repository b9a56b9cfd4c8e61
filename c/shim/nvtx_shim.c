/* nvtx_shim.c - nvtx-cffi's tables and calls over NVTX v3 (see nvtx_shim.h for the model). */
#define _GNU_SOURCE
#include "nvtx_shim.h"
#include "nvtx_api.h"
#include "shim_internal.h"

#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Tables grow in fixed chunks that are never moved or freed, so a reader that saw a count can
 * index below it without a lock. Counts are published with release stores after the entry is
 * complete; hot calls read them with acquire loads (plain loads on x86). */
#define CHUNK_SHIFT 10
#define CHUNK_SIZE (1 << CHUNK_SHIFT)
#define CHUNK_MASK (CHUNK_SIZE - 1)

typedef struct {
    nvtxEventAttributes_t attr;
    nvtxDomainHandle_t domain;
    int domain_index;
} slot_t;

typedef struct {
    nvtxStringHandle_t handle;
    int domain_index;
} string_t;

#ifndef NVTXCFFI_VERSION
#error "build_ffi.py defines NVTXCFFI_VERSION (the package version this module belongs to)"
#endif
const char *nvtxcffi_build_version(void) { return NVTXCFFI_VERSION; }


static nvtxDomainHandle_t domains[NVTXCFFI_MAX_DOMAINS]; /* [0] = NULL, the default domain */
static atomic_int domain_count = 1;

static string_t *string_chunks[NVTXCFFI_MAX_STRINGS / CHUNK_SIZE];
static atomic_int string_count;

static slot_t *slot_chunks[NVTXCFFI_MAX_SLOTS / CHUNK_SIZE];
static atomic_int slot_count;

static atomic_int initialized;
static int tool_attached;

/* The registration locks (the tables here, payload.c's counters), held across fork() by atfork
 * handlers: a fork while another thread holds one would leave it locked forever in the child.
 * Except a lock the forking thread holds itself: a tool may fork in a callback NVTX runs under it
 * (its initialisation, a domain's or counter's creation), and locking again would hang; that
 * thread keeps it in parent and child and releases it as usual.
 *
 * Order: a registration holds a lock here while NVTX runs the tool's callback, which may take the
 * tool's own lock (the recorder's does), so a fork must take ours first, then the tool's. fork()
 * runs prepare handlers in the reverse order of their registration, so ours are registered after
 * the tool's: once NVTX has initialised (and loaded the tool, which registers its own then). A
 * first pair, registered at the first lock (before NVTX initialises), covers only a fork during
 * that initialisation, and stands down once the second pair exists. With the first pair alone, a
 * fork while another thread registered a string deadlocked: the recorder's prepare handler held
 * its lock, ours waited for the registering thread, which waited in the callback for the
 * recorder's lock (seen on PyPy, whose cffi calls let other threads run). */
static pthread_mutex_t locks[NVTXCFFI_LOCK_COUNT] = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER};
static _Thread_local unsigned locks_held;             /* bit i: this thread holds locks[i] */
static _Thread_local unsigned locks_kept_across_fork; /* bit i: ... and forked holding it */
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;      /* the first pair */
static pthread_once_t atfork_after_tool = PTHREAD_ONCE_INIT; /* the second pair */
static atomic_int after_tool_registered; /* the second pair exists: the first stands down */
static int first_pair_locked;            /* the first pair's prepare locked (set and read around one fork) */

static void lock_before_fork(void)
{
    for (int i = 0; i < NVTXCFFI_LOCK_COUNT; i++) {
        if (locks_held & (1u << i))
            locks_kept_across_fork |= 1u << i;
        else
            pthread_mutex_lock(&locks[i]);
    }
}

static void unlock_after_fork(void)
{
    for (int i = NVTXCFFI_LOCK_COUNT - 1; i >= 0; i--)
        if (!(locks_kept_across_fork & (1u << i)))
            pthread_mutex_unlock(&locks[i]);
    locks_kept_across_fork = 0;
}

static void first_before_fork(void)
{
    first_pair_locked = !atomic_load(&after_tool_registered);
    if (first_pair_locked)
        lock_before_fork();
}

static void first_after_fork(void)
{
    if (first_pair_locked)
        unlock_after_fork();
    first_pair_locked = 0;
}

static void register_atfork(void) { pthread_atfork(first_before_fork, first_after_fork, first_after_fork); }

static void register_atfork_after_tool(void)
{
    if (pthread_atfork(lock_before_fork, unlock_after_fork, unlock_after_fork) == 0)
        atomic_store(&after_tool_registered, 1);
}

void nvtxcffi_internal_lock(int which)
{
    pthread_once(&atfork_once, register_atfork);
    if (pthread_mutex_trylock(&locks[which]) != 0) {
        /* Held by another thread, maybe inside an NVTX tool's callback that lets other Python
         * threads run (a tool written in Python): waiting with the GIL held would deadlock, so the
         * GIL is let go while waiting (keep_gil.h; nothing where the caller holds none). */
        void *state = nvtxcffi_lock_wait_begin();
        pthread_mutex_lock(&locks[which]);
        nvtxcffi_lock_wait_end(state);
    }
    locks_held |= 1u << which;
}

void nvtxcffi_internal_unlock(int which)
{
    locks_held &= ~(1u << which);
    pthread_mutex_unlock(&locks[which]);
}

static void registry_acquire(void) { nvtxcffi_internal_lock(NVTXCFFI_LOCK_REGISTRY); }
static void registry_release(void) { nvtxcffi_internal_unlock(NVTXCFFI_LOCK_REGISTRY); }

int nvtxcffi_initialize(void)
{
    registry_acquire();
    if (!atomic_load(&initialized)) {
        nvtxInitialize(NULL);
        pthread_once(&atfork_after_tool, register_atfork_after_tool); /* (see the locks, above) */
        /* Ask the dispatch table itself, not the environment (an empty or wrong
         * NVTX_INJECTION64_PATH loads nothing) and not nvtxDomainIsEnabled (Nsight Systems 2022.x
         * answers "disabled" there while recording every core event). After initialisation every
         * slot no tool filled is NULL. */
        tool_attached = NVTX_VERSIONED_IDENTIFIER(nvtxGlobals).nvtxDomainRangePushEx_impl_fnptr != NULL
                     || NVTX_VERSIONED_IDENTIFIER(nvtxGlobals).nvtxDomainMarkEx_impl_fnptr != NULL
                     || NVTX_VERSIONED_IDENTIFIER(nvtxGlobals).nvtxDomainRangeStartEx_impl_fnptr != NULL;
        atomic_store(&initialized, 1);
    }
    registry_release();
    return tool_attached;
}

static int domain_valid(int domain)
{
    return domain >= 0 && domain < atomic_load_explicit(&domain_count, memory_order_acquire);
}

int nvtxcffi_domain_create(const char *name)
{
    int index = -1;
    if (name == NULL)
        return 0;
    registry_acquire();
    int n = atomic_load_explicit(&domain_count, memory_order_relaxed);
    if (n < NVTXCFFI_MAX_DOMAINS) {
        domains[n] = nvtxDomainCreateA(name);
        if (!nvtxcffi_tool_raised()) { /* (raised: the call fails, its entry stays free) */
            atomic_store_explicit(&domain_count, n + 1, memory_order_release);
            index = n;
        }
    }
    registry_release();
    return index;
}

/* ---- registered texts ---------------------------------------------------------------------------
 * (domain, text) -> the nvtxStringHandle_t NVTX gave for it, so that a text is registered once per
 * domain whichever call meets it first (a prepared slot, or an event whose message goes per call),
 * as nvtx 0.2.16 registers each message once before its first event. Bounded: 4-way buckets whose
 * oldest entry makes room (a text met again after leaving is registered again; NVTX handles stay
 * valid for the process, so the slots and strings holding one are unaffected), texts up to
 * NVTXCFFI_MAX_STRING_BYTES, NVTXCFFI_MAX_STRING_TOTAL_BYTES kept in all. Under the registry lock. */
#define KEPT_BUCKETS 16384 /* a power of two; x 4 ways = NVTXCFFI_MAX_STRINGS */
#define KEPT_WAYS 4

typedef struct {
    uint64_t hash; /* 0: empty */
    char *text;
    size_t size;
    int domain;
    nvtxStringHandle_t handle;
} kept_text_t;

static kept_text_t kept[KEPT_BUCKETS][KEPT_WAYS];
static size_t kept_bytes;

static uint64_t kept_hash(int domain, const char *text, size_t size)
{
    uint64_t h = 1469598103934665603ull ^ (uint64_t)(unsigned)domain; /* FNV-1a */
    for (size_t i = 0; i < size; i++) {
        h ^= (unsigned char)text[i];
        h *= 1099511628211ull;
    }
    h ^= h >> 29;
    return h | 1;
}

/* The handle of `text` in domain `domain` (valid), registering it if it is not kept. Registry lock held. */
static nvtxStringHandle_t registered_handle(int domain, const char *text)
{
    size_t size = strlen(text);
    uint64_t h = kept_hash(domain, text, size);
    kept_text_t *bucket = kept[(h >> 32) & (KEPT_BUCKETS - 1)];
    for (int way = 0; way < KEPT_WAYS; way++) {
        kept_text_t *e = &bucket[way];
        if (e->hash == h && e->domain == domain && e->size == size && memcmp(e->text, text, size) == 0) {
            nvtxStringHandle_t handle = e->handle;
            if (way > 0) { /* most recent first: the oldest is the one to go */
                kept_text_t found = *e;
                memmove(bucket + 1, bucket, (size_t)way * sizeof *bucket);
                bucket[0] = found;
            }
            return handle;
        }
    }
    nvtxStringHandle_t handle = nvtxDomainRegisterStringA(domains[domain], text);
    if (size > NVTXCFFI_MAX_STRING_BYTES || nvtxcffi_tool_raised()) /* (registered again next time) */
        return handle;
    kept_text_t *last = &bucket[KEPT_WAYS - 1];
    size_t freed = last->hash ? last->size + 1 : 0;
    if (kept_bytes - freed + size + 1 > NVTXCFFI_MAX_STRING_TOTAL_BYTES)
        return handle;
    char *copy = malloc(size + 1);
    if (copy == NULL)
        return handle;
    memcpy(copy, text, size + 1);
    if (last->hash)
        free(last->text);
    kept_bytes = kept_bytes - freed + size + 1;
    memmove(bucket + 1, bucket, (KEPT_WAYS - 1) * sizeof *bucket);
    bucket[0] = (kept_text_t){.hash = h, .text = copy, .size = size, .domain = domain, .handle = handle};
    return handle;
}

nvtxStringHandle_t nvtxcffi_internal_string(int domain, const char *text)
{
    if (text == NULL || !domain_valid(domain))
        return NULL;
    registry_acquire();
    nvtxStringHandle_t handle = registered_handle(domain, text);
    registry_release();
    return handle;
}

int nvtxcffi_string_keep(int domain, const char *text)
{
    if (text == NULL || !domain_valid(domain))
        return -1;
    nvtxcffi_internal_string(domain, text);
    return 0;
}

int nvtxcffi_string_register(int domain, const char *text)
{
    int index = -1;
    if (text == NULL || !domain_valid(domain))
        return -1;
    registry_acquire();
    int n = atomic_load_explicit(&string_count, memory_order_relaxed);
    if (n < NVTXCFFI_MAX_STRINGS) {
        string_t **chunk = &string_chunks[n >> CHUNK_SHIFT];
        if (*chunk == NULL)
            *chunk = calloc(CHUNK_SIZE, sizeof(string_t));
        if (*chunk != NULL) {
            string_t *entry = &(*chunk)[n & CHUNK_MASK];
            entry->handle = registered_handle(domain, text);
            entry->domain_index = domain;
            if (!nvtxcffi_tool_raised()) { /* (raised: the call fails, its entry stays free) */
                atomic_store_explicit(&string_count, n + 1, memory_order_release);
                index = n;
            }
        }
    }
    registry_release();
    return index;
}

int nvtxcffi_category_name(int domain, uint32_t category, const char *name)
{
    if (name == NULL || !domain_valid(domain))
        return -1;
    registry_acquire();
    nvtxDomainNameCategoryA(domains[domain], category, name);
    registry_release();
    return 0;
}

static void attributes_init(nvtxEventAttributes_t *attr, uint32_t color, uint32_t category)
{
    memset(attr, 0, sizeof *attr);
    attr->version = NVTX_VERSION;
    attr->size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    attr->colorType = NVTX_COLOR_ARGB;
    attr->color = color;
    attr->category = category;
}

int nvtxcffi_slot_create(int domain, int string_id, uint32_t color, uint32_t category)
{
    int index = -1;
    if (!domain_valid(domain))
        return -1;
    if (string_id >= atomic_load_explicit(&string_count, memory_order_acquire) || string_id < -1)
        return -1;
    registry_acquire();
    int n = atomic_load_explicit(&slot_count, memory_order_relaxed);
    if (n < NVTXCFFI_MAX_SLOTS) {
        slot_t **chunk = &slot_chunks[n >> CHUNK_SHIFT];
        if (*chunk == NULL)
            *chunk = calloc(CHUNK_SIZE, sizeof(slot_t));
        if (*chunk != NULL) {
            slot_t *slot = &(*chunk)[n & CHUNK_MASK];
            attributes_init(&slot->attr, color, category);
            if (string_id >= 0) {
                const string_t *s = &string_chunks[string_id >> CHUNK_SHIFT][string_id & CHUNK_MASK];
                if (s->domain_index != domain) {
                    /* A registered string belongs to one domain only. */
                    registry_release();
                    return -1;
                }
                slot->attr.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
                slot->attr.message.registered = s->handle;
            }
            slot->domain = domains[domain];
            slot->domain_index = domain;
            atomic_store_explicit(&slot_count, n + 1, memory_order_release);
            index = n;
        }
    }
    registry_release();
    return index;
}

int nvtxcffi_domain_count(void) { return atomic_load(&domain_count); }
int nvtxcffi_string_count(void) { return atomic_load(&string_count); }
int nvtxcffi_slot_count(void) { return atomic_load(&slot_count); }

static inline const slot_t *slot_get(int slot)
{
    if ((unsigned)slot >= (unsigned)atomic_load_explicit(&slot_count, memory_order_acquire))
        return NULL;
    return &slot_chunks[slot >> CHUNK_SHIFT][slot & CHUNK_MASK];
}

void nvtxcffi_push(int slot)
{
    const slot_t *s = slot_get(slot);
    if (s)
        nvtxDomainRangePushEx(s->domain, &s->attr);
}

void nvtxcffi_pop(int domain)
{
    if (domain_valid(domain))
        nvtxDomainRangePop(domains[domain]);
}

void nvtxcffi_pop_default(void)
{
    nvtxDomainRangePop(NULL); /* domains[0] */
}

uint64_t nvtxcffi_start(int slot)
{
    const slot_t *s = slot_get(slot);
    return s ? nvtxDomainRangeStartEx(s->domain, &s->attr) : 0;
}

void nvtxcffi_end(int domain, uint64_t range_id)
{
    if (domain_valid(domain))
        nvtxDomainRangeEnd(domains[domain], range_id);
}

void nvtxcffi_end_default(uint64_t range_id)
{
    nvtxDomainRangeEnd(NULL, range_id); /* domains[0] */
}

void nvtxcffi_mark(int slot)
{
    const slot_t *s = slot_get(slot);
    if (s)
        nvtxDomainMarkEx(s->domain, &s->attr);
}

static void payload_set(nvtxEventAttributes_t *attr, int kind, int64_t ivalue, double fvalue)
{
    switch (kind) {
    case NVTXREC_PT_INT64:
        attr->payloadType = NVTX_PAYLOAD_TYPE_INT64;
        attr->payload.llValue = ivalue;
        break;
    case NVTXREC_PT_UINT64:
        attr->payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
        attr->payload.ullValue = (uint64_t)ivalue;
        break;
    case NVTXREC_PT_DOUBLE:
        attr->payloadType = NVTX_PAYLOAD_TYPE_DOUBLE;
        attr->payload.dValue = fvalue;
        break;
    default:
        break;
    }
}

static uint64_t dispatch(int op, nvtxDomainHandle_t domain, const nvtxEventAttributes_t *attr)
{
    switch (op) {
    case NVTXCFFI_OP_PUSH:
        nvtxDomainRangePushEx(domain, attr);
        return 0;
    case NVTXCFFI_OP_START:
        return nvtxDomainRangeStartEx(domain, attr);
    case NVTXCFFI_OP_MARK:
        nvtxDomainMarkEx(domain, attr);
        return 0;
    default:
        return 0;
    }
}

uint64_t nvtxcffi_emit_slot(int op, int slot, int payload_kind, int64_t ivalue, double fvalue)
{
    const slot_t *s = slot_get(slot);
    if (s == NULL)
        return 0;
    nvtxEventAttributes_t attr = s->attr;
    payload_set(&attr, payload_kind, ivalue, fvalue);
    return dispatch(op, s->domain, &attr);
}

uint64_t nvtxcffi_emit(int op, int domain, const char *message, uint32_t color, uint32_t category,
                       int payload_kind, int64_t ivalue, double fvalue)
{
    if (!domain_valid(domain))
        return 0;
    nvtxEventAttributes_t attr;
    attributes_init(&attr, color, category);
    if (message != NULL) { /* registered, as nvtx 0.2.16 sends every message (some tools take no other) */
        attr.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
        attr.message.registered = nvtxcffi_internal_string(domain, message);
        if (nvtxcffi_tool_raised()) /* the registration raised: the call fails, no event */
            return 0;
    }
    payload_set(&attr, payload_kind, ivalue, fvalue);
    return dispatch(op, domains[domain], &attr);
}

/* ---- for payload.c (shim_internal.h): read access to the tables ---------------------------- */

int nvtxcffi_internal_domain(int domain, nvtxDomainHandle_t *handle)
{
    if (!domain_valid(domain))
        return -1;
    *handle = domains[domain];
    return 0;
}

int nvtxcffi_slot_domain(int slot)
{
    const slot_t *s = slot_get(slot);
    return s ? s->domain_index : -1;
}

int nvtxcffi_internal_slot(int slot, nvtxEventAttributes_t *attr, nvtxDomainHandle_t *handle)
{
    const slot_t *s = slot_get(slot);
    if (s == NULL)
        return -1;
    *attr = s->attr;
    *handle = s->domain;
    return 0;
}

uint32_t nvtxcffi_os_thread_id(void)
{
    return (uint32_t)syscall(SYS_gettid);
}

void nvtxcffi_name_os_thread(uint32_t os_thread_id, const char *name)
{
    if (name != NULL)
        nvtxNameOsThreadA(os_thread_id, name);
}

/* ---- CUDA resource naming ----------------------------------------------------------------------
 * nvToolsExtCuda.h includes "cuda.h" only for the four handle types; cuda.h (found through the
 * shim's include path) declares exactly those, binary-compatible with the toolkit's, so the shim
 * builds on machines without CUDA. A name reaches the tool as is; NVTX never dereferences handles. */
#include <nvtx3/nvToolsExtCuda.h>

void nvtxcffi_name_cuda_device(int device, const char *name)
{
    if (name != NULL)
        nvtxNameCuDeviceA((CUdevice)device, name);
}

void nvtxcffi_name_cuda_context(uintptr_t context, const char *name)
{
    if (name != NULL)
        nvtxNameCuContextA((CUcontext)context, name);
}

void nvtxcffi_name_cuda_stream(uintptr_t stream, const char *name)
{
    if (name != NULL)
        nvtxNameCuStreamA((CUstream)stream, name);
}

void nvtxcffi_name_cuda_event(uintptr_t event, const char *name)
{
    if (name != NULL)
        nvtxNameCuEventA((CUevent)event, name);
}

/* ---- the function table of nvtx_api.h ---------------------------------------------------------- */

static const nvtxcffi_api_t api_table = {
    .magic = NVTXCFFI_API_MAGIC,
    .version = NVTXCFFI_API_VERSION,
    .size = sizeof(nvtxcffi_api_t),
    .build_version = NVTXCFFI_VERSION,
    .push = nvtxcffi_push,
    .pop = nvtxcffi_pop,
    .pop_default = nvtxcffi_pop_default,
    .start = nvtxcffi_start,
    .end = nvtxcffi_end,
    .end_default = nvtxcffi_end_default,
    .mark = nvtxcffi_mark,
    .os_thread_id = nvtxcffi_os_thread_id,
    .emit_slot = nvtxcffi_emit_slot,
    .emit = nvtxcffi_emit,
};

const void *nvtxcffi_api(void)
{
    return &api_table;
}
