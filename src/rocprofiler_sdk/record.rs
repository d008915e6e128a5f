//! Typed views of the SDK's buffer records, borrowed from a [`Batch`](super::Batch).

use super::marker::{MarkerCall, RangeOperation};
use crate::sys::rocprofiler_sdk as sys;

/// One record of a buffer, decoded by category and kind.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum Record<'a> {
    /// A kernel ran (`KERNEL_DISPATCH`).
    KernelDispatch(KernelDispatch<'a>),
    /// A memory copy (`MEMORY_COPY`).
    MemoryCopy(MemoryCopy<'a>),
    /// A memory allocation or free (`MEMORY_ALLOCATION`).
    MemoryAllocation(MemoryAllocation<'a>),
    /// A scratch memory event (`SCRATCH_MEMORY`).
    ScratchMemory(ScratchMemory<'a>),
    /// A host API call: HSA, HIP, ROCTx calls, RCCL, rocDecode or rocJPEG.
    Api(ApiCall<'a>),
    /// A ROCTx range from its start to its end, or a mark (`MARKER_CORE_RANGE_API`).
    MarkerRange(MarkerRange<'a>),
    /// A correlation id will not be used again (`CORRELATION_ID_RETIREMENT`).
    CorrelationRetired(CorrelationRetired<'a>),
    /// The dispatch a run of [`Record::CounterValue`]s that follow belongs to (dispatch counting service).
    DispatchCounters(DispatchCounters<'a>),
    /// One counter instance's value (dispatch or device counting service).
    CounterValue(CounterValue<'a>),
    /// A category or kind this crate does not decode (PC samples, KFD events, a kind newer than the bindings).
    Unknown {
        /// The header's category (`rocprofiler_buffer_category_t`).
        category: u32,
        /// The header's kind within the category.
        kind: u32,
    },
}

/// Start and end, in nanoseconds on the SDK's clock ([`SdkLibrary::timestamp`](super::SdkLibrary::timestamp)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TimeRange {
    /// Start, ns.
    pub start: u64,
    /// End, ns.
    pub end: u64,
}

impl TimeRange {
    /// `end - start`, 0 where the SDK reported an end before the start.
    pub fn duration_ns(&self) -> u64 {
        self.end.saturating_sub(self.start)
    }
}

/// A kernel dispatch record.
#[derive(Clone, Copy)]
pub struct KernelDispatch<'a> {
    pub(crate) raw: &'a sys::rocprofiler_buffer_tracing_kernel_dispatch_record_t,
}

impl<'a> KernelDispatch<'a> {
    /// The raw record.
    pub fn raw(&self) -> &'a sys::rocprofiler_buffer_tracing_kernel_dispatch_record_t {
        self.raw
    }
    /// Start and end on the device.
    pub fn time(&self) -> TimeRange {
        TimeRange {
            start: self.raw.start_timestamp,
            end: self.raw.end_timestamp,
        }
    }
    /// The SDK's internal correlation id: the API call that launched it carries the same.
    pub fn correlation_id(&self) -> u64 {
        self.raw.correlation_id.internal
    }
    /// The launching thread.
    pub fn thread_id(&self) -> u64 {
        self.raw.thread_id
    }
    /// The agent (GPU) it ran on.
    pub fn agent_id(&self) -> u64 {
        self.raw.dispatch_info.agent_id.handle
    }
    /// The queue it was enqueued on.
    pub fn queue_id(&self) -> u64 {
        self.raw.dispatch_info.queue_id.handle
    }
    /// The kernel: its name comes with the kernel-symbol registration (callback tracing of code objects).
    pub fn kernel_id(&self) -> u64 {
        self.raw.dispatch_info.kernel_id
    }
    /// The dispatch's unique id.
    pub fn dispatch_id(&self) -> u64 {
        self.raw.dispatch_info.dispatch_id
    }
    /// Work-items of the grid, per dimension.
    pub fn grid_size(&self) -> [u32; 3] {
        let g = self.raw.dispatch_info.grid_size;
        [g.x, g.y, g.z]
    }
    /// Work-items of a workgroup, per dimension.
    pub fn workgroup_size(&self) -> [u32; 3] {
        let w = self.raw.dispatch_info.workgroup_size;
        [w.x, w.y, w.z]
    }
    /// Workgroups per dimension (the grid's work-items over the workgroup's, rounded up).
    pub fn workgroups(&self) -> [u32; 3] {
        let (g, w) = (self.grid_size(), self.workgroup_size());
        [0, 1, 2].map(|i| if w[i] == 0 { 0 } else { g[i].div_ceil(w[i]) })
    }
    /// LDS bytes per workgroup (static and dynamic).
    pub fn group_segment_size(&self) -> u32 {
        self.raw.dispatch_info.group_segment_size
    }
    /// Scratch bytes per work-item.
    pub fn private_segment_size(&self) -> u32 {
        self.raw.dispatch_info.private_segment_size
    }
}

impl std::fmt::Debug for KernelDispatch<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelDispatch")
            .field("kernel_id", &self.kernel_id())
            .field("dispatch_id", &self.dispatch_id())
            .field("agent_id", &self.agent_id())
            .field("time", &self.time())
            .finish_non_exhaustive()
    }
}

/// Direction of a memory copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CopyDirection {
    /// Host to host.
    HostToHost,
    /// Host to device.
    HostToDevice,
    /// Device to host.
    DeviceToHost,
    /// Device to device.
    DeviceToDevice,
    /// A value this crate does not know.
    Other(u32),
}

/// A memory copy record.
#[derive(Clone, Copy)]
pub struct MemoryCopy<'a> {
    pub(crate) raw: &'a sys::rocprofiler_buffer_tracing_memory_copy_record_t,
}

impl<'a> MemoryCopy<'a> {
    /// The raw record.
    pub fn raw(&self) -> &'a sys::rocprofiler_buffer_tracing_memory_copy_record_t {
        self.raw
    }
    /// Start and end.
    pub fn time(&self) -> TimeRange {
        TimeRange {
            start: self.raw.start_timestamp,
            end: self.raw.end_timestamp,
        }
    }
    /// Direction.
    pub fn direction(&self) -> CopyDirection {
        match self.raw.operation {
            sys::ROCPROFILER_MEMORY_COPY_HOST_TO_HOST => CopyDirection::HostToHost,
            sys::ROCPROFILER_MEMORY_COPY_HOST_TO_DEVICE => CopyDirection::HostToDevice,
            sys::ROCPROFILER_MEMORY_COPY_DEVICE_TO_HOST => CopyDirection::DeviceToHost,
            sys::ROCPROFILER_MEMORY_COPY_DEVICE_TO_DEVICE => CopyDirection::DeviceToDevice,
            other => CopyDirection::Other(other),
        }
    }
    /// Bytes copied.
    pub fn bytes(&self) -> u64 {
        self.raw.bytes
    }
    /// Source and destination agents.
    pub fn agents(&self) -> (u64, u64) {
        (self.raw.src_agent_id.handle, self.raw.dst_agent_id.handle)
    }
    /// The SDK's internal correlation id of the API call that issued it.
    pub fn correlation_id(&self) -> u64 {
        self.raw.correlation_id.internal
    }
    /// The issuing thread.
    pub fn thread_id(&self) -> u64 {
        self.raw.thread_id
    }
}

