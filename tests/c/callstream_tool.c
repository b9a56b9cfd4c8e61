/* callstream_tool.c - an NVTX v3 injection tool that writes down the call stream a tool sees.
 *
 * tests/api/test_call_stream.py runs one program under nvtx 0.2.16 and under nvtx_cffi with this tool
 * attached and compares the two logs line by line. Every callback appends one text line to the file
 * named by NVTX_CFFI_CALLSTREAM_LOG (O_APPEND, one write() per line, under a lock). Nothing in a
 * line depends on addresses: a domain handle is printed as the name it was created with (NULL:
 * <default>), a registered string handle as its text (and its domain when that is not the event's),
 * a schema, counter, scope or range id handed out here as S<n>, C<n>, P<n>, R<n> in the order of
 * registration, so the logs of two processes that make the same calls compare equal.
 *
 * NVTX_CFFI_CALLSTREAM_RAISE=<name> (a line's first word, e.g. DomainMarkEx) makes that callback set
 * a Python exception, RuntimeError("tool callback failed"), through the Python C API found with
 * dlsym(RTLD_DEFAULT) (this library does not link libpython), for tests that the caller never
 * returns with an exception set.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <wchar.h>

#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtCounters.h>
#include <nvtx3/nvToolsExtPayload.h>
#include <nvtx3/nvToolsExtSemanticsCounters.h>
#include <nvtx3/nvToolsExtSemanticsTime.h>

#define EXPORT __attribute__((visibility("default")))
#define FN(f) ((NvtxFunctionPointer)(f))
#define LINE_CAP 16384
#define HEX_CAP 256 /* payload bytes shown */

