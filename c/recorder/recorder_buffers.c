/* recorder_buffers.c - the recorder's per-thread state and its chunk of the record file: a thread
 * records into a chunk of its own, mapped MAP_SHARED, with no lock; a full one is replaced by a
 * ready chunk from the pool (recorder_pool.c) or one claimed here. Data records and clock pairs. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include "recorder_core.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

__thread struct tstate *t_state __attribute__((tls_model("initial-exec")));

static pthread_key_t g_key;
static struct tstate *g_threads; /* under g_lock */

static uint32_t os_tid(void) { return (uint32_t)syscall(SYS_gettid); }

/* ---------------------------------------------------------------- threads */

void release_chunk(struct tstate *t) {
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

struct tstate *get_tstate(void) {
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

void threads_init(void) { pthread_key_create(&g_key, thread_exit); }

/* A forked child: only the forking thread lives on. Drop every mapping of the parent's file (the
 * parent's events are all in that file already), forget dead threads, start counting afresh. */
void threads_atfork_child(void) {
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
}

/* ---------------------------------------------------------------- chunks and records */

/* Fault the pages of a fresh mapping in (MADV_POPULATE_WRITE; a store per page where the kernel
 * lacks it): fresh file pages cost microseconds each, better here than on the hot path. */
void fault_in(void *p, uint64_t sz) {
    if (madvise(p, sz, MADV_POPULATE_WRITE) != 0) {
        for (uint64_t i = 0; i < sz; i += g_page) ((volatile unsigned char *)p)[i] = 0;
    }
}

/* Map [off, off + sz) of the file and fault its pages in. NULL (errno set) when it cannot. */
static void *map_chunk(int fd, uint64_t off, uint64_t sz) {
    void *p = map_file(fd, off, sz);
    if (!p) return NULL;
    fault_in(p, sz);
    return p;
}

static _Atomic uint64_t g_chunk_seq; /* chunks installed so far, in this process */

/* File offsets are claim order, not the order a thread takes its chunks in (the pool hands out
 * chunks claimed before an inline one), so the header carries the install order and readers order
 * a thread's chunks by it. */
void install_chunk(struct tstate *t, void *p, uint64_t off, uint64_t sz) {
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

/* Chunks start at one page per thread and double up to chunk_max; chunk_max ones come from the pool
 * when it runs. */
int claim_chunk(struct tstate *t, uint32_t words) {
    uint64_t need = (uint64_t)(CHUNK_HDR_WORDS + CLOCK_WORDS + words) * 8;
    need = (need + g_page - 1) / g_page * g_page;
    uint64_t size = t->next_len ? t->next_len : g_page;
    if (size < need) size = need;
    int bridge = 0;
    if (size == g_chunk_max && g_chunk_max >= POOL_MIN_CHUNK && g_chunk_max <= POOL_MAX_CHUNK) {
        if (swap_ready(t)) return 1;
        /* none ready (the pool thread is behind or preempted): a few pages inline to bridge the
         * gap, not a whole chunk_max of page faults on this thread */
        if (pool_running()) {
            bridge = 1;
            size = need > POOL_BRIDGE ? need : POOL_BRIDGE;
        }
    }
    release_chunk(t);
    uint64_t off, sz = claim_space(need, size, 0, &off);
    if (!sz) {
        stop_claims();
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

int data_record(struct tstate *t, uint8_t tag, uint8_t flags, uint32_t domain, uint64_t time, uint64_t arg,
                uint8_t aux, const void *bytes, uint32_t n) {
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

void write_clock(struct tstate *t) {
    if (!g_use_tsc) return;
    uint64_t tsc, mono;
    clock_pair(&tsc, &mono);
    uint64_t rel = (tsc - g_base) & TIME_MASK;
    if (data_record(t, NVTXREC_D_CLOCK, 0, 0, rel, mono, 0, NULL, 0)) t->last_cal = rel;
}
