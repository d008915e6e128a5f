//! A live per-GPU view of device counters, whichever vendor samples them: each refresh, the mean of every column
//! over the samples each GPU delivered in it, with the samples counted, lost and missing. `gpu-tools top` (its
//! table, its JSON lines and its Prometheus exporter) is built on it; [`cupti::top`](crate::cupti::top) starts one
//! over NVIDIA PM sampling, and any [`DeviceCounters`] can be watched.
//!
//! A GPU whose read fails does not end the view: the failure lands in that GPU's row ([`TopRow::error`]) and its
//! count ([`TopTotals::read_errors`]); the caller decides whether to go on. The view formats rows as text and
//! JSON lines; it prints nothing.
//!
//! ```
//! use std::time::Duration;
//! use gpu_tools::counters::top::{Top, TopColumn};
//! use gpu_tools::counters::{CounterDevice, CounterInfo, DeviceCounters, DeviceSample, ReadStatus, SampleClock};
//!
//! /// A sampler that is only data.
//! struct Busy(CounterDevice, Vec<CounterInfo>);
//! impl DeviceCounters for Busy {
//!     fn device(&self) -> &CounterDevice { &self.0 }
//!     fn counters(&self) -> &[CounterInfo] { &self.1 }
//!     fn clock(&self) -> SampleClock { SampleClock::HostMonotonic }
//!     fn read(&mut self, _: Duration, out: &mut Vec<DeviceSample>) -> gpu_tools::Result<ReadStatus> {
//!         out.push(DeviceSample { start_ns: 0, end_ns: 1, values: vec![42.0] });
//!         Ok(ReadStatus { samples: 1, dropped: 0, gaps: 0 })
//!     }
//! }
//!
//! let mut top = Top::new(vec![TopColumn::new("busy_pct", "BUSY%", "busy")]);
//! let device = CounterDevice { index: 0, name: "a GPU".into() };
//! top.watch(Box::new(Busy(device, vec![CounterInfo { name: "busy".into(), unit: "%".into() }])), None);
//! println!("{}", top.text_header());
//! for row in top.rows(Duration::from_millis(1)) {
//!     println!("{}", row.to_text(top.columns()));
//! }
//! assert_eq!(top.totals()[0].1.samples, 1);
//! ```

use std::time::{Duration, Instant};

use super::{DeviceCounters, DeviceSample, host_monotonic_ns, mean_values};
use crate::profile::{json_num, json_str};

/// One column of the view: a counter its samplers read (in column order), and how it is shown.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct TopColumn {
    /// Its key in JSON lines (`sm_active_pct`, or the counter's own name).
    pub key: String,
    /// Its header in the text table.
    pub header: String,
    /// The vendor's metric or counter behind it.
    pub counter: String,
    /// A rate of bytes, shown in GB/s in the table.
    pub bandwidth: bool,
    /// Sampled for exporters, but left out of the table and the JSON lines.
    pub hidden: bool,
}

impl TopColumn {
    /// A shown column.
    pub fn new(
        key: impl Into<String>,
        header: impl Into<String>,
        counter: impl Into<String>,
    ) -> Self {
        let counter = counter.into();
        TopColumn {
            key: key.into(),
            header: header.into(),
            bandwidth: is_bandwidth(&counter),
            counter,
            hidden: false,
        }
    }

    /// A column for a metric named by the user: its full name as key, the base name as header, cut to ten
    /// characters with an ellipsis where longer (`dram__byt…` for `dram__bytes_read.sum.per_second`).
    pub fn for_metric(metric: &str) -> Self {
        let base = metric.split('.').next().unwrap_or(metric);
        let header: String = if base.chars().count() <= 10 {
            base.to_string()
        } else {
            base.chars().take(9).chain(std::iter::once('…')).collect()
        };
        TopColumn::new(metric, header, metric)
    }

    /// A column for a counter named by the user, its name as key and header (AMD counters).
    pub fn for_counter(counter: &str) -> Self {
        TopColumn {
            bandwidth: false,
            ..TopColumn::new(counter, counter, counter)
        }
    }

