//! One problem planted in a healthy loop (`program::compute`: 20 kernels of 50 µs a step, the host ahead of the
//! GPU), 50 steps each: the finding of that problem comes first, with the cost the simulation's timing gives.

use gpu_tools_trace::CopyKind;
use gpu_tools_trace::analyze::{FindingKind, IdleCause, StepSource};

use super::program::{Host, Program, compute};
use super::{diagnose, finding, kinds, says};

const STEPS: usize = 50;

fn run(step: impl Fn(&mut Program, usize)) -> Program {
    let mut p = Program::new(4242);
    for i in 0..STEPS {
        step(&mut p, i);
    }
    p.sync("cudaDeviceSynchronize");
    p
}

#[test]
fn a_healthy_loop_has_no_finding() {
    let p = run(|p, _| compute(p));
    let d = diagnose(&[p.file()]);
    assert_eq!(kinds(&d), vec![]);
    let gpu = &d.gpus[0];
    assert_eq!(gpu.steps.source, StepSource::Pattern("layer_00".into()));
    assert_eq!(gpu.steps.count, STEPS as u64 - 1);
    assert_eq!(gpu.steps.warmup, 0);
    // Back-to-back kernels 1 µs apart: 20 gaps a step, the work queued.
    assert_eq!(gpu.idle, (STEPS as u64 - 1) * 20 * 1_000);
    assert_eq!(gpu.idle_by_cause, vec![(IdleCause::Queued, gpu.idle)]);
    assert!(d.lacks.iter().any(|l| l.starts_with("no device counters")));
}

#[test]
fn a_device_synchronize_in_every_step_is_the_first_finding() {
    let p = run(|p, _| {
        compute(p);
        p.sync("cudaDeviceSynchronize");
        p.host(300_000);
    });
    let d = diagnose(&[p.file()]);
    let f = &d.findings[0];
    assert_eq!(f.kind, FindingKind::SyncStall, "{:#?}", kinds(&d));
    // Each step's next launch waits for the sync's return (2 µs), the host's 300 µs, its call (5 µs) and 1 µs.
    assert_eq!(f.cost, (STEPS as u64 - 1) * 308_000);
    assert!(
        f.title.contains("synchronisation inside the step loop"),
        "{}",
        f.title
    );
    assert!(says(
        f,
        "cudaDeviceSynchronize: the host waited in it as the GPU ran out of work 49 times"
    ));
    assert!(
        says(
            f,
            "50 synchronising calls in the window, 1.0 a step (cudaDeviceSynchronize ×50)"
        ) || says(f, "49 synchronising calls")
    );
    assert_eq!(f.spans.len(), STEPS - 1);
    assert!(
        f.advice
            .iter()
            .any(|a| a.contains("torch.cuda.synchronize()"))
    );
    assert_eq!(kinds(&d).len(), 1, "{:#?}", kinds(&d));
}

#[test]
fn an_item_read_in_every_step_is_named_as_such() {
    let p = run(|p, _| {
        compute(p);
        p.item();
        p.host(200_000);
    });
    let d = diagnose(&[p.file()]);
    let f = &d.findings[0];
    assert_eq!(f.kind, FindingKind::SyncStall, "{:#?}", kinds(&d));
    assert!(f.title.contains("`.item()`-style reads"), "{}", f.title);
    // The copy's end, then the sync's 2 µs, the host's 200 µs, the call and 1 µs.
    assert_eq!(f.cost, (STEPS as u64 - 1) * 208_000);
    assert!(says(
        f,
        "49 device-to-host copies of at most 4 B (a value read back, `.item()`-style), each queued right after layer_19"
    ));
    assert!(f.advice[0].contains("read them every N steps"));
}

#[test]
fn many_short_kernels_make_a_launch_bound_loop() {
    let p = run(|p, _| {
        for _ in 0..100 {
            p.kernel("add", 6_000, 2_000);
            p.host(2_000);
        }
        p.kernel("loss", 6_000, 2_000);
    });
    let d = diagnose(&[p.file()]);
    let f = &d.findings[0];
    assert_eq!(f.kind, FindingKind::LaunchBound, "{:#?}", kinds(&d));
    assert_eq!(d.gpus[0].steps.source, StepSource::Pattern("loss".into()));
    // Each kernel ends 9 µs after its call began; the next call begins 8 µs after it and its kernel starts 7 µs
    // later: 6 µs idle before 99 `add` and the `loss`; the first `add` follows `loss` without the host's 2 µs.
    assert_eq!(f.cost, 49 * (100 * 6_000 + 4_000));
    assert!(says(f, "101 a step"), "{:#?}", f.evidence);
    assert!(says(f, "ran shorter than their launch call"));
    assert!(says(
        f,
        "the same 101 operations (101 kernels) run in the same order in 49 of 49 steps"
    ));
    assert!(f.advice[0].contains("CUDA graph"));
    assert!(f.share > 0.5, "{}", f.share);
}

