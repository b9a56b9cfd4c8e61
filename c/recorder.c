/* recorder.c - nvtx-cffi's NVTX v3 injection library that records every NVTX event to a file.
 *
 * See recorder.h for the environment variables and the file format.
 *
 * Design:
 *  - All state is process-global: InitializeInjectionNvtx2 runs once per NVTX client copy (each
 *    library that includes the NVTX headers has its own dispatch table) and every call installs
 *    the same handlers. Domains are interned by name and string handles by (domain, text), so
 *    all clients share handles.
 *  - Record path: per-thread chunk of the output file, mapped MAP_SHARED. A thread appends records
 *    to its chunk with no lock and no syscall; a full chunk is unmapped and a new one is claimed
 *    with an atomic bump of the file offset, posix_fallocate (disk space is reserved up front, so
 *    a full disk is an error we count, never a SIGBUS) and mmap. Resident memory: one chunk per
 *    live thread. Records are in the page cache as soon as they are written, so they survive
 *    os._exit(), crashes and SIGKILL with no flush.
 *  - Each record's size word is stored last (release); readers stop at a zero/torn size.
 *  - Events that cannot be recorded (file bound, allocation failures, an NVTX call re-entered from
 *    a signal handler while the thread is recording) are counted, in memory and in the file.
 *  - fork: the prepare handler takes the registry lock so the child never inherits it held; the
 *    child handler drops the parent's mappings (nothing of the parent is unwritten: it all lives
 *    in the parent's file already), and the child opens its own file at its first event,
 *    re-recording the inherited domain and category definitions (flagged, not events).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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

_Static_assert(sizeof(struct nvtxrec_record) == 56, "record layout");
_Static_assert(sizeof(struct nvtxrec_file_header) <= NVTXREC_HEADER_SIZE, "header layout");

#define DEFAULT_MAX_BYTES (4ull << 30)
#define DEFAULT_CHUNK_BYTES (256u << 10)
#define MAX_TEXT 65536u
#define MAX_DOMAINS 65535u
#define MAX_STRINGS (1u << 20)
#define MAX_CATEGORIES 65536u
#define DEPTH_SLOTS 256

enum { MODE_OFF = 0, MODE_PENDING = 1, MODE_OPEN = 2, MODE_FAILED = 3 };

/* ---------------------------------------------------------------- global state */

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER; /* registries, thread list, file open */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static pthread_key_t g_key;

static _Atomic int g_mode = MODE_OFF;
static char g_dir[PATH_MAX];
static char g_path[PATH_MAX + 64];
static int g_fd = -1;
static struct nvtxrec_file_header *g_hdr;
static uint64_t g_max_bytes = DEFAULT_MAX_BYTES;
static uint32_t g_chunk_req = DEFAULT_CHUNK_BYTES;
static uint32_t g_chunk;       /* chunk size of the open file */
static uint32_t g_text_cap;    /* longest text a record may carry */
static uint64_t g_limit;       /* end of the last chunk that may be claimed */
static _Atomic uint64_t g_next;
static _Atomic int g_full;
static _Atomic uint64_t g_dropped;
static _Atomic uint64_t g_write_errors;
static _Atomic uint64_t g_range_ids;
static _Atomic uint64_t g_resource_ids;
static int g_warned;

struct tstate {
    unsigned char *chunk;
    uint32_t used, len;
    uint32_t tid;
    volatile int busy;
    struct tstate *prev, *next;
    int32_t depth[DEPTH_SLOTS];
};
static __thread struct tstate *t_state;
static struct tstate *g_threads;

/* registered strings: the handle is the entry's address; entries never move or go away */
struct string_entry {
    struct string_entry *next;
    uint64_t hash;
    uint32_t domain, id, len;
    char text[];
};
static struct string_entry **g_buckets;
static uint32_t g_nbuckets, g_nstrings;
static struct string_entry g_string_overflow = {NULL, 0, 0, 0, 0, {0}};
static const char g_overflow_text[] = "<nvtx-cffi recorder: string table full>";

