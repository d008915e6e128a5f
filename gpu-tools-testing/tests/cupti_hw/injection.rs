//! Hardware tests of the injection library and `gpu-tools trace --backend cupti` (feature `nvidia-hw-tests`; an
//! NVIDIA GPU with CUDA 13). The workload is `debuggee_kernels`, run with `CUDA_INJECTION64_PATH` set to the injection
//! library and its stream written to files (`GPU_TOOLS_TRACE_FILE`), which the tests decode and check. Each test
//! prints what it saw.
//!
//! Finds the library, the examples and `gpu-tools` where `gpu_tools_testing` says: staged in `$GPU_STAGE_BIN`, or
//! built in `target/<profile>/` (`cargo build --release --workspace --examples`).
#![cfg(feature = "nvidia-hw-tests")]

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use gpu_tools::trace::*;
use gpu_tools_injection::env;
use gpu_tools_testing::{example, gpu_tools_cli, inject_lib};

/// A fresh folder for trace files.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("cupti_hw-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs `debuggee_kernels ARGS` under the injection library, writing `<dir>/trace-<pid>.bin`.
fn run_injected(dir: &Path, args: &[&str], vars: &[(&str, &str)]) -> Output {
    let mut c = Command::new(example("debuggee_kernels"));
    c.args(args)
        .env(env::CUDA_INJECTION, inject_lib())
        .env(env::FILE, dir.join("trace-%p.bin"))
        .env_remove(env::SOCKET)
        .env(env::LOG, "info");
    for (k, v) in vars {
        c.env(k, v);
    }
    let out = c.output().expect("run debuggee_kernels");
    println!(
        "debuggee_kernels {}: {}\n--- stdout\n{}--- stderr\n{}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// One decoded trace file.
#[derive(Debug, Default)]
struct Stream {
    header: Option<StreamHeader>,
    records: Vec<Record>,
    errors: Vec<WireError>,
}

impl Stream {
    fn kernels(&self) -> impl Iterator<Item = &KernelRecord> {
        self.records.iter().filter_map(|r| match r {
            Record::Kernel(k) => Some(k),
            _ => None,
        })
    }
    fn memcpys(&self) -> impl Iterator<Item = &MemcpyRecord> {
        self.records.iter().filter_map(|r| match r {
            Record::Memcpy(m) => Some(m),
            _ => None,
        })
    }
    fn memsets(&self) -> impl Iterator<Item = &MemsetRecord> {
        self.records.iter().filter_map(|r| match r {
            Record::Memset(m) => Some(m),
            _ => None,
        })
    }
    fn start(&self) -> Option<&ProcessStart> {
        self.records.iter().find_map(|r| match r {
            Record::ProcessStart(p) => Some(p),
            _ => None,
        })
    }
    fn end(&self) -> Option<&ProcessEnd> {
        self.records.iter().find_map(|r| match r {
            Record::ProcessEnd(p) => Some(p),
            _ => None,
        })
    }
    fn notices(&self) -> Vec<&Notice> {
        self.records
            .iter()
            .filter_map(|r| match r {
                Record::Notice(n) => Some(n),
                _ => None,
            })
            .collect()
    }
    fn dropped(&self) -> u64 {
        self.records
            .iter()
            .map(|r| match r {
                Record::Dropped(d) => d.count,
                _ => 0,
            })
            .sum()
    }
    fn describe(&self) -> String {
        let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
        for r in &self.records {
            let k = match r {
                Record::Kernel(_) => "kernel",
                Record::Memcpy(_) => "memcpy",
                Record::Memset(_) => "memset",
                Record::Api(_) => "api",
                Record::Synchronization(_) => "sync",
                Record::Overhead(_) => "overhead",
                Record::Dropped(_) => "dropped",
                Record::Notice(_) => "notice",
                Record::ProcessStart(_) => "start",
                Record::ProcessEnd(_) => "end",
                _ => "other",
            };
            *kinds.entry(k).or_default() += 1;
        }
        format!(
            "header {:?}; records {kinds:?}; errors {:?}; end {:?}; notices {:?}",
            self.header,
            self.errors,
            self.end(),
            self.notices()
        )
    }
}

/// Every trace file in `dir`, by pid.
fn read_traces(dir: &Path) -> BTreeMap<u32, Stream> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let file = std::fs::File::open(&path).unwrap();
        let mut reader = StreamReader::new(file);
        let mut s = Stream::default();
        for item in reader.by_ref() {
            match item {
                Ok(r) => s.records.push(r),
                Err(e) => s.errors.push(e),
            }
        }
        s.header = reader.header().copied();
        let pid = s.header.map_or(0, |h| h.pid);
        println!("{}: {}", path.display(), s.describe());
        out.insert(pid, s);
    }
    out
}

