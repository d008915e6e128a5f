//! [`PcSampler`]: where a context's warps stall (CUPTI's PC sampling). Each SM samples a warp's program counter
//! every 2^period cycles with the reason it was not issuing; CUPTI aggregates the samples per (function, PC offset)
//! and stall reason. The reason names come from the device.
//!
//! In continuous mode CUPTI decodes samples on worker threads of its own, and CUPTI 13.0's
//! `cuptiPCSamplingGetData` races them (a PC added while it reads is copied with a null name, which it duplicates
//! with `strdup`: a SIGSEGV in the sampled process). So a continuous sampler is configured with CUPTI's start-stop
//! control and started at once; every read and the finish stop sampling first, which joins the workers, and a read
//! starts it again after.
//!
//! ```no_run
//! use gpu_tools::cuda::Context;
//! use gpu_tools::cupti::pc_sampling::PcSampler;
//!
//! fn main() -> gpu_tools::Result<()> {
//!     let ctx = Context::primary(0)?;
//!     let mut sampler = PcSampler::builder(&ctx).period(12).start()?;
//!     // ... launch kernels in `ctx`, synchronise ...
//!     let samples = sampler.finish()?;
//!     for f in samples.functions().iter().take(3) {
//!         let (reason, n) = f.top_stall().unwrap_or((0, 0));
//!         println!("{}: {} samples, mostly {}", f.name, f.samples, samples.reason_name(reason));
//!     }
//!     Ok(())
//! }
//! ```

use std::collections::HashMap;
use std::ffi::{CStr, c_char};
use std::marker::PhantomData;
use std::sync::Arc;

use crate::cuda::{Context, RawContext};
use crate::cupti::profiler::api::{Api, Needs, sym};
use crate::cupti::profiler::{self, ProfilerApi, ProfilingError, check};
use crate::sys::cupti_profiling as sys;

/// How kernels run while sampled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum CollectionMode {
    /// Kernels run concurrently as usual; samples carry no correlation id.
    #[default]
    Continuous,
    /// Kernels are serialised; each sample carries its launch's correlation id.
    KernelSerialized,
}

/// A stall reason the device reports.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct StallReason {
    /// CUPTI's index for it.
    pub index: u32,
    /// Its name (`smsp__pcsamp_warps_issue_stalled_long_scoreboard`, ...).
    pub name: String,
}

/// The samples of one PC.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct PcRecord {
    /// The function's (mangled) name.
    pub function: Arc<str>,
    /// The function's index in its module.
    pub function_index: u32,
    /// The CRC of its cubin (CUPTI's module id).
    pub cubin_crc: u64,
    /// The PC's offset in the function.
    pub pc_offset: u64,
    /// The launch's correlation id (kernel-serialised mode; 0 otherwise).
    pub correlation: u32,
    /// (stall reason index, samples) pairs.
    pub stalls: Vec<(u32, u32)>,
}

impl PcRecord {
    /// Samples of this PC, all reasons.
    pub fn samples(&self) -> u64 {
        self.stalls.iter().map(|(_, n)| u64::from(*n)).sum()
    }
}

/// One function's samples, summed over its PCs.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct FunctionSamples {
    /// The function's (mangled) name.
    pub name: Arc<str>,
    /// Samples, all PCs and reasons.
    pub samples: u64,
    /// Samples per stall reason index, most first.
    pub stalls: Vec<(u32, u64)>,
    /// (PC offset, samples) of its hottest PCs, most first (at most 16).
    pub hot_pcs: Vec<(u64, u64)>,
}

impl FunctionSamples {
    /// The stall reason with the most samples.
    pub fn top_stall(&self) -> Option<(u32, u64)> {
        self.stalls.first().copied()
    }
}

/// What a sampler collected.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct PcSamples {
    /// The device's stall reasons.
    pub reasons: Vec<StallReason>,
    /// One record per (function, PC), in the order CUPTI gave them (a PC read twice appears twice).
    pub records: Vec<PcRecord>,
    /// Samples CUPTI counted, all kernels and reasons (also those it gives no record for).
    pub total_samples: u64,
    /// Samples the hardware dropped (back-pressure or a full buffer).
    pub dropped_samples: u64,
    /// Samples in kernels that are not the program's (no records).
    pub non_user_samples: u64,
    /// Reads during which the hardware buffer was full (CUPTI then lost data).
    pub buffer_full: u64,
    /// PCs CUPTI had but a buffer could not take: left after a disable filled the configured buffer (lost: no read
    /// follows a disable), or still counted as waiting when a read came back empty.
    pub truncated_pcs: u64,
}

impl PcSamples {
    /// The name of a stall reason index (`"?"` for one the device did not list).
    pub fn reason_name(&self, index: u32) -> &str {
        self.reasons
            .iter()
            .find(|r| r.index == index)
            .map_or("?", |r| r.name.as_str())
    }

    /// Samples per function, most first.
    pub fn functions(&self) -> Vec<FunctionSamples> {
        /// Name, samples, samples per reason, samples per PC.
        type Acc = (Arc<str>, u64, HashMap<u32, u64>, HashMap<u64, u64>);
        let mut by: HashMap<&str, Acc> = HashMap::new();
        for r in &self.records {
            let e = by
                .entry(&r.function)
                .or_insert_with(|| (Arc::clone(&r.function), 0, HashMap::new(), HashMap::new()));
            for &(reason, n) in &r.stalls {
                e.1 += u64::from(n);
                *e.2.entry(reason).or_default() += u64::from(n);
                *e.3.entry(r.pc_offset).or_default() += u64::from(n);
            }
        }
        let mut out: Vec<FunctionSamples> = by
            .into_values()
            .map(|(name, samples, stalls, pcs)| {
                let mut stalls: Vec<(u32, u64)> = stalls.into_iter().collect();
                stalls.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
                let mut hot_pcs: Vec<(u64, u64)> = pcs.into_iter().collect();
                hot_pcs.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
                hot_pcs.truncate(16);
                FunctionSamples {
                    name,
                    samples,
                    stalls,
                    hot_pcs,
                }
            })
            .collect();
        out.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.name.cmp(&b.name)));
        out
    }

    fn merge(&mut self, other: PcSamples) {
        self.records.extend(other.records);
        self.total_samples += other.total_samples;
        self.dropped_samples += other.dropped_samples;
        self.non_user_samples += other.non_user_samples;
        self.buffer_full += other.buffer_full;
        self.truncated_pcs += other.truncated_pcs;
    }
}