impl std::fmt::Debug for MemoryCopy<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryCopy")
            .field("direction", &self.direction())
            .field("bytes", &self.bytes())
            .field("time", &self.time())
            .finish_non_exhaustive()
    }
}

/// A memory allocation record.
#[derive(Clone, Copy)]
pub struct MemoryAllocation<'a> {
    pub(crate) raw: &'a sys::rocprofiler_buffer_tracing_memory_allocation_record_t,
}

impl<'a> MemoryAllocation<'a> {
    /// The raw record.
    pub fn raw(&self) -> &'a sys::rocprofiler_buffer_tracing_memory_allocation_record_t {
        self.raw
    }
    /// The operation (`rocprofiler_memory_allocation_operation_t`: allocate, free, ...).
    pub fn operation(&self) -> u32 {
        self.raw.operation
    }
    /// Start and end.
    pub fn time(&self) -> TimeRange {
        TimeRange {
            start: self.raw.start_timestamp,
            end: self.raw.end_timestamp,
        }
    }
    /// Bytes allocated.
    pub fn allocation_size(&self) -> u64 {
        self.raw.allocation_size
    }
    /// The agent.
    pub fn agent_id(&self) -> u64 {
        self.raw.agent_id.handle
    }
}

impl std::fmt::Debug for MemoryAllocation<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryAllocation")
            .field("operation", &self.operation())
            .field("allocation_size", &self.allocation_size())
            .finish_non_exhaustive()
    }
}

/// A scratch memory record.
#[derive(Clone, Copy)]
pub struct ScratchMemory<'a> {
    pub(crate) raw: &'a sys::rocprofiler_buffer_tracing_scratch_memory_record_t,
}

