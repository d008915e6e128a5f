// What the PC sampling probes share (pc_graph_probe.cu, pc_jit_probe.cu): CUPTI's result check, the enable, the
// stall-reason query, the configuration (every stall reason, parsed data, the given configured buffer) and activity
// buffers handed back unread. Header-only: each probe is one nvcc command.
#pragma once
#include <cuda.h>
#include <cupti.h>
#include <cupti_pcsampling.h>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CU(call)                                                                     \
    do {                                                                             \
        CUptiResult r_ = (call);                                                     \
        if (r_ != CUPTI_SUCCESS) {                                                   \
            const char *s_ = nullptr;                                                \
            cuptiGetResultString(r_, &s_);                                           \
            printf("error %s -> %d %s\n", #call, (int)r_, s_ ? s_ : "");             \
            exit(3);                                                                 \
        }                                                                            \
    } while (0)

static inline void pc_enable(CUcontext ctx) {
    CUpti_PCSamplingEnableParams e = {};
    e.size = CUpti_PCSamplingEnableParamsSize;
    e.ctx = ctx;
    CU(cuptiPCSamplingEnable(&e));
}

// One cuptiPCSamplingGetData of `ctx` into `data` (prepared by the caller): CUPTI's answer.
static inline CUptiResult pc_get_data(CUcontext ctx, CUpti_PCSamplingData *data) {
    CUpti_PCSamplingGetDataParams p = {};
    p.size = CUpti_PCSamplingGetDataParamsSize;
    p.ctx = ctx;
    p.pcSamplingData = data;
    return cuptiPCSamplingGetData(&p);
}

// The device's stall reasons (sampling enabled on `ctx`): their indexes in `index`; returns how many.
static inline size_t pc_stall_reasons(CUcontext ctx, std::vector<uint32_t> &index) {
    size_t count = 0;
    CUpti_PCSamplingGetNumStallReasonsParams n = {};
    n.size = CUpti_PCSamplingGetNumStallReasonsParamsSize;
    n.ctx = ctx;
    n.numStallReasons = &count;
    CU(cuptiPCSamplingGetNumStallReasons(&n));
    index.assign(count, 0);
    std::vector<char *> names(count);
    for (auto &s : names) s = (char *)calloc(CUPTI_STALL_REASON_STRING_SIZE, 1);
    CUpti_PCSamplingGetStallReasonsParams r = {};
    r.size = CUpti_PCSamplingGetStallReasonsParamsSize;
    r.ctx = ctx;
    r.numStallReasons = count;
    r.stallReasonIndex = index.data();
    r.stallReasons = names.data();
    CU(cuptiPCSamplingGetStallReasons(&r));
    for (auto s : names) free(s);
    return count;
}

// Every reason in `index`, `config` as CUPTI's sampling data buffer, continuous (or kernel-serialised) collection,
// parsed data; the workers' sleep span between rounds from PC_SLEEP_MS where set (CUPTI's default, 100 ms, where not).
static inline void pc_configure(CUcontext ctx, std::vector<uint32_t> &index, CUpti_PCSamplingData *config,
                                bool serial) {
    CUpti_PCSamplingConfigurationInfo a[5] = {};
    a[0].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_STALL_REASON;
    a[0].attributeData.stallReasonData.stallReasonCount = index.size();
    a[0].attributeData.stallReasonData.pStallReasonIndex = index.data();
    a[1].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_DATA_BUFFER;
    a[1].attributeData.samplingDataBufferData.samplingDataBuffer = config;
    a[2].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_COLLECTION_MODE;
    a[2].attributeData.collectionModeData.collectionMode =
        serial ? CUPTI_PC_SAMPLING_COLLECTION_MODE_KERNEL_SERIALIZED : CUPTI_PC_SAMPLING_COLLECTION_MODE_CONTINUOUS;
    a[3].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_OUTPUT_DATA_FORMAT;
    a[3].attributeData.outputDataFormatData.outputDataFormat = CUPTI_PC_SAMPLING_OUTPUT_DATA_FORMAT_PARSED;
    CUpti_PCSamplingConfigurationInfoParams c = {};
    c.size = CUpti_PCSamplingConfigurationInfoParamsSize;
    c.ctx = ctx;
    c.numAttributes = 4;
    if (const char *sleep = getenv("PC_SLEEP_MS")) {
        a[4].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_WORKER_THREAD_PERIODIC_SLEEP_SPAN;
        a[4].attributeData.workerThreadPeriodicSleepSpanData.workerThreadPeriodicSleepSpan = atoi(sleep);
        c.numAttributes = 5;
    }
    c.pPCSamplingConfigurationInfo = a;
    CU(cuptiPCSamplingSetConfigurationAttribute(&c));
}

// Activity buffers of 4 MiB, handed back unread.
static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
    *size = 4u << 20;
    *buffer = (uint8_t *)aligned_alloc(8, *size);
    *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t *buffer, size_t, size_t) { free(buffer); }
