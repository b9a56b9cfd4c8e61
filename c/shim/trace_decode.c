/* trace_decode.c - the tracer's bulk helpers: see trace_decode.h. */
#include "trace_decode.h"

#include <string.h>

#include "nvtxrec_format.h"

/* keep_gil.h (compiled into the same CFFI module) strips the GIL release from every cffi wrapper,
 * which suits the shim's nanosecond calls but not these, which run for up to seconds: each releases
 * the GIL itself when its input is big enough for that to be worth a switch, so the tracer's
 * prefetch thread reads while the writer writes, and other threads run. The buffers stay valid:
 * the Python caller holds them (and an mmap with an exported buffer cannot be closed). */
void *nvtxcffi_gil_release(void);
void nvtxcffi_gil_restore(void *state);
#define RELEASE_GIL_FROM 65536

#define WITHOUT_GIL(n, call)                                                  \
    do {                                                                       \
        void *gil_state_ = (n) >= RELEASE_GIL_FROM ? nvtxcffi_gil_release() : NULL; \
        call;                                                                  \
        if (gil_state_ != NULL)                                                \
            nvtxcffi_gil_restore(gil_state_);                                  \
    } while (0)

enum {
    EV_SIZE = 48,
    OFF_KIND = 8, OFF_API = 9, OFF_FLAGS = 10, OFF_PTYPE = 11, OFF_DOMAIN = 16, OFF_MESSAGE = 20,
    OFF_COLOR = 24, OFF_CATEGORY = 28, OFF_PAYLOAD = 32, OFF_RANGE_ID = 40,
};

static void put32(unsigned char *rec, int off, uint32_t v) { memcpy(rec + off, &v, 4); }

static void or64(unsigned char *rec, int off, uint64_t v)
{
    uint64_t x;
    memcpy(&x, rec + off, 8);
    x |= v;
    memcpy(rec + off, &x, 8);
}

static int64_t decode_events(const uint64_t *words, int64_t n, void *events, uint64_t *ticks,
                             int64_t capacity)
{
    unsigned char *base = (unsigned char *)events;
    unsigned char *rec = NULL;
    int64_t e = 0;
    for (int64_t i = 0; i < n; i++) {
        uint64_t w = words[i];
        unsigned tag = (unsigned)(w & 0xFF);
        if (tag >= NVTXREC_KIND_PUSH && tag <= NVTXREC_KIND_MARK) {
            if (e >= capacity)
                return -1;
            rec = base + e * EV_SIZE;
            rec[OFF_KIND] = (unsigned char)tag;
            ticks[e++] = w >> 8;
            continue;
        }
        if (tag < NVTXREC_W_ATTR || tag > NVTXREC_W_RANGE_ID_HI || rec == NULL)
            continue;
        uint32_t hi = (uint32_t)(w >> 32);
        switch (tag) {
        case NVTXREC_W_ATTR:
            rec[OFF_API] = (unsigned char)((w >> 8) & 3);
            put32(rec, OFF_DOMAIN, (uint32_t)((w >> 16) & 0xFFFF));
            put32(rec, OFF_MESSAGE, hi);
            break;
        case NVTXREC_W_COLOR:
            put32(rec, OFF_COLOR, hi);
            rec[OFF_FLAGS] |= NVTXCFFI_EVENT_COLOR;
            break;
        case NVTXREC_W_CATEGORY:
            put32(rec, OFF_CATEGORY, hi);
            break;
        case NVTXREC_W_PAYLOAD:
            rec[OFF_PTYPE] = (unsigned char)((w >> 8) & 0xFF);
            or64(rec, OFF_PAYLOAD, hi);
            break;
        case NVTXREC_W_PAYLOAD_HI:
            or64(rec, OFF_PAYLOAD, (uint64_t)hi << 32);
            break;
        case NVTXREC_W_RANGE_ID:
            or64(rec, OFF_RANGE_ID, w >> 8);
            break;
        case NVTXREC_W_RANGE_ID_HI:
            or64(rec, OFF_RANGE_ID, ((w >> 8) & 0xFF) << 56);
            break;
        default: /* NVTXREC_W_PTYPE_RAW: not a column */
            break;
        }
    }
    return e;
}