    /// The same column, hidden.
    pub fn hidden(mut self) -> Self {
        self.hidden = true;
        self
    }
}

/// Whether a metric is a rate of bytes (`dram__bytes_read.sum.per_second`).
fn is_bandwidth(metric: &str) -> bool {
    metric.ends_with(".per_second") && metric.contains("bytes")
}

/// A GPU the view watches.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct TopGpu {
    /// The vendor's index (CUDA device ordinal, AMD GPU agent index).
    pub index: u32,
    /// Its name.
    pub name: String,
    /// Its UUID where the vendor gives one (`GPU-...` on NVIDIA).
    pub uuid: Option<String>,
}

/// Counts of one GPU since the view started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct TopTotals {
    /// Samples read.
    pub samples: u64,
    /// Samples lost, as the sampler knows them ([`ReadStatus::dropped`](super::ReadStatus::dropped)).
    pub lost: u64,
    /// Sampling periods without a sample and no loss reported ([`ReadStatus::gaps`](super::ReadStatus::gaps)).
    pub gaps: u64,
    /// Reads that failed.
    pub read_errors: u64,
    /// Refreshes that read at least one sample.
    pub refreshes_with_samples: u64,
}

/// One GPU over one refresh.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct TopRow {
    /// Host `CLOCK_MONOTONIC` at the end of the refresh, ns.
    pub host_ns: u64,
    /// End of the last sample, on the sampler's clock (0 without samples).
    pub gpu_end_ns: u64,
    /// The vendor's index of the GPU.
    pub device: u32,
    /// Its name.
    pub name: String,
    /// Samples averaged.
    pub samples: usize,
    /// Samples lost since the previous refresh.
    pub dropped: u64,
    /// Sampling periods without a sample, and no loss reported, since the previous refresh.
    pub gaps: u64,
    /// One mean per column, hidden ones included (`NaN` without samples).
    pub values: Vec<f64>,
    /// Why the GPU could not be read this refresh.
    pub error: Option<String>,
}

impl TopRow {
    /// A row from the samples of one refresh.
    pub fn from_samples(
        device: u32,
        name: &str,
        samples: &[DeviceSample],
        dropped: u64,
        gaps: u64,
        columns: usize,
    ) -> TopRow {
        TopRow {
            host_ns: host_monotonic_ns(),
            gpu_end_ns: samples.last().map_or(0, |s| s.end_ns),
            device,
            name: name.to_string(),
            samples: samples.len(),
            dropped,
            gaps,
            values: mean_values(samples, columns),
            error: None,
        }
    }

    /// The text table's header for `columns`.
    pub fn text_header(columns: &[TopColumn]) -> String {
        let mut h = format!("{:>3} {:>7}", "GPU", "SAMPLES");
        for c in columns.iter().filter(|c| !c.hidden) {
            h.push_str(&format!(" {:>10}", c.header));
        }
        h.push_str("  NAME");
        h
    }

    /// The row as text under [`text_header`](Self::text_header) (bandwidths in GB/s; a loss or an error is
    /// noted after the name).
    pub fn to_text(&self, columns: &[TopColumn]) -> String {
        let mut t = format!("{:>3} {:>7}", self.device, self.samples);
        for (c, v) in columns.iter().zip(&self.values).filter(|(c, _)| !c.hidden) {
            let cell = if v.is_nan() {
                "-".to_string()
            } else if c.bandwidth {
                format!("{:.1}G", v / 1e9)
            } else {
                format!("{v:.1}")
            };
            t.push_str(&format!(" {cell:>10}"));
        }
        t.push_str("  ");
        t.push_str(&self.name);
        if self.dropped > 0 {
            t.push_str(&format!(" (dropped {})", self.dropped));
        }
        if let Some(e) = &self.error {
            t.push_str(&format!(" (error: {e})"));
        }
        t
    }

