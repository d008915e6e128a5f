//! `gpu-tools profile --pid PID`: profiling a process that already runs. The injection library is loaded into it
//! with the profile request in its attach settings; it profiles the contexts the process has active, sends what it
//! collects over a socket, and when this side sends the stop byte, ends the stream and leaves the process as it
//! was.

use std::io::Write;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use gpu_tools::linux::inject::{Injection, TargetFilesystem};
use gpu_tools::profile::{ProfileRequest, ProfileRun};
use gpu_tools::trace::StreamReader;
use gpu_tools::trace::env::{self, Destination, InjectionEnv, TraceKind};

use crate::failure::Failure;

/// How long the process gets to connect after the injection.
const CONNECT: Duration = Duration::from_secs(20);

pub fn run(
    pid: u32,
    lib: &Path,
    request: &ProfileRequest,
    duration: Option<f64>,
) -> Result<ProfileRun, Failure> {
    crate::pid::check(pid)?;
    if duration.is_some_and(|d| !(d.is_finite() && d > 0.0)) {
        return Err(Failure::new(
            2,
            "--duration must be a positive number of seconds",
        ));
    }
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = Arc::clone(&stop);
        if let Err(e) = ctrlc::set_handler(move || stop.store(true, Ordering::SeqCst)) {
            log::warn!("no Ctrl-C handler: {e}");
        }
    }
    let fs = TargetFilesystem::for_process(pid).map_err(|e| Failure::new(1, e.to_string()))?;
    let dir = tempfile::Builder::new()
        .prefix("gpu-tools-profile-")
        .tempdir()
        .map_err(|e| Failure::new(1, format!("cannot make a socket folder: {e}")))?;
    let (here, in_target): (PathBuf, PathBuf) = if fs.is_shared() {
        let p = dir.path().join("profile.sock");
        (p.clone(), p)
    } else {
        let t = PathBuf::from(format!(
            "/tmp/gpu-tools-profile-{}-{pid}.sock",
            std::process::id()
        ));
        (fs.host_path(&t), t)
    };
    let listener = UnixListener::bind(&here)
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .map_err(|e| Failure::new(1, format!("cannot listen on {}: {e}", here.display())))?;
    let cupti = gpu_tools::cupti::CuptiLibrary::load().ok().and_then(|l| {
        l.path()
            .map(Path::to_path_buf)
            .or_else(|| gpu_tools::linux::procfs::Process::current().mapped_library("libcupti.so"))
    });
    let mut settings = InjectionEnv::new(lib, Destination::Socket(in_target))
        .kinds(&[TraceKind::Kernel])
        .signals(false)
        .attach_argument(cupti.as_deref())
        .ok_or_else(|| Failure::new(1, "a setting holds a newline"))?;
    for (k, v) in request.env() {
        settings.push_str(&format!("{k}={v}\n"));
    }
    let done = Injection::new(pid, lib, env::ATTACH_ENTRY)
        .argument(settings)
        .require_library("libcuda.so")
        .run();
    let cleanup = || {
        if !fs.is_shared() {
            let _ = std::fs::remove_file(&here);
        }
    };
    match done {
        Ok(d) if d.entry_result == 0 => {}
        Ok(d) => {
            cleanup();
            return Err(Failure::new(
                1,
                format!(
                    "process {pid}: not profiled: the injection library's entry point returned {} (1: it is \
                     already traced or profiled by gpu-tools)",
                    d.entry_result
                ),
            ));
        }
        Err(e) => {
            cleanup();
            return Err(Failure::new(1, e.to_string()));
        }
    }
    let deadline = Instant::now() + CONNECT;
    let conn = loop {
        match listener.accept() {
            Ok((c, _)) => break c,
            Err(_) if Instant::now() < deadline && !stop.load(Ordering::SeqCst) => {
                std::thread::sleep(Duration::from_millis(10))
            }
            Err(e) => {
                cleanup();
                return Err(Failure::new(
                    1,
                    format!("process {pid} did not connect after the injection: {e}"),
                ));
            }
        }
    };
    let _ = conn.set_nonblocking(false);
    let mut control = conn
        .try_clone()
        .map_err(|e| Failure::new(1, format!("the connection: {e}")))?;
    let reader = std::thread::spawn(move || {
        let mut out = ProfileRun {
            runs: 1,
            processes: 1,
            ..ProfileRun::default()
        };
        gpu_tools::profile::collect(StreamReader::new(std::io::BufReader::new(conn)), &mut out);
        out
    });
    let until = duration.map(|d| Instant::now() + Duration::from_secs_f64(d));
    eprintln!(
        "gpu-tools profile: profiling process {pid} (Ctrl-C to stop{})",
        duration
            .map(|d| format!(", or after {d} s"))
            .unwrap_or_default()
    );
    while !stop.load(Ordering::SeqCst)
        && !until.is_some_and(|u| Instant::now() >= u)
        && !reader.is_finished()
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = control.write_all(&[env::ATTACH_STOP]);
    let run = reader
        .join()
        .map_err(|_| Failure::new(1, "reading the profile stream failed"))?;
    cleanup();
    if run.ended == 0 {
        eprintln!(
            "gpu-tools profile: process {pid} ended its stream without its end record (it exited meanwhile?)"
        );
    }
    Ok(run)
}
