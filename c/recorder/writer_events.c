/* writer_events.c - the NVTXW backend's events: EventWrite / EventBatchWrite payloads read through
 * their schema (writer_backend.c says which entries count) and written as the recorder's event
 * records, their messages interned per stream. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "writer_backend.h"

struct event {
    int kind; /* NVTXREC_KIND_*, or 0x10 push/pop pair, 0x11 start/end pair */
    int64_t t0, t1;
    uint64_t range_id;
    uint32_t color, category, message;
    int has_t0, has_t1;
};

static uint64_t fnv(const char *p, size_t n) {
    uint64_t h = 1469598103934665603u;
    for (size_t i = 0; i < n; ++i) h = (h ^ (unsigned char)p[i]) * 1099511628211u;
    return h;
}

/* The string id of message text (interned per stream; a new one is written before its event). */
static uint32_t intern(struct stream *st, const char *text, size_t n) {
    uint8_t flags = NVTXREC_DFLAG_MESSAGE | (NVTXREC_API_DOMAIN << NVTXREC_DFLAG_API_SHIFT);
    if (n > MAX_TEXT) {
        n = MAX_TEXT;
        flags |= NVTXREC_DFLAG_TRUNCATED;
    }
    uint64_t h = fnv(text, n);
    struct msg_slot *slot = &st->cache[h % MSG_CACHE];
    if (slot->text && slot->hash == h && slot->len == n && memcmp(slot->text, text, n) == 0) return slot->id;
    uint32_t id = atomic_fetch_add(&st->s->next_string, 1);
    put_data(st->s, &st->c, NVTXREC_D_STRING, flags, 0, 0, id, 0, text, (uint32_t)n);
    if (n <= 4096) {
        char *copy = malloc(n ? n : 1);
        if (copy) {
            if (n) memcpy(copy, text, n);
            free(slot->text);
            slot->text = copy;
            slot->id = id;
            slot->len = (uint32_t)n;
            slot->hash = h;
        }
    }
    return id;
}

static void put_event(struct stream *st, int kind, int64_t t, uint32_t message, uint32_t color, uint32_t category,
                      int with_range, uint64_t range_id) {
    uint32_t dom = domain_id(st->domain);
    size_t k = 2 + (color != 0) + (category != 0) + (with_range ? 2 : 0);
    if (!chunk_room(st->s, &st->c, k)) {
        atomic_fetch_add(&st->s->dropped, 1);
        return;
    }
    uint64_t *w = st->c.w + st->c.n;
    size_t i = 1;
    uint64_t api = dom ? NVTXREC_API_DOMAIN : NVTXREC_API_EX;
    w[i++] = NVTXREC_W_ATTR | (api << 8) | ((uint64_t)dom << 16) | ((uint64_t)message << 32);
    if (color) w[i++] = NVTXREC_W_COLOR | ((uint64_t)color << 32);
    if (category) w[i++] = NVTXREC_W_CATEGORY | ((uint64_t)category << 32);
    if (with_range) {
        w[i++] = NVTXREC_W_RANGE_ID | ((range_id & M56) << 8);
        if (range_id >> 56) w[i++] = NVTXREC_W_RANGE_ID_HI | ((range_id >> 56) << 8);
    }
    w[0] = (uint64_t)kind | ((uint64_t)t << 8);
    st->c.n += i;
    if (t < st->first) st->first = t;
}

const struct schema *find_schema(struct session *s, uint64_t id, struct schema *out) {
    const struct schema *found = NULL;
    pthread_mutex_lock(&s->mu);
    for (size_t i = s->n_schemas; i-- > 0;)
        if (s->schemas[i].id == id) {
            *out = s->schemas[i];
            found = out;
            break;
        }
    pthread_mutex_unlock(&s->mu);
    return found;
}

static uint64_t read_uint(const unsigned char *p, size_t size) {
    uint64_t v = 0;
    if (size == 8) memcpy(&v, p, 8);
    else if (size == 4) {
        uint32_t u;
        memcpy(&u, p, 4);
        v = u;
    }
    return v;
}

#define KIND_OF(flags) ((flags) & (UINT64_C(0xF) << 3))

