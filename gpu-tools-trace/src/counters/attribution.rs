//! Device counters attributed to the kernels that ran while they were sampled: per kernel name, how much of its
//! time samples covered, and for each sampled metric a value over that covered time.
//!
//! **Input.** Kernels (name, device, start, end) and counter samples and gaps ([`CounterSample`],
//! [`CounterGap`]), all on one timeline (a caller reading several hosts shifts each stream first, as
//! [`report::Alignment`](crate::report::Alignment) says). A device is a host and an ordinal ([`DeviceId`]): kernels
//! and samples meet where both name the same host and device. [`Analysis`](crate::report::Analysis) does all of
//! this for trace files ([`Analysis::counter_attribution`](crate::report::Analysis::counter_attribution)).
//!
//! **How.** Each device's time is cut into segments in which the same kernels run and the same sample covers the
//! device. In a segment of length `t` covered by sample `s` with `n` kernels running, each of them gets:
//! - for a level (percentages, averages: [`MetricKind::Level`]): the sample's value with weight `t`; a kernel's
//!   value is the time-weighted mean over its covered time, so a kernel that spans samples alone gets exactly
//!   what they say;
//! - for a share of elapsed time (`….pct_of_peak_sustained_elapsed`, [`MetricKind::Share`]: SM active, tensor
//!   active): as a level, of the sample's value divided by the share `b / w` of its window `w` in which kernels ran
//!   (`b`), at most 100. Such a counter does nothing while the device is idle, so a sample half idle reads half
//!   of what its busy half did; a kernel that spans whole samples is unchanged;
//! - for a rate (`….per_second`, [`MetricKind::Rate`]): the amount `value × t / n` (bytes per second into bytes);
//! - for an amount per interval (`….sum`, [`MetricKind::Amount`]): the part `t / n` of the interval's amount.
//!
//! A kernel shorter than a sample shares that sample with whatever else ran in its window, other kernels and idle
//! time: its level is the window's average (a share of elapsed time, of the window's busy part), and over many launches each sample counts in proportion to the time the
//! kernel had in it, as sampling profilers attribute (statistical attribution). [`KernelCounters::shared`] says
//! which part of the windows of the samples a row rests on went to other kernels or to idle time, and
//! [`KernelCounters::statistical`] marks the rows where that is most of it.
//!
//! **Fitted shares.** Sharing by overlap gives every kernel in a window the window's level, so kernels much
//! shorter than a sample all come out alike. For shares of elapsed time, [`MetricValue::fitted`] reads each sample
//! instead as the sum of what each kernel name does while it runs, weighted by the part of the window it ran in,
//! and fits those per-name values to every sample of the trace at once (non-negative least squares; names in at
//! least 30 samples). Names seen in windows of different mixes are told apart; a name that always runs beside the
//! same others cannot be told from them. On a PyTorch loop sampled every 1 ms (kernels of 2–30 µs) the fit gave an
//! implicit-GEMM convolution 88% SM active (the range profiler: 79.5%) and the optimizer's `multi_tensor_apply`
//! kernels 0.7–3% (profiler: about 1%), where sharing by overlap gave every name 6–8%; a layout transform came out
//! at 88% against the profiler's 34%: the fit is an estimate.
//!
//! **Not attributed.** Idle time (a sample's amount while no kernel ran goes to no kernel: the sum over kernels is
//! at most the sample's amount); time in [gaps](CounterGap) or between samples (uncovered: it lowers
//! [`KernelCounters::covered`]). Amounts are **not extrapolated** to a kernel's uncovered time: they are what the
//! samples saw of it. Dividing by [`covered`](KernelCounters::covered) estimates the whole, for those who accept
//! that the uncovered part was alike. Samples that overlap an earlier one of their device are cut to start where
//! it ends; non-finite values add nothing.
//!
//! **Limits.** Counters are device-wide: they also count the work of processes not traced, and copies and sets
//! (which are not kernels: their time here is idle time, but counts in a kernel's values where they ran
//! beside it). Concurrent kernels on one device cannot be told apart: each gets the device's level in full and an
//! even split of amounts, and [`KernelCounters::overlapped_time`] says how much of a row's time that concerns. The
//! result is as good as the timestamps: sample and kernel times on one clock, and across hosts the alignment's
//! error bound.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::fit::Fit;
use super::metric::MetricKind;
use super::sweep::{self, Segment};
use crate::{CounterGap, CounterSample, KernelRecord};

