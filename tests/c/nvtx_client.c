/* A small NVTX client for the recorder tests: a C library with its own copy of the NVTX v3
 * dispatch table, driven from Python through ctypes. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <wchar.h>

#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtCuda.h> /* cuda.h: the repo's c/shim/cuda.h */

#define EXPORT __attribute__((visibility("default")))

/* The fixed scenario of test_c_client_all_fields. Returns 0, or the step that returned a wrong value. */
EXPORT int client_scenario(uint32_t os_tid) {
    if (nvtxRangePushA("outer") != 0) return 1;
    nvtxMarkA("mark-a");
    if (nvtxRangePop() != 0) return 2;
    if (nvtxRangePushW(L"wide \u00e9\u4e2d\U0001F600") != 0) return 3;
    nvtxRangePop();
    nvtxNameOsThreadA(os_tid, "main-thread");
    nvtxNameCategoryA(7, "seven");

    nvtxDomainHandle_t d = nvtxDomainCreateA("my-domain");
    if (!d) return 4;
    if (nvtxDomainCreateA("my-domain") != d) return 5;
    nvtxStringHandle_t s = nvtxDomainRegisterStringA(d, "registered");
    if (!s) return 6;
    nvtxDomainNameCategoryA(d, 3, "three");

    nvtxEventAttributes_t a;
    memset(&a, 0, sizeof a);
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.colorType = NVTX_COLOR_ARGB;
    a.color = 0xFF00FF00u;
    a.category = 3;
    a.payloadType = NVTX_PAYLOAD_TYPE_INT64;
    a.payload.llValue = -42;
    a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    a.message.registered = s;
    if (nvtxDomainRangePushEx(d, &a) != 0) return 7;
    if (nvtxDomainRangePop(d) != 0) return 8;

    nvtxEventAttributes_t b;
    memset(&b, 0, sizeof b);
    b.version = NVTX_VERSION;
    b.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    b.payloadType = NVTX_PAYLOAD_TYPE_DOUBLE;
    b.payload.dValue = 2.5;
    b.messageType = NVTX_MESSAGE_TYPE_ASCII;
    b.message.ascii = "started";
    nvtxRangeId_t id = nvtxRangeStartEx(&b);
    if (id == 0) return 9;
    nvtxRangeEnd(id);

    nvtxEventAttributes_t c;
    memset(&c, 0, sizeof c);
    c.version = NVTX_VERSION;
    c.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    c.payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT32;
    c.payload.uiValue = 4000000000u;
    c.messageType = NVTX_MESSAGE_TYPE_UNICODE;
    c.message.unicode = L"w-mark";
    nvtxDomainMarkEx(d, &c);
    if (nvtxRangePop() >= 0) return 10; /* a pop without a push */
    return 0;
}

/* n pushes and pops with a prefixed message; returns the number of NVTX calls made. */
EXPORT long client_push_pop(const char *message, long n) {
    for (long i = 0; i < n; ++i) {
        nvtxRangePushA(message);
        nvtxRangePop();
    }
    return 2 * n;
}

EXPORT long client_marks(const char *message, long n) {
    for (long i = 0; i < n; ++i) nvtxMarkA(message);
    return n;
}

/* The wide-character entry points and CUDA resource naming. */
EXPORT int client_wide_and_cuda(uint32_t os_tid) {
    nvtxNameOsThreadW(os_tid, L"w-thread \u00fc");
    nvtxNameCategoryW(9, L"w-nine");
    nvtxDomainHandle_t d = nvtxDomainCreateW(L"w-dom\u00e9");
    if (!d) return 1;
    if (nvtxDomainCreateA("w-dom\xc3\xa9") != d) return 2; /* the same name in UTF-8 */
    nvtxDomainNameCategoryW(d, 4, L"w-four");
    nvtxStringHandle_t s = nvtxDomainRegisterStringW(d, L"w-registered \u4e2d");
    nvtxEventAttributes_t a;
    memset(&a, 0, sizeof a);
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.payloadType = NVTX_PAYLOAD_TYPE_FLOAT;
    a.payload.fValue = 0.25f;
    a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    a.message.registered = s;
    nvtxRangeId_t id = nvtxDomainRangeStartEx(d, &a);
    nvtxDomainRangeEnd(d, id);
    nvtxMarkW(L"w-mark");
    nvtxRangeId_t id2 = nvtxRangeStartW(L"w-start");
    if (id2 == id || id2 == 0) return 3;
    nvtxRangeEnd(id2);
    nvtxEventAttributes_t b;
    memset(&b, 0, sizeof b);
    b.version = NVTX_VERSION;
    b.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    b.colorType = NVTX_COLOR_ARGB;
    b.color = 0x80112233u;
    b.payloadType = NVTX_PAYLOAD_TYPE_INT32;
    b.payload.iValue = -7;
    b.messageType = NVTX_MESSAGE_TYPE_UNICODE;
    b.message.unicode = L"w-push";
    if (nvtxRangePushEx(&b) != 0) return 4;
    nvtxRangePop();
    nvtxNameCuDeviceA(3, "gpu3");
    nvtxNameCuContextW((CUcontext)(uintptr_t)0x1000, L"ctx");
    nvtxNameCuStreamA((CUstream)(uintptr_t)0x2000, "stream");
    nvtxNameCuEventA((CUevent)(uintptr_t)0x3000, "event");
    return 0;
}