/// The number after `key` on the line of the debuggee's output that starts with `prefix`.
fn out_field(stdout: &str, prefix: &str, key: &str) -> u64 {
    let line = stdout
        .lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no line {prefix:?} in {stdout}"));
    line.split_whitespace()
        .skip_while(|w| *w != key)
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in {line:?}"))
}

const LAUNCHES: u64 = 200;

#[test]
fn streams_workload_is_traced_completely_and_in_order() {
    let dir = scratch("streams");
    let out = run_injected(&dir, &["streams", &LAUNCHES.to_string()], &[]);
    assert!(out.status.success(), "workload failed");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let traces = read_traces(&dir);
    assert_eq!(
        traces.len(),
        1,
        "one process, one stream: {:?}",
        traces.keys()
    );
    let (&pid, s) = traces.iter().next().unwrap();
    let h = s.header.expect("header");
    assert!(s.errors.is_empty(), "stream errors {:?}", s.errors);
    assert_eq!(
        h.clock,
        TimestampClock::Monotonic,
        "timestamps on CLOCK_MONOTONIC"
    );
    assert!(
        h.vendor_version >= 130_000,
        "CUPTI version {}",
        h.vendor_version
    );
    let start = s.start().expect("process start record");
    let end = s.end().expect("process end record: the exit handler ran");
    assert_eq!(start.pid, pid);
    assert_eq!(end.reason, EndReason::Exit);
    assert_eq!(
        end.records + 1,
        s.records.len() as u64,
        "every record sent arrived"
    );
    assert_eq!((end.dropped, s.dropped(), end.callback_panics), (0, 0, 0));
    assert!(
        s.notices().iter().all(|n| n.level != NoticeLevel::Error),
        "{:?}",
        s.notices()
    );

    // Every launch has exactly one kernel record.
    let kernels: Vec<&KernelRecord> = s.kernels().collect();
    let add_one: Vec<&&KernelRecord> = kernels
        .iter()
        .filter(|k| k.name.contains("add_one"))
        .collect();
    let final_step: Vec<&&KernelRecord> = kernels
        .iter()
        .filter(|k| &*k.name == "final_step")
        .collect();
    println!(
        "kernels: {} add_one, {} final_step, {} in all",
        add_one.len(),
        final_step.len(),
        kernels.len()
    );
    assert_eq!(add_one.len() as u64, 2 * LAUNCHES);
    assert_eq!(
        final_step.len(),
        1,
        "the last kernel before exit is not lost"
    );
    assert_eq!(kernels.len() as u64, 2 * LAUNCHES + 1);
    let correlations: HashSet<u32> = kernels.iter().map(|k| k.correlation).collect();
    assert_eq!(
        correlations.len(),
        kernels.len(),
        "one record per launch (distinct correlation ids)"
    );

    // Two streams with LAUNCHES kernels each; compare their ids with what the program read from the driver.
    let mut per_stream: BTreeMap<u32, usize> = BTreeMap::new();
    for k in &add_one {
        *per_stream.entry(k.stream).or_default() += 1;
    }
    println!("add_one kernels per stream id: {per_stream:?}");
    assert_eq!(per_stream.len(), 2);
    assert!(per_stream.values().all(|&n| n as u64 == LAUNCHES));
    let program_ids: HashSet<u64> = (0..2)
        .map(|t| out_field(&stdout, &format!("thread {t} "), "stream_id"))
        .collect();
    let trace_ids: HashSet<u64> = per_stream.keys().map(|&s| u64::from(s)).collect();
    println!(
        "stream ids: cuStreamGetId {program_ids:?}, CUPTI {trace_ids:?}: {}",
        if program_ids == trace_ids {
            "same"
        } else {
            "DIFFERENT"
        }
    );
    let ctx = out_field(&stdout, "workload streams", "context_id");
    let trace_ctx: HashSet<u32> = kernels.iter().map(|k| k.context).collect();
    println!("context ids: cuCtxGetId {ctx}, CUPTI {trace_ctx:?}");

    // Durations are positive; work of one stream does not overlap and keeps its order; timestamps lie between the
    // process's start and end on the same clock.
    let mut ops: HashMap<u32, Vec<(u64, u64, &str)>> = HashMap::new();
    for k in &kernels {
        assert!(
            k.end > k.start,
            "kernel {} of duration {}",
            k.name,
            k.duration()
        );
        ops.entry(k.stream)
            .or_default()
            .push((k.start, k.end, "kernel"));
    }
    for m in s.memcpys() {
        assert!(m.end > m.start, "memcpy of duration 0: {m:?}");
        ops.entry(m.stream)
            .or_default()
            .push((m.start, m.end, "memcpy"));
    }
    for m in s.memsets() {
        assert!(m.end > m.start, "memset of duration 0: {m:?}");
        ops.entry(m.stream)
            .or_default()
            .push((m.start, m.end, "memset"));
    }
    for (stream, list) in &mut ops {
        list.sort();
        for w in list.windows(2) {
            assert!(
                w[1].0 >= w[0].1,
                "stream {stream}: {} at {}..{} overlaps the {} before it ({}..{})",
                w[1].2,
                w[1].0,
                w[1].1,
                w[0].2,
                w[0].0,
                w[0].1
            );
        }
        let first = list.first().unwrap().0;
        let last = list.last().unwrap().1;
        assert!(
            first >= start.time && last <= end.time,
            "stream {stream}: work {first}..{last} outside the process's {}..{} (not one clock?)",
            start.time,
            end.time
        );
    }

    // Every copy has the right size: per thread's stream, LAUNCHES copies each way of the sizes it printed, the
    // set of the whole buffer, and the last copy before exit.
    let mut sizes: BTreeMap<(CopyKind, u64), usize> = BTreeMap::new();
    for m in s.memcpys() {
        *sizes.entry((m.kind, m.bytes)).or_default() += 1;
    }
    println!("memcpys by (kind, bytes): {sizes:?}");
    for t in 0..2 {
        let prefix = format!("thread {t} ");
        let up = out_field(&stdout, &prefix, "htod_bytes");
        let down = out_field(&stdout, &prefix, "dtoh_bytes");
        assert_eq!(
            sizes.get(&(CopyKind::HtoD, up)).copied(),
            Some(LAUNCHES as usize),
            "HtoD {up}"
        );
        assert_eq!(
            sizes.get(&(CopyKind::DtoH, down)).copied(),
            Some(LAUNCHES as usize),
            "DtoH {down}"
        );
    }
    let last_copy = out_field(&stdout, "final ", "dtoh_bytes");
    assert_eq!(
        sizes.get(&(CopyKind::DtoH, last_copy)).copied(),
        Some(1),
        "the last copy before exit is not lost"
    );
    let sets: Vec<&MemsetRecord> = s.memsets().collect();
    println!(
        "memsets: {:?}",
        sets.iter()
            .map(|m| (m.bytes, m.value, m.stream))
            .collect::<Vec<_>>()
    );
    assert_eq!(sets.len(), 2);
    assert!(sets.iter().all(|m| m.bytes == 1 << 20 && m.value == 0x5a));

    // The API record of each kernel, by correlation id.
    let api: HashMap<u32, &ApiRecord> = s
        .records
        .iter()
        .filter_map(|r| match r {
            Record::Api(a) => Some((a.correlation, a)),
            _ => None,
        })
        .collect();
    let mut callers: BTreeMap<&str, usize> = BTreeMap::new();
    for k in &kernels {
        let a = api
            .get(&k.correlation)
            .unwrap_or_else(|| panic!("no API record for kernel correlation {}", k.correlation));
        *callers.entry(&a.name).or_default() += 1;
        assert!(
            a.start <= k.start,
            "the launch call starts before its kernel"
        );
    }
    println!("kernels by calling API: {callers:?}");
    assert_eq!(callers.get("cuLaunchKernel").copied(), Some(kernels.len()));
}