/// A device of a host.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct DeviceId {
    /// The host, as its streams' [`ProcessInfo`](crate::ProcessInfo) names it (empty where a stream names none).
    pub host: Arc<str>,
    /// Device ordinal, as the kernel records number it.
    pub device: u32,
}

/// A sample with its metrics interned.
#[derive(Debug)]
struct Sample {
    start: u64,
    end: u64,
    values: Vec<(usize, f64)>,
}

#[derive(Debug, Default)]
struct DeviceInput {
    /// `[start, end)` of each kernel.
    kernels: Vec<(u64, u64)>,
    /// The name (index into `Attribution::names`) of each kernel.
    names: Vec<usize>,
    samples: Vec<Sample>,
    gaps: Vec<CounterGap>,
}

/// Kernels and counter records of any number of devices, on one timeline; [`attribute`](Self::attribute) gives the
/// counters per kernel name (the module documentation says how).
#[derive(Debug, Default)]
pub struct Attribution {
    devices: BTreeMap<DeviceId, DeviceInput>,
    hosts: HashMap<String, Arc<str>>,
    names: Vec<Arc<str>>,
    name_index: HashMap<Arc<str>, usize>,
    metrics: Vec<Arc<str>>,
    metric_index: HashMap<Arc<str>, usize>,
}

/// The value of one metric for one kernel name.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct MetricValue {
    /// The metric, as sampled (`dram__bytes_read.sum.per_second`).
    pub metric: Arc<str>,
    /// How it was combined: for a level the value is the time-weighted mean; for a rate or an amount, the amount
    /// over the covered time (bytes for `….bytes….per_second`).
    pub kind: MetricKind,
    /// The value.
    pub value: f64,
    /// For a share of elapsed time, its value fitted over every sample of the kernel's devices (see the module
    /// documentation); `None` for other kinds, and for names in fewer than 30 samples.
    pub fitted: Option<f64>,
    /// The kernel time the value rests on, ns (covered time in samples that hold the metric).
    pub time: u64,
}

/// Counters of one kernel name, over every device and launch.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct KernelCounters {
    /// The kernel's name as recorded.
    pub name: Arc<str>,
    /// Launches.
    pub launches: u64,
    /// Total duration of its launches, ns.
    pub gpu_time: u64,
    /// The part of `gpu_time` that samples covered, ns.
    pub covered_time: u64,
    /// The part of `gpu_time` during which another kernel ran on the same device, ns.
    pub overlapped_time: u64,
    /// Samples it rests on (each counted once however many launches it covered).
    pub samples: u64,
    /// Total length of those samples, ns.
    pub sample_time: u64,
    /// This name's part of those samples' time, ns (a segment run by `n` kernels counts `1/n` for each).
    pub own_time: f64,
    /// A value per metric that its samples held, in the order the metrics were first seen.
    pub metrics: Vec<MetricValue>,
}

impl KernelCounters {
    /// Share of its GPU time covered by samples, 0 to 1 (0 for a name of no duration).
    pub fn covered(&self) -> f64 {
        ratio(self.covered_time as f64, self.gpu_time as f64)
    }

    /// Share of its GPU time overlapped by other kernels on its device, 0 to 1.
    pub fn overlap(&self) -> f64 {
        ratio(self.overlapped_time as f64, self.gpu_time as f64)
    }

    /// Share of the time of the samples it rests on that went to other kernels or idle time, 0 to 1.
    pub fn shared(&self) -> f64 {
        if self.sample_time == 0 {
            return 0.0;
        }
        (1.0 - self.own_time / self.sample_time as f64).clamp(0.0, 1.0)
    }

    /// Whether its values rest mostly on statistical sharing: more than half of the time of its samples went to
    /// other kernels or idle time.
    pub fn statistical(&self) -> bool {
        self.samples > 0 && self.shared() > 0.5
    }

    /// The value of `metric` (as sampled), where its samples held it.
    pub fn value(&self, metric: &str) -> Option<f64> {
        self.metrics
            .iter()
            .find(|m| &*m.metric == metric)
            .map(|m| m.value)
    }

