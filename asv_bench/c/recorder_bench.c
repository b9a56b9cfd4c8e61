/* recorder_bench.c - ns per NVTX push+pop from C, for whatever tool NVTX_INJECTION64_PATH names.
 *
 * Usage: recorder_bench N   (run by asv_bench/scripts/bench_recorder.sh, once per tool, each in its
 * own process: NVTX loads its tool once per process). Prints one line per shape:
 *   <shape> <ns per push+pop>
 * Shapes: "pushA" nvtxRangePushA("...")+nvtxRangePop(); "pushEx" nvtxDomainRangePushEx with a
 * registered message and a colour + nvtxDomainRangePop (what nvtx-cffi's Python calls make).
 * Time is the thread's CPU time (CLOCK_THREAD_CPUTIME_ID: user + kernel work done for it, such as
 * faulting in fresh file pages; not the time it waits for a CPU on a busy machine) around the whole
 * loop, best of 3 rounds of N. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nvtx3/nvToolsExt.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 10000000L;
    nvtxDomainHandle_t d = nvtxDomainCreateA("bench");
    nvtxStringHandle_t s = nvtxDomainRegisterStringA(d, "step");
    nvtxEventAttributes_t a;
    memset(&a, 0, sizeof a);
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.colorType = NVTX_COLOR_ARGB;
    a.color = 0xFF0000FFu;
    a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    a.message.registered = s;
    nvtxRangePushA("warm-up");
    nvtxRangePop();
    double best_a = 1e30, best_ex = 1e30;
    for (int round = 0; round < 3; ++round) {
        double t0 = now();
        for (long i = 0; i < n; ++i) {
            nvtxRangePushA("step");
            nvtxRangePop();
        }
        double t1 = now();
        for (long i = 0; i < n; ++i) {
            nvtxDomainRangePushEx(d, &a);
            nvtxDomainRangePop(d);
        }
        double t2 = now();
        if ((t1 - t0) / n < best_a) best_a = (t1 - t0) / n;
        if ((t2 - t1) / n < best_ex) best_ex = (t2 - t1) / n;
    }
    printf("pushA %.1f\npushEx %.1f\n", best_a, best_ex);
    return 0;
}
