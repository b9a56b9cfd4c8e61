/* writer_log_backend.c - an NVTXW backend for tests/recorder/test_writer.py that logs every interface
 * call with its arguments, one line each, to the file $NVTXW_TEST_LOG (appended; nothing without it).
 *
 * Handles are small numbers: sessions 0x1000 + n, domains 0x2000 + n, streams 0x3000 + n, strings
 * 0x4000 + n; schema, counter and scope ids count from 100, 200 and 300. A payload is logged as its
 * schema id, size and its bytes: as int64 words when the size is a multiple of 8, else as text.
 * $NVTXW_TEST_VERSION_FAIL set: nvtxwGetInterface answers "interface version not supported".
 * $NVTXW_TEST_FAIL=<call name>: that call answers NVTXW_RESULT_FAILED (after logging). */
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nvtxw3/nvtxw3.h>

static uintptr_t g_sessions, g_domains, g_streams, g_strings;
static uint64_t g_schemas = 99, g_counters = 199, g_scopes = 299;

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_(const char *fmt, ...) {
    const char *path = getenv("NVTXW_TEST_LOG");
    if (!path || !*path) return;
    FILE *f = fopen(path, "a");
    if (!f) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputc('\n', f);
    fclose(f);
}

static nvtxwResultCode_t result(const char *call) {
    const char *fail = getenv("NVTXW_TEST_FAIL");
    return fail && strcmp(fail, call) == 0 ? NVTXW_RESULT_FAILED : NVTXW_RESULT_SUCCESS;
}

static const char *s(const char *p) { return p ? p : "(null)"; }

static void log_payload(const char *what, const nvtxPayloadData_t *p) {
    char buf[1024];
    size_t n = 0;
    buf[0] = 0;
    if (p->payload && p->size % 8 == 0 && p->size <= 8 * 32) {
        for (size_t i = 0; i < p->size / 8; ++i) {
            int64_t v;
            memcpy(&v, (const char *)p->payload + 8 * i, 8);
            n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%" PRId64, i ? "," : "", v);
        }
    } else if (p->payload) {
        size_t k = p->size < 200 ? p->size : 200;
        n += (size_t)snprintf(buf + n, sizeof buf - n, "'%.*s'", (int)k, (const char *)p->payload);
    }
    logf_("  %s schema=%" PRIu64 " size=%zu data=%s", what, p->schemaId, p->size, buf);
}

static nvtxwResultCode_t SessionBegin(const nvtxwSessionAttributes_t *a, nvtxwSessionHandle_t *out) {
    *out = (nvtxwSessionHandle_t)(0x1000 + ++g_sessions);
    logf_("SessionBegin name=%s config=%s -> %#" PRIxPTR, s(a->name), s(a->configString), (uintptr_t)*out);
    return result("SessionBegin");
}

static nvtxwResultCode_t SessionEnd(nvtxwSessionHandle_t h) {
    logf_("SessionEnd %#" PRIxPTR, (uintptr_t)h);
    return result("SessionEnd");
}

static nvtxwResultCode_t DomainRegister(nvtxwSessionHandle_t h, const nvtxwDomainAttributes_t *a,
                                        nvtxDomainHandle_t *out) {
    *out = (nvtxDomainHandle_t)(0x2000 + ++g_domains);
    logf_("DomainRegister %#" PRIxPTR " name=%s -> %#" PRIxPTR, (uintptr_t)h, s(a ? a->name : NULL), (uintptr_t)*out);
    return result("DomainRegister");
}

static nvtxwResultCode_t CategoryRegister(nvtxDomainHandle_t d, uint32_t id, const char *name) {
    logf_("CategoryRegister %#" PRIxPTR " %" PRIu32 " name=%s", (uintptr_t)d, id, s(name));
    return result("CategoryRegister");
}

static nvtxwResultCode_t StringRegister(nvtxDomainHandle_t d, const char *string, nvtxStringHandle_t *out) {
    *out = (nvtxStringHandle_t)(0x4000 + ++g_strings);
    logf_("StringRegister %#" PRIxPTR " %s -> %#" PRIxPTR, (uintptr_t)d, s(string), (uintptr_t)*out);
    return result("StringRegister");
}

static nvtxwResultCode_t ResourceRegister(nvtxDomainHandle_t d, const nvtxResourceAttributes_t *a) {
    (void)a;
    logf_("ResourceRegister %#" PRIxPTR, (uintptr_t)d);
    return NVTXW_RESULT_NOT_SUPPORTED;
}

static nvtxwResultCode_t ScopeRegister(nvtxDomainHandle_t d, const nvtxScopeAttr_t *a, uint64_t *out) {
    *out = ++g_scopes;
    logf_("ScopeRegister %#" PRIxPTR " path=%s parent=%" PRIu64 " -> %" PRIu64, (uintptr_t)d, s(a->path),
          a->parentScope, *out);
    return result("ScopeRegister");
}

static nvtxwResultCode_t SchemaRegister(nvtxDomainHandle_t d, const nvtxPayloadSchemaAttr_t *a, uint64_t *out) {
    *out = ++g_schemas;
    logf_("SchemaRegister %#" PRIxPTR " flags=%" PRIu64 " entries=%zu static=%zu -> %" PRIu64, (uintptr_t)d,
          a->flags, a->numEntries, a->payloadStaticSize, *out);
    return result("SchemaRegister");
}

static nvtxwResultCode_t EnumRegister(nvtxDomainHandle_t d, const nvtxPayloadEnumAttr_t *a, uint64_t *out) {
    (void)a;
    *out = ++g_schemas;
    logf_("EnumRegister %#" PRIxPTR, (uintptr_t)d);
    return result("EnumRegister");
}

