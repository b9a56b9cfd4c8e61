/* nvtxrec_format.h - the recording format (version 2): what nvtx-cffi's recorder writes and its
 * readers read. One specification for every side: the recorder (recorder*.c) and the NVTXW
 * backend (writer_*.c) write it; the tracer's C decoder (c/shim/trace_decode.c)
 * includes it; and build_ffi.py feeds it to the CFFI module's cdef, so that nvtx_cffi/recorder.py
 * and the tracer read every constant below as lib.NVTXREC_* and the two structs' layouts through
 * ffi (nvtx_cffi/_recording_format.py). Numbers here are on disk: old recordings must still read,
 * so a code is never renumbered, only added.
 *
 * For the cdef: plain declarations, and "#define NAME <integer>" lines (a trailing comment on the
 * same line at most); other preprocessor lines are C's only.
 *
 * ---- Files (version 2) ----
 * "<dir>/nvtx-<pid>-e<exec generation>-<monotonic ns hex>.nvtxrec", little-endian, one per process
 * image: a program that exec()s keeps its pid but its new image writes a new file with exec_gen + 1
 * (files of the same pid whose proc_start matches are earlier images of the same process).
 *   [0, 4096)  header (struct nvtxrec_file_header, below); dropped/write_errors are live counters.
 *              Space is reserved with posix_fallocate and the header written with pwrite() before
 *              it is mapped, so a full disk is a warning and an unrecorded run, never a SIGBUS.
 *   then chunks, each page-aligned and a whole number of pages, back to back in claim order. A thread
 *   owns one chunk at a time; its first chunk is one page and each next one doubles, up to the chunk
 *   bound, so thousands of short-lived threads cost a page each. A chunk's first 32 bytes are its
 *   header (struct nvtxrec_chunk_header); records follow as 8-byte words up to the first zero word
 *   (the unused rest of a chunk is zero). Readers take chunks in seq order (the order threads
 *   took them), not file order: a chunk the pool claimed ahead may be taken after one its thread
 *   claimed later inline, so one thread's chunks need not lie at increasing offsets.
 *   A chunk that is all zeros was claimed but never written
 *              (a process that records a lot keeps up to 4 chunk_max chunks claimed ahead of use;
 *              at a normal exit those left unused become holes).
 *   A reader that meets a chunk header that does not check out (tag, check word, offset) counts the
 *   bytes as corrupt and looks for the next valid chunk header page by page.
 *
 * Liveness: a process holds flock(LOCK_SH) on its record file from creation until it exits (the
 * kernel drops it at exit, SIGKILL included, and at exec()); a file nobody holds a lock on is
 * finished. Readers test with flock(LOCK_EX | LOCK_NB) (recorder.active_files()).
 *
 * ---- Words ----
 * Every word is a uint64; its low byte is a tag, never 0. A record's first word is written last
 * (release order), so a reader stops at a zero word and never sees half a record.
 *   Event record: a head word, then its optional extension words in this order:
 *     head     tag NVTXREC_KIND_PUSH..MARK (1..5); bits 8..63: time (56 bits, see Time)
 *     ATTR     0x10: bits 8..9 api (NVTXREC_API_*), 16..31 domain id, 32..63 message string id
 *              (0: no message). Absent: api EX, default domain, no message.
 *     COLOR    0x11: bits 32..63 ARGB (present: a colour was given)
 *     CATEGORY 0x12: bits 32..63 category id
 *     PAYLOAD  0x13: bits 8..15 payload type code (NVTXREC_PT_*), 32..63 low 32 bits of the value
 *     PAYLOAD_HI 0x14: bits 32..63 high 32 bits (64-bit types; absent: 0)
 *     RANGE_ID 0x15: bits 8..63 the low 56 bits of the range id of a start / end (always present)
 *     PTYPE_RAW 0x16: bits 32..63 the nvtxPayloadType_t given, when the code is NVTXREC_PT_UNKNOWN
 *     RANGE_ID_HI 0x17: bits 8..15 the top 8 bits of a range id (absent: 0)
 *   Data record (definitions, names, blobs, clock pairs): a head word, tag 0x20..0x2F, bits 8..15
 *     flags (NVTXREC_DFLAG_*), 16..31 domain id, 32..63 data length L; then ceil(L / 7) continuation
 *     words, tag 0xFF, each carrying 7 data bytes in bits 8..63 (the last one zero-padded). Data:
 *     uint64 time, uint64 arg, uint8 aux, then L - 17 bytes of text (UTF-8) or raw bytes.
 *       STRING 0x20       arg: string id; text (registered strings; interned messages: flag MESSAGE)
 *       DOMAIN 0x21       arg: domain id; name
 *       CATEGORY 0x22     arg: category id (domain in the head); name
 *       THREAD_NAME 0x23  arg: OS thread id; name
 *       RESOURCE_NAME 0x24 arg: handle; aux: NVTXREC_RES_*; name
 *       BLOB 0x25         arg: caller's; aux: NVTXREC_BLOB_*; raw bytes
 *       CLOCK 0x26        time: a TSC value (relative, see Time); arg: CLOCK_MONOTONIC ns then
 *   String ids are per file: every message (ASCII, wide, registered) is interned once per process
 *   and events carry its id; a forked child re-records the definitions it inherited (flag INHERITED):
 *   domains, categories, strings, and the payload schema, counter group and scope BLOBs.
 *
 * ---- Time ----
 * header.clock NVTXREC_CLOCK_MONOTONIC: a time is CLOCK_MONOTONIC ns - header.start_ns.
 * header.clock NVTXREC_CLOCK_TSC: a time is TSC ticks - header.tsc0, and CLOCK records pair TSC
 * readings with CLOCK_MONOTONIC: every chunk starts with one, every thread writes one at least every
 * 2^20 ticks of activity, at flush and at exit. header (tsc0, start_ns) is the first pair;
 * header.ns_per_tick (a double) is a 200 us calibration made at start. Readers map TSC to
 * CLOCK_MONOTONIC by interpolating between the pairs (sorted by TSC) and extrapolate past the last
 * one with the slope of all pairs (or ns_per_tick when they span less than 10 ms).
 */
