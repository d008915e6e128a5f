//! Starting a sampler: [`PmSamplerBuilder`]'s settings checked against the device, the configuration made and
//! given to CUPTI, the decode thread spawned.

use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use super::batch::PmBatch;
use super::claims::DeviceClaim;
use super::coverage::Coverage;
use super::decoder::Decoder;
use super::object::{Enabled, counter_data_size, enable, initialize_image, set_config, start};
use super::sampler::PmSampler;
use super::shared::{Queue, Shared, Sink};
use super::{AppendMode, Interval, PmLayout, PmSamplerBuilder};
use crate::counters::{CounterDevice, CounterInfo};
use crate::cupti::profiler::api::{Api, Needs};
use crate::cupti::profiler::host::{Catalog, ConfigImage, Host, MetricNames};
use crate::cupti::profiler::{self, Method, ProfilerApi, ProfilerInit, ProfilingError};
use crate::delivery::Delivery;

impl PmSamplerBuilder {
    /// The metrics, full names (`sm__cycles_active.avg.pct_of_peak_sustained_elapsed`); checked against the
    /// device's catalogue at start.
    pub fn metrics<I, S>(mut self, metrics: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.metrics = metrics
            .into_iter()
            .map(|s| s.as_ref().to_string())
            .collect();
        self
    }

    /// The sampling interval (default 10 ms).
    pub fn interval(mut self, interval: Interval) -> Self {
        self.interval = interval;
        self
    }

    /// Bytes of the hardware buffer the GPU writes samples into (default 256 MiB).
    pub fn hardware_buffer(mut self, bytes: usize) -> Self {
        self.hardware_buffer = bytes;
        self
    }

    /// What the hardware buffer does when full (default [`AppendMode::KeepOldest`]).
    pub fn append_mode(mut self, mode: AppendMode) -> Self {
        self.append = mode;
        self
    }

    /// How often the decode thread decodes (default 50 ms).
    pub fn decode_period(mut self, period: Duration) -> Self {
        self.decode_period = period;
        self
    }

    /// Samples the counter-data image holds per decode (default: four decode periods' worth or two seconds' worth,
    /// whichever is more, at least 64).
    pub fn samples_per_decode(mut self, samples: usize) -> Self {
        self.samples_per_decode = Some(samples);
        self
    }

    /// Most samples kept for [`PmSampler::read`](crate::counters::DeviceCounters::read) before the oldest are dropped and counted (default 2^20).
    pub fn queue_limit(mut self, samples: usize) -> Self {
        self.queue_limit = samples.max(1);
        self
    }

    /// Hands each batch's counter-data image to the callback too ([`PmBatch::counter_data`]), to save it.
    pub fn keep_counter_data(mut self, keep: bool) -> Self {
        self.keep_counter_data = keep;
        self
    }

    /// Starts sampling; read the samples with [`PmSampler::read`](crate::counters::DeviceCounters::read) or [`PmSampler::samples`].
    pub fn start(self) -> crate::Result<PmSampler> {
        let limit = self.queue_limit;
        self.start_into(Sink::Queue {
            queue: Mutex::new(Queue::default()),
            ready: Condvar::new(),
            limit,
        })
    }

