//! Planted problems that need more than one program: a straggler among the ranks of a job, communication that
//! does not overlap computation (both `gpu_tools_testing::job`), and kernels whose device counters say what bounds
//! them (a program and the tracer's counter stream).

use gpu_tools_testing::job::JobSpec;
use gpu_tools_testing::records::{counter_sample, stream_of_host};
use gpu_tools_trace::analyze::FindingKind;
use gpu_tools_trace::counters::{
    DRAM_READ_PER_SECOND, DRAM_WRITE_PER_SECOND, OCCUPANCY, SM_ACTIVE, TENSOR_ACTIVE,
};
use gpu_tools_trace::{Notice, NoticeLevel, Record};

use super::program::{Program, file_of};
use super::{diagnose, finding, kinds, says};

fn job_files(spec: &JobSpec) -> Vec<Vec<u8>> {
    (0..spec.hosts).map(|h| spec.host_file(h)).collect()
}

#[test]
fn the_straggler_of_a_job_is_named_first() {
    let spec = JobSpec {
        hosts: 2,
        ranks_per_host: 2,
        steps: 20,
        slow_rank: Some(2),
        ..JobSpec::fixture()
    };
    let d = diagnose(&job_files(&spec));
    let f = &d.findings[0];
    assert_eq!(f.kind, FindingKind::Straggler, "{:#?}", kinds(&d));
    assert_eq!(
        f.title,
        "Rank 2 on h1 is the straggler: the other ranks wait for it in collectives"
    );
    assert!(
        says(
            f,
            "rank 2 (pid 1002 on h1) enters collectives last in 100% of them"
        ),
        "{:#?}",
        f.evidence
    );
    // Three ranks wait about 0.8 × 4 ms a step: over half of the job's GPU time.
    assert!(f.share > 0.45 && f.share < 0.6, "{}", f.share);
    assert!(f.advice[0].contains("--a-process rank=2"));
    assert_eq!(d.gpus.len(), 4);
}

#[test]
fn ranks_that_share_a_pid_on_one_host_are_each_their_own_rank() {
    // Two ranks on h0, each in a container of its own: both pid 1. Rank 1 is the straggler: the finding's spans are
    // on its GPU (file 0, stream 1), not on the first process of its pid and host.
    let spec = JobSpec {
        hosts: 1,
        ranks_per_host: 2,
        steps: 20,
        slow_rank: Some(1),
        pid_namespaces: true,
        ..JobSpec::fixture()
    };
    let d = diagnose(&job_files(&spec));
    let f = finding(&d, FindingKind::Straggler);
    assert!(
        says(f, "rank 1 (pid 1 on h0) enters collectives last"),
        "{:#?}",
        f.evidence
    );
    assert!(!f.spans.is_empty());
    let streams: Vec<(u32, u32)> = f.spans.iter().map(|s| (s.file, s.stream)).collect();
    assert!(streams.iter().all(|&s| s == (0, 1)), "{streams:?}");
}

#[test]
fn communication_that_does_not_overlap_computation_is_found() {
    let spec = JobSpec {
        hosts: 2,
        ranks_per_host: 2,
        steps: 20,
        compute_ns: 1_000_000,
        transfer_ns: 600_000,
        buckets: 1,
        slow_rank: None,
        ..JobSpec::fixture()
    };
    let d = diagnose(&job_files(&spec));
    let f = &d.findings[0];
    assert_eq!(
        f.kind,
        FindingKind::ExposedCommunication,
        "{:#?}",
        kinds(&d)
    );
    // One collective a step after all of its computation: each rank's collective kernel is its wait for the last
    // rank (the other finding's) and the 600 µs transfer, on four ranks, in the 19 steps analysed.
    let transfer = 4 * 19 * 600_000;
    assert!(
        f.cost > transfer * 95 / 100 && f.cost <= transfer * 105 / 100,
        "{} against {transfer}",
        f.cost
    );
    assert!(says(f, "with no other operation on their GPU"));
    assert!(f.advice[0].contains("overlap"));
}

/// A program of three kernels a step, and a counter stream whose samples say what each kernel does.
fn counted() -> Vec<Vec<u8>> {
    let mut p = Program::new(4242);
    for _ in 0..50 {
        p.kernel("stream_copy", 5_000, 200_000);
        p.kernel("gemm", 5_000, 200_000);
        p.kernel("tiny_grid", 5_000, 200_000);
    }
    p.sync("cudaDeviceSynchronize");
    let mut samples = vec![Record::Notice(Notice {
        level: NoticeLevel::Info,
        text: "counters: device 0 is GPU-1234 (NVIDIA H100 80GB HBM3, this host's CUDA device 0), sampled every \
               100.0 µs"
            .into(),
    })];
    for r in &p.records {
        let Record::Kernel(k) = r else { continue };
        let values: &[(&str, f64)] = match &*k.name {
            "stream_copy" => &[
                (SM_ACTIVE, 90.0),
                (TENSOR_ACTIVE, 0.0),
                (OCCUPANCY, 60.0),
                (DRAM_READ_PER_SECOND, 1.6e12),
                (DRAM_WRITE_PER_SECOND, 1.0e12),
            ],
            "gemm" => &[
                (SM_ACTIVE, 95.0),
                (TENSOR_ACTIVE, 70.0),
                (OCCUPANCY, 30.0),
                (DRAM_READ_PER_SECOND, 0.3e12),
                (DRAM_WRITE_PER_SECOND, 0.1e12),
            ],
            _ => &[
                (SM_ACTIVE, 20.0),
                (TENSOR_ACTIVE, 0.0),
                (OCCUPANCY, 10.0),
                (DRAM_READ_PER_SECOND, 0.05e12),
                (DRAM_WRITE_PER_SECOND, 0.01e12),
            ],
        };
        let mid = (k.start + k.end) / 2;
        samples.push(counter_sample(0, k.start, mid, values));
        samples.push(counter_sample(0, mid, k.end, values));
    }
    let counters = stream_of_host(0, "sim", 1_000_000, &samples);
    vec![file_of(&[p.stream(true), counters])]
}

#[test]
fn counters_tell_memory_from_compute_bound_kernels() {
    let d = diagnose(&counted());
    assert_eq!(
        kinds(&d),
        vec![
            (FindingKind::MemoryBound, 49 * 200_000),
            (FindingKind::ComputeBound, 49 * 200_000),
            (FindingKind::LowSmActivity, 49 * 200_000),
        ]
    );
    let memory = finding(&d, FindingKind::MemoryBound);
    assert_eq!(memory.title, "1 kernel bound by DRAM bandwidth");
    assert!(
        says(
            memory,
            "stream_copy: 9.80 ms (33% of the GPU's busy time), 49 launches; SM active 90%, tensor active 0%, DRAM 2600 GB/s (78% of the reference)"
        ),
        "{:#?}",
        memory.evidence
    );
    assert!(says(
        memory,
        "DRAM reference: NVIDIA H100 80GB HBM3's peak of 3.35 TB/s"
    ));
    let compute = finding(&d, FindingKind::ComputeBound);
    assert_eq!(
        compute.title,
        "1 kernel bound by computation on the tensor cores"
    );
    assert!(says(compute, "gemm: "));
    let idle = finding(&d, FindingKind::LowSmActivity);
    assert!(says(idle, "tiny_grid: ") && says(idle, "SM active 20%"));
    assert!(!d.lacks.iter().any(|l| l.starts_with("no device counters")));
}
