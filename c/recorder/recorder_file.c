/* recorder_file.c - the record file: its creation (at the first event, or at a forked child's
 * first), its descriptor, its address window, claims of its space, the dropped / write-error
 * counters in its header, and the clock base its times count from. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "recorder_core.h"

_Static_assert(sizeof(struct nvtxrec_file_header) <= NVTXREC_HEADER_SIZE, "header layout");
_Static_assert(sizeof(struct nvtxrec_chunk_header) == 32, "chunk header layout");

_Atomic int g_mode = MODE_OFF;
int g_use_tsc;
uint64_t g_base;
uint32_t g_page = 4096;
uint32_t g_chunk_max = DEFAULT_CHUNK_BYTES;
uint32_t g_text_cap = MAX_TEXT;

static char g_dir[PATH_MAX];
static char g_path[PATH_MAX + 64];
static int g_fd = -1;                    /* checked before each use: see file_fd() */
static dev_t g_dev;                      /* the record file's identity (g_fd may stop being it) */
static ino_t g_ino;
static pthread_mutex_t g_fd_lock = PTHREAD_MUTEX_INITIALIZER; /* g_fd, reopen */
static struct nvtxrec_file_header *g_hdr;
static uint64_t g_max_bytes = DEFAULT_MAX_BYTES;
static uint64_t g_run_id; /* NVTX_CFFI_RECORD_RUN: the run this process belongs to (0: none given) */
static uint64_t g_limit;               /* end of the space chunks may take */
static _Atomic uintptr_t *g_slabs;     /* the file's address window in slabs (see map_file), or NULL */
static uint64_t g_nslabs;
static _Atomic uint64_t g_next;
static _Atomic int g_full;
static _Atomic uint64_t g_dropped;
static _Atomic uint64_t g_write_errors;
static _Atomic int g_warned;
static double g_ns_per_tick;   /* TSC calibration (once per image) */
static uint32_t g_exec_gen;

void file_configure(uint64_t max_bytes, uint64_t chunk_bytes, uint64_t run_id, const char *dir) {
    g_max_bytes = max_bytes;
    g_chunk_max = chunk_bytes > (1u << 30) ? (1u << 30) : (uint32_t)chunk_bytes;
    g_run_id = run_id;
    if (dir && *dir && strlen(dir) < sizeof g_dir) {
        strcpy(g_dir, dir);
        atomic_store(&g_mode, MODE_PENDING);
    }
}

/* ---------------------------------------------------------------- clocks */

void clock_pair(uint64_t *tsc, uint64_t *mono) {
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

void clock_init(void) { g_use_tsc = tsc_usable(); }

/* ---------------------------------------------------------------- what could not be recorded
 * Counted in memory and in the file's header (the header is the reader's). */

void count_drop(void) {
    atomic_fetch_add_explicit(&g_dropped, 1, memory_order_relaxed);
    struct nvtxrec_file_header *h = g_hdr;
    if (h) __atomic_fetch_add(&h->dropped, 1, __ATOMIC_RELAXED);
}

static void warn_once(const char *what, int err) {
    if (atomic_exchange(&g_warned, 1)) return; /* once, whichever thread fails first */
    fprintf(stderr, "nvtx-cffi recorder: %s %s: %s; events are dropped and counted\n", what, g_path,
            strerror(err));
}

void count_write_error(int err) {
    atomic_fetch_add_explicit(&g_write_errors, 1, memory_order_relaxed);
    struct nvtxrec_file_header *h = g_hdr;
    if (h) __atomic_fetch_add(&h->write_errors, 1, __ATOMIC_RELAXED);
    warn_once("cannot extend", err);
}

uint64_t dropped_count(void) { return atomic_load(&g_dropped); }

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

int file_fd(void) {
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

void *map_file(int fd, uint64_t off, uint64_t sz) {
    unsigned char *at = NULL;
    uint64_t k = off / WINDOW_SLAB;
    if (k < g_nslabs && (off + sz - 1) / WINDOW_SLAB == k) {
        unsigned char *slab = slab_at(k);
        if (slab) at = slab + (off - k * WINDOW_SLAB);
    }
    void *p = mmap(at, sz, PROT_READ | PROT_WRITE, MAP_SHARED | (at ? MAP_FIXED : 0), fd, (off_t)off);
    return p == MAP_FAILED ? NULL : p;
}

/* ---------------------------------------------------------------- claims of the file's space */

uint64_t claim_space(uint64_t need, uint64_t size, uint64_t margin, uint64_t *off_out) {
    if (atomic_load_explicit(&g_full, memory_order_relaxed)) return 0;
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

void punch(uint64_t off, uint64_t len) { /* give a claimed, unused range's blocks back */
    int fd = file_fd();
    if (fd >= 0) (void)fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len);
}

void stop_claims(void) { atomic_store_explicit(&g_full, 1, memory_order_relaxed); }

/* ---------------------------------------------------------------- file */

static void open_file_locked(void);

int ensure_open(void) {
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
        range_ids_start_at(((uint64_t)g_exec_gen << 40) + 1);
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
    rerecord_definitions(t);
    t->busy = 0;
}

const char *record_file_path(void) { return g_path; }

/* A forked child drops the parent's file and opens one of its own at its first event. */
void file_atfork_child(void) {
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
}
