//! Which record layouts a buffer holds.
//!
//! CUPTI writes each kind in the newest record version of its own release, so the loaded library's
//! `cuptiGetVersion` decides how a buffer is read. Between 12.9 (API 27 and 28) and 13.0 (API 130000 and 130001),
//! three records changed size: kernels (`CUpti_ActivityKernel9`, 208 bytes, became `CUpti_ActivityKernel10`, 216,
//! with `isDeviceLaunched` appended), marker data (`MarkerData` to `MarkerData2`) and memory pools (`MemoryPool2`
//! to `MemoryPool3`). Memcpy (`Memcpy6`) and memset (`Memset4`) kept their size but turned the first byte of a
//! padding field into `isDeviceLaunched`.

use crate::sys::cupti as sys;

/// The record layouts of one CUPTI release.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RecordLayout {
    /// CUPTI 12.9 (API versions 27 and 28): kernels are `CUpti_ActivityKernel9`.
    Cupti12_9,
    /// CUPTI 13.0 (API versions 130000 and 130001): kernels are `CUpti_ActivityKernel10`.
    Cupti13_0,
}

/// How a library's version maps onto a layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LayoutMatch {
    /// The crate knows this release's layouts.
    Exact(RecordLayout),
    /// A release the crate does not know, read with the layout of the nearest one it knows. Records are then
    /// stepped with the vendor's `cuptiActivityGetNextRecord` and a record whose size differs from the layout's is
    /// reported as an error instead of being misread.
    Nearest(RecordLayout),
}

impl LayoutMatch {
    /// The layout, exact or nearest.
    pub fn layout(self) -> RecordLayout {
        match self {
            LayoutMatch::Exact(l) | LayoutMatch::Nearest(l) => l,
        }
    }
}

/// Kinds the 13.0 header still defines but 13.0 no longer writes: its `cuptiActivityGetNextRecord` refuses
/// them (events, metrics, source-level and PC-sampling records, instantaneous events and metrics).
const REMOVED_IN_13: [u32; 16] = [
    sys::CUPTI_ACTIVITY_KIND_EVENT,
    sys::CUPTI_ACTIVITY_KIND_METRIC,
    sys::CUPTI_ACTIVITY_KIND_SOURCE_LOCATOR,
    sys::CUPTI_ACTIVITY_KIND_GLOBAL_ACCESS,
    sys::CUPTI_ACTIVITY_KIND_BRANCH,
    sys::CUPTI_ACTIVITY_KIND_EVENT_INSTANCE,
    sys::CUPTI_ACTIVITY_KIND_METRIC_INSTANCE,
    sys::CUPTI_ACTIVITY_KIND_INSTRUCTION_EXECUTION,
    sys::CUPTI_ACTIVITY_KIND_SHARED_ACCESS,
    sys::CUPTI_ACTIVITY_KIND_PC_SAMPLING,
    sys::CUPTI_ACTIVITY_KIND_PC_SAMPLING_RECORD_INFO,
    sys::CUPTI_ACTIVITY_KIND_INSTRUCTION_CORRELATION,
    sys::CUPTI_ACTIVITY_KIND_INSTANTANEOUS_EVENT,
    sys::CUPTI_ACTIVITY_KIND_INSTANTANEOUS_EVENT_INSTANCE,
    sys::CUPTI_ACTIVITY_KIND_INSTANTANEOUS_METRIC,
    sys::CUPTI_ACTIVITY_KIND_INSTANTANEOUS_METRIC_INSTANCE,
];

