//! The exporter's tests: addresses, the exposition, staleness, and scrapes over loopback.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use gpu_tools::counters::top::{Top, TopColumn, TopGpu, TopRow, TopTotals};
use gpu_tools::counters::{
    CounterDevice, CounterInfo, DeviceCounters, DeviceSample, ReadStatus, SampleClock,
};
use gpu_tools::cupti::top::TopBuilder;

use super::exposition::{ExportGpu, exposition};
use super::*;
use crate::failure::Failure;

fn columns() -> Vec<TopColumn> {
    TopBuilder::new().exporter_metrics(true).columns()
}

fn h100(index: u32) -> TopGpu {
    TopGpu {
        index,
        name: "NVIDIA H100 80GB HBM3".into(),
        uuid: Some(format!("GPU-5c4b1a0e-7d2f-4e61-9a83-0f6b2d1c9e7{index}")),
    }
}

/// What a busy and an idle H100 gave over one refresh (means of the columns of [`columns`]).
fn busy_and_idle() -> Vec<ExportGpu> {
    vec![
        ExportGpu {
            gpu: h100(0),
            values: Some(vec![96.4, 41.2, 1.32e12, 6.6e11, 38.5, 62.5, 37.1]),
            totals: TopTotals {
                samples: 2923,
                lost: 0,
                gaps: 0,
                read_errors: 0,
                refreshes_with_samples: 3,
            },
            stale_scrapes: 0,
        },
        ExportGpu {
            gpu: h100(1),
            values: Some(vec![0.0, 0.0, 1.6e6, 2.0e5, f64::NAN, 0.01, 0.0]),
            totals: TopTotals {
                samples: 2707,
                lost: 0,
                gaps: 272,
                read_errors: 0,
                refreshes_with_samples: 3,
            },
            stale_scrapes: 0,
        },
    ]
}

#[test]
fn the_exposition_has_dcgm_names_ratios_labels_and_counters() {
    let text = exposition("node-7", &columns(), &busy_and_idle());
    let line = |prefix: &str| {
        text.lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix}:\n{text}"))
            .to_string()
    };
    let labels0 = "gpu=\"0\",UUID=\"GPU-5c4b1a0e-7d2f-4e61-9a83-0f6b2d1c9e70\",model_name=\"NVIDIA H100 80GB HBM3\",\
                   Hostname=\"node-7\"";
    assert_eq!(
        line("DCGM_FI_PROF_SM_ACTIVE{gpu=\"0\""),
        format!("DCGM_FI_PROF_SM_ACTIVE{{{labels0}}} 0.9640000000000001")
    );
    assert!(line("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{gpu=\"0\"").ends_with(" 0.41200000000000003"));
    assert!(line("DCGM_FI_PROF_DRAM_ACTIVE{gpu=\"0\"").ends_with(" 0.625"));
    assert!(line("DCGM_FI_PROF_SM_OCCUPANCY{gpu=\"0\"").ends_with(" 0.371"));
    assert!(line("gpu_tools_dram_read_bytes_per_second{gpu=\"0\"").ends_with(" 1320000000000"));
    assert!(line("gpu_tools_sampling_gaps_total{gpu=\"1\"").ends_with(" 272"));
    assert!(line("gpu_tools_samples_lost_total{gpu=\"1\"").ends_with(" 0"));
    assert!(line("gpu_tools_gpu_up{gpu=\"1\"").ends_with(" 1"));
    // A value that is not a number is left out, the GPU's other gauges stay.
    assert!(
        !text.contains("gpu_tools_sm_achieved_occupancy_ratio{gpu=\"1\""),
        "{text}"
    );
    assert!(text.contains("DCGM_FI_PROF_SM_ACTIVE{gpu=\"1\""));
    // Every family has its HELP and TYPE once, before its samples, counters end in _total.
    for l in text.lines().filter(|l| l.starts_with("# TYPE ")) {
        let name = l.split_whitespace().nth(2).unwrap();
        assert_eq!(
            text.matches(&format!("# TYPE {name} ")).count(),
            1,
            "{name}"
        );
        assert_eq!(
            text.matches(&format!("# HELP {name} ")).count(),
            1,
            "{name}"
        );
        if l.ends_with(" counter") {
            assert!(name.ends_with("_total"), "{name}");
        }
    }
    assert!(
        !text.contains("gpu_tools_device_metric"),
        "no user column: {text}"
    );
}