static char **g_domains; /* g_domains[id - 1] = name */
static uint32_t g_ndomains, g_domcap;

struct category_entry {
    uint32_t domain, id;
    char *name;
};
static struct category_entry *g_categories;
static uint32_t g_ncategories, g_catcap;

/* ---------------------------------------------------------------- helpers */

static inline uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint32_t os_tid(void) { return (uint32_t)syscall(SYS_gettid); }

static inline uint32_t domain_id(nvtxDomainHandle_t d) { return (uint32_t)(uintptr_t)d; }

static void count_drop(void) {
    atomic_fetch_add_explicit(&g_dropped, 1, memory_order_relaxed);
    struct nvtxrec_file_header *h = g_hdr;
    if (h) __atomic_fetch_add(&h->dropped, 1, __ATOMIC_RELAXED);
}

static void count_write_error(void) {
    atomic_fetch_add_explicit(&g_write_errors, 1, memory_order_relaxed);
    struct nvtxrec_file_header *h = g_hdr;
    if (h) __atomic_fetch_add(&h->write_errors, 1, __ATOMIC_RELAXED);
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

/* malloc'd UTF-8 copy of a wide string (registration paths only) */
static char *wide_dup(const wchar_t *w) {
    size_t n = wide_utf8_len(w);
    char *s = malloc(n + 1);
    if (!s) return NULL;
    size_t k = wide_to_utf8(w, (unsigned char *)s, n);
    s[k] = 0;
    return s;
}

/* ---------------------------------------------------------------- threads */

static void release_chunk(struct tstate *t) {
    if (t->chunk) munmap(t->chunk, t->len);
    t->chunk = NULL;
    t->used = t->len = 0;
}

static void thread_exit(void *p) {
    struct tstate *t = p;
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

/* ---------------------------------------------------------------- file */

static int claim_chunk(struct tstate *t) {
    release_chunk(t);
    if (atomic_load_explicit(&g_full, memory_order_relaxed)) return 0;
    uint64_t off = atomic_fetch_add_explicit(&g_next, g_chunk, memory_order_relaxed);
    if (off + g_chunk > g_limit) {
        atomic_store_explicit(&g_full, 1, memory_order_relaxed);
        return 0;
    }
    if (posix_fallocate(g_fd, (off_t)off, (off_t)g_chunk) != 0) {
        count_write_error();
        return 0;
    }
    void *p = mmap(NULL, g_chunk, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, g_fd, (off_t)off);
    if (p == MAP_FAILED) {
        count_write_error();
        return 0;
    }
    t->chunk = p;
    t->len = g_chunk;
    t->used = 0;
    return 1;
}

struct ev {
    uint8_t kind, api, flags, aux;
    uint32_t category, domain, color;
    int32_t payload_type;
    uint64_t payload, arg;
    const char *text;     /* at most one of text / wtext / bytes */
    const wchar_t *wtext;
    const void *bytes;    /* raw bytes (blobs) */
    uint32_t nbytes;
};

static void emit_in(struct tstate *t, const struct ev *e, uint64_t ts) {
    uint8_t flags = e->flags;
    size_t tlen = 0;
    if (e->text) {
        tlen = strlen(e->text);
        flags |= NVTXREC_FLAG_TEXT;
    } else if (e->wtext) {
        tlen = wide_utf8_len(e->wtext);
        flags |= NVTXREC_FLAG_TEXT;
    } else if (e->bytes) {
        tlen = e->nbytes;
        flags |= NVTXREC_FLAG_TEXT;
    }
    if (tlen > g_text_cap) {
        tlen = g_text_cap;
        flags |= NVTXREC_FLAG_TRUNCATED;
    }
    uint32_t size = (uint32_t)((sizeof(struct nvtxrec_record) + tlen + 7) & ~(size_t)7);
    if (t->used + size > t->len && !claim_chunk(t)) {
        count_drop();
        return;
    }
    unsigned char *p = t->chunk + t->used;
    t->used += size;
    struct nvtxrec_record *r = (struct nvtxrec_record *)p;
    r->kind = e->kind;
    r->api = e->api;
    r->flags = flags;
    r->aux = e->aux;
    r->tid = t->tid;
    r->category = e->category;
    r->time_ns = ts;
    r->domain = e->domain;
    r->color = e->color;
    r->payload_type = e->payload_type;
    r->payload = e->payload;
    r->arg = e->arg;
    unsigned char *text = p + sizeof *r;
    if (e->text) memcpy(text, e->text, tlen);
    else if (e->bytes) memcpy(text, e->bytes, tlen);
    else if (e->wtext) tlen = wide_to_utf8(e->wtext, text, tlen);
    r->text_len = (uint32_t)tlen;
    /* padding is already zero: fresh chunks come zeroed from the file */
    __atomic_store_n(&r->size, size, __ATOMIC_RELEASE);
}

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

static void emit(const struct ev *e) {
    int m = atomic_load_explicit(&g_mode, memory_order_acquire);
    if (m != MODE_OPEN) {
        if (m == MODE_OFF) return;
        if (!ensure_open()) {
            count_drop();
            return;
        }
    }
    uint64_t ts = now_ns();
    struct tstate *t = get_tstate();
    if (!t || t->busy) { /* out of memory, or re-entered from a signal handler */
        count_drop();
        return;
    }
    t->busy = 1;
    emit_in(t, e, ts);
    t->busy = 0;
}

static void warn_once(const char *what, int err) {
    if (g_warned) return;
    g_warned = 1;
    fprintf(stderr, "nvtx-cffi recorder: %s %s: %s; events are dropped and counted\n", what, g_path,
            strerror(err));
}

/* Called with g_lock held, mode PENDING, and the calling thread's tstate existing. */
static void open_file_locked(void) {
    int pid = (int)getpid();
    int fd = -1;
    (void)mkdir(g_dir, 0777);
    uint64_t stamp = now_ns();
    for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
        snprintf(g_path, sizeof g_path, "%s/nvtx-%d-%llx.nvtxrec", g_dir, pid,
                 (unsigned long long)(stamp + (uint64_t)attempt));
        fd = open(g_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        warn_once("cannot create", errno);
        atomic_store_explicit(&g_mode, MODE_FAILED, memory_order_release);
        return;
    }
    void *h = MAP_FAILED;
    if (ftruncate(fd, NVTXREC_HEADER_SIZE) == 0)
        h = mmap(NULL, NVTXREC_HEADER_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (h == MAP_FAILED) {
        warn_once("cannot write", errno);
        close(fd);
        unlink(g_path);
        atomic_store_explicit(&g_mode, MODE_FAILED, memory_order_release);
        return;
    }
    long page = sysconf(_SC_PAGESIZE);
    uint64_t pg = page > 0 ? (uint64_t)page : 4096;
    uint64_t max = g_max_bytes < NVTXREC_HEADER_SIZE + pg ? NVTXREC_HEADER_SIZE + pg : g_max_bytes;
    uint64_t chunk = (g_chunk_req + pg - 1) / pg * pg;
    if (chunk < pg) chunk = pg;
    if (chunk > (1u << 30)) chunk = 1u << 30;
    if (NVTXREC_HEADER_SIZE + chunk > max) chunk = (max - NVTXREC_HEADER_SIZE) / pg * pg;
    g_chunk = (uint32_t)chunk;
    g_limit = NVTXREC_HEADER_SIZE + (max - NVTXREC_HEADER_SIZE) / chunk * chunk;
    g_text_cap = g_chunk - (uint32_t)sizeof(struct nvtxrec_record) - 8;
    if (g_text_cap > MAX_TEXT) g_text_cap = MAX_TEXT;

    struct nvtxrec_file_header *hdr = h;
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    hdr->version = NVTXREC_VERSION;
    hdr->header_size = NVTXREC_HEADER_SIZE;
    hdr->chunk_size = g_chunk;
    hdr->pid = (uint32_t)pid;
    hdr->ppid = (uint32_t)getppid();
    hdr->record_size = (uint32_t)sizeof(struct nvtxrec_record);
    hdr->start_ns = stamp;
    hdr->start_realtime_ns = (uint64_t)rt.tv_sec * 1000000000ull + (uint64_t)rt.tv_nsec;
    hdr->max_bytes = max;
    hdr->dropped = atomic_load(&g_dropped);
    hdr->write_errors = atomic_load(&g_write_errors);
    atomic_thread_fence(memory_order_release);
    memcpy(hdr->magic, NVTXREC_MAGIC, 8);

    g_fd = fd;
    atomic_store(&g_next, NVTXREC_HEADER_SIZE);
    atomic_store(&g_full, 0);
    g_hdr = hdr;
    atomic_store_explicit(&g_mode, MODE_OPEN, memory_order_release);

    /* a forked child: re-record the definitions it inherited, so its file stands alone */
    struct tstate *t = t_state;
    if (!t || (g_ndomains == 0 && g_ncategories == 0)) return;
    t->busy = 1;
    for (uint32_t i = 0; i < g_ndomains; ++i) {
        struct ev e = {.kind = NVTXREC_KIND_DOMAIN, .api = NVTXREC_API_ASCII,
                       .flags = NVTXREC_FLAG_INHERITED, .domain = i + 1, .arg = i + 1,
                       .text = g_domains[i]};
        emit_in(t, &e, stamp);
    }
    for (uint32_t i = 0; i < g_ncategories; ++i) {
        struct ev e = {.kind = NVTXREC_KIND_CATEGORY, .api = NVTXREC_API_ASCII,
                       .flags = NVTXREC_FLAG_INHERITED, .domain = g_categories[i].domain,
                       .category = g_categories[i].id, .arg = g_categories[i].id,
                       .text = g_categories[i].name};
        emit_in(t, &e, stamp);
    }
    t->busy = 0;
}

/* ---------------------------------------------------------------- fork */

static void atfork_prepare(void) { pthread_mutex_lock(&g_lock); }

static void atfork_parent(void) { pthread_mutex_unlock(&g_lock); }

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
        g_threads = self;
    }
    if (g_hdr) munmap(g_hdr, NVTXREC_HEADER_SIZE);
    g_hdr = NULL;
    if (g_fd >= 0) close(g_fd);
    g_fd = -1;
    g_path[0] = 0;
    g_warned = 0;
    atomic_store(&g_dropped, 0);
    atomic_store(&g_write_errors, 0);
    atomic_store(&g_full, 0);
    if (atomic_load(&g_mode) != MODE_OFF) atomic_store(&g_mode, MODE_PENDING);
    pthread_mutex_unlock(&g_lock);
}

/* ---------------------------------------------------------------- init */

static void global_init(void) {
    pthread_key_create(&g_key, thread_exit);
    const char *max = getenv("NVTX_CFFI_RECORD_MAX_BYTES");
    if (max && *max) {
        char *end = NULL;
        unsigned long long v = strtoull(max, &end, 0);
        if (end && end != max) g_max_bytes = v;
    }
    const char *chunk = getenv("NVTX_CFFI_RECORD_CHUNK_BYTES");
    if (chunk && *chunk) {
        unsigned long long v = strtoull(chunk, NULL, 0);
        if (v > 0 && v <= (1u << 30)) g_chunk_req = (uint32_t)v;
    }
    const char *dir = getenv("NVTX_CFFI_RECORD_DIR");
    if (dir && *dir && strlen(dir) < sizeof g_dir) {
        strcpy(g_dir, dir);
        atomic_store(&g_mode, MODE_PENDING);
    }
    atomic_store(&g_range_ids, 1);
    atomic_store(&g_resource_ids, 1);
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
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

static struct string_entry *intern_string(uint32_t domain, const char *s) {
    if (!s) s = "";
    size_t n = strlen(s);
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
    if (!found && g_nstrings < MAX_STRINGS) {
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
            found = e;
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

/* ---------------------------------------------------------------- event helpers */

static void fill_attr(struct ev *e, const nvtxEventAttributes_t *a) {
    if (!a) return;
    e->category = a->category;
    if (a->colorType == NVTX_COLOR_ARGB) {
        e->flags |= NVTXREC_FLAG_COLOR;
        e->color = a->color;
    }
    e->payload_type = a->payloadType;
    switch (a->payloadType) {
    case NVTX_PAYLOAD_TYPE_UNSIGNED_INT32: e->payload = a->payload.uiValue; break;
    case NVTX_PAYLOAD_TYPE_INT32: e->payload = (uint32_t)a->payload.iValue; break;
    case NVTX_PAYLOAD_TYPE_FLOAT: {
        uint32_t bits;
        memcpy(&bits, &a->payload.fValue, 4);
        e->payload = bits;
        break;
    }
    case NVTX_PAYLOAD_UNKNOWN: break;
    default: e->payload = a->payload.ullValue; break;
    }
    e->aux = (uint8_t)a->messageType;
    switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII: e->text = a->message.ascii; break;
    case NVTX_MESSAGE_TYPE_UNICODE: e->wtext = a->message.unicode; break;
    case NVTX_MESSAGE_TYPE_REGISTERED:
        if (a->message.registered) {
            const struct string_entry *s = (const struct string_entry *)(const void *)a->message.registered;
            e->text = s == &g_string_overflow ? g_overflow_text : s->text;
        }
        break;
    default: e->aux = 0; break;
    }
}

static int push_level(uint32_t domain) {
    struct tstate *t = get_tstate();
    if (!t) return 0;
    return t->depth[domain < DEPTH_SLOTS ? domain : DEPTH_SLOTS - 1]++;
}

static int pop_level(uint32_t domain) {
    struct tstate *t = get_tstate();
    if (!t) return -1;
    int32_t *d = &t->depth[domain < DEPTH_SLOTS ? domain : DEPTH_SLOTS - 1];
    if (*d <= 0) return -1;
    return --*d;
}

static void event(uint8_t kind, uint8_t api, uint32_t domain, const nvtxEventAttributes_t *a, uint64_t arg) {
    if (a && a->payloadType == NVTXREC_PAYLOAD_TYPE_EXT) nvtxrec_ext_event_payload(domain, a); /* recorder_ext.c */
    struct ev e = {.kind = kind, .api = api, .domain = domain, .arg = arg};
    fill_attr(&e, a);
    emit(&e);
}

static void text_event(uint8_t kind, uint8_t api, uint32_t domain, const char *s, const wchar_t *w,
                       uint64_t arg) {
    struct ev e = {.kind = kind, .api = api, .domain = domain, .arg = arg, .text = s, .wtext = w,
                   .aux = (uint8_t)(s ? NVTX_MESSAGE_TYPE_ASCII : w ? NVTX_MESSAGE_TYPE_UNICODE : 0)};
    emit(&e);
}

/* ---------------------------------------------------------------- CORE handlers */

static void h_MarkEx(const nvtxEventAttributes_t *a) { event(NVTXREC_KIND_MARK, NVTXREC_API_EX, 0, a, 0); }
static void h_MarkA(const char *m) { text_event(NVTXREC_KIND_MARK, NVTXREC_API_ASCII, 0, m, NULL, 0); }
static void h_MarkW(const wchar_t *m) { text_event(NVTXREC_KIND_MARK, NVTXREC_API_UNICODE, 0, NULL, m, 0); }

static nvtxRangeId_t new_range_id(void) {
    return atomic_fetch_add_explicit(&g_range_ids, 1, memory_order_relaxed);
}

static nvtxRangeId_t h_RangeStartEx(const nvtxEventAttributes_t *a) {
    nvtxRangeId_t id = new_range_id();
    event(NVTXREC_KIND_START, NVTXREC_API_EX, 0, a, id);
    return id;
}
static nvtxRangeId_t h_RangeStartA(const char *m) {
    nvtxRangeId_t id = new_range_id();
    text_event(NVTXREC_KIND_START, NVTXREC_API_ASCII, 0, m, NULL, id);
    return id;
}
static nvtxRangeId_t h_RangeStartW(const wchar_t *m) {
    nvtxRangeId_t id = new_range_id();
    text_event(NVTXREC_KIND_START, NVTXREC_API_UNICODE, 0, NULL, m, id);
    return id;
}
static void h_RangeEnd(nvtxRangeId_t id) { event(NVTXREC_KIND_END, NVTXREC_API_EX, 0, NULL, id); }

static int h_RangePushEx(const nvtxEventAttributes_t *a) {
    event(NVTXREC_KIND_PUSH, NVTXREC_API_EX, 0, a, 0);
    return push_level(0);
}
static int h_RangePushA(const char *m) {
    text_event(NVTXREC_KIND_PUSH, NVTXREC_API_ASCII, 0, m, NULL, 0);
    return push_level(0);
}
static int h_RangePushW(const wchar_t *m) {
    text_event(NVTXREC_KIND_PUSH, NVTXREC_API_UNICODE, 0, NULL, m, 0);
    return push_level(0);
}
static int h_RangePop(void) {
    event(NVTXREC_KIND_POP, NVTXREC_API_EX, 0, NULL, 0);
    return pop_level(0);
}

static void name_category(uint8_t api, uint32_t domain, uint32_t id, const char *s, const wchar_t *w) {
    char *owned = w ? wide_dup(w) : NULL;
    remember_category(domain, id, w ? owned : s);
    struct ev e = {.kind = NVTXREC_KIND_CATEGORY, .api = api, .domain = domain, .category = id, .arg = id,
                   .text = w ? (owned ? owned : "") : (s ? s : "")};
    emit(&e);
    free(owned);
}
static void h_NameCategoryA(uint32_t c, const char *n) { name_category(NVTXREC_API_ASCII, 0, c, n, NULL); }
static void h_NameCategoryW(uint32_t c, const wchar_t *n) { name_category(NVTXREC_API_UNICODE, 0, c, NULL, n); }
static void h_NameOsThreadA(uint32_t tid, const char *n) {
    text_event(NVTXREC_KIND_THREAD_NAME, NVTXREC_API_ASCII, 0, n ? n : "", NULL, tid);
}
static void h_NameOsThreadW(uint32_t tid, const wchar_t *n) {
    text_event(NVTXREC_KIND_THREAD_NAME, NVTXREC_API_UNICODE, 0, n ? NULL : "", n, tid);
}

/* ---------------------------------------------------------------- CORE2 handlers */

static void h_DomainMarkEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) {
    event(NVTXREC_KIND_MARK, NVTXREC_API_DOMAIN, domain_id(d), a, 0);
}
static nvtxRangeId_t h_DomainRangeStartEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) {
    nvtxRangeId_t id = new_range_id();
    event(NVTXREC_KIND_START, NVTXREC_API_DOMAIN, domain_id(d), a, id);
    return id;
}
static void h_DomainRangeEnd(nvtxDomainHandle_t d, nvtxRangeId_t id) {
    event(NVTXREC_KIND_END, NVTXREC_API_DOMAIN, domain_id(d), NULL, id);
}
static int h_DomainRangePushEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) {
    event(NVTXREC_KIND_PUSH, NVTXREC_API_DOMAIN, domain_id(d), a, 0);
    return push_level(domain_id(d));
}
static int h_DomainRangePop(nvtxDomainHandle_t d) {
    event(NVTXREC_KIND_POP, NVTXREC_API_DOMAIN, domain_id(d), NULL, 0);
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
    name_category(NVTXREC_API_ASCII, domain_id(d), c, n, NULL);
}
static void h_DomainNameCategoryW(nvtxDomainHandle_t d, uint32_t c, const wchar_t *n) {
    name_category(NVTXREC_API_UNICODE, domain_id(d), c, NULL, n);
}
static nvtxStringHandle_t register_string(uint8_t api, nvtxDomainHandle_t d, const char *s) {
    struct string_entry *e = intern_string(domain_id(d), s);
    struct ev ev = {.kind = NVTXREC_KIND_STRING, .api = api, .domain = domain_id(d), .arg = e->id,
                    .text = e == &g_string_overflow ? g_overflow_text : e->text};
    emit(&ev);
    return (nvtxStringHandle_t)(void *)e;
}
static nvtxStringHandle_t h_DomainRegisterStringA(nvtxDomainHandle_t d, const char *s) {
    return register_string(NVTXREC_API_ASCII, d, s);
}
static nvtxStringHandle_t h_DomainRegisterStringW(nvtxDomainHandle_t d, const wchar_t *w) {
    char *s = w ? wide_dup(w) : NULL;
    nvtxStringHandle_t h = register_string(NVTXREC_API_UNICODE, d, s);
    free(s);
    return h;
}
static nvtxDomainHandle_t create_domain(uint8_t api, char *owned_name) {
    uint32_t id = intern_domain(owned_name ? strdup(owned_name) : NULL);
    struct ev e = {.kind = NVTXREC_KIND_DOMAIN, .api = api, .domain = id, .arg = id,
                   .text = owned_name ? owned_name : ""};
    emit(&e);
    free(owned_name);
    return (nvtxDomainHandle_t)(uintptr_t)id;
}
static nvtxDomainHandle_t h_DomainCreateA(const char *name) {
    return create_domain(NVTXREC_API_ASCII, name ? strdup(name) : NULL);
}
static nvtxDomainHandle_t h_DomainCreateW(const wchar_t *name) {
    return create_domain(NVTXREC_API_UNICODE, name ? wide_dup(name) : NULL);
}
static void h_DomainDestroy(nvtxDomainHandle_t d) { (void)d; /* domains stay interned */ }
static void h_Initialize(const void *reserved) { (void)reserved; }

