/* recorder_core.h - what the files of libnvtx_recorder.so share (recorder.c describes the design).
 *
 * recorder.c            the injection entry (InitializeInjectionNvtx2), the NVTX callback table and its
 *                       handlers, an event's record path, the blob calls of recorder_internal.h and the
 *                       in-process API of recorder.h
 * recorder_buffers.c    per-thread state and its chunk of the file: claiming chunks, data records,
 *                       clock pairs
 * recorder_pool.c       the background thread that prepares chunk_max chunks ahead of the threads
 * recorder_file.c       the record file: opening it, its descriptor, its address window, claims of its
 *                       space, the dropped / write-error counters, the clock base
 * recorder_registry.c   domains, categories, registered strings, messages' string ids, extension
 *                       registrations; what a forked child's file re-records; UTF-8 of wide strings
 * recorder_lifecycle.c  setup from the environment, fork and exit
 * recorder_ext.c        NVTX's payload and counters extensions (recorder_ext.h)
 *
 * The record path's helpers are static inline here, so that each handler inlines them as one file did;
 * what the files share besides has hidden visibility: PC-relative access and direct calls, as for
 * static symbols, and nothing exported from the library. The globals below are the ones the record
 * path reads inline; each is written only by the file named beside it.
 */
#ifndef NVTX_CFFI_RECORDER_CORE_H
#define NVTX_CFFI_RECORDER_CORE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <wchar.h>

#include "recorder.h"
#include "recorder_internal.h"

#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

#define DEFAULT_MAX_BYTES (4ull << 30)
#define DEFAULT_CHUNK_BYTES (1u << 20)
#define MAX_TEXT 65536u
#define DEPTH_SLOTS 256
#define CACHE_SLOTS 64
#define TIME_MASK ((1ull << 56) - 1)
#define CHUNK_HDR_WORDS 4
#define CLOCK_WORDS 4 /* head + ceil(17 / 7) */

/* Chunk sizes the pool prepares (recorder_pool.c), and the bridge a chunk switch makes inline when
 * none is ready. */
#ifndef POOL_MIN_CHUNK /* -DPOOL_MIN_CHUNK=0xFFFFFFFFu: no pool (to measure what it saves) */
#define POOL_MIN_CHUNK (64u << 10)
#endif
#define POOL_MAX_CHUNK (16u << 20) /* bigger ones amortise their own cost (and would hold up a fork) */
#define POOL_BRIDGE (16u << 10)

enum { MODE_OFF = 0, MODE_PENDING = 1, MODE_OPEN = 2, MODE_FAILED = 3 };

struct string_entry {
    struct string_entry *next;
    uint64_t hash;
    uint32_t domain, id, len;
    char text[];
};

struct cache_slot {
    const char *ptr;
    const struct string_entry *e;
};

struct tstate {
    uint64_t *pos, *end; /* write cursor in the current chunk */
    unsigned char *chunk;
    uint32_t len, next_len;
    uint64_t last_cal;   /* time of this thread's last CLOCK pair */
    uint32_t tid;
    volatile int busy;
    struct tstate *prev, *next;
    struct cache_slot cache[CACHE_SLOTS];
    int32_t depth[DEPTH_SLOTS];
};

#pragma GCC visibility push(hidden)

/* ---- state the record path reads */
extern __thread struct tstate *t_state __attribute__((tls_model("initial-exec"))); /* recorder_buffers.c */
extern _Atomic int g_mode; /* MODE_*: recorder_file.c (and recorder_lifecycle.c through it) */
extern int g_use_tsc;      /* the clock is the TSC (recorder_file.c) */
extern uint64_t g_base;    /* tsc0 or start_ns of the open file (recorder_file.c) */
/* The open file's geometry (recorder_file.c, when it opens; g_chunk_max from the environment first). */
extern uint32_t g_page;
extern uint32_t g_chunk_max;
extern uint32_t g_text_cap; /* longest text / blob a data record may carry */
/* Registries, thread list, file open; fork takes it (recorder_lifecycle.c). */
extern pthread_mutex_t g_lock;

/* ---- clocks */
static inline uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t raw_ticks(void) {
#if defined(__x86_64__) || defined(__i386__)
    if (LIKELY(g_use_tsc)) {
        uint32_t lo, hi;
        __asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
        return ((uint64_t)hi << 32) | lo;
    }
#endif
    return now_ns();
}

static inline uint64_t rel_time(void) { return (raw_ticks() - g_base) & TIME_MASK; }

