//! What the trace file writer costs per record: the tracer hands [`TraceFileWriter::write`] the bytes it read from
//! each traced process's connection, and the writer packs whole frames into chunks as they come.
//!
//! The stream is PyTorch's launch loop as the injection library sends it: per launch seven API calls and one
//! kernel (20,000 launches, 160,000 records), handed over in pieces of 64 KiB (a busy connection) and of 512
//! bytes (a trickle: the most chunks per record). The file goes to a `Vec` kept between iterations, so the time
//! is the writer's own. No GPU is needed. `cargo bench -p gpu-tools-trace --bench file_write`.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use gpu_tools_trace::file::TraceFileWriter;
use gpu_tools_trace::{
    ApiDomain, ApiRecord, Encoder, KernelRecord, Record, StreamHeader, TimestampClock,
};

const LAUNCHES: u32 = 20_000;
const RECORDS: u64 = LAUNCHES as u64 * 8;

/// The wire bytes of the launch loop.
fn stream() -> Vec<u8> {
    let calls: [(&str, ApiDomain); 7] = [
        ("cudaGetDevice", ApiDomain::Runtime),
        ("cudaGetLastError", ApiDomain::Runtime),
        ("cuDevicePrimaryCtxGetState", ApiDomain::Driver),
        ("cuKernelGetName", ApiDomain::Driver),
        ("cudaStreamIsCapturing", ApiDomain::Runtime),
        ("cuLaunchKernel", ApiDomain::Driver),
        ("cudaLaunchKernel", ApiDomain::Runtime),
    ];
    let kernels: [Arc<str>; 2] = [
        Arc::from(
            "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float> >",
        ),
        Arc::from(
            "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float> >",
        ),
    ];
    let names: Vec<Arc<str>> = calls.iter().map(|(n, _)| Arc::from(*n)).collect();
    let mut e = Encoder::new(&StreamHeader::new(4242, 130_001, TimestampClock::Monotonic));
    let mut t = 1_000_000_000u64;
    for i in 0..LAUNCHES {
        for (j, (_, domain)) in calls.iter().enumerate() {
            e.push(&Record::Api(ApiRecord {
                start: t,
                end: t + 700 + (u64::from(i) * 37 % 300),
                domain: *domain,
                cbid: 13 + j as u32,
                name: Arc::clone(&names[j]),
                correlation: i * 8 + j as u32,
                process: 4242,
                thread: 4242,
                return_value: 0,
            }));
            t += 1_100;
        }
        e.push(&Record::Kernel(KernelRecord {
            start: t + 5_000,
            end: t + 7_300 + u64::from(i % 97),
            device: 0,
            context: 1,
            stream: 7,
            correlation: i * 8 + 6,
            grid_id: u64::from(i),
            grid: [128, 1, 1],
            block: [256, 1, 1],
            static_shared: 0,
            dynamic_shared: 0,
            registers: 32,
            graph_id: 0,
            graph_node_id: 0,
            name: Arc::clone(&kernels[(i % 2) as usize]),
        }));
    }
    e.bytes().to_vec()
}

fn bench(c: &mut Criterion) {
    let bytes = stream();
    let mut g = c.benchmark_group("trace file: write 20000 launches (160000 records)");
    g.throughput(Throughput::Elements(RECORDS));
    let mut file = Vec::with_capacity(bytes.len());
    for piece in [64 << 10, 512] {
        g.bench_function(format!("pieces of {piece} bytes"), |b| {
            b.iter(|| {
                file.clear();
                let mut w = TraceFileWriter::new(&mut file).expect("a Vec takes the header");
                let s = w.add_stream();
                for p in black_box(&bytes[..]).chunks(piece) {
                    w.write(s, p).expect("a Vec takes every chunk");
                }
                w.close(s).expect("a Vec takes the end");
                black_box(w.bytes_written())
            })
        });
    }
    g.finish();
    println!(
        "stream {} bytes; file {} bytes in pieces of 512",
        bytes.len(),
        file.len()
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