/* marks "<prefix><i>" for i in [0, n) */
EXPORT long client_numbered_marks(const char *prefix, long n) {
    char buf[256];
    for (long i = 0; i < n; ++i) {
        snprintf(buf, sizeof buf, "%s%ld", prefix, i);
        nvtxMarkA(buf);
    }
    return n;
}

/* n marks in the domain "forked-domain", whose handle is created once and cached. */
EXPORT long client_domain_marks(const char *message, long n) {
    static nvtxDomainHandle_t d;
    if (!d) d = nvtxDomainCreateA("forked-domain");
    nvtxEventAttributes_t a;
    memset(&a, 0, sizeof a);
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = message;
    for (long i = 0; i < n; ++i) nvtxDomainMarkEx(d, &a);
    return n;
}

/* a range started and ended; its id (0 without a tool) */
EXPORT uint64_t client_start_end(void) {
    nvtxRangeId_t id = nvtxRangeStartA("r");
    nvtxRangeEnd(id);
    return id;
}

/* single calls, for scenarios driven step by step from Python */
EXPORT int client_push(const char *message) { return nvtxRangePushA(message); }
EXPORT int client_pop(void) { return nvtxRangePop(); }
EXPORT uint64_t client_start_end_open(void) { return nvtxRangeStartA("open"); }
EXPORT void client_name_thread(uint32_t tid, const char *name) { nvtxNameOsThreadA(tid, name); }

static void set_payload(nvtxEventAttributes_t *a, int type, long i) {
    switch (type) {
    case NVTX_PAYLOAD_TYPE_UNSIGNED_INT64: a->payload.ullValue = (uint64_t)i; break;
    case NVTX_PAYLOAD_TYPE_INT64: a->payload.llValue = i; break;
    case NVTX_PAYLOAD_TYPE_DOUBLE: a->payload.dValue = (double)i / 3; break;
    case NVTX_PAYLOAD_TYPE_UNSIGNED_INT32: a->payload.uiValue = (uint32_t)i; break;
    case NVTX_PAYLOAD_TYPE_INT32: a->payload.iValue = (int32_t)i; break;
    default: a->payload.fValue = (float)i / 3; break;
    }
}

/* Events with a payload of NVTX payload type `type` (NVTX_PAYLOAD_TYPE_*): for i in [first, first + n),
 * a push/pop range and a mark, each with payload i (as that type: the integers wrap, the floating
 * types hold i / 3), then a start/end range with payload `first`. In domain `domain` (NULL: the
 * default one), category `category` (0: none), colour `argb` (0: none). Returns the events made. */
EXPORT long client_payloads(int type, long first, long n, const char *message, const char *domain,
                            uint32_t category, uint32_t argb) {
    nvtxDomainHandle_t d = domain ? nvtxDomainCreateA(domain) : NULL;
    nvtxEventAttributes_t a;
    memset(&a, 0, sizeof a);
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.category = category;
    a.colorType = argb ? NVTX_COLOR_ARGB : NVTX_COLOR_UNKNOWN;
    a.color = argb;
    a.payloadType = type;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = message;
    for (long i = first; i < first + n; ++i) {
        set_payload(&a, type, i);
        nvtxDomainRangePushEx(d, &a);
        nvtxDomainRangePop(d);
        nvtxDomainMarkEx(d, &a);
    }
    set_payload(&a, type, first);
    nvtxDomainRangeEnd(d, nvtxDomainRangeStartEx(d, &a));
    return 3 * n + 2;
}
