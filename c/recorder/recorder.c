/* recorder.c - nvtx-cffi's NVTX v3 injection library that records every NVTX event to a file.
 *
 * See recorder.h for the environment variables and the file format (version 2).
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
 *    "pool", see below) does that work ahead of time and unmaps full chunks, so a chunk switch on
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
 *    it and reused the number for a file of its own never gets the recording (see file_fd).
 *  - exec: a new image of the same process writes a new file with the next exec generation.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <wchar.h>

#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

#include "recorder.h"
#include "recorder_internal.h"
#include "recorder_ext.h" /* payload/counters extensions (recorder_ext.c) */

#define EXPORT __attribute__((visibility("default")))
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

_Static_assert(sizeof(struct nvtxrec_file_header) <= NVTXREC_HEADER_SIZE, "header layout");
_Static_assert(sizeof(struct nvtxrec_chunk_header) == 32, "chunk header layout");

#define DEFAULT_MAX_BYTES (4ull << 30)
#define DEFAULT_CHUNK_BYTES (1u << 20)
#define MAX_TEXT 65536u
#define MAX_DOMAINS 65534u /* ids fit 16 bits; 65535: the shared overflow domain */
#define MAX_STRINGS (1u << 20)
#define MAX_STRING_BYTES (64u << 20)
#define MAX_CATEGORIES 65536u
#define DEPTH_SLOTS 256
#define CACHE_SLOTS 64
#define CAL_TICKS (1ull << 20) /* a thread writes a CLOCK pair at least this often (TSC ticks) */
#define TIME_MASK ((1ull << 56) - 1)
#define MSG_DOMAIN 0xFFFFFFFFu /* namespace of interned messages in the string table */
#define CHUNK_HDR_WORDS 4
#define CLOCK_WORDS 4 /* head + ceil(17 / 7) */

enum { MODE_OFF = 0, MODE_PENDING = 1, MODE_OPEN = 2, MODE_FAILED = 3 };

/* ---------------------------------------------------------------- global state */

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER; /* registries, thread list, file open */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static pthread_key_t g_key;

static _Atomic int g_mode = MODE_OFF;
static char g_dir[PATH_MAX];
static char g_path[PATH_MAX + 64];
static int g_fd = -1;                    /* checked before each use: see file_fd() */
static dev_t g_dev;                      /* the record file's identity (g_fd may stop being it) */
static ino_t g_ino;
static pthread_mutex_t g_fd_lock = PTHREAD_MUTEX_INITIALIZER; /* g_fd, reopen */
static struct nvtxrec_file_header *g_hdr;
static uint64_t g_max_bytes = DEFAULT_MAX_BYTES;
static uint64_t g_run_id; /* NVTX_CFFI_RECORD_RUN: the run this process belongs to (0: none given) */
static uint32_t g_chunk_max = DEFAULT_CHUNK_BYTES;
static uint32_t g_page = 4096;
static uint32_t g_text_cap = MAX_TEXT; /* longest text / blob a data record may carry */
static uint64_t g_limit;               /* end of the space chunks may take */
static _Atomic uintptr_t *g_slabs;     /* the file's address window in slabs (see map_file), or NULL */
static uint64_t g_nslabs;
static _Atomic uint64_t g_next;
static _Atomic int g_full;
static _Atomic uint64_t g_dropped;
static _Atomic uint64_t g_write_errors;
static _Atomic uint64_t g_range_ids;
static _Atomic uint64_t g_resource_ids;
static _Atomic uint32_t g_transient_ids = MAX_STRINGS;
static _Atomic int g_warned;
static int g_use_tsc;
static uint64_t g_base;        /* tsc0 or start_ns of the open file */
static double g_ns_per_tick;   /* TSC calibration (once per image) */
static uint32_t g_exec_gen;

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
static __thread struct tstate *t_state __attribute__((tls_model("initial-exec")));
static struct tstate *g_threads;

static struct string_entry **g_buckets;
static uint32_t g_nbuckets, g_nstrings;
static uint64_t g_string_bytes;
static struct string_entry g_string_overflow = {NULL, 0, 0, NVTXREC_STRING_OVERFLOW, 0, {0}};
static const char g_overflow_text[] = "<nvtx-cffi recorder: string table full>";

static char **g_domains; /* g_domains[id - 1] = name */
static uint32_t g_ndomains, g_domcap;

struct category_entry {
    uint32_t domain, id;
    char *name;
};
static struct category_entry *g_categories;
static uint32_t g_ncategories, g_catcap;

/* Extension registrations (payload schemas, counter groups, scopes: recorder_ext.c's blobs) as
 * recorded, kept for a forked child to re-record like domains and strings (see remember_def). */
struct def_blob {
    struct def_blob *chain;            /* hash chain */
    struct def_blob *prev, *next;      /* registration order */
    uint64_t arg;
    uint32_t domain, len;
    uint8_t kind, flags;
    unsigned char data[];
};
#define DEF_BUCKETS 4096u
#define MAX_DEFS 65536u
#define MAX_DEF_BYTES (16u << 20)
static struct def_blob **g_def_buckets;
static struct def_blob *g_defs_first, *g_defs_last;
static uint32_t g_ndefs;
static uint64_t g_def_bytes;
static int g_defs_warned;

static void global_init(void);
static int ensure_open(void);

/* ---------------------------------------------------------------- clocks */

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

/* A (TSC, CLOCK_MONOTONIC) pair: the tightest of three brackets. */
static void clock_pair(uint64_t *tsc, uint64_t *mono) {
    uint64_t best = UINT64_MAX;
    for (int i = 0; i < 3; ++i) {
        uint64_t t1 = raw_ticks();
        uint64_t m = now_ns();
        uint64_t t2 = raw_ticks();
        if (t2 - t1 < best) {
            best = t2 - t1;
            *tsc = t1 + (t2 - t1) / 2;
            *mono = m;
        }
    }
}

static int tsc_usable(void) {
#if defined(__x86_64__) || defined(__i386__)
    const char *force = getenv("NVTX_CFFI_RECORD_CLOCK");
    if (force && strcmp(force, "monotonic") == 0) return 0;
    FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "re");
    if (!f) return 0;
    char buf[32] = {0};
    int ok = fgets(buf, sizeof buf, f) && strcmp(buf, "tsc\n") == 0;
    fclose(f);
    return ok;
#else
    return 0;
#endif
}

/* ---------------------------------------------------------------- helpers */

static uint32_t os_tid(void) { return (uint32_t)syscall(SYS_gettid); }

static inline uint32_t domain_id(nvtxDomainHandle_t d) { return (uint32_t)(uintptr_t)d; }

static void count_drop(void) {
    atomic_fetch_add_explicit(&g_dropped, 1, memory_order_relaxed);
    struct nvtxrec_file_header *h = g_hdr;
    if (h) __atomic_fetch_add(&h->dropped, 1, __ATOMIC_RELAXED);
}

static void warn_once(const char *what, int err) {
    if (atomic_exchange(&g_warned, 1)) return; /* once, whichever thread fails first */
    fprintf(stderr, "nvtx-cffi recorder: %s %s: %s; events are dropped and counted\n", what, g_path,
            strerror(err));
}

static void count_write_error(int err) {
    atomic_fetch_add_explicit(&g_write_errors, 1, memory_order_relaxed);
    struct nvtxrec_file_header *h = g_hdr;
    if (h) __atomic_fetch_add(&h->write_errors, 1, __ATOMIC_RELAXED);
    warn_once("cannot extend", err);
}