#[test]
fn input_prepared_between_steps_idles_the_gpu_there() {
    let p = run(|p, _| {
        p.host(2_000_000);
        p.copy_async(CopyKind::HtoD, Host::Pinned, 4 << 20);
        compute(p);
    });
    let d = diagnose(&[p.file()]);
    let f = &d.findings[0];
    assert_eq!(f.kind, FindingKind::BetweenSteps, "{:#?}", kinds(&d));
    assert_eq!(
        d.gpus[0].steps.source,
        StepSource::Pattern("[CUDA memcpy HtoD 4194304 B]".into())
    );
    // The host issues a step in 104 µs and prepares the next for 2 ms; the GPU's step takes 20 × 51 µs and the
    // copy's 1 + 209.7 µs: the GPU waits the rest of the 2.104 ms, less the 1 µs before the copy.
    let gpu_step = 20 * 51_000 + 1_000 + (1_000 + (4 << 20) / 20);
    let host_step = 2_000_000 + 4_000 + 20 * 5_000;
    assert_eq!(f.cost, 49 * (host_step + 1_000 - gpu_step));
    assert!(says(f, "the host made no CUDA call in these gaps"));
    assert!(f.advice[0].contains("num_workers"));
}

#[test]
fn a_pageable_copy_in_every_step_stalls_the_gpu() {
    let p = run(|p, _| {
        p.copy_async(CopyKind::HtoD, Host::Pageable, 8 << 20);
        compute(p);
    });
    let d = diagnose(&[p.file()]);
    let f = &d.findings[0];
    assert_eq!(f.kind, FindingKind::PageableCopies, "{:#?}", kinds(&d));
    // Staging (8 MiB at 10 GB/s) and 1 µs before the transfer, the transfer itself (1 µs + 8 MiB at 20 GB/s)
    // with no kernel beside it, then the call's return, the next launch call and 1 µs.
    let bytes: u64 = 8 << 20;
    let per_step = bytes / 10 + 1_000 + (1_000 + bytes / 20) + 1_000 + 5_000 + 1_000;
    assert_eq!(f.cost, 49 * per_step);
    assert!(
        says(f, "49 copies HtoD (pageable -> device)")
            || says(f, "copies HtoD (pageable -> device)")
    );
    assert!(f.advice[0].contains("pin_memory"));
}

#[test]
fn small_blocking_copies_stall_the_gpu() {
    let p = run(|p, _| {
        for k in 0..10 {
            p.copy_blocking(CopyKind::HtoD, Host::Pageable, 256);
            p.kernel(&format!("layer_{k:02}"), 5_000, 50_000);
        }
    });
    let d = diagnose(&[p.file()]);
    let f = &d.findings[0];
    assert_eq!(f.kind, FindingKind::SmallCopies, "{:#?}", kinds(&d));
    // Each copy waits for the last kernel and starts 1 µs after it, runs 1 µs (256 B at 20 GB/s adds 12 ns), the
    // call returns 2 µs later, the launch takes 5 µs and its kernel starts 1 µs after: 10 times a step.
    assert_eq!(f.cost, 49 * 10 * (1_000 + 1_012 + 2_000 + 5_000 + 1_000));
    assert!(
        says(f, "copies HtoD (pageable -> device) (10.0 a step)"),
        "{:#?}",
        f.evidence
    );
    assert!(f.advice[0].contains("batch"));
}

#[test]
fn work_that_waits_on_the_device_is_queued() {
    let mut p = Program::new(4242);
    p.device_delay = 40_000;
    for _ in 0..STEPS {
        compute(&mut p);
    }
    p.sync("cudaDeviceSynchronize");
    let d = diagnose(&[p.file()]);
    let f = &d.findings[0];
    assert_eq!(f.kind, FindingKind::QueuedWork, "{:#?}", kinds(&d));
    assert_eq!(f.cost, 49 * 20 * 41_000);
    assert!(says(f, "41.0 µs each (median)"));
}