/* Read one row of an event schema. Returns NVTXW_RESULT_*; text/text_len: an inline message. */
static nvtxwResultCode_t read_row(const struct schema *sc, const unsigned char *row, size_t size, struct event *ev,
                                  const char **text, size_t *text_len) {
    memset(ev, 0, sizeof *ev);
    *text = NULL;
    *text_len = 0;
    switch (KIND_OF(sc->flags)) {
    case NVTX_PAYLOAD_SCHEMA_FLAG_MARK: ev->kind = NVTXREC_KIND_MARK; break;
    case NVTX_PAYLOAD_SCHEMA_FLAG_RANGE_PUSH: ev->kind = NVTXREC_KIND_PUSH; break;
    case NVTX_PAYLOAD_SCHEMA_FLAG_RANGE_POP: ev->kind = NVTXREC_KIND_POP; break;
    case NVTX_PAYLOAD_SCHEMA_FLAG_RANGE_START: ev->kind = NVTXREC_KIND_START; break;
    case NVTX_PAYLOAD_SCHEMA_FLAG_RANGE_END: ev->kind = NVTXREC_KIND_END; break;
    case NVTX_PAYLOAD_SCHEMA_FLAG_RANGE_PUSHPOP: ev->kind = 0x10; break;
    case NVTX_PAYLOAD_SCHEMA_FLAG_RANGE_STARTEND: ev->kind = 0x11; break;
    default: return NVTXW_RESULT_INVALID_ARGUMENT; /* not an event schema */
    }
    for (size_t i = 0; i < sc->n; ++i) {
        const struct entry *e = &sc->e[i];
        if (e->offset >= size) continue;
        const unsigned char *p = row + e->offset;
        size_t room = size - (size_t)e->offset;
        uint64_t role = e->flags & (UINT64_C(7) << 12);
        if ((e->flags & NVTX_PAYLOAD_ENTRY_FLAG_TIMESTAMP) && room >= 8) {
            int64_t t;
            memcpy(&t, p, 8);
            if (role == NVTX_PAYLOAD_ENTRY_FLAG_RANGE_END) {
                ev->t1 = t;
                ev->has_t1 = 1;
            } else {
                ev->t0 = t;
                ev->has_t0 = 1;
            }
        } else if (e->type == NVTX_PAYLOAD_ENTRY_TYPE_COLOR_ARGB && room >= 4) {
            ev->color = (uint32_t)read_uint(p, 4);
        } else if (e->type == NVTX_PAYLOAD_ENTRY_TYPE_CATEGORY && room >= 4) {
            ev->category = (uint32_t)read_uint(p, 4);
        } else if (e->type == NVTX_PAYLOAD_ENTRY_TYPE_RANGE_ID && room >= 8) {
            ev->range_id = read_uint(p, 8);
        } else if (e->type == NVTX_PAYLOAD_ENTRY_TYPE_NVTX_REGISTERED_STRING_HANDLE && room >= sizeof(void *)) {
            ev->message = (uint32_t)read_uint(p, sizeof(void *));
        } else if ((e->flags & NVTX_PAYLOAD_ENTRY_FLAG_EVENT_MESSAGE)
                   && (e->type == NVTX_PAYLOAD_ENTRY_TYPE_CSTRING_UTF8 || e->type == NVTX_PAYLOAD_ENTRY_TYPE_CSTRING
                       || e->type == NVTX_PAYLOAD_ENTRY_TYPE_CHAR)) {
            size_t cap = e->detail && e->detail < room ? (size_t)e->detail : room;
            *text = (const char *)p;
            *text_len = strnlen((const char *)p, cap);
        }
    }
    /* the event's time roles (EntryKind) must be there */
    if (ev->kind >= 0x10 ? !(ev->has_t0 && ev->has_t1) : !(ev->has_t0 || ev->has_t1))
        return NVTXW_RESULT_INVALID_ARGUMENT;
    if (ev->kind < 0x10 && !ev->has_t0) ev->t0 = ev->t1;
    if (!valid_time(ev->t0) || (ev->kind >= 0x10 && !valid_time(ev->t1))) return NVTXW_RESULT_INVALID_ARGUMENT;
    return NVTXW_RESULT_SUCCESS;
}

/* A message-only schema (nvtxw3_event_helpers.h's UTF-8 message payload): no event kind, one
 * EVENT_MESSAGE string entry at offset 0. */
static int message_schema(const struct schema *sc) {
    return sc && KIND_OF(sc->flags) == 0 && sc->n == 1 && (sc->e[0].flags & NVTX_PAYLOAD_ENTRY_FLAG_EVENT_MESSAGE)
           && sc->e[0].offset == 0
           && (sc->e[0].type == NVTX_PAYLOAD_ENTRY_TYPE_CSTRING_UTF8 || sc->e[0].type == NVTX_PAYLOAD_ENTRY_TYPE_CSTRING);
}