/// The size of a record of `kind` in the 12.9 (`v13` false) or 13.0 layout, 0 where unknown or not written.
const fn kind_size(v13: bool, kind: u32) -> usize {
    use std::mem::size_of as s;
    let mut i = 0;
    while v13 && i < REMOVED_IN_13.len() {
        if REMOVED_IN_13[i] == kind {
            return 0;
        }
        i += 1;
    }
    match kind {
        sys::CUPTI_ACTIVITY_KIND_MEMCPY => s::<sys::CUpti_ActivityMemcpy6>(),
        sys::CUPTI_ACTIVITY_KIND_MEMSET => s::<sys::CUpti_ActivityMemset4>(),
        sys::CUPTI_ACTIVITY_KIND_KERNEL | sys::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL => {
            if v13 {
                s::<sys::CUpti_ActivityKernel10>()
            } else {
                s::<sys::CUpti_ActivityKernel9>()
            }
        }
        sys::CUPTI_ACTIVITY_KIND_DRIVER
        | sys::CUPTI_ACTIVITY_KIND_RUNTIME
        | sys::CUPTI_ACTIVITY_KIND_INTERNAL_LAUNCH_API => s::<sys::CUpti_ActivityAPI>(),
        sys::CUPTI_ACTIVITY_KIND_EVENT => s::<sys::CUpti_ActivityEvent>(),
        sys::CUPTI_ACTIVITY_KIND_METRIC => s::<sys::CUpti_ActivityMetric>(),
        sys::CUPTI_ACTIVITY_KIND_DEVICE => s::<sys::CUpti_ActivityDevice5>(),
        sys::CUPTI_ACTIVITY_KIND_CONTEXT => s::<sys::CUpti_ActivityContext3>(),
        sys::CUPTI_ACTIVITY_KIND_NAME => s::<sys::CUpti_ActivityName>(),
        sys::CUPTI_ACTIVITY_KIND_MARKER => s::<sys::CUpti_ActivityMarker2>(),
        sys::CUPTI_ACTIVITY_KIND_MARKER_DATA => {
            if v13 {
                s::<sys::CUpti_ActivityMarkerData2>()
            } else {
                s::<sys::CUpti_ActivityMarkerData>()
            }
        }
        sys::CUPTI_ACTIVITY_KIND_SOURCE_LOCATOR => s::<sys::CUpti_ActivitySourceLocator>(),
        sys::CUPTI_ACTIVITY_KIND_GLOBAL_ACCESS => s::<sys::CUpti_ActivityGlobalAccess3>(),
        sys::CUPTI_ACTIVITY_KIND_BRANCH => s::<sys::CUpti_ActivityBranch2>(),
        sys::CUPTI_ACTIVITY_KIND_OVERHEAD => s::<sys::CUpti_ActivityOverhead3>(),
        sys::CUPTI_ACTIVITY_KIND_CDP_KERNEL => s::<sys::CUpti_ActivityCdpKernel>(),
        sys::CUPTI_ACTIVITY_KIND_PREEMPTION => s::<sys::CUpti_ActivityPreemption>(),
        sys::CUPTI_ACTIVITY_KIND_ENVIRONMENT => s::<sys::CUpti_ActivityEnvironment>(),
        sys::CUPTI_ACTIVITY_KIND_EVENT_INSTANCE => s::<sys::CUpti_ActivityEventInstance>(),
        sys::CUPTI_ACTIVITY_KIND_MEMCPY2 => s::<sys::CUpti_ActivityMemcpyPtoP4>(),
        sys::CUPTI_ACTIVITY_KIND_METRIC_INSTANCE => s::<sys::CUpti_ActivityMetricInstance>(),
        sys::CUPTI_ACTIVITY_KIND_INSTRUCTION_EXECUTION => {
            s::<sys::CUpti_ActivityInstructionExecution>()
        }
        sys::CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER => {
            s::<sys::CUpti_ActivityUnifiedMemoryCounter3>()
        }
        sys::CUPTI_ACTIVITY_KIND_FUNCTION => s::<sys::CUpti_ActivityFunction>(),
        sys::CUPTI_ACTIVITY_KIND_MODULE => s::<sys::CUpti_ActivityModule>(),
        sys::CUPTI_ACTIVITY_KIND_DEVICE_ATTRIBUTE => s::<sys::CUpti_ActivityDeviceAttribute>(),
        sys::CUPTI_ACTIVITY_KIND_SHARED_ACCESS => s::<sys::CUpti_ActivitySharedAccess>(),
        sys::CUPTI_ACTIVITY_KIND_PC_SAMPLING => s::<sys::CUpti_ActivityPCSampling3>(),
        sys::CUPTI_ACTIVITY_KIND_PC_SAMPLING_RECORD_INFO => {
            s::<sys::CUpti_ActivityPCSamplingRecordInfo>()
        }
        sys::CUPTI_ACTIVITY_KIND_INSTRUCTION_CORRELATION => {
            s::<sys::CUpti_ActivityInstructionCorrelation>()
        }
        sys::CUPTI_ACTIVITY_KIND_OPENACC_DATA => s::<sys::CUpti_ActivityOpenAccData>(),
        sys::CUPTI_ACTIVITY_KIND_OPENACC_LAUNCH => s::<sys::CUpti_ActivityOpenAccLaunch>(),
        sys::CUPTI_ACTIVITY_KIND_OPENACC_OTHER => s::<sys::CUpti_ActivityOpenAccOther>(),
        sys::CUPTI_ACTIVITY_KIND_CUDA_EVENT => s::<sys::CUpti_ActivityCudaEvent2>(),
        sys::CUPTI_ACTIVITY_KIND_STREAM => s::<sys::CUpti_ActivityStream>(),
        sys::CUPTI_ACTIVITY_KIND_SYNCHRONIZATION => s::<sys::CUpti_ActivitySynchronization2>(),
        sys::CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION => {
            s::<sys::CUpti_ActivityExternalCorrelation>()
        }
        sys::CUPTI_ACTIVITY_KIND_NVLINK => s::<sys::CUpti_ActivityNvLink4>(),
        sys::CUPTI_ACTIVITY_KIND_INSTANTANEOUS_EVENT => {
            s::<sys::CUpti_ActivityInstantaneousEvent>()
        }
        sys::CUPTI_ACTIVITY_KIND_INSTANTANEOUS_EVENT_INSTANCE => {
            s::<sys::CUpti_ActivityInstantaneousEventInstance>()
        }
        sys::CUPTI_ACTIVITY_KIND_INSTANTANEOUS_METRIC => {
            s::<sys::CUpti_ActivityInstantaneousMetric>()
        }
        sys::CUPTI_ACTIVITY_KIND_INSTANTANEOUS_METRIC_INSTANCE => {
            s::<sys::CUpti_ActivityInstantaneousMetricInstance>()
        }
        sys::CUPTI_ACTIVITY_KIND_MEMORY => s::<sys::CUpti_ActivityMemory>(),
        sys::CUPTI_ACTIVITY_KIND_PCIE => s::<sys::CUpti_ActivityPcie>(),
        sys::CUPTI_ACTIVITY_KIND_OPENMP => s::<sys::CUpti_ActivityOpenMp>(),
        sys::CUPTI_ACTIVITY_KIND_MEMORY2 => s::<sys::CUpti_ActivityMemory4>(),
        sys::CUPTI_ACTIVITY_KIND_MEMORY_POOL => {
            if v13 {
                s::<sys::CUpti_ActivityMemoryPool3>()
            } else {
                s::<sys::CUpti_ActivityMemoryPool2>()
            }
        }
        sys::CUPTI_ACTIVITY_KIND_GRAPH_TRACE => s::<sys::CUpti_ActivityGraphTrace2>(),
        sys::CUPTI_ACTIVITY_KIND_DEVICE_GRAPH_TRACE => s::<sys::CUpti_ActivityDeviceGraphTrace>(),
        sys::CUPTI_ACTIVITY_KIND_MEM_DECOMPRESS => s::<sys::CUpti_ActivityMemDecompress>(),
        sys::CUPTI_ACTIVITY_KIND_CONFIDENTIAL_COMPUTE_ROTATION => {
            s::<sys::CUpti_ActivityConfidentialComputeRotation>()
        }
        // The header documents `CUpti_ActivityJit`, but both releases step 72 bytes: `CUpti_ActivityJit2`.
        sys::CUPTI_ACTIVITY_KIND_JIT => s::<sys::CUpti_ActivityJit2>(),
        _ => 0,
    }
}

