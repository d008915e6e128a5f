//! The live per-GPU view behind `gpu-tools top` on NVIDIA GPUs: SM active, tensor-pipe active, DRAM read and write
//! bandwidth and achieved occupancy of each GPU, from device-wide PM sampling (one sampler per GPU), averaged over
//! each refresh. It sees every process on the GPU, so it works while other programs use it (and, like every PM
//! client, fails with [`ProfilingError::CountersBusy`] while another tool
//! holds the counters).
//!
//! The view itself is vendor-neutral, [`counters::top::Top`](crate::counters::top::Top) (re-exported here); this
//! module chooses the metrics and starts the samplers: [`TopBuilder`], or [`Top::start`].
//!
//! ```no_run
//! use std::time::Duration;
//! use gpu_tools::cupti::top::{Top, TopBuilder};
//!
//! fn main() -> gpu_tools::Result<()> {
//!     // Every GPU the driver reports; `.devices([0, 1])` names some.
//!     let mut top = TopBuilder::new().sample(Duration::from_millis(1)).start()?;
//!     println!("{}", top.text_header());
//!     for _ in 0..5 {
//!         for row in top.rows(Duration::from_secs(1)) {
//!             println!("{}", row.to_text(top.columns()));
//!         }
//!     }
//!     for (gpu, totals) in top.totals() {
//!         println!("{}: {} samples, {} lost, {} gaps", gpu.index, totals.samples, totals.lost, totals.gaps);
//!     }
//!     Ok(()) // dropping the view releases the counters
//! }
//! ```

use std::time::Duration;

use super::ProfilingError;
use super::pm_sampling::{Interval, PmSampler};
pub use crate::counters::top::{Top, TopColumn, TopGpu, TopRow, TopTotals};

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

impl TopMetric {
    /// The view's column of this metric.
    pub fn column(&self) -> TopColumn {
        TopColumn::new(self.key, self.header, self.metric)
    }
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

/// Hidden columns an exporter adds for DCGM's definitions ([`TopBuilder::exporter_metrics`]): DRAM active cycles
/// (`DCGM_FI_PROF_DRAM_ACTIVE`) and resident warps per elapsed cycle (`DCGM_FI_PROF_SM_OCCUPANCY`; the table's
/// occupancy is per active cycle, as Nsight Compute's achieved occupancy). With [`TOP_METRICS`] they still build
/// one pass on GA10x, GH100, AD10x and GB100 (checked against CUPTI 13.0's catalogue).
pub const EXPORT_METRICS: [TopMetric; 2] = [
    TopMetric {
        key: "dram_active_pct",
        header: "DRAM%",
        metric: "dram__cycles_active.avg.pct_of_peak_sustained_elapsed",
    },
    TopMetric {
        key: "sm_occupancy_pct",
        header: "SMOCC%",
        metric: "sm__warps_active.avg.pct_of_peak_sustained_elapsed",
    },
];

/// Settings of an NVIDIA [`Top`]: which GPUs (every one the driver reports, unless named), which metrics, how
/// often the hardware samples.
#[derive(Debug, Clone)]
pub struct TopBuilder {
    devices: Option<Vec<usize>>,
    sample: Duration,
    metrics: Vec<String>,
    exporter_metrics: bool,
}

impl Default for TopBuilder {
    fn default() -> Self {
        TopBuilder::new()
    }
}

impl TopBuilder {
    /// Every GPU, [`TOP_METRICS`], a sample every millisecond.
    pub fn new() -> Self {
        TopBuilder {
            devices: None,
            sample: Duration::from_millis(1),
            metrics: Vec::new(),
            exporter_metrics: false,
        }
    }

    /// Only these CUDA devices. Each must start, or [`start`](Self::start) fails; without this, every device the
    /// driver reports is tried, and one that cannot be sampled is skipped ([`Top::skipped`]).
    pub fn devices(mut self, devices: impl IntoIterator<Item = usize>) -> Self {
        self.devices = Some(devices.into_iter().collect());
        self
    }

    /// The hardware's sampling period: time-based where the GPU has it (Ampere GA10x and later), else this many
    /// nanoseconds' worth of SYS clock cycles at 1 GHz.
    pub fn sample(mut self, every: Duration) -> Self {
        self.sample = every;
        self
    }