#[test]
fn a_forked_child_writes_nothing_and_the_parent_loses_nothing() {
    let dir = scratch("fork");
    let out = run_injected(&dir, &["fork", "5"], &[]);
    assert!(out.status.success());
    let traces = read_traces(&dir);
    assert_eq!(traces.len(), 1, "only the parent writes a stream");
    let s = traces.values().next().unwrap();
    assert!(s.errors.is_empty());
    assert_eq!(
        s.kernels().count(),
        10,
        "5 launches before the fork, 5 after"
    );
    assert!(
        s.end().is_some(),
        "the parent's exit handler ran; the child's did not write"
    );
}

#[test]
fn an_execd_child_that_uses_cuda_gets_its_own_stream() {
    let dir = scratch("fork-exec");
    let out = run_injected(&dir, &["fork-exec", "5"], &[]);
    assert!(out.status.success());
    let traces = read_traces(&dir);
    assert_eq!(traces.len(), 2, "parent and child");
    let mut counts: Vec<usize> = traces.values().map(|s| s.kernels().count()).collect();
    counts.sort();
    assert_eq!(counts, [5, 10]);
    assert!(
        traces
            .values()
            .all(|s| s.end().is_some() && s.errors.is_empty())
    );
}

#[test]
fn a_program_that_never_uses_cuda_runs_untouched() {
    let dir = scratch("nocuda");
    let out = run_injected(&dir, &["nocuda"], &[]);
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "no cuda\n");
    assert!(
        read_traces(&dir).is_empty(),
        "CUDA never loaded the library"
    );
}

