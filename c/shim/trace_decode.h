/* trace_decode.h - the tracer's bulk helpers (trace_decode.c), in the CFFI module with the shim.
 *
 * The header is also the cdef (build_ffi.py): plain declarations only.
 */
#ifndef NVTX_CFFI_TRACE_DECODE_H
#define NVTX_CFFI_TRACE_DECODE_H

#include <stdint.h>

/* The flags of a decoded event (EVENT_DTYPE's flags; nvtx_cffi.recorder.FLAG_*): a colour was
 * given; the message was cut (set by the reader). */
#define NVTXCFFI_EVENT_COLOR 1
#define NVTXCFFI_EVENT_TRUNCATED 4

/* Decode a block of recorder words (format 2, c/recorder/nvtxrec_format.h: a file's chunk records,
 * chunk headers left out, each chunk cut at its first zero or corrupt word) into `events`: packed
 * 48-byte records of nvtx_cffi.recorder's EVENT_DTYPE (time_ns i8, kind u1, api u1, flags u1,
 * payload_type u1, tid u4, domain u4, message u4, color u4, category u4, payload u8,
 * range_id u8), zeroed by the caller. Event heads (NVTXREC_KIND_*) start a record; extension
 * words (NVTXREC_W_ATTR..NVTXREC_W_RANGE_ID_HI) fill the latest one (none yet: ignored); anything
 * else is skipped. The raw 56-bit time of each event goes to ticks[] (time_ns is the caller's: the
 * clock mapping). Returns the events written, or -1 when there are more than `capacity`. */
int64_t nvtxcffi_decode_events(const uint64_t *words, int64_t n, void *events, uint64_t *ticks,
                               int64_t capacity);

/* Push/pop pairing with one stack per group: kind[i] NVTXREC_KIND_PUSH or NVTXREC_KIND_POP,
 * group[i] in [0, ngroups). Pairs go out in the order of their pops: push_of[k], pop_of[k]
 * (indices into the input); returns their number. level[i]: a push's depth in its group's stack
 * (0: outermost); state[i]: 1 for a pop with nothing open (unmatched), 2 for a push still open at
 * the end, 0 otherwise. top (ngroups) and below (n) are scratch. */
int64_t nvtxcffi_pair_stacks(const uint8_t *kind, const int64_t *group, int64_t n, int64_t ngroups,
                             int64_t *top, int64_t *below, int64_t *level, uint8_t *state, int64_t *push_of,
                             int64_t *pop_of);

/* Start/end pairing (nvtx_cffi/_trace/pairing.py, _pair_async), rows in record order: is_start[i] 1
 * for a start, 0 for an end, matched by the key (domain[i], range_id[i]). An end takes the open
 * start of its key, else waits for a start (replacing an end that waited before it); a start takes
 * the end that waits for its key when that end is not earlier than itself (an earlier one is
 * counted in *unmatched and dropped), else opens (replacing a start still open). Pairs go out in
 * the order of their second row: start_of[k], end_of[k]; returns their number. state[i]: 2 for a
 * start still open at the end, 3 for an end still waiting, 0 otherwise. table (capacity slots, a
 * power of two above n) is scratch; -1 when it is not. */
int64_t nvtxcffi_pair_keys(const uint8_t *is_start, const uint32_t *domain, const uint64_t *range_id,
                           const int64_t *time, int64_t n, int64_t *table, int64_t capacity, uint8_t *state,
                           int64_t *start_of, int64_t *end_of, int64_t *unmatched);

/* Perfetto TracePackets of thread track events (nvtx_cffi/_trace/pftrace.py, _encode_numpy): per
 * row i, TracePacket{timestamp (delta): dt[i], track_event: TrackEvent{type: ev_type[i],
 * [name_iid], [category_iids], [debug annotation {name_iid 1, string_value_iid color_iid}],
 * [debug annotation {name_iid 2, value}]}, then the `seq` bytes (trusted_packet_sequence_id...)},
 * each wrapped as field 1 of Trace. name_iid is written where named[i], the category where
 * cat_iid[i] != 0, the colour where has_color[i], the payload where named[i] and value_kind[i]
 * is not NVTXCFFI_VALUE_NONE: value[i] as int_value (NVTXCFFI_VALUE_INT: its 64 bits as a varint,
 * 10 bytes for a negative int64), uint_value (NVTXCFFI_VALUE_UINT) or double_value
 * (NVTXCFFI_VALUE_DOUBLE: the bits of an IEEE double). Returns the bytes written to out, or -1 past
 * `capacity` (NVTXCFFI_PFTRACE_ROW_MAX + seq_len a row is always enough). */
#define NVTXCFFI_VALUE_NONE 0
#define NVTXCFFI_VALUE_INT 1
#define NVTXCFFI_VALUE_UINT 2
#define NVTXCFFI_VALUE_DOUBLE 3
#define NVTXCFFI_PFTRACE_ROW_MAX 128
int64_t nvtxcffi_pftrace_events(int64_t n, const uint64_t *dt, const uint64_t *ev_type, const uint8_t *named,
                                const uint64_t *name_iid, const uint64_t *cat_iid, const uint8_t *has_color,
                                const uint64_t *color_iid, const uint8_t *value_kind, const uint64_t *value,
                                const uint8_t *seq, int64_t seq_len, uint8_t *out, int64_t capacity);