    /// The fitted value of one metric (a share of elapsed time, in enough samples; [`MetricValue::fitted`]).
    pub fn fitted(&self, metric: &str) -> Option<f64> {
        self.metrics
            .iter()
            .find(|m| &*m.metric == metric)
            .and_then(|m| m.fitted)
    }
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        (a / b).clamp(0.0, 1.0)
    } else {
        0.0
    }
}

/// What the samples of one device were.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct DeviceCounters {
    /// The device.
    pub device: DeviceId,
    /// Samples received.
    pub samples: u64,
    /// Samples lost (summed over its gaps).
    pub lost: u64,
    /// Gaps: spans in which samples were lost or none were taken.
    pub gaps: u64,
    /// Total length of the gaps, ns.
    pub gap_time: u64,
    /// Median length of a sample, ns (0 without samples).
    pub interval: u64,
    /// Time covered by samples, ns.
    pub sampled_time: u64,
    /// The part of `sampled_time` in which a kernel ran, ns.
    pub busy_time: u64,
    /// Kernel launches on the device.
    pub launches: u64,
    /// Total duration of those launches, ns.
    pub kernel_time: u64,
}

/// Counters per kernel name, and what each device's samples were.
#[derive(Debug, Clone, PartialEq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct CounterAttribution {
    /// One row per kernel name, the longest total GPU time first.
    pub kernels: Vec<KernelCounters>,
    /// Every device that had kernels or counter records, by host and ordinal.
    pub devices: Vec<DeviceCounters>,
}

/// How one sample's window was shared.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct SampleShares {
    /// The device.
    pub device: DeviceId,
    /// The sample's span, ns (cut where it overlapped an earlier sample).
    pub start: u64,
    /// End of the span, ns.
    pub end: u64,
    /// Each kernel name that ran in the window and the share of the window it had (0 to 1; concurrent kernels
    /// split their time). The shares sum to at most 1; the rest is idle time.
    pub shares: Vec<(Arc<str>, f64)>,
}

/// What is summed per kernel name.
#[derive(Debug, Default)]
struct Acc {
    launches: u64,
    gpu_time: u64,
    covered: u64,
    overlapped: u64,
    samples: u64,
    sample_time: u64,
    own: f64,
    /// Per metric: sum, time.
    metrics: Vec<(f64, u64)>,
    /// The last (device, sample) counted in `samples`.
    last: Option<(usize, usize)>,
}

impl Attribution {
    /// Nothing added yet.
    pub fn new() -> Self {
        Self::default()
    }

    fn device(&mut self, host: &str, device: u32) -> &mut DeviceInput {
        let host = match self.hosts.get(host) {
            Some(h) => Arc::clone(h),
            None => {
                let h: Arc<str> = Arc::from(host);
                self.hosts.insert(host.to_string(), Arc::clone(&h));
                h
            }
        };
        self.devices.entry(DeviceId { host, device }).or_default()
    }

    /// A kernel launch of `name` on `device` of `host`, over `[start, end)` on the common timeline.
    pub fn add_kernel(&mut self, host: &str, device: u32, name: &Arc<str>, start: u64, end: u64) {
        let index = match self.name_index.get(name) {
            Some(&i) => i,
            None => {
                self.names.push(Arc::clone(name));
                self.name_index
                    .insert(Arc::clone(name), self.names.len() - 1);
                self.names.len() - 1
            }
        };
        let d = self.device(host, device);
        d.kernels.push((start, end.max(start)));
        d.names.push(index);
    }

    /// A kernel record of a stream of `host`, at the times it holds.
    pub fn add_kernel_record(&mut self, host: &str, kernel: &KernelRecord) {
        self.add_kernel(host, kernel.device, &kernel.name, kernel.start, kernel.end);
    }

    /// A counter sample of `host`'s device `sample.device`.
    pub fn add_sample(&mut self, host: &str, sample: &CounterSample) {
        let values = sample
            .values
            .iter()
            .map(|(metric, v)| {
                let m = match self.metric_index.get(metric) {
                    Some(&m) => m,
                    None => {
                        self.metrics.push(Arc::clone(metric));
                        self.metric_index
                            .insert(Arc::clone(metric), self.metrics.len() - 1);
                        self.metrics.len() - 1
                    }
                };
                (m, *v)
            })
            .collect();
        self.device(host, sample.device).samples.push(Sample {
            start: sample.start,
            end: sample.end,
            values,
        });
    }

