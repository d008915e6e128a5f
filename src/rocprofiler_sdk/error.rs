//! `rocprofiler_status_t` as a typed error, and the misuse the crate reports before calling the library.

use crate::status::status_enum;

status_enum! {
    /// A rocprofiler-sdk call failed. `Display` gives the vendor's name for the status and, when the library is
    /// loaded, `rocprofiler_get_status_string`.
    pub enum SdkStatus: u32, from crate::sys::rocprofiler_sdk, success ROCPROFILER_STATUS_SUCCESS, display describe {
        Error = ROCPROFILER_STATUS_ERROR,
        ContextNotFound = ROCPROFILER_STATUS_ERROR_CONTEXT_NOT_FOUND,
        BufferNotFound = ROCPROFILER_STATUS_ERROR_BUFFER_NOT_FOUND,
        KindNotFound = ROCPROFILER_STATUS_ERROR_KIND_NOT_FOUND,
        OperationNotFound = ROCPROFILER_STATUS_ERROR_OPERATION_NOT_FOUND,
        ThreadNotFound = ROCPROFILER_STATUS_ERROR_THREAD_NOT_FOUND,
        AgentNotFound = ROCPROFILER_STATUS_ERROR_AGENT_NOT_FOUND,
        CounterNotFound = ROCPROFILER_STATUS_ERROR_COUNTER_NOT_FOUND,
        ContextError = ROCPROFILER_STATUS_ERROR_CONTEXT_ERROR,
        ContextInvalid = ROCPROFILER_STATUS_ERROR_CONTEXT_INVALID,
        ContextNotStarted = ROCPROFILER_STATUS_ERROR_CONTEXT_NOT_STARTED,
        ContextConflict = ROCPROFILER_STATUS_ERROR_CONTEXT_CONFLICT,
        ContextIdNotZero = ROCPROFILER_STATUS_ERROR_CONTEXT_ID_NOT_ZERO,
        BufferBusy = ROCPROFILER_STATUS_ERROR_BUFFER_BUSY,
        ServiceAlreadyConfigured = ROCPROFILER_STATUS_ERROR_SERVICE_ALREADY_CONFIGURED,
        ConfigurationLocked = ROCPROFILER_STATUS_ERROR_CONFIGURATION_LOCKED,
        NotImplemented = ROCPROFILER_STATUS_ERROR_NOT_IMPLEMENTED,
        IncompatibleAbi = ROCPROFILER_STATUS_ERROR_INCOMPATIBLE_ABI,
        InvalidArgument = ROCPROFILER_STATUS_ERROR_INVALID_ARGUMENT,
        MetricNotValidForAgent = ROCPROFILER_STATUS_ERROR_METRIC_NOT_VALID_FOR_AGENT,
        Finalized = ROCPROFILER_STATUS_ERROR_FINALIZED,
        HsaNotLoaded = ROCPROFILER_STATUS_ERROR_HSA_NOT_LOADED,
        DimNotFound = ROCPROFILER_STATUS_ERROR_DIM_NOT_FOUND,
        ProfileCounterNotFound = ROCPROFILER_STATUS_ERROR_PROFILE_COUNTER_NOT_FOUND,
        AstGenerationFailed = ROCPROFILER_STATUS_ERROR_AST_GENERATION_FAILED,
        AstNotFound = ROCPROFILER_STATUS_ERROR_AST_NOT_FOUND,
        AqlNoEventCoord = ROCPROFILER_STATUS_ERROR_AQL_NO_EVENT_COORD,
        IncompatibleKernel = ROCPROFILER_STATUS_ERROR_INCOMPATIBLE_KERNEL,
        OutOfResources = ROCPROFILER_STATUS_ERROR_OUT_OF_RESOURCES,
        ProfileNotFound = ROCPROFILER_STATUS_ERROR_PROFILE_NOT_FOUND,
        AgentDispatchConflict = ROCPROFILER_STATUS_ERROR_AGENT_DISPATCH_CONFLICT,
        InternalNoAgentContext = ROCPROFILER_STATUS_INTERNAL_NO_AGENT_CONTEXT,
        SampleRateExceeded = ROCPROFILER_STATUS_ERROR_SAMPLE_RATE_EXCEEDED,
        NoProfileQueue = ROCPROFILER_STATUS_ERROR_NO_PROFILE_QUEUE,
        NoHardwareCounters = ROCPROFILER_STATUS_ERROR_NO_HARDWARE_COUNTERS,
        AgentMismatch = ROCPROFILER_STATUS_ERROR_AGENT_MISMATCH,
        NotAvailable = ROCPROFILER_STATUS_ERROR_NOT_AVAILABLE,
        ExceedsHwLimit = ROCPROFILER_STATUS_ERROR_EXCEEDS_HW_LIMIT,
        AgentArchNotSupported = ROCPROFILER_STATUS_ERROR_AGENT_ARCH_NOT_SUPPORTED,
        PermissionDenied = ROCPROFILER_STATUS_ERROR_PERMISSION_DENIED,
    }
}

