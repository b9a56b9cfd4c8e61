/* recorder_registry.c - what the recorder names and defines, kept for the life of the process:
 * domains (interned by name), categories, strings (interned by (domain, text): registered strings and
 * messages alike, so every NVTX client shares handles and a message's text is written once per
 * process), and the extension registrations of recorder_ext.c. A forked child's file re-records
 * them (rerecord_definitions). Also UTF-8 of NVTX's wide strings. All under g_lock. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include "recorder_core.h"

#define MAX_DOMAINS 65534u /* ids fit 16 bits; 65535: the shared overflow domain */
#define MAX_STRINGS (1u << 20)
#define MAX_STRING_BYTES (64u << 20)
#define MAX_CATEGORIES 65536u
#define MSG_DOMAIN 0xFFFFFFFFu /* namespace of interned messages in the string table */

static _Atomic uint32_t g_transient_ids = MAX_STRINGS;

static struct string_entry **g_buckets;
static uint32_t g_nbuckets, g_nstrings;
static uint64_t g_string_bytes;
static struct string_entry g_string_overflow = {NULL, 0, 0, NVTXREC_STRING_OVERFLOW, 0, {0}};
static const char g_overflow_text[] = "<nvtx-cffi recorder: string table full>";

static char **g_domains; /* g_domains[id - 1] = name */
static uint32_t g_ndomains, g_domcap;

struct category_entry {
    uint32_t domain, id;
    char *name;
};
static struct category_entry *g_categories;
static uint32_t g_ncategories, g_catcap;

/* Extension registrations (payload schemas, counter groups, scopes: recorder_ext.c's blobs) as
 * recorded, kept for a forked child to re-record like domains and strings (see remember_def). */
struct def_blob {
    struct def_blob *chain;            /* hash chain */
    struct def_blob *prev, *next;      /* registration order */
    uint64_t arg;
    uint32_t domain, len;
    uint8_t kind, flags;
    unsigned char data[];
};
#define DEF_BUCKETS 4096u
#define MAX_DEFS 65536u
#define MAX_DEF_BYTES (16u << 20)
static struct def_blob **g_def_buckets;
static struct def_blob *g_defs_first, *g_defs_last;
static uint32_t g_ndefs;
static uint64_t g_def_bytes;
static int g_defs_warned;

/* ---------------------------------------------------------------- UTF-8 */

/* UTF-8 for one code point; invalid ones (surrogates, > U+10FFFF) become U+FFFD. */
static inline uint32_t utf8_width(uint32_t c) {
    if (c < 0x80) return 1;
    if (c < 0x800) return 2;
    if (c >= 0xD800 && c <= 0xDFFF) return 3;
    if (c < 0x10000) return 3;
    if (c <= 0x10FFFF) return 4;
    return 3;
}

static size_t wide_utf8_len(const wchar_t *w) {
    size_t n = 0;
    for (; *w; ++w) n += utf8_width((uint32_t)*w);
    return n;
}

/* Encode at most cap bytes (whole code points only); returns bytes written. */
static size_t wide_to_utf8(const wchar_t *w, unsigned char *out, size_t cap) {
    size_t n = 0;
    for (; *w; ++w) {
        uint32_t c = (uint32_t)*w;
        if ((c >= 0xD800 && c <= 0xDFFF) || c > 0x10FFFF) c = 0xFFFD;
        uint32_t k = utf8_width(c);
        if (n + k > cap) break;
        if (k == 1) {
            out[n] = (unsigned char)c;
        } else if (k == 2) {
            out[n] = (unsigned char)(0xC0 | (c >> 6));
            out[n + 1] = (unsigned char)(0x80 | (c & 0x3F));
        } else if (k == 3) {
            out[n] = (unsigned char)(0xE0 | (c >> 12));
            out[n + 1] = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
            out[n + 2] = (unsigned char)(0x80 | (c & 0x3F));
        } else {
            out[n] = (unsigned char)(0xF0 | (c >> 18));
            out[n + 1] = (unsigned char)(0x80 | ((c >> 12) & 0x3F));
            out[n + 2] = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
            out[n + 3] = (unsigned char)(0x80 | (c & 0x3F));
        }
        n += k;
    }
    return n;
}

char *wide_dup_cap(const wchar_t *w, size_t cap, size_t *len) {
    size_t n = wide_utf8_len(w);
    if (n > cap) n = cap;
    char *s = malloc(n + 1);
    if (!s) return NULL;
    size_t k = wide_to_utf8(w, (unsigned char *)s, n);
    s[k] = 0;
    if (len) *len = k;
    return s;
}

char *wide_dup(const wchar_t *w) { return wide_dup_cap(w, (size_t)-1 / 2, NULL); }

/* ---------------------------------------------------------------- registries (under g_lock) */