static nvtxwResultCode_t CounterRegister(nvtxDomainHandle_t d, const nvtxCounterAttr_t *a, uint64_t *out) {
    *out = ++g_counters;
    logf_("CounterRegister %#" PRIxPTR " name=%s schema=%" PRIu64 " scope=%" PRIu64 " -> %" PRIu64, (uintptr_t)d,
          s(a->name), a->schemaId, a->scopeId, *out);
    return result("CounterRegister");
}

static nvtxwResultCode_t TimeDomainRegister(nvtxDomainHandle_t d, const nvtxTimeDomainAttr_t *a, uint64_t *out) {
    (void)a;
    *out = 1;
    logf_("TimeDomainRegister %#" PRIxPTR, (uintptr_t)d);
    return result("TimeDomainRegister");
}

static nvtxwResultCode_t StreamOpen(nvtxwSessionHandle_t h, const nvtxwStreamAttributes_t *a,
                                    nvtxwStreamHandle_t *out) {
    *out = (nvtxwStreamHandle_t)(0x3000 + ++g_streams);
    logf_("StreamOpen %#" PRIxPTR " name=%s domain=%#" PRIxPTR " scope=%" PRIu64 " time=%" PRIu64
          " order=%d,%d,%d,%" PRId64 " -> %#" PRIxPTR,
          (uintptr_t)h, s(a->name), (uintptr_t)a->domain, a->scopeId, a->timeDomainId, a->orderInterleaving,
          a->orderingType, a->orderingSkid, a->orderingSkidAmount, (uintptr_t)*out);
    return result("StreamOpen");
}

static nvtxwResultCode_t StreamClose(nvtxwStreamHandle_t st) {
    logf_("StreamClose %#" PRIxPTR, (uintptr_t)st);
    return result("StreamClose");
}

static nvtxwResultCode_t EventWrite(nvtxwStreamHandle_t st, const nvtxPayloadData_t *p, size_t n) {
    logf_("EventWrite %#" PRIxPTR " count=%zu", (uintptr_t)st, n);
    for (size_t i = 0; i < n; ++i) log_payload("payload", &p[i]);
    return result("EventWrite");
}

static nvtxwResultCode_t EventBatchWrite(nvtxwStreamHandle_t st, const nvtxEventBatch_t *b) {
    nvtxPayloadData_t p = {b->eventSchemaId, b->size, b->events};
    logf_("EventBatchWrite %#" PRIxPTR " scope=%" PRIu64 " flags=%" PRIu64, (uintptr_t)st, b->scope, b->flags);
    log_payload("events", &p);
    return result("EventBatchWrite");
}

static nvtxwResultCode_t CounterWrite(nvtxwStreamHandle_t st, int64_t t, uint64_t id, const void *data, size_t size) {
    nvtxPayloadData_t p = {id, size, data};
    logf_("CounterWrite %#" PRIxPTR " t=%" PRId64 " counter=%" PRIu64, (uintptr_t)st, t, id);
    log_payload("value", &p);
    return result("CounterWrite");
}

static nvtxwResultCode_t CounterNoValueWrite(nvtxwStreamHandle_t st, int64_t t, uint64_t id, uint8_t reason) {
    logf_("CounterNoValueWrite %#" PRIxPTR " t=%" PRId64 " counter=%" PRIu64 " reason=%u", (uintptr_t)st, t, id,
          (unsigned)reason);
    return result("CounterNoValueWrite");
}

static nvtxwResultCode_t CounterBatchWrite(nvtxwStreamHandle_t st, const nvtxCounterBatch_t *b) {
    nvtxPayloadData_t v = {b->counterId, b->countersSize, b->counters};
    nvtxPayloadData_t t = {0, b->timestampsSize, b->timestamps};
    logf_("CounterBatchWrite %#" PRIxPTR " counter=%" PRIu64 " flags=%" PRIu64, (uintptr_t)st, b->counterId, b->flags);
    log_payload("values", &v);
    log_payload("timestamps", &t);
    return result("CounterBatchWrite");
}

static const nvtxwInterface_v2_t g_iface = {
    .SessionBegin = SessionBegin,
    .SessionEnd = SessionEnd,
    .DomainRegister = DomainRegister,
    .CategoryRegister = CategoryRegister,
    .StringRegister = StringRegister,
    .ResourceRegister = ResourceRegister,
    .ScopeRegister = ScopeRegister,
    .SchemaRegister = SchemaRegister,
    .EnumRegister = EnumRegister,
    .CounterRegister = CounterRegister,
    .TimeDomainRegister = TimeDomainRegister,
    .StreamOpen = StreamOpen,
    .StreamClose = StreamClose,
    .EventWrite = EventWrite,
    .EventBatchWrite = EventBatchWrite,
    .CounterWrite = CounterWrite,
    .CounterNoValueWrite = CounterNoValueWrite,
    .CounterBatchWrite = CounterBatchWrite,
};

__attribute__((visibility("default"))) nvtxwResultCode_t nvtxwGetInterface(nvtxwInterfaceVersion_t version,
                                                                            const void **out) {
    logf_("nvtxwGetInterface version=%d", (int)version);
    if (getenv("NVTXW_TEST_VERSION_FAIL")) return NVTXW_RESULT_INTERFACE_VERSION_NOT_SUPPORTED;
    *out = &g_iface;
    return NVTXW_RESULT_SUCCESS;
}

__attribute__((visibility("default"))) void nvtxwFinalize(void) { logf_("nvtxwFinalize"); }