fn describe(e: &SdkStatus) -> String {
    let name = match e.vendor_name() {
        Some(n) => n.to_string(),
        None => format!("unrecognized rocprofiler-sdk status {}", e.code()),
    };
    crate::status::with_message(
        name,
        super::SdkLibrary::get().and_then(|l| l.status_string(e.code())),
    )
}

/// Misuse of rocprofiler-sdk that the crate reports before calling the library, or a fault it detected itself.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SdkError {
    /// The library's major version is not the one the bindings were made for.
    #[error(
        "rocprofiler-sdk {found} at {path} is not supported: this crate binds major version {supported} (ROCm 7.0+)"
    )]
    UnsupportedVersion {
        /// The version the library reports (`major.minor.patch`).
        found: String,
        /// The major version the crate binds.
        supported: u32,
        /// Where the library was loaded from.
        path: String,
    },
    /// A tool is already registered in this process; the SDK takes one registration per tool library.
    #[error("a rocprofiler-sdk tool is already registered in this process")]
    AlreadyRegistered,
    /// The SDK has initialised already (the HIP or HSA runtime started): tools can no longer register.
    #[error(
        "too late to register a rocprofiler-sdk tool: the SDK is already initialised (the HIP/HSA runtime started); \
         register before the first HIP call, or export the tool through ROCP_TOOL_LIBRARIES"
    )]
    TooLate,
    /// Services, contexts and buffers are configured only inside the tool's `initialize`.
    #[error(
        "rocprofiler-sdk is configured only inside the tool's initialize (the SDK locks configuration after it)"
    )]
    ConfigurationLocked,
    /// A buffer too small to hold one record of every kind it may receive.
    #[error("buffer size {size} is below the smallest the crate accepts ({min} bytes)")]
    BufferTooSmall {
        /// The size asked for.
        size: usize,
        /// The smallest size accepted.
        min: usize,
    },
    /// The watermark is above the buffer's size.
    #[error("buffer watermark {watermark} is above its size {size}")]
    WatermarkAboveSize {
        /// The watermark asked for.
        watermark: usize,
        /// The buffer size.
        size: usize,
    },
    /// A counter the agent does not have.
    #[error("agent {agent} has no counter {name:?}{}", close_names(.close))]
    UnknownCounter {
        /// The name asked for.
        name: String,
        /// The agent (its name, e.g. `gfx942`, and id).
        agent: String,
        /// The agent's counters closest to the name, best first.
        close: Vec<String>,
    },
    /// A list that must not be empty was empty.
    #[error("the list of {0} is empty")]
    EmptyList(&'static str),
    /// No agent of that id or index.
    #[error("no agent {0}")]
    NoSuchAgent(String),
    /// The callback panicked; the panic was caught and not unwound into the library.
    #[error("the callback panicked: {0}")]
    CallbackPanicked(String),
    /// The call would deadlock: it was made from inside a buffer callback.
    #[error(
        "this call is not allowed inside a buffer callback (it would wait for the callback itself)"
    )]
    InsideCallback,
    /// The device counting service was not started.
    #[error("the device counting service is not started")]
    NotStarted,
    /// The tool's `initialize` failed (forced registration reports it; an exported tool logs it).
    #[error("the rocprofiler-sdk tool's initialize failed: {0}")]
    ToolInitializeFailed(String),
    /// A tracing kind this library does not have (an SDK older than the kind, or a raw value past its last).
    /// Refused before the library is asked: the SDK indexes its per-kind tables before it checks the kind, so a
    /// kind past its last would throw a C++ exception into the process instead of returning a status.
    #[error(
        "this rocprofiler-sdk has no {service} kind {kind} (an SDK older than the kind); nothing was configured"
    )]
    UnknownKind {
        /// `buffer tracing` or `callback tracing`.
        service: &'static str,
        /// The raw kind.
        kind: u32,
    },
    /// No AMD GPU driver (`/dev/kfd`); the SDK would find no GPU agent.
    #[error("no AMD GPU driver: {0}")]
    NoAmdDriver(String),
}

fn close_names(close: &[String]) -> String {
    if close.is_empty() {
        String::new()
    } else {
        format!("; close: {}", close.join(", "))
    }
}