    /// Starts sampling and hands each decode's samples to `callback` on the decode thread. A panic in it is
    /// caught, counted and reported by [`PmSampler::stop`].
    pub fn start_with<F>(self, callback: F) -> crate::Result<PmSampler>
    where
        F: for<'b> FnMut(&PmBatch<'b>) + Send + 'static,
    {
        self.start_into(Sink::Callback(Delivery::new(Box::new(callback))))
    }

    pub(super) fn samples_for(&self) -> usize {
        if let Some(n) = self.samples_per_decode {
            return n;
        }
        // Four decode periods of samples, at least 64: the size that ran 60 s at 1 ms on an H100 (CUPTI 13.0).
        // CUPTI loses about ten samples each time the image fills and is started afresh, so a larger image would
        // lose fewer; larger ones went with crashes inside CUPTI while the sampler freed its configuration image
        // after starting, and have not been tried since it keeps it. `samples_per_decode` sets another size.
        let per_period = match self.interval {
            Interval::Time(d) if !d.is_zero() => {
                (self.decode_period.as_nanos() / d.as_nanos()).min(1 << 20) as usize
            }
            Interval::Clocks(c) if c > 0 => {
                (self.decode_period.as_nanos() / u128::from(c)).min(1 << 20) as usize
            }
            _ => 0,
        };
        // Two seconds of samples at least: each start afresh costs a run of samples (a gap, then stale spans that
        // are left out), about a tenth of the time with 200-sample images at 1 ms.
        let two_seconds = match self.interval {
            Interval::Time(d) if !d.is_zero() => {
                (2_000_000_000 / d.as_nanos()).min(1 << 16) as usize
            }
            _ => 0,
        };
        per_period.saturating_mul(4).max(two_seconds).max(64)
    }

    pub(super) fn check_settings(&self, capability: (i32, i32)) -> Result<(), ProfilingError> {
        match self.interval {
            Interval::Time(d) if d.is_zero() || d.as_nanos() > u128::from(u64::MAX) => {
                return Err(ProfilingError::InvalidSetting {
                    what: "interval",
                    reason: format!("{d:?} is not a sampling interval"),
                });
            }
            // Turing (7.5) and GA100 (8.0) lack the fixed-frequency trigger; GA10x is 8.6 and up.
            Interval::Time(_) if capability < (8, 6) => {
                return Err(ProfilingError::InvalidSetting {
                    what: "interval",
                    reason: format!(
                        "time-based intervals need Ampere GA10x or later (this device is compute capability {}.{}); use Interval::Clocks",
                        capability.0, capability.1
                    ),
                });
            }
            Interval::Clocks(0) => {
                return Err(ProfilingError::InvalidSetting {
                    what: "interval",
                    reason: "0 clocks is not a sampling interval".into(),
                });
            }
            _ => {}
        }
        if self.append == AppendMode::KeepLatest && capability < (8, 0) {
            return Err(ProfilingError::InvalidSetting {
                what: "append mode",
                reason: "keeping the latest records needs Ampere or later".into(),
            });
        }
        if self.decode_period.is_zero() {
            return Err(ProfilingError::InvalidSetting {
                what: "decode period",
                reason: "must be above zero".into(),
            });
        }
        if self.samples_for() == 0 {
            return Err(ProfilingError::BufferTooSmall {
                what: "counter-data image",
                bytes: 0,
                needed: 1,
            });
        }
        if self.hardware_buffer == 0 {
            return Err(ProfilingError::BufferTooSmall {
                what: "hardware buffer",
                bytes: 0,
                needed: 1,
            });
        }
        Ok(())
    }

    pub(super) fn start_into(self, sink: Sink) -> crate::Result<PmSampler> {
        let api = Api::load(Needs::Metrics)?;
        // Before any vendor call: CUPTI answers a second PM client of the same process with CUPTI_ERROR_UNKNOWN.
        let claim = DeviceClaim::take(self.device)?;
        let info = profiler::check_device(api, self.device, ProfilerApi::PmSampling)?;
        self.check_settings(info.compute_capability)?;
        if self.metrics.is_empty() {
            return Err(ProfilingError::NoMetrics.into());
        }
        let init = ProfilerInit::acquire(api)?;
        let chip = profiler::chip(api, &init, self.device)?;
        // Checked against the catalogue before anything is enabled on the device.
        let catalog = Catalog::create(api, &chip)?;
        let metrics = catalog.resolve_all(&self.metrics, Method::PmSampling)?;
        let counters = counter_infos(&catalog, &metrics);
        drop(catalog);
        // Where another client holds the counters, this answers CUPTI_ERROR_HARDWARE_BUSY.
        let availability = profiler::pm_availability(api, self.device)?;
        let config = ConfigImage::create(
            api,
            &chip,
            Method::PmSampling,
            Some(&availability),
            &metrics,
        )?;
        if config.passes() > 1 {
            return Err(ProfilingError::TooManyPasses {
                method: Method::PmSampling,
                passes: config.passes(),
                metrics: metrics.names().to_vec(),
            }
            .into());
        }
        let host = Host::create(api, &chip, Method::PmSampling, Some(&availability))?;
        host.add_metrics(&metrics)?;
        let enabled = enable(api, self.device)?;
        let samples_per_decode = self.samples_for();
        let sample_bytes = self.set_hardware(api, &enabled, &config, &metrics)?;
        let samples_u32 =
            u32::try_from(samples_per_decode).map_err(|_| ProfilingError::InvalidSetting {
                what: "samples per decode",
                reason: format!("{samples_per_decode} is above {}", u32::MAX),
            })?;
        let image_bytes = counter_data_size(api, &enabled, &metrics, samples_u32)?;
        let mut image = vec![0u8; image_bytes];
        initialize_image(api, &enabled, &mut image)?;
        start(api, &enabled)?;
        let layout = PmLayout {
            chip,
            config_bytes: config.bytes().len(),
            availability_bytes: availability.len(),
            samples_per_decode,
            counter_data_bytes: image.len(),
            sample_bytes,
            hardware_buffer: self.hardware_buffer,
        };
        log::debug!("PM sampling on device {}: {layout:?}", self.device);
        let shared = new_shared(sink);
        let decoder = Decoder {
            api,
            enabled,
            _init: init,
            host,
            metrics: metrics.clone(),
            image,
            keep: self.keep_counter_data,
            evaluated: 0,
            coverage: Coverage::new(match self.interval {
                Interval::Time(d) => u64::try_from(d.as_nanos()).ok().filter(|&n| n > 0),
                Interval::Clocks(_) => None,
            }),
            device: self.device,
            starts: Vec::new(),
            ends: Vec::new(),
            values: Vec::new(),
            indices: Vec::new(),
            _config: config,
            _claim: claim,
        };
        let s = Arc::clone(&shared);
        let period = self.decode_period;
        let thread = std::thread::Builder::new()
            .name("gpu-tools-pm-decode".into())
            .spawn(move || decoder.run(&s, period))
            .map_err(|e| ProfilingError::DecodeThread(format!("cannot start: {e}")))?;
        Ok(PmSampler {
            shared,
            thread: Some(thread),
            device: CounterDevice {
                index: self.device as u32,
                name: info.name,
            },
            counters,
            metrics,
            layout,
            interval: self.interval,
        })
    }

    /// Sets the configuration on the enabled device: refuses a hardware buffer too small for one sample (asked
    /// before the configuration where CUPTI can say, else after it); returns what one sample takes.
    fn set_hardware(
        &self,
        api: Api,
        enabled: &Enabled,
        config: &ConfigImage,
        metrics: &MetricNames,
    ) -> crate::Result<usize> {
        // What one sample adds to the counter-data image, an estimate of what it takes in the hardware buffer.
        // Asked before the configuration so that a buffer too small is refused before it is set; where CUPTI wants
        // the configuration first, asked again after it.
        let per_sample = |e: &Enabled| -> Result<usize, ProfilingError> {
            let one = counter_data_size(api, e, metrics, 1)?;
            let two = counter_data_size(api, e, metrics, 2)?;
            Ok(two.saturating_sub(one).max(1))
        };
        let early = per_sample(enabled);
        let too_small = |needed: usize| ProfilingError::BufferTooSmall {
            what: "hardware buffer",
            bytes: self.hardware_buffer,
            needed,
        };
        if let Ok(needed) = early {
            if self.hardware_buffer < needed {
                return Err(too_small(needed).into());
            }
        }
        if let Err(e) = set_config(api, enabled, config, self) {
            // A buffer CUPTI finds too small is reported as such where the estimate says so.
            return Err(match (e, early) {
                (
                    ProfilingError::Vendor {
                        error: crate::cupti::CuptiError::InvalidParameter,
                        ..
                    },
                    Ok(needed),
                ) if self.hardware_buffer < 4 * needed => too_small(4 * needed),
                (e, _) => e,
            }
            .into());
        }
        let sample_bytes = match early {
            Ok(n) => n,
            Err(_) => per_sample(enabled)?,
        };
        if self.hardware_buffer < sample_bytes {
            return Err(too_small(sample_bytes).into());
        }
        Ok(sample_bytes)
    }
}