impl<'a> ScratchMemory<'a> {
    /// The raw record.
    pub fn raw(&self) -> &'a sys::rocprofiler_buffer_tracing_scratch_memory_record_t {
        self.raw
    }
    /// The operation (`rocprofiler_scratch_memory_operation_t`: alloc, free, async reclaim).
    pub fn operation(&self) -> u32 {
        self.raw.operation
    }
    /// Start and end.
    pub fn time(&self) -> TimeRange {
        TimeRange {
            start: self.raw.start_timestamp,
            end: self.raw.end_timestamp,
        }
    }
}

impl std::fmt::Debug for ScratchMemory<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScratchMemory")
            .field("operation", &self.operation())
            .finish_non_exhaustive()
    }
}

/// Which host API a call belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ApiKind {
    /// HSA runtime (core, AMD extensions, image, finalizer).
    Hsa,
    /// HIP runtime or compiler API.
    Hip,
    /// ROCTx markers and ranges.
    Marker,
    /// RCCL.
    Rccl,
    /// rocDecode.
    RocDecode,
    /// rocJPEG.
    RocJpeg,
}

impl ApiKind {
    /// The API of a buffer tracing kind, `None` for a kind that is not an API.
    pub fn of_buffer_kind(kind: u32) -> Option<ApiKind> {
        Some(match kind {
            sys::ROCPROFILER_BUFFER_TRACING_HSA_CORE_API
            | sys::ROCPROFILER_BUFFER_TRACING_HSA_AMD_EXT_API
            | sys::ROCPROFILER_BUFFER_TRACING_HSA_IMAGE_EXT_API
            | sys::ROCPROFILER_BUFFER_TRACING_HSA_FINALIZE_EXT_API => ApiKind::Hsa,
            sys::ROCPROFILER_BUFFER_TRACING_HIP_RUNTIME_API
            | sys::ROCPROFILER_BUFFER_TRACING_HIP_COMPILER_API => ApiKind::Hip,
            sys::ROCPROFILER_BUFFER_TRACING_MARKER_CORE_API
            | sys::ROCPROFILER_BUFFER_TRACING_MARKER_CONTROL_API
            | sys::ROCPROFILER_BUFFER_TRACING_MARKER_NAME_API
            | sys::ROCPROFILER_BUFFER_TRACING_MARKER_CORE_RANGE_API => ApiKind::Marker,
            sys::ROCPROFILER_BUFFER_TRACING_RCCL_API => ApiKind::Rccl,
            sys::ROCPROFILER_BUFFER_TRACING_ROCDECODE_API => ApiKind::RocDecode,
            sys::ROCPROFILER_BUFFER_TRACING_ROCJPEG_API => ApiKind::RocJpeg,
            _ => return None,
        })
    }
}

/// A host API call record.
#[derive(Clone, Copy)]
pub struct ApiCall<'a> {
    pub(crate) raw: &'a sys::rocprofiler_buffer_tracing_hip_api_record_t,
}

impl<'a> ApiCall<'a> {
    /// The raw record (every API kind has this layout).
    pub fn raw(&self) -> &'a sys::rocprofiler_buffer_tracing_hip_api_record_t {
        self.raw
    }
    /// The buffer tracing kind (`ROCPROFILER_BUFFER_TRACING_HIP_RUNTIME_API`, ...).
    pub fn kind(&self) -> u32 {
        self.raw.kind
    }
    /// Which API.
    pub fn api(&self) -> Option<ApiKind> {
        ApiKind::of_buffer_kind(self.raw.kind)
    }
    /// The function within its kind; [`SdkLibrary::operation_name`](super::SdkLibrary::operation_name) names it.
    pub fn operation(&self) -> i32 {
        self.raw.operation
    }
    /// Entry and exit.
    pub fn time(&self) -> TimeRange {
        TimeRange {
            start: self.raw.start_timestamp,
            end: self.raw.end_timestamp,
        }
    }
    /// The SDK's internal correlation id: device records this call issued carry the same.
    pub fn correlation_id(&self) -> u64 {
        self.raw.correlation_id.internal
    }
    /// The calling thread.
    pub fn thread_id(&self) -> u64 {
        self.raw.thread_id
    }
    /// The ROCTx call, for a `MARKER_CORE_API` record.
    pub fn marker_call(&self) -> Option<MarkerCall> {
        (self.raw.kind == sys::ROCPROFILER_BUFFER_TRACING_MARKER_CORE_API)
            .then(|| MarkerCall::from_raw(self.raw.operation))
    }
}

impl std::fmt::Debug for ApiCall<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiCall")
            .field("kind", &self.kind())
            .field("operation", &self.operation())
            .field("time", &self.time())
            .finish_non_exhaustive()
    }
}

/// A `MARKER_CORE_RANGE_API` record: a ROCTx range, or a mark.
#[derive(Clone, Copy)]
pub struct MarkerRange<'a> {
    pub(crate) raw: &'a sys::rocprofiler_buffer_tracing_marker_api_record_t,
}

