//! The real traces of `tests/fixtures/traces/` (recorded on a GPU host in file format 2, rewritten in the current
//! format by `cargo xtask rewrite-trace`; `torch_compile.format2.gputrace` is the recording as it was): they read
//! in the current version with no error; the kernel report's counts and GPU times of the top names, the processes
//! and the ranks have the exact values of those recordings, counted twice (by the report and, independently, from
//! the decoded kernel records); the Perfetto and Chrome exports close every flow they start; the format 2
//! recording and its rewrite read to the same records and the same reports; and no strict prefix and no one-byte
//! change of a current file reads without an error.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use gpu_tools_trace::Record;
use gpu_tools_trace::export::{ChromeWriter, PerfettoWriter, Timeline};
use gpu_tools_trace::file::{
    CHUNK_HEADER_LEN, FILE_HEADER_LEN, FILE_VERSION, TraceFileError, TraceItem, TraceReader,
    rewrite,
};
use gpu_tools_trace::report::{Analysis, Cell, Format, Table, write_tables};

fn fixture(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/traces")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// What one file holds, counted from its decoded records alone (no report code).
#[derive(Debug, Default)]
struct Count {
    version: Option<u16>,
    items: Vec<TraceItem>,
    /// Per kernel name: launches and summed GPU time (end − start), ns.
    kernels: BTreeMap<String, (u64, u64)>,
    /// Streams that began with a process start.
    processes: usize,
    /// Values of the `RANK` label.
    ranks: BTreeSet<String>,
}

fn count(bytes: &[u8]) -> Count {
    let mut c = Count::default();
    let mut reader = TraceReader::new(bytes);
    for item in reader.by_ref() {
        let item = item.expect("a real trace reads with no error");
        if let TraceItem::Record { record, .. } = &item {
            match record {
                Record::Kernel(k) => {
                    let e = c.kernels.entry(k.name.to_string()).or_default();
                    e.0 += 1;
                    e.1 += k.end - k.start;
                }
                Record::ProcessStart(_) => c.processes += 1,
                Record::ProcessInfo(i) => {
                    c.ranks.extend(
                        i.labels
                            .iter()
                            .filter(|(n, _)| n == "RANK")
                            .map(|(_, v)| v.clone()),
                    );
                }
                _ => {}
            }
        }
        c.items.push(item);
    }
    c.version = reader.file_version();
    c
}

/// The names with the most GPU time, most first (ties by name).
fn top(c: &Count, n: usize) -> Vec<(String, u64, u64)> {
    let mut v: Vec<(String, u64, u64)> = c
        .kernels
        .iter()
        .map(|(k, &(launches, ns))| (k.clone(), launches, ns))
        .collect();
    v.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)));
    v.truncate(n);
    v
}

fn column(t: &Table, name: &str) -> usize {
    t.columns
        .iter()
        .position(|&c| c == name)
        .unwrap_or_else(|| panic!("no column {name} in {}", t.name))
}

fn int(c: &Cell) -> u64 {
    match c {
        Cell::Int(v) => *v,
        other => panic!("not a whole number: {other:?}"),
    }
}

fn text(c: &Cell) -> String {
    match c {
        Cell::Text(v) => v.clone(),
        other => panic!("not text: {other:?}"),
    }
}

fn reports(bytes: &[u8]) -> Vec<Table> {
    let mut a = Analysis::new();
    assert_eq!(a.read(0, bytes), vec![]);
    a.reports()
}

fn table<'a>(tables: &'a [Table], name: &str) -> &'a Table {
    tables.iter().find(|t| t.name == name).unwrap()
}

/// The kernel report's rows as (name, instances, total ns), in its order.
fn kernel_rows(tables: &[Table]) -> Vec<(String, u64, u64)> {
    let t = table(tables, "cuda_gpu_kern_sum");
    let (n, i, total) = (
        column(t, "Name"),
        column(t, "Instances"),
        column(t, "Total Time (ns)"),
    );
    t.rows
        .iter()
        .map(|r| (text(&r[n]), int(&r[i]), int(&r[total])))
        .collect()
}

