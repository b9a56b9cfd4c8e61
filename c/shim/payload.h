/* payload.h - counters and extended (binary) payloads: NVTX's payload and counters extensions
 * (nvToolsExtPayload.h, nvToolsExtCounters.h) behind small-int tables, like nvtx_shim.h.
 *
 * build_ffi.py feeds this file (minus its preprocessor lines) to ffi.cdef(): plain declarations
 * only, and no NVTX types (they stay in payload.c). Plain C, no Python C API.
 *
 * Model:
 *   - schemas are registered from a description (nvtxcffi_schema_entry rows) and answered with the
 *     tool's schema id; Python caches them per domain and dtype.
 *   - counters live in a C table (domain handle + counter id), addressed by a small int; the table
 *     never moves or shrinks. Hot calls take that int; an index out of range is ignored.
 *   - the first NVTXCFFI_FAST_COUNTERS int64 and float64 counters also get a one-argument sample
 *     function of their own (nvtxcffi_sample_i64_K / _f64_K): the cheapest call CFFI has (METH_O),
 *     which Python binds as the counter's `sample` attribute.
 *   - a binary payload for a range or mark is one nvtxPayloadData_t built on the stack around the
 *     caller's bytes (nvtxcffi_emit_ext): nothing is kept.
 */
#ifndef NVTX_CFFI_PAYLOAD_H
#define NVTX_CFFI_PAYLOAD_H

#include <stddef.h>
#include <stdint.h>

#define NVTXCFFI_MAX_COUNTERS 65536
#define NVTXCFFI_MAX_SCHEMA_ENTRIES 4096
#define NVTXCFFI_FAST_COUNTERS 32

/* One schema entry (nvtxPayloadSchemaEntry_t without its pointers to semantics structs):
 * semantics indexes the semantics array given with it (-1: none). */
typedef struct {
    uint64_t flags;
    uint64_t type;
    const char *name;
    const char *description;
    uint64_t array_detail;
    uint64_t offset;
    int semantics;
} nvtxcffi_schema_entry;

/* nvtxSemanticsCounter_t's fields; limits are the 64 bits of the union as given. */
typedef struct {
    uint64_t flags;
    const char *unit;
    uint64_t scale_numerator;
    uint64_t scale_denominator;
    int64_t limit_type;
    uint64_t min_bits;
    uint64_t max_bits;
} nvtxcffi_counter_semantics;

/* nvtxPayloadSchemaRegister. Returns the schema id, 0 on failure (no tool, bad arguments). */
uint64_t nvtxcffi_schema_register(int domain, uint64_t field_mask, uint64_t schema_type,
                                  uint64_t schema_flags, size_t static_size,
                                  const nvtxcffi_schema_entry *entries, size_t count,
                                  const nvtxcffi_counter_semantics *semantics, size_t semantics_count);

/* nvtxScopeRegister(path) with no parent; 0 (NVTX_SCOPE_NONE) on failure. */
uint64_t nvtxcffi_scope_register(int domain, const char *path);

/* nvtxCounterRegister with time semantics (time_domain) chained to optional counter semantics.
 * Returns the counter's index in the C table, -1 when the table is full or an argument is bad. */
int nvtxcffi_counter_register(int domain, uint64_t schema_id, const char *name,
                              const char *description, uint64_t scope_id, uint64_t time_domain,
                              const nvtxcffi_counter_semantics *semantics);
int nvtxcffi_counter_count(void);
/* The NVTX counter id the tool gave counter `counter` (0 if none). */
uint64_t nvtxcffi_counter_id(int counter);

/* Samples. */
void nvtxcffi_counter_sample_int64(int counter, int64_t value);
void nvtxcffi_counter_sample_float64(int counter, double value);
void nvtxcffi_counter_sample(int counter, const void *data, size_t size);
void nvtxcffi_counter_sample_no_value(int counter, uint8_t reason);
void nvtxcffi_counter_batch(int counter, const void *values, size_t values_size,
                            const int64_t *timestamps, size_t timestamps_size, uint64_t flags);

/* nvtxTimestampGet (0 when no tool provides time). */
int64_t nvtxcffi_timestamp(void);

/* A range/mark with an extended payload: op NVTXCFFI_OP_* on a prepared slot (slot >= 0) or with
 * an inline message (slot -1: domain, message, color, category). The payload is one
 * nvtxPayloadData_t {schema_id, size, data}. Returns the range id for NVTXCFFI_OP_START. */
uint64_t nvtxcffi_emit_ext(int op, int slot, int domain, const char *message, uint32_t color,
                           uint32_t category, uint64_t schema_id, const void *data, size_t size);