    /// The row as one JSON line: `host_ns`, `gpu_end_ns`, `device`, `name`, `samples`, `dropped`, `gaps`, one key
    /// per shown column (`null` without samples), and `error` where the read failed.
    pub fn to_json(&self, columns: &[TopColumn]) -> String {
        let mut j = format!(
            "{{\"host_ns\":{},\"gpu_end_ns\":{},\"device\":{},\"name\":{},\"samples\":{},\"dropped\":{},\"gaps\":{}",
            self.host_ns,
            self.gpu_end_ns,
            self.device,
            json_str(&self.name),
            self.samples,
            self.dropped,
            self.gaps
        );
        for (c, v) in columns.iter().zip(&self.values).filter(|(c, _)| !c.hidden) {
            j.push_str(&format!(",{}:{}", json_str(&c.key), json_num(*v)));
        }
        if let Some(e) = &self.error {
            j.push_str(&format!(",\"error\":{}", json_str(e)));
        }
        j.push('}');
        j
    }
}

/// A watched GPU: its sampler and its counts.
struct Watched<'a> {
    source: Box<dyn DeviceCounters + 'a>,
    gpu: TopGpu,
    totals: TopTotals,
}

/// The view: samplers of the GPUs watched, each reading the same columns, refreshed at a fixed cadence.
///
/// The lifetime is that of what the samplers borrow (an initialised vendor library); NVIDIA's are `'static`.
/// Dropping the view stops the samplers and releases the counters.
pub struct Top<'a> {
    gpus: Vec<Watched<'a>>,
    columns: Vec<TopColumn>,
    skipped: Vec<(u32, String)>,
    next: Option<Instant>,
}

impl std::fmt::Debug for Top<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Top")
            .field(
                "gpus",
                &self.gpus.iter().map(|w| &w.gpu).collect::<Vec<_>>(),
            )
            .field("columns", &self.columns)
            .field("skipped", &self.skipped)
            .finish_non_exhaustive()
    }
}

impl<'a> Top<'a> {
    /// A view of `columns`, watching no GPU yet.
    pub fn new(columns: Vec<TopColumn>) -> Self {
        Top {
            gpus: Vec::new(),
            columns,
            skipped: Vec::new(),
            next: None,
        }
    }

    /// Watches a GPU through `source`, which samples the view's columns in their order; `uuid` labels it.
    pub fn watch(&mut self, source: Box<dyn DeviceCounters + 'a>, uuid: Option<String>) {
        let device = source.device();
        let gpu = TopGpu {
            index: device.index,
            name: device.name.clone(),
            uuid,
        };
        self.gpus.push(Watched {
            source,
            gpu,
            totals: TopTotals::default(),
        });
    }

    /// Notes a GPU that could not be watched, and why.
    pub fn skip(&mut self, index: u32, reason: impl Into<String>) {
        self.skipped.push((index, reason.into()));
    }

    /// The columns, hidden ones included.
    pub fn columns(&self) -> &[TopColumn] {
        &self.columns
    }

    /// The GPUs watched, in the order of the rows.
    pub fn gpus(&self) -> Vec<&TopGpu> {
        self.gpus.iter().map(|w| &w.gpu).collect()
    }

    /// The GPUs that could not be watched, and why.
    pub fn skipped(&self) -> &[(u32, String)] {
        &self.skipped
    }

    /// True when no GPU is watched.
    pub fn is_empty(&self) -> bool {
        self.gpus.is_empty()
    }

    /// Each GPU's counts so far, in the order of the rows.
    pub fn totals(&self) -> Vec<(TopGpu, TopTotals)> {
        self.gpus
            .iter()
            .map(|w| (w.gpu.clone(), w.totals))
            .collect()
    }

    /// The text table's header.
    pub fn text_header(&self) -> String {
        TopRow::text_header(&self.columns)
    }

    /// Sleeps until the end of the next refresh of length `every` (the first starts at the first call). A caller
    /// that fell behind (a slow terminal) starts the cadence again from now.
    pub fn wait(&mut self, every: Duration) {
        let now = Instant::now();
        let next = self.next.unwrap_or(now) + every;
        if next > now {
            std::thread::sleep(next - now);
            self.next = Some(next);
        } else {
            self.next = Some(now);
        }
    }

