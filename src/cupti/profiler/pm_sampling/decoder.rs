//! The decode thread: the only user of the CUPTI object after start. It decodes the hardware buffer into the
//! counter-data image at each period, evaluates the new samples, places them on the timeline ([`Coverage`]) and
//! delivers them.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::batch::PmBatch;
use super::claims::DeviceClaim;
use super::coverage::{Coverage, Covered};
use super::object::{Enabled, initialize_image};
use super::shared::Shared;
use crate::cupti::profiler::api::{Api, params, sym};
use crate::cupti::profiler::counter_data::{completed_samples, sample_counts, sample_times};
use crate::cupti::profiler::host::{ConfigImage, Host, MetricNames};
use crate::cupti::profiler::{ProfilerInit, ProfilingError, check};
use crate::delivery;
use crate::sys::cupti_profiling as sys;

/// What one `cuptiPmSamplingDecodeData` reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DecodeOutcome {
    /// The counter-data image is full: decode again after evaluating it.
    pub full: bool,
    /// The hardware buffer overflowed.
    pub overflow: bool,
}

/// The decode thread's state: the only user of the CUPTI object after start.
pub(super) struct Decoder {
    pub(super) api: Api,
    pub(super) enabled: Enabled,
    pub(super) _init: ProfilerInit,
    pub(super) host: Host,
    pub(super) metrics: MetricNames,
    pub(super) image: Vec<u8>,
    pub(super) keep: bool,
    /// Samples of the current image already evaluated and delivered.
    pub(super) evaluated: usize,
    /// How the samples so far cover the time: spans, losses and gaps.
    pub(super) coverage: Coverage,
    /// The CUDA device ordinal (for the log).
    pub(super) device: usize,
    pub(super) starts: Vec<u64>,
    pub(super) ends: Vec<u64>,
    pub(super) values: Vec<f64>,
    /// The image index of each sample in `starts`.
    pub(super) indices: Vec<usize>,
    /// The configuration CUPTI was given (`cuptiPmSamplingSetConfig`), kept until the sampling is disabled: the
    /// header does not say that CUPTI copies it.
    pub(super) _config: ConfigImage,
    /// Last, so that the device is released after the sampling was disabled.
    pub(super) _claim: DeviceClaim,
}

