/* writer_records.c - the NVTXW backend's records: a stream fills one chunk in memory and appends it
 * to the file when full (chunk_flush); definitions (domains, categories, registered strings, schemas,
 * counters, scopes, stream names) are kept until the session ends (keep_def). Domain, category and
 * string registrations, which are such definitions. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "writer_backend.h"

#define MAX_DOMAINS 0xFFFFu

void chunk_flush(struct session *s, struct chunk *c) {
    if (!c->w || c->n <= 4) return;
    uint64_t size = ((uint64_t)c->n * 8 + PAGE - 1) / PAGE * PAGE;
    pthread_mutex_lock(&s->mu);
    /* the definitions' chunks (written at the end) take seq 0: readers take them first */
    uint64_t off = s->off, seq = c->defs ? 0 : ++s->seq;
    s->off += size;
    pthread_mutex_unlock(&s->mu);
    uint32_t check = NVTXREC_CHUNK_CHECK ^ (uint32_t)size ^ c->tid ^ (uint32_t)off ^ (uint32_t)seq;
    c->w[0] = NVTXREC_CHUNK_TAG | (size << 32);
    c->w[1] = (uint64_t)c->tid | ((uint64_t)check << 32);
    c->w[2] = off;
    c->w[3] = seq;
    const unsigned char *p = (const unsigned char *)c->w;
    size_t left = (size_t)size;
    while (left) {
        ssize_t k = pwrite(s->fd, p, left, (off_t)off);
        if (k <= 0) {
            if (k < 0 && errno == EINTR) continue;
            atomic_fetch_add(&s->write_errors, 1);
            break;
        }
        p += k;
        off += (uint64_t)k;
        left -= (size_t)k;
    }
    memset(c->w, 0, (size_t)size);
    c->n = 4;
}

void put_data(struct session *s, struct chunk *c, uint8_t tag, uint8_t flags, uint32_t domain,
              uint64_t time, uint64_t arg, uint8_t aux, const void *data, uint32_t len) {
    if (len > MAX_TEXT + 8) {
        len = MAX_TEXT + 8;
        flags |= NVTXREC_DFLAG_TRUNCATED;
    }
    uint32_t total = NVTXREC_DATA_FIXED + len;
    size_t k = (total + 6) / 7;
    if (!chunk_room(s, c, 1 + k)) {
        atomic_fetch_add(&s->dropped, 1);
        return;
    }
    uint64_t *w = c->w + c->n;
    unsigned char fixed[NVTXREC_DATA_FIXED];
    memcpy(fixed, &time, 8);
    memcpy(fixed + 8, &arg, 8);
    fixed[16] = aux;
    const unsigned char *d = data;
    for (size_t i = 0; i < k; ++i) {
        uint64_t v = 0;
        for (uint32_t b = 0; b < 7; ++b) {
            uint32_t at = (uint32_t)i * 7 + b;
            if (at >= total) break;
            unsigned char byte = at < NVTXREC_DATA_FIXED ? fixed[at] : d[at - NVTXREC_DATA_FIXED];
            v |= (uint64_t)byte << (8 * b);
        }
        w[1 + i] = NVTXREC_W_CONT | (v << 8);
    }
    w[0] = tag | ((uint64_t)flags << 8) | ((uint64_t)(domain & 0xFFFF) << 16) | ((uint64_t)total << 32);
    c->n += 1 + k;
}