static int64_t pair_stacks(const uint8_t *kind, const int64_t *group, int64_t n, int64_t ngroups,
                           int64_t *top, int64_t *below, int64_t *level, uint8_t *state, int64_t *push_of,
                           int64_t *pop_of)
{
    int64_t pairs = 0;
    for (int64_t g = 0; g < ngroups; g++)
        top[g] = -1;
    for (int64_t i = 0; i < n; i++) {
        int64_t g = group[i];
        int64_t t = top[g];
        if (kind[i] == NVTXREC_KIND_PUSH) {
            below[i] = t;
            level[i] = t < 0 ? 0 : level[t] + 1;
            state[i] = 2;
            top[g] = i;
        } else if (t < 0) {
            level[i] = 0;
            state[i] = 1;
        } else {
            level[i] = 0;
            state[i] = 0;
            state[t] = 0;
            push_of[pairs] = t;
            pop_of[pairs++] = i;
            top[g] = below[t];
        }
    }
    return pairs;
}

enum { KEY_EMPTY = -1, KEY_GONE = -2 };

/* The slot of the pending row of key (domain, range_id) in an open-addressing table (linear
 * probing, deleted slots KEY_GONE), or, when it has none, the slot where one goes (*found 0). */
static int64_t key_slot(const int64_t *table, int64_t mask, const uint32_t *domain, const uint64_t *range_id,
                        uint32_t dom, uint64_t rid, int *found)
{
    uint64_t h = (rid ^ ((uint64_t)dom << 40) ^ (rid >> 29)) * 0x9E3779B97F4A7C15ULL;
    int64_t slot = (int64_t)(h >> 20) & mask;
    int64_t free_slot = -1;
    for (;; slot = (slot + 1) & mask) {
        int64_t row = table[slot];
        if (row == KEY_EMPTY) {
            *found = 0;
            return free_slot >= 0 ? free_slot : slot;
        }
        if (row == KEY_GONE) {
            if (free_slot < 0)
                free_slot = slot;
        } else if (range_id[row] == rid && domain[row] == dom) {
            *found = 1;
            return slot;
        }
    }
}

static int64_t pair_keys(const uint8_t *is_start, const uint32_t *domain, const uint64_t *range_id,
                         const int64_t *time, int64_t n, int64_t *table, int64_t capacity, uint8_t *state,
                         int64_t *start_of, int64_t *end_of, int64_t *unmatched)
{
    int64_t pairs = 0;
    int64_t mask = capacity - 1;
    for (int64_t s = 0; s < capacity; s++)
        table[s] = KEY_EMPTY;
    *unmatched = 0;
    for (int64_t i = 0; i < n; i++) {
        int found;
        int64_t slot = key_slot(table, mask, domain, range_id, domain[i], range_id[i], &found);
        int64_t other = found ? table[slot] : -1;
        state[i] = 0;
        if (other >= 0 && is_start[i] != is_start[other] && (!is_start[i] || time[other] >= time[i])) {
            state[other] = 0;
            start_of[pairs] = is_start[i] ? i : other;
            end_of[pairs++] = is_start[i] ? other : i;
            table[slot] = KEY_GONE;
            continue;
        }
        if (other >= 0) {
            if (is_start[i] && !is_start[other])
                ++*unmatched; /* an end from before this start: not its end */
            state[other] = 0;
        }
        state[i] = is_start[i] ? 2 : 3;
        table[slot] = i;
    }
    return pairs;
}