#[test]
fn a_stale_gpu_keeps_its_counters_and_loses_its_gauges() {
    let gpus = vec![h100(0), h100(1)];
    let mut state = State::new("h".into(), columns(), gpus.clone(), Duration::from_secs(3));
    let t0 = Instant::now();
    // Nothing read yet: both stale.
    let first = state.scrape(t0);
    assert!(
        first
            .iter()
            .all(|g| g.values.is_none() && g.stale_scrapes == 1)
    );
    let row = |index: u32, samples: usize, error: Option<&str>| TopRow {
        host_ns: 0,
        gpu_end_ns: 0,
        device: index,
        name: "NVIDIA H100 80GB HBM3".into(),
        samples,
        dropped: 0,
        gaps: 0,
        values: vec![50.0; 7],
        error: error.map(str::to_string),
    };
    let totals = |errors: u64| {
        vec![
            (
                gpus[0].clone(),
                TopTotals {
                    samples: 10,
                    ..TopTotals::default()
                },
            ),
            (
                gpus[1].clone(),
                TopTotals {
                    samples: 10,
                    read_errors: errors,
                    ..TopTotals::default()
                },
            ),
        ]
    };
    state.update(&[row(0, 10, None), row(1, 10, None)], &totals(0), t0);
    let text = state.body(t0 + Duration::from_secs(1));
    assert_eq!(text.matches("DCGM_FI_PROF_SM_ACTIVE{").count(), 2, "{text}");
    assert!(text.contains("DCGM_FI_PROF_SM_ACTIVE{gpu=\"1\",UUID=\"GPU-5c4b1a0e-7d2f-4e61-9a83-0f6b2d1c9e71\",model_name=\"NVIDIA H100 80GB HBM3\",Hostname=\"h\"} 0.5"));
    // GPU 1 stops answering: its read fails. Its gauges are left out, its counters stay and count.
    state.update(
        &[row(0, 10, None), row(1, 0, Some("decode failed"))],
        &totals(1),
        t0 + Duration::from_secs(2),
    );
    let text = state.body(t0 + Duration::from_secs(2));
    assert!(!text.contains("DCGM_FI_PROF_SM_ACTIVE{gpu=\"1\""), "{text}");
    assert!(text.contains("DCGM_FI_PROF_SM_ACTIVE{gpu=\"0\""));
    assert!(text.contains("gpu_tools_gpu_up{gpu=\"1\",") && text.contains("Hostname=\"h\"} 0\n"));
    assert!(text.contains("gpu_tools_read_errors_total{gpu=\"1\""));
    assert!(
        text.lines()
            .any(|l| l.starts_with("gpu_tools_stale_scrapes_total{gpu=\"1\"") && l.ends_with(" 2"))
    );
    // GPU 0 without a new sample for longer than stale_after: stale too.
    let late = state.scrape(t0 + Duration::from_secs(10));
    assert!(late[0].values.is_none());
    // Refreshes without samples but no error keep the last values while they are recent.
    state.update(
        &[row(0, 0, None), row(1, 10, None)],
        &totals(1),
        t0 + Duration::from_secs(11),
    );
    let now = state.scrape(t0 + Duration::from_secs(12));
    assert!(now[0].values.is_none() && now[1].values.is_some());
}

#[test]
fn user_columns_and_odd_names_are_exported_safely() {
    let columns = vec![
        TopColumn::for_counter("GRBM_COUNT"),
        TopColumn::for_counter("SQ_WAVES"),
    ];
    let gpus = vec![ExportGpu {
        gpu: TopGpu {
            index: 3,
            name: "AMD \"Instinct\"\nMI300X".into(),
            uuid: None,
        },
        values: Some(vec![1.5e9, 12.0]),
        totals: TopTotals::default(),
        stale_scrapes: 0,
    }];
    let text = exposition("a\\b", &columns, &gpus);
    assert!(
        text.contains(
            "gpu_tools_device_metric{gpu=\"3\",model_name=\"AMD \\\"Instinct\\\"\\nMI300X\",Hostname=\"a\\\\b\",metric=\"GRBM_COUNT\"} 1500000000\n"
        ),
        "{text}"
    );
    assert!(!text.contains("DCGM_"), "no DCGM counterpart: {text}");
    assert!(!text.contains("UUID"), "no UUID known: {text}");
}

#[test]
fn addresses_default_to_loopback() {
    assert_eq!(
        parse_listen("9400").unwrap(),
        "127.0.0.1:9400".parse().unwrap()
    );
    assert_eq!(
        parse_listen("0.0.0.0:9400").unwrap(),
        "0.0.0.0:9400".parse().unwrap()
    );
    assert_eq!(
        parse_listen("[::1]:9400").unwrap(),
        "[::1]:9400".parse().unwrap()
    );
    assert!(parse_listen(":9400").is_err());
    assert!(parse_listen("localhost:9400").is_err());
    assert!(parse_listen("70000").is_err());
}