/// The expected values of one fixture.
struct Expected {
    file: &'static str,
    kernel_launches: u64,
    kernel_names: usize,
    kernel_ns: u64,
    /// The first rows of the kernel report: (name as recorded, launches, GPU time ns).
    top: [(&'static str, u64, u64); 3],
    processes: usize,
    ranks: &'static [&'static str],
    /// Flows from a launch or copy call to the work it issued, in each export.
    flows: usize,
}

const FIXTURES: [Expected; 3] = [
    Expected {
        file: "torch_loop.gputrace",
        kernel_launches: 1080,
        kernel_names: 33,
        kernel_ns: 5_471_644,
        top: [
            (
                "_Z17wgrad_alg0_engineIfLi128ELi5ELi5ELi3ELi3ELi3ELb0ELi512EEviiiPKT_iPS0_S2_18kernel_grad_paramsyifiiii",
                20,
                622_339,
            ),
            (
                "_ZN2at6native13reduce_kernelILi512ELi1ENS0_8ReduceOpIfNS0_14func_wrapper_tIfZNS0_11sum_functorIfffEclERNS_14TensorIteratorEEUlffE_EEjfLi4ELi4EEEEEvT1_",
                40,
                535_263,
            ),
            (
                "sm80_xmma_wgrad_implicit_gemm_indexed_wo_smem_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize16x64x64_stage1_warpsize1x4x1_g1_tensor16x8x8_aligna8_alignc8_execute_kernel__5x_cudnn",
                20,
                532_061,
            ),
        ],
        processes: 1,
        ranks: &[],
        flows: 1210,
    },
    Expected {
        file: "torch_compile.gputrace",
        kernel_launches: 201,
        kernel_names: 23,
        kernel_ns: 665_760,
        top: [
            (
                "_ZN2at6native55_GLOBAL__N__d25d856e_22_ForeachBinaryOpList_cu_a911ec4325multi_tensor_apply_kernelINS1_18TensorListMetadataILi2EEENS1_24BinaryOpListAlphaFunctorIfLi2ELi2ELi0EEEJSt4plusIfEfEEEvT_T0_DpT1_",
                20,
                189_665,
            ),
            (
                "_ZN2at6native55_GLOBAL__N__d25d856e_22_ForeachBinaryOpList_cu_a911ec4325multi_tensor_apply_kernelINS1_18TensorListMetadataILi2EEENS1_14UnaryOpFunctorIfLi2ELi1ELi1EEEJNS0_4CopyIffEEEEEvT_T0_DpT1_",
                38,
                170_401,
            ),
            (
                "_ZN2at6native39_GLOBAL__N__5cd812b1_7_Loss_cu_5b0651e138nll_loss_forward_reduce_cuda_kernel_2dIfflEEvPT_S4_PKS3_PKT1_S6_bllll",
                20,
                94_495,
            ),
        ],
        processes: 2,
        ranks: &[],
        flows: 247,
    },
    Expected {
        file: "ddp_2rank.gputrace",
        kernel_launches: 10_418,
        kernel_names: 25,
        kernel_ns: 297_678_595,
        top: [
            (
                "_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE",
                400,
                239_262_022,
            ),
            (
                "_Z18sgemm_largek_lds64ILb1ELb0ELi5ELi5ELi4ELi4ELi4ELi34EEvPfPKfS2_iiiiiiS2_S2_ffiiPiS3_",
                800,
                17_356_047,
            ),
            (
                "_Z31ncclDevKernel_Broadcast_RING_LL24ncclDevKernelArgsStorageILm4096EE",
                8,
                14_393_558,
            ),
        ],
        processes: 3,
        ranks: &["0", "1"],
        flows: 13_345,
    },
];

#[test]
fn each_fixture_reads_in_the_current_version_with_its_exact_counts_twice_counted() {
    for e in &FIXTURES {
        let bytes = fixture(e.file);
        let c = count(&bytes);
        assert_eq!(c.version, Some(FILE_VERSION), "{}", e.file);
        // From the decoded records alone.
        let launches: u64 = c.kernels.values().map(|v| v.0).sum();
        let ns: u64 = c.kernels.values().map(|v| v.1).sum();
        assert_eq!(
            (launches, c.kernels.len(), ns),
            (e.kernel_launches, e.kernel_names, e.kernel_ns),
            "{}",
            e.file
        );
        let want: Vec<(String, u64, u64)> = e
            .top
            .iter()
            .map(|&(n, l, t)| (n.to_string(), l, t))
            .collect();
        assert_eq!(top(&c, 3), want, "{}", e.file);
        assert_eq!(c.processes, e.processes, "{}", e.file);
        let ranks: Vec<&str> = c.ranks.iter().map(String::as_str).collect();
        assert_eq!(ranks, e.ranks, "{}", e.file);
        // The report agrees, row by row, with the independent count.
        let tables = reports(&bytes);
        let rows = kernel_rows(&tables);
        assert_eq!(rows[..3], want[..], "{}", e.file);
        let mut independent = top(&c, usize::MAX);
        let mut reported = rows.clone();
        independent.sort();
        reported.sort();
        assert_eq!(reported, independent, "{}", e.file);
        // One process row per stream that started a process.
        let p = table(&tables, "processes");
        assert_eq!(p.rows.len(), e.processes, "{}", e.file);
        let rank = column(p, "Rank");
        let mut reported_ranks: Vec<String> = p
            .rows
            .iter()
            .map(|r| text(&r[rank]))
            .filter(|r| !r.is_empty())
            .collect();
        reported_ranks.sort();
        let want_ranks: Vec<String> = e
            .ranks
            .iter()
            .map(|r| format!("rank {r} (local {r})"))
            .collect();
        assert_eq!(reported_ranks, want_ranks, "{}", e.file);
    }
}

/// Flows a timeline can draw, counted from the records alone: per stream, the correlation ids (not 0) that both
/// a launch or copy call and some device work (kernel, copy, set, graph launch) carry.
fn flows_in_records(items: &[TraceItem]) -> usize {
    let (mut calls, mut work) = (BTreeSet::new(), BTreeSet::new());
    for item in items {
        let TraceItem::Record { stream, record } = item else {
            continue;
        };
        match record {
            Record::Api(a)
                if a.correlation != 0
                    && ["Launch", "Memcpy", "Memset", "memcpy", "memset"]
                        .iter()
                        .any(|w| a.name.contains(w)) =>
            {
                calls.insert((*stream, a.correlation));
            }
            Record::Kernel(k) if k.correlation != 0 => {
                work.insert((*stream, k.correlation));
            }
            Record::Memcpy(m) if m.correlation != 0 => {
                work.insert((*stream, m.correlation));
            }
            Record::Memset(m) if m.correlation != 0 => {
                work.insert((*stream, m.correlation));
            }
            Record::GraphLaunch(g) if g.correlation != 0 => {
                work.insert((*stream, g.correlation));
            }
            _ => {}
        }
    }
    calls.intersection(&work).count()
}

use gpu_tools_testing::perfetto;

#[test]
fn the_exports_of_each_fixture_end_every_flow_they_start() {
    for e in &FIXTURES {
        let want = e.flows;
        let bytes = fixture(e.file);
        let independent = flows_in_records(&count(&bytes).items);

        let mut t = Timeline::new(PerfettoWriter::new(Vec::new()));
        assert_eq!(t.read(0, &bytes[..]).unwrap(), vec![]);
        let pb = t.finish().unwrap().into_inner().unwrap();
        let (starts, ends) = perfetto::flows(&pb);
        assert_eq!(
            starts, ends,
            "{}: each flow id starts once and ends once",
            e.file
        );
        let mut unique = starts.clone();
        unique.dedup();
        assert_eq!(unique.len(), starts.len(), "{}", e.file);

        let mut t = Timeline::new(ChromeWriter::new(Vec::new()));
        assert_eq!(t.read(0, &bytes[..]).unwrap(), vec![]);
        let json = t.finish().unwrap().into_inner().unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&json).unwrap();
        let events = doc["traceEvents"].as_array().unwrap();
        let ph = |p: &str| events.iter().filter(|ev| ev["ph"] == p).count();

        println!(
            "{}: perfetto {} starts {} ends; chrome {} s {} f; records {independent}",
            e.file,
            starts.len(),
            ends.len(),
            ph("s"),
            ph("f")
        );
        assert_eq!(
            (starts.len(), ends.len(), ph("s"), ph("f")),
            (want, want, want, want),
            "{}",
            e.file
        );
        assert_eq!(independent, want, "{}", e.file);
    }
}

