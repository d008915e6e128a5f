//! `trace --counters [SET|NAMES]`: device counters (NVIDIA PM sampling) sampled beside the traced processes, for
//! the duration of the trace, and saved in the trace file as a counter stream (`gpu_tools::trace::counters`).
//!
//! The samplers are opened before the program is launched or attached, one per GPU the program can use
//! ([`devices`] says which, and how each is numbered). Anything that stops them is an error before the program
//! runs: an unknown metric (with close names), one PM sampling cannot collect, counters held by another tool
//! (`CUPTI_ERROR_HARDWARE_BUSY`: `top`, ncu, DCGM, Nsight Systems), no CUPTI in this process, too old a CUPTI or
//! GPU. `trace --counters` refuses rather than tracing without counters: the samplers open before anything runs,
//! so a refusal costs no run of the program, and a trace asked for with counters never silently lacks them.
//!
//! A thread ([`sampler`]) reads the samplers every [`READ_PERIOD`] and sends the counter stream's bytes through the
//! receiving end's channel, which writes them into the trace file beside the processes' streams. After the last
//! traced process's stream ended (or the attach detached), the samplers are stopped and drained, and the stream
//! is closed.

pub mod devices;
mod sampler;

use std::collections::HashSet;
use std::time::Duration;

pub use super::interval::describe_interval;

use gpu_tools::counters::DeviceCounters;
use gpu_tools::cupti::ProfilingError;
use gpu_tools::cupti::pm_sampling::{Interval, PmSampler};

pub use sampler::Sampling;

use crate::failure::Failure;
use devices::{ProcessDevices, Visibility};

/// How often the sampler thread reads the samplers (their decode threads wake every 50 ms).
pub const READ_PERIOD: Duration = Duration::from_millis(50);

/// The metrics of `--counters`: each comma-separated entry a set (`default`) or a full PM-sampling metric name, in
/// order, each once. A word that is neither (a program name taken as the option's value) is an error saying how
/// to write it.
pub fn metrics_of(value: &str) -> Result<Vec<String>, String> {
    let mut out: Vec<String> = Vec::new();
    let mut push = |m: &str| {
        if !out.iter().any(|o| o == m) {
            out.push(m.to_string());
        }
    };
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        if let Some(set) = gpu_tools::trace::counters::named_set(entry) {
            set.iter().for_each(|m| push(m));
        } else if entry.contains("__") {
            push(entry);
        } else {
            return Err(format!(
                "{entry:?} is neither a counter set (default) nor a metric name (unit__counter.rollup, as `gpu-tools \
                 metrics --method pm` lists them); to trace a program with the default set, write `--counters -- \
                 PROGRAM`"
            ));
        }
    }
    if out.is_empty() {
        return Err("no counter set or metric name given".into());
    }
    Ok(out)
}

/// What `--counters` asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub metrics: Vec<String>,
    pub interval: Duration,
}

/// One device being sampled, not read yet.
pub struct OpenDevice {
    pub sampler: Box<dyn DeviceCounters + Send>,
    /// The ordinal the traced processes give it.
    pub trace_device: u32,
    /// This process's ordinal.
    pub ordinal: usize,
    pub name: String,
    pub uuid: Option<String>,
    /// The sampling period in time; `None` for a period of clocks (GPUs before Ampere GA10x).
    pub period: Option<Duration>,
}

/// The samplers of a trace, opened and sampling; [`Opened::start`] starts reading them.
pub struct Opened {
    pub devices: Vec<OpenDevice>,
    /// The CUPTI version of this process (0 where unknown), for the stream's header.
    pub vendor_version: u32,
}

/// Who opens the samplers, for what a refusal says to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asker {
    /// `trace --counters`: it can trace without them.
    Trace,
    /// The kernel metrics of `profile --pid` by PM sampling attribution (`counter_window`), which the caller
    /// introduces: they have no other source beside CUDA graphs.
    ProfileMetrics,
}