#[test]
fn a_port_in_use_is_refused_clearly() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let Err(Failure::Message { code, message }) = bind(addr) else {
        panic!("bound a port in use")
    };
    assert_eq!(code, 1);
    assert!(
        message.contains(&addr.to_string()) && message.contains("in use"),
        "{message}"
    );
}

/// A sampler that answers twice, then fails: a GPU that stops answering.
struct Flaky {
    device: CounterDevice,
    counters: Vec<CounterInfo>,
    reads: u32,
}

impl DeviceCounters for Flaky {
    fn device(&self) -> &CounterDevice {
        &self.device
    }
    fn counters(&self) -> &[CounterInfo] {
        &self.counters
    }
    fn clock(&self) -> SampleClock {
        SampleClock::HostMonotonic
    }
    fn read(&mut self, _: Duration, out: &mut Vec<DeviceSample>) -> gpu_tools::Result<ReadStatus> {
        self.reads += 1;
        if self.device.index == 1 && self.reads > 2 {
            return Err(gpu_tools::LoadError::AlreadyLoaded {
                library: "the GPU's sampler",
                loaded: "/stopped".into(),
                requested: "/answering".into(),
            }
            .into());
        }
        let busy = if self.device.index == 0 { 96.0 } else { 0.0 };
        for i in 0..10 {
            out.push(DeviceSample {
                start_ns: i,
                end_ns: i + 1,
                values: vec![busy, busy / 2.0, 1e12, 5e11, 40.0, 60.0, 35.0],
            });
        }
        Ok(ReadStatus {
            samples: 10,
            dropped: 0,
            gaps: if self.device.index == 1 { 1 } else { 0 },
        })
    }
}

/// `GET path` over loopback; the status line and the body.
fn get(addr: SocketAddr, path: &str) -> (String, String) {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    s.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = head.lines().next().unwrap_or("").to_string();
    if path == "/metrics" && status.contains(" 200 ") {
        assert!(
            head.to_ascii_lowercase()
                .contains("content-type: text/plain; version=0.0.4"),
            "{head}"
        );
    }
    (status, body.to_string())
}