/// The memory CUPTI writes parsed PC data into: a `CUpti_PCSamplingData` with room for `pcs` PCs of `reasons`
/// stall reasons each. Owned, boxed so its address stays put while CUPTI holds it.
pub(crate) struct PcDataBuffer {
    data: Box<sys::CUpti_PCSamplingData>,
    pcs: Vec<sys::CUpti_PCSamplingPCData>,
    stalls: Vec<sys::CUpti_PCSamplingStallReason>,
    reasons: usize,
}

impl PcDataBuffer {
    pub(crate) fn new(pcs: usize, reasons: usize) -> PcDataBuffer {
        let mut b = PcDataBuffer {
            data: Box::default(),
            pcs: vec![sys::CUpti_PCSamplingPCData::default(); pcs],
            stalls: vec![sys::CUpti_PCSamplingStallReason::default(); pcs.saturating_mul(reasons)],
            reasons,
        };
        b.reset();
        b
    }

    /// Points every PC at its slice of stall-reason slots and clears the counts, ready for CUPTI to fill.
    fn reset(&mut self) {
        let stalls = self.stalls.as_mut_ptr();
        for (i, pc) in self.pcs.iter_mut().enumerate() {
            *pc = sys::CUpti_PCSamplingPCData {
                size: std::mem::size_of::<sys::CUpti_PCSamplingPCData>(),
                // SAFETY: `i * reasons` is within the stall slots (pcs * reasons of them).
                stallReason: unsafe { stalls.add(i * self.reasons) },
                ..Default::default()
            };
        }
        *self.data = sys::CUpti_PCSamplingData {
            size: std::mem::size_of::<sys::CUpti_PCSamplingData>(),
            collectNumPcs: self.pcs.len(),
            pPcData: self.pcs.as_mut_ptr(),
            ..Default::default()
        };
    }

    fn as_mut_ptr(&mut self) -> *mut sys::CUpti_PCSamplingData {
        &mut *self.data
    }

    /// Copies out what CUPTI wrote, trusting no count beyond the buffer's capacity, then clears it.
    ///
    /// # Safety
    /// Each of the first `totalNumPcs` (at most capacity) PCs' `functionName` is null or a NUL-terminated string
    /// (CUPTI writes them so).
    pub(crate) unsafe fn take(&mut self, names: &mut NameCache) -> PcSamples {
        let d = *self.data;
        let written = d.totalNumPcs.min(self.pcs.len());
        let mut out = PcSamples {
            total_samples: d.totalSamples,
            dropped_samples: d.droppedSamples,
            non_user_samples: d.nonUsrKernelsTotalSamples,
            buffer_full: u64::from(d.hardwareBufferFull != 0),
            truncated_pcs: d.totalNumPcs.saturating_sub(written) as u64,
            ..PcSamples::default()
        };
        for (i, pc) in self.pcs[..written].iter().enumerate() {
            let pc = *pc;
            let n = pc.stallReasonCount.min(self.reasons);
            let stalls = &self.stalls[i * self.reasons..i * self.reasons + n];
            // SAFETY: the caller's contract.
            let function = unsafe { names.get(pc.functionName) };
            out.records.push(PcRecord {
                function,
                function_index: pc.functionIndex,
                cubin_crc: pc.cubinCrc,
                pc_offset: pc.pcOffset,
                correlation: pc.correlationId,
                stalls: stalls
                    .iter()
                    .map(|s| (s.pcSamplingStallReasonIndex, s.samples))
                    .collect(),
            });
        }
        self.reset();
        out
    }

    /// More PCs waiting in CUPTI after the last read.
    fn remaining(&self) -> usize {
        self.data.remainingNumPcs
    }

    #[cfg(test)]
    fn raw(
        &mut self,
    ) -> (
        &mut sys::CUpti_PCSamplingData,
        &mut [sys::CUpti_PCSamplingPCData],
    ) {
        (&mut self.data, &mut self.pcs)
    }
}

/// Function names CUPTI hands out, interned by address (the same pointer recurs for every PC of a function).
/// CUPTI says the strings are shared with other records and the client frees them when done; they are copied and
/// never freed here, so no string is freed twice.
#[derive(Debug, Default)]
pub(crate) struct NameCache {
    by_address: HashMap<usize, Arc<str>>,
}

impl NameCache {
    /// # Safety
    /// `p` is null or a NUL-terminated string.
    unsafe fn get(&mut self, p: *const c_char) -> Arc<str> {
        if p.is_null() {
            return Arc::from("");
        }
        self.by_address
            .entry(p as usize)
            // SAFETY: the caller's contract.
            .or_insert_with(|| Arc::from(unsafe { CStr::from_ptr(p) }.to_string_lossy().as_ref()))
            .clone()
    }
}

/// Settings of a [`PcSampler`].
#[derive(Debug, Clone)]
pub struct PcSamplerBuilder<'c> {
    ctx: RawContext,
    period: Option<u32>,
    worker_sleep_ms: Option<u32>,
    scratch_buffer: Option<usize>,
    hardware_buffer: Option<usize>,
    mode: CollectionMode,
    pcs_per_read: usize,
    pcs_at_disable: usize,
    reasons: Option<Vec<String>>,
    start_stop: bool,
    _ctx: PhantomData<&'c Context>,
}

