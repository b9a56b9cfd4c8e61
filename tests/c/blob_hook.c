/* Linked into a test build of the recorder (with setup.py's RECORDER_SOURCES): exports nvtxrec_emit_blob, which
 * the real library keeps hidden for the C files linked into it (the payload-extension tool side). */
#include <stdint.h>

#include "recorder_internal.h"

__attribute__((visibility("default"))) void test_emit_blob(uint8_t kind, uint32_t domain, uint64_t arg,
                                                            const void *data, uint32_t len) {
    nvtxrec_emit_blob(kind, domain, arg, data, len);
}

__attribute__((visibility("default"))) int test_recording(void) { return nvtxrec_recording(); }
