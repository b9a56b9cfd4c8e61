/* zig_probe.c - run by scripts/zig-wheels.sh under qemu-user for a cross-built target.
 *
 * No Python exists for the target here, so this drives the shim's C API directly (the same source
 * the wheel's CFFI module compiles) with NVTX_INJECTION64_PATH naming the wheel's recorder:
 * the tool must attach, and registration plus every hot call must go through it.
 * Exit 0 when the tool attached and the calls returned sane values.
 */
#include <stdio.h>

#include "nvtx_shim.h"

int main(void)
{
    int attached = nvtxcffi_initialize();
    int domain = nvtxcffi_domain_create("zig-probe");
    int string = nvtxcffi_string_register(domain, "probe message");
    int slot = nvtxcffi_slot_create(domain, string, 0xFF00FF00u, 3);
    nvtxcffi_push(slot);
    nvtxcffi_pop(domain);
    uint64_t id = nvtxcffi_start(slot);
    nvtxcffi_end(domain, id);
    nvtxcffi_mark(slot);
    nvtxcffi_emit(NVTXCFFI_OP_MARK, 0, "inline", 0xFFFF0000u, 0, NVTXCFFI_PAYLOAD_INT64, -5, 0.0);
    printf("  probe: attached=%d domain=%d string=%d slot=%d range_id=%llu tid=%u\n", attached, domain,
           string, slot, (unsigned long long)id, nvtxcffi_os_thread_id());
    return !(attached == 1 && domain > 0 && string >= 0 && slot >= 0 && id != 0);
}