/// Default PCs taken per read.
pub const DEFAULT_PCS_PER_READ: usize = 4096;

/// Default room, in PCs, of the buffer configured as CUPTI's sampling data buffer: what `cuptiPCSamplingStop` (and
/// a `cuptiPCSamplingDisable` of sampling that runs) decodes last goes there, and what does not fit is discarded
/// (cupti_pcsampling.h). With it at 4,096, two eager PyTorch windows on an H100 (CUPTI 13.0, 2026-12-05), read
/// before the disable then, lost 2,714 and 2,791 PCs at the disable. At most 64 bytes a PC and 8 a stall reason:
/// with every reason chosen, a few MiB in the sampled process while sampling runs (twice that in continuous mode,
/// whose read buffer takes as many: a read after a stop gets this buffer's PCs first).
pub const DEFAULT_PCS_AT_DISABLE: usize = 16_384;

/// A PC sampler on one context. Disabled on drop (what CUPTI still holds is then lost: call
/// [`finish`](Self::finish) to keep it).
///
/// `Send`, not `Sync`.
pub struct PcSampler<'c> {
    api: Api,
    ctx: RawContext,
    reasons: Vec<StallReason>,
    /// The buffer configured as CUPTI's sampling data buffer: CUPTI writes into it while sampling is enabled
    /// (`cuptiPCSamplingStop` and `cuptiPCSamplingDisable` leave the last records in it, and
    /// `cuptiPCSamplingGetData` hands a stop's over first). Read and reset by the sampler only after a successful
    /// disable; never passed to `cuptiPCSamplingGetData`.
    config: PcDataBuffer,
    /// The buffer each `cuptiPCSamplingGetData` fills: the sampler's own between calls.
    read: PcDataBuffer,
    names: NameCache,
    collected: PcSamples,
    enabled: bool,
    /// The caller starts and stops sampling ([`PcSamplerBuilder::start_stop`]).
    start_stop: bool,
    /// CUPTI's start-stop control is on: asked for, or continuous mode, whose reads stop sampling first
    /// ([`PcSampler::read`]).
    controlled: bool,
    /// Continuous collection: CUPTI's worker threads decode beside the program.
    continuous: bool,
    running: bool,
    /// The code of a failed `cuptiPCSamplingStop`, after which CUPTI is not called again (`stop_sampling`).
    left_on: Option<sys::CUptiResult>,
    _ctx: PhantomData<&'c Context>,
}

// SAFETY: the context handle is process-wide; the buffers are owned; every call takes `&mut self`.
unsafe impl Send for PcSampler<'_> {}

impl std::fmt::Debug for PcSampler<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PcSampler")
            .field("reasons", &self.reasons.len())
            .field("records", &self.collected.records.len())
            .finish_non_exhaustive()
    }
}

impl<'c> PcSampler<'c> {
    /// Settings for a context: CUPTI's default period, scratch and hardware buffers, continuous mode, every stall
    /// reason.
    pub fn builder(ctx: &'c Context) -> PcSamplerBuilder<'c> {
        // SAFETY: the builder borrows the context, which outlives the sampler.
        let b = unsafe { PcSampler::builder_for_raw(ctx.as_raw()) };
        PcSamplerBuilder {
            _ctx: PhantomData,
            ..b
        }
    }

    /// Settings for a context the caller keeps alive (a context seen in a CUPTI callback, for example).
    ///
    /// # Safety
    /// `ctx` must be a live context of the driver this crate loaded, and stay alive until the sampler started from
    /// these settings is dropped or finished.
    pub unsafe fn builder_for_raw(ctx: RawContext) -> PcSamplerBuilder<'static> {
        PcSamplerBuilder {
            ctx,
            period: None,
            worker_sleep_ms: None,
            scratch_buffer: None,
            hardware_buffer: None,
            mode: CollectionMode::Continuous,
            pcs_per_read: DEFAULT_PCS_PER_READ,
            pcs_at_disable: DEFAULT_PCS_AT_DISABLE,
            reasons: None,
            start_stop: false,
            _ctx: PhantomData,
        }
    }

    /// The device's stall reasons.
    pub fn stall_reasons(&self) -> &[StallReason] {
        &self.reasons
    }

    /// Starts sampling (with [`PcSamplerBuilder::start_stop`]; otherwise sampling runs from start).
    pub fn resume(&mut self) -> crate::Result<()> {
        if !self.start_stop {
            return Err(
                ProfilingError::State("resume needs PcSamplerBuilder::start_stop(true)").into(),
            );
        }
        if self.running {
            return Err(ProfilingError::State("resume while sampling").into());
        }
        self.start_sampling()
    }

    /// `cuptiPCSamplingStart` (start-stop control is on, sampling is not running).
    fn start_sampling(&mut self) -> crate::Result<()> {
        self.still_usable()?;
        let f = sym!(self.api, cuptiPCSamplingStart)?;
        let mut p = sys::CUpti_PCSamplingStartParams {
            size: SIZE_START,
            ctx: self.ctx,
            ..Default::default()
        };
        // SAFETY: an enabled context configured with start-stop control, not sampling now.
        check("cuptiPCSamplingStart", unsafe { f(&mut p) })?;
        self.running = true;
        Ok(())
    }