/* ---- the record file's descriptor
 * A program may close descriptors it does not own (os.closerange(3, ...), as daemonising code and
 * some test runners do) and open files of its own, which then get the recorder's old number: a
 * chunk reserved and mapped through it would be written into the program's file. So the descriptor
 * is checked (fstat: the record file's device and inode) before each use (new chunk, hole punch),
 * and when it is no longer the record file the file is reopened by path (O_RDWR, never O_CREAT),
 * checked the same way, and locked LOCK_SH again. Where that fails (the file was moved or removed),
 * the recorder stops claiming chunks: events that need one are dropped and counted, with one
 * warning. The old number is left alone (it is the program's now); mappings already made stay the
 * record file's. A descriptor closed and reused by another thread during a claim's few syscalls
 * is not covered. */
static int same_file(int fd) {
    struct stat st;
    return fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == g_dev && st.st_ino == g_ino;
}

/* The record file's descriptor, reopened if the program took its number; -1 when it is lost. */
static int file_fd(void) {
    pthread_mutex_lock(&g_fd_lock);
    int fd = g_fd;
    if (fd >= 0 && !same_file(fd)) {
        int nfd = g_path[0] ? open(g_path, O_RDWR | O_CLOEXEC | O_NOFOLLOW) : -1;
        int err = nfd < 0 ? errno : ESTALE; /* ESTALE: a file of that name, but not the record file */
        if (nfd >= 0 && !same_file(nfd)) {
            close(nfd);
            nfd = -1;
        }
        if (nfd >= 0) {
            (void)flock(nfd, LOCK_SH | LOCK_NB); /* "still recording", on the new open file too */
        } else {
            atomic_store_explicit(&g_full, 1, memory_order_relaxed); /* no more claims */
            warn_once("lost its descriptor and cannot reopen", err);
        }
        g_fd = fd = nfd;
    }
    pthread_mutex_unlock(&g_fd_lock);
    return fd;
}

/* "4096", "64k", "16M", "2G", "1T" (binary, case-insensitive, optional trailing B's) -> bytes;
 * 0 for anything else (what the tracer's --max-bytes accepts). */
static uint64_t parse_size(const char *text) {
    char buf[64];
    size_t n = strlen(text);
    while (n && (text[0] == ' ' || text[0] == '\t')) ++text, --n;
    while (n && (text[n - 1] == ' ' || text[n - 1] == '\t' || text[n - 1] == '\n')) --n;
    if (n == 0 || n >= sizeof buf) return 0;
    for (size_t i = 0; i < n; ++i) buf[i] = (char)(text[i] >= 'A' && text[i] <= 'Z' ? text[i] + 32 : text[i]);
    while (n && buf[n - 1] == 'b') --n;
    if (n == 0) return 0;
    unsigned shift = 0;
    switch (buf[n - 1]) {
    case 'k': shift = 10; break;
    case 'm': shift = 20; break;
    case 'g': shift = 30; break;
    case 't': shift = 40; break;
    default: break;
    }
    if (shift) --n;
    if (n == 0 || n > 19) return 0;
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) {
        if (buf[i] < '0' || buf[i] > '9') return 0;
        v = v * 10 + (uint64_t)(buf[i] - '0');
    }
    if (v == 0 || (shift && v > (UINT64_MAX >> shift))) return 0;
    return v << shift;
}

static uint64_t size_from_env(const char *name, uint64_t dflt) {
    const char *v = getenv(name);
    if (!v || !*v) return dflt;
    uint64_t n = parse_size(v);
    if (n) return n;
    fprintf(stderr, "nvtx-cffi recorder: %s=%s is not a size like 4096, 64k, 16M or 2G; using %llu\n",
            name, v, (unsigned long long)dflt);
    return dflt;
}
/* UTF-8 for one code point; invalid ones (surrogates, > U+10FFFF) become U+FFFD. */
static inline uint32_t utf8_width(uint32_t c) {
    if (c < 0x80) return 1;
    if (c < 0x800) return 2;
    if (c >= 0xD800 && c <= 0xDFFF) return 3;
    if (c < 0x10000) return 3;
    if (c <= 0x10FFFF) return 4;
    return 3;
}

static size_t wide_utf8_len(const wchar_t *w) {
    size_t n = 0;
    for (; *w; ++w) n += utf8_width((uint32_t)*w);
    return n;
}

/* Encode at most cap bytes (whole code points only); returns bytes written. */
static size_t wide_to_utf8(const wchar_t *w, unsigned char *out, size_t cap) {
    size_t n = 0;
    for (; *w; ++w) {
        uint32_t c = (uint32_t)*w;
        if ((c >= 0xD800 && c <= 0xDFFF) || c > 0x10FFFF) c = 0xFFFD;
        uint32_t k = utf8_width(c);
        if (n + k > cap) break;
        if (k == 1) {
            out[n] = (unsigned char)c;
        } else if (k == 2) {
            out[n] = (unsigned char)(0xC0 | (c >> 6));
            out[n + 1] = (unsigned char)(0x80 | (c & 0x3F));
        } else if (k == 3) {
            out[n] = (unsigned char)(0xE0 | (c >> 12));
            out[n + 1] = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
            out[n + 2] = (unsigned char)(0x80 | (c & 0x3F));
        } else {
            out[n] = (unsigned char)(0xF0 | (c >> 18));
            out[n + 1] = (unsigned char)(0x80 | ((c >> 12) & 0x3F));
            out[n + 2] = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
            out[n + 3] = (unsigned char)(0x80 | (c & 0x3F));
        }
        n += k;
    }
    return n;
}


/* malloc'd UTF-8 copy of a wide string, at most cap bytes (*len: its length) */
static char *wide_dup_cap(const wchar_t *w, size_t cap, size_t *len) {
    size_t n = wide_utf8_len(w);
    if (n > cap) n = cap;
    char *s = malloc(n + 1);
    if (!s) return NULL;
    size_t k = wide_to_utf8(w, (unsigned char *)s, n);
    s[k] = 0;
    if (len) *len = k;
    return s;
}

static char *wide_dup(const wchar_t *w) { return wide_dup_cap(w, (size_t)-1 / 2, NULL); }

/* ---------------------------------------------------------------- the file's address window
 * Every thread that records holds a mapping of its chunk, and a process may have at most
 * vm.max_map_count (65530) mappings: one per chunk took ~16,000 concurrent threads to exhaust,
 * where Python alone starts ~21,000 (a stack and its guard are ~3 mappings). So the file's range is
 * cut in slabs of WINDOW_SLAB bytes, each reserved as address space when first needed (PROT_NONE,
 * MAP_NORESERVE: no memory, no commit charge), and a chunk within slab k at file offset `off` is
 * mapped at slab + (off - k * WINDOW_SLAB) (MAP_FIXED over the reservation): neighbouring chunks are
 * neighbouring mappings of neighbouring file pages, which the kernel merges into one, however many
 * threads own them. A full chunk is unmapped as before; the hole it leaves may be taken by any
 * other mapping, and that is safe because MAP_FIXED only ever lands on never-claimed offsets
 * (claim_space hands each offset out once), which are still the reservation. A hole is no mapping
 * at all, so the count is the runs of live chunks (at most one per recording thread) plus one per
 * slab. Reserved but unclaimed address space is at most the rest of the slabs being filled, not
 * the whole --max-bytes. A forked child unmaps the never-claimed parts of the parent's slabs and
 * nothing else (window_drop). No window (chunks mapped anywhere, one mapping each) under an
 * address-space limit, where reserved space would count against the program's own, or for a
 * --max-bytes too big for the slab table; a chunk across a slab boundary, or one whose slab could
 * not be reserved, is mapped anywhere too. */