uint32_t intern_domain(char *owned_name) {
    if (!owned_name) return 0;
    pthread_mutex_lock(&g_lock);
    uint32_t id = 0;
    for (uint32_t i = 0; i < g_ndomains; ++i) {
        if (strcmp(g_domains[i], owned_name) == 0) {
            id = i + 1;
            break;
        }
    }
    if (!id && g_ndomains < MAX_DOMAINS) {
        if (g_ndomains == g_domcap) {
            uint32_t cap = g_domcap ? g_domcap * 2 : 16;
            char **d = realloc(g_domains, cap * sizeof *d);
            if (d) {
                g_domains = d;
                g_domcap = cap;
            }
        }
        if (g_ndomains < g_domcap) {
            g_domains[g_ndomains++] = owned_name;
            owned_name = NULL;
            id = g_ndomains;
        }
    }
    pthread_mutex_unlock(&g_lock);
    free(owned_name);
    return id ? id : MAX_DOMAINS + 1; /* table full: a shared, unnamed domain */
}

static uint64_t hash_text(uint32_t domain, const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull ^ domain;
    for (size_t i = 0; i < n; ++i) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

/* Full: MAX_STRINGS entries or MAX_STRING_BYTES of text. */
struct string_entry *intern_string(uint32_t domain, const char *s, size_t n, int *created) {
    *created = 0;
    if (!s) s = "", n = 0;
    if (n > 0xFFFFFFFEu) n = 0xFFFFFFFEu;
    uint64_t h = hash_text(domain, s, n);
    struct string_entry *found = NULL;
    pthread_mutex_lock(&g_lock);
    if (g_nbuckets) {
        for (struct string_entry *e = g_buckets[h & (g_nbuckets - 1)]; e; e = e->next) {
            if (e->hash == h && e->domain == domain && e->len == n && memcmp(e->text, s, n) == 0) {
                found = e;
                break;
            }
        }
    }
    if (!found && g_nstrings < MAX_STRINGS && g_string_bytes + n <= MAX_STRING_BYTES) {
        if (g_nstrings >= g_nbuckets) { /* grow to keep chains short */
            uint32_t nb = g_nbuckets ? g_nbuckets * 4 : 1024;
            struct string_entry **b = calloc(nb, sizeof *b);
            if (b) {
                for (uint32_t i = 0; i < g_nbuckets; ++i) {
                    for (struct string_entry *e = g_buckets[i], *next; e; e = next) {
                        next = e->next;
                        e->next = b[e->hash & (nb - 1)];
                        b[e->hash & (nb - 1)] = e;
                    }
                }
                free(g_buckets);
                g_buckets = b;
                g_nbuckets = nb;
            }
        }
        struct string_entry *e = g_nbuckets ? malloc(sizeof *e + n + 1) : NULL;
        if (e) {
            e->hash = h;
            e->domain = domain;
            e->id = ++g_nstrings;
            e->len = (uint32_t)n;
            memcpy(e->text, s, n);
            e->text[n] = 0;
            e->next = g_buckets[h & (g_nbuckets - 1)];
            g_buckets[h & (g_nbuckets - 1)] = e;
            g_string_bytes += n;
            found = e;
            *created = 1;
        }
    }
    pthread_mutex_unlock(&g_lock);
    return found ? found : &g_string_overflow;
}

const char *string_text(const struct string_entry *e) {
    return e == &g_string_overflow ? g_overflow_text : e->text;
}

void remember_category(uint32_t domain, uint32_t id, const char *name) {
    char *copy = strdup(name ? name : "");
    if (!copy) return;
    pthread_mutex_lock(&g_lock);
    for (uint32_t i = 0; i < g_ncategories; ++i) {
        if (g_categories[i].domain == domain && g_categories[i].id == id) {
            char *old = g_categories[i].name;
            g_categories[i].name = copy;
            copy = old;
            goto done;
        }
    }
    if (g_ncategories == g_catcap && g_catcap < MAX_CATEGORIES) {
        uint32_t cap = g_catcap ? g_catcap * 2 : 16;
        struct category_entry *c = realloc(g_categories, cap * sizeof *c);
        if (c) {
            g_categories = c;
            g_catcap = cap;
        }
    }
    if (g_ncategories < g_catcap) {
        g_categories[g_ncategories++] = (struct category_entry){domain, id, copy};
        copy = NULL;
    }
done:
    pthread_mutex_unlock(&g_lock);
    free(copy);
}

/* A payload schema, counter group or scope registration (a blob of that kind), kept for forked
 * children: the program registers once and goes on using the id in processes it forks, whose files
 * must carry the registration like the domains and strings they inherit (rerecord_definitions).
 * Keyed by (kind, domain, id): a registration of the same id replaces the earlier one, in its
 * place in registration order. Bounded by MAX_DEFS entries and MAX_DEF_BYTES of data; past that a
 * registration is recorded but not kept, and a warning says that forked children will miss it. */
void remember_def(uint8_t kind, uint32_t domain, uint64_t arg, const void *data, uint32_t len, uint8_t flags) {
    if (kind != NVTXREC_BLOB_SCHEMA && kind != NVTXREC_BLOB_COUNTER_GROUP && kind != NVTXREC_BLOB_SCOPE) return;
    struct def_blob *d = malloc(sizeof *d + (len ? len : 1));
    if (!d) return;
    d->arg = arg;
    d->domain = domain;
    d->len = len;
    d->kind = kind;
    d->flags = flags;
    if (len) memcpy(d->data, data, len);
    uint64_t h = (arg * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)domain << 8) ^ kind;
    h ^= h >> 29;
    int warn = 0;
    pthread_mutex_lock(&g_lock);
    if (!g_def_buckets) g_def_buckets = calloc(DEF_BUCKETS, sizeof *g_def_buckets);
    struct def_blob **pp = g_def_buckets ? &g_def_buckets[h & (DEF_BUCKETS - 1)] : NULL;
    while (pp && *pp && !((*pp)->kind == kind && (*pp)->domain == domain && (*pp)->arg == arg))
        pp = &(*pp)->chain;
    struct def_blob *old = pp ? *pp : NULL;
    if (!pp || (!old && g_ndefs >= MAX_DEFS) ||
        g_def_bytes - (old ? old->len : 0) + len > MAX_DEF_BYTES) {
        warn = !g_defs_warned;
        g_defs_warned = 1;
    } else {
        d->chain = old ? old->chain : NULL;
        *pp = d;
        d->prev = old ? old->prev : g_defs_last;
        d->next = old ? old->next : NULL;
        if (d->prev) d->prev->next = d;
        else g_defs_first = d;
        if (d->next) d->next->prev = d;
        else g_defs_last = d;
        g_def_bytes += len;
        if (old) g_def_bytes -= old->len;
        else ++g_ndefs;
        free(old);
        d = NULL;
    }
    pthread_mutex_unlock(&g_lock);
    free(d);
    if (warn)
        fprintf(stderr, "nvtx-cffi recorder: more than %u payload schema / counter registrations (or %u MiB of "
                        "them) in this process; processes it forks from now on will not have the later ones\n",
                MAX_DEFS, MAX_DEF_BYTES >> 20);
}