    /// Reads each GPU's samples of the refresh that just ended, without waiting: a row per GPU, in order.
    pub fn read(&mut self) -> Vec<TopRow> {
        let columns = self.columns.len();
        let mut rows = Vec::with_capacity(self.gpus.len());
        for w in &mut self.gpus {
            let mut samples = Vec::new();
            let row = match w.source.read(Duration::ZERO, &mut samples) {
                Ok(status) => {
                    w.totals.samples += samples.len() as u64;
                    w.totals.lost += status.dropped;
                    w.totals.gaps += status.gaps;
                    if !samples.is_empty() {
                        w.totals.refreshes_with_samples += 1;
                    }
                    TopRow::from_samples(
                        w.gpu.index,
                        &w.gpu.name,
                        &samples,
                        status.dropped,
                        status.gaps,
                        columns,
                    )
                }
                Err(e) => {
                    w.totals.read_errors += 1;
                    TopRow {
                        error: Some(e.to_string()),
                        ..TopRow::from_samples(w.gpu.index, &w.gpu.name, &[], 0, 0, columns)
                    }
                }
            };
            rows.push(row);
        }
        rows
    }

    /// [`wait`](Self::wait), then [`read`](Self::read).
    pub fn rows(&mut self, every: Duration) -> Vec<TopRow> {
        self.wait(every);
        self.read()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counters::{CounterDevice, CounterInfo, ReadStatus, SampleClock};

    /// One scripted read: the first counter's value of each sample, samples lost, gaps; or a failure naming a
    /// path.
    type Read = Result<(Vec<f64>, u64, u64), String>;

    /// A sampler that hands out scripted reads.
    struct Script {
        device: CounterDevice,
        counters: Vec<CounterInfo>,
        reads: Vec<Read>,
    }

    impl DeviceCounters for Script {
        fn device(&self) -> &CounterDevice {
            &self.device
        }
        fn counters(&self) -> &[CounterInfo] {
            &self.counters
        }
        fn clock(&self) -> SampleClock {
            SampleClock::GpuGlobalTimer
        }
        fn read(&mut self, _: Duration, out: &mut Vec<DeviceSample>) -> crate::Result<ReadStatus> {
            if self.reads.is_empty() {
                return Ok(ReadStatus::default());
            }
            match self.reads.remove(0) {
                Ok((values, dropped, gaps)) => {
                    for (i, v) in values.iter().enumerate() {
                        out.push(DeviceSample {
                            start_ns: i as u64 * 10,
                            end_ns: i as u64 * 10 + 10,
                            values: vec![*v, 2e9, 50.0],
                        });
                    }
                    Ok(ReadStatus {
                        samples: values.len(),
                        dropped,
                        gaps,
                    })
                }
                Err(e) => Err(crate::Error::from(crate::LoadError::AlreadyLoaded {
                    library: "a test library",
                    loaded: std::path::PathBuf::from(e),
                    requested: std::path::PathBuf::from("/elsewhere"),
                })),
            }
        }
    }

    fn columns() -> Vec<TopColumn> {
        vec![
            TopColumn::new("sm_active_pct", "SM%", "sm__cycles_active.avg.pct"),
            TopColumn::new(
                "dram_read_bytes_per_s",
                "DRAM-RD",
                "dram__bytes_read.sum.per_second",
            ),
            TopColumn::new("occupancy_pct", "OCC%", "sm__warps_active.avg.pct").hidden(),
        ]
    }

    fn script(index: u32, reads: Vec<Read>) -> Box<Script> {
        Box::new(Script {
            device: CounterDevice {
                index,
                name: format!("GPU {index}"),
            },
            counters: Vec::new(),
            reads,
        })
    }

    #[test]
    fn rows_average_their_samples_and_print() {
        let s = |v: f64| DeviceSample {
            start_ns: 0,
            end_ns: 10,
            values: vec![v, 2e9, 50.0],
        };
        let c = columns();
        let row = TopRow::from_samples(0, "NVIDIA H100 80GB HBM3", &[s(90.0), s(100.0)], 0, 0, 3);
        assert_eq!(row.values[0], 95.0);
        let text = row.to_text(&c);
        assert!(
            text.contains("95.0")
                && text.contains("2.0G")
                && text.ends_with("NVIDIA H100 80GB HBM3"),
            "{text}"
        );
        assert!(
            !text.contains("50.0"),
            "hidden columns are not shown: {text}"
        );
        let json = row.to_json(&c);
        assert!(
            json.contains("\"sm_active_pct\":95,")
                && json.contains("\"dram_read_bytes_per_s\":2000000000}")
                && json.contains("\"dropped\":0,\"gaps\":0,"),
            "{json}"
        );
        let empty = TopRow::from_samples(1, "x", &[], 3, 7, 3);
        assert!(empty.to_json(&c).contains("\"sm_active_pct\":null"));
        assert!(empty.to_json(&c).contains("\"gaps\":7"));
        assert!(empty.to_text(&c).contains("(dropped 3)"));
        assert_eq!(
            TopRow::text_header(&c).split_whitespace().count(),
            2 + 2 + 1
        );
    }

    #[test]
    fn a_gpu_that_fails_is_counted_and_the_others_go_on() {
        let mut top = Top::new(columns());
        top.watch(
            script(
                0,
                vec![Ok((vec![10.0, 20.0], 0, 3)), Ok((vec![30.0], 1, 0))],
            ),
            Some("GPU-0".into()),
        );
        top.watch(
            script(1, vec![Ok((vec![50.0], 0, 0)), Err("/gone".into())]),
            None,
        );
        top.skip(2, "counters busy");
        assert_eq!(top.gpus().len(), 2);
        let first = top.rows(Duration::from_millis(1));
        assert_eq!((first[0].values[0], first[0].gaps), (15.0, 3));
        assert_eq!(first[1].values[0], 50.0);
        let second = top.rows(Duration::from_millis(1));
        assert_eq!((second[0].samples, second[0].dropped), (1, 1));
        let failed = &second[1];
        assert!(
            failed.error.as_deref().unwrap().contains("/gone"),
            "{failed:?}"
        );
        assert!(failed.values[0].is_nan());
        assert!(failed.to_json(top.columns()).contains("\"error\":"));
        assert!(failed.to_text(top.columns()).contains("(error: "));
        let third = top.read();
        assert_eq!((third[0].samples, third[1].samples), (0, 0));
        let totals = top.totals();
        assert_eq!(
            totals[0].1,
            TopTotals {
                samples: 3,
                lost: 1,
                gaps: 3,
                read_errors: 0,
                refreshes_with_samples: 2
            }
        );
        assert_eq!(totals[0].0.uuid.as_deref(), Some("GPU-0"));
        assert_eq!((totals[1].1.samples, totals[1].1.read_errors), (1, 1));
        assert_eq!(top.skipped(), &[(2, "counters busy".to_string())]);
    }

    #[test]
    fn user_columns_take_their_names() {
        let c = TopColumn::for_metric("dram__bytes_read.sum.per_second");
        assert_eq!((c.header.as_str(), c.bandwidth), ("dram__byt…", true));
        assert_eq!(TopColumn::for_metric("dram__read.sum").header, "dram__read");
        assert_eq!(TopColumn::for_metric("gpu__time").header, "gpu__time");
        let a = TopColumn::for_counter("GRBM_GUI_ACTIVE");
        assert_eq!(
            (a.key.as_str(), a.header.as_str(), a.bandwidth),
            ("GRBM_GUI_ACTIVE", "GRBM_GUI_ACTIVE", false)
        );
    }

    #[test]
    fn the_cadence_waits_whole_refreshes() {
        let mut top = Top::new(Vec::new());
        let t = Instant::now();
        top.wait(Duration::from_millis(20));
        top.wait(Duration::from_millis(20));
        assert!(t.elapsed() >= Duration::from_millis(40));
    }
}
