//! Kernel records: `CUpti_ActivityKernel10` (CUPTI 13.0) and `CUpti_ActivityKernel9` (12.9).

use std::ffi::CStr;
use std::fmt;

use super::layout::RecordLayout;
use super::record::{Dim3, TimeRange, open_enum, record_str};
use crate::cupti::activity_kind::ActivityKind;
use crate::sys::cupti as sys;

open_enum! {
    /// How a kernel was launched (`CUpti_ActivityLaunchType`).
    pub enum LaunchType: u8 {
        /// An ordinary launch.
        Regular = CUPTI_ACTIVITY_LAUNCH_TYPE_REGULAR,
        /// A cooperative launch on one device.
        CooperativeSingleDevice = CUPTI_ACTIVITY_LAUNCH_TYPE_COOPERATIVE_SINGLE_DEVICE,
        /// A cooperative launch on several devices.
        CooperativeMultiDevice = CUPTI_ACTIVITY_LAUNCH_TYPE_COOPERATIVE_MULTI_DEVICE,
        /// A launch from a command list.
        CblCommandList = CUPTI_ACTIVITY_LAUNCH_TYPE_CBL_COMMANDLIST,
    }
}

/// A kernel execution (`CONCURRENT_KERNEL` or `KERNEL`).
///
/// Both layouts are read through the 12.9 record, which the 13.0 one extends by 8 bytes at its end
/// (`isDeviceLaunched` and padding); [`is_device_launched`](Self::is_device_launched) is `None` for 12.9.
#[derive(Clone, Copy)]
pub struct Kernel<'a> {
    raw: &'a sys::CUpti_ActivityKernel9,
    v10: Option<&'a sys::CUpti_ActivityKernel10>,
    follow: bool,
}

// SAFETY: a read-only view of a record in a buffer that stays unchanged for 'a; the name it points at is vendor
// memory valid for 'a (the batch's contract). Nothing is written or freed through it.
unsafe impl Send for Kernel<'_> {}
// SAFETY: as above.
unsafe impl Sync for Kernel<'_> {}

impl<'a> Kernel<'a> {
    /// # Safety
    /// `at` must be 8-aligned with `layout.record_size(kind)` readable bytes for `'a`; with `follow`, the name
    /// pointer must be null or valid for `'a`.
    #[inline]
    pub(crate) unsafe fn new(at: *const u8, layout: RecordLayout, follow: bool) -> Self {
        // SAFETY: the caller's contract; the 12.9 record is a prefix of the 13.0 one (asserted in `layout`),
        // and every field of these plain C structs is valid for any bits.
        unsafe {
            Kernel {
                raw: &*at.cast::<sys::CUpti_ActivityKernel9>(),
                v10: (layout == RecordLayout::Cupti13_0)
                    .then(|| &*at.cast::<sys::CUpti_ActivityKernel10>()),
                follow,
            }
        }
    }

    /// `KERNEL` or `CONCURRENT_KERNEL`.
    #[inline]
    pub fn kind(&self) -> ActivityKind {
        ActivityKind(self.raw.kind)
    }