/// Opens a sampler on each GPU the traced processes can use: those of a launched program (`targets` empty), or
/// of the attached processes `targets`. Every failure is an error before the program is launched or attached,
/// worded for `asker`.
pub fn open(request: &Request, targets: &[u32], asker: Asker) -> Result<Opened, Failure> {
    let not_run = if targets.is_empty() {
        "the program was not run"
    } else {
        "no process was attached"
    };
    let fail = |m: String| {
        Failure::new(
            1,
            match asker {
                Asker::Trace => format!("--counters: {m} ({not_run})"),
                Asker::ProfileMetrics => format!("{m} ({not_run})"),
            },
        )
    };
    let (driver, count, uuids) = devices().map_err(fail)?;
    let chosen = chosen_devices(count, &uuids, targets).map_err(fail)?;
    if chosen.is_empty() {
        return Err(fail(if count == 0 {
            "the CUDA driver sees no GPU here".to_string()
        } else {
            "the traced processes can use no GPU that gpu-tools sees (their CUDA_VISIBLE_DEVICES)"
                .to_string()
        }));
    }
    let vendor_version = gpu_tools::cupti::CuptiLibrary::load()
        .ok()
        .and_then(|l| l.version().ok())
        .unwrap_or(0);
    let mut devices = Vec::new();
    for (ordinal, trace_device) in chosen {
        let info = driver.device_info(ordinal).ok();
        let name = info
            .as_ref()
            .map_or_else(|| format!("device {ordinal}"), |i| i.name.clone());
        // Time-based intervals need Ampere GA10x or later; older GPUs count clocks (as `top` does).
        let timed = info
            .as_ref()
            .is_some_and(|i| i.compute_capability >= (8, 6));
        let interval = if timed {
            Interval::Time(request.interval)
        } else {
            Interval::Clocks(u64::try_from(request.interval.as_nanos()).unwrap_or(u64::MAX))
        };
        let sampler = PmSampler::builder(ordinal)
            .metrics(&request.metrics)
            .interval(interval)
            .start()
            .map_err(|e| fail(describe_open_error(ordinal, &name, &e, asker)))?;
        log::info!(
            "counters: sampling device {ordinal} ({name}) as trace device {trace_device}: {:?}",
            sampler.layout()
        );
        devices.push(OpenDevice {
            sampler: Box::new(sampler),
            trace_device,
            ordinal,
            name,
            uuid: uuids.get(ordinal).cloned().flatten(),
            period: timed.then_some(request.interval),
        });
    }
    Ok(Opened {
        devices,
        vendor_version,
    })
}

/// The devices the counters of `targets` are read on, as (this process's ordinal, the traced processes' ordinal):
/// those the processes can use, narrowed to those NVML lists them on; for a launched program (no target), every
/// device this process sees. `uuids`: this process's devices' UUIDs, by ordinal.
fn chosen_devices(
    count: usize,
    uuids: &[Option<String>],
    targets: &[u32],
) -> Result<Vec<(usize, u32)>, String> {
    let tracer = Visibility::current();
    let mut processes = Vec::new();
    let mut used = None;
    if targets.is_empty() {
        // A launched program inherits this process's view: it numbers the devices as this process does.
        processes.push(ProcessDevices {
            pid: std::process::id(),
            ordinals: (0..count).collect(),
        });
    } else {
        for &pid in targets {
            let view = Visibility::of_process(pid)?;
            let ordinals = devices::map_devices(&view, &tracer, uuids)
                .map_err(|e| format!("cannot tell which GPUs process {pid} uses: {e}"))?;
            processes.push(ProcessDevices { pid, ordinals });
        }
        // The GPUs NVML lists the processes on, as this process numbers them.
        used = devices::used_by(targets).map(|set| {
            uuids
                .iter()
                .enumerate()
                .filter(|(_, u)| u.as_ref().is_some_and(|u| set.contains(u)))
                .map(|(i, _)| i)
                .collect::<HashSet<usize>>()
        });
    }
    devices::choose(&processes, used.as_ref())
}