    /// `cuptiPCSamplingStop` (start-stop control is on, sampling runs): CUPTI joins its worker threads and decodes
    /// what is left into the configured buffer, which the next `cuptiPCSamplingGetData` hands over first.
    fn stop_sampling(&mut self) -> crate::Result<()> {
        self.still_usable()?;
        let f = sym!(self.api, cuptiPCSamplingStop)?;
        let mut p = sys::CUpti_PCSamplingStopParams {
            size: SIZE_STOP,
            ctx: self.ctx,
            ..Default::default()
        };
        // Not running after the call whatever it answers: a second Stop is never made.
        self.running = false;
        // SAFETY: an enabled, started context configured with start-stop control.
        let code = unsafe { f(&mut p) };
        let result = check("cuptiPCSamplingStop", code);
        if result.is_err() {
            self.left_on = Some(code);
            // In libcupti 13.0.85 a Stop whose flush fails (a worker's error) returns after joining the first
            // worker, with sampling still marked as started: a disable would go through the same joins again, and
            // a read would run beside the workers left. So nothing more is asked of CUPTI here: sampling stays on,
            // as after a failed disable ([`still_enabled`]).
            self.abandon();
        }
        result?;
        Ok(())
    }

    /// The failed stop's error once one left sampling on ([`abandon`](Self::abandon)), after which CUPTI is not
    /// called again; otherwise nothing.
    fn still_usable(&self) -> crate::Result<()> {
        self.stop_failure()?;
        if !self.enabled {
            return Err(ProfilingError::State("PC sampling is no longer enabled").into());
        }
        Ok(())
    }

    /// The error of the failed stop that left sampling on, if one did.
    fn stop_failure(&self) -> crate::Result<()> {
        match self.left_on {
            Some(code) => Ok(check("cuptiPCSamplingStop", code)?),
            None => Ok(()),
        }
    }

    /// Leaves sampling on in CUPTI and never calls it again for this context: the configured buffer, which CUPTI
    /// may still write, stays allocated for the process's life rather than freed under it.
    fn abandon(&mut self) {
        std::mem::forget(std::mem::replace(&mut self.config, PcDataBuffer::new(0, 0)));
        self.enabled = false;
    }

    /// Pauses sampling (with [`PcSamplerBuilder::start_stop`]) and reads what CUPTI decoded up to the stop into the
    /// collection (cupti_pcsampling.h asks for a read after every stop: the next stop writes the configured buffer
    /// again). A failed stop leaves sampling on ([`still_enabled`]) and CUPTI is not called again for the context.
    pub fn pause(&mut self) -> crate::Result<()> {
        if !self.start_stop {
            return Err(
                ProfilingError::State("pause needs PcSamplerBuilder::start_stop(true)").into(),
            );
        }
        if !self.running {
            return Err(ProfilingError::State("pause while not sampling").into());
        }
        self.stop_sampling()?;
        self.read_stopped()
    }

    /// Reads what CUPTI has now (`cuptiPCSamplingGetData`, which never synchronises the device) into the
    /// sampler's collection.
    ///
    /// In continuous mode a read while sampling runs stops sampling for the read and starts it again after:
    /// CUPTI 13.0's `cuptiPCSamplingGetData` names the PCs its decoding worker thread has gathered, lets go of
    /// their lock and takes it again to copy them, and a PC the worker adds in between is copied with no name, a
    /// null pointer it then duplicates with `strdup` (read from libcupti 13.0.85's code; five jobs died of that
    /// SIGSEGV, docs/driver-notes.md). The stop joins the workers first, so nothing is added during the read.
    pub fn read(&mut self) -> crate::Result<()> {
        // A failed stop left sampling on: CUPTI is not asked again.
        self.still_usable()?;
        if self.running && self.continuous {
            self.stop_sampling()?;
            let read = self.read_stopped();
            let restarted = self.start_sampling();
            return read.and(restarted);
        }
        self.read_stopped()
    }

    /// The reads of [`read`](Self::read), with no worker of CUPTI's decoding beside them (stopped, or none: a
    /// kernel-serialised sampler or one the caller paused).
    fn read_stopped(&mut self) -> crate::Result<()> {
        let f = sym!(self.api, cuptiPCSamplingGetData)?;
        loop {
            let mut p = sys::CUpti_PCSamplingGetDataParams {
                size: SIZE_GET_DATA,
                ctx: self.ctx,
                pcSamplingData: self.read.as_mut_ptr().cast(),
                ..Default::default()
            };
            // SAFETY: an enabled context and a buffer laid out as the header says, owned by the sampler and not the
            // configured one (CUPTI's own while sampling is enabled).
            let code = unsafe { f(&mut p) };
            // "CUPTI_ERROR_OUT_OF_MEMORY indicates that the HW buffer is full": data was lost; what came is kept.
            let full = code == crate::sys::cupti::CUPTI_ERROR_OUT_OF_MEMORY;
            if !full {
                check("cuptiPCSamplingGetData", code)?;
            }
            // Read before the take, which clears the buffer's header (read after it, as it was, no read ever
            // repeated: what one read left in CUPTI waited for the disable).
            let remaining = self.read.remaining();
            // SAFETY: CUPTI filled the buffer (function names are its strings).
            let mut got = unsafe { self.read.take(&mut self.names) };
            got.buffer_full += u64::from(full);
            let empty = got.records.is_empty();
            self.collected.merge(got);
            if remaining == 0 {
                return Ok(());
            }
            if empty {
                // CUPTI still counts PCs but handed over none: said, never dropped unsaid.
                self.collected.truncated_pcs += remaining as u64;
                return Ok(());
            }
        }
    }

    /// Samples collected so far.
    pub fn collected(&self) -> &PcSamples {
        &self.collected
    }

    /// Stops sampling where it runs under start-stop control, reads what CUPTI holds, disables sampling (which hands
    /// over the rest where it still ran), and returns all samples.
    pub fn finish(self) -> crate::Result<PcSamples> {
        match self.finish_keeping() {
            (samples, None) => Ok(samples),
            (_, Some(e)) => Err(e),
        }
    }

