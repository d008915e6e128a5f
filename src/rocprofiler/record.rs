//! Typed views of the records a buffer hands over. They borrow the buffer half (lifetime `'a`), which the
//! vendor reuses once the callback returns, so none of them can outlive the callback.

use std::ffi::CStr;
use std::fmt;
use std::marker::PhantomData;

use super::filter::TraceDomain;
use crate::sys::rocprofiler as sys;

/// Begin and end of an activity, in the clock of `rocprofiler_get_timestamp` (nanoseconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Timestamps {
    /// Start.
    pub begin: u64,
    /// End.
    pub end: u64,
}

impl Timestamps {
    /// `end - begin`, zero when the clock went backwards.
    #[inline]
    pub fn duration(&self) -> u64 {
        self.end.saturating_sub(self.begin)
    }

    #[inline]
    fn from_sys(t: &sys::rocprofiler_record_header_timestamp_t) -> Self {
        Timestamps {
            begin: t.begin.value,
            end: t.end.value,
        }
    }
}

/// Launch properties of a kernel dispatch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct KernelProperties {
    /// Grid size (work-items).
    pub grid_size: u64,
    /// Work-group size.
    pub workgroup_size: u64,
    /// LDS bytes.
    pub lds_size: u64,
    /// Scratch bytes.
    pub scratch_size: u64,
    /// Architected VGPRs.
    pub arch_vgpr_count: u64,
    /// Accumulation VGPRs.
    pub accum_vgpr_count: u64,
    /// SGPRs.
    pub sgpr_count: u64,
    /// Wave size.
    pub wave_size: u64,
    /// Completion signal handle.
    pub signal_handle: u64,
}

impl From<&sys::rocprofiler_kernel_properties_t> for KernelProperties {
    #[inline]
    fn from(p: &sys::rocprofiler_kernel_properties_t) -> Self {
        KernelProperties {
            grid_size: p.grid_size,
            workgroup_size: p.workgroup_size,
            lds_size: p.lds_size,
            scratch_size: p.scratch_size,
            arch_vgpr_count: p.arch_vgpr_count,
            accum_vgpr_count: p.accum_vgpr_count,
            sgpr_count: p.sgpr_count,
            wave_size: p.wave_size,
            signal_handle: p.signal_handle,
        }
    }
}

/// One counter instance of a profiler record.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CounterValue {
    /// The counter's id (`rocprofiler_counter_id_t`).
    pub counter_id: u64,
    /// Its value.
    pub value: f64,
}

/// A C array inside a buffer half, read in place (no copy, no allocation). Entries are read unaligned: the
/// variable-data area of a half is not always 8-byte aligned (a name of odd length before an array shifts it).
pub(crate) struct RawArray<'a, R> {
    ptr: *const u8,
    len: usize,
    _batch: PhantomData<&'a [R]>,
}

// Manual impls: a derive would ask `R: Clone`, though only the pointer is copied.
impl<R> Clone for RawArray<'_, R> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<R> Copy for RawArray<'_, R> {}

impl<'a, R: Copy> RawArray<'a, R> {
    pub(crate) const EMPTY: Self = RawArray {
        ptr: std::ptr::null(),
        len: 0,
        _batch: PhantomData,
    };

    /// # Safety
    /// `ptr` must be readable for `len * size_of::<R>()` bytes for `'a`, and any bits there must be a valid `R`
    /// (a plain C struct).
    #[inline]
    pub(crate) unsafe fn new(ptr: *const u8, len: usize) -> Self {
        RawArray {
            ptr,
            len,
            _batch: PhantomData,
        }
    }

    #[inline]
    fn len(&self) -> usize {
        self.len
    }

    #[inline]
    fn get(&self, index: usize) -> Option<R> {
        if index >= self.len {
            return None;
        }
        // SAFETY: index < len, and `new`'s contract makes len * size_of::<R>() bytes from ptr readable for 'a and
        // valid as R; the read is unaligned.
        Some(unsafe {
            self.ptr
                .add(index * size_of::<R>())
                .cast::<R>()
                .read_unaligned()
        })
    }
}

