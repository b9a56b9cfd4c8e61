/* recorder_lifecycle.c - the recorder's process-wide setup (from the environment, once, at the first
 * NVTX client or API call), its fork handlers (recorder.c's design says what a fork does) and its
 * exit handler. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recorder_core.h"

pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

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

/* ---------------------------------------------------------------- fork */

static void atfork_prepare(void) {
    pool_atfork_pause(); /* fork with no pool thread */
    pthread_mutex_lock(&g_lock); /* so that the child never inherits it held */
    pool_atfork_lock();
}

static void atfork_parent(void) {
    pool_atfork_parent();
    pthread_mutex_unlock(&g_lock);
}

static void atfork_child(void) {
    threads_atfork_child();
    pool_atfork_child();
    file_atfork_child();
    pthread_mutex_unlock(&g_lock);
}

/* ---------------------------------------------------------------- exit */

static void at_exit(void) {
    struct tstate *t = t_state;
    if (t && !t->busy && t->pos && atomic_load(&g_mode) == MODE_OPEN) {
        t->busy = 1;
        write_clock(t);
        t->busy = 0;
    }
    pool_stop();
}

/* ---------------------------------------------------------------- init */

static void global_init(void) {
    threads_init();
    uint64_t max_bytes = size_from_env("NVTX_CFFI_RECORD_MAX_BYTES", DEFAULT_MAX_BYTES);
    uint64_t chunk = size_from_env("NVTX_CFFI_RECORD_CHUNK_BYTES", DEFAULT_CHUNK_BYTES);
    clock_init();
    uint64_t run_id = 0;
    const char *run = getenv("NVTX_CFFI_RECORD_RUN"); /* 1 to 16 hex digits; anything else: no run id */
    if (run && *run && strlen(run) <= 16 && strspn(run, "0123456789abcdefABCDEF") == strlen(run))
        run_id = strtoull(run, NULL, 16);
    file_configure(max_bytes, chunk, run_id, getenv("NVTX_CFFI_RECORD_DIR"));
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
    atexit(at_exit);
}

void recorder_init(void) { pthread_once(&g_once, global_init); }
