//! `cuda_gpu_kern_counters_sum`: device counters per kernel name, from the counter streams of the trace and the
//! kernels of its processes on one timeline ([`counters::attribution`](crate::counters::attribution)).

use crate::counters::{
    Attribution, CounterAttribution, DRAM_READ_PER_SECOND, DRAM_WRITE_PER_SECOND, DeviceCounters,
    OCCUPANCY, SM_ACTIVE, TENSOR_ACTIVE,
};
use crate::{CounterGap, CounterSample};

use super::{Analysis, Cell, Table, count};

/// The report's name.
pub(super) const REPORT: &str = "cuda_gpu_kern_counters_sum";

/// `ns` in the unit that suits it.
fn duration(ns: u64) -> String {
    let t = ns as f64;
    if ns < 1_000_000 {
        format!("{:.1} µs", t / 1e3)
    } else if ns < 1_000_000_000 {
        format!("{:.3} ms", t / 1e6)
    } else {
        format!("{:.3} s", t / 1e9)
    }
}

fn percent(share: f64) -> Cell {
    Cell::Float(100.0 * share)
}

fn device_name(d: &DeviceCounters) -> String {
    if d.device.host.is_empty() {
        format!("GPU {}", d.device.device)
    } else {
        format!("GPU {} on {}", d.device.device, d.device.host)
    }
}

/// The line of a device that was sampled.
fn device_line(d: &DeviceCounters) -> String {
    let mut line = format!(
        "{}: {}, {} each (median); {} lost, {}",
        device_name(d),
        count(d.samples, "sample", "samples"),
        duration(d.interval),
        d.lost,
        count(d.gaps, "gap", "gaps"),
    );
    if d.gaps > 0 {
        line.push_str(&format!(" ({} without samples)", duration(d.gap_time)));
    }
    let busy = if d.sampled_time == 0 {
        0.0
    } else {
        100.0 * d.busy_time as f64 / d.sampled_time as f64
    };
    line.push_str(&format!("; kernels ran in {busy:.1}% of the sampled time"));
    line
}

impl Analysis {
    /// Whether the trace holds counter samples.
    pub(super) fn has_counter_samples(&self) -> bool {
        self.streams.values().any(|s| !s.samples.is_empty())
    }

    /// The kernels and counter records read, each stream on the common timeline ([`Alignment`](super::Alignment)),
    /// devices matched by the host their stream names.
    pub fn counter_input(&self) -> Attribution {
        let mut a = Attribution::new();
        for (key, s) in &self.streams {
            let host = s.info.as_ref().map_or("", |i| i.host.as_str());
            let at = |t: u64| self.alignment.apply(key.0, key.1, t);
            for k in &s.kernels {
                a.add_kernel(host, k.device, &k.name, at(k.start), at(k.end));
            }
            for c in &s.samples {
                a.add_sample(
                    host,
                    &CounterSample {
                        start: at(c.start),
                        end: at(c.end),
                        device: c.device,
                        values: c.values.clone(),
                    },
                );
            }
            for g in &s.gaps {
                a.add_gap(
                    host,
                    &CounterGap {
                        start: at(g.start),
                        end: at(g.end),
                        ..*g
                    },
                );
            }
        }
        a
    }

    /// The counters per kernel name of what was read (see [`counters::attribution`](crate::counters::attribution)).
    pub fn counter_attribution(&self) -> CounterAttribution {
        self.counter_input().attribute()
    }

    /// `cuda_gpu_kern_counters_sum`: device counters per kernel name, with a line per sampled device.
    pub fn kernel_counters_sum(&self) -> Table {
        let mut t = Table::new(
            REPORT,
            "CUDA GPU Kernel Counters Summary",
            vec![
                "GPU Time (ns)",
                "Launches",
                "Covered (%)",
                "Samples",
                "SM Active (%)",
                "Tensor Active (%)",
                "Occupancy (%)",
                "DRAM Read (B)",
                "DRAM Write (B)",
                "Shared (%)",
                "Overlap (%)",
                "Attribution",
                "Name",
            ],
        );
        if !self.has_counter_samples() {
            t.notes.push(
                "the trace holds no counter samples (record them with `gpu-tools trace --counters`)"
                    .into(),
            );
            return t;
        }
        let result = self.counter_attribution();
        let level = |k: &crate::counters::KernelCounters, m: &str| {
            k.value(m).map_or(Cell::Missing, Cell::Float)
        };
        // A statistical row shows the fitted share of elapsed time where there is one.
        let share = |k: &crate::counters::KernelCounters, m: &str| {
            let fitted = if k.statistical() { k.fitted(m) } else { None };
            fitted
                .or_else(|| k.value(m))
                .map_or(Cell::Missing, Cell::Float)
        };
        let bytes = |k: &crate::counters::KernelCounters, m: &str| {
            k.value(m)
                .map_or(Cell::Missing, |v| Cell::Int(v.max(0.0).round() as u64))
        };
        let (mut statistical, mut overlapped, mut fitted) = (false, false, false);
        for k in &result.kernels {
            let attribution = if k.samples == 0 {
                "none"
            } else if k.statistical() && k.fitted(SM_ACTIVE).is_some() {
                fitted = true;
                "fitted"
            } else if k.statistical() {
                statistical = true;
                "statistical"
            } else {
                "direct"
            };
            overlapped |= k.overlapped_time > 0;
            t.rows.push(vec![
                Cell::Int(k.gpu_time),
                Cell::Int(k.launches),
                percent(k.covered()),
                Cell::Int(k.samples),
                share(k, SM_ACTIVE),
                share(k, TENSOR_ACTIVE),
                level(k, OCCUPANCY),
                bytes(k, DRAM_READ_PER_SECOND),
                bytes(k, DRAM_WRITE_PER_SECOND),
                if k.samples == 0 {
                    Cell::Missing
                } else {
                    percent(k.shared())
                },
                percent(k.overlap()),
                Cell::Text(attribution.to_string()),
                Cell::Text(k.name.to_string()),
            ]);
        }
        t.notes.push(
            "values are over the covered part of each name's GPU time; DRAM bytes are what the samples saw of it, \
             not extrapolated to the rest; SM and tensor active count the part of each sample in which kernels ran \
             (idle time does nothing)"
                .into(),
        );
        if fitted {
            t.notes.push(
                "fitted: the row's samples went mostly to other kernels or idle time; its SM and tensor active are \
                 fitted over every sample (each sample read as the sum of what each kernel name does while it runs, \
                 by the part of the window it ran in); its other values are shared by overlap"
                    .into(),
            );
        }
        if statistical {
            t.notes.push(
                "statistical: most of the time of the row's samples went to other kernels or idle time; each \
                 sample's values are shared among the kernels in its window by overlap, over many launches"
                    .into(),
            );
        }
        if overlapped {
            t.notes.push(
                "Overlap: the share of the row's time in which another kernel ran on its device; device-wide \
                 values cannot tell them apart (levels go to each, bytes are split evenly)"
                    .into(),
            );
        }
        for d in &result.devices {
            if d.samples > 0 || d.gaps > 0 {
                t.notes.push(device_line(d));
            } else if d.launches > 0 {
                t.notes.push(format!(
                    "{}: {}, no counter samples",
                    device_name(d),
                    count(d.launches, "kernel launch", "kernel launches")
                ));
            }
        }
        t
    }
}
