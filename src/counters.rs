//! Device counters sampled over time, whichever vendor reads them.
//!
//! A device-wide gauge (SM activity, DRAM bandwidth, ...) is read the same way on every vendor: choose a device and
//! some counters, then collect samples, each an interval of GPU time with one value per counter. NVIDIA's PM
//! sampling, rocprofiler v2's device profiling session and rocprofiler-sdk's device counting service each
//! implement [`DeviceCounters`], so a tool such as a live `top` view reads any of them through one
//! `Box<dyn DeviceCounters>`.
//!
//! Vendor-neutral, like [`trace`](crate::trace): the vendor folders depend on this module, never the reverse.

use std::time::Duration;

pub mod timeline;
pub mod top;

/// The device a sampler reads.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct CounterDevice {
    /// The vendor's index of the device (CUDA device ordinal, HSA GPU agent index).
    pub index: u32,
    /// The device's marketing name, as the vendor reports it.
    pub name: String,
}

/// One counter a sampler reads.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct CounterInfo {
    /// The name the user asked for (a metric or counter name of the vendor).
    pub name: String,
    /// Its unit as the vendor states it (`"%"`, `"byte/second"`, ...), empty where the vendor gives none.
    pub unit: String,
}

/// One sample: an interval of GPU time and the value of each counter over it.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct DeviceSample {
    /// Start of the interval, in nanoseconds on the sampler's clock ([`DeviceCounters::clock`]).
    pub start_ns: u64,
    /// End of the interval, same clock.
    pub end_ns: u64,
    /// One value per counter, in the order of [`DeviceCounters::counters`]; `NaN` where the device gave none.
    pub values: Vec<f64>,
}

impl DeviceSample {
    /// The length of the interval (zero where the clock went backwards).
    pub fn duration(&self) -> Duration {
        Duration::from_nanos(self.end_ns.saturating_sub(self.start_ns))
    }
}

/// The clock a sampler's timestamps are on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub enum SampleClock {
    /// The GPU's global timer, in nanoseconds (NVIDIA PM sampling). On CUPTI 13.0 (H100, H200, driver 580) its
    /// values were nanoseconds since the Unix epoch: the driver keeps the timer near the host's `CLOCK_REALTIME`
    /// ([`timeline`] puts such samples on `CLOCK_MONOTONIC` through that).
    GpuGlobalTimer,
    /// The host's `CLOCK_MONOTONIC`, in nanoseconds (samplers that poll from the host).
    HostMonotonic,
    /// The vendor's own timestamp clock, in nanoseconds (rocprofiler).
    Vendor,
}

/// What a [`DeviceCounters::read`] reports besides the samples it appended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct ReadStatus {
    /// Samples appended by this read.
    pub samples: usize,
    /// Samples the device or the sampler lost since the previous read (a hardware buffer that overflowed, a
    /// decode that fell behind). Never silent: a non-zero count here is the only place such a loss shows.
    pub dropped: u64,
    /// Sampling periods since the previous read that passed without a sample while nothing reported a loss: time
    /// the samples do not cover, which the sampler cannot call lost (samplers that poll from the host have none).
    pub gaps: u64,
}

/// Device counters sampled over time: the shape every vendor's device-wide sampler takes.
///
/// A sampler is created and started by its vendor's constructor; this trait only reads it. Dropping the sampler
/// stops it and releases the counters.
pub trait DeviceCounters {
    /// The device sampled.
    fn device(&self) -> &CounterDevice;

    /// The counters sampled, in the order of [`DeviceSample::values`].
    fn counters(&self) -> &[CounterInfo];

    /// The clock of [`DeviceSample::start_ns`] and [`DeviceSample::end_ns`].
    fn clock(&self) -> SampleClock;

    /// Waits up to `timeout` for at least one new sample, appends every sample available now to `out` (oldest
    /// first), and says how many it appended and how many were lost. Returns with `samples == 0` when none came in
    /// time.
    fn read(&mut self, timeout: Duration, out: &mut Vec<DeviceSample>)
    -> crate::Result<ReadStatus>;