/// The counter instances of a profiler record, read in place from the buffer (no copy, no allocation).
#[derive(Clone, Copy)]
pub struct Counters<'a> {
    pub(crate) raw: RawArray<'a, sys::rocprofiler_record_counter_instance_t>,
}

impl<'a> Counters<'a> {
    /// Number of counter instances.
    #[inline]
    pub fn len(&self) -> usize {
        self.raw.len()
    }

    /// Whether there are none.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.raw.len() == 0
    }

    /// The instance at `index`.
    #[inline]
    pub fn get(&self, index: usize) -> Option<CounterValue> {
        self.raw.get(index).map(|raw| CounterValue {
            counter_id: raw.counter_handler.handle,
            value: raw.value.value,
        })
    }

    /// Every instance, in order.
    #[inline]
    pub fn iter(&self) -> CountersIter<'a> {
        CountersIter {
            counters: *self,
            next: 0,
        }
    }
}

/// Iterator over [`Counters`].
#[derive(Debug, Clone)]
pub struct CountersIter<'a> {
    counters: Counters<'a>,
    next: usize,
}

impl Iterator for CountersIter<'_> {
    type Item = CounterValue;
    #[inline]
    fn next(&mut self) -> Option<CounterValue> {
        let v = self.counters.get(self.next)?;
        self.next += 1;
        Some(v)
    }
    #[inline]
    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.counters.len() - self.next;
        (left, Some(left))
    }
}

impl ExactSizeIterator for CountersIter<'_> {}

impl<'a> IntoIterator for Counters<'a> {
    type Item = CounterValue;
    type IntoIter = CountersIter<'a>;
    #[inline]
    fn into_iter(self) -> CountersIter<'a> {
        self.iter()
    }
}

impl fmt::Debug for Counters<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// A kernel dispatch: timestamps and, with a counters filter, counter values.
#[derive(Clone, Copy)]
pub struct ProfilerRecord<'a> {
    pub(crate) raw: &'a sys::rocprofiler_record_profiler_t,
    pub(crate) counters: Counters<'a>,
}

impl<'a> ProfilerRecord<'a> {
    /// Record id.
    #[inline]
    pub fn id(&self) -> u64 {
        self.raw.header.id.handle
    }
    /// Kernel id (`rocprofiler_query_kernel_info` names it).
    #[inline]
    pub fn kernel_id(&self) -> u64 {
        self.raw.kernel_id.handle
    }
    /// GPU agent id.
    #[inline]
    pub fn gpu_id(&self) -> u64 {
        self.raw.gpu_id.handle
    }
    /// Queue id.
    #[inline]
    pub fn queue_id(&self) -> u64 {
        self.raw.queue_id.handle
    }
    /// Begin and end of the dispatch.
    #[inline]
    pub fn timestamps(&self) -> Timestamps {
        Timestamps::from_sys(&self.raw.timestamps)
    }
    /// Counter values (empty for a timestamps-only filter).
    #[inline]
    pub fn counters(&self) -> Counters<'a> {
        self.counters
    }
    /// XCC index.
    #[inline]
    pub fn xcc_index(&self) -> u32 {
        self.raw.xcc_index
    }
    /// Launch properties.
    #[inline]
    pub fn kernel_properties(&self) -> KernelProperties {
        KernelProperties::from(&self.raw.kernel_properties)
    }
    /// Id of the host thread that dispatched.
    #[inline]
    pub fn thread_id(&self) -> u32 {
        self.raw.thread_id.value
    }
    /// Index of the dispatch in its queue.
    #[inline]
    pub fn queue_index(&self) -> u64 {
        self.raw.queue_idx.value
    }
    /// Correlation id (matches the HIP API record of the launch).
    #[inline]
    pub fn correlation_id(&self) -> u64 {
        self.raw.correlation_id.value
    }
}

