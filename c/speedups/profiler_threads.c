/* profiler_threads.c - the Profile engine's per-thread state (part of nvtx_cffi._speedups).
 * Entries live in a list that only grows; a thread's entry is marked dead by a pthread key
 * destructor when the thread exits and reused by the next new thread, so memory is bounded by the
 * largest number of threads alive at once. The list is read by stop() (under threads_lock); a
 * thread's counters are written only by that thread, with the GIL held, and read by stop() with
 * the GIL held. */
#include "profiler.h"

#include <pthread.h>
#include <stdlib.h>

static pthread_mutex_t threads_lock = PTHREAD_MUTEX_INITIALIZER;
static thread_state_t *threads;
static pthread_key_t thread_key;
static pthread_once_t thread_key_once = PTHREAD_ONCE_INIT;
_Thread_local thread_state_t *my_thread;

static void thread_exit(void *entry)
{
    pthread_mutex_lock(&threads_lock);
    ((thread_state_t *)entry)->alive = 0;
    pthread_mutex_unlock(&threads_lock);
}

static void thread_key_create(void) { (void)pthread_key_create(&thread_key, thread_exit); }

thread_state_t *thread_register(void)
{
    pthread_once(&thread_key_once, thread_key_create);
    pthread_mutex_lock(&threads_lock);
    thread_state_t *t = threads;
    while (t != NULL && t->alive)
        t = t->next;
    if (t == NULL) {
        t = calloc(1, sizeof *t);
        if (t != NULL) {
            t->next = threads;
            threads = t;
        }
    }
    if (t != NULL) {
        t->alive = 1;
        t->generation = 0; /* never a live generation: counters reset at first use */
        t->os_tid = nvtxcffi_shim.os_thread_id();
    }
    pthread_mutex_unlock(&threads_lock);
    if (t != NULL)
        pthread_setspecific(thread_key, t);
    return t;
}

left_t *threads_left(const thread_state_t *me, uint64_t generation, size_t *count)
{
    size_t n = 0, capacity = 0;
    left_t *left = NULL;
    pthread_mutex_lock(&threads_lock);
    for (thread_state_t *t = threads; t != NULL; t = t->next) {
        if (t == me || !t->alive || t->generation != generation || t->open <= 0)
            continue;
        if (n == capacity) {
            size_t grown = capacity ? capacity * 2 : 16;
            left_t *more = realloc(left, grown * sizeof *left);
            if (more == NULL)
                break;
            left = more;
            capacity = grown;
        }
        left[n].os_tid = t->os_tid;
        left[n].open = t->open;
        n++;
    }
    pthread_mutex_unlock(&threads_lock);
    *count = n;
    return left;
}