impl<'a> MarkerRange<'a> {
    /// The raw record.
    pub fn raw(&self) -> &'a sys::rocprofiler_buffer_tracing_marker_api_record_t {
        self.raw
    }
    /// Range or mark.
    pub fn operation(&self) -> RangeOperation {
        RangeOperation::from_raw(self.raw.operation)
    }
    /// Start and end of the range; for a mark, of the `roctxMarkA` call.
    pub fn time(&self) -> TimeRange {
        TimeRange {
            start: self.raw.start_timestamp,
            end: self.raw.end_timestamp,
        }
    }
    /// The correlation id of the call that opened the range: the callback of that call carries the same, and with
    /// it the range's message ([`MarkerArgs::message`](super::MarkerArgs::message)).
    pub fn correlation_id(&self) -> u64 {
        self.raw.correlation_id.internal
    }
    /// The thread that opened the range.
    pub fn thread_id(&self) -> u64 {
        self.raw.thread_id
    }
}

impl std::fmt::Debug for MarkerRange<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MarkerRange")
            .field("operation", &self.operation())
            .field("correlation_id", &self.correlation_id())
            .field("time", &self.time())
            .finish_non_exhaustive()
    }
}

/// A correlation id retirement record.
#[derive(Clone, Copy)]
pub struct CorrelationRetired<'a> {
    pub(crate) raw: &'a sys::rocprofiler_buffer_tracing_correlation_id_retirement_record_t,
}

impl CorrelationRetired<'_> {
    /// The id retired.
    pub fn correlation_id(&self) -> u64 {
        self.raw.internal_correlation_id
    }
    /// When.
    pub fn timestamp(&self) -> u64 {
        self.raw.timestamp
    }
}

impl std::fmt::Debug for CorrelationRetired<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CorrelationRetired")
            .field("correlation_id", &self.correlation_id())
            .finish()
    }
}

/// The dispatch header of the dispatch counting service: the counter values of this dispatch follow it.
#[derive(Clone, Copy)]
pub struct DispatchCounters<'a> {
    pub(crate) raw: &'a sys::rocprofiler_dispatch_counting_service_record_t,
}

impl<'a> DispatchCounters<'a> {
    /// The raw record.
    pub fn raw(&self) -> &'a sys::rocprofiler_dispatch_counting_service_record_t {
        self.raw
    }
    /// How many counter values follow.
    pub fn values(&self) -> u64 {
        self.raw.num_records
    }
    /// The dispatch's id (counter values carry it too).
    pub fn dispatch_id(&self) -> u64 {
        self.raw.dispatch_info.dispatch_id
    }
    /// The kernel.
    pub fn kernel_id(&self) -> u64 {
        self.raw.dispatch_info.kernel_id
    }
    /// The agent.
    pub fn agent_id(&self) -> u64 {
        self.raw.dispatch_info.agent_id.handle
    }
    /// Start and end of the dispatch.
    pub fn time(&self) -> TimeRange {
        TimeRange {
            start: self.raw.start_timestamp,
            end: self.raw.end_timestamp,
        }
    }
}

impl std::fmt::Debug for DispatchCounters<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DispatchCounters")
            .field("dispatch_id", &self.dispatch_id())
            .field("values", &self.values())
            .finish_non_exhaustive()
    }
}

/// One counter instance's value. [`SdkLibrary::counter_of_instance`](super::SdkLibrary::counter_of_instance)
/// gives the counter an instance belongs to.
#[derive(Clone, Copy)]
pub struct CounterValue<'a> {
    pub(crate) raw: &'a sys::rocprofiler_counter_record_t,
}

impl<'a> CounterValue<'a> {
    /// The raw record.
    pub fn raw(&self) -> &'a sys::rocprofiler_counter_record_t {
        self.raw
    }
    /// The counter instance (counter id and dimension position, encoded by the SDK).
    pub fn instance_id(&self) -> u64 {
        self.raw.id
    }
    /// The value.
    pub fn value(&self) -> f64 {
        self.raw.counter_value
    }
    /// The dispatch it was counted for (0 for the device counting service).
    pub fn dispatch_id(&self) -> u64 {
        self.raw.dispatch_id
    }
    /// The agent.
    pub fn agent_id(&self) -> u64 {
        self.raw.agent_id.handle
    }
}

impl std::fmt::Debug for CounterValue<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CounterValue")
            .field("instance_id", &self.instance_id())
            .field("value", &self.value())
            .field("dispatch_id", &self.dispatch_id())
            .finish()
    }
}