/* nvtxcffi_emit_ext for an array payload of a dynamic-size schema ({uint64 count; data[count]}):
 * sends the bytes of count, then the nbytes at data, as one payload (copied into one buffer: on
 * the stack up to 4 KiB, else malloc'd; when malloc fails the event goes with an empty payload). */
uint64_t nvtxcffi_emit_ext_counted(int op, int slot, int domain, const char *message, uint32_t color,
                                   uint32_t category, uint64_t schema_id, const void *data, size_t nbytes,
                                   uint64_t count);

/* nvtxcffi_counter_sample from a char buffer (a Python bytes, passed without a copy). */
void nvtxcffi_counter_sample_bytes(int counter, const char *data, size_t size);

/* The domain index of prepared slot `slot` (nvtx_shim.c), -1 if there is none. */
int nvtxcffi_slot_domain(int slot);

/* The one-argument samples of the first NVTXCFFI_FAST_COUNTERS int64 / float64 counters:
 * nvtxcffi_sample_i64_K samples the counter fast_i64[K] names (set when it is registered). */
int nvtxcffi_fast_counter(int counter); /* K for this counter, or -1 (float64 / int64 by kind) */
void nvtxcffi_sample_i64_0(int64_t v); void nvtxcffi_sample_i64_1(int64_t v); void nvtxcffi_sample_i64_2(int64_t v); void nvtxcffi_sample_i64_3(int64_t v);
void nvtxcffi_sample_i64_4(int64_t v); void nvtxcffi_sample_i64_5(int64_t v); void nvtxcffi_sample_i64_6(int64_t v); void nvtxcffi_sample_i64_7(int64_t v);
void nvtxcffi_sample_i64_8(int64_t v); void nvtxcffi_sample_i64_9(int64_t v); void nvtxcffi_sample_i64_10(int64_t v); void nvtxcffi_sample_i64_11(int64_t v);
void nvtxcffi_sample_i64_12(int64_t v); void nvtxcffi_sample_i64_13(int64_t v); void nvtxcffi_sample_i64_14(int64_t v); void nvtxcffi_sample_i64_15(int64_t v);
void nvtxcffi_sample_i64_16(int64_t v); void nvtxcffi_sample_i64_17(int64_t v); void nvtxcffi_sample_i64_18(int64_t v); void nvtxcffi_sample_i64_19(int64_t v);
void nvtxcffi_sample_i64_20(int64_t v); void nvtxcffi_sample_i64_21(int64_t v); void nvtxcffi_sample_i64_22(int64_t v); void nvtxcffi_sample_i64_23(int64_t v);
void nvtxcffi_sample_i64_24(int64_t v); void nvtxcffi_sample_i64_25(int64_t v); void nvtxcffi_sample_i64_26(int64_t v); void nvtxcffi_sample_i64_27(int64_t v);
void nvtxcffi_sample_i64_28(int64_t v); void nvtxcffi_sample_i64_29(int64_t v); void nvtxcffi_sample_i64_30(int64_t v); void nvtxcffi_sample_i64_31(int64_t v);
void nvtxcffi_sample_f64_0(double v); void nvtxcffi_sample_f64_1(double v); void nvtxcffi_sample_f64_2(double v); void nvtxcffi_sample_f64_3(double v);
void nvtxcffi_sample_f64_4(double v); void nvtxcffi_sample_f64_5(double v); void nvtxcffi_sample_f64_6(double v); void nvtxcffi_sample_f64_7(double v);
void nvtxcffi_sample_f64_8(double v); void nvtxcffi_sample_f64_9(double v); void nvtxcffi_sample_f64_10(double v); void nvtxcffi_sample_f64_11(double v);
void nvtxcffi_sample_f64_12(double v); void nvtxcffi_sample_f64_13(double v); void nvtxcffi_sample_f64_14(double v); void nvtxcffi_sample_f64_15(double v);
void nvtxcffi_sample_f64_16(double v); void nvtxcffi_sample_f64_17(double v); void nvtxcffi_sample_f64_18(double v); void nvtxcffi_sample_f64_19(double v);
void nvtxcffi_sample_f64_20(double v); void nvtxcffi_sample_f64_21(double v); void nvtxcffi_sample_f64_22(double v); void nvtxcffi_sample_f64_23(double v);
void nvtxcffi_sample_f64_24(double v); void nvtxcffi_sample_f64_25(double v); void nvtxcffi_sample_f64_26(double v); void nvtxcffi_sample_f64_27(double v);
void nvtxcffi_sample_f64_28(double v); void nvtxcffi_sample_f64_29(double v); void nvtxcffi_sample_f64_30(double v); void nvtxcffi_sample_f64_31(double v);

#endif