    /// As [`finish`](Self::finish), but what was read is kept when the finish fails: the samples, and the error
    /// that ended it. A failed `cuptiPCSamplingStop` or `cuptiPCSamplingDisable` leaves sampling on in CUPTI
    /// ([`still_enabled`] tells that error apart): the GPU's counters stay held until the process ends (seen on an
    /// H200, CUPTI 13.0: other processes' PC sampling and counters were refused from then on).
    pub fn finish_keeping(mut self) -> (PcSamples, Option<crate::Error>) {
        // Stopped first, so that the last reads have no decoding worker beside them (see `read`). Where the stop
        // fails, nothing more is asked of CUPTI: sampling stays on (`stop_sampling`).
        let mut error = if self.left_on.is_some() {
            self.stop_failure().err()
        } else if self.running && self.controlled {
            self.stop_sampling().err()
        } else {
            None
        };
        let mut unread = false;
        if error.is_none() {
            error = self.read_stopped().err();
            unread = error.is_some();
        }
        // Where sampling still runs the disable decodes the rest into the configured buffer; after a stop it
        // flushes nothing, and what the stop left there came through the reads, unless they failed.
        let flushes = self.running;
        match self.disable() {
            Ok(()) => {
                // PCs the disable or the stop could not fit in the configured buffer, where nothing read them after
                // it: counted, never dropped unsaid.
                let left = if flushes || unread {
                    self.config.remaining() as u64
                } else {
                    0
                };
                // SAFETY: Disable left CUPTI's last records in the configured buffer (none where the reads after a
                // stop took them), which is the sampler's again.
                let mut last = unsafe { self.config.take(&mut self.names) };
                last.truncated_pcs += left;
                self.collected.merge(last);
            }
            Err(e) => {
                // The disable's error says more than a read's: sampling stays on.
                if let Some(read) = error.replace(e.into()) {
                    log::warn!("before the failed disable, the last read failed too: {read}");
                }
            }
        }
        let mut out = std::mem::take(&mut self.collected);
        out.reasons = self.reasons.clone();
        (out, error)
    }

    fn disable(&mut self) -> Result<(), ProfilingError> {
        if !self.enabled {
            return Ok(());
        }
        self.enabled = false;
        let f = sym!(self.api, cuptiPCSamplingDisable)?;
        let mut p = sys::CUpti_PCSamplingDisableParams {
            size: SIZE_DISABLE,
            ctx: self.ctx,
            ..Default::default()
        };
        // SAFETY: an enabled context; the configured buffer is still owned by the sampler.
        let result = check("cuptiPCSamplingDisable", unsafe { f(&mut p) });
        if result.is_err() {
            // CUPTI keeps sampling on, and the buffer configured as its sampling data.
            self.abandon();
        }
        result
    }
}

impl Drop for PcSampler<'_> {
    fn drop(&mut self) {
        let _ = self.disable();
    }
}

/// Whether `error` is a failed `cuptiPCSamplingDisable` or `cuptiPCSamplingStop`: CUPTI then keeps PC sampling on in
/// the process, and the GPU's performance counters held, until the process ends.
pub fn still_enabled(error: &crate::Error) -> bool {
    let call = match error {
        crate::Error::CuptiCounters(
            ProfilingError::Vendor { call, .. }
            | ProfilingError::CountersBusy { call }
            | ProfilingError::ProfilerTaken { call }
            | ProfilingError::InsufficientPrivileges { call },
        ) => *call,
        _ => return false,
    };
    call == "cuptiPCSamplingDisable" || call == "cuptiPCSamplingStop"
}

const SIZE_ENABLE: usize =
    crate::cupti::profiler::api::struct_size!(sys::CUpti_PCSamplingEnableParams, ctx);
const SIZE_DISABLE: usize =
    crate::cupti::profiler::api::struct_size!(sys::CUpti_PCSamplingDisableParams, ctx);
const SIZE_START: usize =
    crate::cupti::profiler::api::struct_size!(sys::CUpti_PCSamplingStartParams, ctx);
const SIZE_STOP: usize =
    crate::cupti::profiler::api::struct_size!(sys::CUpti_PCSamplingStopParams, ctx);
const SIZE_GET_DATA: usize =
    crate::cupti::profiler::api::struct_size!(sys::CUpti_PCSamplingGetDataParams, pcSamplingData);
const SIZE_CONFIG: usize = crate::cupti::profiler::api::struct_size!(
    sys::CUpti_PCSamplingConfigurationInfoParams,
    pPCSamplingConfigurationInfo
);
const SIZE_NUM_REASONS: usize = crate::cupti::profiler::api::struct_size!(
    sys::CUpti_PCSamplingGetNumStallReasonsParams,
    numStallReasons
);
const SIZE_REASONS: usize = crate::cupti::profiler::api::struct_size!(
    sys::CUpti_PCSamplingGetStallReasonsParams,
    stallReasons
);

impl<'c> PcSamplerBuilder<'c> {
    /// Sampling period: a sample every 2^`exponent` cycles per SM, 5 to 31 (default: CUPTI's, by SM count).
    pub fn period(mut self, exponent: u32) -> Self {
        self.period = Some(exponent);
        self
    }

    /// How long CUPTI's PC sampling worker threads sleep between rounds, in milliseconds (at least 1; default:
    /// CUPTI's, 100). They gather the hardware's samples into a ring and decode them from it: shorter rounds leave
    /// less in the ring at a time. In CUPTI 13.0 the gathering thread drains a ring it finds full itself, through
    /// the same code as the decoding thread and without a lock between them (read from libcupti 13.0.85's code);
    /// a worker that fails there ends sampling's collection, and the disable then fails and leaves sampling on.
    pub fn worker_sleep_ms(mut self, ms: u32) -> Self {
        self.worker_sleep_ms = Some(ms);
        self
    }

