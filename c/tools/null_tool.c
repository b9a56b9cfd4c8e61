/* null_tool.c - an NVTX v3 injection library whose handlers do nothing.
 *
 * Benchmarks attach it (NVTX_INJECTION64_PATH=.../libnvtx_null_tool.so) to measure the cost of an
 * NVTX call that reaches a tool, without the tool's own work. Every CORE and CORE2 slot is filled:
 * domains and registered strings get non-NULL constant handles, ranges ids count up, push/pop
 * return 0.
 */
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <wchar.h>

#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

#define EXPORT __attribute__((visibility("default")))
#define FN(f) ((NvtxFunctionPointer)(f))

static char g_domain_tag, g_string_tag, g_resource_tag;
static _Atomic uint64_t g_range_ids = 1;

static nvtxRangeId_t next_id(void) { return atomic_fetch_add_explicit(&g_range_ids, 1, memory_order_relaxed); }

static void n_MarkEx(const nvtxEventAttributes_t *a) { (void)a; }
static void n_MarkA(const char *m) { (void)m; }
static void n_MarkW(const wchar_t *m) { (void)m; }
static nvtxRangeId_t n_RangeStartEx(const nvtxEventAttributes_t *a) { (void)a; return next_id(); }
static nvtxRangeId_t n_RangeStartA(const char *m) { (void)m; return next_id(); }
static nvtxRangeId_t n_RangeStartW(const wchar_t *m) { (void)m; return next_id(); }
static void n_RangeEnd(nvtxRangeId_t id) { (void)id; }
static int n_RangePushEx(const nvtxEventAttributes_t *a) { (void)a; return 0; }
static int n_RangePushA(const char *m) { (void)m; return 0; }
static int n_RangePushW(const wchar_t *m) { (void)m; return 0; }
static int n_RangePop(void) { return 0; }
static void n_NameCategoryA(uint32_t c, const char *n) { (void)c; (void)n; }
static void n_NameCategoryW(uint32_t c, const wchar_t *n) { (void)c; (void)n; }
static void n_NameOsThreadA(uint32_t t, const char *n) { (void)t; (void)n; }
static void n_NameOsThreadW(uint32_t t, const wchar_t *n) { (void)t; (void)n; }

static void n_DomainMarkEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) { (void)d; (void)a; }
static nvtxRangeId_t n_DomainRangeStartEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) {
    (void)d;
    (void)a;
    return next_id();
}
static void n_DomainRangeEnd(nvtxDomainHandle_t d, nvtxRangeId_t id) { (void)d; (void)id; }
static int n_DomainRangePushEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) { (void)d; (void)a; return 0; }
static int n_DomainRangePop(nvtxDomainHandle_t d) { (void)d; return 0; }
static nvtxResourceHandle_t n_DomainResourceCreate(nvtxDomainHandle_t d, nvtxResourceAttributes_t *a) {
    (void)d;
    (void)a;
    return (nvtxResourceHandle_t)(void *)&g_resource_tag;
}
static void n_DomainResourceDestroy(nvtxResourceHandle_t r) { (void)r; }
static void n_DomainNameCategoryA(nvtxDomainHandle_t d, uint32_t c, const char *n) { (void)d; (void)c; (void)n; }
static void n_DomainNameCategoryW(nvtxDomainHandle_t d, uint32_t c, const wchar_t *n) { (void)d; (void)c; (void)n; }
static nvtxStringHandle_t n_DomainRegisterStringA(nvtxDomainHandle_t d, const char *s) {
    (void)d;
    (void)s;
    return (nvtxStringHandle_t)(void *)&g_string_tag;
}
static nvtxStringHandle_t n_DomainRegisterStringW(nvtxDomainHandle_t d, const wchar_t *s) {
    (void)d;
    (void)s;
    return (nvtxStringHandle_t)(void *)&g_string_tag;
}
static nvtxDomainHandle_t n_DomainCreateA(const char *n) { (void)n; return (nvtxDomainHandle_t)(void *)&g_domain_tag; }
static nvtxDomainHandle_t n_DomainCreateW(const wchar_t *n) { (void)n; return (nvtxDomainHandle_t)(void *)&g_domain_tag; }
static void n_DomainDestroy(nvtxDomainHandle_t d) { (void)d; }
static void n_Initialize(const void *r) { (void)r; }