/* ------------------------------------------------------------------ what the tool handed out */
struct domain {
    struct domain *next;
    char *name;
};
struct string {
    struct string *next;
    struct domain *domain; /* NULL: the default domain */
    char *text;
};
struct named {
    struct named *next;
    struct domain *domain;
    uint32_t id;
    char *name;
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct domain *g_domains;
static struct string *g_strings;
static struct named *g_categories;
static uint64_t g_schemas, g_counters, g_scopes, g_ranges;
static int64_t g_clock;
static int g_fd = -1;
static char g_raise[128];
static char g_yield[128];
static __thread int t_depth;

static struct domain *find_domain(nvtxDomainHandle_t h) {
    for (struct domain *d = g_domains; d; d = d->next)
        if ((void *)d == (void *)h) return d;
    return NULL;
}

static struct string *find_string(nvtxStringHandle_t h) {
    for (struct string *s = g_strings; s; s = s->next)
        if ((void *)s == (void *)h) return s;
    return NULL;
}

static const char *category_name(struct domain *d, uint32_t id) {
    for (struct named *c = g_categories; c; c = c->next)
        if (c->domain == d && c->id == id) return c->name;
    return NULL;
}

/* ------------------------------------------------------------------ a bounded line */
struct line {
    char s[LINE_CAP];
    size_t n;
};

static void add(struct line *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(struct line *l, const char *fmt, ...) {
    if (l->n >= LINE_CAP - 1) return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(l->s + l->n, LINE_CAP - l->n, fmt, ap);
    va_end(ap);
    if (k < 0) return;
    l->n += (size_t)k;
    if (l->n > LINE_CAP - 1) l->n = LINE_CAP - 1;
}

/* A quoted string, printable ASCII as is, anything else as \xNN. */
static void add_quoted(struct line *l, const char *s) {
    if (!s) {
        add(l, "NULL");
        return;
    }
    add(l, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p && l->n < LINE_CAP - 8; ++p) {
        if (*p == '"' || *p == '\\') add(l, "\\%c", *p);
        else if (*p >= 0x20 && *p < 0x7f) add(l, "%c", *p);
        else add(l, "\\x%02x", *p);
    }
    add(l, "\"");
}

static void add_wquoted(struct line *l, const wchar_t *s) {
    if (!s) {
        add(l, "NULL");
        return;
    }
    add(l, "L\"");
    for (; *s && l->n < LINE_CAP - 16; ++s) {
        if (*s == L'"' || *s == L'\\') add(l, "\\%c", (char)*s);
        else if (*s >= 0x20 && *s < 0x7f) add(l, "%c", (char)*s);
        else add(l, "\\u{%x}", (unsigned)*s);
    }
    add(l, "\"");
}

/* A wide string as UTF-8 (the text a registered handle or a domain stands for). */
static void add_utf8(struct line *l, const wchar_t *s) {
    for (; s && *s && l->n < LINE_CAP - 8; ++s) {
        uint32_t c = (uint32_t)*s;
        if (c < 0x80) add(l, "%c", (char)c);
        else if (c < 0x800) add(l, "%c%c", (char)(0xc0 | (c >> 6)), (char)(0x80 | (c & 0x3f)));
        else if (c < 0x10000)
            add(l, "%c%c%c", (char)(0xe0 | (c >> 12)), (char)(0x80 | ((c >> 6) & 0x3f)), (char)(0x80 | (c & 0x3f)));
        else
            add(l, "%c%c%c%c", (char)(0xf0 | (c >> 18)), (char)(0x80 | ((c >> 12) & 0x3f)),
                (char)(0x80 | ((c >> 6) & 0x3f)), (char)(0x80 | (c & 0x3f)));
    }
}

static void add_hex(struct line *l, const void *data, size_t size) {
    const unsigned char *p = data;
    size_t n = size < HEX_CAP ? size : HEX_CAP;
    if (!p) {
        add(l, "NULL");
        return;
    }
    for (size_t i = 0; i < n; ++i) add(l, "%02x", p[i]);
    if (n < size) add(l, "...");
}

static void add_domain(struct line *l, nvtxDomainHandle_t h) {
    if (!h) {
        add(l, " domain=<default>");
        return;
    }
    struct domain *d = find_domain(h);
    if (d) {
        add(l, " domain=");
        add_quoted(l, d->name);
    } else {
        add(l, " domain=<unknown>");
    }
}

/* Ids this tool handed out print as S<n> (schema), C<n> (counter), P<n> (scope); others as numbers. */
static void add_schema_id(struct line *l, uint64_t id) {
    if (id >= NVTX_PAYLOAD_SCHEMA_ID_DYNAMIC_START && id - NVTX_PAYLOAD_SCHEMA_ID_DYNAMIC_START < g_schemas)
        add(l, "S%" PRIu64, id - NVTX_PAYLOAD_SCHEMA_ID_DYNAMIC_START + 1);
    else
        add(l, "%" PRIu64, id);
}

static void add_scope_id(struct line *l, uint64_t id) {
    if (id >= NVTX_SCOPE_ID_DYNAMIC_START && id - NVTX_SCOPE_ID_DYNAMIC_START < g_scopes)
        add(l, "P%" PRIu64, id - NVTX_SCOPE_ID_DYNAMIC_START + 1);
    else
        add(l, "%" PRIu64, id);
}

static void add_counter_id(struct line *l, uint64_t id) {
    if (id >= NVTX_COUNTER_ID_DYNAMIC_START && id - NVTX_COUNTER_ID_DYNAMIC_START < g_counters)
        add(l, "C%" PRIu64, id - NVTX_COUNTER_ID_DYNAMIC_START + 1);
    else
        add(l, "%" PRIu64, id);
}

static void add_range_id(struct line *l, uint64_t id) {
    if (id >= 1 && id <= g_ranges) add(l, "R%" PRIu64, id);
    else add(l, "%" PRIu64, id);
}

static void add_semantics(struct line *l, const nvtxSemanticsHeader_t *h) {
    add(l, "[");
    for (int k = 0; h && k < 8; h = h->next, ++k) {
        if (k) add(l, ",");
        if (h->semanticId == NVTX_SEMANTIC_ID_COUNTERS_V1 && h->structSize >= sizeof(nvtxSemanticsCounter_t)) {
            const nvtxSemanticsCounter_t *c = (const nvtxSemanticsCounter_t *)h;
            add(l, "counter(flags=%" PRIu64 " unit=", c->flags);
            add_quoted(l, c->unit);
            add(l, " scale=%" PRIu64 "/%" PRIu64 " limit=%" PRId64 " min=%" PRIx64 " max=%" PRIx64 ")",
                c->unitScaleNumerator, c->unitScaleDenominator, c->limitType, c->min.u64, c->max.u64);
        } else if (h->semanticId == NVTX_SEMANTIC_ID_TIME_V1 && h->structSize >= sizeof(nvtxSemanticsTime_t)) {
            const nvtxSemanticsTime_t *t = (const nvtxSemanticsTime_t *)h;
            add(l, "time(domain=%" PRIu64 ")", t->timeDomainId);
        } else {
            add(l, "semantic%u(v%u)", h->semanticId, h->version);
        }
    }
    add(l, "]");
}

static void add_attributes(struct line *l, nvtxDomainHandle_t h, const nvtxEventAttributes_t *a) {
    if (!a) {
        add(l, " attr=NULL");
        return;
    }
    add(l, " v=%u size=%u", a->version, a->size);
    switch (a->messageType) {
    case NVTX_MESSAGE_UNKNOWN: add(l, " msg=none"); break;
    case NVTX_MESSAGE_TYPE_ASCII:
        add(l, " msg=ASCII:");
        add_quoted(l, a->message.ascii);
        break;
    case NVTX_MESSAGE_TYPE_UNICODE:
        add(l, " msg=UNICODE:");
        add_wquoted(l, a->message.unicode);
        break;
    case NVTX_MESSAGE_TYPE_REGISTERED: {
        add(l, " msg=REGISTERED:");
        struct string *s = a->message.registered ? find_string(a->message.registered) : NULL;
        if (!a->message.registered) {
            add(l, "NULL");
        } else if (!s) {
            add(l, "<unknown>");
        } else {
            add_quoted(l, s->text);
            if ((void *)s->domain != (void *)h) {
                add(l, "@");
                if (s->domain) add_quoted(l, s->domain->name);
                else add(l, "<default>");
            }
        }
        break;
    }
    default: add(l, " msg=type%d", (int)a->messageType); break;
    }
    if (a->colorType == NVTX_COLOR_ARGB) add(l, " color=ARGB:0x%08x", a->color);
    else add(l, " color=type%d:0x%08x", (int)a->colorType, a->color);
    add(l, " category=%u", a->category);
    if (a->category) {
        const char *name = category_name(find_domain(h), a->category);
        if (name) {
            add(l, "(");
            add_quoted(l, name);
            add(l, ")");
        }
    }
    switch (a->payloadType) {
    case NVTX_PAYLOAD_UNKNOWN: add(l, " payload=none"); break;
    case NVTX_PAYLOAD_TYPE_UNSIGNED_INT64: add(l, " payload=UINT64:%" PRIu64, a->payload.ullValue); break;
    case NVTX_PAYLOAD_TYPE_INT64: add(l, " payload=INT64:%" PRId64, a->payload.llValue); break;
    case NVTX_PAYLOAD_TYPE_DOUBLE: add(l, " payload=DOUBLE:%.17g", a->payload.dValue); break;
    case NVTX_PAYLOAD_TYPE_UNSIGNED_INT32: add(l, " payload=UINT32:%u", a->payload.uiValue); break;
    case NVTX_PAYLOAD_TYPE_INT32: add(l, " payload=INT32:%d", a->payload.iValue); break;
    case NVTX_PAYLOAD_TYPE_FLOAT: add(l, " payload=FLOAT:%.9g", (double)a->payload.fValue); break;
    case NVTX_PAYLOAD_TYPE_EXT: {
        const nvtxPayloadData_t *pd = (const nvtxPayloadData_t *)(uintptr_t)a->payload.ullValue;
        int32_t count = a->reserved0;
        add(l, " payload=EXT[%d]", count);
        if (!pd) {
            add(l, "NULL");
            break;
        }
        for (int32_t i = 0; i < count && i < 16; ++i) {
            add(l, "{schema=");
            add_schema_id(l, pd[i].schemaId);
            add(l, " size=%zu data=", pd[i].size);
            add_hex(l, pd[i].payload, pd[i].size);
            add(l, "}");
        }
        return;
    }
    default: add(l, " payload=type%d:%" PRIx64, (int)a->payloadType, a->payload.ullValue); break;
    }
    if (a->reserved0) add(l, " reserved0=%d", a->reserved0);
}

/* ------------------------------------------------------------------ writing a line, raising */
typedef int (*gil_ensure_fn)(void);
typedef void (*gil_release_fn)(int);
typedef void (*set_string_fn)(void *, const char *);

typedef void *(*save_thread_fn)(void);
typedef void (*restore_thread_fn)(void *);
typedef int (*gil_check_fn)(void);

/* NVTX_CFFI_CALLSTREAM_YIELD=<name>: that callback lets other Python threads run for a moment (the
 * GIL released, as a Python-based tool's callback code may release it at any point). */
static void maybe_yield(const char *name) {
    if (!g_yield[0] || strcmp(g_yield, name) != 0) return;
    gil_check_fn check = (gil_check_fn)dlsym(RTLD_DEFAULT, "PyGILState_Check");
    save_thread_fn save = (save_thread_fn)dlsym(RTLD_DEFAULT, "PyEval_SaveThread");
    restore_thread_fn restore = (restore_thread_fn)dlsym(RTLD_DEFAULT, "PyEval_RestoreThread");
    if (!check || !save || !restore || !check()) return;
    void *state = save();
    usleep(2000);
    restore(state);
}

static void maybe_raise(const char *name) {
    maybe_yield(name);
    if (!g_raise[0] || strcmp(g_raise, name) != 0) return;
    gil_ensure_fn ensure = (gil_ensure_fn)dlsym(RTLD_DEFAULT, "PyGILState_Ensure");
    gil_release_fn release = (gil_release_fn)dlsym(RTLD_DEFAULT, "PyGILState_Release");
    set_string_fn set_string = (set_string_fn)dlsym(RTLD_DEFAULT, "PyErr_SetString");
    void **runtime_error = (void **)dlsym(RTLD_DEFAULT, "PyExc_RuntimeError");
    if (!ensure || !release || !set_string || !runtime_error) return;
    int state = ensure();
    set_string(*runtime_error, "tool callback failed");
    release(state);
}

/* Ends the line, writes it and unlocks (the caller took g_lock), then raises if asked to. */
static void emit(struct line *l, const char *name) {
    if (l->n > LINE_CAP - 2) l->n = LINE_CAP - 2;
    l->s[l->n++] = '\n';
    if (g_fd >= 0) {
        size_t off = 0;
        while (off < l->n) {
            ssize_t k = write(g_fd, l->s + off, l->n - off);
            if (k <= 0) break;
            off += (size_t)k;
        }
    }
    pthread_mutex_unlock(&g_lock);
    maybe_raise(name);
}

#define BEGIN(name)                  \
    const char *fname_ = name;       \
    struct line *l = &(struct line){.n = 0}; \
    pthread_mutex_lock(&g_lock);     \
    add(l, "%s", fname_)
#define END() emit(l, fname_)

/* ------------------------------------------------------------------ CORE */
static void c_MarkEx(const nvtxEventAttributes_t *a) {
    BEGIN("MarkEx");
    add_attributes(l, NULL, a);
    END();
}
static void c_MarkA(const char *m) {
    BEGIN("MarkA");
    add(l, " ");
    add_quoted(l, m);
    END();
}
static void c_MarkW(const wchar_t *m) {
    BEGIN("MarkW");
    add(l, " ");
    add_wquoted(l, m);
    END();
}
static nvtxRangeId_t c_RangeStartEx(const nvtxEventAttributes_t *a) {
    BEGIN("RangeStartEx");
    add_attributes(l, NULL, a);
    nvtxRangeId_t id = ++g_ranges;
    add(l, " -> R%" PRIu64, id);
    END();
    return id;
}
static nvtxRangeId_t c_RangeStartA(const char *m) {
    BEGIN("RangeStartA");
    add(l, " ");
    add_quoted(l, m);
    nvtxRangeId_t id = ++g_ranges;
    add(l, " -> R%" PRIu64, id);
    END();
    return id;
}
static nvtxRangeId_t c_RangeStartW(const wchar_t *m) {
    BEGIN("RangeStartW");
    add(l, " ");
    add_wquoted(l, m);
    nvtxRangeId_t id = ++g_ranges;
    add(l, " -> R%" PRIu64, id);
    END();
    return id;
}
static void c_RangeEnd(nvtxRangeId_t id) {
    BEGIN("RangeEnd");
    add(l, " ");
    add_range_id(l, id);
    END();
}
static int c_RangePushEx(const nvtxEventAttributes_t *a) {
    BEGIN("RangePushEx");
    add_attributes(l, NULL, a);
    END();
    return t_depth++;
}
static int c_RangePushA(const char *m) {
    BEGIN("RangePushA");
    add(l, " ");
    add_quoted(l, m);
    END();
    return t_depth++;
}
static int c_RangePushW(const wchar_t *m) {
    BEGIN("RangePushW");
    add(l, " ");
    add_wquoted(l, m);
    END();
    return t_depth++;
}
static int c_RangePop(void) {
    BEGIN("RangePop");
    END();
    return t_depth > 0 ? --t_depth : -1;
}
static void c_NameCategoryA(uint32_t c, const char *n) {
    BEGIN("NameCategoryA");
    add(l, " id=%u name=", c);
    add_quoted(l, n);
    END();
}
static void c_NameCategoryW(uint32_t c, const wchar_t *n) {
    BEGIN("NameCategoryW");
    add(l, " id=%u name=", c);
    add_wquoted(l, n);
    END();
}
static void c_NameOsThreadA(uint32_t t, const char *n) {
    (void)t; /* a thread id differs between processes */
    BEGIN("NameOsThreadA");
    add(l, " name=");
    add_quoted(l, n);
    END();
}
static void c_NameOsThreadW(uint32_t t, const wchar_t *n) {
    (void)t;
    BEGIN("NameOsThreadW");
    add(l, " name=");
    add_wquoted(l, n);
    END();
}

/* ------------------------------------------------------------------ CORE2 */
static void c_DomainMarkEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) {
    BEGIN("DomainMarkEx");
    add_domain(l, d);
    add_attributes(l, d, a);
    END();
}
static nvtxRangeId_t c_DomainRangeStartEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) {
    BEGIN("DomainRangeStartEx");
    add_domain(l, d);
    add_attributes(l, d, a);
    nvtxRangeId_t id = ++g_ranges;
    add(l, " -> R%" PRIu64, id);
    END();
    return id;
}
static void c_DomainRangeEnd(nvtxDomainHandle_t d, nvtxRangeId_t id) {
    BEGIN("DomainRangeEnd");
    add_domain(l, d);
    add(l, " ");
    add_range_id(l, id);
    END();
}
static int c_DomainRangePushEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) {
    BEGIN("DomainRangePushEx");
    add_domain(l, d);
    add_attributes(l, d, a);
    END();
    return t_depth++;
}
static int c_DomainRangePop(nvtxDomainHandle_t d) {
    BEGIN("DomainRangePop");
    add_domain(l, d);
    END();
    return t_depth > 0 ? --t_depth : -1;
}
static char g_resource_tag;
static nvtxResourceHandle_t c_DomainResourceCreate(nvtxDomainHandle_t d, nvtxResourceAttributes_t *a) {
    BEGIN("DomainResourceCreate");
    add_domain(l, d);
    if (a) add(l, " identifierType=%d", a->identifierType);
    END();
    return (nvtxResourceHandle_t)(void *)&g_resource_tag;
}
static void c_DomainResourceDestroy(nvtxResourceHandle_t r) {
    (void)r;
    BEGIN("DomainResourceDestroy");
    END();
}
static void name_category(nvtxDomainHandle_t d, uint32_t c, const char *name) {
    struct named *n = calloc(1, sizeof *n);
    if (!n) return;
    n->name = strdup(name ? name : "");
    if (!n->name) {
        free(n);
        return;
    }
    n->domain = find_domain(d);
    n->id = c;
    n->next = g_categories;
    g_categories = n;
}
static void c_DomainNameCategoryA(nvtxDomainHandle_t d, uint32_t c, const char *n) {
    BEGIN("DomainNameCategoryA");
    add_domain(l, d);
    add(l, " id=%u name=", c);
    add_quoted(l, n);
    name_category(d, c, n);
    END();
}
static void c_DomainNameCategoryW(nvtxDomainHandle_t d, uint32_t c, const wchar_t *n) {
    BEGIN("DomainNameCategoryW");
    add_domain(l, d);
    add(l, " id=%u name=", c);
    add_wquoted(l, n);
    END();
}
static nvtxStringHandle_t register_string(nvtxDomainHandle_t d, const char *text) {
    struct string *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->text = strdup(text ? text : "");
    if (!s->text) {
        free(s);
        return NULL;
    }
    s->domain = find_domain(d);
    s->next = g_strings;
    g_strings = s;
    return (nvtxStringHandle_t)(void *)s;
}
static nvtxStringHandle_t c_DomainRegisterStringA(nvtxDomainHandle_t d, const char *text) {
    BEGIN("DomainRegisterStringA");
    add_domain(l, d);
    add(l, " text=");
    add_quoted(l, text);
    nvtxStringHandle_t h = register_string(d, text);
    END();
    return h;
}
static nvtxStringHandle_t c_DomainRegisterStringW(nvtxDomainHandle_t d, const wchar_t *text) {
    BEGIN("DomainRegisterStringW");
    add_domain(l, d);
    add(l, " text=");
    add_wquoted(l, text);
    struct line w = {.n = 0};
    add_utf8(&w, text);
    nvtxStringHandle_t h = register_string(d, w.s);
    END();
    return h;
}
static nvtxDomainHandle_t create_domain(const char *name) {
    struct domain *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    d->name = strdup(name ? name : "");
    if (!d->name) {
        free(d);
        return NULL;
    }
    d->next = g_domains;
    g_domains = d;
    return (nvtxDomainHandle_t)(void *)d;
}
static nvtxDomainHandle_t c_DomainCreateA(const char *name) {
    BEGIN("DomainCreateA");
    add(l, " name=");
    add_quoted(l, name);
    nvtxDomainHandle_t h = create_domain(name);
    END();
    return h;
}
static nvtxDomainHandle_t c_DomainCreateW(const wchar_t *name) {
    BEGIN("DomainCreateW");
    add(l, " name=");
    add_wquoted(l, name);
    struct line w = {.n = 0};
    add_utf8(&w, name);
    nvtxDomainHandle_t h = create_domain(w.s);
    END();
    return h;
}
static void c_DomainDestroy(nvtxDomainHandle_t d) {
    BEGIN("DomainDestroy");
    add_domain(l, d);
    END();
}
static void c_Initialize(const void *r) {
    (void)r;
    BEGIN("Initialize");
    END();
}