/* ---- recorder_buffers.c: threads and their chunks */
struct tstate *get_tstate(void);
void release_chunk(struct tstate *t);
void fault_in(void *p, uint64_t sz); /* a fresh mapping's pages */
/* Take the thread's new chunk p (sz bytes at file offset off): header, cursor, clock pair. */
void install_chunk(struct tstate *t, void *p, uint64_t off, uint64_t sz);
/* Claim a chunk with room for at least `words` words after its header and clock pair. */
int claim_chunk(struct tstate *t, uint32_t words);
/* A data record: head, then data = time, arg, aux, bytes, 7 per continuation word.
 * Caller holds t->busy. Returns 0 when it could not be recorded (the caller counts what it costs:
 * an event's own string or clock records are not events). */
int data_record(struct tstate *t, uint8_t tag, uint8_t flags, uint32_t domain, uint64_t time, uint64_t arg,
                uint8_t aux, const void *bytes, uint32_t n);
void write_clock(struct tstate *t);
void threads_init(void);
void threads_atfork_child(void);

/* Room for n words in this thread's chunk (claiming a new one if needed), or NULL. */
static inline uint64_t *reserve(struct tstate *t, uint32_t n) {
    if (LIKELY(t->pos != NULL) && LIKELY(t->end - t->pos >= (ptrdiff_t)n)) return t->pos;
    return claim_chunk(t, n) ? t->pos : NULL;
}

/* ---- recorder_pool.c: ready chunks */
/* Hand t's full chunk (if chunk_max-sized) to the pool thread to unmap, and take a ready chunk for
 * t: 1, or 0 when none is ready (the caller claims inline). Either way t has no chunk after. */
int swap_ready(struct tstate *t);
int pool_running(void);
void pool_stop(void);
void pool_atfork_pause(void);
void pool_atfork_lock(void);
void pool_atfork_parent(void);
void pool_atfork_child(void);

/* ---- recorder_file.c: the record file */
void file_configure(uint64_t max_bytes, uint64_t chunk_bytes, uint64_t run_id, const char *dir);
void clock_init(void);
/* A (TSC, CLOCK_MONOTONIC) pair: the tightest of three brackets. */
void clock_pair(uint64_t *tsc, uint64_t *mono);
int ensure_open(void);
/* The record file's descriptor, reopened if the program took its number; -1 when it is lost. */
int file_fd(void);
/* Map [off, off + sz) of file fd read-write, shared: in its slab when there is one. */
void *map_file(int fd, uint64_t off, uint64_t sz);
/* Claim `size` bytes of the file (CAS on the offset; less when only less is left before the bound),
 * only if claims go on and at least need + margin bytes are left: returns the size claimed
 * (*off_out: where), or 0. */
uint64_t claim_space(uint64_t need, uint64_t size, uint64_t margin, uint64_t *off_out);
void stop_claims(void); /* the bound is reached: no more claims */
void punch(uint64_t off, uint64_t len);
void count_drop(void);
void count_write_error(int err);
uint64_t dropped_count(void);
const char *record_file_path(void); /* "" when no file is open */
void file_atfork_child(void);

/* ---- recorder_registry.c: names and definitions (under g_lock) */
uint32_t intern_domain(char *owned_name);
/* The entry of (domain, text), created if new (*created = 1); the overflow entry when the table is
 * full. */
struct string_entry *intern_string(uint32_t domain, const char *s, size_t n, int *created);
const char *string_text(const struct string_entry *e); /* the overflow entry's: a placeholder */
void remember_category(uint32_t domain, uint32_t id, const char *name);
void remember_def(uint8_t kind, uint32_t domain, uint64_t arg, const void *data, uint32_t len, uint8_t flags);
/* A message's string id, its STRING record written when new; slot (may be NULL): the cache slot
 * to fill. */
uint32_t text_id(struct tstate *t, const char *s, size_t n, uint8_t api, uint64_t ts, struct cache_slot *slot);
uint32_t wide_id(struct tstate *t, const wchar_t *w, uint8_t api, uint64_t ts);
/* A forked child's new file: the definitions it inherited, re-recorded (flagged INHERITED). */
void rerecord_definitions(struct tstate *t);
/* malloc'd UTF-8 copy of a wide string, at most cap bytes (*len: its length) */
char *wide_dup_cap(const wchar_t *w, size_t cap, size_t *len);
char *wide_dup(const wchar_t *w);

/* ---- recorder.c */
void range_ids_start_at(uint64_t first);

/* ---- recorder_lifecycle.c */
void recorder_init(void); /* once per process, before anything else */

#pragma GCC visibility pop

#endif
