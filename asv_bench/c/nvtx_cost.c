/* nvtx_cost.c - what NVTX itself costs, from C, with whatever tool NVTX_INJECTION64_PATH names: the
 * calls an ideal library makes for each kind of annotation (pre-built attributes, a registered
 * message, a registered counter), so that asv_bench/compare.py can add them to a shape's floor.
 * Prints one JSON object of ns per call (thread CPU time, the best of 20 runs of N calls):
 *   {"push_pop": ..., "mark": ..., "start_end": ..., "sample": ...}
 * Usage: nvtx_cost [N]      (default 200000) */
#define _POSIX_C_SOURCE 199309L
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtCounters.h>
#include <nvtx3/nvToolsExtPayload.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 200000L;
    if (n <= 0)
        n = 200000L;
    nvtxDomainHandle_t domain = nvtxDomainCreateA("nvtx_cost");

    nvtxEventAttributes_t attr;
    memset(&attr, 0, sizeof attr);
    attr.version = NVTX_VERSION;
    attr.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    attr.colorType = NVTX_COLOR_ARGB;
    attr.color = 0xFFFF0000u;
    attr.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    attr.message.registered = nvtxDomainRegisterStringA(domain, "x");

    nvtxCounterAttr_t counter;
    memset(&counter, 0, sizeof counter);
    counter.structSize = sizeof counter;
    counter.schemaId = NVTX_PAYLOAD_ENTRY_TYPE_INT64;
    counter.name = "c";
    counter.scopeId = NVTX_SCOPE_NONE;
    counter.counterId = NVTX_COUNTER_ID_NONE;
    uint64_t counter_id = nvtxCounterRegister(domain, &counter);

    double best[4] = {1e18, 1e18, 1e18, 1e18};
    for (int run = 0; run < 20; ++run) {
        double t[5];
        t[0] = now_ns();
        for (long i = 0; i < n; ++i) {
            nvtxDomainRangePushEx(domain, &attr);
            nvtxDomainRangePop(domain);
        }
        t[1] = now_ns();
        for (long i = 0; i < n; ++i)
            nvtxDomainMarkEx(domain, &attr);
        t[2] = now_ns();
        for (long i = 0; i < n; ++i)
            nvtxDomainRangeEnd(domain, nvtxDomainRangeStartEx(domain, &attr));
        t[3] = now_ns();
        for (long i = 0; i < n; ++i)
            nvtxCounterSampleInt64(domain, counter_id, (int64_t)i);
        t[4] = now_ns();
        for (int k = 0; k < 4; ++k) {
            double per_call = (t[k + 1] - t[k]) / (double)n;
            if (per_call < best[k])
                best[k] = per_call;
        }
    }
    printf("{\"push_pop\": %.3f, \"mark\": %.3f, \"start_end\": %.3f, \"sample\": %.3f}\n",
           best[0], best[1], best[2], best[3]);
    return 0;
}