impl fmt::Debug for ProfilerRecord<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProfilerRecord")
            .field("id", &self.id())
            .field("kernel_id", &self.kernel_id())
            .field("gpu_id", &self.gpu_id())
            .field("timestamps", &self.timestamps())
            .field("counters", &self.counters)
            .finish_non_exhaustive()
    }
}

/// Phase of a traced API call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Phase {
    /// Activity record (no phase).
    None,
    /// Entering the call.
    Enter,
    /// Leaving the call.
    Exit,
    /// A value this crate does not know.
    Other(u32),
}

impl Phase {
    #[inline]
    fn from_raw(v: u32) -> Self {
        match v {
            sys::ROCPROFILER_PHASE_NONE => Phase::None,
            sys::ROCPROFILER_PHASE_ENTER => Phase::Enter,
            sys::ROCPROFILER_PHASE_EXIT => Phase::Exit,
            other => Phase::Other(other),
        }
    }
}

/// A traced API call or activity.
#[derive(Clone, Copy)]
pub struct TracerRecord<'a> {
    pub(crate) raw: &'a sys::rocprofiler_record_tracer_t,
    pub(crate) name: Option<&'a CStr>,
}

impl<'a> TracerRecord<'a> {
    /// Record id.
    #[inline]
    pub fn id(&self) -> u64 {
        self.raw.header.id.handle
    }
    /// External correlation id.
    #[inline]
    pub fn external_id(&self) -> u64 {
        self.raw.external_id.id
    }
    /// Domain of the call.
    #[inline]
    pub fn domain(&self) -> TraceDomain {
        TraceDomain::from_raw(self.raw.domain)
    }
    /// Operation id within the domain.
    #[inline]
    pub fn operation_id(&self) -> u32 {
        self.raw.operation_id.id
    }
    /// Correlation id.
    #[inline]
    pub fn correlation_id(&self) -> u64 {
        self.raw.correlation_id.value
    }
    /// Begin and end.
    #[inline]
    pub fn timestamps(&self) -> Timestamps {
        Timestamps::from_sys(&self.raw.timestamps)
    }
    /// Agent id.
    #[inline]
    pub fn agent_id(&self) -> u64 {
        self.raw.agent_id.handle
    }
    /// Queue id.
    #[inline]
    pub fn queue_id(&self) -> u64 {
        self.raw.queue_id.handle
    }
    /// Host thread id.
    #[inline]
    pub fn thread_id(&self) -> u32 {
        self.raw.thread_id.value
    }
    /// Enter, exit or none.
    #[inline]
    pub fn phase(&self) -> Phase {
        Phase::from_raw(self.raw.phase)
    }
    /// The operation's name, if the record carries one.
    #[inline]
    pub fn name(&self) -> Option<&'a CStr> {
        self.name
    }
    /// Address of the vendor's API data (arguments); opaque, never dereferenced by the crate.
    #[inline]
    pub fn api_data_address(&self) -> usize {
        // SAFETY: every member of the union is a pointer of the same size; reading one as an address is
        // valid for any bit pattern.
        unsafe { self.raw.api_data.__bindgen_anon_1.hip as usize }
    }
}

impl fmt::Debug for TracerRecord<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TracerRecord")
            .field("id", &self.id())
            .field("domain", &self.domain())
            .field("operation_id", &self.operation_id())
            .field("phase", &self.phase())
            .field("name", &self.name)
            .field("timestamps", &self.timestamps())
            .finish_non_exhaustive()
    }
}

/// An advanced thread trace (ATT) record. Its shader-engine data and code-object list point into vendor
/// memory of unknown extent; the crate reports their counts and never dereferences them.
#[derive(Clone, Copy)]
pub struct AttRecord<'a> {
    pub(crate) raw: &'a sys::rocprofiler_record_att_tracer_t,
}