    /// A counter gap of `host`'s device `gap.device`.
    pub fn add_gap(&mut self, host: &str, gap: &CounterGap) {
        self.device(host, gap.device).gaps.push(*gap);
    }

    /// Whether any counter sample was added.
    pub fn has_samples(&self) -> bool {
        self.devices.values().any(|d| !d.samples.is_empty())
    }

    /// The counters per kernel name and the devices' samples.
    pub fn attribute(&self) -> CounterAttribution {
        let kinds: Vec<MetricKind> = self.metrics.iter().map(|m| MetricKind::of(m)).collect();
        let mut fits: BTreeMap<usize, Fit> = kinds
            .iter()
            .enumerate()
            .filter(|(_, k)| **k == MetricKind::Share)
            .map(|(m, _)| (m, Fit::new(self.names.len())))
            .collect();
        let mut acc: Vec<Acc> = (0..self.names.len()).map(|_| Acc::default()).collect();
        let mut devices = Vec::with_capacity(self.devices.len());
        for (d, (id, input)) in self.devices.iter().enumerate() {
            let (kept, spans) = disjoint_samples(input);
            let mut dev = device_summary(id, input, &spans);
            for (&(start, end), &name) in input.kernels.iter().zip(&input.names) {
                acc[name].launches += 1;
                acc[name].gpu_time += end - start;
            }
            // The time kernels ran in each sample's window, for shares of elapsed time, and each name's time in it,
            // for their fit.
            let mut busy = vec![0u64; spans.len()];
            let mut mix: Vec<Vec<(usize, u64)>> = vec![Vec::new(); spans.len()];
            sweep::sweep(&input.kernels, &spans, |seg: &Segment<'_>| {
                if let (Some(j), false) = (seg.sample, seg.kernels.is_empty()) {
                    busy[j] += seg.len();
                    for &k in seg.kernels {
                        mix[j].push((input.names[k], seg.len()));
                    }
                }
            });
            for (j, names) in mix.iter_mut().enumerate() {
                if names.is_empty() {
                    continue;
                }
                names.sort_unstable();
                let window = (spans[j].1 - spans[j].0) as f64;
                let mut shares: Vec<(usize, f64)> = Vec::new();
                for &(name, len) in names.iter() {
                    match shares.last_mut() {
                        Some(last) if last.0 == name => last.1 += len as f64 / window,
                        _ => shares.push((name, len as f64 / window)),
                    }
                }
                for &(m, v) in &input.samples[kept[j]].values {
                    if let Some(f) = fits.get_mut(&m) {
                        f.add(v, &shares);
                    }
                }
            }
            sweep::sweep(&input.kernels, &spans, |seg: &Segment<'_>| {
                let len = seg.len();
                let n = seg.kernels.len();
                if n >= 2 {
                    for &k in seg.kernels {
                        acc[input.names[k]].overlapped += len;
                    }
                }
                let Some(j) = seg.sample else { return };
                if n == 0 {
                    return;
                }
                dev.busy_time += len;
                let sample = &input.samples[kept[j]];
                let window = spans[j].1 - spans[j].0;
                let interval = (sample.end - sample.start) as f64;
                let part = len as f64 / n as f64;
                for &k in seg.kernels {
                    let a = &mut acc[input.names[k]];
                    a.covered += len;
                    a.own += part;
                    if a.last != Some((d, j)) {
                        a.last = Some((d, j));
                        a.samples += 1;
                        a.sample_time += window;
                    }
                    for &(m, v) in &sample.values {
                        if !v.is_finite() {
                            continue;
                        }
                        if a.metrics.len() <= m {
                            a.metrics.resize(m + 1, (0.0, 0));
                        }
                        let slot = &mut a.metrics[m];
                        slot.0 += match kinds[m] {
                            MetricKind::Level => v * len as f64,
                            // `busy[j]` holds this segment: it is above zero.
                            MetricKind::Share => {
                                (v * window as f64 / busy[j] as f64).min(100.0) * len as f64
                            }
                            MetricKind::Rate => v * part * 1e-9,
                            MetricKind::Amount => v * part / interval,
                        };
                        slot.1 += len;
                    }
                }
            });
            devices.push(dev);
        }
        let fitted: BTreeMap<usize, Vec<Option<f64>>> =
            fits.iter().map(|(&m, f)| (m, f.solve(100.0))).collect();
        let mut kernels: Vec<KernelCounters> = acc
            .into_iter()
            .enumerate()
            .filter(|(_, a)| a.launches > 0)
            .map(|(i, a)| KernelCounters {
                name: Arc::clone(&self.names[i]),
                launches: a.launches,
                gpu_time: a.gpu_time,
                covered_time: a.covered,
                overlapped_time: a.overlapped,
                samples: a.samples,
                sample_time: a.sample_time,
                own_time: a.own,
                metrics: a
                    .metrics
                    .iter()
                    .enumerate()
                    .filter(|(_, (_, time))| *time > 0)
                    .map(|(m, &(sum, time))| MetricValue {
                        metric: Arc::clone(&self.metrics[m]),
                        kind: kinds[m],
                        value: match kinds[m] {
                            MetricKind::Level | MetricKind::Share => sum / time as f64,
                            MetricKind::Rate | MetricKind::Amount => sum,
                        },
                        fitted: fitted.get(&m).and_then(|f| f[i]),
                        time,
                    })
                    .collect(),
            })
            .collect();
        kernels.sort_by(|a, b| {
            b.gpu_time
                .cmp(&a.gpu_time)
                .then_with(|| a.name.cmp(&b.name))
        });
        CounterAttribution { kernels, devices }
    }

    /// For every sample of every device, in time order, the share of its window each kernel name had.
    pub fn sample_shares(&self) -> Vec<SampleShares> {
        let mut out = Vec::new();
        for (id, input) in &self.devices {
            let (_, spans) = disjoint_samples(input);
            let mut shares: Vec<Vec<(usize, f64)>> = vec![Vec::new(); spans.len()];
            sweep::sweep(&input.kernels, &spans, |seg: &Segment<'_>| {
                let n = seg.kernels.len();
                let Some(j) = seg.sample.filter(|_| n > 0) else {
                    return;
                };
                let window = (spans[j].1 - spans[j].0) as f64;
                let part = seg.len() as f64 / n as f64 / window;
                for &k in seg.kernels {
                    let name = input.names[k];
                    match shares[j].iter_mut().find(|(i, _)| *i == name) {
                        Some(s) => s.1 += part,
                        None => shares[j].push((name, part)),
                    }
                }
            });
            for (j, s) in shares.into_iter().enumerate() {
                out.push(SampleShares {
                    device: id.clone(),
                    start: spans[j].0,
                    end: spans[j].1,
                    shares: s
                        .into_iter()
                        .map(|(i, share)| (Arc::clone(&self.names[i]), share))
                        .collect(),
                });
            }
        }
        out
    }
}