impl Decoder {
    pub(super) fn run(mut self, shared: &Shared, period: Duration) {
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.run_loop(shared, period)
        }));
        let error = match outcome {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e.to_string()),
            Err(payload) => {
                let msg = delivery::panic_message(&*payload);
                std::mem::forget(payload);
                Some(format!("panicked: {msg}"))
            }
        };
        if let Some(e) = error {
            log::warn!("PM sampling decode thread: {e}");
            *shared.failed.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
        }
        // Disable (releasing the counters) before telling readers the sampler ended.
        drop(self);
        shared.end();
    }

    pub(super) fn run_loop(
        &mut self,
        shared: &Shared,
        period: Duration,
    ) -> Result<(), ProfilingError> {
        loop {
            let stopping = {
                let stop = shared.stop.lock().unwrap_or_else(|p| p.into_inner());
                let (stop, _) = shared
                    .wake
                    .wait_timeout_while(stop, period, |s| !*s)
                    .unwrap_or_else(|p| p.into_inner());
                *stop
            };
            if stopping {
                self.stop_sampling()?;
            }
            self.drain(shared)?;
            if stopping {
                self.finish(shared);
                log::debug!(
                    "PM sampling on device {} stopped: {:?}",
                    self.device,
                    shared.stats()
                );
                return Ok(());
            }
        }
    }

    pub(super) fn stop_sampling(&self) -> Result<(), ProfilingError> {
        let f = sym!(self.api, cuptiPmSamplingStop)?;
        let mut p = params!(CUpti_PmSampling_Stop_Params, pPmSamplingObject);
        p.pPmSamplingObject = self.enabled.obj.0;
        // SAFETY: a live, started object.
        check("cuptiPmSamplingStop", unsafe { f(&mut p) })
    }

    /// Decodes until the hardware buffer is empty, delivering each image's new samples.
    pub(super) fn drain(&mut self, shared: &Shared) -> Result<(), ProfilingError> {
        loop {
            let outcome = self.decode()?;
            shared.decodes.fetch_add(1, Ordering::Relaxed);
            if outcome.overflow {
                shared.overflows.fetch_add(1, Ordering::Relaxed);
                log::warn!("PM sampling: the hardware buffer overflowed; samples were lost");
                self.coverage.overflow();
            }
            let first = self.evaluated;
            let counts = self.evaluate_new()?;
            self.count(shared, &counts);
            if !self.starts.is_empty() || outcome.overflow || counts.lost > 0 || counts.gaps > 0 {
                let m = self.metrics.len();
                let mut from = 0;
                loop {
                    // A kept image names a batch's samples by the index of its first: a stale sample left out
                    // breaks that run, so the samples after it go in a batch of their own. The decode's losses
                    // and gaps come with its last batch, once.
                    let to = if self.keep {
                        run_end(&self.indices, from)
                    } else {
                        self.starts.len()
                    };
                    let last = to >= self.starts.len();
                    let mut batch = PmBatch::new(
                        &self.starts[from..to],
                        &self.ends[from..to],
                        &self.values[from * m..to * m],
                        m,
                        if last { counts.lost } else { 0 },
                        last && outcome.overflow,
                    );
                    if last {
                        batch.gaps = counts.gaps;
                    }
                    if self.keep {
                        let at = self.indices.get(from).copied().unwrap_or(first);
                        batch.counter_data = Some((&self.image, at));
                    }
                    shared.deliver(&batch);
                    if last {
                        break;
                    }
                    from = to;
                }
            }
            // The image is started afresh only once CUPTI reports it full: initialising it earlier, between two
            // decodes, crashed the process inside CUPTI (H100, CUPTI 13.0).
            if !outcome.full {
                // The hardware buffer is drained: an overflow it reported is placed among the samples of this
                // drain, or before the next sample.
                self.coverage.end_decode();
                return Ok(());
            }
            shared.image_full.fetch_add(1, Ordering::Relaxed);
            // SAFETY: the image is the one CUPTI decodes into.
            if let Ok((populated, completed)) = unsafe { sample_counts(self.api, &self.image) } {
                let begun = populated.saturating_sub(completed);
                shared
                    .incomplete_at_restart
                    .fetch_add(begun as u64, Ordering::Relaxed);
                log::debug!(
                    "PM sampling on device {}: counter-data image full ({completed} samples completed, {begun} \
                     begun but not completed); started afresh",
                    self.device
                );
            }
            initialize_image(self.api, &self.enabled, &mut self.image)?;
            self.evaluated = 0;
            self.coverage.restart();
        }
    }

    /// Adds a decode's counts to the shared ones.
    pub(super) fn count(&self, shared: &Shared, counts: &DecodeCounts) {
        shared.stale.fetch_add(counts.stale, Ordering::Relaxed);
        shared
            .samples
            .fetch_add(self.starts.len() as u64, Ordering::Relaxed);
        shared.dropped.fetch_add(counts.lost, Ordering::Relaxed);
        shared.gaps.fetch_add(counts.gaps, Ordering::Relaxed);
        shared
            .gaps_at_restart
            .fetch_add(counts.gaps_at_restart, Ordering::Relaxed);
    }

    /// After the last decode: an overflow that no missing period showed still lost at least one sample.
    pub(super) fn finish(&mut self, shared: &Shared) {
        let lost = self.coverage.finish();
        if lost > 0 {
            shared.dropped.fetch_add(lost, Ordering::Relaxed);
            shared.deliver(&PmBatch::new(
                &[],
                &[],
                &[],
                self.metrics.len(),
                lost,
                false,
            ));
        }
    }

    pub(super) fn decode(&mut self) -> Result<DecodeOutcome, ProfilingError> {
        let f = sym!(self.api, cuptiPmSamplingDecodeData)?;
        let mut p = params!(CUpti_PmSampling_DecodeData_Params, overflow);
        p.pPmSamplingObject = self.enabled.obj.0;
        p.pCounterDataImage = self.image.as_mut_ptr();
        p.counterDataImageSize = self.image.len();
        // SAFETY: a live object and the image initialised for it.
        let code = unsafe { f(&mut p) };
        // "CUPTI_ERROR_OUT_OF_MEMORY if there is record overflow in the hardware buffer".
        if code == crate::sys::cupti::CUPTI_ERROR_OUT_OF_MEMORY {
            return Ok(DecodeOutcome {
                full: false,
                overflow: true,
            });
        }
        check("cuptiPmSamplingDecodeData", code)?;
        Ok(DecodeOutcome {
            full: p.decodeStopReason == sys::CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL,
            overflow: p.overflow != 0,
        })
    }

    /// Evaluates the image's samples completed since the last call into the column buffers; returns what the
    /// coverage of their time says (samples lost and gaps before and among them, stale samples left out).
    pub(super) fn evaluate_new(&mut self) -> Result<DecodeCounts, ProfilingError> {
        self.starts.clear();
        self.ends.clear();
        self.values.clear();
        self.indices.clear();
        // SAFETY: the image is the one CUPTI decodes into.
        let completed = unsafe { completed_samples(self.api, &self.image) }?;
        let mut counts = DecodeCounts::default();
        for i in self.evaluated..completed {
            // SAFETY: as above; `i` is below the completed count.
            let (start, end) =
                unsafe { sample_times(self.api, self.enabled.obj.0, &self.image, i) }?;
            let c = self.coverage.sample(start, end);
            counts.add(&c);
            if c.stale {
                continue;
            }
            if c.gaps > 0 || c.lost > 0 {
                log::debug!(
                    "PM sampling on device {}: {} sampling periods without a sample ({}) before the sample \
                     ending at {} ns (image sample {i}{})",
                    self.device,
                    c.gaps + c.lost,
                    if c.lost > 0 {
                        "lost to an overflow"
                    } else {
                        "a gap, no loss reported"
                    },
                    c.end,
                    if c.at_restart {
                        ", after an image restart"
                    } else {
                        ""
                    }
                );
            }
            let at = self.values.len();
            self.values.resize(at + self.metrics.len(), f64::NAN);
            // SAFETY: as above.
            unsafe {
                self.host
                    .evaluate_into(&self.image, i, &self.metrics, &mut self.values[at..])
            }?;
            self.starts.push(c.start);
            self.ends.push(c.end);
            self.indices.push(i);
        }
        self.evaluated = self.evaluated.max(completed);
        Ok(counts)
    }
}

/// The end of the run of consecutive image indices that starts at `from`.
fn run_end(indices: &[usize], from: usize) -> usize {
    let mut to = from + 1;
    while to < indices.len() && indices[to] == indices[to - 1] + 1 {
        to += 1;
    }
    to.min(indices.len())
}

/// What one decode's samples said about the time they cover.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct DecodeCounts {
    pub(super) lost: u64,
    pub(super) gaps: u64,
    pub(super) gaps_at_restart: u64,
    pub(super) stale: u64,
}

impl DecodeCounts {
    pub(super) fn add(&mut self, c: &Covered) {
        self.lost += c.lost;
        self.gaps += c.gaps;
        if c.at_restart {
            self.gaps_at_restart += c.gaps;
        }
        self.stale += u64::from(c.stale);
    }
}
