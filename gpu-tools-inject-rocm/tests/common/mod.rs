//! Running a Python program that loads the rocprofiler-sdk double with this library named in
//! `ROCP_TOOL_LIBRARIES`, and reading the trace it streams to the test over a Unix socket.

use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::process::Command;

use gpu_tools::trace::{Record, StreamHeader, StreamReader};
use gpu_tools_injection::env;

/// This library, as the workspace built it.
pub fn tool_library() -> PathBuf {
    gpu_tools_testing::inject_rocm_lib()
}

/// The rocprofiler-sdk double (`gpu-tools-testing/doubles/rocprofiler_sdk.c`).
pub fn double() -> PathBuf {
    gpu_tools_testing::double_path("rocprofiler_sdk")
}

/// The records of a Python program that loads the double as `d` and runs `body`, traced with `kinds`, with `envs`
/// set too; `tag` names the run's folder (unique per test).
pub fn trace_python(tag: &str, body: &str, kinds: &str, envs: &[(&str, &str)]) -> Vec<Record> {
    trace_python_with_header(tag, body, kinds, envs).1
}

/// As [`trace_python`], with the stream's header.
pub fn trace_python_with_header(
    tag: &str,
    body: &str,
    kinds: &str,
    envs: &[(&str, &str)],
) -> (StreamHeader, Vec<Record>) {
    let dir = std::env::temp_dir().join(format!("gpu-tools-rocm-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let socket = dir.join("trace.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    let program = format!(
        "import ctypes\nd = ctypes.CDLL({:?}, mode=ctypes.RTLD_GLOBAL)\n{body}",
        double().display().to_string()
    );
    let mut child = Command::new("python3")
        .args(["-c", &program])
        .env("ROCP_TOOL_LIBRARIES", tool_library())
        .env(gpu_tools::rocprofiler_sdk::ENV_VAR, double())
        .env(env::SOCKET, &socket)
        .env(env::KINDS, kinds)
        .envs(envs.iter().copied())
        .spawn()
        .expect("python3 runs");
    // A program that never connects (its tool library not loaded) fails the test instead of hanging it.
    listener.set_nonblocking(true).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let conn = loop {
        match listener.accept() {
            Ok((conn, _)) => break conn,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if let Some(status) = child.try_wait().unwrap() {
                    panic!("the program ended ({status}) without connecting");
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "no connection in 60 s"
                );
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(e) => panic!("accept: {e}"),
        }
    };
    conn.set_nonblocking(false).unwrap();
    let mut reader = StreamReader::new(conn);
    let records: Vec<Record> = reader
        .by_ref()
        .map(|r| r.expect("the stream decodes"))
        .collect();
    let header = *reader.header().expect("the stream's header");
    assert!(child.wait().unwrap().success());
    std::fs::remove_dir_all(&dir).unwrap();
    (header, records)
}