/* Perfetto TracePackets of counter samples (nvtx_cffi/_trace/pftrace.py, PerfettoWriter.counter): per
 * row i, TracePacket{timestamp: stamp[i] (a varint of its 64 bits), [timestamp_clock_id: 3
 * (MONOTONIC), where absolute[i]], track_event: TrackEvent{type: TYPE_COUNTER, track_uuid:
 * track[i], double_counter_value: the IEEE double whose bits are value[i]}, then the `seq` bytes
 * (trusted_packet_sequence_id...)}, each wrapped as field 1 of Trace. Returns the bytes written to
 * out, or -1 past `capacity` (NVTXCFFI_PFTRACE_COUNTER_MAX + seq_len a row is always enough). */
#define NVTXCFFI_PFTRACE_COUNTER_MAX 64
int64_t nvtxcffi_pftrace_counters(int64_t n, const uint64_t *stamp, const uint8_t *absolute, const uint64_t *track,
                                  const uint64_t *value, const uint8_t *seq, int64_t seq_len, uint8_t *out,
                                  int64_t capacity);

/* Perfetto TracePackets of start/end ranges (nvtx_cffi/_trace/pftrace.py, PerfettoWriter._async_ranges):
 * per row i, on the sequence of the `seq` bytes, three packets: the TrackDescriptor of the range's
 * own track (uuid first_track + i, child of the track `process`, named name i: the name_len[i]
 * bytes at names + name_start[i]); the TYPE_SLICE_BEGIN at start[i] (on the MONOTONIC clock) with
 * the track, the name, the style_len[i] bytes at styles + style_start[i] (the categories and the
 * colour annotation, as they are), the "payload" annotation (value_kind[i] and value[i] as
 * nvtxcffi_pftrace_events takes them) and the "range_id" one (range_id[i]); the TYPE_SLICE_END at
 * end[i], with an "unterminated: true" annotation where `unterminated`. Returns the bytes written
 * to out, or -1 past `capacity` (NVTXCFFI_PFTRACE_ASYNC_MAX + 3 seq_len + 2 name_len[i] +
 * style_len[i] a row is always enough). */
#define NVTXCFFI_PFTRACE_ASYNC_MAX 256
int64_t nvtxcffi_pftrace_async(int64_t n, uint64_t first_track, uint64_t process, const uint8_t *names,
                               const int64_t *name_start, const int64_t *name_len, const uint8_t *styles,
                               const int64_t *style_start, const int64_t *style_len, const uint8_t *value_kind,
                               const uint64_t *value, const uint64_t *range_id, const int64_t *start,
                               const int64_t *end, int unterminated, const uint8_t *seq, int64_t seq_len,
                               uint8_t *out, int64_t capacity);

/* Fixed-width text rows (nvtx_cffi/_fixedwidth.py): row i is `tmpl` (row_len bytes) with
 * column c's value values[c * n + i] (>= 0) printed right-aligned in [offsets[c], offsets[c] +
 * widths[c]): leading zeros where zero_pad[c], else spaces. The value must fit its width. */
void nvtxcffi_fixed_rows(const int64_t *values, int64_t n, int64_t ncols, const int64_t *offsets,
                         const int64_t *widths, const uint8_t *zero_pad, const uint8_t *tmpl, int64_t row_len,
                         uint8_t *out);

int64_t nvtxcffi_join_rows(int64_t n, const uint8_t *pre, const int64_t *pre_start, const int64_t *pre_len,
                           const uint8_t *data, const int64_t *start, const int64_t *length, const uint8_t *post,
                           int64_t post_width, uint8_t *out);

int64_t nvtxcffi_word_bytes(const uint8_t *words, const int64_t *first_word, const int64_t *skip,
                            const int64_t *length, int64_t n, uint8_t *out);

/* Text rows of varying length (nvtx_cffi/_trace/chrome.py: JSON events, NumPy's columns): row i is,
 * for each field f in [0, nfields), the literal lit[lit_at[f] .. lit_at[f + 1]) then field f's
 * text for row i, from value[f * n + i] (v) and aux[f * n + i] (a), by kind[f]:
 *   NVTXCFFI_TEXT_END     nothing (the literal after the last field)
 *   NVTXCFFI_TEXT_INT     v as a signed decimal
 *   NVTXCFFI_TEXT_FRAC    v (0..999) as three digits, zero-padded
 *   NVTXCFFI_TEXT_HEX     v's 64 bits as lowercase hex, no leading zeros
 *   NVTXCFFI_TEXT_BYTES   the a bytes data[v .. v + a)
 *   NVTXCFFI_TEXT_NUMBER  by a: 0 nothing, 1 v as a signed decimal, 2 v's 64 bits as an unsigned one
 *   NVTXCFFI_TEXT_MICROS  v ns (|v| < 2**50) in microseconds, as Python's repr of v / 1000.0 spells
 *                         it: the signed integer part, a point, then the three decimals of |v| % 1000
 *                         without their trailing zeros (one digit at least: "2.0", "-0.25", "7.125")
 * The rows follow one another in out. Returns the bytes written, or -1 when they would pass
 * `capacity` (enough: the literals, the a of each BYTES field and 21 bytes for each number). */
#define NVTXCFFI_TEXT_END 0
#define NVTXCFFI_TEXT_INT 1
#define NVTXCFFI_TEXT_FRAC 2
#define NVTXCFFI_TEXT_HEX 3
#define NVTXCFFI_TEXT_BYTES 4
#define NVTXCFFI_TEXT_NUMBER 5
#define NVTXCFFI_TEXT_MICROS 6
int64_t nvtxcffi_text_rows(int64_t n, int64_t nfields, const uint8_t *kind, const uint8_t *lit, const int64_t *lit_at,
                           const int64_t *value, const int64_t *aux, const uint8_t *data, uint8_t *out,
                           int64_t capacity);

#endif