#define WINDOW_SLAB (64ull << 20)
#define WINDOW_MAX_SLABS (1ull << 20) /* 64 TiB of --max-bytes */

static void window_open(uint64_t len) {
    struct rlimit as;
    g_slabs = NULL;
    g_nslabs = 0;
    if (getrlimit(RLIMIT_AS, &as) != 0 || as.rlim_cur != RLIM_INFINITY) return;
    uint64_t n = (len + WINDOW_SLAB - 1) / WINDOW_SLAB;
    if (n > WINDOW_MAX_SLABS) return;
    g_slabs = calloc(n, sizeof *g_slabs);
    g_nslabs = g_slabs ? n : 0;
}

/* A forked child: unmap the parts of the parent's slabs never claimed (claimed parts are chunks,
 * unmapped one by one, or holes that may hold other mappings now). A range claimed by a thread
 * that had not mapped it yet when the process forked stays reserved: a chunk or two of address
 * space, no memory. */
static void window_drop(uint64_t claimed) {
    claimed = (claimed + g_page - 1) / g_page * g_page;
    for (uint64_t k = 0; k < g_nslabs; ++k) {
        unsigned char *slab = (unsigned char *)atomic_load(&g_slabs[k]);
        uint64_t start = k * WINDOW_SLAB, end = start + WINDOW_SLAB;
        if (!slab || claimed >= end) continue;
        uint64_t from = claimed > start ? claimed : start;
        munmap(slab + (from - start), end - from);
    }
    free((void *)g_slabs);
    g_slabs = NULL;
    g_nslabs = 0;
}

/* Slab k's reserved address, reserving it at first need (threads may race: one reservation wins,
 * the others are given back); NULL when it cannot be reserved. */
static unsigned char *slab_at(uint64_t k) {
    uintptr_t a = atomic_load_explicit(&g_slabs[k], memory_order_acquire);
    if (a) return (unsigned char *)a;
    void *w = mmap(NULL, WINDOW_SLAB, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (w == MAP_FAILED) return NULL;
    if (atomic_compare_exchange_strong_explicit(&g_slabs[k], &a, (uintptr_t)w, memory_order_acq_rel,
                                                memory_order_acquire))
        return w;
    munmap(w, WINDOW_SLAB);
    return (unsigned char *)a;
}

/* Map [off, off + sz) of file fd read-write, shared: in its slab when there is one. */
static void *map_file(int fd, uint64_t off, uint64_t sz) {
    unsigned char *at = NULL;
    uint64_t k = off / WINDOW_SLAB;
    if (k < g_nslabs && (off + sz - 1) / WINDOW_SLAB == k) {
        unsigned char *slab = slab_at(k);
        if (slab) at = slab + (off - k * WINDOW_SLAB);
    }
    void *p = mmap(at, sz, PROT_READ | PROT_WRITE, MAP_SHARED | (at ? MAP_FIXED : 0), fd, (off_t)off);
    return p == MAP_FAILED ? NULL : p;
}

/* ---------------------------------------------------------------- threads */

static void write_clock(struct tstate *t);

static void release_chunk(struct tstate *t) {
    if (t->chunk) munmap(t->chunk, t->len);
    t->chunk = NULL;
    t->pos = t->end = NULL;
    t->len = 0;
}

static void thread_exit(void *p) {
    struct tstate *t = p;
    if (!t->busy && t->pos && atomic_load(&g_mode) == MODE_OPEN) {
        t->busy = 1;
        write_clock(t); /* a last clock pair after this thread's events */
        t->busy = 0;
    }
    release_chunk(t);
    pthread_mutex_lock(&g_lock);
    if (t->prev) t->prev->next = t->next;
    else g_threads = t->next;
    if (t->next) t->next->prev = t->prev;
    pthread_mutex_unlock(&g_lock);
    if (t_state == t) t_state = NULL;
    free(t);
}

static struct tstate *get_tstate(void) {
    struct tstate *t = t_state;
    if (t) return t;
    t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->tid = os_tid();
    pthread_mutex_lock(&g_lock);
    t->next = g_threads;
    if (g_threads) g_threads->prev = t;
    g_threads = t;
    pthread_mutex_unlock(&g_lock);
    pthread_setspecific(g_key, t);
    t_state = t;
    return t;
}

/* ---------------------------------------------------------------- chunks and records */

/* Map [off, off + sz) of the file and fault its pages in (MADV_POPULATE_WRITE; a store per page where
 * the kernel lacks it): fresh file pages cost microseconds each, better here than on the hot path.
 * NULL (errno set) when it cannot. */
static void *map_chunk(int fd, uint64_t off, uint64_t sz) {
    void *p = map_file(fd, off, sz);
    if (!p) return NULL;
    if (madvise(p, sz, MADV_POPULATE_WRITE) != 0) {
        for (uint64_t i = 0; i < sz; i += g_page) ((volatile unsigned char *)p)[i] = 0;
    }
    return p;
}

static _Atomic uint64_t g_chunk_seq; /* chunks installed so far, in this process */

/* Take the thread's new chunk p (sz bytes at file offset off): header, cursor, clock pair.
 * File offsets are claim order, not the order a thread takes its chunks in (the pool hands out
 * chunks claimed before an inline one), so the header carries the install order and readers order
 * a thread's chunks by it. */
static void install_chunk(struct tstate *t, void *p, uint64_t off, uint64_t sz) {
    struct nvtxrec_chunk_header *h = p;
    uint64_t seq = atomic_fetch_add_explicit(&g_chunk_seq, 1, memory_order_relaxed) + 1;
    h->tid = t->tid;
    h->offset = off;
    h->seq = seq;
    h->check = NVTXREC_CHUNK_CHECK ^ (uint32_t)sz ^ t->tid ^ (uint32_t)off ^ (uint32_t)seq;
    __atomic_store_n(&h->tag_size, NVTXREC_CHUNK_TAG | (sz << 32), __ATOMIC_RELEASE);
    t->chunk = p;
    t->len = (uint32_t)sz;
    t->pos = (uint64_t *)p + CHUNK_HDR_WORDS;
    t->end = (uint64_t *)((unsigned char *)p + sz);
    write_clock(t); /* every chunk starts with a clock pair */
}

/* ---- ready chunks: a background thread (the pool, named "nvtx-recorder") keeps a few chunk_max
 * chunks claimed, reserved, mapped and faulted in, so that a thread's chunk switch is taking one
 * (a lock and a wake-up) instead of microseconds of kernel work per page on the annotated thread;
 * it also unmaps full chunks (a munmap is a TLB shootdown). Started at the first chunk_max claim
 * (threads that record little never get there), only where chunk_max is in [POOL_MIN_CHUNK, POOL_MAX_CHUNK];
 * it stops POOL_MARGIN chunks short of the file bound (claims near the bound stay inline, so the
 * bound is filled as before). Any failure (thread creation, disk full) switches it off: chunk
 * switches then do the work inline, which counts and warns as before. When it is behind, a chunk
 * switch bridges with a POOL_BRIDGE chunk made inline.
 * The thread blocks every signal, never records, holds g_pool_lock only between steps, and is not
 * waited for at exit (pool_stop stops it and punches holes where unused ready chunks were).
 * fork: atfork_prepare pauses it and joins it, so the process forks with no such thread (a forked
 * child cannot have it, and Python 3.12+ warns about forking a multi-threaded process); the parent
 * restarts it at its next chunk_max claim, the child (which unmaps the parent's ready chunks)
 * starts its own at its own. State changes happen under g_pool_lock. */
#define POOL_SLOTS 4
#define RETIRE_SLOTS 8
#ifndef POOL_MIN_CHUNK /* -DPOOL_MIN_CHUNK=0xFFFFFFFFu: no pool (to measure what it saves) */
#define POOL_MIN_CHUNK (64u << 10)
#endif
#define POOL_MAX_CHUNK (16u << 20) /* bigger ones amortise their own cost (and would hold up a fork) */
#define POOL_MARGIN 4
#define POOL_BRIDGE (16u << 10)
enum { POOL_IDLE = 0, POOL_RUNNING = 1, POOL_PAUSED = 2, POOL_OFF = 3 };
struct ready_chunk {
    void *p;
    uint64_t off, len;
};
static pthread_mutex_t g_pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_pool_cond = PTHREAD_COND_INITIALIZER;
static pthread_t g_pool_thread;               /* valid while RUNNING or PAUSED */
static struct ready_chunk g_pool[POOL_SLOTS]; /* under g_pool_lock */
static unsigned g_pool_n;                     /* under g_pool_lock */
static _Atomic unsigned g_pool_ready;         /* g_pool_n, read without the lock */
static _Atomic int g_pool_state = POOL_IDLE;  /* written under g_pool_lock */
static struct ready_chunk g_pool_busy;        /* the chunk the thread is preparing (fork: unmapped) */
static void *g_retired[RETIRE_SLOTS];         /* full chunk_max chunks for the thread to unmap */
static unsigned g_nretired;                   /* under g_pool_lock */

static inline int pool_state(void) { return atomic_load_explicit(&g_pool_state, memory_order_relaxed); }
static inline void set_pool_state(int s) { atomic_store_explicit(&g_pool_state, s, memory_order_relaxed); }

/* Claim `size` bytes of the file (CAS on the offset; less when only less is left before the bound),
 * only if at least need + margin bytes are left: returns the size claimed (*off_out: where), or 0. */
static uint64_t claim_space(uint64_t need, uint64_t size, uint64_t margin, uint64_t *off_out) {
    uint64_t off = atomic_load_explicit(&g_next, memory_order_relaxed);
    uint64_t sz;
    do {
        if (off >= g_limit || g_limit - off < need + margin) return 0;
        sz = size <= g_limit - off ? size : (g_limit - off) / g_page * g_page;
    } while (!atomic_compare_exchange_weak_explicit(&g_next, &off, off + sz, memory_order_relaxed,
                                                    memory_order_relaxed));
    *off_out = off;
    return sz;
}

static void punch(uint64_t off, uint64_t len) { /* give a claimed, unused range's blocks back */
    int fd = file_fd();
    if (fd >= 0) (void)fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len);
}