#[test]
fn a_crash_keeps_the_records_flushed_before_it() {
    let dir = scratch("crash");
    // 20 launches, a pause of 5 flush intervals, then SIGABRT.
    let out = run_injected(&dir, &["crash", "20", "500"], &[(env::FLUSH_MS, "100")]);
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&out.status),
        Some(6),
        "the program aborts"
    );
    let traces = read_traces(&dir);
    assert_eq!(traces.len(), 1);
    let s = traces.values().next().unwrap();
    // No exit handler ran; the library's SIGABRT handler flushed and ended the stream, then the program died.
    assert!(
        matches!(s.end(), Some(e) if e.reason == EndReason::Signal(6)),
        "{:?}",
        s.end()
    );
    assert_eq!(s.kernels().count(), 20, "every kernel before the crash");
}

#[test]
fn a_tiny_buffer_pool_reports_dropped_records() {
    let dir = scratch("drops");
    let out = run_injected(
        &dir,
        &["launch-raw", "20000"],
        &[
            (env::BUFFER_SIZE, "4k"),
            (env::MAX_BUFFERS, "1"),
            (env::FLUSH_MS, "0"),
            (env::KINDS, "kernel"),
        ],
    );
    assert!(out.status.success());
    let traces = read_traces(&dir);
    let s = traces.values().next().expect("a stream");
    let end = s.end().expect("end record");
    let kernels = s.kernels().count() as u64;
    println!(
        "kernels received {kernels}, dropped records {} (end record says {})",
        s.dropped(),
        end.dropped
    );
    assert!(end.dropped > 0 && s.dropped() > 0, "drops are reported");
    assert_eq!(s.dropped(), end.dropped);
    assert!(kernels < 20_000);
}

