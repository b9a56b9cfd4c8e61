/* recorder_ext.h - the recorder's tool side of NVTX's payload and counters extensions
 * (recorder_ext.c, linked into libnvtx_recorder.so; see recorder_ext.c for the blob layouts).
 *
 * NVTX calls InitializeInjectionNvtxExtension (exported by recorder_ext.c) once per client copy and
 * extension module; recorder.c calls nvtxrec_ext_event_payload from its event handlers for
 * attributes carrying an extended payload (NVTX_PAYLOAD_TYPE_EXT), before recording the event:
 * the payload's blobs precede their event on the same thread. */
#ifndef NVTX_CFFI_RECORDER_EXT_H
#define NVTX_CFFI_RECORDER_EXT_H

#include <stdint.h>

#include <nvtx3/nvToolsExt.h>

#define NVTXREC_PAYLOAD_TYPE_EXT ((int32_t)0xDFBD0009)

__attribute__((visibility("hidden"))) void nvtxrec_ext_event_payload(uint32_t domain,
                                                                     const nvtxEventAttributes_t *attr);

#endif
