/* trace_client.c - a C program that records many NVTX events fast, for the tracer's benchmark at
 * scale (asv_bench/scripts/trace_convert_bench.py --client c, and the C half of --shape mixed):
 * Python makes 1-3 µs an event, this some tens of ns, so 1e8 events take seconds, not minutes.
 *
 * Usage: trace_client SHAPE N THREADS   (run with the recorder attached: NVTX_INJECTION64_PATH,
 * NVTX_CFFI_RECORD_DIR; see nvtx_cffi.recorder.environment). N is split evenly over THREADS.
 *   payload: N push/pop ranges "step" with an int64 payload i (2N events), as
 *            `with nvtx.annotate("step", payload=i)` records them
 *   marks:   N marks "tick" with an int64 payload i (N events)
 *   mixed:   N events: ranges "step" and marks "tick", each with an int64 payload i, one mark
 *            after each range (3 events a round) */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nvtx3/nvToolsExt.h>

enum shape { PAYLOAD, MARKS, MIXED };

static nvtxDomainHandle_t domain;
static nvtxStringHandle_t step, tick;
static enum shape shape;

struct share {
    long first, count; /* events (payload: ranges) of this thread: payload values first..first+count-1 */
};

static nvtxEventAttributes_t attributes(nvtxStringHandle_t message) {
    nvtxEventAttributes_t a = {
        .version = NVTX_VERSION,
        .size = NVTX_EVENT_ATTRIB_STRUCT_SIZE,
        .payloadType = NVTX_PAYLOAD_TYPE_INT64,
        .messageType = NVTX_MESSAGE_TYPE_REGISTERED,
        .message.registered = message,
    };
    return a;
}

static void *record(void *arg) {
    const struct share *s = arg;
    nvtxEventAttributes_t range = attributes(step), mark = attributes(tick);
    long end = s->first + s->count;
    for (long i = s->first; i < end; ++i) {
        if (shape == MARKS) {
            mark.payload.llValue = i;
            nvtxDomainMarkEx(domain, &mark);
            continue;
        }
        range.payload.llValue = i;
        nvtxDomainRangePushEx(domain, &range);
        nvtxDomainRangePop(domain);
        if (shape == MIXED) {
            if (i + 2 >= end) break; /* the last round's mark would pass N */
            mark.payload.llValue = i;
            nvtxDomainMarkEx(domain, &mark);
            i += 2; /* a round: the range's two events and the mark */
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s payload|marks|mixed N THREADS\n", argv[0]);
        return 2;
    }
    if (!strcmp(argv[1], "payload")) shape = PAYLOAD;
    else if (!strcmp(argv[1], "marks")) shape = MARKS;
    else if (!strcmp(argv[1], "mixed")) shape = MIXED;
    else {
        fprintf(stderr, "unknown shape %s\n", argv[1]);
        return 2;
    }
    long n = atol(argv[2]);
    int threads = atoi(argv[3]);
    if (n < 0 || threads < 1 || threads > 64) {
        fprintf(stderr, "N must be >= 0 and THREADS 1 to 64\n");
        return 2;
    }
    domain = nvtxDomainCreateA("bench");
    step = nvtxDomainRegisterStringA(domain, "step");
    tick = nvtxDomainRegisterStringA(domain, "tick");
    pthread_t tid[64];
    struct share shares[64];
    for (int t = 0; t < threads; ++t) {
        shares[t].first = n / threads * t;
        shares[t].count = t == threads - 1 ? n - shares[t].first : n / threads;
        if (pthread_create(&tid[t], NULL, record, &shares[t])) {
            perror("pthread_create");
            return 1;
        }
    }
    for (int t = 0; t < threads; ++t) pthread_join(tid[t], NULL);
    return 0;
}