void keep_def(struct session *s, uint8_t tag, uint8_t flags, uint32_t domain, uint64_t arg, uint8_t aux,
              const void *data, uint32_t len) {
    if (len > MAX_TEXT + 8) {
        len = MAX_TEXT + 8;
        flags |= NVTXREC_DFLAG_TRUNCATED;
    }
    size_t need = sizeof(struct def) + ((len + 7u) & ~7u);
    if (s->defs_len + need > s->defs_cap) {
        size_t cap = s->defs_cap ? s->defs_cap : 4096;
        while (cap < s->defs_len + need) cap *= 2;
        unsigned char *p = realloc(s->defs, cap);
        if (!p) {
            atomic_fetch_add(&s->dropped, 1);
            return;
        }
        s->defs = p;
        s->defs_cap = cap;
    }
    struct def h = {tag, flags, aux, 0, len, domain, 0, arg};
    memcpy(s->defs + s->defs_len, &h, sizeof h);
    if (len) memcpy(s->defs + s->defs_len + sizeof h, data, len);
    s->defs_len += need;
}

void keep_text(struct session *s, uint8_t tag, uint8_t flags, uint32_t domain, uint64_t arg,
               const char *text) {
    size_t n = text ? strnlen(text, MAX_TEXT + 1) : 0;
    if (n > MAX_TEXT) {
        n = MAX_TEXT;
        flags |= NVTXREC_DFLAG_TRUNCATED;
    }
    keep_def(s, tag, flags, domain, arg, 0, text, (uint32_t)n);
}

/* ---------------------------------------------------------------- interface: registrations */

nvtxwResultCode_t DomainRegister(nvtxwSessionHandle_t handle, const nvtxwDomainAttributes_t *attr,
                                 nvtxDomainHandle_t *out) {
    struct session *s = (struct session *)handle;
    if (!s || !out || (attr && attr->structSize < sizeof(nvtxwDomainAttributes_t))) return NVTXW_RESULT_INVALID_ARGUMENT;
    const char *name = attr ? attr->name : NULL;
    uint32_t id = 0;
    pthread_mutex_lock(&s->mu);
    if (name && *name) {
        if (s->next_domain == 0 || s->next_domain > MAX_DOMAINS - 1) {
            pthread_mutex_unlock(&s->mu);
            return NVTXW_RESULT_FAILED;
        }
        id = s->next_domain++;
        keep_text(s, NVTXREC_D_DOMAIN, NVTXREC_API_DOMAIN << NVTXREC_DFLAG_API_SHIFT, 0, id, name);
    }
    pthread_mutex_unlock(&s->mu);
    *out = (nvtxDomainHandle_t)(((uintptr_t)s->slot << 16) | id);
    return NVTXW_RESULT_SUCCESS;
}

nvtxwResultCode_t CategoryRegister(nvtxDomainHandle_t d, uint32_t category, const char *name) {
    struct session *s = session_of(d);
    if (!s || !name) return NVTXW_RESULT_INVALID_ARGUMENT;
    pthread_mutex_lock(&s->mu);
    keep_text(s, NVTXREC_D_CATEGORY, NVTXREC_API_DOMAIN << NVTXREC_DFLAG_API_SHIFT, domain_id((uintptr_t)d),
              category, name);
    pthread_mutex_unlock(&s->mu);
    return NVTXW_RESULT_SUCCESS;
}

nvtxwResultCode_t StringRegister(nvtxDomainHandle_t d, const char *string, nvtxStringHandle_t *out) {
    struct session *s = session_of(d);
    if (!s || !string || !out) return NVTXW_RESULT_INVALID_ARGUMENT;
    uint32_t id = atomic_fetch_add(&s->next_string, 1);
    pthread_mutex_lock(&s->mu);
    keep_text(s, NVTXREC_D_STRING, NVTXREC_API_DOMAIN << NVTXREC_DFLAG_API_SHIFT, domain_id((uintptr_t)d), id,
              string);
    pthread_mutex_unlock(&s->mu);
    *out = (nvtxStringHandle_t)(uintptr_t)id;
    return NVTXW_RESULT_SUCCESS;
}

nvtxwResultCode_t ResourceRegister(nvtxDomainHandle_t d, const nvtxResourceAttributes_t *attr) {
    (void)d;
    (void)attr;
    return NVTXW_RESULT_NOT_SUPPORTED;
}
