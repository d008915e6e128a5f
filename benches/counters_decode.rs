//! Decode costs of the counter records, side by side with a baseline in the same run:
//!
//! - **trace stream**: encoding and decoding a kernel-metrics record (4 metrics) next to a kernel record, per
//!   record;
//! - **report**: aggregating 100 000 kernel-metrics records into the per-kernel table;
//! - **saved counter data**: parsing a 16 MiB counter-data file (lengths and FNV hash) next to copying the bytes;
//! - **evaluation**: CUPTI's `cuptiProfilerHostEvaluateToGpuValues` per PM sample of a recorded real image (needs
//!   `tests/fixtures/cupti-counters` and `GPU_TOOLS_CUPTI_WHEEL_LIB`; said and left out otherwise).
//!
//! `cargo bench --bench counters_decode`.

use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;

use criterion::{Criterion, Throughput};
use gpu_tools::cupti::profiler::Method;
use gpu_tools::cupti::profiler::host::{Host, MetricNames};
use gpu_tools::cupti::profiler::image::CounterDataFile;
use gpu_tools::trace::*;
use gpu_tools_injection::profile::{BASIC_SET, KernelTable};
use gpu_tools_testing::records;

/// Names shared by every record, as the injection library shares them.
struct Names {
    kernels: [Arc<str>; 3],
    metrics: Vec<Arc<str>>,
}

fn names() -> Names {
    Names {
        kernels: ["_Z4copyPKfPfm", "_Z5scalePfm", "ampere_bf16_gemm"].map(Arc::from),
        metrics: BASIC_SET.iter().map(|m| Arc::from(*m)).collect(),
    }
}

fn metrics_record(n: &Names, i: u32) -> Record {
    Record::KernelMetrics(KernelMetricsRecord {
        device: 0,
        context: 1,
        correlation: i,
        launch: i,
        kernel: Arc::clone(&n.kernels[i as usize % 3]),
        metrics: n
            .metrics
            .iter()
            .map(|m| (Arc::clone(m), f64::from(i) * 1.5))
            .collect(),
    })
}

fn kernel_record(i: u32) -> Record {
    Record::Kernel(KernelRecord {
        grid: [1024, 1, 1],
        ..records::kernel_record(
            "_Z4copyPKfPfm",
            u64::from(i) * 100,
            u64::from(i) * 100 + 50,
            i,
        )
    })
}

fn stream(records: &[Record]) -> Vec<u8> {
    let mut e = Encoder::new(&StreamHeader::new(1, 130001, TimestampClock::Monotonic));
    for r in records {
        e.push(r);
    }
    e.bytes().to_vec()
}

fn decode_all(bytes: &[u8]) -> usize {
    let mut d = Decoder::new();
    d.feed(bytes);
    let mut n = 0;
    while let Ok(Some(r)) = d.next_record() {
        n += 1;
        black_box(r);
    }
    n
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    const N: u32 = 10_000;
    let n = names();
    let metrics: Vec<Record> = (0..N).map(|i| metrics_record(&n, i)).collect();
    let kernels: Vec<Record> = (0..N).map(kernel_record).collect();
    let (m_bytes, k_bytes) = (stream(&metrics), stream(&kernels));
    assert_eq!(decode_all(&m_bytes), N as usize);
    let mut g = c.benchmark_group("trace stream, 10 000 records");
    g.throughput(Throughput::Elements(u64::from(N)));
    g.bench_function("encode kernel records (baseline)", |b| {
        b.iter(|| black_box(stream(&kernels)))
    });
    g.bench_function("encode kernel-metrics records", |b| {
        b.iter(|| black_box(stream(&metrics)))
    });
    g.bench_function("decode kernel records (baseline)", |b| {
        b.iter(|| decode_all(&k_bytes))
    });
    g.bench_function("decode kernel-metrics records", |b| {
        b.iter(|| decode_all(&m_bytes))
    });
    g.finish();

    let many: Vec<KernelMetricsRecord> = (0..100_000)
        .map(|i| match metrics_record(&n, i) {
            Record::KernelMetrics(k) => k,
            _ => unreachable!(),
        })
        .collect();
    let mut g = c.benchmark_group("report, 100 000 kernel-metrics records");
    g.throughput(Throughput::Elements(many.len() as u64));
    g.bench_function("sum one metric (baseline)", |b| {
        b.iter(|| black_box(many.iter().map(|k| k.metrics[0].1).sum::<f64>()))
    });
    g.bench_function("per-kernel table", |b| {
        b.iter(|| black_box(KernelTable::from_records(&many)))
    });
    g.finish();

    let file = CounterDataFile {
        method: Method::PmSampling,
        chip: "GH100".into(),
        metrics: BASIC_SET.iter().map(|s| s.to_string()).collect(),
        records: Vec::new(),
        image: (0..16u32 << 20).map(|i| (i * 2654435761) as u8).collect(),
    };
    let bytes = file.to_bytes();
    let mut g = c.benchmark_group("saved counter data, 16 MiB");
    g.throughput(Throughput::Bytes(bytes.len() as u64));
    g.bench_function("copy the bytes (baseline)", |b| {
        b.iter(|| black_box(bytes.to_vec()))
    });
    g.bench_function("parse and check", |b| {
        b.iter(|| black_box(CounterDataFile::parse(&bytes).map(|f| f.image.len())))
    });
    g.finish();

    evaluation(&mut c);
    c.final_summary();
}

/// Per-sample evaluation of a recorded real PM image, where one is committed and the wheel is there.
fn evaluation(c: &mut Criterion) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cupti-counters");
    let wheel = std::env::var_os("GPU_TOOLS_CUPTI_WHEEL_LIB");
    let file = std::fs::read_dir(&root).ok().and_then(|dirs| {
        dirs.filter_map(|d| d.ok())
            .find_map(|d| std::fs::read(d.path().join("pm-0.gtc")).ok())
    });
    let (Some(lib), Some(bytes)) = (wheel, file) else {
        eprintln!(
            "evaluation: left out (needs a recorded PM image under {} and GPU_TOOLS_CUPTI_WHEEL_LIB)",
            root.display()
        );
        return;
    };
    gpu_tools::cupti::CuptiLibrary::load_from(Path::new(&lib).join("libcupti.so.13"))
        .expect("the wheel's CUPTI");
    let file = CounterDataFile::parse(&bytes).expect("a recorded file");
    let host = Host::new(&file.chip, Method::PmSampling).expect("host");
    let names = MetricNames::new(&file.metrics).expect("names");
    let mut out = vec![0.0; names.len()];
    let mut g = c.benchmark_group("evaluation of a recorded PM sample");
    g.throughput(Throughput::Elements(1));
    g.bench_function("copy the values (baseline)", |b| {
        b.iter(|| black_box(out.clone()))
    });
    g.bench_function("cuptiProfilerHostEvaluateToGpuValues", |b| {
        b.iter(|| {
            // SAFETY: an image CUPTI wrote on the GPU host, read back with its hash checked.
            unsafe { host.evaluate_into(&file.image, 0, &names, &mut out) }.expect("evaluate")
        })
    });
    g.finish();
}