/// Record sizes by kind (below 64), for 12.9 and 13.0.
static SIZES: [[u16; 64]; 2] = {
    let mut t = [[0u16; 64]; 2];
    let mut kind = 0;
    while kind < 64 {
        t[0][kind] = kind_size(false, kind as u32) as u16;
        t[1][kind] = kind_size(true, kind as u32) as u16;
        kind += 1;
    }
    t
};

impl RecordLayout {
    /// The layout of the CUPTI release with API version `version` (`cuptiGetVersion`).
    pub fn for_version(version: u32) -> LayoutMatch {
        match version {
            27 | 28 => LayoutMatch::Exact(RecordLayout::Cupti12_9),
            130_000 | 130_001 => LayoutMatch::Exact(RecordLayout::Cupti13_0),
            v if v >= 130_000 => LayoutMatch::Nearest(RecordLayout::Cupti13_0),
            _ => LayoutMatch::Nearest(RecordLayout::Cupti12_9),
        }
    }

    /// The size of a record of `kind` in this layout; `None` for a kind whose record the crate cannot size, or
    /// that the release does not write. A table lookup: the walk asks once per record.
    #[inline]
    pub fn record_size(self, kind: u32) -> Option<usize> {
        match self.size_table().get(kind as usize) {
            Some(&size) if size != 0 => Some(size as usize),
            _ => None,
        }
    }