    /// Stops sampling and collects what the device still holds, leaving it for [`read`](Self::read): after it,
    /// reads return the last samples (and losses), then nothing. A sampler may release the counters here (NVIDIA's
    /// does) or when dropped. Calling it again does nothing. The default, for samplers that hold nothing back,
    /// does nothing.
    fn finish(&mut self) -> crate::Result<()> {
        Ok(())
    }
}

/// The host's `CLOCK_MONOTONIC` now, in nanoseconds ([`SampleClock::HostMonotonic`]); 0 if the clock cannot be
/// read.
pub fn host_monotonic_ns() -> u64 {
    #[repr(C)]
    struct Timespec {
        tv_sec: std::ffi::c_long,
        tv_nsec: std::ffi::c_long,
    }
    unsafe extern "C" {
        /// POSIX `clock_gettime` (glibc and musl export it; `time_t` is `long` on Linux).
        fn clock_gettime(clock: std::ffi::c_int, ts: *mut Timespec) -> std::ffi::c_int;
    }
    const CLOCK_MONOTONIC: std::ffi::c_int = 1;
    let mut ts = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and out-pointer; clock_gettime writes the struct and nothing else.
    if unsafe { clock_gettime(CLOCK_MONOTONIC, &mut ts) } != 0 {
        return 0;
    }
    let secs = u64::try_from(ts.tv_sec).unwrap_or(0);
    let nanos = u64::try_from(ts.tv_nsec).unwrap_or(0);
    secs.saturating_mul(1_000_000_000).saturating_add(nanos)
}

/// The mean of each counter over samples (`NaN` values skipped; `NaN` where a counter has none), for a view that
/// refreshes less often than it samples.
pub fn mean_values(samples: &[DeviceSample], counters: usize) -> Vec<f64> {
    (0..counters)
        .map(|i| {
            let (sum, n) = samples
                .iter()
                .filter_map(|s| s.values.get(i).copied().filter(|v| !v.is_nan()))
                .fold((0.0, 0u32), |(sum, n), v| (sum + v, n + 1));
            if n == 0 { f64::NAN } else { sum / f64::from(n) }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sampler that is only data: what a tool sees through the trait object.
    struct Fixed {
        device: CounterDevice,
        counters: Vec<CounterInfo>,
        left: Vec<DeviceSample>,
    }

    impl DeviceCounters for Fixed {
        fn device(&self) -> &CounterDevice {
            &self.device
        }
        fn counters(&self) -> &[CounterInfo] {
            &self.counters
        }
        fn clock(&self) -> SampleClock {
            SampleClock::HostMonotonic
        }
        fn read(&mut self, _: Duration, out: &mut Vec<DeviceSample>) -> crate::Result<ReadStatus> {
            let samples = self.left.len();
            out.append(&mut self.left);
            Ok(ReadStatus {
                samples,
                dropped: 0,
                gaps: 0,
            })
        }
    }

    #[test]
    fn means_skip_missing_values() {
        let s = |v: Vec<f64>| DeviceSample {
            start_ns: 0,
            end_ns: 1,
            values: v,
        };
        let m = mean_values(
            &[s(vec![1.0, f64::NAN]), s(vec![3.0, f64::NAN]), s(vec![5.0])],
            2,
        );
        assert_eq!(m[0], 3.0);
        assert!(m[1].is_nan());
        assert!(mean_values(&[], 1)[0].is_nan());
        let a = host_monotonic_ns();
        assert!(a > 0 && host_monotonic_ns() >= a);
    }

    #[test]
    fn a_sampler_reads_through_the_trait_object() {
        let mut sampler: Box<dyn DeviceCounters> = Box::new(Fixed {
            device: CounterDevice {
                index: 0,
                name: "test".into(),
            },
            counters: vec![CounterInfo {
                name: "busy".into(),
                unit: "%".into(),
            }],
            left: vec![DeviceSample {
                start_ns: 10,
                end_ns: 30,
                values: vec![50.0],
            }],
        });
        let mut out = Vec::new();
        let status = sampler.read(Duration::ZERO, &mut out).unwrap();
        assert_eq!(status.samples, 1);
        assert_eq!(out[0].duration(), Duration::from_nanos(20));
        assert_eq!(sampler.counters()[0].name, "busy");
        let again = sampler.read(Duration::ZERO, &mut out).unwrap();
        assert_eq!(again.samples, 0);
        assert_eq!(out.len(), 1);
    }
}
