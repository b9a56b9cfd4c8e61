/* recorder.h - environment and in-process C API of nvtx-cffi's NVTX recorder (libnvtx_recorder.so).
 *
 * The recorder is an NVTX v3 injection library: a process started with
 *   NVTX_INJECTION64_PATH=/path/to/libnvtx_recorder.so  NVTX_CFFI_RECORD_DIR=/some/dir
 * records every NVTX event of every NVTX client in it (each client calls InitializeInjectionNvtx2
 * once; all state here is process-global). NVTX_CFFI_RECORD_DIR unset: handlers are installed
 * (domains, string handles, range ids and push levels still work) but nothing is recorded.
 * The directory is created (one level) if missing.
 *   NVTX_CFFI_RECORD_MAX_BYTES   bound of the file (default 4G); NVTX_CFFI_RECORD_CHUNK_BYTES the
 *   largest per-thread chunk (default 1M). Both take a size like 4096, 64k, 16M, 2G, 1T (binary
 *   suffixes, case-insensitive, an optional trailing B), as the tracer's --max-bytes; anything else
 *   is warned about on stderr and the default is used.
 *   NVTX_CFFI_RECORD_RUN  the run id (1 to 16 hex digits, recorder.environment() draws one per
 *   call) written into every file's header: files of one run carry the same id, so a reader can
 *   tell two runs recorded into one directory apart (0 / unset: no id).
 *
 * The recording format (files, words, time) is nvtxrec_format.h's.
 */
#ifndef NVTX_CFFI_RECORDER_H
#define NVTX_CFFI_RECORDER_H

#include <stdint.h>

#include "nvtxrec_format.h"

/* In-process API (for ctypes). */
/* Make everything recorded so far visible to readers (records live in a MAP_SHARED mapping of the
 * file, so this is a memory fence plus a clock pair, and opens the file if it is still due).
 * 0 when recording, -1 not. */
int nvtx_recorder_flush(void);
/* Events this process could not record (bound reached, write errors, re-entrant calls). */
uint64_t nvtx_recorder_dropped(void);
/* This process's record file, or NULL when not recording. */
const char *nvtx_recorder_file(void);

#endif