/// The samples of a device made disjoint: the index of each sample kept, and its span.
fn disjoint_samples(input: &DeviceInput) -> (Vec<usize>, Vec<(u64, u64)>) {
    let spans: Vec<(u64, u64)> = input.samples.iter().map(|s| (s.start, s.end)).collect();
    let kept = sweep::disjoint(&spans);
    let cut = sweep::cut(&spans, &kept);
    (kept, cut)
}

/// What a device's records say on their own (`busy_time` is filled by the sweep).
fn device_summary(id: &DeviceId, input: &DeviceInput, spans: &[(u64, u64)]) -> DeviceCounters {
    let mut lengths: Vec<u64> = input
        .samples
        .iter()
        .map(|s| s.end.saturating_sub(s.start))
        .collect();
    lengths.sort_unstable();
    DeviceCounters {
        device: id.clone(),
        samples: input.samples.len() as u64,
        lost: input
            .gaps
            .iter()
            .fold(0u64, |a, g| a.saturating_add(g.samples)),
        gaps: input.gaps.len() as u64,
        gap_time: input
            .gaps
            .iter()
            .fold(0u64, |a, g| a.saturating_add(g.end.saturating_sub(g.start))),
        interval: lengths.get(lengths.len() / 2).copied().unwrap_or(0),
        sampled_time: spans.iter().map(|(s, e)| e - s).sum(),
        busy_time: 0,
        launches: input.kernels.len() as u64,
        kernel_time: input.kernels.iter().map(|(s, e)| e - s).sum(),
    }
}