    /// The record as the 12.9 layout declares it (every field, also those without an accessor).
    #[inline]
    pub fn raw(&self) -> &'a sys::CUpti_ActivityKernel9 {
        self.raw
    }

    /// The record as the 13.0 layout declares it; `None` for a 12.9 record.
    #[inline]
    pub fn raw_v10(&self) -> Option<&'a sys::CUpti_ActivityKernel10> {
        self.v10
    }

    /// Start and end of the execution on the GPU.
    #[inline]
    pub fn time(&self) -> TimeRange {
        TimeRange {
            start: self.raw.start,
            end: self.raw.end,
        }
    }

    /// When the kernel completed, as CUPTI saw it (0 where not collected).
    #[inline]
    pub fn completed(&self) -> u64 {
        self.raw.completed
    }

    /// When the launch was queued (0 unless `cuptiActivityEnableLatencyTimestamps` was enabled).
    #[inline]
    pub fn queued(&self) -> u64 {
        self.raw.queued
    }

    /// When the launch was submitted to the GPU (0 unless latency timestamps are enabled).
    #[inline]
    pub fn submitted(&self) -> u64 {
        self.raw.submitted
    }

    /// The device id.
    #[inline]
    pub fn device_id(&self) -> u32 {
        self.raw.deviceId
    }

    /// The context id.
    #[inline]
    pub fn context_id(&self) -> u32 {
        self.raw.contextId
    }

    /// The stream id.
    #[inline]
    pub fn stream_id(&self) -> u32 {
        self.raw.streamId
    }

    /// The correlation id of the API call that launched it.
    #[inline]
    pub fn correlation_id(&self) -> u32 {
        self.raw.correlationId
    }

    /// The grid id, unique per context.
    #[inline]
    pub fn grid_id(&self) -> i64 {
        self.raw.gridId
    }

    /// The kernel's (mangled) name; `None` where the record has none or the batch does not follow pointers
    /// ([`ActivityBatch::from_bytes`](super::ActivityBatch::from_bytes)).
    #[inline]
    pub fn name(&self) -> Option<&'a CStr> {
        // SAFETY: `follow` is set only for batches whose pointers are valid for 'a (`new`'s contract).
        unsafe { record_str(self.raw.name, self.follow) }
    }

    /// Grid dimensions.
    #[inline]
    pub fn grid(&self) -> Dim3 {
        Dim3::from_signed(self.raw.gridX, self.raw.gridY, self.raw.gridZ)
    }

    /// Block dimensions.
    #[inline]
    pub fn block(&self) -> Dim3 {
        Dim3::from_signed(self.raw.blockX, self.raw.blockY, self.raw.blockZ)
    }

    /// Cluster dimensions (0 where the launch has no clusters).
    #[inline]
    pub fn cluster(&self) -> Dim3 {
        Dim3 {
            x: self.raw.clusterX,
            y: self.raw.clusterY,
            z: self.raw.clusterZ,
        }
    }

    /// Static shared memory per block, bytes.
    #[inline]
    pub fn static_shared_memory(&self) -> u32 {
        u32::try_from(self.raw.staticSharedMemory).unwrap_or(0)
    }

    /// Dynamic shared memory per block, bytes.
    #[inline]
    pub fn dynamic_shared_memory(&self) -> u32 {
        u32::try_from(self.raw.dynamicSharedMemory).unwrap_or(0)
    }

    /// Registers per thread.
    #[inline]
    pub fn registers_per_thread(&self) -> u16 {
        self.raw.registersPerThread
    }

    /// Local memory per thread, bytes.
    #[inline]
    pub fn local_memory_per_thread(&self) -> u32 {
        self.raw.localMemoryPerThread
    }

    /// Local memory reserved for the kernel in total, bytes.
    #[inline]
    pub fn local_memory_total(&self) -> u64 {
        self.raw.localMemoryTotal_v2
    }

    /// Shared memory the kernel ran with, bytes.
    #[inline]
    pub fn shared_memory_executed(&self) -> u32 {
        self.raw.sharedMemoryExecuted
    }

    /// How it was launched.
    #[inline]
    pub fn launch_type(&self) -> LaunchType {
        LaunchType::from_raw(self.raw.launchType)
    }

    /// The graph it ran in (0 when not launched from a graph).
    #[inline]
    pub fn graph_id(&self) -> u32 {
        self.raw.graphId
    }

    /// The graph node it ran as (0 when not launched from a graph).
    #[inline]
    pub fn graph_node_id(&self) -> u64 {
        self.raw.graphNodeId
    }

    /// Whether the kernel was launched from the device (CUPTI 13.0 records only; `None` for 12.9).
    #[inline]
    pub fn is_device_launched(&self) -> Option<bool> {
        self.v10.map(|r| r.isDeviceLaunched != 0)
    }
}

impl fmt::Debug for Kernel<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Kernel")
            .field("name", &self.name())
            .field("time", &self.time())
            .field("device_id", &self.device_id())
            .field("context_id", &self.context_id())
            .field("stream_id", &self.stream_id())
            .field("correlation_id", &self.correlation_id())
            .field("grid", &self.grid())
            .field("block", &self.block())
            .finish_non_exhaustive()
    }
}