#[test]
fn two_files_whose_numbers_agree_in_their_low_bits_draw_flows_of_their_own() {
    let e = &FIXTURES[0];
    let bytes = fixture(e.file);
    let mut t = Timeline::new(PerfettoWriter::new(Vec::new()));
    // 65536 and 0 agree in their low 16 bits, as two of a job's files would at the 65,537th.
    for file in [0, 65_536] {
        assert_eq!(t.read(file, &bytes[..]).unwrap(), vec![]);
    }
    let pb = t.finish().unwrap().into_inner().unwrap();
    let (mut starts, _) = perfetto::flows(&pb);
    assert_eq!(starts.len(), 2 * e.flows, "{}", e.file);
    starts.sort_unstable();
    starts.dedup();
    assert_eq!(starts.len(), 2 * e.flows, "a flow id drawn twice");
}

/// The format 2 recording kept as it was, and the fixture that is its rewrite.
const FORMAT_2: &str = "torch_compile.format2.gputrace";
const FORMAT_2_REWRITTEN: &str = "torch_compile.gputrace";

/// The offsets of the chunks of a file of the current version.
fn chunk_offsets(file: &[u8]) -> Vec<usize> {
    let mut at = FILE_HEADER_LEN;
    let mut out = Vec::new();
    while at < file.len() {
        out.push(at);
        at += CHUNK_HEADER_LEN
            + u32::from_le_bytes(file[at + 5..at + 9].try_into().unwrap()) as usize;
    }
    assert_eq!(at, file.len());
    out
}

