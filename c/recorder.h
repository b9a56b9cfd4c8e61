/* recorder.h - file format and in-process C API of nvtx-cffi's NVTX recorder (libnvtx_recorder.so).
 *
 * The recorder is an NVTX v3 injection library: a process started with
 *   NVTX_INJECTION64_PATH=/path/to/libnvtx_recorder.so  NVTX_CFFI_RECORD_DIR=/some/dir
 * records every NVTX event of every NVTX client in it (each client calls InitializeInjectionNvtx2
 * once; all state here is process-global). NVTX_CFFI_RECORD_DIR unset: handlers are installed
 * (domains, string handles, range ids and push levels still work) but nothing is recorded.
 * The directory is created (one level) if missing. NVTX_CFFI_RECORD_MAX_BYTES bounds the file
 * (default 4 GiB); NVTX_CFFI_RECORD_CHUNK_BYTES sets the per-thread chunk (default 256 KiB).
 *
 * File "<dir>/nvtx-<pid>-<monotonic ns hex>.nvtxrec", little-endian:
 *   [0, 4096)  header (struct nvtxrec_file_header); dropped/write_errors are live counters.
 *   then chunks of chunk_size bytes at header_size + k * chunk_size (the last may be shorter: the
 *   file ends there). A thread owns one chunk at a time and appends records to it; the unused
 *   rest of a chunk is zero. A chunk never written (allocation failed) is a hole of zeros.
 * Record: struct nvtxrec_record (56 bytes) then text_len bytes of UTF-8 text, padded to 8.
 * Its first word (size, a multiple of 8, >= 56) is stored last with release order: a reader
 * walking a chunk stops at a size of 0, or one that would leave the chunk or the file.
 */
#ifndef NVTX_CFFI_RECORDER_H
#define NVTX_CFFI_RECORDER_H

#include <stdint.h>

#define NVTXREC_MAGIC "NVTXREC1"
#define NVTXREC_VERSION 1
#define NVTXREC_HEADER_SIZE 4096

/* record kinds */
#define NVTXREC_KIND_PUSH 1
#define NVTXREC_KIND_POP 2
#define NVTXREC_KIND_START 3
#define NVTXREC_KIND_END 4
#define NVTXREC_KIND_MARK 5
#define NVTXREC_KIND_DOMAIN 6
#define NVTXREC_KIND_STRING 7
#define NVTXREC_KIND_CATEGORY 8
#define NVTXREC_KIND_THREAD_NAME 9
#define NVTXREC_KIND_RESOURCE_NAME 10
#define NVTXREC_KIND_BLOB 11 /* aux: NVTXREC_BLOB_* (recorder_internal.h); text: the raw bytes */

/* entry point family */
#define NVTXREC_API_EX 0      /* nvtxMarkEx, nvtxRangePushEx, nvtxRangePop, nvtxRangeEnd, ... */
#define NVTXREC_API_ASCII 1   /* ...A */
#define NVTXREC_API_UNICODE 2 /* ...W */
#define NVTXREC_API_DOMAIN 3  /* nvtxDomain{Mark,RangeStart,RangePush}Ex, nvtxDomainRange{Pop,End} */

/* flags */
#define NVTXREC_FLAG_COLOR 1u     /* color is an ARGB colour given by the caller */
#define NVTXREC_FLAG_TEXT 2u      /* the record has a message / name (possibly empty) */
#define NVTXREC_FLAG_TRUNCATED 4u /* text was cut to fit a chunk */
#define NVTXREC_FLAG_INHERITED 8u /* a forked child's copy of a parent definition, not an event */

/* aux: message type (0 none, 1 ascii, 2 unicode, 3 registered) for event records;
 * resource kind for resource_name records: */
#define NVTXREC_RES_CUDA_DEVICE 1
#define NVTXREC_RES_CUDA_CONTEXT 2
#define NVTXREC_RES_CUDA_STREAM 3
#define NVTXREC_RES_CUDA_EVENT 4

struct nvtxrec_file_header {
    char magic[8];            /* NVTXREC_MAGIC, written last at creation */
    uint32_t version;         /* NVTXREC_VERSION */
    uint32_t header_size;     /* NVTXREC_HEADER_SIZE */
    uint32_t chunk_size;      /* bytes per chunk (multiple of the page size) */
    uint32_t pid;
    uint32_t ppid;
    uint32_t record_size;     /* sizeof(struct nvtxrec_record) */
    uint64_t start_ns;        /* CLOCK_MONOTONIC at file creation */
    uint64_t start_realtime_ns;
    uint64_t max_bytes;       /* file size bound */
    uint64_t dropped;         /* live: events not recorded (bound reached, write errors) */
    uint64_t write_errors;    /* live: chunk allocation failures (disk full, ...) */
};

struct nvtxrec_record {
    uint32_t size;         /* whole record incl. text and padding; written last */
    uint8_t kind;          /* NVTXREC_KIND_* */
    uint8_t api;           /* NVTXREC_API_* */
    uint8_t flags;         /* NVTXREC_FLAG_* */
    uint8_t aux;           /* message type or resource kind */
    uint32_t tid;          /* gettid() */
    uint32_t category;     /* event category; category id for category records */
    uint64_t time_ns;      /* CLOCK_MONOTONIC */
    uint32_t domain;       /* 0: NVTX's default domain; else the recorder's domain id */
    uint32_t color;        /* ARGB when NVTXREC_FLAG_COLOR */
    int32_t payload_type;  /* nvtxPayloadType_t as given (0 none) */
    uint32_t text_len;     /* bytes of UTF-8 text after the record */
    uint64_t payload;      /* raw payload bits */
    uint64_t arg;          /* range id (start/end), string id, thread id, resource handle, domain id */
};

/* In-process API (for ctypes). */
/* Make everything recorded so far visible to readers (records live in a MAP_SHARED mapping of the
 * file, so this is a memory fence and opens the file if it is still due). 0 when recording, -1 not. */
int nvtx_recorder_flush(void);
/* Events this process could not record (bound reached, write errors, re-entrant calls). */
uint64_t nvtx_recorder_dropped(void);
/* This process's record file, or NULL when not recording. */
const char *nvtx_recorder_file(void);

#endif