static void *pool_main(void *arg) {
    (void)arg;
    pthread_setname_np(pthread_self(), "nvtx-recorder"); /* what top -H and /proc/<pid>/task show */
    const uint64_t sz = g_chunk_max;
    int failed = 0;
    pthread_mutex_lock(&g_pool_lock);
    while (pool_state() == POOL_RUNNING) {
        if (g_nretired) {
            void *old = g_retired[--g_nretired];
            pthread_mutex_unlock(&g_pool_lock);
            munmap(old, sz);
            pthread_mutex_lock(&g_pool_lock);
            continue;
        }
        if (g_pool_n >= POOL_SLOTS) {
            pthread_cond_wait(&g_pool_cond, &g_pool_lock);
            continue;
        }
        pthread_mutex_unlock(&g_pool_lock);
        uint64_t off = 0;
        void *p = NULL;
        int fd = -1;
        if (atomic_load_explicit(&g_mode, memory_order_acquire) == MODE_OPEN &&
            !atomic_load_explicit(&g_full, memory_order_relaxed) &&
            claim_space(sz, sz, (uint64_t)POOL_MARGIN * sz, &off) == sz && (fd = file_fd()) >= 0 &&
            posix_fallocate(fd, (off_t)off, (off_t)sz) == 0) {
            p = map_file(fd, off, sz);
        }
        /* claimed space that fails here stays unused (zeros): the inline path meets the same
         * failure at its next claim and counts it */
        pthread_mutex_lock(&g_pool_lock);
        if (!p) {
            failed = 1;
            break;
        }
        g_pool_busy = (struct ready_chunk){p, off, sz};
        pthread_mutex_unlock(&g_pool_lock);
        if (madvise(p, sz, MADV_POPULATE_WRITE) != 0) {
            for (uint64_t i = 0; i < sz; i += g_page) ((volatile unsigned char *)p)[i] = 0;
        }
        pthread_mutex_lock(&g_pool_lock);
        g_pool_busy.p = NULL;
        if (pool_state() == POOL_OFF) { /* pool_stop: exiting */
            munmap(p, sz);
            punch(off, sz);
            break;
        }
        g_pool[g_pool_n++] = (struct ready_chunk){p, off, sz}; /* kept when paused for a fork */
        atomic_store_explicit(&g_pool_ready, g_pool_n, memory_order_release);
    }
    while (g_nretired) munmap(g_retired[--g_nretired], sz);
    if (pool_state() == POOL_PAUSED) { /* atfork_prepare joins this thread */
        pthread_mutex_unlock(&g_pool_lock);
        return NULL;
    }
    if (failed) set_pool_state(POOL_OFF);
    pthread_detach(pthread_self()); /* stopped for good: nobody joins it */
    pthread_mutex_unlock(&g_pool_lock);
    return NULL;
}

/* At exit: stop the pool thread from preparing more and give the disk blocks of the ready chunks
 * nobody took back (they stay in the file as zeros, a hole: "claimed, never written"). A thread
 * still recording after this claims inline. */
static void pool_stop(void) {
    if (pool_state() == POOL_IDLE) return;
    pthread_mutex_lock(&g_pool_lock);
    set_pool_state(POOL_OFF);
    while (g_pool_n) {
        struct ready_chunk c = g_pool[--g_pool_n];
        munmap(c.p, c.len);
        punch(c.off, c.len);
    }
    atomic_store_explicit(&g_pool_ready, 0, memory_order_relaxed);
    pthread_cond_signal(&g_pool_cond);
    pthread_mutex_unlock(&g_pool_lock);
}

static void pool_start(void) {
    if (g_chunk_max < POOL_MIN_CHUNK || g_chunk_max > POOL_MAX_CHUNK) return;
    pthread_mutex_lock(&g_pool_lock);
    if (pool_state() == POOL_IDLE) {
        pthread_attr_t attr;
        sigset_t all, old;
        int ok = pthread_attr_init(&attr) == 0;
        if (ok) {
            pthread_attr_setstacksize(&attr, 256 << 10);
            sigfillset(&all);
            pthread_sigmask(SIG_SETMASK, &all, &old); /* the new thread inherits: every signal blocked */
            ok = pthread_create(&g_pool_thread, &attr, pool_main, NULL) == 0; /* it waits for the lock */
            pthread_sigmask(SIG_SETMASK, &old, NULL);
            /* named from here too: the thread may not run for a while (a loaded machine), and
             * /proc/<pid>/task should say what it is from the start (pool_main names itself
             * where /proc is missing) */
            if (ok) pthread_setname_np(g_pool_thread, "nvtx-recorder");
            pthread_attr_destroy(&attr);
        }
        set_pool_state(ok ? POOL_RUNNING : POOL_OFF);
    }
    pthread_mutex_unlock(&g_pool_lock);
}