static void install(const NvtxExportTableCallbacks *cb, NvtxCallbackModule module,
                    const NvtxFunctionPointer *fns, unsigned int n) {
    NvtxFunctionTable table = NULL;
    unsigned int size = 0;
    if (!cb->GetModuleFunctionTable(module, &table, &size) || !table) return;
    for (unsigned int i = 1; i < n && i <= size; ++i) {
        if (fns[i] && table[i]) *table[i] = fns[i];
    }
}

EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t getExportTable) {
    if (!getExportTable) return 0;
    const NvtxExportTableCallbacks *cb = getExportTable(NVTX_ETID_CALLBACKS);
    if (!cb || cb->struct_size < sizeof *cb || !cb->GetModuleFunctionTable) return 0;
    static const NvtxFunctionPointer core[NVTX_CBID_CORE_SIZE] = {
        [NVTX_CBID_CORE_MarkEx] = FN(n_MarkEx),
        [NVTX_CBID_CORE_MarkA] = FN(n_MarkA),
        [NVTX_CBID_CORE_MarkW] = FN(n_MarkW),
        [NVTX_CBID_CORE_RangeStartEx] = FN(n_RangeStartEx),
        [NVTX_CBID_CORE_RangeStartA] = FN(n_RangeStartA),
        [NVTX_CBID_CORE_RangeStartW] = FN(n_RangeStartW),
        [NVTX_CBID_CORE_RangeEnd] = FN(n_RangeEnd),
        [NVTX_CBID_CORE_RangePushEx] = FN(n_RangePushEx),
        [NVTX_CBID_CORE_RangePushA] = FN(n_RangePushA),
        [NVTX_CBID_CORE_RangePushW] = FN(n_RangePushW),
        [NVTX_CBID_CORE_RangePop] = FN(n_RangePop),
        [NVTX_CBID_CORE_NameCategoryA] = FN(n_NameCategoryA),
        [NVTX_CBID_CORE_NameCategoryW] = FN(n_NameCategoryW),
        [NVTX_CBID_CORE_NameOsThreadA] = FN(n_NameOsThreadA),
        [NVTX_CBID_CORE_NameOsThreadW] = FN(n_NameOsThreadW),
    };
    static const NvtxFunctionPointer core2[NVTX_CBID_CORE2_SIZE] = {
        [NVTX_CBID_CORE2_DomainMarkEx] = FN(n_DomainMarkEx),
        [NVTX_CBID_CORE2_DomainRangeStartEx] = FN(n_DomainRangeStartEx),
        [NVTX_CBID_CORE2_DomainRangeEnd] = FN(n_DomainRangeEnd),
        [NVTX_CBID_CORE2_DomainRangePushEx] = FN(n_DomainRangePushEx),
        [NVTX_CBID_CORE2_DomainRangePop] = FN(n_DomainRangePop),
        [NVTX_CBID_CORE2_DomainResourceCreate] = FN(n_DomainResourceCreate),
        [NVTX_CBID_CORE2_DomainResourceDestroy] = FN(n_DomainResourceDestroy),
        [NVTX_CBID_CORE2_DomainNameCategoryA] = FN(n_DomainNameCategoryA),
        [NVTX_CBID_CORE2_DomainNameCategoryW] = FN(n_DomainNameCategoryW),
        [NVTX_CBID_CORE2_DomainRegisterStringA] = FN(n_DomainRegisterStringA),
        [NVTX_CBID_CORE2_DomainRegisterStringW] = FN(n_DomainRegisterStringW),
        [NVTX_CBID_CORE2_DomainCreateA] = FN(n_DomainCreateA),
        [NVTX_CBID_CORE2_DomainCreateW] = FN(n_DomainCreateW),
        [NVTX_CBID_CORE2_DomainDestroy] = FN(n_DomainDestroy),
        [NVTX_CBID_CORE2_Initialize] = FN(n_Initialize),
    };
    install(cb, NVTX_CB_MODULE_CORE, core, NVTX_CBID_CORE_SIZE);
    install(cb, NVTX_CB_MODULE_CORE2, core2, NVTX_CBID_CORE2_SIZE);
    return 1;
}

