/* push_pop.c - N nvtxRangePushA("step") + nvtxRangePop() from C: a recording of N ranges to read
 * back (asv_bench/scripts/bench_reader.sh). */
#include <stdlib.h>

#include <nvtx3/nvToolsExt.h>

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000000L;
    for (long i = 0; i < n; ++i) {
        nvtxRangePushA("step");
        nvtxRangePop();
    }
    return 0;
}