/* Hand t's full chunk (if chunk_max-sized) to the pool thread to unmap, and take a ready chunk for
 * t: 1, or 0 when none is ready (the caller claims inline). Either way t has no chunk after. */
static int swap_ready(struct tstate *t) {
    int state = pool_state();
    if (state == POOL_IDLE) pool_start(); /* this switch still claims inline */
    if (state != POOL_RUNNING && !atomic_load_explicit(&g_pool_ready, memory_order_acquire)) {
        release_chunk(t);
        return 0;
    }
    struct ready_chunk c = {NULL, 0, 0};
    pthread_mutex_lock(&g_pool_lock);
    if (t->chunk && t->len == g_chunk_max && g_nretired < RETIRE_SLOTS && pool_state() == POOL_RUNNING) {
        g_retired[g_nretired++] = t->chunk;
        t->chunk = NULL;
    }
    if (g_pool_n) {
        c = g_pool[--g_pool_n];
        atomic_store_explicit(&g_pool_ready, g_pool_n, memory_order_relaxed);
    }
    pthread_cond_signal(&g_pool_cond);
    pthread_mutex_unlock(&g_pool_lock);
    release_chunk(t);
    if (!c.p) return 0;
    install_chunk(t, c.p, c.off, c.len);
    return 1;
}

/* Claim a chunk with room for at least `words` words after its header and clock pair. */
static int claim_chunk(struct tstate *t, uint32_t words) {
    uint64_t need = (uint64_t)(CHUNK_HDR_WORDS + CLOCK_WORDS + words) * 8;
    need = (need + g_page - 1) / g_page * g_page;
    uint64_t size = t->next_len ? t->next_len : g_page;
    if (size < need) size = need;
    int bridge = 0;
    if (size == g_chunk_max && g_chunk_max >= POOL_MIN_CHUNK && g_chunk_max <= POOL_MAX_CHUNK) {
        if (swap_ready(t)) return 1;
        /* none ready (the pool thread is behind or preempted): a few pages inline to bridge the
         * gap, not a whole chunk_max of page faults on this thread */
        if (pool_state() == POOL_RUNNING) {
            bridge = 1;
            size = need > POOL_BRIDGE ? need : POOL_BRIDGE;
        }
    }
    release_chunk(t);
    if (atomic_load_explicit(&g_full, memory_order_relaxed)) return 0;
    uint64_t off, sz = claim_space(need, size, 0, &off);
    if (!sz) {
        atomic_store_explicit(&g_full, 1, memory_order_relaxed);
        return 0;
    }
    int fd = file_fd();
    if (fd < 0) return 0; /* lost (warned): dropped and counted, as past the bound */
    int err = posix_fallocate(fd, (off_t)off, (off_t)sz);
    if (err != 0) {
        count_write_error(err);
        return 0;
    }
    void *p = map_chunk(fd, off, sz);
    if (!p) {
        count_write_error(errno);
        return 0;
    }
    if (!bridge) {
        uint64_t next = size * 2;
        t->next_len = (uint32_t)(next > g_chunk_max ? (g_chunk_max > sz ? g_chunk_max : sz) : next);
    }
    install_chunk(t, p, off, sz);
    return 1;
}

/* Room for n words in this thread's chunk (claiming a new one if needed), or NULL. */
static inline uint64_t *reserve(struct tstate *t, uint32_t n) {
    if (LIKELY(t->pos != NULL) && LIKELY(t->end - t->pos >= (ptrdiff_t)n)) return t->pos;
    return claim_chunk(t, n) ? t->pos : NULL;
}

/* A data record: head, then data = time, arg, aux, bytes, 7 per continuation word.
 * Caller holds t->busy. Returns 0 when it could not be recorded (the caller counts what it costs:
 * an event's own string or clock records are not events). */
static int data_record(struct tstate *t, uint8_t tag, uint8_t flags, uint32_t domain, uint64_t time,
                       uint64_t arg, uint8_t aux, const void *bytes, uint32_t n) {
    if (n > g_text_cap) {
        n = g_text_cap;
        flags |= NVTXREC_DFLAG_TRUNCATED;
    }
    uint32_t len = NVTXREC_DATA_FIXED + n;
    uint32_t words = 1 + (len + 6) / 7;
    uint64_t *p = reserve(t, words);
    if (!p) return 0;
    unsigned char fixed[NVTXREC_DATA_FIXED];
    memcpy(fixed, &time, 8);
    memcpy(fixed + 8, &arg, 8);
    fixed[16] = aux;
    const unsigned char *b = bytes;
    for (uint32_t k = 0; k < words - 1; ++k) {
        unsigned char w[8] = {NVTXREC_W_CONT, 0, 0, 0, 0, 0, 0, 0};
        for (uint32_t j = 0; j < 7; ++j) {
            uint32_t i = k * 7 + j;
            if (i >= len) break;
            w[1 + j] = i < NVTXREC_DATA_FIXED ? fixed[i] : b[i - NVTXREC_DATA_FIXED];
        }
        memcpy(p + 1 + k, w, 8);
    }
    uint64_t head = tag | ((uint64_t)flags << 8) | ((uint64_t)(domain & 0xFFFF) << 16) | ((uint64_t)len << 32);
    __atomic_store_n(p, head, __ATOMIC_RELEASE);
    t->pos = p + words;
    return 1;
}

static void write_clock(struct tstate *t) {
    if (!g_use_tsc) return;
    uint64_t tsc, mono;
    clock_pair(&tsc, &mono);
    uint64_t rel = (tsc - g_base) & TIME_MASK;
    if (data_record(t, NVTXREC_D_CLOCK, 0, 0, rel, mono, 0, NULL, 0)) t->last_cal = rel;
}

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

/* ---------------------------------------------------------------- registries (under g_lock) */

static uint32_t intern_domain(char *owned_name) {
    if (!owned_name) return 0;
    pthread_mutex_lock(&g_lock);
    uint32_t id = 0;
    for (uint32_t i = 0; i < g_ndomains; ++i) {
        if (strcmp(g_domains[i], owned_name) == 0) {
            id = i + 1;
            break;
        }
    }
    if (!id && g_ndomains < MAX_DOMAINS) {
        if (g_ndomains == g_domcap) {
            uint32_t cap = g_domcap ? g_domcap * 2 : 16;
            char **d = realloc(g_domains, cap * sizeof *d);
            if (d) {
                g_domains = d;
                g_domcap = cap;
            }
        }
        if (g_ndomains < g_domcap) {
            g_domains[g_ndomains++] = owned_name;
            owned_name = NULL;
            id = g_ndomains;
        }
    }
    pthread_mutex_unlock(&g_lock);
    free(owned_name);
    return id ? id : MAX_DOMAINS + 1; /* table full: a shared, unnamed domain */
}