/// What each counter's column is: the metric's full name and its unit (the catalogue's, by the suffix).
fn counter_infos(catalog: &Catalog, metrics: &MetricNames) -> Vec<CounterInfo> {
    metrics
        .names()
        .iter()
        .map(|n| {
            let base = n.split('.').next().unwrap_or(n);
            let unit = unit_of(n, catalog.get(base).map(|m| m.unit.as_str()).unwrap_or(""));
            CounterInfo {
                name: n.clone(),
                unit,
            }
        })
        .collect()
}

/// The state the decode thread shares with the sampler, running.
fn new_shared(sink: Sink) -> Arc<Shared> {
    Arc::new(Shared {
        sink,
        stop: Mutex::new(false),
        wake: Condvar::new(),
        decodes: AtomicU64::new(0),
        samples: AtomicU64::new(0),
        overflows: AtomicU64::new(0),
        dropped: AtomicU64::new(0),
        gaps: AtomicU64::new(0),
        gaps_at_restart: AtomicU64::new(0),
        incomplete_at_restart: AtomicU64::new(0),
        stale: AtomicU64::new(0),
        image_full: AtomicU64::new(0),
        failed: Mutex::new(None),
        running: AtomicBool::new(true),
    })
}

/// The unit of a full metric name: the base's unit, turned into a rate or a percentage by the suffix.
pub(crate) fn unit_of(name: &str, base_unit: &str) -> String {
    if name.contains(".pct") {
        "%".to_string()
    } else if name.ends_with(".per_second") {
        format!("{base_unit}/second")
    } else if name.contains(".per_cycle") {
        format!("{base_unit}/cycle")
    } else {
        base_unit.to_string()
    }
}