    /// Record sizes by kind below 64, 0 where unknown.
    #[inline]
    pub(crate) fn size_table(self) -> &'static [u16; 64] {
        match self {
            RecordLayout::Cupti12_9 => &SIZES[0],
            RecordLayout::Cupti13_0 => &SIZES[1],
        }
    }

    /// The largest record of a kind the crate decodes: a vendor buffer smaller than this could not hold one.
    pub fn largest_decoded_record(self) -> usize {
        [
            sys::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
            sys::CUPTI_ACTIVITY_KIND_DEVICE,
            sys::CUPTI_ACTIVITY_KIND_MEMCPY,
            sys::CUPTI_ACTIVITY_KIND_MEMORY2,
        ]
        .into_iter()
        .filter_map(|k| self.record_size(k))
        .max()
        .unwrap_or(0)
    }
}

// The sizes the decoder relies on, as clang laid the C structs out (bindgen's layout tests, see
// docs/development.md, "Regenerating the sys layer"); a binding regenerated from another header fails here rather than misreading.
const _: () = {
    use std::mem::{offset_of, size_of};
    assert!(size_of::<sys::CUpti_ActivityKernel10>() == 216);
    assert!(size_of::<sys::CUpti_ActivityKernel9>() == 208);
    assert!(size_of::<sys::CUpti_ActivityMemcpy6>() == 96);
    assert!(size_of::<sys::CUpti_ActivityMemcpyPtoP4>() == 96);
    assert!(size_of::<sys::CUpti_ActivityMemset4>() == 88);
    assert!(size_of::<sys::CUpti_ActivityAPI>() == 40);
    assert!(size_of::<sys::CUpti_ActivitySynchronization2>() == 56);
    assert!(size_of::<sys::CUpti_ActivityOverhead3>() == 56);
    assert!(size_of::<sys::CUpti_ActivityContext3>() == 32);
    assert!(size_of::<sys::CUpti_ActivityStream>() == 24);
    assert!(size_of::<sys::CUpti_ActivityName>() == 32);
    assert!(size_of::<sys::CUpti_ActivityMarker2>() == 56);
    assert!(size_of::<sys::CUpti_ActivityExternalCorrelation>() == 24);
    assert!(size_of::<sys::CUpti_ActivityDevice5>() == 184);
    assert!(size_of::<sys::CUpti_ActivityMemory4>() == 128);
    // Kernel9 is Kernel10 without its last 8 bytes: every field the crate reads sits at the same offset.
    assert!(
        offset_of!(sys::CUpti_ActivityKernel10, name)
            == offset_of!(sys::CUpti_ActivityKernel9, name)
    );
    assert!(
        offset_of!(sys::CUpti_ActivityKernel10, maxActiveClusters)
            == offset_of!(sys::CUpti_ActivityKernel9, maxActiveClusters)
    );
    assert!(offset_of!(sys::CUpti_ActivityKernel10, isDeviceLaunched) == 208);
    assert!(offset_of!(sys::CUpti_ActivityMemcpy6, isDeviceLaunched) == 84);
    assert!(offset_of!(sys::CUpti_ActivityMemset4, isDeviceLaunched) == 84);
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_pick_layouts() {
        assert_eq!(
            RecordLayout::for_version(130_001),
            LayoutMatch::Exact(RecordLayout::Cupti13_0)
        );
        assert_eq!(
            RecordLayout::for_version(28),
            LayoutMatch::Exact(RecordLayout::Cupti12_9)
        );
        assert_eq!(
            RecordLayout::for_version(130_100),
            LayoutMatch::Nearest(RecordLayout::Cupti13_0)
        );
        assert_eq!(
            RecordLayout::for_version(24),
            LayoutMatch::Nearest(RecordLayout::Cupti12_9)
        );
        let k = sys::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
        assert_eq!(RecordLayout::Cupti13_0.record_size(k), Some(216));
        assert_eq!(RecordLayout::Cupti12_9.record_size(k), Some(208));
        assert_eq!(
            RecordLayout::Cupti13_0.record_size(sys::CUPTI_ACTIVITY_KIND_JIT),
            Some(72)
        );
        assert_eq!(
            RecordLayout::Cupti13_0.record_size(sys::CUPTI_ACTIVITY_KIND_PC_SAMPLING),
            None
        );
        assert_eq!(
            RecordLayout::Cupti12_9.record_size(sys::CUPTI_ACTIVITY_KIND_PC_SAMPLING),
            Some(40)
        );
        assert_eq!(RecordLayout::Cupti13_0.record_size(0), None);
        assert_eq!(RecordLayout::Cupti13_0.largest_decoded_record(), 216);
        // Every size is a multiple of 8, so records stay 8-aligned one after another.
        for kind in 0..64 {
            for layout in [RecordLayout::Cupti12_9, RecordLayout::Cupti13_0] {
                if let Some(size) = layout.record_size(kind) {
                    assert_eq!(size % 8, 0, "kind {kind} {layout:?}");
                }
            }
        }
    }
}
