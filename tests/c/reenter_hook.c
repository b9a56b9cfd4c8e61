/* Preloaded (LD_PRELOAD) into a recorded test process: an NVTX client whose signal handler samples a
 * counter while the recorder is inside one of its handlers, at the handler's first malloc.
 *
 * This file defines malloc (glibc's __libc_malloc underneath), so it interposes the recorder's
 * allocations. reenter_run(which) arms it and makes one NVTX call that allocates in the recorder
 * (a large counter sample, a batch, a schema registration); the first malloc while armed raises
 * SIGUSR1, whose handler calls nvtxCounterSampleInt64 on the same thread: the re-entry that a
 * signal at that instant makes. The recorder claims its per-thread state before it allocates, so
 * the handler's sample must be counted as dropped, not recorded (nor allocate inside malloc). */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtCounters.h>
#include <nvtx3/nvToolsExtPayload.h>

#define EXPORT __attribute__((visibility("default")))

extern void *__libc_malloc(size_t n);

static volatile sig_atomic_t g_armed, g_fired;
static nvtxDomainHandle_t g_domain;
static uint64_t g_counter;
static unsigned char g_big[50000];

EXPORT void *malloc(size_t n) {
    if (g_armed) {
        g_armed = 0;
        g_fired = 1;
        raise(SIGUSR1);
    }
    return __libc_malloc(n);
}

static void on_signal(int sig) {
    (void)sig;
    nvtxCounterSampleInt64(g_domain, g_counter, 42);
}

static uint64_t schema(void) {
    static const nvtxPayloadSchemaEntry_t entries[] = {
        {0, NVTX_PAYLOAD_ENTRY_TYPE_INT64, "field", NULL, 0, 0, NULL, NULL},
    };
    nvtxPayloadSchemaAttr_t a;
    memset(&a, 0, sizeof a);
    a.fieldMask = NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_TYPE | NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_ENTRIES |
                  NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_NUM_ENTRIES | NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_STATIC_SIZE;
    a.type = NVTX_PAYLOAD_SCHEMA_TYPE_STATIC;
    a.entries = entries;
    a.numEntries = 1;
    a.payloadStaticSize = 8;
    return nvtxPayloadSchemaRegister(g_domain, &a);
}

/* The domain, an int64 counter (its id returned), the handler; one call of each kind first, so that
 * NVTX has loaded and initialized both extension modules before anything is armed. */
EXPORT uint64_t reenter_setup(void) {
    g_domain = nvtxDomainCreateA("reenter");
    nvtxCounterAttr_t attr;
    memset(&attr, 0, sizeof attr);
    attr.structSize = sizeof attr;
    attr.schemaId = NVTX_PAYLOAD_ENTRY_TYPE_INT64;
    attr.name = "inner";
    g_counter = nvtxCounterRegister(g_domain, &attr);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    nvtxCounterSampleInt64(g_domain, g_counter, 1);
    schema();
    return g_counter;
}

/* One recorder call that allocates, armed: 0 a 50000-byte sample, 1 a batch of two 8-byte samples,
 * 2 a schema registration. Returns 1 when the signal was raised inside it. */
EXPORT int reenter_run(int which) {
    int64_t values[2] = {7, 8}, stamps[2] = {100, 200};
    nvtxCounterBatch_t batch;
    memset(&batch, 0, sizeof batch);
    batch.counterId = g_counter;
    batch.counters = values;
    batch.countersSize = sizeof values;
    batch.timestamps = stamps;
    batch.timestampsSize = sizeof stamps;
    g_fired = 0;
    g_armed = 1;
    switch (which) {
    case 0: nvtxCounterSample(g_domain, g_counter, g_big, sizeof g_big); break;
    case 1: nvtxCounterBatchSubmit(g_domain, &batch); break;
    default: schema(); break;
    }
    g_armed = 0;
    return g_fired;
}