static int varint_len(uint64_t v)
{
    int n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static uint8_t *put_varint(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

static uint8_t *put_fixed64(uint8_t *p, uint64_t v)
{
    for (int k = 0; k < 8; k++) /* little-endian */
        *p++ = (uint8_t)(v >> (8 * k));
    return p;
}

/* What put_packet writes before the te_len bytes of its track event; returns where they go. */
static uint8_t *put_packet_head(uint8_t *p, uint64_t stamp, int on_monotonic, uint64_t te_len, int64_t seq_len)
{
    uint64_t pk_len = 1 + (uint64_t)varint_len(stamp) + (on_monotonic ? 3 : 0) + 1 + (uint64_t)varint_len(te_len)
                      + te_len + (uint64_t)seq_len;
    *p++ = 0x0a;
    p = put_varint(p, pk_len);
    *p++ = 0x40;
    p = put_varint(p, stamp);
    if (on_monotonic) {
        *p++ = 0xd0;
        *p++ = 0x03;
        *p++ = 0x03;
    }
    *p++ = 0x5a;
    return put_varint(p, te_len);
}

/* Trace{packet: TracePacket{timestamp: stamp, [timestamp_clock_id: 3 (MONOTONIC), where
 * on_monotonic], track_event: the te_len bytes te, then the seq bytes}}; returns the end. */
static uint8_t *put_packet(uint8_t *p, uint64_t stamp, int on_monotonic, const uint8_t *te, uint64_t te_len,
                           const uint8_t *seq, int64_t seq_len)
{
    p = put_packet_head(p, stamp, on_monotonic, te_len, seq_len);
    memcpy(p, te, te_len);
    p += te_len;
    memcpy(p, seq, (size_t)seq_len);
    return p + seq_len;
}

static uint8_t *put_bytes(uint8_t *p, const void *data, size_t len)
{
    memcpy(p, data, len);
    return p + len;
}

/* DebugAnnotation{name: "payload", int_value | uint_value | double_value}, as pftrace_events spells
 * its value (NVTXCFFI_VALUE_*); 0 bytes for none. put: write it (else only its length). */
static uint64_t payload_annotation(uint8_t **at, int put, uint8_t kind, uint64_t value)
{
    if (kind == NVTXCFFI_VALUE_NONE)
        return 0;
    uint64_t field = kind == NVTXCFFI_VALUE_DOUBLE ? 9 : 1 + (uint64_t)varint_len(value);
    if (put) {
        uint8_t *p = *at;
        *p++ = 0x22;
        *p++ = (uint8_t)(9 + field);
        p = put_bytes(p, "\x52\x07payload", 9);
        if (kind == NVTXCFFI_VALUE_DOUBLE) {
            *p++ = 0x29;
            p = put_fixed64(p, value);
        } else {
            *p++ = kind == NVTXCFFI_VALUE_UINT ? 0x18 : 0x20;
            p = put_varint(p, value);
        }
        *at = p;
    }
    return 2 + 9 + field;
}

static int64_t pftrace_async(int64_t n, uint64_t first_track, uint64_t process, const uint8_t *names,
                             const int64_t *name_start, const int64_t *name_len, const uint8_t *styles,
                             const int64_t *style_start, const int64_t *style_len, const uint8_t *value_kind,
                             const uint64_t *value, const uint64_t *range_id, const int64_t *start,
                             const int64_t *end, int unterminated, const uint8_t *seq, int64_t seq_len,
                             uint8_t *out, int64_t capacity)
{
    static const uint8_t unterminated_annotation[] = "\x22\x10\x52\x0cunterminated\x10\x01";
    uint8_t *p = out;
    if (seq_len < 0 || seq_len > 64)
        return -1;
    for (int64_t i = 0; i < n; i++) {
        uint64_t track = first_track + (uint64_t)i;
        uint64_t nlen = (uint64_t)name_len[i];
        const uint8_t *name = names + name_start[i];
        if ((p - out) + NVTXCFFI_PFTRACE_ASYNC_MAX + 3 * seq_len + 2 * name_len[i] + style_len[i] > capacity)
            return -1;
        /* TracePacket{seq, track_descriptor (60): {uuid (1), parent_uuid (5), name (2)}} */
        uint64_t desc_len = 1 + (uint64_t)varint_len(track) + 1 + (uint64_t)varint_len(process) + 1
                            + (uint64_t)varint_len(nlen) + nlen;
        *p++ = 0x0a;
        p = put_varint(p, (uint64_t)seq_len + 2 + (uint64_t)varint_len(desc_len) + desc_len);
        p = put_bytes(p, seq, (size_t)seq_len);
        *p++ = 0xe2;
        *p++ = 0x03;
        p = put_varint(p, desc_len);
        *p++ = 0x08;
        p = put_varint(p, track);
        *p++ = 0x28;
        p = put_varint(p, process);
        *p++ = 0x12;
        p = put_varint(p, nlen);
        p = put_bytes(p, name, nlen);
        /* TrackEvent{type: BEGIN, track_uuid (11), name (23), the style, payload, range_id} */
        uint64_t rid_len = 11 + (uint64_t)varint_len(range_id[i]);
        uint64_t te_len = 2 + 1 + (uint64_t)varint_len(track) + 2 + (uint64_t)varint_len(nlen) + nlen
                          + (uint64_t)style_len[i] + payload_annotation(NULL, 0, value_kind[i], value[i])
                          + 2 + rid_len;
        p = put_packet_head(p, (uint64_t)start[i], 1, te_len, seq_len);
        *p++ = 0x48;
        *p++ = 0x01;
        *p++ = 0x58;
        p = put_varint(p, track);
        *p++ = 0xba;
        *p++ = 0x01;
        p = put_varint(p, nlen);
        p = put_bytes(p, name, nlen);
        p = put_bytes(p, styles + style_start[i], (size_t)style_len[i]);
        payload_annotation(&p, 1, value_kind[i], value[i]);
        *p++ = 0x22;
        *p++ = (uint8_t)rid_len;
        p = put_bytes(p, "\x52\x08range_id\x18", 11);
        p = put_varint(p, range_id[i]);
        p = put_bytes(p, seq, (size_t)seq_len);
        /* TrackEvent{type: END, track_uuid, [unterminated]} */
        te_len = 2 + 1 + (uint64_t)varint_len(track) + (unterminated ? sizeof unterminated_annotation - 1 : 0);
        p = put_packet_head(p, (uint64_t)end[i], 1, te_len, seq_len);
        *p++ = 0x48;
        *p++ = 0x02;
        *p++ = 0x58;
        p = put_varint(p, track);
        if (unterminated)
            p = put_bytes(p, unterminated_annotation, sizeof unterminated_annotation - 1);
        p = put_bytes(p, seq, (size_t)seq_len);
    }
    return (int64_t)(p - out);
}

/* A TrackEvent's bytes at most: type, name, category, colour and payload, each field's varint at
 * its longest (64), rounded up. */
enum { PFTRACE_EVENT_MAX = 96 };

static int64_t pftrace_events(int64_t n, const uint64_t *dt, const uint64_t *ev_type, const uint8_t *named,
                              const uint64_t *name_iid, const uint64_t *cat_iid, const uint8_t *has_color,
                              const uint64_t *color_iid, const uint8_t *value_kind, const uint64_t *value,
                              const uint8_t *seq, int64_t seq_len, uint8_t *out, int64_t capacity)
{
    uint8_t *p = out;
    uint8_t te[PFTRACE_EVENT_MAX];
    if (seq_len < 0 || seq_len > 64)
        return -1;
    for (int64_t i = 0; i < n; i++) {
        if ((p - out) + NVTXCFFI_PFTRACE_ROW_MAX + seq_len > capacity)
            return -1;
        uint8_t *t = te;
        *t++ = 0x48;
        t = put_varint(t, ev_type[i]);
        if (named[i]) {
            *t++ = 0x50;
            t = put_varint(t, name_iid[i]);
        }
        if (cat_iid[i]) {
            *t++ = 0x18;
            t = put_varint(t, cat_iid[i]);
        }
        if (has_color[i]) {
            *t++ = 0x22;
            t = put_varint(t, (uint64_t)(4 + varint_len(color_iid[i])));
            *t++ = 0x08;
            *t++ = 0x01;
            *t++ = 0x88;
            *t++ = 0x01;
            t = put_varint(t, color_iid[i]);
        }
        if (named[i] && value_kind[i] != NVTXCFFI_VALUE_NONE) {
            /* DebugAnnotation{name_iid: 2 ("payload"), int_value (4) | uint_value (3) | double_value (5)} */
            *t++ = 0x22;
            *t++ = (uint8_t)(value_kind[i] == NVTXCFFI_VALUE_DOUBLE ? 11 : 3 + varint_len(value[i]));
            *t++ = 0x08;
            *t++ = 0x02;
            if (value_kind[i] == NVTXCFFI_VALUE_DOUBLE) {
                *t++ = 0x29;
                t = put_fixed64(t, value[i]);
            } else {
                *t++ = value_kind[i] == NVTXCFFI_VALUE_UINT ? 0x18 : 0x20;
                t = put_varint(t, value[i]);
            }
        }
        p = put_packet(p, dt[i], 0, te, (uint64_t)(t - te), seq, seq_len);
    }
    return (int64_t)(p - out);
}

/* TYPE_COUNTER's bytes at most: type, track uuid (its varint at its longest) and the double. */
enum { PFTRACE_COUNTER_EVENT_MAX = 24 };

static int64_t pftrace_counters(int64_t n, const uint64_t *stamp, const uint8_t *absolute, const uint64_t *track,
                                const uint64_t *value, const uint8_t *seq, int64_t seq_len, uint8_t *out,
                                int64_t capacity)
{
    uint8_t *p = out;
    uint8_t te[PFTRACE_COUNTER_EVENT_MAX];
    if (seq_len < 0 || seq_len > 64)
        return -1;
    for (int64_t i = 0; i < n; i++) {
        if ((p - out) + NVTXCFFI_PFTRACE_COUNTER_MAX + seq_len > capacity)
            return -1;
        uint8_t *t = te;
        *t++ = 0x48; /* type: TYPE_COUNTER */
        *t++ = 0x04;
        *t++ = 0x58; /* track_uuid */
        t = put_varint(t, track[i]);
        *t++ = 0xe1; /* double_counter_value (44, fixed64) */
        *t++ = 0x02;
        t = put_fixed64(t, value[i]);
        p = put_packet(p, stamp[i], absolute[i], te, (uint64_t)(t - te), seq, seq_len);
    }
    return (int64_t)(p - out);
}

static void fixed_rows(const int64_t *values, int64_t n, int64_t ncols, const int64_t *offsets,
                       const int64_t *widths, const uint8_t *zero_pad, const uint8_t *tmpl, int64_t row_len,
                       uint8_t *out)
{
    for (int64_t i = 0; i < n; i++) {
        uint8_t *row = out + i * row_len;
        memcpy(row, tmpl, (size_t)row_len);
        for (int64_t c = 0; c < ncols; c++) {
            uint64_t v = (uint64_t)values[c * n + i];
            uint8_t *first = row + offsets[c];
            uint8_t *p = first + widths[c] - 1;
            do {
                *p-- = (uint8_t)('0' + v % 10);
                v /= 10;
            } while (v && p >= first);
            uint8_t fill = zero_pad[c] ? '0' : ' ';
            while (p >= first)
                *p-- = fill;
        }
    }
}

int64_t nvtxcffi_decode_events(const uint64_t *words, int64_t n, void *events, uint64_t *ticks,
                               int64_t capacity)
{
    int64_t result;
    WITHOUT_GIL(n, result = decode_events(words, n, events, ticks, capacity));
    return result;
}

int64_t nvtxcffi_pair_stacks(const uint8_t *kind, const int64_t *group, int64_t n, int64_t ngroups,
                             int64_t *top, int64_t *below, int64_t *level, uint8_t *state, int64_t *push_of,
                             int64_t *pop_of)
{
    int64_t result;
    WITHOUT_GIL(n, result = pair_stacks(kind, group, n, ngroups, top, below, level, state, push_of, pop_of));
    return result;
}

int64_t nvtxcffi_pair_keys(const uint8_t *is_start, const uint32_t *domain, const uint64_t *range_id,
                           const int64_t *time, int64_t n, int64_t *table, int64_t capacity, uint8_t *state,
                           int64_t *start_of, int64_t *end_of, int64_t *unmatched)
{
    int64_t result;
    if (capacity <= n || (capacity & (capacity - 1)))
        return -1;
    WITHOUT_GIL(n, result = pair_keys(is_start, domain, range_id, time, n, table, capacity, state, start_of, end_of,
                                      unmatched));
    return result;
}

int64_t nvtxcffi_pftrace_events(int64_t n, const uint64_t *dt, const uint64_t *ev_type, const uint8_t *named,
                                const uint64_t *name_iid, const uint64_t *cat_iid, const uint8_t *has_color,
                                const uint64_t *color_iid, const uint8_t *value_kind, const uint64_t *value,
                                const uint8_t *seq, int64_t seq_len, uint8_t *out, int64_t capacity)
{
    int64_t result;
    WITHOUT_GIL(n, result = pftrace_events(n, dt, ev_type, named, name_iid, cat_iid, has_color, color_iid,
                                           value_kind, value, seq, seq_len, out, capacity));
    return result;
}

int64_t nvtxcffi_pftrace_counters(int64_t n, const uint64_t *stamp, const uint8_t *absolute, const uint64_t *track,
                                  const uint64_t *value, const uint8_t *seq, int64_t seq_len, uint8_t *out,
                                  int64_t capacity)
{
    int64_t result;
    WITHOUT_GIL(n, result = pftrace_counters(n, stamp, absolute, track, value, seq, seq_len, out, capacity));
    return result;
}

int64_t nvtxcffi_pftrace_async(int64_t n, uint64_t first_track, uint64_t process, const uint8_t *names,
                               const int64_t *name_start, const int64_t *name_len, const uint8_t *styles,
                               const int64_t *style_start, const int64_t *style_len, const uint8_t *value_kind,
                               const uint64_t *value, const uint64_t *range_id, const int64_t *start,
                               const int64_t *end, int unterminated, const uint8_t *seq, int64_t seq_len,
                               uint8_t *out, int64_t capacity)
{
    int64_t result;
    WITHOUT_GIL(n, result = pftrace_async(n, first_track, process, names, name_start, name_len, styles, style_start,
                                          style_len, value_kind, value, range_id, start, end, unterminated, seq,
                                          seq_len, out, capacity));
    return result;
}

void nvtxcffi_fixed_rows(const int64_t *values, int64_t n, int64_t ncols, const int64_t *offsets,
                         const int64_t *widths, const uint8_t *zero_pad, const uint8_t *tmpl, int64_t row_len,
                         uint8_t *out)
{
    WITHOUT_GIL(n, fixed_rows(values, n, ncols, offsets, widths, zero_pad, tmpl, row_len, out));
}

/* Rows of variable length: row i is pre[pre_start[i]..+pre_len[i]] + data[start[i]..+length[i]] + the
 * post_width bytes of post row i, one after another in out (the sum of the three lengths over every
 * row; the caller sizes it). Returns the bytes written. */
static int64_t join_rows(int64_t n, const uint8_t *pre, const int64_t *pre_start, const int64_t *pre_len,
                         const uint8_t *data, const int64_t *start, const int64_t *length, const uint8_t *post,
                         int64_t post_width, uint8_t *out)
{
    uint8_t *p = out;
    for (int64_t i = 0; i < n; i++) {
        memcpy(p, pre + pre_start[i], (size_t)pre_len[i]);
        p += pre_len[i];
        memcpy(p, data + start[i], (size_t)length[i]);
        p += length[i];
        if (post_width > 0) {
            memcpy(p, post + i * post_width, (size_t)post_width);
            p += post_width;
        }
    }
    return (int64_t)(p - out);
}

int64_t nvtxcffi_join_rows(int64_t n, const uint8_t *pre, const int64_t *pre_start, const int64_t *pre_len,
                           const uint8_t *data, const int64_t *start, const int64_t *length, const uint8_t *post,
                           int64_t post_width, uint8_t *out)
{
    int64_t result;
    WITHOUT_GIL(n, result = join_rows(n, pre, pre_start, pre_len, data, start, length, post, post_width, out));
    return result;
}

/* The data bytes of records in recorder words (format 2: each 8-byte word a tag byte, then 7 data
 * bytes): for record i, length[i] bytes from data byte skip[i] of the record whose data begins at
 * word first_word[i], one record after another in out. Returns the bytes written. */
static int64_t word_bytes(const uint8_t *words, const int64_t *first_word, const int64_t *skip,
                          const int64_t *length, int64_t n, uint8_t *out)
{
    uint8_t *p = out;
    for (int64_t i = 0; i < n; i++) {
        const uint8_t *base = words + first_word[i] * 8;
        for (int64_t m = skip[i], end = skip[i] + length[i]; m < end; m++)
            *p++ = base[(m / 7) * 8 + 1 + m % 7];
    }
    return (int64_t)(p - out);
}

int64_t nvtxcffi_word_bytes(const uint8_t *words, const int64_t *first_word, const int64_t *skip,
                            const int64_t *length, int64_t n, uint8_t *out)
{
    int64_t result;
    WITHOUT_GIL(n, result = word_bytes(words, first_word, skip, length, n, out));
    return result;
}

/* The decimal digits of v, ending at `end` (20 bytes are room for any); returns where they begin.
 * Two digits a division. */
static uint8_t *decimal(uint8_t *end, uint64_t v)
{
    static const char pairs[] = "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
                                "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
                                "8081828384858687888990919293949596979899";
    while (v >= 100) {
        const char *pair = pairs + 2 * (v % 100);
        v /= 100;
        *--end = (uint8_t)pair[1];
        *--end = (uint8_t)pair[0];
    }
    if (v >= 10) {
        *--end = (uint8_t)pairs[2 * v + 1];
        *--end = (uint8_t)pairs[2 * v];
    } else {
        *--end = (uint8_t)('0' + v);
    }
    return end;
}

static uint8_t *put_number(uint8_t *p, int64_t value, int is_signed)
{
    uint8_t buf[20];
    uint64_t magnitude = (uint64_t)value;
    if (is_signed && value < 0) {
        *p++ = '-';
        magnitude = 0 - magnitude; /* (unsigned: INT64_MIN's magnitude too) */
    }
    uint8_t *digits = decimal(buf + sizeof buf, magnitude);
    memcpy(p, digits, (size_t)(buf + sizeof buf - digits));
    return p + (buf + sizeof buf - digits);
}

static int64_t text_rows(int64_t n, int64_t nfields, const uint8_t *kind, const uint8_t *lit, const int64_t *lit_at,
                         const int64_t *value, const int64_t *aux, const uint8_t *data, uint8_t *out,
                         int64_t capacity)
{
    static const char hex_digits[] = "0123456789abcdef";
    uint8_t *p = out;
    uint8_t *end = out + capacity;
    for (int64_t i = 0; i < n; i++) {
        for (int64_t f = 0; f < nfields; f++) {
            int64_t lit_len = lit_at[f + 1] - lit_at[f];
            int64_t v = value[f * n + i];
            int64_t a = aux[f * n + i];
            /* the literal, then the field's text at its longest (a number: 20 digits and a sign) */
            if (end - p < lit_len + (kind[f] == NVTXCFFI_TEXT_BYTES ? a : kind[f] == NVTXCFFI_TEXT_END ? 0 : 21))
                return -1;
            memcpy(p, lit + lit_at[f], (size_t)lit_len);
            p += lit_len;
            switch (kind[f]) {
            case NVTXCFFI_TEXT_INT:
                p = put_number(p, v, 1);
                break;
            case NVTXCFFI_TEXT_FRAC:
                p[0] = (uint8_t)('0' + v / 100 % 10);
                p[1] = (uint8_t)('0' + v / 10 % 10);
                p[2] = (uint8_t)('0' + v % 10);
                p += 3;
                break;
            case NVTXCFFI_TEXT_HEX: {
                int shift = 60;
                while (shift > 0 && !(((uint64_t)v >> shift) & 0xF))
                    shift -= 4;
                for (; shift >= 0; shift -= 4)
                    *p++ = (uint8_t)hex_digits[((uint64_t)v >> shift) & 0xF];
                break;
            }
            case NVTXCFFI_TEXT_BYTES:
                memcpy(p, data + v, (size_t)a);
                p += a;
                break;
            case NVTXCFFI_TEXT_NUMBER:
                if (a)
                    p = put_number(p, v, a == 1);
                break;
            case NVTXCFFI_TEXT_MICROS: {
                uint64_t magnitude = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
                unsigned frac = (unsigned)(magnitude % 1000);
                if (v < 0)
                    *p++ = '-';
                p = put_number(p, (int64_t)(magnitude / 1000), 0);
                *p++ = '.';
                *p++ = (uint8_t)('0' + frac / 100);
                if (frac % 100) {
                    *p++ = (uint8_t)('0' + frac / 10 % 10);
                    if (frac % 10)
                        *p++ = (uint8_t)('0' + frac % 10);
                }
                break;
            }
            default: /* NVTXCFFI_TEXT_END */
                break;
            }
        }
    }
    return (int64_t)(p - out);
}

int64_t nvtxcffi_text_rows(int64_t n, int64_t nfields, const uint8_t *kind, const uint8_t *lit, const int64_t *lit_at,
                           const int64_t *value, const int64_t *aux, const uint8_t *data, uint8_t *out,
                           int64_t capacity)
{
    int64_t result;
    WITHOUT_GIL(n, result = text_rows(n, nfields, kind, lit, lit_at, value, aux, data, out, capacity));
    return result;
}