static uint64_t hash_text(uint32_t domain, const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull ^ domain;
    for (size_t i = 0; i < n; ++i) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

/* The entry of (domain, text), created if new (*created = 1); the overflow entry when the table is
 * full (MAX_STRINGS entries or MAX_STRING_BYTES of text). */
static struct string_entry *intern_string(uint32_t domain, const char *s, size_t n, int *created) {
    *created = 0;
    if (!s) s = "", n = 0;
    if (n > 0xFFFFFFFEu) n = 0xFFFFFFFEu;
    uint64_t h = hash_text(domain, s, n);
    struct string_entry *found = NULL;
    pthread_mutex_lock(&g_lock);
    if (g_nbuckets) {
        for (struct string_entry *e = g_buckets[h & (g_nbuckets - 1)]; e; e = e->next) {
            if (e->hash == h && e->domain == domain && e->len == n && memcmp(e->text, s, n) == 0) {
                found = e;
                break;
            }
        }
    }
    if (!found && g_nstrings < MAX_STRINGS && g_string_bytes + n <= MAX_STRING_BYTES) {
        if (g_nstrings >= g_nbuckets) { /* grow to keep chains short */
            uint32_t nb = g_nbuckets ? g_nbuckets * 4 : 1024;
            struct string_entry **b = calloc(nb, sizeof *b);
            if (b) {
                for (uint32_t i = 0; i < g_nbuckets; ++i) {
                    for (struct string_entry *e = g_buckets[i], *next; e; e = next) {
                        next = e->next;
                        e->next = b[e->hash & (nb - 1)];
                        b[e->hash & (nb - 1)] = e;
                    }
                }
                free(g_buckets);
                g_buckets = b;
                g_nbuckets = nb;
            }
        }
        struct string_entry *e = g_nbuckets ? malloc(sizeof *e + n + 1) : NULL;
        if (e) {
            e->hash = h;
            e->domain = domain;
            e->id = ++g_nstrings;
            e->len = (uint32_t)n;
            memcpy(e->text, s, n);
            e->text[n] = 0;
            e->next = g_buckets[h & (g_nbuckets - 1)];
            g_buckets[h & (g_nbuckets - 1)] = e;
            g_string_bytes += n;
            found = e;
            *created = 1;
        }
    }
    pthread_mutex_unlock(&g_lock);
    return found ? found : &g_string_overflow;
}

static void remember_category(uint32_t domain, uint32_t id, const char *name) {
    char *copy = strdup(name ? name : "");
    if (!copy) return;
    pthread_mutex_lock(&g_lock);
    for (uint32_t i = 0; i < g_ncategories; ++i) {
        if (g_categories[i].domain == domain && g_categories[i].id == id) {
            char *old = g_categories[i].name;
            g_categories[i].name = copy;
            copy = old;
            goto done;
        }
    }
    if (g_ncategories == g_catcap && g_catcap < MAX_CATEGORIES) {
        uint32_t cap = g_catcap ? g_catcap * 2 : 16;
        struct category_entry *c = realloc(g_categories, cap * sizeof *c);
        if (c) {
            g_categories = c;
            g_catcap = cap;
        }
    }
    if (g_ncategories < g_catcap) {
        g_categories[g_ncategories++] = (struct category_entry){domain, id, copy};
        copy = NULL;
    }
done:
    pthread_mutex_unlock(&g_lock);
    free(copy);
}

/* A payload schema, counter group or scope registration (a blob of that kind), kept for forked
 * children: the program registers once and goes on using the id in processes it forks, whose files
 * must carry the registration like the domains and strings they inherit (open_file_locked).
 * Keyed by (kind, domain, id): a registration of the same id replaces the earlier one, in its
 * place in registration order. Bounded by MAX_DEFS entries and MAX_DEF_BYTES of data; past that a
 * registration is recorded but not kept, and a warning says that forked children will miss it. */
static void remember_def(uint8_t kind, uint32_t domain, uint64_t arg, const void *data, uint32_t len,
                         uint8_t flags) {
    if (kind != NVTXREC_BLOB_SCHEMA && kind != NVTXREC_BLOB_COUNTER_GROUP && kind != NVTXREC_BLOB_SCOPE) return;
    struct def_blob *d = malloc(sizeof *d + (len ? len : 1));
    if (!d) return;
    d->arg = arg;
    d->domain = domain;
    d->len = len;
    d->kind = kind;
    d->flags = flags;
    if (len) memcpy(d->data, data, len);
    uint64_t h = (arg * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)domain << 8) ^ kind;
    h ^= h >> 29;
    int warn = 0;
    pthread_mutex_lock(&g_lock);
    if (!g_def_buckets) g_def_buckets = calloc(DEF_BUCKETS, sizeof *g_def_buckets);
    struct def_blob **pp = g_def_buckets ? &g_def_buckets[h & (DEF_BUCKETS - 1)] : NULL;
    while (pp && *pp && !((*pp)->kind == kind && (*pp)->domain == domain && (*pp)->arg == arg))
        pp = &(*pp)->chain;
    struct def_blob *old = pp ? *pp : NULL;
    if (!pp || (!old && g_ndefs >= MAX_DEFS) ||
        g_def_bytes - (old ? old->len : 0) + len > MAX_DEF_BYTES) {
        warn = !g_defs_warned;
        g_defs_warned = 1;
    } else {
        d->chain = old ? old->chain : NULL;
        *pp = d;
        d->prev = old ? old->prev : g_defs_last;
        d->next = old ? old->next : NULL;
        if (d->prev) d->prev->next = d;
        else g_defs_first = d;
        if (d->next) d->next->prev = d;
        else g_defs_last = d;
        g_def_bytes += len;
        if (old) g_def_bytes -= old->len;
        else ++g_ndefs;
        free(old);
        d = NULL;
    }
    pthread_mutex_unlock(&g_lock);
    free(d);
    if (warn)
        fprintf(stderr, "nvtx-cffi recorder: more than %u payload schema / counter registrations (or %u MiB of "
                        "them) in this process; processes it forks from now on will not have the later ones\n",
                MAX_DEFS, MAX_DEF_BYTES >> 20);
}

/* ---------------------------------------------------------------- messages -> string ids */

