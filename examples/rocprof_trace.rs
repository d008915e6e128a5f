//! A Chrome trace of this process's own kernel dispatches and HIP calls on an AMD GPU, through rocprofiler v2
//! (formerly `gpu-tools rocprof`).
//!
//! rocprofiler v2 is an HSA tool: it is loaded ([`RocprofilerLibrary::load`]) and a [`ProfilingSession`] started
//! before the HIP runtime (`libamdhip64.so`), which this program opens only afterwards. The workload is
//! `hipMemset`, which the HIP runtime runs as a fill kernel; HIP API calls are traced too, so the trace (for
//! `chrome://tracing` or Perfetto, written with the library's [`ChromeWriter`]) shows each call and the dispatch
//! it caused. The file is written only when the run succeeded; errors are printed and the exit status is 1.
//!
//! On a host with an AMD GPU and ROCm 6.1+:
//!
//! ```text
//! cargo run --release --example rocprof_trace -- --output rocprof_trace.json --iterations 16
//! ```

use std::ffi::c_void;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use clap::Parser;
use gpu_tools::rocprofiler::{
    Batch, Filter, Phase, ProfilingSession, Record, Rocprofiler, RocprofilerLibrary, TraceDomain,
};
use gpu_tools::trace::export::{ChromeWriter, Slice, TimelineSink, Track, TrackProcess};

/// Profile a small HIP workload of this process on an AMD GPU (rocprofiler v2) and write a Chrome trace.
#[derive(Parser)]
struct Args {
    /// Where to write the Chrome trace (JSON).
    #[arg(long, short, value_name = "FILE", default_value = "rocprof_trace.json")]
    output: PathBuf,
    /// Number of hipMemset calls (each runs one fill kernel).
    #[arg(long, default_value_t = 16)]
    iterations: usize,
}

/// One event of the trace, owned (records die with their callback).
struct Event {
    name: String,
    category: &'static str,
    begin_ns: u64,
    end_ns: u64,
    tid: u64,
}

/// Track ids of queues start here, above any thread id.
const QUEUE_TRACKS: u64 = 1 << 40;

fn collect(events: &Mutex<Vec<Event>>, batch: &Batch<'_>) {
    let mut out = events.lock().unwrap_or_else(|p| p.into_inner());
    for record in batch.records() {
        match record {
            Ok(Record::Profiler(d)) => out.push(Event {
                name: format!("kernel {:#x}", d.kernel_id()),
                category: "kernel",
                begin_ns: d.timestamps().begin,
                end_ns: d.timestamps().end,
                tid: QUEUE_TRACKS + d.queue_id(),
            }),
            Ok(Record::Tracer(t)) if t.phase() != Phase::Enter => out.push(Event {
                name: t
                    .name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| format!("op {}", t.operation_id())),
                category: "hip_runtime",
                begin_ns: t.timestamps().begin,
                end_ns: t.timestamps().end,
                tid: u64::from(t.thread_id()),
            }),
            Ok(_) => {}
            Err(e) => eprintln!("skipped a record: {e}"),
        }
    }
}

struct Hip {
    _lib: libloading::Library,
    malloc: unsafe extern "C" fn(*mut *mut c_void, usize) -> i32,
    memset: unsafe extern "C" fn(*mut c_void, i32, usize) -> i32,
    synchronize: unsafe extern "C" fn() -> i32,
    free: unsafe extern "C" fn(*mut c_void) -> i32,
}

fn load_hip() -> Result<Hip, Box<dyn std::error::Error>> {
    let rocm = std::env::var("ROCM_PATH").unwrap_or_else(|_| "/opt/rocm".into());
    let candidates = [
        format!("{rocm}/lib/libamdhip64.so"),
        "libamdhip64.so".into(),
    ];
    let mut last = None;
    for c in candidates {
        // SAFETY: opening the HIP runtime runs its initialisers; rocprofiler is already mapped, as it must be.
        match unsafe { libloading::Library::new(&c) } {
            // SAFETY: the HIP runtime's C functions, with their C signatures.
            Ok(lib) => unsafe {
                return Ok(Hip {
                    malloc: *lib.get(b"hipMalloc\0")?,
                    memset: *lib.get(b"hipMemset\0")?,
                    synchronize: *lib.get(b"hipDeviceSynchronize\0")?,
                    free: *lib.get(b"hipFree\0")?,
                    _lib: lib,
                });
            },
            Err(e) => last = Some(e),
        }
    }
    Err(match last {
        Some(e) => format!("no HIP runtime: {e}"),
        None => "no HIP runtime".to_string(),
    }
    .into())
}