/* ---------------------------------------------------------------- CUDA naming */

static void name_resource(uint8_t res, uint8_t api, uint64_t handle, const char *s, const wchar_t *w) {
    struct ev e = {.kind = NVTXREC_KIND_RESOURCE_NAME, .api = api, .aux = res, .arg = handle,
                   .text = w ? NULL : (s ? s : ""), .wtext = w};
    emit(&e);
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

void nvtxrec_emit_blob(uint8_t kind, uint32_t domain, uint64_t arg, const void *data, uint32_t len) {
    uint8_t flags = 0;
    if (len > NVTXREC_BLOB_MAX_BYTES) {
        len = NVTXREC_BLOB_MAX_BYTES;
        flags = NVTXREC_FLAG_TRUNCATED;
    }
    struct ev e = {.kind = NVTXREC_KIND_BLOB, .api = NVTXREC_API_EX, .flags = flags, .aux = kind,
                   .domain = domain, .arg = arg, .bytes = data ? data : "", .nbytes = data ? len : 0};
    emit(&e);
}

int nvtxrec_recording(void) {
    pthread_once(&g_once, global_init);
    return ensure_open();
}

/* ---------------------------------------------------------------- in-process API */

EXPORT int nvtx_recorder_flush(void) {
    pthread_once(&g_once, global_init);
    if (!ensure_open()) return -1;
    atomic_thread_fence(memory_order_seq_cst); /* MAP_SHARED: the page cache already has it all */
    return 0;
}

EXPORT uint64_t nvtx_recorder_dropped(void) { return atomic_load(&g_dropped); }

EXPORT const char *nvtx_recorder_file(void) {
    pthread_once(&g_once, global_init);
    return ensure_open() ? g_path : NULL;
}
