//! `gpu-tools freeze PID`: checkpoints a CUDA process's GPU state to host memory, waits, then restores it.

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use gpu_tools::cuda::process::{Adopted, ProcessCheckpoint, ProcessState};
use serde::Serialize;

use crate::failure::{Failure, Outcome};
use crate::gpu_memory::{DeviceMemory, GpuMemory, ProcessMemory, mib};
use crate::output::OutputFile;
use crate::stdout::outln;

/// Checkpoint a CUDA process's GPU state to host memory, wait, then restore it.
///
/// Locks the process's CUDA calls, checkpoints its GPU state into host memory (its GPUs are released), waits for
/// Enter, SIGINT or SIGTERM (or `--seconds`), then restores and unlocks it. Prints the device memory that was
/// freed, seen from outside through NVML, and the time of each step. A failure on the way restores the process
/// before this command exits; `--resume` brings back a process left locked or checkpointed by anything else.
///
/// Needs a CUDA 12.8 (r570) or later driver, and the right to act on the process (root, or its owner).
///
/// The driver refuses the checkpoint lock in a process where CUPTI has run, for the rest of its life (driver 580:
/// CUDA_ERROR_NOT_SUPPORTED). A process that an earlier `trace --pid` or `profile --pid` traced is therefore refused
/// before anything is touched (exit 1); where the lock is refused so anyway, the error names that likely cause (the
/// program's own profiler).
/// `RUST_LOG=gpu_tools=debug` shows the library's log of each transition.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The process to freeze.
    pid: u32,
    /// How long the lock may wait for the process's CUDA calls in progress, in ms.
    #[arg(long, default_value_t = 10_000)]
    timeout_ms: u64,
    /// Restore after this many seconds instead of waiting for Enter or a signal.
    #[arg(long)]
    seconds: Option<u64>,
    /// Only bring the process back to running from whatever state it is in (restore, unlock).
    #[arg(long)]
    resume: bool,
    /// Also write the figures to this file as JSON (checked before the process is touched; written only when
    /// the freeze and the restore succeeded); `-` is standard output (the steps then go to stderr).
    #[arg(long, value_name = "FILE", conflicts_with = "resume")]
    json: Option<PathBuf>,
}

#[derive(Serialize, Default)]
struct Report {
    pid: u32,
    lock_ms: f64,
    checkpoint_ms: f64,
    frozen_s: f64,
    restore_ms: f64,
    unlock_ms: f64,
    states: Vec<String>,
    devices: Vec<DeviceReport>,
}

#[derive(Serialize)]
struct DeviceReport {
    nvml_index: u32,
    uuid: String,
    name: String,
    used_before: u64,
    used_checkpointed: u64,
    used_restored: u64,
    freed: u64,
    process_before: Option<u64>,
    process_checkpointed: Option<u64>,
}

fn held(p: ProcessMemory) -> Option<u64> {
    match p {
        ProcessMemory::Used(b) => Some(b),
        ProcessMemory::Absent => Some(0),
        ProcessMemory::Unknown => None,
    }
}

fn listing(p: ProcessMemory) -> String {
    match p {
        ProcessMemory::Absent => "not listed".into(),
        ProcessMemory::Used(b) => format!("{} MiB", mib(b)),
        ProcessMemory::Unknown => "listed, size unknown".into(),
    }
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// Why the wait ended.
enum Wake {
    Key,
    Signal,
    Timer,
}

fn wait(seconds: Option<u64>, signals: mpsc::Receiver<()>) -> Wake {
    let (tx, rx) = mpsc::channel();
    let key = tx.clone();
    std::thread::spawn(move || {
        let mut line = String::new();
        // End of input (a closed stdin) is not a key press: then only a signal or the timer ends the wait.
        if matches!(std::io::stdin().lock().read_line(&mut line), Ok(n) if n > 0) {
            let _ = key.send(Wake::Key);
        }
    });
    let sig = tx.clone();
    std::thread::spawn(move || {
        if signals.recv().is_ok() {
            let _ = sig.send(Wake::Signal);
        }
    });
    if let Some(s) = seconds {
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(s));
            let _ = tx.send(Wake::Timer);
        });
    }
    rx.recv().unwrap_or(Wake::Signal)
}