    /// Bytes of CUPTI's buffer for PC records between reads (default 1 MiB, about 5500 PCs).
    pub fn scratch_buffer(mut self, bytes: usize) -> Self {
        self.scratch_buffer = Some(bytes);
        self
    }

    /// Bytes of the hardware buffer (default 512 MiB).
    pub fn hardware_buffer(mut self, bytes: usize) -> Self {
        self.hardware_buffer = Some(bytes);
        self
    }

    /// Continuous or kernel-serialised (default continuous).
    pub fn mode(mut self, mode: CollectionMode) -> Self {
        self.mode = mode;
        self
    }

    /// PCs the sampler's read buffer takes at once (default 4096); a read repeats while CUPTI has more. Under
    /// start-stop control (continuous mode, or [`start_stop`](Self::start_stop)) it takes at least as many as
    /// [`pcs_at_disable`](Self::pcs_at_disable): a read after a stop gets the configured buffer's PCs first.
    pub fn pcs_per_read(mut self, pcs: usize) -> Self {
        self.pcs_per_read = pcs;
        self
    }

    /// PCs the buffer configured as CUPTI's sampling data buffer takes (default [`DEFAULT_PCS_AT_DISABLE`]): each
    /// stop (before every read in continuous mode, and at the finish), or a disable of sampling that runs, leaves
    /// what it decodes last there, and PCs beyond it are lost (counted in [`PcSamples::truncated_pcs`]). Never less
    /// than [`pcs_per_read`](Self::pcs_per_read).
    pub fn pcs_at_disable(mut self, pcs: usize) -> Self {
        self.pcs_at_disable = pcs;
        self
    }