static void write_event(struct stream *st, const struct event *ev, uint32_t message) {
    switch (ev->kind) {
    case 0x10:
        put_event(st, NVTXREC_KIND_PUSH, ev->t0, message, ev->color, ev->category, 0, 0);
        put_event(st, NVTXREC_KIND_POP, ev->t1, 0, 0, 0, 0, 0);
        break;
    case 0x11: {
        uint64_t rid = (UINT64_C(1) << 63) | atomic_fetch_add(&st->s->next_range, 1);
        put_event(st, NVTXREC_KIND_START, ev->t0, message, ev->color, ev->category, 1, rid);
        put_event(st, NVTXREC_KIND_END, ev->t1, 0, 0, 0, 1, rid);
        break;
    }
    case NVTXREC_KIND_POP: put_event(st, NVTXREC_KIND_POP, ev->t0, 0, 0, 0, 0, 0); break;
    case NVTXREC_KIND_END: put_event(st, NVTXREC_KIND_END, ev->t0, 0, 0, 0, 1, ev->range_id); break;
    case NVTXREC_KIND_START:
        put_event(st, NVTXREC_KIND_START, ev->t0, message, ev->color, ev->category, 1, ev->range_id);
        break;
    default: put_event(st, ev->kind, ev->t0, message, ev->color, ev->category, 0, 0); break;
    }
}

static nvtxwResultCode_t EventWrite_locked(nvtxwStreamHandle_t handle, const nvtxPayloadData_t *payloads, size_t count) {
    struct stream *st = (struct stream *)handle;
    if (!st || !payloads || !count || !payloads[0].payload) return NVTXW_RESULT_INVALID_ARGUMENT;
    struct schema copy, extra;
    const struct schema *sc = find_schema(st->s, payloads[0].schemaId, &copy);
    if (!sc) return NVTXW_RESULT_INVALID_ARGUMENT;
    if (sc->static_size && payloads[0].size < sc->static_size) return NVTXW_RESULT_INVALID_ARGUMENT;
    struct event ev;
    const char *text;
    size_t text_len;
    nvtxwResultCode_t rc = read_row(sc, payloads[0].payload, payloads[0].size, &ev, &text, &text_len);
    if (rc != NVTXW_RESULT_SUCCESS) return rc;
    for (size_t i = 1; i < count; ++i) {
        if (!payloads[i].payload || !payloads[i].size) continue;
        if (message_schema(find_schema(st->s, payloads[i].schemaId, &extra))) {
            text = payloads[i].payload;
            text_len = strnlen(text, payloads[i].size);
        }
    }
    uint32_t message = ev.message;
    if (text && text_len) message = intern(st, text, text_len);
    write_event(st, &ev, message);
    return NVTXW_RESULT_SUCCESS;
}

static nvtxwResultCode_t EventBatchWrite_locked(nvtxwStreamHandle_t handle, const nvtxEventBatch_t *batch) {
    struct stream *st = (struct stream *)handle;
    if (!st || !batch || (!batch->events && batch->size)) return NVTXW_RESULT_INVALID_ARGUMENT;
    struct schema copy;
    const struct schema *sc = find_schema(st->s, batch->eventSchemaId, &copy);
    if (!sc || !sc->static_size || batch->size % sc->static_size) return NVTXW_RESULT_INVALID_ARGUMENT;
    const unsigned char *rows = batch->events;
    for (size_t off = 0; off < batch->size; off += sc->static_size) {
        struct event ev;
        const char *text;
        size_t text_len;
        nvtxwResultCode_t rc = read_row(sc, rows + off, sc->static_size, &ev, &text, &text_len);
        if (rc != NVTXW_RESULT_SUCCESS) return rc;
        write_event(st, &ev, text && text_len ? intern(st, text, text_len) : ev.message);
    }
    return NVTXW_RESULT_SUCCESS;
}

nvtxwResultCode_t EventWrite(nvtxwStreamHandle_t h, const nvtxPayloadData_t *payloads, size_t count) {
    struct stream *st = (struct stream *)h;
    LOCKED(EventWrite_locked(h, payloads, count));
}
nvtxwResultCode_t EventBatchWrite(nvtxwStreamHandle_t h, const nvtxEventBatch_t *batch) {
    struct stream *st = (struct stream *)h;
    LOCKED(EventBatchWrite_locked(h, batch));
}

/* ---------------------------------------------------------------- time-domain conversions: not supported */

nvtxwResultCode_t TimeSyncPointWrite(nvtxwStreamHandle_t st, uint64_t a, uint64_t b, int64_t ta, int64_t tb) {
    (void)st, (void)a, (void)b, (void)ta, (void)tb;
    return NVTXW_RESULT_NOT_SUPPORTED;
}

nvtxwResultCode_t TimeSyncPointTableWrite(nvtxwStreamHandle_t st, uint64_t a, uint64_t b,
                                          const nvtxSyncPoint_t *points, size_t count) {
    (void)st, (void)a, (void)b, (void)points, (void)count;
    return NVTXW_RESULT_NOT_SUPPORTED;
}

nvtxwResultCode_t TimestampConversionFactorWrite(nvtxwStreamHandle_t st, uint64_t a, uint64_t b, double slope,
                                                 int64_t ta, int64_t tb) {
    (void)st, (void)a, (void)b, (void)slope, (void)ta, (void)tb;
    return NVTXW_RESULT_NOT_SUPPORTED;
}