static uint32_t text_id(struct tstate *t, const char *s, size_t n, uint8_t api, uint64_t ts,
                        struct cache_slot *slot) {
    int created;
    struct string_entry *e = intern_string(MSG_DOMAIN, s, n, &created);
    uint8_t flags = NVTXREC_DFLAG_MESSAGE | (uint8_t)(api << NVTXREC_DFLAG_API_SHIFT);
    if (e == &g_string_overflow) { /* table full: a string record per use, with a fresh id */
        uint32_t id = atomic_fetch_add_explicit(&g_transient_ids, 1, memory_order_relaxed) + 1;
        if (id >= NVTXREC_STRING_OVERFLOW || id <= MAX_STRINGS) return NVTXREC_STRING_OVERFLOW;
        data_record(t, NVTXREC_D_STRING, flags, 0, ts, id, 0, s, (uint32_t)(n > MAX_TEXT ? MAX_TEXT + 1 : n));
        return id;
    }
    if (created) data_record(t, NVTXREC_D_STRING, flags, 0, ts, e->id, 0, e->text, e->len > MAX_TEXT ? MAX_TEXT + 1 : e->len);
    if (slot) {
        slot->ptr = s;
        slot->e = e;
    }
    return e->id;
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

static uint32_t wide_id(struct tstate *t, const wchar_t *w, uint8_t api, uint64_t ts) {
    size_t n;
    char *s = wide_dup_cap(w, (size_t)MAX_TEXT * 4, &n);
    if (!s) return 0;
    uint32_t id = text_id(t, s, n, api, ts, NULL);
    free(s);
    return id;
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
    if (g_use_tsc && UNLIKELY((int64_t)(ts - t->last_cal) > (int64_t)CAL_TICKS)) write_clock(t);
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

/* ---------------------------------------------------------------- file */

static void open_file_locked(void);

static int ensure_open(void) {
    int m = atomic_load_explicit(&g_mode, memory_order_acquire);
    if (m == MODE_OPEN) return 1;
    if (m != MODE_PENDING) return 0;
    if (!get_tstate()) return 0; /* open_file_locked records with this thread's state */
    pthread_mutex_lock(&g_lock);
    if (atomic_load_explicit(&g_mode, memory_order_relaxed) == MODE_PENDING) open_file_locked();
    m = atomic_load_explicit(&g_mode, memory_order_relaxed);
    pthread_mutex_unlock(&g_lock);
    return m == MODE_OPEN;
}

/* /proc/self/stat starttime: the same for every exec() image of this process. */
static uint64_t proc_start_time(void) {
    char buf[1024];
    int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    if (!p) return 0;
    /* fields after the name: 3 state ... 22 starttime */
    int field = 2;
    for (; *p && field < 22; ++p)
        if (*p == ' ') ++field;
    return strtoull(p, NULL, 10);
}

/* Exec generation: 1 + the highest of earlier images of this process in the directory. */
static uint32_t exec_generation(int pid, uint64_t start) {
    if (!start) return 0;
    DIR *d = opendir(g_dir);
    if (!d) return 0;
    char prefix[32];
    int plen = snprintf(prefix, sizeof prefix, "nvtx-%d-", pid);
    uint32_t gen = 0;
    struct dirent *ent;
    while ((ent = readdir(d)) != NULL) {
        if (strncmp(ent->d_name, prefix, (size_t)plen) != 0) continue;
        int fd = openat(dirfd(d), ent->d_name, O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        struct nvtxrec_file_header h;
        if (pread(fd, &h, sizeof h, 0) == (ssize_t)sizeof h && memcmp(h.magic, NVTXREC_MAGIC, 8) == 0 &&
            h.pid == (uint32_t)pid && h.proc_start == start && h.exec_gen + 1 > gen)
            gen = h.exec_gen + 1;
        close(fd);
    }
    closedir(d);
    return gen;
}

static void fail_open(int fd, const char *what, int err) {
    warn_once(what, err);
    if (fd >= 0) {
        close(fd);
        unlink(g_path);
    }
    g_path[0] = 0;
    atomic_store_explicit(&g_mode, MODE_FAILED, memory_order_release);
}

/* Called with g_lock held, mode PENDING, and the calling thread's tstate existing. */
static void open_file_locked(void) {
    int pid = (int)getpid();
    int fd = -1;
    (void)mkdir(g_dir, 0777);
    uint64_t pstart = proc_start_time();
    g_exec_gen = exec_generation(pid, pstart);
    uint64_t stamp = now_ns();
    for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
        snprintf(g_path, sizeof g_path, "%s/nvtx-%d-e%u-%llx.nvtxrec", g_dir, pid, g_exec_gen,
                 (unsigned long long)(stamp + (uint64_t)attempt));
        fd = open(g_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        fail_open(-1, "cannot create", errno);
        return;
    }
    /* "this process still records": a shared lock for as long as the file is open */
    for (int i = 0; i < 1000 && flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK; ++i) {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    int err = posix_fallocate(fd, 0, NVTXREC_HEADER_SIZE);
    if (err != 0) {
        fail_open(fd, "cannot reserve space for", err);
        return;
    }
    long page = sysconf(_SC_PAGESIZE);
    g_page = page > 0 ? (uint32_t)page : 4096;
    uint64_t max = g_max_bytes < NVTXREC_HEADER_SIZE + g_page ? NVTXREC_HEADER_SIZE + g_page : g_max_bytes;
    g_limit = max / g_page * g_page;
    if (g_limit < NVTXREC_HEADER_SIZE + g_page) g_limit = NVTXREC_HEADER_SIZE + g_page;
    uint64_t cmax = ((uint64_t)g_chunk_max + g_page - 1) / g_page * g_page;
    if (cmax < g_page) cmax = g_page;
    if (cmax > (1u << 30)) cmax = 1u << 30;
    g_chunk_max = (uint32_t)cmax;
    uint64_t room = (cmax - (CHUNK_HDR_WORDS + CLOCK_WORDS + 1) * 8) / 8 * 7;
    g_text_cap = room > MAX_TEXT + NVTXREC_DATA_FIXED ? MAX_TEXT : (uint32_t)(room - NVTXREC_DATA_FIXED);

    if (g_use_tsc && g_ns_per_tick == 0) { /* once per image: ~200 us */
        uint64_t t1, m1, t2, m2;
        clock_pair(&t1, &m1);
        do clock_pair(&t2, &m2);
        while (m2 - m1 < 200000);
        g_ns_per_tick = t2 > t1 ? (double)(m2 - m1) / (double)(t2 - t1) : 0;
        if (g_ns_per_tick <= 0) g_use_tsc = 0;
    }
    uint64_t tsc0 = 0, start = 0;
    if (g_use_tsc) clock_pair(&tsc0, &start);
    else start = now_ns();

    static union {
        struct nvtxrec_file_header h;
        unsigned char page[NVTXREC_HEADER_SIZE];
    } buf;
    memset(&buf, 0, sizeof buf);
    struct nvtxrec_file_header *hdr = &buf.h;
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    memcpy(hdr->magic, NVTXREC_MAGIC, 8);
    hdr->version = NVTXREC_VERSION;
    hdr->header_size = NVTXREC_HEADER_SIZE;
    hdr->page_size = g_page;
    hdr->pid = (uint32_t)pid;
    hdr->ppid = (uint32_t)getppid();
    hdr->exec_gen = g_exec_gen;
    hdr->start_ns = start;
    hdr->start_realtime_ns = (uint64_t)rt.tv_sec * 1000000000ull + (uint64_t)rt.tv_nsec;
    hdr->max_bytes = max;
    hdr->proc_start = pstart;
    hdr->clock = g_use_tsc ? NVTXREC_CLOCK_TSC : NVTXREC_CLOCK_MONOTONIC;
    hdr->chunk_max = g_chunk_max;
    hdr->tsc0 = tsc0;
    hdr->ns_per_tick = g_use_tsc ? g_ns_per_tick : 0;
    hdr->dropped = atomic_load(&g_dropped);
    hdr->write_errors = atomic_load(&g_write_errors);
    hdr->run_id = g_run_id;
    if (pwrite(fd, &buf, sizeof buf, 0) != (ssize_t)sizeof buf) {
        fail_open(fd, "cannot write", errno ? errno : EIO);
        return;
    }
    struct stat st; /* the file's identity: file_fd() checks the descriptor against it */
    if (fstat(fd, &st) != 0) {
        fail_open(fd, "cannot stat", errno);
        return;
    }
    window_open(g_limit); /* the header at its start, then the chunks (see map_file) */
    void *h = map_file(fd, 0, NVTXREC_HEADER_SIZE);
    if (!h) {
        int err = errno;
        window_drop(0);
        fail_open(fd, "cannot map", err);
        return;
    }

    static int opened_before; /* in this image (a forked child keeps counting its parent's ids) */
    if (!opened_before && g_exec_gen) /* range ids of an exec()ed image must not repeat the earlier ones' */
        atomic_store(&g_range_ids, ((uint64_t)g_exec_gen << 40) + 1);
    opened_before = 1;
    pthread_mutex_lock(&g_fd_lock);
    g_dev = st.st_dev;
    g_ino = st.st_ino;
    g_fd = fd;
    pthread_mutex_unlock(&g_fd_lock);
    g_base = g_use_tsc ? tsc0 : start;
    atomic_store(&g_next, NVTXREC_HEADER_SIZE);
    atomic_store(&g_full, 0);
    g_hdr = h;
    atomic_store_explicit(&g_mode, MODE_OPEN, memory_order_release);

    /* a forked child: re-record the definitions it inherited, so its file stands alone */
    struct tstate *t = t_state;
    if (!t || t->busy) return;
    t->busy = 1;
    for (uint32_t i = 0; i < g_ndomains; ++i)
        data_record(t, NVTXREC_D_DOMAIN, NVTXREC_DFLAG_INHERITED, i + 1, 0, i + 1, 0, g_domains[i],
                    (uint32_t)strlen(g_domains[i]));
    for (uint32_t i = 0; i < g_ncategories; ++i)
        data_record(t, NVTXREC_D_CATEGORY, NVTXREC_DFLAG_INHERITED, g_categories[i].domain, 0,
                    g_categories[i].id, 0, g_categories[i].name, (uint32_t)strlen(g_categories[i].name));
    for (uint32_t b = 0; b < g_nbuckets; ++b) {
        for (struct string_entry *e = g_buckets[b]; e; e = e->next) {
            int msg = e->domain == MSG_DOMAIN;
            data_record(t, NVTXREC_D_STRING,
                        (uint8_t)(NVTXREC_DFLAG_INHERITED | (msg ? NVTXREC_DFLAG_MESSAGE : 0)),
                        msg ? 0 : e->domain, 0, e->id, 0, e->text, e->len > MAX_TEXT ? MAX_TEXT + 1 : e->len);
        }
    }
    for (struct def_blob *d = g_defs_first; d; d = d->next) /* schemas, counters, scopes */
        if (!data_record(t, NVTXREC_D_BLOB, (uint8_t)(NVTXREC_DFLAG_INHERITED | d->flags), d->domain, 0, d->arg,
                         d->kind, d->data, d->len))
            count_drop();
    t->busy = 0;
}

/* ---------------------------------------------------------------- fork */

static void atfork_prepare(void) {
    /* fork with no pool thread: pause it and wait for it to finish the chunk it is preparing */
    pthread_mutex_lock(&g_pool_lock);
    if (pool_state() == POOL_RUNNING) {
        set_pool_state(POOL_PAUSED);
        pthread_cond_signal(&g_pool_cond);
        pthread_mutex_unlock(&g_pool_lock);
        pthread_join(g_pool_thread, NULL);
    } else {
        pthread_mutex_unlock(&g_pool_lock);
    }
    pthread_mutex_lock(&g_lock);
    pthread_mutex_lock(&g_pool_lock);
}

static void atfork_parent(void) {
    if (pool_state() == POOL_PAUSED) set_pool_state(POOL_IDLE); /* restarts at the next claim */
    pthread_mutex_unlock(&g_pool_lock);
    pthread_mutex_unlock(&g_lock);
}

static void atfork_child(void) {
    /* Only the forking thread lives on. Drop every mapping of the parent's file (the parent's
     * events are all in that file already), forget dead threads, start counting afresh. */
    struct tstate *self = t_state;
    struct tstate *t = g_threads;
    while (t) {
        struct tstate *next = t->next;
        release_chunk(t);
        if (t != self) free(t);
        t = next;
    }
    g_threads = NULL;
    if (self) {
        self->prev = self->next = NULL;
        self->tid = os_tid();
        self->busy = 0;
        self->next_len = 0;
        self->last_cal = 0;
        g_threads = self;
    }
    /* the parent's ready chunks (and the one its pool thread was preparing) are its file's: drop
     * them; this child has no pool thread and starts its own at its first chunk_max claim */
    for (unsigned i = 0; i < g_pool_n; ++i) munmap(g_pool[i].p, g_pool[i].len);
    if (g_pool_busy.p) munmap(g_pool_busy.p, g_pool_busy.len);
    for (unsigned i = 0; i < g_nretired; ++i) munmap(g_retired[i], g_chunk_max);
    g_nretired = 0;
    g_pool_busy.p = NULL;
    g_pool_n = 0;
    atomic_store(&g_pool_ready, 0);
    set_pool_state(POOL_IDLE);
    pthread_mutex_unlock(&g_pool_lock);
    pthread_mutex_init(&g_pool_lock, NULL);
    pthread_cond_init(&g_pool_cond, NULL); /* the parent's pool thread may have been waiting on it */
    if (g_hdr) munmap(g_hdr, NVTXREC_HEADER_SIZE);
    g_hdr = NULL;
    window_drop(atomic_load(&g_next)); /* this child opens a file (and a window) of its own */
    pthread_mutex_init(&g_fd_lock, NULL); /* another thread may have held it at the fork */
    /* the parent's lock stays: it still has the file open. Closed only if it is still the record
     * file: the program may have its own file under that number now */
    if (same_file(g_fd)) close(g_fd);
    g_fd = -1;
    g_path[0] = 0;
    atomic_store(&g_warned, 0);
    atomic_store(&g_dropped, 0);
    atomic_store(&g_write_errors, 0);
    atomic_store(&g_full, 0);
    if (atomic_load(&g_mode) != MODE_OFF) atomic_store(&g_mode, MODE_PENDING);
    pthread_mutex_unlock(&g_lock);
}

/* ---------------------------------------------------------------- init */

static void at_exit(void) {
    struct tstate *t = t_state;
    if (t && !t->busy && t->pos && atomic_load(&g_mode) == MODE_OPEN) {
        t->busy = 1;
        write_clock(t);
        t->busy = 0;
    }
    pool_stop();
}

static void global_init(void) {
    pthread_key_create(&g_key, thread_exit);
    g_max_bytes = size_from_env("NVTX_CFFI_RECORD_MAX_BYTES", DEFAULT_MAX_BYTES);
    uint64_t chunk = size_from_env("NVTX_CFFI_RECORD_CHUNK_BYTES", DEFAULT_CHUNK_BYTES);
    g_chunk_max = chunk > (1u << 30) ? (1u << 30) : (uint32_t)chunk;
    g_use_tsc = tsc_usable();
    const char *run = getenv("NVTX_CFFI_RECORD_RUN"); /* 1 to 16 hex digits; anything else: no run id */
    if (run && *run && strlen(run) <= 16 && strspn(run, "0123456789abcdefABCDEF") == strlen(run))
        g_run_id = strtoull(run, NULL, 16);
    const char *dir = getenv("NVTX_CFFI_RECORD_DIR");
    if (dir && *dir && strlen(dir) < sizeof g_dir) {
        strcpy(g_dir, dir);
        atomic_store(&g_mode, MODE_PENDING);
    }
    atomic_store(&g_range_ids, 1);
    atomic_store(&g_resource_ids, 1);
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
    atexit(at_exit);
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
    const char *text = e == &g_string_overflow ? g_overflow_text : e->text;
    size_t n = strlen(text);
    def_text(NVTXREC_D_STRING, api, 0, domain_id(d), e->id, 0, text, NULL);
    (void)n;
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
    pthread_once(&g_once, global_init);
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
    pthread_once(&g_once, global_init);
    return ensure_open();
}

/* ---------------------------------------------------------------- in-process API */

EXPORT int nvtx_recorder_flush(void) {
    pthread_once(&g_once, global_init);
    if (!ensure_open()) return -1;
    struct tstate *t = begin();
    if (t) {
        if (t->pos) write_clock(t); /* a clock pair after everything this thread recorded */
        end(t);
    }
    atomic_thread_fence(memory_order_seq_cst); /* MAP_SHARED: the page cache already has it all */
    return 0;
}

EXPORT uint64_t nvtx_recorder_dropped(void) { return atomic_load(&g_dropped); }

EXPORT const char *nvtx_recorder_file(void) {
    pthread_once(&g_once, global_init);
    return ensure_open() ? g_path : NULL;
}