/* ---------------------------------------------------------------- messages -> string ids */

uint32_t text_id(struct tstate *t, const char *s, size_t n, uint8_t api, uint64_t ts, struct cache_slot *slot) {
    int created;
    struct string_entry *e = intern_string(MSG_DOMAIN, s, n, &created);
    uint8_t flags = NVTXREC_DFLAG_MESSAGE | (uint8_t)(api << NVTXREC_DFLAG_API_SHIFT);
    if (e == &g_string_overflow) { /* table full: a string record per use, with a fresh id */
        uint32_t id = atomic_fetch_add_explicit(&g_transient_ids, 1, memory_order_relaxed) + 1;
        if (id >= NVTXREC_STRING_OVERFLOW || id <= MAX_STRINGS) return NVTXREC_STRING_OVERFLOW;
        data_record(t, NVTXREC_D_STRING, flags, 0, ts, id, 0, s, (uint32_t)(n > MAX_TEXT ? MAX_TEXT + 1 : n));
        return id;
    }
    if (created) data_record(t, NVTXREC_D_STRING, flags, 0, ts, e->id, 0, e->text, e->len > MAX_TEXT ? MAX_TEXT + 1 : e->len);
    if (slot) {
        slot->ptr = s;
        slot->e = e;
    }
    return e->id;
}

uint32_t wide_id(struct tstate *t, const wchar_t *w, uint8_t api, uint64_t ts) {
    size_t n;
    char *s = wide_dup_cap(w, (size_t)MAX_TEXT * 4, &n);
    if (!s) return 0;
    uint32_t id = text_id(t, s, n, api, ts, NULL);
    free(s);
    return id;
}

/* ---------------------------------------------------------------- a forked child's file */

void rerecord_definitions(struct tstate *t) {
    for (uint32_t i = 0; i < g_ndomains; ++i)
        data_record(t, NVTXREC_D_DOMAIN, NVTXREC_DFLAG_INHERITED, i + 1, 0, i + 1, 0, g_domains[i],
                    (uint32_t)strlen(g_domains[i]));
    for (uint32_t i = 0; i < g_ncategories; ++i)
        data_record(t, NVTXREC_D_CATEGORY, NVTXREC_DFLAG_INHERITED, g_categories[i].domain, 0,
                    g_categories[i].id, 0, g_categories[i].name, (uint32_t)strlen(g_categories[i].name));
    for (uint32_t b = 0; b < g_nbuckets; ++b) {
        for (struct string_entry *e = g_buckets[b]; e; e = e->next) {
            int msg = e->domain == MSG_DOMAIN;
            data_record(t, NVTXREC_D_STRING,
                        (uint8_t)(NVTXREC_DFLAG_INHERITED | (msg ? NVTXREC_DFLAG_MESSAGE : 0)),
                        msg ? 0 : e->domain, 0, e->id, 0, e->text, e->len > MAX_TEXT ? MAX_TEXT + 1 : e->len);
        }
    }
    for (struct def_blob *d = g_defs_first; d; d = d->next) /* schemas, counters, scopes */
        if (!data_record(t, NVTXREC_D_BLOB, (uint8_t)(NVTXREC_DFLAG_INHERITED | d->flags), d->domain, 0, d->arg,
                         d->kind, d->data, d->len))
            count_drop();
}
