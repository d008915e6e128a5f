//! [`PmSampler`], the handle of a running sampler: its counts, the read queue ([`DeviceCounters::read`],
//! [`PmSampler::samples`]) and stopping (which joins the decode thread).

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::shared::{Shared, Sink};
use super::{
    AppendMode, DEFAULT_DECODE_PERIOD, DEFAULT_HARDWARE_BUFFER, DEFAULT_QUEUE_LIMIT, Interval,
    PmLayout, PmReport, PmSamplerBuilder, PmStats,
};
use crate::counters::{
    CounterDevice, CounterInfo, DeviceCounters, DeviceSample, ReadStatus, SampleClock,
};
use crate::cupti::profiler::ProfilingError;
use crate::cupti::profiler::host::MetricNames;
use crate::delivery;

/// A device-wide PM sampler: started by [`PmSamplerBuilder::start`] or [`start_with`](PmSamplerBuilder::start_with);
/// stopped, with every sample decoded and delivered, by [`stop`](Self::stop) or on drop.
///
/// `Send` and `Sync`: the decode thread owns the CUPTI object; the handle holds only shared counters and the read
/// queue.
pub struct PmSampler {
    pub(super) shared: Arc<Shared>,
    pub(super) thread: Option<JoinHandle<()>>,
    pub(super) device: CounterDevice,
    pub(super) counters: Vec<CounterInfo>,
    pub(super) metrics: MetricNames,
    pub(super) layout: PmLayout,
    pub(super) interval: Interval,
}

impl std::fmt::Debug for PmSampler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PmSampler")
            .field("device", &self.device)
            .field("metrics", &self.metrics.names())
            .field("interval", &self.interval)
            .finish_non_exhaustive()
    }
}

impl PmSampler {
    /// Settings for device `index` (a CUDA device ordinal): no metric yet, 10 ms interval, 256 MiB hardware buffer,
    /// oldest records kept.
    pub fn builder(device: usize) -> PmSamplerBuilder {
        PmSamplerBuilder {
            device,
            metrics: Vec::new(),
            interval: Interval::Time(Duration::from_millis(10)),
            hardware_buffer: DEFAULT_HARDWARE_BUFFER,
            append: AppendMode::KeepOldest,
            decode_period: DEFAULT_DECODE_PERIOD,
            samples_per_decode: None,
            queue_limit: DEFAULT_QUEUE_LIMIT,
            keep_counter_data: false,
        }
    }

    /// The metrics, in the order of each sample's values.
    pub fn metrics(&self) -> &[String] {
        self.metrics.names()
    }

    /// The interval.
    pub fn interval(&self) -> Interval {
        self.interval
    }

    /// The sizes chosen.
    pub fn layout(&self) -> &PmLayout {
        &self.layout
    }

    /// Counts so far.
    pub fn stats(&self) -> PmStats {
        self.shared.stats()
    }

    /// Whether the decode thread still runs (it ends at [`stop`](Self::stop) or on a decode error).
    pub fn is_running(&self) -> bool {
        self.shared.running.load(Ordering::Acquire)
    }

    /// The samples that arrive until `deadline` (or until the sampler ends), oldest first; for a sampler started
    /// with [`start`](PmSamplerBuilder::start).
    pub fn samples(&mut self, deadline: Instant) -> Samples<'_> {
        Samples {
            sampler: self,
            deadline,
            buffer: VecDeque::new(),
        }
    }

    /// Stops sampling, decodes and delivers what the hardware buffer still holds, and releases the counters.
    pub fn stop(mut self) -> crate::Result<PmReport> {
        self.shutdown()
    }

    pub(super) fn shutdown(&mut self) -> crate::Result<PmReport> {
        if delivery::in_callback() {
            return Err(ProfilingError::State(
                "a PM sampler cannot be stopped from its own callback",
            )
            .into());
        }
        *self.shared.stop.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.shared.wake.notify_all();
        if let Some(t) = self.thread.take() {
            if let Err(payload) = t.join() {
                let msg = delivery::panic_message(&*payload);
                std::mem::forget(payload);
                return Err(ProfilingError::DecodeThread(format!("panicked: {msg}")).into());
            }
        }
        let panic = match &self.shared.sink {
            Sink::Callback(d) => d.take_panic(),
            Sink::Queue { .. } => None,
        };
        if let Some(e) = self
            .shared
            .failed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            return Err(ProfilingError::DecodeThread(e).into());
        }
        Ok(PmReport {
            stats: self.shared.stats(),
            panic,
        })
    }
}

impl Drop for PmSampler {
    fn drop(&mut self) {
        if self.thread.is_some() && !delivery::in_callback() {
            let _ = self.shutdown();
        }
    }
}

impl DeviceCounters for PmSampler {
    fn device(&self) -> &CounterDevice {
        &self.device
    }

    fn counters(&self) -> &[CounterInfo] {
        &self.counters
    }

    fn clock(&self) -> SampleClock {
        SampleClock::GpuGlobalTimer
    }

    fn read(
        &mut self,
        timeout: Duration,
        out: &mut Vec<DeviceSample>,
    ) -> crate::Result<ReadStatus> {
        let Sink::Queue { queue, ready, .. } = &self.shared.sink else {
            return Err(ProfilingError::State(
                "this sampler hands its samples to its callback; read has none",
            )
            .into());
        };
        let deadline = Instant::now() + timeout;
        let mut q = queue.lock().unwrap_or_else(|p| p.into_inner());
        while q.samples.is_empty() && !q.ended {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            q = ready
                .wait_timeout(q, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        let samples = q.samples.len();
        out.extend(q.samples.drain(..));
        let dropped = std::mem::take(&mut q.dropped_unread);
        let gaps = std::mem::take(&mut q.gaps_unread);
        let ended = q.ended;
        drop(q);
        if samples == 0 && ended {
            if let Some(e) = self
                .shared
                .failed
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone()
            {
                return Err(ProfilingError::DecodeThread(e).into());
            }
        }
        Ok(ReadStatus {
            samples,
            dropped,
            gaps,
        })
    }

    /// Stops sampling and decodes what the hardware buffer still holds into the read queue (the counters are
    /// released too: the decode thread disables the sampling when it ends).
    fn finish(&mut self) -> crate::Result<()> {
        self.shutdown().map(drop)
    }
}

/// The iterator of [`PmSampler::samples`].
pub struct Samples<'s> {
    sampler: &'s mut PmSampler,
    deadline: Instant,
    buffer: VecDeque<DeviceSample>,
}

impl Iterator for Samples<'_> {
    type Item = DeviceSample;
    fn next(&mut self) -> Option<DeviceSample> {
        loop {
            if let Some(s) = self.buffer.pop_front() {
                return Some(s);
            }
            let left = self.deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            let mut got = Vec::new();
            match self.sampler.read(left, &mut got) {
                Ok(r) if r.samples > 0 => self.buffer.extend(got),
                Ok(_) if self.sampler.is_running() => {}
                _ => return None,
            }
        }
    }
}