#[test]
fn cuda_trace_shows_the_workload() {
    let dir = scratch("cuda_trace");
    let chrome = dir.join("trace.json");
    let out = Command::new(gpu_tools_cli())
        .args(["trace", "--backend", "cupti", "--chrome-trace"])
        .arg(&chrome)
        .arg("--inject-lib")
        .arg(inject_lib())
        .args(["--quiet", "--"])
        .arg(example("debuggee_kernels"))
        .args(["streams", "50"])
        .output()
        .expect("run gpu-tools trace");
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!(
        "gpu-tools trace: {}\n{stdout}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success());
    // 100 add_one + final_step; 50 copies each way on two streams, the first copy of the program's buffer and
    // the last copy; a set per stream.
    assert!(
        stdout.contains("1 process, 101 kernels, 202 memcpys, 2 memsets"),
        "summary line"
    );
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&chrome).unwrap()).expect("valid JSON");
    let events = json["traceEvents"].as_array().unwrap();
    let streams: HashSet<&str> = events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .filter_map(|e| e["args"]["name"].as_str())
        .filter(|n| n.starts_with("stream "))
        .collect();
    println!("stream tracks: {streams:?}");
    assert!(streams.len() >= 2);
    let kernels = events
        .iter()
        .filter(|e| e["ph"] == "X" && e["cat"] == "kernel")
        .count();
    assert_eq!(kernels, 101);
    let _ = std::fs::remove_dir_all(&dir);
}

use gpu_tools_testing::kernels;