// A closed standard output does not cut a freeze or a resume short: the lines are dropped, the process is restored
// all the same, and the exit status says that the output was cut (see `crate::stdout`).

fn resume(pid: u32) -> Result<(), String> {
    let adopted = ProcessCheckpoint::adopt(pid).map_err(|e| e.to_string())?;
    let _ = outln!("process {pid} is {}", adopted.state());
    if let Adopted::Running(_) = adopted {
        return Ok(());
    }
    let t = Instant::now();
    adopted.finish().map_err(|e| e.to_string())?;
    let _ = outln!("process {pid} is running again ({:.1} ms)", ms(t));
    Ok(())
}

fn snapshot(mem: &Option<GpuMemory>, pid: u32) -> Vec<DeviceMemory> {
    mem.as_ref()
        .and_then(|m| {
            m.snapshot(pid)
                .map_err(|e| eprintln!("device memory: {e}"))
                .ok()
        })
        .unwrap_or_default()
}

fn freeze(args: &Args, signals: mpsc::Receiver<()>) -> Result<Report, String> {
    let pid = args.pid;
    let mut report = Report {
        pid,
        ..Report::default()
    };
    let mut note = |s: ProcessState| report_state(&mut report.states, s);
    let first = ProcessCheckpoint::state(pid).map_err(|e| e.to_string())?;
    note(first);
    let _ = outln!("process {pid}: {first}");
    let mem = match GpuMemory::open() {
        Ok(m) => Some(m),
        Err(e) => {
            let _ = outln!("device memory will not be measured: {e}");
            None
        }
    };
    let before = snapshot(&mem, pid);
    let running = ProcessCheckpoint::attach(pid).map_err(|e| e.to_string())?;

    let t = Instant::now();
    let locked = running
        .lock(Duration::from_millis(args.timeout_ms))
        .map_err(|f| lock_refused(f.error()))?;
    report.lock_ms = ms(t);
    note(ProcessState::Locked);
    let _ = outln!("locked        {:10.1} ms", report.lock_ms);
    let t = Instant::now();
    let frozen = locked.checkpoint().map_err(|f| f.to_string())?;
    report.checkpoint_ms = ms(t);
    note(ProcessState::Checkpointed);
    let _ = outln!("checkpointed  {:10.1} ms", report.checkpoint_ms);
    if let Ok(tid) = frozen.restore_thread_id() {
        let _ = outln!("restore thread {tid}");
    }
    let during = snapshot(&mem, pid);
    for (b, a) in before.iter().zip(&during) {
        let _ = outln!(
            "GPU {} {} ({}): used {} -> {} MiB, freed {} MiB; process {}: {} -> {}",
            b.index,
            b.name,
            b.uuid,
            mib(b.used),
            mib(a.used),
            mib(b.used.saturating_sub(a.used)),
            pid,
            listing(b.process),
            listing(a.process)
        );
    }
    let _ = match args.seconds {
        Some(s) => outln!("frozen; restoring in {s} s (or on Enter, SIGINT, SIGTERM)"),
        None => outln!("frozen; press Enter (or send SIGINT/SIGTERM) to restore"),
    };
    let frozen_at = Instant::now();
    let why = wait(args.seconds, signals);
    report.frozen_s = frozen_at.elapsed().as_secs_f64();
    let _ = match why {
        Wake::Key => outln!("restoring"),
        Wake::Signal => outln!("signal received: restoring"),
        Wake::Timer => outln!("time is up: restoring"),
    };

    let t = Instant::now();
    let locked = match frozen.restore() {
        Ok(l) => l,
        Err(failed) => {
            let (handle, e) = failed.into_parts();
            let retry = handle.finish();
            return Err(format!(
                "restore: {e}; a second attempt: {}; try `gpu-tools freeze {pid} --resume`",
                retry.map_or_else(|e| e.to_string(), |()| "succeeded".into())
            ));
        }
    };
    report.restore_ms = ms(t);
    note(ProcessState::Locked);
    let _ = outln!("restored      {:10.1} ms", report.restore_ms);
    let t = Instant::now();
    locked.unlock().map_err(|f| f.to_string())?;
    report.unlock_ms = ms(t);
    note(ProcessState::Running);
    let _ = outln!("unlocked      {:10.1} ms", report.unlock_ms);
    let after = snapshot(&mem, pid);
    for ((b, d), a) in before.iter().zip(&during).zip(&after) {
        report.devices.push(DeviceReport {
            nvml_index: b.index,
            uuid: b.uuid.clone(),
            name: b.name.clone(),
            used_before: b.used,
            used_checkpointed: d.used,
            used_restored: a.used,
            freed: b.used.saturating_sub(d.used),
            process_before: held(b.process),
            process_checkpointed: held(d.process),
        });
    }
    let now = ProcessCheckpoint::state(pid).map_err(|e| e.to_string())?;
    let _ = outln!("process {pid}: {now}");
    Ok(report)
}