#[test]
fn the_format_2_recording_and_its_rewrite_read_to_the_same_records_and_reports() {
    let v2 = fixture(FORMAT_2);
    let committed = fixture(FORMAT_2_REWRITTEN);
    let read = count(&v2);
    assert_eq!(read.version, Some(2));
    let again = count(&committed);
    assert_eq!(again.version, Some(FILE_VERSION));
    assert_eq!(again.items, read.items);
    for format in [Format::Text, Format::Json] {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        write_tables(&reports(&v2), format, &mut a).unwrap();
        write_tables(&reports(&committed), format, &mut b).unwrap();
        assert!(a.len() > 1000);
        assert_eq!(a, b, "{format:?}");
    }
    // The committed file is what the rewrite writes: the same bytes but the final chunk's end time (and so its
    // checksums).
    let fresh = rewrite(&v2[..], Vec::new()).unwrap();
    assert_eq!(fresh.len(), committed.len());
    let last = *chunk_offsets(&committed).last().unwrap();
    assert_eq!(committed[last], 4, "the final chunk");
    assert_eq!(fresh[..last + 9], committed[..last + 9]);
    assert_eq!(
        fresh[last + CHUNK_HEADER_LEN + 8..],
        committed[last + CHUNK_HEADER_LEN + 8..]
    );
}

/// Reads `bytes`, and says whether it read with no error at all.
fn reads_clean(bytes: &[u8]) -> bool {
    TraceReader::new(bytes).all(|item| item.is_ok())
}

/// Every chunk of the two small fixtures is cut; of the large one (187 chunks, 2.8 MB: each cut reads what comes
/// before it), one chunk in `DDP_STRIDE` and the first and last two.
const DDP_STRIDE: usize = 37;