/// The exporter over a view of two fake GPUs, scraped over loopback while one stops answering. With
/// `GPU_TOOLS_PROMETHEUS_SAMPLE` set, writes the scraped exposition there (CI checks it with promtool).
#[test]
fn the_exporter_serves_scrapes_while_a_gpu_stops_answering() {
    let columns = columns();
    let mut top = Top::new(columns.clone());
    for index in 0..2 {
        top.watch(
            Box::new(Flaky {
                device: CounterDevice {
                    index,
                    name: "NVIDIA H100 80GB HBM3".into(),
                },
                counters: Vec::new(),
                reads: 0,
            }),
            Some(format!("GPU-00000000-0000-0000-0000-00000000000{index}")),
        );
    }
    let gpus = top.gpus().into_iter().cloned().collect();
    let state = State::new("test-host".into(), columns, gpus, Duration::from_secs(60));
    let exporter = Exporter::start(bind("127.0.0.1:0".parse().unwrap()).unwrap(), state).unwrap();
    let addr = exporter.addr();
    assert!(addr.ip().is_loopback() && addr.port() != 0);
    let (status, before) = get(addr, "/metrics");
    assert!(status.contains(" 200 "), "{status}");
    assert!(
        before.contains("gpu_tools_gpu_up{gpu=\"0\"")
            && !before.contains("DCGM_FI_PROF_SM_ACTIVE{"),
        "{before}"
    );
    for _ in 0..2 {
        let rows = top.read();
        exporter.update(&rows, &top.totals());
    }
    let (_, both) = get(addr, "/metrics");
    assert_eq!(both.matches("DCGM_FI_PROF_SM_ACTIVE{").count(), 2, "{both}");
    // GPU 1 stops answering.
    let rows = top.read();
    assert!(rows[1].error.is_some());
    exporter.update(&rows, &top.totals());
    let (status, after) = get(addr, "/metrics");
    assert!(status.contains(" 200 "), "{status}");
    assert!(
        after.contains("DCGM_FI_PROF_SM_ACTIVE{gpu=\"0\""),
        "{after}"
    );
    assert!(
        !after.contains("DCGM_FI_PROF_SM_ACTIVE{gpu=\"1\""),
        "{after}"
    );
    assert!(
        after
            .lines()
            .any(|l| l.starts_with("gpu_tools_read_errors_total{gpu=\"1\"") && l.ends_with(" 1"))
    );
    assert!(
        after
            .lines()
            .any(|l| l.starts_with("gpu_tools_sampling_gaps_total{gpu=\"1\"") && l.ends_with(" 2"))
    );
    let (status, _) = get(addr, "/elsewhere");
    assert!(status.contains(" 404 "), "{status}");
    let (status, _) = get(addr, "/");
    assert!(status.contains(" 200 "), "{status}");
    if let Some(path) = std::env::var_os("GPU_TOOLS_PROMETHEUS_SAMPLE") {
        std::fs::write(path, &after).unwrap();
    }
    exporter.stop();
    // The listener closes once the server's accept thread has seen the stop.
    let mut closed = false;
    for _ in 0..40 {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_err() {
            closed = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(closed, "stopped serving");
}

/// An exporter over two GPUs that have not answered yet, on a port of loopback.
fn idle_exporter() -> Exporter {
    let state = State::new(
        "h".into(),
        columns(),
        vec![h100(0), h100(1)],
        Duration::from_secs(3),
    );
    Exporter::start(bind("127.0.0.1:0".parse().unwrap()).unwrap(), state).unwrap()
}

#[test]
fn a_client_that_never_sends_the_body_it_announced_holds_up_no_other_scrape() {
    let exporter = idle_exporter();
    let addr = exporter.addr();
    let mut stalled = TcpStream::connect(addr).unwrap();
    write!(
        stalled,
        "POST /metrics HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 100000\r\n\r\n"
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let (status, body) = get(addr, "/metrics");
    assert!(status.contains(" 200 "), "{status}");
    assert!(body.contains("gpu_tools_gpu_up{gpu=\"1\""), "{body}");
    drop(stalled);
    exporter.stop();
}

#[test]
fn a_request_that_announces_a_huge_body_is_refused_and_the_server_goes_on() {
    let exporter = idle_exporter();
    let addr = exporter.addr();
    let mut huge = TcpStream::connect(addr).unwrap();
    huge.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        huge,
        "POST /metrics HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 1000000000000000\r\n\r\n"
    )
    .unwrap();
    let mut answer = [0u8; 12];
    huge.read_exact(&mut answer).unwrap();
    assert!(answer.starts_with(b"HTTP/1.1 4"), "{answer:?}");
    drop(huge);
    let (status, _) = get(addr, "/metrics");
    assert!(status.contains(" 200 "), "{status}");
    exporter.stop();
}

#[test]
fn a_client_that_reads_none_of_its_answers_holds_up_no_other_scrape() {
    let exporter = idle_exporter();
    let addr = exporter.addr();
    let mut greedy = TcpStream::connect(addr).unwrap();
    greedy
        .set_write_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let writer = std::thread::spawn(move || {
        let request = format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\n\r\n");
        for _ in 0..50_000 {
            if greedy.write_all(request.as_bytes()).is_err() {
                break;
            }
        }
        greedy
    });
    std::thread::sleep(Duration::from_secs(2));
    let (status, _) = get(addr, "/metrics");
    assert!(status.contains(" 200 "), "{status}");
    drop(writer.join().unwrap());
    exporter.stop();
}

#[test]
fn a_head_request_gets_the_headers_and_no_body() {
    let exporter = idle_exporter();
    let addr = exporter.addr();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        s,
        "HEAD /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    s.read_to_string(&mut response).unwrap();
    assert!(response.starts_with("HTTP/1.1 200 "), "{response}");
    assert!(response.ends_with("\r\n\r\n"), "{response}");
    assert!(
        response
            .to_ascii_lowercase()
            .contains("content-type: text/plain; version=0.0.4"),
        "{response}"
    );
    let (status, _) = get(addr, "/metrics");
    assert!(status.contains(" 200 "), "{status}");
    exporter.stop();
}

#[test]
fn a_counter_named_twice_is_exported_once() {
    let columns = vec![
        TopColumn::for_counter("GRBM_COUNT"),
        TopColumn::for_counter("GRBM_COUNT"),
    ];
    let gpus = vec![ExportGpu {
        gpu: h100(0),
        values: Some(vec![7.0, 7.0]),
        totals: TopTotals::default(),
        stale_scrapes: 0,
    }];
    let text = exposition("h", &columns, &gpus);
    assert_eq!(
        text.matches("gpu_tools_device_metric{").count(),
        1,
        "{text}"
    );
}
