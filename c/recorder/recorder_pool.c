/* recorder_pool.c - ready chunks: a background thread (the pool, named "nvtx-recorder") keeps a few
 * chunk_max chunks claimed, reserved, mapped and faulted in, so that a thread's chunk switch is taking
 * one (a lock and a wake-up) instead of microseconds of kernel work per page on the annotated thread;
 * it also unmaps full chunks (a munmap is a TLB shootdown). Started at the first chunk_max claim
 * (threads that record little never get there), only where chunk_max is in [POOL_MIN_CHUNK, POOL_MAX_CHUNK];
 * it stops POOL_MARGIN chunks short of the file bound (claims near the bound stay inline, so the
 * bound is filled as before). Any failure (thread creation, disk full) switches it off: chunk
 * switches then do the work inline, which counts and warns as before. When it is behind, a chunk
 * switch bridges with a POOL_BRIDGE chunk made inline (claim_chunk, recorder_buffers.c).
 * The thread blocks every signal, never records, holds g_pool_lock only between steps, and is not
 * waited for at exit (pool_stop stops it and punches holes where unused ready chunks were).
 * fork: the prepare handler pauses it and joins it (pool_atfork_pause), so the process forks with no
 * such thread (a forked child cannot have it, and Python 3.12+ warns about forking a multi-threaded
 * process); the parent restarts it at its next chunk_max claim, the child (which unmaps the parent's
 * ready chunks) starts its own at its own. State changes happen under g_pool_lock. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/types.h>

#include "recorder_core.h"

#define POOL_SLOTS 4
#define RETIRE_SLOTS 8
#define POOL_MARGIN 4
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

int pool_running(void) { return pool_state() == POOL_RUNNING; }

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
        fault_in(p, sz);
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
    if (pool_state() == POOL_PAUSED) { /* pool_atfork_pause joins this thread */
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
void pool_stop(void) {
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

int swap_ready(struct tstate *t) {
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

/* ---------------------------------------------------------------- fork */

/* Fork with no pool thread: pause it and wait for it to finish the chunk it is preparing. */
void pool_atfork_pause(void) {
    pthread_mutex_lock(&g_pool_lock);
    if (pool_state() == POOL_RUNNING) {
        set_pool_state(POOL_PAUSED);
        pthread_cond_signal(&g_pool_cond);
        pthread_mutex_unlock(&g_pool_lock);
        pthread_join(g_pool_thread, NULL);
    } else {
        pthread_mutex_unlock(&g_pool_lock);
    }
}

/* Held across the fork, after g_lock. */
void pool_atfork_lock(void) { pthread_mutex_lock(&g_pool_lock); }

void pool_atfork_parent(void) {
    if (pool_state() == POOL_PAUSED) set_pool_state(POOL_IDLE); /* restarts at the next claim */
    pthread_mutex_unlock(&g_pool_lock);
}

/* The parent's ready chunks (and the one its pool thread was preparing) are its file's: drop them;
 * this child has no pool thread and starts its own at its first chunk_max claim. */
void pool_atfork_child(void) {
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
}