    /// Only these stall reasons (names as the device lists them; default all).
    pub fn stall_reasons<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.reasons = Some(names.into_iter().map(|s| s.as_ref().to_string()).collect());
        self
    }

    /// Sample only between [`PcSampler::resume`] and [`PcSampler::pause`] (default: always).
    pub fn start_stop(mut self, on: bool) -> Self {
        self.start_stop = on;
        self
    }

    /// Enables PC sampling on the context and configures it.
    pub fn start(self) -> crate::Result<PcSampler<'c>> {
        self.validate()?;
        let api = Api::load(Needs::CuptiOnly)?;
        let driver = crate::cuda::Driver::load()?;
        let device = context_device(driver, self.ctx)?;
        profiler::check_device(api, device, ProfilerApi::PcSampling)?;
        let enable = sym!(api, cuptiPCSamplingEnable)?;
        let mut p = sys::CUpti_PCSamplingEnableParams {
            size: SIZE_ENABLE,
            ctx: self.ctx,
            ..Default::default()
        };
        // SAFETY: a live context (the builder borrows it).
        check("cuptiPCSamplingEnable", unsafe { enable(&mut p) })?;
        let mut sampler = PcSampler {
            api,
            ctx: self.ctx,
            reasons: Vec::new(),
            config: PcDataBuffer::new(0, 0),
            read: PcDataBuffer::new(0, 0),
            names: NameCache::default(),
            collected: PcSamples::default(),
            enabled: true,
            start_stop: self.start_stop,
            controlled: self.controlled(),
            continuous: self.mode == CollectionMode::Continuous,
            running: false,
            left_on: None,
            _ctx: PhantomData,
        };
        // From here the sampler disables on an error.
        sampler.reasons = stall_reasons(api, self.ctx)?;
        let mut chosen = self.chosen_reasons(&sampler.reasons)?;
        // Two buffers, as CUPTI's PC sampling tutorial requires: its decode threads own the configured one while
        // sampling runs, so a read into that one, and the reset after it, raced them. (Jobs that died of SIGSEGV
        // inside CUPTI's GetData and Disable while this sampler used one buffer for both died the same way with two:
        // the name CUPTI copies there is its own, docs/driver-notes.md.)
        let at_stop = self.pcs_at_disable.max(self.pcs_per_read);
        sampler.config = PcDataBuffer::new(at_stop, chosen.len().max(1));
        // Under start-stop control a read after a stop gets the configured buffer's PCs first: the read buffer
        // takes them all at once, so that nothing rests on how CUPTI hands over part of them.
        let per_read = if sampler.controlled {
            at_stop
        } else {
            self.pcs_per_read
        };
        sampler.read = PcDataBuffer::new(per_read, chosen.len().max(1));
        self.configure(&mut sampler, &mut chosen)?;
        if sampler.controlled && !self.start_stop {
            // Start-stop control for the reads' sake only: sampling starts now, as it does without it.
            sampler.start_sampling()?;
        } else {
            // Without start-stop control CUPTI samples from the configuration; with it, from resume().
            sampler.running = !self.start_stop;
        }
        Ok(sampler)
    }

    /// Whether CUPTI's start-stop control is configured: when the caller asks for it, and always in continuous
    /// mode, whose reads stop sampling first ([`PcSampler::read`]).
    fn controlled(&self) -> bool {
        self.start_stop || self.mode == CollectionMode::Continuous
    }

    /// Refuses settings CUPTI would refuse, before the context is touched.
    fn validate(&self) -> crate::Result<()> {
        if let Some(p) = self.period.filter(|p| !(5..=31).contains(p)) {
            return Err(ProfilingError::InvalidSetting {
                what: "period",
                reason: format!("2^{p} cycles: the exponent must be 5 to 31"),
            }
            .into());
        }
        if self.worker_sleep_ms == Some(0) {
            return Err(ProfilingError::InvalidSetting {
                what: "worker sleep",
                reason: "0 ms: the workers' rounds must be at least 1 ms apart".into(),
            }
            .into());
        }
        if self.pcs_per_read == 0 {
            return Err(ProfilingError::BufferTooSmall {
                what: "PC read buffer",
                bytes: 0,
                needed: 1,
            }
            .into());
        }
        // About 16 bytes per PC and reason, and some fixed room (the header's sizing note).
        if let Some(b) = self.scratch_buffer.filter(|&b| b < 64) {
            return Err(ProfilingError::BufferTooSmall {
                what: "scratch buffer",
                bytes: b,
                needed: 64,
            }
            .into());
        }
        if let Some(b) = self.hardware_buffer.filter(|&b| b < 64) {
            return Err(ProfilingError::BufferTooSmall {
                what: "hardware buffer",
                bytes: b,
                needed: 64,
            }
            .into());
        }
        Ok(())
    }

    /// The indexes of the stall reasons asked for among the device's `reasons` (all of them by default).
    fn chosen_reasons(&self, reasons: &[StallReason]) -> crate::Result<Vec<u32>> {
        let chosen: Vec<u32> = match &self.reasons {
            None => reasons.iter().map(|r| r.index).collect(),
            Some(names) => names
                .iter()
                .map(|n| {
                    reasons
                        .iter()
                        .find(|r| &r.name == n)
                        .map(|r| r.index)
                        .ok_or_else(|| ProfilingError::InvalidSetting {
                            what: "stall reasons",
                            reason: format!(
                                "{n:?} is not one of the device's: {}",
                                reasons
                                    .iter()
                                    .map(|r| r.name.as_str())
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            ),
                        })
                })
                .collect::<Result<_, _>>()?,
        };
        Ok(chosen)
    }

    /// Sets the sampler's configuration: period, workers' sleep, the `chosen` stall reasons, buffers, collection
    /// mode, start-stop control, and the sampler's configured buffer as CUPTI's sampling data buffer.
    fn configure(&self, sampler: &mut PcSampler<'c>, chosen: &mut [u32]) -> crate::Result<()> {
        let api = sampler.api;
        let mut attrs: Vec<sys::CUpti_PCSamplingConfigurationInfo> = Vec::new();
        let mut attr =
            |kind: sys::CUpti_PCSamplingConfigurationAttributeType,
             fill: &dyn Fn(&mut sys::CUpti_PCSamplingConfigurationInfo__bindgen_ty_1)| {
                let mut a = sys::CUpti_PCSamplingConfigurationInfo {
                    attributeType: kind,
                    attributeStatus: 0,
                    attributeData: Default::default(),
                };
                fill(&mut a.attributeData);
                attrs.push(a);
            };
        if let Some(period) = self.period {
            attr(
                sys::CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD,
                &|d| d.samplingPeriodData.samplingPeriod = period,
            );
        }
        if let Some(ms) = self.worker_sleep_ms {
            attr(
                sys::CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_WORKER_THREAD_PERIODIC_SLEEP_SPAN,
                &|d| {
                    d.workerThreadPeriodicSleepSpanData
                        .workerThreadPeriodicSleepSpan = ms
                },
            );
        }
        let count = chosen.len();
        let reasons_ptr = chosen.as_mut_ptr();
        attr(
            sys::CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_STALL_REASON,
            &|d| {
                d.stallReasonData.stallReasonCount = count;
                d.stallReasonData.pStallReasonIndex = reasons_ptr;
            },
        );
        if let Some(b) = self.scratch_buffer {
            attr(
                sys::CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SCRATCH_BUFFER_SIZE,
                &|d| d.scratchBufferSizeData.scratchBufferSize = b,
            );
        }
        if let Some(b) = self.hardware_buffer {
            attr(
                sys::CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_HARDWARE_BUFFER_SIZE,
                &|d| d.hardwareBufferSizeData.hardwareBufferSize = b,
            );
        }
        let mode = match self.mode {
            CollectionMode::Continuous => sys::CUPTI_PC_SAMPLING_COLLECTION_MODE_CONTINUOUS,
            CollectionMode::KernelSerialized => {
                sys::CUPTI_PC_SAMPLING_COLLECTION_MODE_KERNEL_SERIALIZED
            }
        };
        attr(
            sys::CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_COLLECTION_MODE,
            &|d| d.collectionModeData.collectionMode = mode,
        );
        let start_stop = u32::from(self.controlled());
        attr(
            sys::CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_ENABLE_START_STOP_CONTROL,
            &|d| d.enableStartStopControlData.enableStartStopControl = start_stop,
        );
        attr(
            sys::CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_OUTPUT_DATA_FORMAT,
            &|d| {
                d.outputDataFormatData.outputDataFormat =
                    sys::CUPTI_PC_SAMPLING_OUTPUT_DATA_FORMAT_PARSED
            },
        );
        let data = sampler.config.as_mut_ptr().cast();
        attr(
            sys::CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_DATA_BUFFER,
            &|d| d.samplingDataBufferData.samplingDataBuffer = data,
        );
        let set = sym!(api, cuptiPCSamplingSetConfigurationAttribute)?;
        let mut p = sys::CUpti_PCSamplingConfigurationInfoParams {
            size: SIZE_CONFIG,
            ctx: sampler.ctx,
            numAttributes: attrs.len(),
            pPCSamplingConfigurationInfo: attrs.as_mut_ptr(),
            ..Default::default()
        };
        // SAFETY: an enabled context; the attributes, the chosen reasons and the data buffer outlive the call, and
        // the data buffer (boxed, owned by the sampler) outlives the sampling.
        let code = unsafe { set(&mut p) };
        if code != crate::sys::cupti::CUPTI_SUCCESS {
            for a in &attrs {
                if a.attributeStatus != crate::sys::cupti::CUPTI_SUCCESS {
                    log::debug!(
                        "PC sampling attribute {} refused with {}",
                        a.attributeType,
                        a.attributeStatus
                    );
                }
            }
        }
        check("cuptiPCSamplingSetConfigurationAttribute", code)?;
        Ok(())
    }
}