#[test]
fn no_strict_prefix_of_a_fixture_reads_without_an_error() {
    let mut cuts = 0;
    for e in &FIXTURES {
        let file = fixture(e.file);
        assert!(reads_clean(&file), "{}", e.file);
        let chunks = chunk_offsets(&file);
        let n = chunks.len();
        let stride = if file.len() > 1 << 20 { DDP_STRIDE } else { 1 };
        // Every chunk boundary (the final chunk's own offset included), points inside each chunk (its first byte,
        // inside its header, its first payload byte, its middle, its last byte) and inside the file header.
        let mut at: Vec<usize> = vec![0, 1, 8, 12, FILE_HEADER_LEN - 1];
        for (i, &o) in chunks.iter().enumerate() {
            if i % stride != 0 && i > 1 && i + 2 < n {
                continue;
            }
            let end = chunks.get(i + 1).copied().unwrap_or(file.len());
            at.extend([
                o,
                o + 1,
                o + 9,
                o + CHUNK_HEADER_LEN,
                (o + end) / 2,
                end - 1,
            ]);
        }
        at.sort_unstable();
        at.dedup();
        for cut in at {
            let mut errors = TraceReader::new(&file[..cut]).filter_map(Result::err);
            let fatal = errors.find(TraceFileError::is_fatal);
            let boundary = chunks.binary_search(&cut).is_ok();
            match fatal {
                Some(TraceFileError::Unfinished { offset }) if boundary => {
                    assert_eq!(offset, cut as u64, "{}", e.file)
                }
                Some(TraceFileError::Truncated { .. } | TraceFileError::Empty) if !boundary => {}
                other => panic!("{} cut at {cut}: {other:?}", e.file),
            }
            cuts += 1;
        }
        println!("{}: {} chunks", e.file, chunks.len());
    }
    println!("{cuts} cuts, each an error");
}

/// Bytes of `file` to change: every byte of the file header and of the first two chunk headers, one in `stride` of
/// the rest, and, where `ends`, every byte of the final chunk (each of those changes reads the whole file first).
fn positions(file: &[u8], stride: usize, ends: bool) -> Vec<usize> {
    let chunks = chunk_offsets(file);
    let last = *chunks.last().unwrap();
    let mut at: Vec<usize> = (0..FILE_HEADER_LEN).collect();
    for &o in chunks.iter().take(2) {
        at.extend(o..o + CHUNK_HEADER_LEN);
    }
    if ends {
        at.extend(last..file.len());
    } else {
        at.extend([
            last,
            last + 5,
            last + 13,
            last + CHUNK_HEADER_LEN + 9,
            file.len() - 1,
        ]);
    }
    at.extend((0..file.len()).step_by(stride));
    at.sort_unstable();
    at.dedup();
    at
}

#[test]
fn no_one_byte_change_of_a_fixture_reads_without_an_error_or_with_other_records() {
    let mut tried = 0;
    // torch_loop: 300 KB, every 1499th byte; torch_compile: 106 KB, every 211th; ddp_2rank: 2.8 MB, every 300007th.
    for (e, (stride, ends)) in FIXTURES
        .iter()
        .zip([(1499, true), (211, true), (300_007, false)])
    {
        let file = fixture(e.file);
        let whole = count(&file).items;
        for (n, i) in positions(&file, stride, ends).into_iter().enumerate() {
            let mut changed = file.clone();
            // Each single bit in turn, and all eight.
            changed[i] ^= [1, 2, 4, 8, 16, 32, 64, 128, 0xff][n % 9];
            let (mut items, mut fatal) = (Vec::new(), Vec::new());
            for item in TraceReader::new(&changed[..]) {
                match item {
                    Ok(item) => items.push(item),
                    Err(err) if err.is_fatal() => fatal.push(err),
                    Err(err) => panic!("{} byte {i}: a checksum error comes first: {err}", e.file),
                }
            }
            assert_eq!(fatal.len(), 1, "{} byte {i}: {fatal:?}", e.file);
            assert!(
                matches!(
                    fatal[0],
                    TraceFileError::NotATrace { .. }
                        | TraceFileError::BadFileHeader { .. }
                        | TraceFileError::ChunkHeaderChecksum { .. }
                        | TraceFileError::ChunkChecksum { .. }
                ),
                "{} byte {i}: {:?}",
                e.file,
                fatal[0]
            );
            assert_eq!(items[..], whole[..items.len()], "{} byte {i}", e.file);
            tried += 1;
        }
    }
    println!("{tried} one-byte changes, each an error");
}
