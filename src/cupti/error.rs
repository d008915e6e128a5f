//! `CUptiResult` as a typed error.

use crate::status::status_enum;

status_enum! {
    /// A CUPTI call failed. `Display` gives the vendor's name for the code and, when `libcupti.so` is loaded,
    /// its message (`cuptiGetErrorMessage`).
    pub enum CuptiError: u32, from crate::sys::cupti, success CUPTI_SUCCESS, display describe {
        InvalidParameter = CUPTI_ERROR_INVALID_PARAMETER,
        InvalidDevice = CUPTI_ERROR_INVALID_DEVICE,
        InvalidContext = CUPTI_ERROR_INVALID_CONTEXT,
        InvalidEventDomainId = CUPTI_ERROR_INVALID_EVENT_DOMAIN_ID,
        InvalidEventId = CUPTI_ERROR_INVALID_EVENT_ID,
        InvalidEventName = CUPTI_ERROR_INVALID_EVENT_NAME,
        InvalidOperation = CUPTI_ERROR_INVALID_OPERATION,
        OutOfMemory = CUPTI_ERROR_OUT_OF_MEMORY,
        Hardware = CUPTI_ERROR_HARDWARE,
        ParameterSizeNotSufficient = CUPTI_ERROR_PARAMETER_SIZE_NOT_SUFFICIENT,
        ApiNotImplemented = CUPTI_ERROR_API_NOT_IMPLEMENTED,
        MaxLimitReached = CUPTI_ERROR_MAX_LIMIT_REACHED,
        NotReady = CUPTI_ERROR_NOT_READY,
        NotCompatible = CUPTI_ERROR_NOT_COMPATIBLE,
        NotInitialized = CUPTI_ERROR_NOT_INITIALIZED,
        InvalidMetricId = CUPTI_ERROR_INVALID_METRIC_ID,
        InvalidMetricName = CUPTI_ERROR_INVALID_METRIC_NAME,
        QueueEmpty = CUPTI_ERROR_QUEUE_EMPTY,
        InvalidHandle = CUPTI_ERROR_INVALID_HANDLE,
        InvalidStream = CUPTI_ERROR_INVALID_STREAM,
        InvalidKind = CUPTI_ERROR_INVALID_KIND,
        InvalidEventValue = CUPTI_ERROR_INVALID_EVENT_VALUE,
        Disabled = CUPTI_ERROR_DISABLED,
        InvalidModule = CUPTI_ERROR_INVALID_MODULE,
        InvalidMetricValue = CUPTI_ERROR_INVALID_METRIC_VALUE,
        HardwareBusy = CUPTI_ERROR_HARDWARE_BUSY,
        NotSupported = CUPTI_ERROR_NOT_SUPPORTED,
        UmProfilingNotSupported = CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED,
        UmProfilingNotSupportedOnDevice = CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED_ON_DEVICE,
        UmProfilingNotSupportedOnNonP2pDevices = CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED_ON_NON_P2P_DEVICES,
        UmProfilingNotSupportedWithMps = CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED_WITH_MPS,
        CdpTracingNotSupported = CUPTI_ERROR_CDP_TRACING_NOT_SUPPORTED,
        VirtualizedDeviceNotSupported = CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED,
        CudaCompilerNotCompatible = CUPTI_ERROR_CUDA_COMPILER_NOT_COMPATIBLE,
        InsufficientPrivileges = CUPTI_ERROR_INSUFFICIENT_PRIVILEGES,
        OldProfilerApiInitialized = CUPTI_ERROR_OLD_PROFILER_API_INITIALIZED,
        OpenaccUndefinedRoutine = CUPTI_ERROR_OPENACC_UNDEFINED_ROUTINE,
        LegacyProfilerNotSupported = CUPTI_ERROR_LEGACY_PROFILER_NOT_SUPPORTED,
        MultipleSubscribersNotSupported = CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED,
        VirtualizedDeviceInsufficientPrivileges = CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES,
        ConfidentialComputingNotSupported = CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED,
        CmpDeviceNotSupported = CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED,
        MigDeviceNotSupported = CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED,
        SliDeviceNotSupported = CUPTI_ERROR_SLI_DEVICE_NOT_SUPPORTED,
        WslDeviceNotSupported = CUPTI_ERROR_WSL_DEVICE_NOT_SUPPORTED,
        InvalidChipName = CUPTI_ERROR_INVALID_CHIP_NAME,
        Unknown = CUPTI_ERROR_UNKNOWN,
    }
}

fn describe(e: &CuptiError) -> String {
    let lib = super::CuptiLibrary::get();
    let name = match (e.vendor_name(), lib.and_then(|l| l.result_string(e.code()))) {
        (Some(n), _) => n.to_string(),
        // A code newer than the crate's header that the loaded library can name.
        (None, Some(vendor)) => format!("{vendor} (code {} unknown to this crate)", e.code()),
        (None, None) => format!("unrecognized CUPTI result {}", e.code()),
    };
    // CUPTI answers "<unknown>" for codes it does not know.
    let message = lib
        .and_then(|l| l.error_message(e.code()))
        .filter(|m| m.trim() != "<unknown>");
    crate::status::with_message(name, message)
}