impl AttRecord<'_> {
    /// Record id.
    #[inline]
    pub fn id(&self) -> u64 {
        self.raw.header.id.handle
    }
    /// Kernel id.
    #[inline]
    pub fn kernel_id(&self) -> u64 {
        self.raw.kernel_id.handle
    }
    /// GPU agent id.
    #[inline]
    pub fn gpu_id(&self) -> u64 {
        self.raw.gpu_id.handle
    }
    /// Queue id.
    #[inline]
    pub fn queue_id(&self) -> u64 {
        self.raw.queue_id.handle
    }
    /// Launch properties.
    #[inline]
    pub fn kernel_properties(&self) -> KernelProperties {
        KernelProperties::from(&self.raw.kernel_properties)
    }
    /// Host thread id.
    #[inline]
    pub fn thread_id(&self) -> u32 {
        self.raw.thread_id.value
    }
    /// Index of the dispatch in its queue.
    #[inline]
    pub fn queue_index(&self) -> u64 {
        self.raw.queue_idx.value
    }
    /// Writer id.
    #[inline]
    pub fn writer_id(&self) -> u64 {
        self.raw.writer_id
    }
    /// Number of shader engines with trace data.
    #[inline]
    pub fn shader_engine_data_count(&self) -> u64 {
        self.raw.shader_engine_data_count
    }
    /// Number of code objects intercepted for this dispatch.
    #[inline]
    pub fn code_object_count(&self) -> u64 {
        self.raw.intercept_list.count
    }
    /// User data of the code-object list (the kernel address for ATT).
    #[inline]
    pub fn code_object_userdata(&self) -> u64 {
        self.raw.intercept_list.userdata
    }
}

impl fmt::Debug for AttRecord<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AttRecord")
            .field("id", &self.id())
            .field("kernel_id", &self.kernel_id())
            .field("shader_engine_data_count", &self.shader_engine_data_count())
            .finish_non_exhaustive()
    }
}

/// A program-counter sample.
#[derive(Clone, Copy)]
pub struct PcSampleRecord<'a> {
    pub(crate) raw: &'a sys::rocprofiler_record_pc_sample_t,
}

impl PcSampleRecord<'_> {
    /// Record id.
    #[inline]
    pub fn id(&self) -> u64 {
        self.raw.header.id.handle
    }
    /// Dispatch the sample belongs to.
    #[inline]
    pub fn dispatch_id(&self) -> u64 {
        self.raw.pc_sample.dispatch_id.value
    }
    /// Timestamp or cycle count (the vendor stores either in the same field).
    #[inline]
    pub fn time(&self) -> u64 {
        // SAFETY: both union members are 8-byte integers; any bit pattern is valid.
        unsafe { self.raw.pc_sample.__bindgen_anon_1.cycle }
    }
    /// Program counter.
    #[inline]
    pub fn pc(&self) -> u64 {
        self.raw.pc_sample.pc
    }
    /// Shader engine.
    #[inline]
    pub fn shader_engine(&self) -> u32 {
        self.raw.pc_sample.se
    }
    /// GPU agent id.
    #[inline]
    pub fn gpu_id(&self) -> u64 {
        self.raw.pc_sample.gpu_id.handle
    }
}

impl fmt::Debug for PcSampleRecord<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PcSampleRecord")
            .field("id", &self.id())
            .field("dispatch_id", &self.dispatch_id())
            .field("pc", &self.pc())
            .finish_non_exhaustive()
    }
}

/// A streaming performance monitor (SPM) sample: 32 counters for each of 4 shader engines.
#[derive(Clone, Copy)]
pub struct SpmRecord<'a> {
    pub(crate) raw: &'a sys::rocprofiler_record_spm_t,
}

impl SpmRecord<'_> {
    /// Record id.
    #[inline]
    pub fn id(&self) -> u64 {
        self.raw.header.id.handle
    }
    /// Begin and end of the sample.
    #[inline]
    pub fn timestamps(&self) -> Timestamps {
        Timestamps::from_sys(&self.raw.timestamps)
    }
    /// The 32 counter values of shader engine `se` (0..4).
    #[inline]
    pub fn shader_engine(&self, se: usize) -> Option<[u16; 32]> {
        let data = self.raw.shader_engine_data.get(se)?;
        Some(std::array::from_fn(|i| data.counters_data[i].value))
    }
}