/// The CUDA driver, the number of devices it sees, and each one's UUID where it gives one.
type Devices = (&'static gpu_tools::cuda::Driver, usize, Vec<Option<String>>);

fn devices() -> Result<Devices, String> {
    let driver = gpu_tools::cuda::Driver::load().map_err(|e| e.to_string())?;
    let count = driver
        .device_count()
        .map_err(|e| format!("cannot count the CUDA devices: {e}"))?;
    let uuids = (0..count)
        .map(|d| driver.device_uuid(d).ok().map(|u| u.to_string()))
        .collect();
    Ok((driver, count, uuids))
}

/// The GPUs process `pid` uses, as this process numbers them (CUDA_VISIBLE_DEVICES and NVML's account of its
/// contexts); `Err` says why that cannot be told.
pub fn devices_of(pid: u32) -> Result<Vec<usize>, String> {
    let (_, count, uuids) = devices()?;
    Ok(chosen_devices(count, &uuids, &[pid])?
        .into_iter()
        .map(|(ordinal, _)| ordinal)
        .collect())
}

/// GPUs [`held_elsewhere`] gave, as a message names them: `device 0 (NVIDIA H200), device 1 (...)`.
pub fn held_devices(held: &[(usize, String)]) -> String {
    held.iter()
        .map(|(ordinal, name)| format!("device {ordinal} ({name})"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The GPUs of process `pid` whose performance counters another client holds (a PM sampler or range profiler of
/// another process, Nsight Compute, DCGM), as (this process's ordinal, name). PC sampling beside such a holder
/// fails and has killed CUDA-graph jobs (see `gpu_tools::cupti::pm_sampling::counters_held_elsewhere`). Where
/// that cannot be told (no driver, no CUPTI here), `Err` says why.
pub fn held_elsewhere(pid: u32) -> Result<Vec<(usize, String)>, String> {
    let (driver, count, uuids) = devices()?;
    let mut held = Vec::new();
    for (ordinal, _) in chosen_devices(count, &uuids, &[pid])? {
        if gpu_tools::cupti::pm_sampling::counters_held_elsewhere(ordinal)
            .map_err(|e| e.to_string())?
        {
            let name = driver
                .device_info(ordinal)
                .map_or_else(|_| format!("device {ordinal}"), |i| i.name);
            held.push((ordinal, name));
        }
    }
    Ok(held)
}

/// Why a sampler did not open, with what to do about it (for `asker`).
fn describe_open_error(ordinal: usize, name: &str, e: &gpu_tools::Error, asker: Asker) -> String {
    match e {
        gpu_tools::Error::CuptiCounters(ProfilingError::CountersBusy { .. }) => {
            let (needs, instead) = match asker {
                Asker::Trace => (
                    "`trace --counters` does not trace without them",
                    "Stop that tool, or trace without --counters",
                ),
                // CUPTI's range profiler (`--kernel-replay`) needs the same counters.
                Asker::ProfileMetrics => (
                    "the kernel metrics of `profile --pid` are sampled from them",
                    "Stop that tool, then profile again",
                ),
            };
            format!(
                "the performance counters of device {ordinal} ({name}) are held by another tool, and {needs}: \
                 {e}. {instead}{}",
                crate::pc_left_on::said(None)
            )
        }
        gpu_tools::Error::CuptiCounters(
            ProfilingError::UnknownMetric { .. }
            | ProfilingError::BadSubmetric { .. }
            | ProfilingError::NotSupportedByMethod { .. }
            | ProfilingError::TooManyPasses { .. },
        ) => format!("{e} (see `gpu-tools metrics --method pm`)"),
        gpu_tools::Error::Load(_) => format!(
            "the PM sampler runs in gpu-tools and needs CUPTI here, whatever the program loads: {e}"
        ),
        _ => format!("cannot sample device {ordinal} ({name}): {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_and_names_make_the_metrics() {
        let default = metrics_of("default").unwrap();
        assert_eq!(default, gpu_tools::trace::counters::DEFAULT_SET);
        assert_eq!(
            metrics_of("dram__bytes_read.sum, default").unwrap().len(),
            1 + default.len()
        );
        assert_eq!(
            metrics_of("a__b.sum,a__b.sum").unwrap(),
            vec!["a__b.sum".to_string()]
        );
        let program = metrics_of("python3").unwrap_err();
        assert!(program.contains("--counters -- PROGRAM"), "{program}");
        assert!(metrics_of(" , ").is_err());
    }
}