/* ---- payload and counters extensions (nvToolsExtPayload.h, nvToolsExtCounters.h) -------------
 * Handlers that do nothing, so a counter sample reaches a tool (benchmarks compare its cost). */
#include <nvtx3/nvToolsExtCounters.h>
#include <nvtx3/nvToolsExtPayload.h>

static uint64_t g_ext_ids = 1;
static uint64_t n_SchemaRegister(nvtxDomainHandle_t d, const nvtxPayloadSchemaAttr_t *a) {
    (void)d;
    (void)a;
    return __atomic_add_fetch(&g_ext_ids, 1, __ATOMIC_RELAXED) + NVTX_PAYLOAD_SCHEMA_ID_DYNAMIC_START;
}
static uint8_t n_DomainIsEnabled(nvtxDomainHandle_t d) { (void)d; return 1; }
static uint64_t n_CounterRegister(nvtxDomainHandle_t d, const nvtxCounterAttr_t *a) {
    (void)d;
    (void)a;
    return __atomic_add_fetch(&g_ext_ids, 1, __ATOMIC_RELAXED) + NVTX_COUNTER_ID_DYNAMIC_START;
}
static void n_SampleInt64(nvtxDomainHandle_t d, uint64_t c, int64_t v) { (void)d; (void)c; (void)v; }
static void n_SampleFloat64(nvtxDomainHandle_t d, uint64_t c, double v) { (void)d; (void)c; (void)v; }
static void n_Sample(nvtxDomainHandle_t d, uint64_t c, const void *v, size_t s) { (void)d; (void)c; (void)v; (void)s; }
static void n_SampleNoValue(nvtxDomainHandle_t d, uint64_t c, uint8_t r) { (void)d; (void)c; (void)r; }
static void n_BatchSubmit(nvtxDomainHandle_t d, const nvtxCounterBatch_t *b) { (void)d; (void)b; }

EXPORT int InitializeInjectionNvtxExtension(nvtxExtModuleInfo_t *info) {
    if (!info || info->segmentsCount < 1 || !info->segments || !info->segments[0].functionSlots) return 0;
    intptr_t *slots = info->segments[0].functionSlots;
    size_t n = info->segments[0].slotCount;
#define PUT(cbid, fn) if ((cbid) < n) slots[cbid] = (intptr_t)(fn)
    if (info->moduleId == NVTX_EXT_PAYLOAD_MODULEID) {
        PUT(NVTX3EXT_CBID_nvtxPayloadSchemaRegister, n_SchemaRegister);
        PUT(NVTX3EXT_CBID_nvtxDomainIsEnabled, n_DomainIsEnabled);
    } else if (info->moduleId == NVTX_EXT_COUNTERS_MODULEID) {
        PUT(NVTX3EXT_CBID_nvtxCounterRegister, n_CounterRegister);
        PUT(NVTX3EXT_CBID_nvtxCounterSampleInt64, n_SampleInt64);
        PUT(NVTX3EXT_CBID_nvtxCounterSampleFloat64, n_SampleFloat64);
        PUT(NVTX3EXT_CBID_nvtxCounterSample, n_Sample);
        PUT(NVTX3EXT_CBID_nvtxCounterSampleNoValue, n_SampleNoValue);
        PUT(NVTX3EXT_CBID_nvtxCounterBatchSubmit, n_BatchSubmit);
    }
#undef PUT
    return 1;
}