static void install(const NvtxExportTableCallbacks *cb, NvtxCallbackModule module,
                    const NvtxFunctionPointer *fns, unsigned int n) {
    NvtxFunctionTable table = NULL;
    unsigned int size = 0;
    if (!cb->GetModuleFunctionTable(module, &table, &size) || !table) return;
    for (unsigned int i = 1; i < n && i <= size; ++i) {
        if (fns[i] && table[i]) *table[i] = fns[i];
    }
}

static void open_log(void) {
    pthread_mutex_lock(&g_lock);
    if (g_fd < 0) {
        const char *path = getenv("NVTX_CFFI_CALLSTREAM_LOG");
        if (path && *path) g_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        const char *r = getenv("NVTX_CFFI_CALLSTREAM_RAISE");
        if (r) snprintf(g_raise, sizeof g_raise, "%s", r);
        const char *y = getenv("NVTX_CFFI_CALLSTREAM_YIELD");
        if (y) snprintf(g_yield, sizeof g_yield, "%s", y);
    }
    pthread_mutex_unlock(&g_lock);
}

EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t getExportTable) {
    if (!getExportTable) return 0;
    const NvtxExportTableCallbacks *cb = getExportTable(NVTX_ETID_CALLBACKS);
    if (!cb || cb->struct_size < sizeof *cb || !cb->GetModuleFunctionTable) return 0;
    open_log();
    static const NvtxFunctionPointer core[NVTX_CBID_CORE_SIZE] = {
        [NVTX_CBID_CORE_MarkEx] = FN(c_MarkEx),
        [NVTX_CBID_CORE_MarkA] = FN(c_MarkA),
        [NVTX_CBID_CORE_MarkW] = FN(c_MarkW),
        [NVTX_CBID_CORE_RangeStartEx] = FN(c_RangeStartEx),
        [NVTX_CBID_CORE_RangeStartA] = FN(c_RangeStartA),
        [NVTX_CBID_CORE_RangeStartW] = FN(c_RangeStartW),
        [NVTX_CBID_CORE_RangeEnd] = FN(c_RangeEnd),
        [NVTX_CBID_CORE_RangePushEx] = FN(c_RangePushEx),
        [NVTX_CBID_CORE_RangePushA] = FN(c_RangePushA),
        [NVTX_CBID_CORE_RangePushW] = FN(c_RangePushW),
        [NVTX_CBID_CORE_RangePop] = FN(c_RangePop),
        [NVTX_CBID_CORE_NameCategoryA] = FN(c_NameCategoryA),
        [NVTX_CBID_CORE_NameCategoryW] = FN(c_NameCategoryW),
        [NVTX_CBID_CORE_NameOsThreadA] = FN(c_NameOsThreadA),
        [NVTX_CBID_CORE_NameOsThreadW] = FN(c_NameOsThreadW),
    };
    static const NvtxFunctionPointer core2[NVTX_CBID_CORE2_SIZE] = {
        [NVTX_CBID_CORE2_DomainMarkEx] = FN(c_DomainMarkEx),
        [NVTX_CBID_CORE2_DomainRangeStartEx] = FN(c_DomainRangeStartEx),
        [NVTX_CBID_CORE2_DomainRangeEnd] = FN(c_DomainRangeEnd),
        [NVTX_CBID_CORE2_DomainRangePushEx] = FN(c_DomainRangePushEx),
        [NVTX_CBID_CORE2_DomainRangePop] = FN(c_DomainRangePop),
        [NVTX_CBID_CORE2_DomainResourceCreate] = FN(c_DomainResourceCreate),
        [NVTX_CBID_CORE2_DomainResourceDestroy] = FN(c_DomainResourceDestroy),
        [NVTX_CBID_CORE2_DomainNameCategoryA] = FN(c_DomainNameCategoryA),
        [NVTX_CBID_CORE2_DomainNameCategoryW] = FN(c_DomainNameCategoryW),
        [NVTX_CBID_CORE2_DomainRegisterStringA] = FN(c_DomainRegisterStringA),
        [NVTX_CBID_CORE2_DomainRegisterStringW] = FN(c_DomainRegisterStringW),
        [NVTX_CBID_CORE2_DomainCreateA] = FN(c_DomainCreateA),
        [NVTX_CBID_CORE2_DomainCreateW] = FN(c_DomainCreateW),
        [NVTX_CBID_CORE2_DomainDestroy] = FN(c_DomainDestroy),
        [NVTX_CBID_CORE2_Initialize] = FN(c_Initialize),
    };
    install(cb, NVTX_CB_MODULE_CORE, core, NVTX_CBID_CORE_SIZE);
    install(cb, NVTX_CB_MODULE_CORE2, core2, NVTX_CBID_CORE2_SIZE);
    return 1;
}