impl fmt::Debug for SpmRecord<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SpmRecord")
            .field("id", &self.id())
            .field("timestamps", &self.timestamps())
            .finish_non_exhaustive()
    }
}

/// One value of a counters-sampler record.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SampledCounter {
    /// `rocprofiler_counters_sampler_counter_type_t` (0 PCIe, 1 XGMI).
    pub counter_type: u32,
    /// Its value.
    pub value: f64,
}

/// The values of a counters-sampler record, read in place.
#[derive(Clone, Copy)]
pub struct SampledCounters<'a> {
    pub(crate) raw: RawArray<'a, sys::rocprofiler_counters_sampler_counter_output_t>,
}

impl<'a> SampledCounters<'a> {
    /// Number of values.
    #[inline]
    pub fn len(&self) -> usize {
        self.raw.len()
    }

    /// Whether there are none.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.raw.len() == 0
    }

    /// The value at `index`.
    #[inline]
    pub fn get(&self, index: usize) -> Option<SampledCounter> {
        self.raw.get(index).map(|raw| SampledCounter {
            counter_type: raw.type_,
            value: raw.value.value,
        })
    }

    /// Every value, in order.
    #[inline]
    pub fn iter(&self) -> impl Iterator<Item = SampledCounter> + 'a {
        let this = *self;
        (0..this.len()).filter_map(move |i| this.get(i))
    }
}

impl fmt::Debug for SampledCounters<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// A counters-sampler record (PCIe / XGMI counters of a GPU).
#[derive(Clone, Copy)]
pub struct CountersSamplerRecord<'a> {
    pub(crate) raw: &'a sys::rocprofiler_record_counters_sampler_t,
    pub(crate) counters: SampledCounters<'a>,
}

impl<'a> CountersSamplerRecord<'a> {
    /// Record id.
    #[inline]
    pub fn id(&self) -> u64 {
        self.raw.header.id.handle
    }
    /// GPU agent id.
    #[inline]
    pub fn gpu_id(&self) -> u64 {
        self.raw.gpu_id.handle
    }
    /// The sampled values.
    #[inline]
    pub fn counters(&self) -> SampledCounters<'a> {
        self.counters
    }
}

impl fmt::Debug for CountersSamplerRecord<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CountersSamplerRecord")
            .field("id", &self.id())
            .field("gpu_id", &self.gpu_id())
            .field("counters", &self.counters)
            .finish()
    }
}

/// One record of a [`Batch`](super::Batch), decoded from its header's kind.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum Record<'a> {
    /// A kernel dispatch (`ROCPROFILER_PROFILER_RECORD`).
    Profiler(ProfilerRecord<'a>),
    /// An API call or activity (`ROCPROFILER_TRACER_RECORD`).
    Tracer(TracerRecord<'a>),
    /// Thread trace (`ROCPROFILER_ATT_TRACER_RECORD`).
    Att(AttRecord<'a>),
    /// PC sample (`ROCPROFILER_PC_SAMPLING_RECORD`).
    PcSample(PcSampleRecord<'a>),
    /// SPM sample (`ROCPROFILER_SPM_RECORD`).
    Spm(SpmRecord<'a>),
    /// Counters-sampler record (`ROCPROFILER_COUNTERS_SAMPLER_RECORD`).
    CountersSampler(CountersSamplerRecord<'a>),
    /// A kind this crate does not know. Its size is unknown, so it ends the batch's walk.
    Unknown {
        /// The header's kind.
        kind: u32,
        /// The header's id.
        id: u64,
    },
}

impl Record<'_> {
    /// The header's id.
    #[inline]
    pub fn id(&self) -> u64 {
        match self {
            Record::Profiler(r) => r.id(),
            Record::Tracer(r) => r.id(),
            Record::Att(r) => r.id(),
            Record::PcSample(r) => r.id(),
            Record::Spm(r) => r.id(),
            Record::CountersSampler(r) => r.id(),
            Record::Unknown { id, .. } => *id,
        }
    }
}