#ifndef NVTX_CFFI_NVTXREC_FORMAT_H
#define NVTX_CFFI_NVTXREC_FORMAT_H

#include <stdint.h>

#define NVTXREC_VERSION 2
#define NVTXREC_HEADER_SIZE 4096
/* The file's first 8 bytes (no NUL): "NVTXREC" and the version digit. */
#define NVTXREC_MAGIC_TEXT_(version) "NVTXREC" #version
#define NVTXREC_MAGIC_TEXT(version) NVTXREC_MAGIC_TEXT_(version)
#define NVTXREC_MAGIC NVTXREC_MAGIC_TEXT(NVTXREC_VERSION)

/* event kinds (head tags); the readers name them by their lower-case suffix */
#define NVTXREC_KIND_PUSH 1
#define NVTXREC_KIND_POP 2
#define NVTXREC_KIND_START 3
#define NVTXREC_KIND_END 4
#define NVTXREC_KIND_MARK 5

/* extension word tags: NVTXREC_W_ATTR..NVTXREC_W_RANGE_ID_HI */
#define NVTXREC_W_ATTR 0x10
#define NVTXREC_W_COLOR 0x11
#define NVTXREC_W_CATEGORY 0x12
#define NVTXREC_W_PAYLOAD 0x13
#define NVTXREC_W_PAYLOAD_HI 0x14
#define NVTXREC_W_RANGE_ID 0x15
#define NVTXREC_W_PTYPE_RAW 0x16
#define NVTXREC_W_RANGE_ID_HI 0x17

/* data record tags: NVTXREC_D_STRING..NVTXREC_D_CLOCK; a definition's event kind in the readers is
 * the lower-case suffix */
#define NVTXREC_D_STRING 0x20
#define NVTXREC_D_DOMAIN 0x21
#define NVTXREC_D_CATEGORY 0x22
#define NVTXREC_D_THREAD_NAME 0x23
#define NVTXREC_D_RESOURCE_NAME 0x24
#define NVTXREC_D_BLOB 0x25
#define NVTXREC_D_CLOCK 0x26
#define NVTXREC_W_CONT 0xFF
#define NVTXREC_DATA_FIXED 17 /* time, arg, aux */

/* chunk header tag */
#define NVTXREC_CHUNK_TAG 0x30
#define NVTXREC_CHUNK_CHECK 0x4E565443u

/* entry point family (ATTR bits 8..9, data record flags bits 4..5) */
#define NVTXREC_API_EX 0      /* nvtxMarkEx, nvtxRangePushEx, nvtxRangePop, nvtxRangeEnd, ... */
#define NVTXREC_API_ASCII 1   /* ...A */
#define NVTXREC_API_UNICODE 2 /* ...W */
#define NVTXREC_API_DOMAIN 3  /* nvtxDomain{Mark,RangeStart,RangePush}Ex, nvtxDomainRange{Pop,End} */