#[test]
fn nvtx_steps_are_the_steps() {
    let p = run(|p, _| {
        let r = p.push("train_step");
        p.host(2_000_000);
        compute(p);
        p.pop(r);
    });
    let d = diagnose(&[p.file()]);
    assert_eq!(
        d.gpus[0].steps.source,
        StepSource::Nvtx("train_step".into())
    );
    assert_eq!(d.gpus[0].steps.count, STEPS as u64);
    assert_eq!(
        d.findings[0].kind,
        FindingKind::BetweenSteps,
        "{:#?}",
        kinds(&d)
    );
    // The host's step is 2 ms and 20 calls of 5 µs, the GPU's 20 kernels of 50 µs 1 µs apart; the first kernel
    // starts 1 µs after its call: 49 gaps in the window (the first step's begins before it).
    let f = finding(&d, FindingKind::BetweenSteps);
    assert_eq!(f.cost, 49 * (2_100_000 - 20 * 51_000 + 1_000));
}

#[test]
fn without_api_records_the_idle_time_is_unknown_and_said_so() {
    let p = run(|p, _| {
        compute(p);
        p.sync("cudaDeviceSynchronize");
        p.host(300_000);
    });
    let file = super::program::file_of(&[p.stream(false)]);
    let d = diagnose(&[file]);
    assert_eq!(kinds(&d), vec![]);
    assert_eq!(d.gpus[0].idle_by_cause[0].0, IdleCause::Unknown);
    assert!(
        d.lacks.iter().any(|l| l.starts_with("no API records")),
        "{:#?}",
        d.lacks
    );
}

#[test]
fn copy_calls_without_copy_records_are_said_once() {
    // As an attached trace leaves copies out: the calls are there, the copies are not.
    let p = run(|p, _| {
        p.copy_async(CopyKind::HtoD, Host::Pageable, 8 << 20);
        compute(p);
    });
    let file = super::program::file_of(&[
        p.stream_where(|r| !matches!(r, gpu_tools_trace::Record::Memcpy(_)))
    ]);
    let d = diagnose(&[file]);
    let said: Vec<&String> = d
        .lacks
        .iter()
        .filter(|l| l.starts_with("copy calls but no copy records"))
        .collect();
    assert_eq!(said.len(), 1, "{:#?}", d.lacks);
    assert!(
        d.findings
            .iter()
            .all(|f| f.kind != FindingKind::PageableCopies)
    );
}

#[test]
fn a_trace_without_steps_is_analysed_whole_and_says_so() {
    // Every kernel a name of its own: nothing repeats.
    let mut p = Program::new(4242);
    for k in 0..40 {
        p.kernel(&format!("once_{k}"), 5_000, 50_000);
        p.host(100_000);
    }
    p.sync("cudaDeviceSynchronize");
    let d = diagnose(&[p.file()]);
    let gpu = &d.gpus[0];
    assert_eq!(gpu.steps.source, StepSource::None);
    assert_eq!((gpu.before, gpu.end - gpu.start), (0, d.gpu_time));
    assert!(
        d.lacks
            .iter()
            .any(|l| l.starts_with("no steps found on GPU 0 of pid 4242 on sim")),
        "{:#?}",
        d.lacks
    );
    // The host's 100 µs between launches, less the kernel's 50 µs: launch-bound, with no step to speak of.
    let f = &d.findings[0];
    assert_eq!(f.kind, FindingKind::LaunchBound);
    assert_eq!(
        f.title,
        "The GPU waits for the host to launch short kernels (launch-bound)"
    );
    assert_eq!(f.cost, 39 * (105_000 + 1_000 - 51_000));
}

#[test]
fn ranges_of_single_operations_are_not_taken_for_steps() {
    // NVTX ranges around three kernels of each step (as `emit_nvtx` marks operators): they repeat, but a step is
    // more than them.
    let p = run(|p, _| {
        for k in 0..20 {
            let r = (k % 7 == 0).then(|| p.push("aten::mm"));
            p.kernel(&format!("layer_{k:02}"), 5_000, 50_000);
            if let Some(r) = r {
                p.pop(r);
            }
        }
    });
    let d = diagnose(&[p.file()]);
    assert_eq!(
        d.gpus[0].steps.source,
        StepSource::Pattern("layer_00".into())
    );
}

