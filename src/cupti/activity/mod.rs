//! The CUPTI Activity API: CUPTI records what the GPU and the CUDA APIs did into buffers, and hands each filled
//! buffer back; the crate decodes it into typed [`Activity`] records.
//!
//! Records are decoded in Rust, in place, from the layouts of the CUPTI release that wrote them
//! ([`RecordLayout`]): 13.0 and 12.9 are known exactly.

mod api;
mod batch;
mod clock;
mod graph;
mod kernel;
mod kind;
mod layout;
mod object;
mod overhead;
mod pool;
mod record;
mod tracer;
mod transfer;

pub use api::{ApiCall, SyncType, Synchronization};
pub use batch::{ActivityBatch, RecordError, Records};
pub use clock::Clock;
pub use graph::{GraphTrace, MarkerData, MarkerPayloadValue};
pub use kernel::{Kernel, LaunchType};
pub use kind::{ActivityKind, ActivityKinds};
pub use layout::{LayoutMatch, RecordLayout};
pub use object::{
    ContextRecord, DeviceRecord, ExternalCorrelation, Marker, MemoryOperation, MemoryRecord,
    NameRecord, StreamFlag, StreamRecord,
};
pub use overhead::{Overhead, OverheadKind};
pub use record::{Activity, ActivityObject, CopyKind, Dim3, MemoryKind, TimeRange};
pub use tracer::{
    ActivityTracer, ActivityTracerBuilder, DroppedRecords, FlushMode, TracerReport, TracerStats,
};
pub use transfer::{Memcpy, Memset, PeerCopy};
