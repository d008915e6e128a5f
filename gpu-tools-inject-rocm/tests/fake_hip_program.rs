//! The tool library end to end: a fake HIP program (a separate `python3` process that loads the rocprofiler-sdk
//! double and runs its fake program: the runtime starts, a code object loads, kernels run, copies, API calls,
//! markers, records of kinds newer than the bindings, exit) with this library named in `ROCP_TOOL_LIBRARIES`,
//! streaming to this test over a Unix socket; the stream is decoded and printed as a tracer lists it.

use std::collections::BTreeMap;
use std::os::unix::net::UnixListener;
use std::process::Command;

use gpu_tools::trace::{ApiDomain, CopyKind, Record, StreamReader, TimestampClock};
use gpu_tools_injection::env;

mod common;

use common::{double, tool_library, trace_python};

fn demangle(name: &str) -> String {
    cpp_demangle::Symbol::new(name)
        .ok()
        .and_then(|s| s.demangle().ok())
        .unwrap_or_else(|| name.to_string())
}

#[test]
fn a_fake_hip_program_is_traced_through_the_double() {
    let dir = std::env::temp_dir().join(format!("gpu-tools-rocm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let socket = dir.join("trace.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    let double = double();
    let program = format!(
        "import ctypes\nd = ctypes.CDLL({:?}, mode=ctypes.RTLD_GLOBAL)\nd.rpsdk_fake_hip_program(6)\nprint('fake HIP program done')",
        double.display().to_string()
    );
    let mut child = Command::new("python3")
        .args(["-c", &program])
        .env("ROCP_TOOL_LIBRARIES", tool_library())
        .env(gpu_tools::rocprofiler_sdk::ENV_VAR, &double)
        .env(env::SOCKET, &socket)
        .env(env::KINDS, "kernel,memcpy,runtime")
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
                    panic!("the fake HIP program ended ({status}) without connecting");
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
    let mut records = Vec::new();
    for item in reader.by_ref() {
        records.push(item.expect("the stream decodes"));
    }
    let header = *reader.header().unwrap();
    assert!(child.wait().unwrap().success());
    std::fs::remove_dir_all(&dir).unwrap();

    println!(
        "stream of pid {}: rocprofiler-sdk {}, clock {:?}",
        header.pid, header.vendor_version, header.clock
    );
    assert_eq!(
        (header.vendor_version, header.clock),
        (10000, TimestampClock::Unspecified)
    );
    let mut kernels: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let (mut apis, mut copies) = (Vec::new(), 0);
    for r in &records {
        match r {
            Record::Kernel(k) => {
                let name = demangle(&k.name);
                println!(
                    "  kernel  {:>8} ns  device {} stream {} corr {:>2}  grid {:?} block {:?}  {name}",
                    k.duration(),
                    k.device,
                    k.stream,
                    k.correlation,
                    k.grid,
                    k.block
                );
                let e = kernels.entry(name).or_default();
                e.0 += 1;
                e.1 += k.duration();
            }
            Record::Memcpy(m) => {
                copies += 1;
                println!(
                    "  memcpy  {:>8} ns  {} {} bytes corr {}",
                    m.duration(),
                    m.kind.name(),
                    m.bytes,
                    m.correlation
                );
            }
            Record::Api(a) => {
                println!(
                    "  {:<6}  {:>8} ns  {} corr {}",
                    a.domain.name(),
                    a.end - a.start,
                    a.name,
                    a.correlation
                );
                apis.push((a.domain, a.name.to_string()));
            }
            Record::ProcessEnd(e) => println!(
                "  end: {} records sent, {} dropped, {} skipped (kinds not carried), {} callback panics",
                e.records, e.dropped, e.skipped, e.callback_panics
            ),
            other => println!("  {other:?}"),
        }
    }
    println!("summary:");
    for (name, (count, total)) in &kernels {
        println!(
            "  {count:>3} × {name}: total {total} ns, mean {} ns",
            total / count
        );
    }
    assert_eq!(
        kernels.keys().map(String::as_str).collect::<Vec<_>>(),
        ["kernel1(float*, int)", "kernel2(float*, int)"]
    );
    assert_eq!(kernels.values().map(|v| v.0).sum::<u64>(), 6);
    assert_eq!(copies, 2);
    assert_eq!(
        apis.iter()
            .filter(|(d, n)| *d == ApiDomain::Hip && n == "hipLaunchKernel")
            .count(),
        6
    );
    assert_eq!(
        apis.iter().filter(|(d, _)| *d == ApiDomain::Marker).count(),
        1
    );
    let Some(Record::ProcessEnd(end)) = records.last() else {
        panic!("the stream ends with its end record")
    };
    // Everything sent arrived (the end record itself is not counted); the newer kinds were skipped, not lost.
    assert_eq!(end.records + 1, records.len() as u64);
    assert_eq!((end.dropped, end.skipped, end.callback_panics), (0, 2, 0));
}

#[test]
fn a_device_to_device_copy_between_two_gpus_is_peer_to_peer() {
    // Agents 0x1001 and 0x1002 are the double's two GPUs; 4 is ROCPROFILER_MEMORY_COPY_DEVICE_TO_DEVICE.
    let records = trace_python(
        "peer",
        "d.rpsdk_start_runtime()\n\
         d.rpsdk_emit_copy_between(4, 0x1001, 0x1002, 4096, 1, 1000, 2000)\n\
         d.rpsdk_emit_copy_between(4, 0x1001, 0x1001, 4096, 2, 3000, 4000)\n\
         d.rpsdk_finalize()",
        "memcpy",
        &[],
    );
    let copies: Vec<(u32, CopyKind)> = records
        .iter()
        .filter_map(|r| match r {
            Record::Memcpy(m) => Some((m.correlation, m.kind)),
            _ => None,
        })
        .collect();
    assert_eq!(copies, [(1, CopyKind::PtoP), (2, CopyKind::DtoD)]);
}