/* data record flags */
#define NVTXREC_DFLAG_INHERITED 1u /* a forked child's copy of a parent definition, not an event */
#define NVTXREC_DFLAG_TRUNCATED 2u /* text / bytes were cut (64 KiB bound) */
#define NVTXREC_DFLAG_MESSAGE 8u   /* STRING: an interned event message, not a registration call */
#define NVTXREC_DFLAG_API_SHIFT 4  /* bits 4..5: NVTXREC_API_* of the naming call */

/* Payload type codes (PAYLOAD bits 8..15): the one numbering of payload kinds, also the kind the
 * CFFI shim and the accelerator pass along with a per-call payload (NONE, INT64, UINT64, DOUBLE)
 * and the one nvtx_cffi's Python code gives a binary payload (EXT). A value type's name says how
 * its bits read (nvtx_cffi/_recording_format.py): UINT<n> and INT<n> an n-bit little-endian
 * integer, FLOAT and DOUBLE an IEEE binary32 and binary64; the readers name it in lower case. */
#define NVTXREC_PT_NONE 0
#define NVTXREC_PT_UINT64 1
#define NVTXREC_PT_INT64 2
#define NVTXREC_PT_DOUBLE 3
#define NVTXREC_PT_UINT32 4
#define NVTXREC_PT_INT32 5
#define NVTXREC_PT_FLOAT 6
#define NVTXREC_PT_EXT 7     /* a binary payload (payload extension): its bytes are PAYLOAD blobs */
#define NVTXREC_PT_UNKNOWN 8 /* a type the recorder does not know: PTYPE_RAW holds it */

/* resource kinds (RESOURCE_NAME aux); the readers name them by their lower-case suffix */
#define NVTXREC_RES_CUDA_DEVICE 1
#define NVTXREC_RES_CUDA_CONTEXT 2
#define NVTXREC_RES_CUDA_STREAM 3
#define NVTXREC_RES_CUDA_EVENT 4

/* blob kinds (BLOB aux); the readers name them by their lower-case suffix */
#define NVTXREC_BLOB_SCHEMA 1         /* a payload schema registration (nvtxPayloadSchemaRegister) */
#define NVTXREC_BLOB_COUNTER_GROUP 2  /* a counter (group) registration */
#define NVTXREC_BLOB_COUNTER_SAMPLE 3 /* one sample of a counter (group) */
#define NVTXREC_BLOB_PAYLOAD 4        /* a binary payload attached to an event */
#define NVTXREC_BLOB_SCOPE 5          /* a counter scope registration (its path) */
/* 6..63 reserved for nvtx-cffi; 64..255 free for experiments */

#define NVTXREC_CLOCK_MONOTONIC 0
#define NVTXREC_CLOCK_TSC 1

/* string id of the shared entry used once the string table is full */
#define NVTXREC_STRING_OVERFLOW 0xFFFFFFFFu

/* Both headers are packed by their own layout (no padding): the readers unpack them field by field. */
struct nvtxrec_file_header {
    char magic[8];            /* NVTXREC_MAGIC, written with the rest by one pwrite */
    uint32_t version;         /* NVTXREC_VERSION */
    uint32_t header_size;     /* NVTXREC_HEADER_SIZE */
    uint32_t page_size;       /* chunk alignment */
    uint32_t pid;
    uint32_t ppid;
    uint32_t exec_gen;        /* 0: first image of this process; +1 per exec() */
    uint64_t start_ns;        /* CLOCK_MONOTONIC at file creation */
    uint64_t start_realtime_ns;
    uint64_t max_bytes;       /* file size bound */
    uint64_t proc_start;      /* /proc/self/stat starttime: equal for all images of one process */
    uint32_t clock;           /* NVTXREC_CLOCK_* */
    uint32_t chunk_max;       /* largest chunk */
    uint64_t tsc0;            /* TSC at start_ns (clock TSC) */
    double ns_per_tick;       /* calibration made at start (clock TSC; 0 otherwise) */
    uint64_t dropped;         /* live: events not recorded (bound reached, write errors) */
    uint64_t write_errors;    /* live: chunk allocation failures (disk full, ...) */
    uint64_t run_id;          /* NVTX_CFFI_RECORD_RUN (hex): the same in every process of one run; 0: none given */
};

struct nvtxrec_chunk_header {
    uint64_t tag_size;  /* NVTXREC_CHUNK_TAG | chunk size in bytes << 32 */
    uint32_t tid;       /* the thread that owns the chunk (gettid) */
    uint32_t check;     /* NVTXREC_CHUNK_CHECK ^ size ^ tid ^ (uint32_t)offset ^ (uint32_t)seq */
    uint64_t offset;    /* the chunk's own file offset */
    uint64_t seq;       /* the order threads took their chunks in (1, 2, ...; 0: files before it) */
};

#endif