/* ------------------------------------------------------------------ payload extension */
static uint64_t p_SchemaRegister(nvtxDomainHandle_t d, const nvtxPayloadSchemaAttr_t *a) {
    BEGIN("PayloadSchemaRegister");
    add_domain(l, d);
    uint64_t id = NVTX_PAYLOAD_SCHEMA_ID_DYNAMIC_START + g_schemas++;
    if (!a) {
        add(l, " attr=NULL -> ");
        add_schema_id(l, id);
        END();
        return id;
    }
    uint64_t m = a->fieldMask;
    add(l, " mask=0x%" PRIx64, m);
    if (m & NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_NAME) {
        add(l, " name=");
        add_quoted(l, a->name);
    }
    if (m & NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_TYPE) add(l, " type=%" PRIu64, a->type);
    if (m & NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_FLAGS) add(l, " flags=0x%" PRIx64, a->flags);
    if (m & NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_STATIC_SIZE) add(l, " static_size=%zu", a->payloadStaticSize);
    if (m & NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_ALIGNMENT) add(l, " alignment=%zu", a->packAlign);
    if ((m & NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_NUM_ENTRIES) && (m & NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_ENTRIES) &&
        a->entries) {
        add(l, " entries=[");
        for (size_t i = 0; i < a->numEntries && i < 64; ++i) {
            const nvtxPayloadSchemaEntry_t *e = &a->entries[i];
            if (i) add(l, ", ");
            add(l, "(flags=0x%" PRIx64 " type=", e->flags);
            add_schema_id(l, e->type);
            add(l, " name=");
            add_quoted(l, e->name);
            if (e->description) {
                add(l, " description=");
                add_quoted(l, e->description);
            }
            add(l, " detail=%" PRIu64 " offset=%" PRIu64, e->arrayOrUnionDetail, e->offset);
            if (e->semantics) {
                add(l, " semantics=");
                add_semantics(l, e->semantics);
            }
            add(l, ")");
        }
        add(l, "]");
    }
    if ((m & NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_SCHEMA_ID) && a->schemaId) {
        add(l, " schema_id=%" PRIu64, a->schemaId);
        id = a->schemaId;
    }
    add(l, " -> ");
    add_schema_id(l, id);
    END();
    return id;
}
static uint64_t p_EnumRegister(nvtxDomainHandle_t d, const nvtxPayloadEnumAttr_t *a) {
    BEGIN("PayloadEnumRegister");
    add_domain(l, d);
    uint64_t id = NVTX_PAYLOAD_SCHEMA_ID_DYNAMIC_START + g_schemas++;
    if (a && (a->fieldMask & NVTX_PAYLOAD_ENUM_ATTR_FIELD_SCHEMA_ID) && a->schemaId) id = a->schemaId;
    add(l, " -> ");
    add_schema_id(l, id);
    END();
    return id;
}
static uint8_t p_DomainIsEnabled(nvtxDomainHandle_t d) {
    BEGIN("DomainIsEnabled");
    add_domain(l, d);
    END();
    return 1;
}
static uint64_t p_ScopeRegister(nvtxDomainHandle_t d, const nvtxScopeAttr_t *a) {
    BEGIN("ScopeRegister");
    add_domain(l, d);
    uint64_t id = NVTX_SCOPE_ID_DYNAMIC_START + g_scopes++;
    if (a) {
        add(l, " path=");
        add_quoted(l, a->path);
        add(l, " parent=%" PRIu64, a->parentScope);
        if (a->scopeId) id = a->scopeId;
    }
    add(l, " -> ");
    add_scope_id(l, id);
    END();
    return id;
}
static int64_t p_TimestampGet(void) {
    BEGIN("TimestampGet");
    int64_t ts = g_clock += 1000;
    add(l, " -> %" PRId64, ts);
    END();
    return ts;
}
static uint64_t p_TimeDomainRegister(nvtxDomainHandle_t d, const nvtxTimeDomainAttr_t *a) {
    BEGIN("TimeDomainRegister");
    add_domain(l, d);
    uint64_t id = NVTX_SCOPE_ID_DYNAMIC_START + g_scopes++;
    if (a && a->timeDomainId) id = a->timeDomainId;
    add(l, " -> ");
    add_scope_id(l, id);
    END();
    return id;
}

