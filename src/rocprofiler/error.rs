//! `rocprofiler_status_t` as a typed error.

use crate::status::status_enum;

status_enum! {
    /// A rocprofiler call failed. `Display` gives the vendor's name for the status and, when the library is loaded,
    /// `rocprofiler_error_str` without its trailing newline.
    pub enum RocprofilerError: i32, from crate::sys::rocprofiler, success ROCPROFILER_STATUS_SUCCESS, display describe {
        Error = ROCPROFILER_STATUS_ERROR,
        AlreadyInitialized = ROCPROFILER_STATUS_ERROR_ALREADY_INITIALIZED,
        NotInitialized = ROCPROFILER_STATUS_ERROR_NOT_INITIALIZED,
        SessionMissingBuffer = ROCPROFILER_STATUS_ERROR_SESSION_MISSING_BUFFER,
        TimestampNotApplicable = ROCPROFILER_STATUS_ERROR_TIMESTAMP_NOT_APPLICABLE,
        AgentNotFound = ROCPROFILER_STATUS_ERROR_AGENT_NOT_FOUND,
        AgentInformationMissing = ROCPROFILER_STATUS_ERROR_AGENT_INFORMATION_MISSING,
        QueueNotFound = ROCPROFILER_STATUS_ERROR_QUEUE_NOT_FOUND,
        QueueInformationMissing = ROCPROFILER_STATUS_ERROR_QUEUE_INFORMATION_MISSING,
        KernelNotFound = ROCPROFILER_STATUS_ERROR_KERNEL_NOT_FOUND,
        KernelInformationMissing = ROCPROFILER_STATUS_ERROR_KERNEL_INFORMATION_MISSING,
        CounterNotFound = ROCPROFILER_STATUS_ERROR_COUNTER_NOT_FOUND,
        CounterInformationMissing = ROCPROFILER_STATUS_ERROR_COUNTER_INFORMATION_MISSING,
        TracerApiDataNotFound = ROCPROFILER_STATUS_ERROR_TRACER_API_DATA_NOT_FOUND,
        TracerApiDataInformationMissing = ROCPROFILER_STATUS_ERROR_TRACER_API_DATA_INFORMATION_MISSING,
        IncorrectDomain = ROCPROFILER_STATUS_ERROR_INCORRECT_DOMAIN,
        SessionNotFound = ROCPROFILER_STATUS_ERROR_SESSION_NOT_FOUND,
        CorruptedSessionBuffer = ROCPROFILER_STATUS_ERROR_CORRUPTED_SESSION_BUFFER,
        RecordCorrupted = ROCPROFILER_STATUS_ERROR_RECORD_CORRUPTED,
        IncorrectReplayMode = ROCPROFILER_STATUS_ERROR_INCORRECT_REPLAY_MODE,
        SessionMissingFilter = ROCPROFILER_STATUS_ERROR_SESSION_MISSING_FILTER,
        IncorrectSize = ROCPROFILER_STATUS_ERROR_INCORRECT_SIZE,
        IncorrectFlushInterval = ROCPROFILER_STATUS_ERROR_INCORRECT_FLUSH_INTERVAL,
        SessionFilterDataMismatch = ROCPROFILER_STATUS_ERROR_SESSION_FILTER_DATA_MISMATCH,
        FilterDataCorrupted = ROCPROFILER_STATUS_ERROR_FILTER_DATA_CORRUPTED,
        CorruptedLabelData = ROCPROFILER_STATUS_ERROR_CORRUPTED_LABEL_DATA,
        RangeStackIsEmpty = ROCPROFILER_STATUS_ERROR_RANGE_STACK_IS_EMPTY,
        PassNotStarted = ROCPROFILER_STATUS_ERROR_PASS_NOT_STARTED,
        HasActiveSession = ROCPROFILER_STATUS_ERROR_HAS_ACTIVE_SESSION,
        SessionNotActive = ROCPROFILER_STATUS_ERROR_SESSION_NOT_ACTIVE,
        FilterNotFound = ROCPROFILER_STATUS_ERROR_FILTER_NOT_FOUND,
        BufferNotFound = ROCPROFILER_STATUS_ERROR_BUFFER_NOT_FOUND,
        FilterNotSupported = ROCPROFILER_STATUS_ERROR_FILTER_NOT_SUPPORTED,
        InvalidArguments = ROCPROFILER_STATUS_ERROR_INVALID_ARGUMENTS,
        InvalidOperationId = ROCPROFILER_STATUS_ERROR_INVALID_OPERATION_ID,
        InvalidDomainId = ROCPROFILER_STATUS_ERROR_INVALID_DOMAIN_ID,
        NotImplemented = ROCPROFILER_STATUS_ERROR_NOT_IMPLEMENTED,
        MismatchedExternalCorrelationId = ROCPROFILER_STATUS_ERROR_MISMATCHED_EXTERNAL_CORRELATION_ID,
    }
}

fn describe(e: &RocprofilerError) -> String {
    let name = match e.vendor_name() {
        Some(n) => n.to_string(),
        None => format!("unrecognized rocprofiler status {}", e.code()),
    };
    crate::status::with_message(
        name,
        super::RocprofilerLibrary::get().and_then(|l| l.error_str(e.code())),
    )
}