/// A failed lock, with the likely cause where the driver answered CUDA_ERROR_NOT_SUPPORTED: it refuses the lock in a
/// process where CUPTI has run (seen on driver 580 after a CUPTI trace), for the rest of the process's life.
fn lock_refused(e: &gpu_tools::cuda::process::ProcessCheckpointError) -> String {
    let not_supported = e.call() == Some("cuCheckpointProcessLock")
        && e.cuda_error()
            .is_some_and(|c| c.code == gpu_tools::sys::cuda_driver::CUDA_ERROR_NOT_SUPPORTED);
    if !not_supported {
        return e.to_string();
    }
    format!(
        "{e}. The CUDA driver refuses the checkpoint lock in a process where CUPTI has run, for the rest of its \
         life (driver 580 answered this after a CUPTI trace): most likely the program's own profiler \
         (torch.profiler, Kineto) or another CUPTI tool ran in it. Nothing was locked; the process runs on as it was"
    )
}

/// A process into which `trace --pid` or `profile --pid` loaded the injection library has run CUPTI: the driver
/// refuses its checkpoint lock (CUDA_ERROR_NOT_SUPPORTED on driver 580), so it is refused before anything is
/// touched.
fn ran_cupti_for_an_attach(pid: u32) -> Result<(), Failure> {
    if !crate::cupti_or_debugger::injection_library_loaded(pid) {
        return Ok(());
    }
    Err(Failure::new(
        1,
        format!(
            "process {pid} has run CUPTI for an earlier `gpu-tools trace --pid` or `profile --pid` (gpu-tools' \
             injection library is loaded in it): the CUDA driver refuses the checkpoint lock \
             (cuCheckpointProcessLock) in a process where CUPTI has run, for the rest of its life (driver 580 \
             answered CUDA_ERROR_NOT_SUPPORTED). Nothing was touched; the process runs on as it was. To free its GPU \
             memory, end it, or freeze a fresh run of the job before any trace or profile of it; `gpu-tools where \
             {pid}` still says what it runs"
        ),
    ))
}

fn report_state(states: &mut Vec<String>, s: ProcessState) {
    states.push(s.to_string());
}

pub fn run(args: Args) -> Outcome {
    crate::pid::check(args.pid)?;
    if args.resume {
        resume(args.pid).map_err(Failure::error)?;
        return Ok(0);
    }
    ran_cupti_for_an_attach(args.pid)?;
    // The report's file is checked before the process is touched.
    let json = args
        .json
        .as_deref()
        .map(|path| OutputFile::create(path, "the report"))
        .transpose()?;
    if json.as_ref().is_some_and(OutputFile::is_stdout) {
        // The report has standard output: the steps go to stderr.
        crate::stdout::to_stderr();
    }
    // From here on SIGINT and SIGTERM end the wait instead of the process, so a frozen target is always
    // restored.
    let (tx, signals) = mpsc::channel();
    ctrlc::set_handler(move || {
        let _ = tx.send(());
    })
    .map_err(|e| Failure::error(format!("cannot handle SIGINT/SIGTERM: {e}")))?;
    let report = freeze(&args, signals).map_err(Failure::error)?;
    if let Some(file) = json {
        file.write_with(|w| {
            serde_json::to_writer_pretty(&mut *w, &report)?;
            w.write_all(b"\n")
        })?;
    }
    Ok(0)
}