fn context_device(driver: &crate::cuda::Driver, ctx: RawContext) -> crate::Result<usize> {
    driver.init()?;
    // SAFETY: the builder's context is live; pushed and popped around one query on this thread.
    driver.check_call("cuCtxPushCurrent_v2", unsafe {
        (driver.api().cu_ctx_push_current)(ctx)
    })?;
    let mut dev = 0;
    // SAFETY: the context is current; a valid out-pointer.
    let got = driver.check_call("cuCtxGetDevice", unsafe {
        (driver.api().cu_ctx_get_device)(&mut dev)
    });
    let mut popped = std::ptr::null_mut();
    // SAFETY: balances the push above.
    let _ = unsafe { (driver.api().cu_ctx_pop_current)(&mut popped) };
    got?;
    Ok(usize::try_from(dev).unwrap_or(0))
}

/// The device's stall reasons (`cuptiPCSamplingGetNumStallReasons`, `cuptiPCSamplingGetStallReasons`).
fn stall_reasons(api: Api, ctx: RawContext) -> Result<Vec<StallReason>, ProfilingError> {
    let num = sym!(api, cuptiPCSamplingGetNumStallReasons)?;
    let get = sym!(api, cuptiPCSamplingGetStallReasons)?;
    let mut n = 0usize;
    let mut p = sys::CUpti_PCSamplingGetNumStallReasonsParams {
        size: SIZE_NUM_REASONS,
        ctx,
        numStallReasons: &mut n,
        ..Default::default()
    };
    // SAFETY: an enabled context and a valid out-pointer.
    check("cuptiPCSamplingGetNumStallReasons", unsafe { num(&mut p) })?;
    let size = sys::CUPTI_STALL_REASON_STRING_SIZE as usize;
    let mut names = vec![0 as c_char; n * size];
    let mut name_ptrs: Vec<*mut c_char> = (0..n).map(|i| names[i * size..].as_mut_ptr()).collect();
    let mut indices = vec![0u32; n];
    let mut p = sys::CUpti_PCSamplingGetStallReasonsParams {
        size: SIZE_REASONS,
        ctx,
        numStallReasons: n,
        stallReasonIndex: indices.as_mut_ptr(),
        stallReasons: name_ptrs.as_mut_ptr(),
        ..Default::default()
    };
    // SAFETY: `n` index slots and `n` name buffers of CUPTI_STALL_REASON_STRING_SIZE bytes, as the header asks.
    check("cuptiPCSamplingGetStallReasons", unsafe { get(&mut p) })?;
    Ok((0..n)
        .map(|i| {
            let field = &names[i * size..(i + 1) * size];
            let bytes: Vec<u8> = field
                .iter()
                .take_while(|&&c| c != 0)
                .map(|&c| c as u8)
                .collect();
            StallReason {
                index: indices[i],
                name: String::from_utf8_lossy(&bytes).into_owned(),
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn record(function: &str, pc: u64, stalls: &[(u32, u32)]) -> PcRecord {
        PcRecord {
            function: Arc::from(function),
            function_index: 0,
            cubin_crc: 1,
            pc_offset: pc,
            correlation: 0,
            stalls: stalls.to_vec(),
        }
    }

    #[test]
    fn samples_sum_per_function_and_reason() {
        let s = PcSamples {
            reasons: vec![StallReason {
                index: 3,
                name: "long_scoreboard".into(),
            }],
            records: vec![
                record("chase", 0x40, &[(3, 90), (1, 5)]),
                record("chase", 0x50, &[(3, 10)]),
                record("other", 0x10, &[(1, 20)]),
            ],
            ..PcSamples::default()
        };
        let f = s.functions();
        assert_eq!(&*f[0].name, "chase");
        assert_eq!(f[0].samples, 105);
        assert_eq!(f[0].top_stall(), Some((3, 100)));
        assert_eq!(f[0].hot_pcs[0], (0x40, 95));
        assert_eq!(s.reason_name(3), "long_scoreboard");
        assert_eq!(s.reason_name(9), "?");
        assert_eq!(record("x", 0, &[(1, 2), (2, 3)]).samples(), 5);
    }

    proptest! {
        /// Whatever counts CUPTI writes, the copy reads only the buffer's own slots.
        #[test]
        fn taking_trusts_no_count(
            pcs in 0usize..8,
            reasons in 1usize..5,
            total in 0usize..20,
            counts in proptest::collection::vec(0usize..10, 8),
            samples in any::<u64>(),
        ) {
            let mut b = PcDataBuffer::new(pcs, reasons);
            let name = c"kernel";
            {
                let (data, list) = b.raw();
                data.totalNumPcs = total;
                data.totalSamples = samples;
                for (i, pc) in list.iter_mut().enumerate() {
                    pc.stallReasonCount = counts[i];
                    pc.pcOffset = i as u64;
                    pc.functionName = name.as_ptr().cast_mut();
                }
            }
            let mut names = NameCache::default();
            // SAFETY: every function name is a static C string.
            let got = unsafe { b.take(&mut names) };
            prop_assert_eq!(got.records.len(), total.min(pcs));
            prop_assert_eq!(got.truncated_pcs as usize, total.saturating_sub(pcs));
            prop_assert_eq!(got.total_samples, samples);
            for (i, r) in got.records.iter().enumerate() {
                prop_assert_eq!(r.stalls.len(), counts[i].min(reasons));
                prop_assert_eq!(&*r.function, "kernel");
            }
            // The buffer is ready again.
            // SAFETY: as above; the buffer now holds no record.
            let again = unsafe { b.take(&mut names) };
            prop_assert!(again.records.is_empty());
        }
    }

    fn send<T: Send>() {}

    #[test]
    fn samplers_move_between_threads() {
        send::<PcSampler<'static>>();
    }
}
