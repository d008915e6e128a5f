//! Host calls: API calls (driver, runtime, HIP, HSA) and the synchronizations in which a host thread waited for the
//! device.

use std::sync::Arc;

/// Which host API a call belongs to.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ApiDomain {
    /// The CUDA driver API (`cu*`).
    Driver,
    /// The CUDA runtime API (`cuda*`).
    Runtime,
    /// The HIP runtime API (`hip*`).
    Hip,
    /// The HSA runtime API (`hsa_*`).
    Hsa,
    /// Markers and ranges (ROCTx).
    Marker,
    /// A code newer than this crate.
    Other(u8),
}

impl ApiDomain {
    /// Wire code.
    pub fn code(self) -> u8 {
        match self {
            ApiDomain::Driver => 1,
            ApiDomain::Runtime => 2,
            ApiDomain::Hip => 3,
            ApiDomain::Hsa => 4,
            ApiDomain::Marker => 5,
            ApiDomain::Other(c) => c,
        }
    }

    /// From the wire code.
    pub fn from_code(code: u8) -> Self {
        match code {
            1 => ApiDomain::Driver,
            2 => ApiDomain::Runtime,
            3 => ApiDomain::Hip,
            4 => ApiDomain::Hsa,
            5 => ApiDomain::Marker,
            c => ApiDomain::Other(c),
        }
    }

    /// `driver`, `runtime`, `hip`, `hsa`, `marker` or `other`.
    pub fn name(self) -> &'static str {
        match self {
            ApiDomain::Driver => "driver",
            ApiDomain::Runtime => "runtime",
            ApiDomain::Hip => "hip",
            ApiDomain::Hsa => "hsa",
            ApiDomain::Marker => "marker",
            ApiDomain::Other(_) => "other",
        }
    }
}

/// A host API call.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiRecord {
    /// Entry, ns.
    pub start: u64,
    /// Exit, ns.
    pub end: u64,
    /// Driver or runtime.
    pub domain: ApiDomain,
    /// The vendor's callback id of the function within its domain.
    pub cbid: u32,
    /// The function's name (`cuLaunchKernel`, `cudaMemcpyAsync`); empty where the id is unknown.
    pub name: Arc<str>,
    /// Correlation id: device records issued by this call carry the same.
    pub correlation: u32,
    /// Process id.
    pub process: u32,
    /// Thread id.
    pub thread: u32,
    /// The call's return code.
    pub return_value: u32,
}

/// Kind of a synchronization.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum SyncKind {
    /// Not known.
    Unknown,
    /// `cuEventSynchronize` / `cudaEventSynchronize`.
    EventSynchronize,
    /// `cuStreamWaitEvent` / `cudaStreamWaitEvent`.
    StreamWaitEvent,
    /// `cuStreamSynchronize` / `cudaStreamSynchronize`.
    StreamSynchronize,
    /// `cuCtxSynchronize` / `cudaDeviceSynchronize`.
    ContextSynchronize,
    /// A code newer than this crate.
    Other(u8),
}

impl SyncKind {
    /// The vendor's code (CUPTI's `CUpti_ActivitySynchronizationType`).
    pub fn code(self) -> u8 {
        match self {
            SyncKind::Unknown => 0,
            SyncKind::EventSynchronize => 1,
            SyncKind::StreamWaitEvent => 2,
            SyncKind::StreamSynchronize => 3,
            SyncKind::ContextSynchronize => 4,
            SyncKind::Other(c) => c,
        }
    }

    /// From the vendor's code.
    pub fn from_code(code: u8) -> Self {
        match code {
            0 => SyncKind::Unknown,
            1 => SyncKind::EventSynchronize,
            2 => SyncKind::StreamWaitEvent,
            3 => SyncKind::StreamSynchronize,
            4 => SyncKind::ContextSynchronize,
            c => SyncKind::Other(c),
        }
    }

    /// Name as profilers print it.
    pub fn name(self) -> &'static str {
        match self {
            SyncKind::Unknown => "synchronize",
            SyncKind::EventSynchronize => "event synchronize",
            SyncKind::StreamWaitEvent => "stream wait event",
            SyncKind::StreamSynchronize => "stream synchronize",
            SyncKind::ContextSynchronize => "context synchronize",
            SyncKind::Other(_) => "synchronize (other)",
        }
    }
}

/// A synchronization.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncRecord {
    /// Start, ns.
    pub start: u64,
    /// End, ns.
    pub end: u64,
    /// What waited.
    pub kind: SyncKind,
    /// Context id.
    pub context: u32,
    /// Stream id (the vendor's invalid id, `u32::MAX`, for a context synchronization).
    pub stream: u32,
    /// Event id for event kinds.
    pub event: u32,
    /// Correlation id of the API call.
    pub correlation: u32,
}
