//! `gpu-tools top` end to end without a GPU: the CUDA driver double (two devices) and the CUPTI profiling double,
//! which takes samples by itself with `GPU_TOOLS_DOUBLE_PM_PATTERN` (a character per sampling period: `1` a sample,
//! `0` none, `x` none with an overflow reported). Checks that every GPU is watched by default and `--device`
//! narrows, that gaps without a reported loss end in exit 0 and losses in exit 3, and the Prometheus exporter:
//! scraped over loopback, and refused before any sampling when its port is taken.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// `gpu-tools top ARGS` on the doubles: two GPUs sampled every millisecond, in `pattern`.
fn top_command(pattern: &str, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gpu-tools"));
    c.arg("top")
        .args(args)
        .env(
            "GPU_TOOLS_CUDA_DRIVER_LIB",
            gpu_tools_testing::double_path("cuda_driver"),
        )
        .env(
            "GPU_TOOLS_CUPTI_LIB",
            gpu_tools_testing::double_path("cupti_profiling"),
        )
        .env(
            "GPU_TOOLS_NVPERF_HOST_LIB",
            gpu_tools_testing::double_path("cupti_profiling"),
        )
        .env("GPU_TOOLS_DOUBLE_DEVICES", "2")
        .env("GPU_TOOLS_DOUBLE_TOP_METRICS", "1")
        .env("GPU_TOOLS_DOUBLE_PM_PATTERN", format!("1000:{pattern}"))
        .stdin(Stdio::null());
    c
}

fn top(pattern: &str, args: &[&str]) -> Output {
    let out = top_command(pattern, args)
        .output()
        .expect("run gpu-tools top");
    println!(
        "{args:?} ({pattern}): {}\n--- stdout\n{}--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The `N` of "... {what} ..." in the summary line of device `device`.
fn summary(stderr: &str, device: u32, what: &str) -> u64 {
    let line = stderr
        .lines()
        .find(|l| l.starts_with(&format!("gpu-tools top: device {device} (")))
        .unwrap_or_else(|| panic!("no summary of device {device}:\n{stderr}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    let at = words
        .iter()
        .position(|w| w.trim_end_matches(',') == what)
        .unwrap_or_else(|| panic!("no {what} in {line}"));
    words[at - 1].parse().unwrap()
}

#[test]
fn every_gpu_is_watched_by_default_and_gaps_are_not_losses() {
    // One period in ten without a sample, nothing reported lost: an idle GPU as an H100 showed it.
    let out = top(
        "1111111110",
        &["--duration", "1", "--interval", "200", "--json"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "gaps alone end well");
    let stdout = String::from_utf8_lossy(&out.stdout);
    for device in [0, 1] {
        assert!(
            stdout.contains(&format!("\"device\":{device},")),
            "device {device} has rows"
        );
        assert!(summary(&stderr, device, "samples") > 100);
        assert_eq!(summary(&stderr, device, "lost"), 0);
        assert!(summary(&stderr, device, "gaps") > 10, "{stderr}");
    }
    assert!(stderr.contains("none reported lost"), "{stderr}");
    // The JSON lines carry gaps apart from drops, and the double's values (metric i is base + i; the base is
    // 40 on device 0, 50 on device 1).
    let line = stdout
        .lines()
        .find(|l| l.contains("\"device\":1,") && !l.contains("\"samples\":0,"))
        .expect("a row of device 1 with samples");
    assert!(
        line.contains("\"dropped\":0,\"gaps\":") && line.contains("\"sm_active_pct\":50,"),
        "{line}"
    );
}

#[test]
fn device_narrows_the_view() {
    let out = top(
        "1",
        &["--duration", "0.5", "--interval", "100", "--device", "1"],
    );
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<&str> = stdout.lines().skip(1).collect();
    assert!(!rows.is_empty());
    assert!(
        rows.iter().all(|r| r.trim_start().starts_with("1 ")),
        "{stdout}"
    );
    assert!(stdout.lines().next().unwrap().contains("SM%"), "{stdout}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("device 0 ("), "{stderr}");
    assert_eq!(summary(&stderr, 1, "gaps"), 0);
}

#[test]
fn samples_lost_to_an_overflow_end_in_exit_3() {
    let out = top("11111x1111", &["--duration", "1", "--interval", "200"]);
    assert_eq!(out.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(summary(&stderr, 0, "lost") > 0, "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("(dropped "));
}

/// `GET /metrics` over loopback: the status line and the body.
fn scrape(addr: SocketAddr) -> (String, String) {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    s.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    (
        head.lines().next().unwrap_or("").to_string(),
        body.to_string(),
    )
}

#[test]
fn the_exporter_serves_every_gpu_on_loopback() {
    let mut child = top_command(
        "1111111110",
        &[
            "--duration",
            "4",
            "--interval",
            "100",
            "--prometheus",
            "127.0.0.1:0",
        ],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .expect("start gpu-tools top");
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut first = String::new();
    stderr.read_line(&mut first).unwrap();
    let addr: SocketAddr = first
        .trim()
        .strip_prefix("gpu-tools top: serving Prometheus metrics on http://")
        .and_then(|rest| rest.strip_suffix("/metrics"))
        .unwrap_or_else(|| panic!("{first}"))
        .parse()
        .unwrap();
    assert!(addr.ip().is_loopback());
    // Scrape until both GPUs' gauges are in (a refresh is 100 ms; bounded).
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut body = String::new();
    while Instant::now() < deadline {
        let (status, b) = scrape(addr);
        assert!(status.contains(" 200 "), "{status}");
        body = b;
        if body.matches("DCGM_FI_PROF_SM_ACTIVE{").count() == 2 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    println!("{body}");
    assert!(
        body.contains(
            "DCGM_FI_PROF_SM_ACTIVE{gpu=\"0\",model_name=\"gpu-tools test double\",Hostname="
        ) && body.contains("DCGM_FI_PROF_SM_ACTIVE{gpu=\"1\""),
        "{body}"
    );
    let sm1 = body
        .lines()
        .find(|l| l.starts_with("DCGM_FI_PROF_SM_ACTIVE{gpu=\"1\""))
        .unwrap();
    assert!(sm1.ends_with(" 0.5"), "a ratio: {sm1}");
    for family in [
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "DCGM_FI_PROF_SM_OCCUPANCY",
        "gpu_tools_dram_read_bytes_per_second",
        "gpu_tools_samples_total",
        "gpu_tools_sampling_gaps_total",
        "gpu_tools_samples_lost_total",
    ] {
        assert!(body.contains(&format!("# TYPE {family} ")), "{family}");
    }
    let status = child.wait().expect("top ends at its duration");
    let mut rest = String::new();
    stderr.read_to_string(&mut rest).unwrap();
    println!("{rest}");
    assert_eq!(status.code(), Some(0), "{rest}");
}

#[test]
fn a_taken_port_ends_top_before_any_gpu_is_touched() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    // No driver at all: the port is refused first.
    let out = Command::new(env!("CARGO_BIN_EXE_gpu-tools"))
        .args(["top", "--prometheus", &addr])
        .env("GPU_TOOLS_CUDA_DRIVER_LIB", "/nonexistent/libcuda.so.1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("cannot serve Prometheus metrics on {addr}"))
            && stderr.contains("in use"),
        "{stderr}"
    );
    assert!(!stderr.contains("libcuda"), "before the driver: {stderr}");
    assert!(out.stdout.is_empty());
    // An address that is not one: a usage error.
    let bad = Command::new(env!("CARGO_BIN_EXE_gpu-tools"))
        .args(["top", "--prometheus", "localhost:9400"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("IP address and port"));
}
