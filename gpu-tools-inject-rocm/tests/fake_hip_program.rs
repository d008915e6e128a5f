//! The tool library end to end: a fake HIP program (a separate `python3` process that loads the rocprofiler-sdk
//! double and runs its fake program: the runtime starts, a code object loads, kernels run, copies, API calls,
//! markers, records of kinds newer than the bindings, exit) with this library named in `ROCP_TOOL_LIBRARIES`,
//! streaming to this test over a Unix socket; the stream is decoded and printed as a tracer lists it.

use std::collections::BTreeMap;

use gpu_tools::trace::{ApiDomain, CopyKind, Record, TimestampClock};

mod common;

use common::{trace_python, trace_python_with_header};

fn demangle(name: &str) -> String {
    cpp_demangle::Symbol::new(name)
        .ok()
        .and_then(|s| s.demangle().ok())
        .unwrap_or_else(|| name.to_string())
}

#[test]
fn a_fake_hip_program_is_traced_through_the_double() {
    let (header, records) = trace_python_with_header(
        "fake-hip",
        "d.rpsdk_fake_hip_program(6)\nprint('fake HIP program done')",
        "kernel,memcpy,runtime",
        &[],
    );

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