/* ------------------------------------------------------------------ counters extension */
static uint64_t k_CounterRegister(nvtxDomainHandle_t d, const nvtxCounterAttr_t *a) {
    BEGIN("CounterRegister");
    add_domain(l, d);
    if (!a || a->structSize < sizeof(nvtxCounterAttr_t)) {
        add(l, " attr=%s", a ? "short" : "NULL");
        END();
        return NVTX_COUNTER_ID_NONE;
    }
    uint64_t id = NVTX_COUNTER_ID_DYNAMIC_START + g_counters++;
    add(l, " schema=");
    add_schema_id(l, a->schemaId);
    add(l, " name=");
    add_quoted(l, a->name);
    add(l, " description=");
    add_quoted(l, a->description);
    add(l, " scope=");
    add_scope_id(l, a->scopeId);
    add(l, " semantics=");
    add_semantics(l, a->semantics);
    if (a->counterId) {
        add(l, " counter_id=%" PRIu64, a->counterId);
        id = a->counterId;
    }
    add(l, " -> ");
    add_counter_id(l, id);
    END();
    return id;
}
static void k_SampleInt64(nvtxDomainHandle_t d, uint64_t c, int64_t v) {
    BEGIN("CounterSampleInt64");
    add_domain(l, d);
    add(l, " counter=");
    add_counter_id(l, c);
    add(l, " value=%" PRId64, v);
    END();
}
static void k_SampleFloat64(nvtxDomainHandle_t d, uint64_t c, double v) {
    BEGIN("CounterSampleFloat64");
    add_domain(l, d);
    add(l, " counter=");
    add_counter_id(l, c);
    add(l, " value=%.17g", v);
    END();
}
static void k_Sample(nvtxDomainHandle_t d, uint64_t c, const void *v, size_t s) {
    BEGIN("CounterSample");
    add_domain(l, d);
    add(l, " counter=");
    add_counter_id(l, c);
    add(l, " size=%zu data=", s);
    add_hex(l, v, s);
    END();
}
static void k_SampleNoValue(nvtxDomainHandle_t d, uint64_t c, uint8_t r) {
    BEGIN("CounterSampleNoValue");
    add_domain(l, d);
    add(l, " counter=");
    add_counter_id(l, c);
    add(l, " reason=%u", r);
    END();
}
static void k_BatchSubmit(nvtxDomainHandle_t d, const nvtxCounterBatch_t *b) {
    BEGIN("CounterBatchSubmit");
    add_domain(l, d);
    if (!b) {
        add(l, " batch=NULL");
        END();
        return;
    }
    add(l, " counter=");
    add_counter_id(l, b->counterId);
    add(l, " flags=0x%" PRIx64 " size=%zu data=", b->flags, b->countersSize);
    add_hex(l, b->counters, b->countersSize);
    add(l, " timestamps=[");
    for (size_t i = 0; b->timestamps && i < b->timestampsSize / 8 && i < 32; ++i)
        add(l, "%s%" PRId64, i ? "," : "", b->timestamps[i]);
    add(l, "]");
    END();
}

