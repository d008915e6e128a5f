//! The live per-GPU view behind `gpu-tools top`: SM active, tensor-pipe active, DRAM read and write bandwidth and
//! achieved occupancy of each chosen GPU, from device-wide PM sampling, averaged over each refresh. It sees every
//! process on the GPU, so it works while other programs use it (and, like every PM client, fails with
//! [`ProfilingError::CountersBusy`](super::ProfilingError::CountersBusy) while another tool holds the counters).
//!
//! ```no_run
//! use std::time::Duration;
//! use gpu_tools::cupti::top::{Top, TopRow};
//!
//! fn main() -> gpu_tools::Result<()> {
//!     let mut top = Top::start(&[0], Duration::from_millis(10))?;
//!     println!("{}", TopRow::text_header());
//!     for _ in 0..5 {
//!         for row in top.rows(Duration::from_secs(1))? {
//!             println!("{}", row.to_text());
//!         }
//!     }
//!     top.stop()?;
//!     Ok(())
//! }
//! ```

use std::time::{Duration, Instant};

use super::pm_sampling::{Interval, PmReport, PmSampler};
use crate::counters::{DeviceCounters, DeviceSample, host_monotonic_ns, mean_values};
use crate::profile::{json_num, json_str};

/// One column of the view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopMetric {
    /// Its key in JSON lines.
    pub key: &'static str,
    /// Its column header.
    pub header: &'static str,
    /// The PM-sampling metric behind it.
    pub metric: &'static str,
}

/// The view's columns (all single-pass PM-sampling metrics on Hopper; GH100 builds them into one configuration).
pub const TOP_METRICS: [TopMetric; 5] = [
    TopMetric {
        key: "sm_active_pct",
        header: "SM%",
        metric: "sm__cycles_active.avg.pct_of_peak_sustained_elapsed",
    },
    TopMetric {
        key: "tensor_active_pct",
        header: "TENSOR%",
        metric: "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
    },
    TopMetric {
        key: "dram_read_bytes_per_s",
        header: "DRAM-RD",
        metric: "dram__bytes_read.sum.per_second",
    },
    TopMetric {
        key: "dram_write_bytes_per_s",
        header: "DRAM-WR",
        metric: "dram__bytes_write.sum.per_second",
    },
    TopMetric {
        key: "achieved_occupancy_pct",
        header: "OCCUP%",
        metric: "sm__warps_active.avg.pct_of_peak_sustained_active",
    },
];

/// One GPU over one refresh.
#[derive(Debug, Clone, PartialEq)]
pub struct TopRow {
    /// Host `CLOCK_MONOTONIC` at the end of the refresh, ns.
    pub host_ns: u64,
    /// End of the last sample, on the GPU's clock (0 without samples).
    pub gpu_end_ns: u64,
    /// CUDA device ordinal.
    pub device: u32,
    /// Its name.
    pub name: String,
    /// Samples averaged.
    pub samples: usize,
    /// Samples lost since the previous refresh.
    pub dropped: u64,
    /// One mean per [`TOP_METRICS`] column (`NaN` without samples).
    pub values: Vec<f64>,
}

impl TopRow {
    /// The text table's header.
    pub fn text_header() -> String {
        let mut h = format!("{:>3} {:>7}", "GPU", "SAMPLES");
        for m in TOP_METRICS {
            h.push_str(&format!(" {:>10}", m.header));
        }
        h.push_str("  NAME");
        h
    }

    /// The row as text (bandwidths in GB/s).
    pub fn to_text(&self) -> String {
        let mut t = format!("{:>3} {:>7}", self.device, self.samples);
        for (m, v) in TOP_METRICS.iter().zip(&self.values) {
            let cell = if v.is_nan() {
                "-".to_string()
            } else if m.key.ends_with("bytes_per_s") {
                format!("{:.1}G", v / 1e9)
            } else {
                format!("{v:.1}")
            };
            t.push_str(&format!(" {cell:>10}"));
        }
        if self.dropped > 0 {
            t.push_str(&format!("  {} (dropped {})", self.name, self.dropped));
        } else {
            t.push_str(&format!("  {}", self.name));
        }
        t
    }