/// The library's own layer on the device, in this process: an `ActivityTracer` and a `Subscriber` at once. The
/// subscriber's launch callbacks, the driver API records and the kernel records agree on correlation ids; kernel
/// times lie on `Clock::Monotonic` between readings taken before and after; resource callbacks name the module and
/// the streams; the one-tracer and one-subscriber rules hold against the real CUPTI.
#[test]
fn in_process_tracer_and_subscriber_tie_api_calls_to_kernels() {
    use std::ffi::c_void;
    use std::sync::{Arc, Mutex};

    use gpu_tools::cuda::Context;
    use gpu_tools::cupti::activity::{Activity, ActivityKinds, ActivityTracer, Clock, FlushMode};
    use gpu_tools::cupti::callback::{
        ApiSite, CallbackDomain, CallbackEvent, ResourceKind, Subscriber,
    };
    use gpu_tools::cupti::{DriverCbid, TracingError};

    const N: u64 = 100;
    let launches: Arc<Mutex<Vec<u32>>> = Arc::default();
    let resources: Arc<Mutex<Vec<(ResourceKind, usize)>>> = Arc::default();
    let (l, r) = (Arc::clone(&launches), Arc::clone(&resources));
    let sub = Subscriber::builder()
        .name("gpu-tools cupti_hw")
        .subscribe(move |event| match event {
            CallbackEvent::Api(call) if call.site() == ApiSite::Enter => {
                l.lock().unwrap().push(call.correlation_id());
            }
            CallbackEvent::Resource(res) => {
                let cubin = res.module().map_or(0, |m| m.cubin.len());
                r.lock().unwrap().push((res.kind(), cubin));
            }
            _ => {}
        })
        .expect("subscribe");
    sub.enable_driver(DriverCbid::LAUNCH_KERNEL)
        .expect("enable cuLaunchKernel");
    sub.enable_domain(CallbackDomain::Resource)
        .expect("enable resources");
    let second = Subscriber::new(|_| {});
    println!("second subscriber: {:?}", second.as_ref().err());
    assert!(matches!(
        second,
        Err(gpu_tools::Error::Tracing(
            TracingError::AlreadySubscribed { .. }
        ))
    ));

    // (kind, correlation, start, end, name or API function)
    type Seen = (&'static str, u32, u64, u64, String);
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let s = Arc::clone(&seen);
    let before = Clock::Monotonic.now_ns();
    let tracer = ActivityTracer::builder()
        .kinds(ActivityKinds::CONCURRENT_KERNEL | ActivityKinds::DRIVER | ActivityKinds::MEMCPY)
        .clock(Clock::Monotonic)
        .start(move |batch| {
            let mut s = s.lock().unwrap();
            for record in batch.records().flatten() {
                match record {
                    Activity::Kernel(k) => s.push((
                        "kernel",
                        k.correlation_id(),
                        k.time().start,
                        k.time().end,
                        k.name()
                            .map(|n| n.to_string_lossy().into_owned())
                            .unwrap_or_default(),
                    )),
                    Activity::Api(a) => s.push((
                        "api",
                        a.correlation_id(),
                        a.time().start,
                        a.time().end,
                        a.function_name().unwrap_or("?").to_string(),
                    )),
                    Activity::Memcpy(m) => s.push((
                        "memcpy",
                        m.correlation_id(),
                        m.time().start,
                        m.time().end,
                        m.bytes().to_string(),
                    )),
                    _ => {}
                }
            }
        })
        .expect("tracer starts");
    assert!(matches!(
        ActivityTracer::builder().start(|_| {}),
        Err(gpu_tools::Error::Tracing(TracingError::TracerActive))
    ));
    println!("tracer: {tracer:?}");

    let ctx = Context::primary(0).expect("context");
    let module = ctx.load_module(kernels::STEP_PTX).expect("module");
    let step = module.function(c"step").expect("step");
    let stream = ctx.create_stream().expect("stream");
    let words: u64 = 1 << 12;
    let buf = ctx.alloc((words * 4) as usize).expect("buffer");
    let mut ptr = buf.device_ptr();
    let mut n = words;
    let mut params = [
        (&raw mut ptr).cast::<c_void>(),
        (&raw mut n).cast::<c_void>(),
    ];
    for _ in 0..N {
        // SAFETY: step takes (u32*, u64 n) and the buffer holds n words; it outlives the synchronize below.
        unsafe { stream.launch(&step, (4, 1, 1), (128, 1, 1), &mut params) }.expect("launch");
    }
    stream.synchronize().expect("synchronize");
    let mut host = vec![0u8; 4096];
    buf.copy_to_host(&mut host).expect("copy");
    drop(stream);
    let after = Clock::Monotonic.now_ns();
    tracer.flush_all(FlushMode::Forced).expect("flush");
    let report = tracer.stop().expect("stop");
    println!("tracer report: {report:?}");
    assert!(report.dropped.is_empty() && report.panic.is_none());
    sub.unsubscribe().expect("unsubscribe");

    let seen = seen.lock().unwrap();
    let kernels: Vec<&Seen> = seen.iter().filter(|r| r.0 == "kernel").collect();
    let apis: Vec<&Seen> = seen.iter().filter(|r| r.0 == "api").collect();
    println!(
        "records: {} kernels, {} API calls, {} memcpys; window {before}..{after}",
        kernels.len(),
        apis.len(),
        seen.iter().filter(|r| r.0 == "memcpy").count()
    );
    assert_eq!(kernels.len() as u64, N);
    assert!(kernels.iter().all(|k| k.4 == "step"));
    let launched = launches.lock().unwrap();
    let api_corr: HashMap<u32, &str> = apis.iter().map(|a| (a.1, a.4.as_str())).collect();
    for k in &kernels {
        assert!(
            launched.contains(&k.1),
            "kernel correlation {} not seen by the subscriber",
            k.1
        );
        assert_eq!(
            api_corr.get(&k.1).copied(),
            Some("cuLaunchKernel"),
            "API record of correlation {}",
            k.1
        );
        assert!(
            k.2 >= before && k.3 <= after && k.3 > k.2,
            "kernel {}..{} outside {before}..{after}",
            k.2,
            k.3
        );
    }
    assert!(seen.iter().any(|r| r.0 == "memcpy" && r.4 == "4096"));
    let res = resources.lock().unwrap();
    println!("resource callbacks: {res:?}");
    // The module's cubin size is printed above; for a PTX module it is what the driver compiled.
    assert!(res.iter().any(|(k, _)| *k == ResourceKind::ModuleLoaded));
    assert!(res.iter().any(|(k, _)| *k == ResourceKind::StreamCreated));
    assert!(
        res.iter()
            .any(|(k, _)| *k == ResourceKind::StreamDestroyStarting)
    );
}