#[test]
fn an_operation_without_a_correlation_id_is_not_taken_for_the_work_of_a_call_without_one() {
    use gpu_tools_trace::analyze::Trace;
    use gpu_tools_trace::{ApiDomain, ApiRecord, KernelRecord, Record};
    use std::sync::Arc;

    let kernel = |start: u64, correlation: u32| {
        Record::Kernel(KernelRecord {
            start,
            end: start + 10,
            device: 0,
            context: 1,
            stream: 7,
            correlation,
            grid_id: 1,
            grid: [1, 1, 1],
            block: [1, 1, 1],
            static_shared: 0,
            dynamic_shared: 0,
            registers: 8,
            graph_id: 0,
            graph_node_id: 0,
            name: Arc::from("k"),
        })
    };
    let mut t = Trace::new();
    t.add((0, 0), &kernel(0, 1));
    // A synchronisation that carries no correlation id (0: none) spans the idle gap; the next kernel has none
    // either: what issued it is not known.
    t.add(
        (0, 0),
        &Record::Api(ApiRecord {
            start: 5,
            end: 2_000,
            domain: ApiDomain::Runtime,
            cbid: 1,
            name: Arc::from("cudaDeviceSynchronize"),
            correlation: 0,
            process: 1,
            thread: 1,
            return_value: 0,
        }),
    );
    t.add((0, 0), &kernel(1_000, 0));
    let d = t.diagnose();
    assert_eq!(
        d.gpus[0].idle_by_cause,
        vec![(IdleCause::Unknown, 990)],
        "{:?}",
        d.gpus[0]
    );
}

#[test]
fn gpus_of_processes_that_share_a_pid_are_told_apart_by_their_stream() {
    // Two programs with pid 100 on host sim, in one file (two containers, or the pid used again), without ranks.
    let program = || {
        let mut p = Program::new(100);
        for _ in 0..STEPS {
            compute(&mut p);
        }
        p
    };
    let (first, second) = (program(), program());
    let both = super::program::file_of(&[first.stream(true), second.stream(true)]);
    let ids: Vec<String> = diagnose(&[both])
        .gpus
        .iter()
        .map(|g| g.gpu.to_string())
        .collect();
    assert_eq!(
        ids,
        [
            "GPU 0 of pid 100 on sim (file 0 stream 0)",
            "GPU 0 of pid 100 on sim (file 0 stream 1)"
        ]
    );
    // Alone, a process is its pid, as before.
    assert_eq!(
        diagnose(&[first.file()]).gpus[0].gpu.to_string(),
        "GPU 0 of pid 100 on sim"
    );
}

#[test]
fn processes_without_an_end_that_share_a_pid_are_told_apart_by_their_stream() {
    use gpu_tools_testing::records::{kernel, stream_of_host};
    use gpu_tools_trace::{ProcessStart, Record};
    let cut = |kernels: u64| {
        let mut records = vec![Record::ProcessStart(ProcessStart {
            pid: 100,
            parent_pid: 1,
            time: 1_000,
            command: "python3 train.py".into(),
        })];
        records.extend(
            (0..kernels).map(|k| kernel("k", 10_000 * (k + 1), 10_000 * (k + 1) + 5_000, 0)),
        );
        stream_of_host(100, "vm", 1_000, &records)
    };
    let lack = |d: &gpu_tools_trace::analyze::Diagnosis| -> String {
        d.lacks
            .iter()
            .find(|l| l.starts_with("no end record for "))
            .cloned()
            .unwrap_or_else(|| panic!("{:#?}", d.lacks))
    };
    let both = super::program::file_of(&[cut(5), cut(6)]);
    assert_eq!(
        lack(&diagnose(&[both])),
        "no end record for pid 100 (file 0 stream 0), pid 100 (file 0 stream 1) (crashed, killed, or the file cut \
         short): their last records may be missing"
    );
    let one = super::program::file_of(&[cut(5)]);
    assert!(
        lack(&diagnose(&[one])).starts_with("no end record for pid 100 (crashed"),
        "as before"
    );
}

#[test]
fn a_trace_that_ended_at_a_fatal_signal_is_said_before_the_findings() {
    let mut p = run(|p, _| compute(p));
    p.end = gpu_tools_trace::EndReason::Signal(11);
    let d = diagnose(&[p.file()]);
    let ended: Vec<(u32, u32, u32, u8, String)> = d
        .ended_at_signal
        .iter()
        .map(|e| (e.file, e.stream, e.pid, e.signal, e.text.clone()))
        .collect();
    assert_eq!(
        ended,
        [(
            0,
            0,
            4242,
            11,
            "the trace of pid 4242 on sim ended at signal 11 (SIGSEGV), which was ending the process: its work \
             then in flight (kernels queued or running, calls not yet returned) has no record, so idle time and \
             the last steps near the end are not whole"
                .to_string()
        )]
    );
    assert_eq!(d.ended_at_signal[0].time, p.now + 1_000);
    // A process that exited: nothing said.
    let d = diagnose(&[run(|p, _| compute(p)).file()]);
    assert!(d.ended_at_signal.is_empty(), "{:?}", d.ended_at_signal);
}