    /// Full PM-sampling metric names to show instead of [`TOP_METRICS`] (empty: the default columns).
    pub fn metrics<I, S>(mut self, metrics: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.metrics = metrics
            .into_iter()
            .map(|m| m.as_ref().to_string())
            .collect();
        self
    }

    /// Also samples [`EXPORT_METRICS`], as hidden columns (with the default columns only).
    pub fn exporter_metrics(mut self, on: bool) -> Self {
        self.exporter_metrics = on;
        self
    }

    /// The columns the view will have.
    pub fn columns(&self) -> Vec<TopColumn> {
        if !self.metrics.is_empty() {
            return self
                .metrics
                .iter()
                .map(|m| TopColumn::for_metric(m))
                .collect();
        }
        let mut columns: Vec<TopColumn> = TOP_METRICS.iter().map(TopMetric::column).collect();
        if self.exporter_metrics {
            columns.extend(EXPORT_METRICS.iter().map(|m| m.column().hidden()));
        }
        columns
    }

    /// Starts one PM sampler per GPU.
    pub fn start(&self) -> crate::Result<Top<'static>> {
        let driver = crate::cuda::Driver::load()?;
        let named = self.devices.is_some();
        let devices = match &self.devices {
            Some(d) => d.clone(),
            None => (0..driver.device_count()?).collect(),
        };
        if devices.is_empty() {
            return Err(ProfilingError::NoSuchDevice { index: 0, count: 0 }.into());
        }
        let columns = self.columns();
        let metrics: Vec<&str> = columns.iter().map(|c| c.counter.as_str()).collect();
        let mut top = Top::new(columns.clone());
        let mut first_error = None;
        for d in devices {
            let cc = driver
                .device_info(d)
                .map(|i| i.compute_capability)
                .unwrap_or((0, 0));
            let interval = if cc >= (8, 6) {
                Interval::Time(self.sample)
            } else {
                Interval::Clocks(
                    u64::try_from(self.sample.as_nanos())
                        .unwrap_or(u64::MAX)
                        .max(1),
                )
            };
            match PmSampler::builder(d)
                .metrics(&metrics)
                .interval(interval)
                .start()
            {
                Ok(sampler) => {
                    let uuid = driver.device_uuid(d).ok().map(|u| u.to_string());
                    top.watch(Box::new(sampler), uuid);
                }
                Err(e) if !named => {
                    log::warn!("device {d} is left out: {e}");
                    top.skip(d as u32, e.to_string());
                    first_error.get_or_insert(e);
                }
                Err(e) => return Err(e),
            }
        }
        match first_error {
            Some(e) if top.is_empty() => Err(e),
            _ => Ok(top),
        }
    }
}

impl Top<'static> {
    /// Starts sampling `devices` (every device the driver reports where empty) every `sample`, with
    /// [`TOP_METRICS`]: [`TopBuilder`] with these settings.
    pub fn start(devices: &[usize], sample: Duration) -> crate::Result<Top<'static>> {
        let mut b = TopBuilder::new().sample(sample);
        if !devices.is_empty() {
            b = b.devices(devices.iter().copied());
        }
        b.start()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builder_chooses_the_columns() {
        let keys = |b: &TopBuilder| -> Vec<(String, bool)> {
            b.columns().into_iter().map(|c| (c.key, c.hidden)).collect()
        };
        let plain = TopBuilder::new();
        assert_eq!(keys(&plain).len(), 5);
        assert!(plain.columns()[2].bandwidth && !plain.columns()[0].bandwidth);
        let exporter = TopBuilder::new().exporter_metrics(true);
        let k = keys(&exporter);
        assert_eq!(k.len(), 7);
        assert_eq!(k[5], ("dram_active_pct".to_string(), true));
        let user = TopBuilder::new()
            .metrics(["dram__bytes.sum.per_second"])
            .exporter_metrics(true);
        assert_eq!(
            keys(&user),
            vec![("dram__bytes.sum.per_second".to_string(), false)]
        );
        assert_eq!(
            TopRow::text_header(&exporter.columns())
                .split_whitespace()
                .count(),
            2 + TOP_METRICS.len() + 1
        );
    }
}