    /// The row as one JSON line.
    pub fn to_json(&self) -> String {
        let mut j = format!(
            "{{\"host_ns\":{},\"gpu_end_ns\":{},\"device\":{},\"name\":{},\"samples\":{},\"dropped\":{}",
            self.host_ns,
            self.gpu_end_ns,
            self.device,
            json_str(&self.name),
            self.samples,
            self.dropped
        );
        for (m, v) in TOP_METRICS.iter().zip(&self.values) {
            j.push_str(&format!(",\"{}\":{}", m.key, json_num(*v)));
        }
        j.push('}');
        j
    }

    /// A row from the samples of one refresh.
    pub fn from_samples(device: u32, name: &str, samples: &[DeviceSample], dropped: u64) -> TopRow {
        TopRow {
            host_ns: host_monotonic_ns(),
            gpu_end_ns: samples.last().map_or(0, |s| s.end_ns),
            device,
            name: name.to_string(),
            samples: samples.len(),
            dropped,
            values: mean_values(samples, TOP_METRICS.len()),
        }
    }
}

/// A PM sampler per GPU with the view's metrics.
#[derive(Debug)]
pub struct Top {
    samplers: Vec<PmSampler>,
    next: Instant,
}

impl Top {
    /// Starts sampling `devices` every `sample` (time-based where the GPU has it, Ampere GA10x and later; else
    /// every `sample` nanoseconds' worth of SYS clock cycles at 1 GHz).
    pub fn start(devices: &[usize], sample: Duration) -> crate::Result<Top> {
        let driver = crate::cuda::Driver::load()?;
        let mut samplers = Vec::new();
        for &d in devices {
            let cc = driver
                .device_info(d)
                .map(|i| i.compute_capability)
                .unwrap_or((0, 0));
            let interval = if cc >= (8, 6) {
                Interval::Time(sample)
            } else {
                Interval::Clocks(u64::try_from(sample.as_nanos()).unwrap_or(u64::MAX).max(1))
            };
            samplers.push(
                PmSampler::builder(d)
                    .metrics(TOP_METRICS.iter().map(|m| m.metric))
                    .interval(interval)
                    .start()?,
            );
        }
        Ok(Top {
            samplers,
            next: Instant::now(),
        })
    }

    /// Waits for the end of the next refresh of length `every`, then averages each GPU's samples of it.
    pub fn rows(&mut self, every: Duration) -> crate::Result<Vec<TopRow>> {
        self.next += every;
        let now = Instant::now();
        if self.next > now {
            std::thread::sleep(self.next - now);
        } else {
            // Fell behind (a slow terminal): start the cadence again from now.
            self.next = now;
        }
        let mut rows = Vec::with_capacity(self.samplers.len());
        for s in &mut self.samplers {
            let mut samples = Vec::new();
            let status = s.read(Duration::ZERO, &mut samples)?;
            let device = s.device().clone();
            rows.push(TopRow::from_samples(
                device.index,
                &device.name,
                &samples,
                status.dropped,
            ));
        }
        Ok(rows)
    }

    /// Stops every sampler, releasing the counters.
    pub fn stop(self) -> crate::Result<Vec<PmReport>> {
        self.samplers.into_iter().map(PmSampler::stop).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_average_their_samples_and_print() {
        let s = |v: f64| DeviceSample {
            start_ns: 0,
            end_ns: 10,
            values: vec![v, 0.0, 2e9, 1e9, 50.0],
        };
        let row = TopRow::from_samples(0, "NVIDIA H100 80GB HBM3", &[s(90.0), s(100.0)], 0);
        assert_eq!(row.values[0], 95.0);
        let text = row.to_text();
        assert!(
            text.contains("95.0")
                && text.contains("2.0G")
                && text.ends_with("NVIDIA H100 80GB HBM3"),
            "{text}"
        );
        let json = row.to_json();
        assert!(
            json.contains("\"sm_active_pct\":95,")
                && json.contains("\"dram_read_bytes_per_s\":2000000000"),
            "{json}"
        );
        let empty = TopRow::from_samples(1, "x", &[], 3);
        assert!(empty.to_json().contains("\"sm_active_pct\":null"));
        assert!(empty.to_text().contains("(dropped 3)"));
        assert_eq!(
            TopRow::text_header().split_whitespace().count(),
            2 + TOP_METRICS.len() + 1
        );
    }
}