#define SLOT(cbid, fn) [cbid] = (intptr_t)(fn)

EXPORT int InitializeInjectionNvtxExtension(nvtxExtModuleInfo_t *info) {
    if (!info || info->segmentsCount < 1 || !info->segments) return 0;
    open_log();
    nvtxExtModuleSegment_t *seg = &info->segments[0];
    if (!seg->functionSlots) return 0;
    if (info->moduleId == NVTX_EXT_PAYLOAD_MODULEID) {
        const intptr_t table[] = {
            SLOT(NVTX3EXT_CBID_nvtxPayloadSchemaRegister, p_SchemaRegister),
            SLOT(NVTX3EXT_CBID_nvtxPayloadEnumRegister, p_EnumRegister),
            SLOT(NVTX3EXT_CBID_nvtxDomainIsEnabled, p_DomainIsEnabled),
            SLOT(NVTX3EXT_CBID_nvtxScopeRegister, p_ScopeRegister),
            SLOT(NVTX3EXT_CBID_nvtxTimestampGet, p_TimestampGet),
            SLOT(NVTX3EXT_CBID_nvtxTimeDomainRegister, p_TimeDomainRegister),
        };
        for (size_t i = 0; i < sizeof table / sizeof table[0] && i < seg->slotCount; ++i)
            if (table[i]) seg->functionSlots[i] = table[i];
    } else if (info->moduleId == NVTX_EXT_COUNTERS_MODULEID) {
        const intptr_t table[] = {
            SLOT(NVTX3EXT_CBID_nvtxCounterRegister, k_CounterRegister),
            SLOT(NVTX3EXT_CBID_nvtxCounterSampleInt64, k_SampleInt64),
            SLOT(NVTX3EXT_CBID_nvtxCounterSampleFloat64, k_SampleFloat64),
            SLOT(NVTX3EXT_CBID_nvtxCounterSample, k_Sample),
            SLOT(NVTX3EXT_CBID_nvtxCounterSampleNoValue, k_SampleNoValue),
            SLOT(NVTX3EXT_CBID_nvtxCounterBatchSubmit, k_BatchSubmit),
        };
        for (size_t i = 0; i < sizeof table / sizeof table[0] && i < seg->slotCount; ++i)
            if (table[i]) seg->functionSlots[i] = table[i];
    }
    return 1;
}