fn hip_check(what: &str, status: i32) -> Result<(), Box<dyn std::error::Error>> {
    if status == 0 {
        Ok(())
    } else {
        Err(format!("{what} failed with hipError {status}").into())
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rocprof_trace: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Profiles, then writes the trace: nothing is written when profiling fails.
fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let events = profile(args)?;
    let mut json = Vec::new();
    write_chrome(&events, std::process::id(), &mut json)?;
    std::fs::write(&args.output, json)
        .map_err(|e| format!("cannot write {}: {e}", args.output.display()))?;
    let kernels = events.iter().filter(|e| e.category == "kernel").count();
    println!(
        "{} events ({kernels} kernel dispatches) written to {}",
        events.len(),
        args.output.display()
    );
    Ok(())
}

/// Profiles the workload; returns its events.
fn profile(args: &Args) -> Result<Vec<Event>, Box<dyn std::error::Error>> {
    let iterations = args.iterations;

    // 1. rocprofiler first: it must be mapped before the HIP runtime starts.
    let lib = RocprofilerLibrary::load()?;
    let rocprofiler = Rocprofiler::initialize(lib)?;
    let events: Arc<Mutex<Vec<Event>>> = Arc::default();
    {
        let session = ProfilingSession::new(&rocprofiler)?;
        let (e1, e2) = (Arc::clone(&events), Arc::clone(&events));
        let dispatches = session.create_buffer(1 << 20, move |b| collect(&e1, b))?;
        let api = session.create_buffer(1 << 20, move |b| collect(&e2, b))?;
        session.add_filter(Filter::dispatch_timestamps(), &dispatches)?;
        session.add_filter(Filter::api_trace([TraceDomain::HipApi]), &api)?;
        session.start()?;

        // 2. The workload, through the HIP runtime opened now.
        let hip = load_hip()?;
        let mut dev: *mut c_void = std::ptr::null_mut();
        let bytes = 64 << 20;
        // SAFETY: HIP calls with valid arguments; `dev` is freed below.
        unsafe {
            hip_check("hipMalloc", (hip.malloc)(&mut dev, bytes))?;
            for i in 0..iterations {
                hip_check("hipMemset", (hip.memset)(dev, i as i32, bytes))?;
            }
            hip_check("hipDeviceSynchronize", (hip.synchronize)())?;
            hip_check("hipFree", (hip.free)(dev))?;
        }
        session.terminate()?; // flushes: every record has been collected
    }
    let mut events = std::mem::take(&mut *events.lock().unwrap_or_else(|p| p.into_inner()));
    events.sort_by_key(|e| e.begin_ns);
    Ok(events)
}

/// The Chrome trace, through the library's writer: one group for the process, one track per queue for dispatches
/// and one per thread for HIP calls (threads first); times from the first event.
fn write_chrome(events: &[Event], pid: u32, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    let mut chrome = ChromeWriter::new(std::io::BufWriter::new(out));
    chrome.track(&Track {
        id: 1,
        parent: None,
        name: "rocprof_trace".into(),
        process: Some(TrackProcess {
            pid,
            name: "rocprof_trace".into(),
        }),
        sort: 0,
    })?;
    let t0 = events.iter().map(|e| e.begin_ns).min().unwrap_or(0);
    let mut named = std::collections::BTreeSet::new();
    for e in events {
        // Track 1 is the group; a thread or queue id of 1 moves up by one (ids are unique, never 0).
        let id = e.tid.max(1) + 1;
        if named.insert(id) {
            let name = if e.category == "kernel" {
                format!("queue {}", e.tid - QUEUE_TRACKS)
            } else {
                format!("thread {}", e.tid)
            };
            chrome.track(&Track {
                id,
                parent: Some(1),
                name,
                process: None,
                sort: i64::from(e.category == "kernel"),
            })?;
        }
        chrome.slice(&Slice {
            track: id,
            name: &e.name,
            category: e.category,
            start: e.begin_ns.saturating_sub(t0),
            end: e.end_ns.saturating_sub(t0),
            instant: false,
            args: Vec::new(),
            flow_out: None,
            flow_in: None,
            color: None,
        })?;
    }
    chrome.finish()?;
    chrome.into_inner()?;
    Ok(())
}
