//! Trace files: several streams in one file read back in order; every damaged input gives its precise error and
//! never a panic (property tests; `PROPTEST_CASES` raises their number); reports of a synthetic run with known
//! values; the merge of files of one host and of two hosts; the size of a 200k-launch trace.

use std::sync::Arc;

use gpu_tools_trace::file::{
    CHUNK_HEADER_LEN, FILE_HEADER_LEN, FILE_VERSION, TraceFileError, TraceFileWriter, TraceItem,
    TraceReader,
};
use gpu_tools_trace::report::{Analysis, Cell, Table};
use gpu_tools_trace::*;
use proptest::prelude::*;

use gpu_tools_testing::records::{api, kernel};

fn marker(time: u64, kind: MarkerKind, id: u32, thread: u32, name: &str) -> Record {
    Record::Marker(MarkerRecord {
        time,
        kind,
        id,
        process: 100,
        thread,
        domain: Arc::from(""),
        name: name.into(),
    })
}

fn memcpy(start: u64, end: u64, bytes: u64, correlation: u32) -> Record {
    Record::Memcpy(MemcpyRecord {
        start,
        end,
        device: 0,
        context: 1,
        stream: 7,
        correlation,
        bytes,
        kind: CopyKind::HtoD,
        src: MemoryKind::Pinned,
        dst: MemoryKind::Device,
        is_async: true,
    })
}

fn encode(pid: u32, records: &[Record]) -> Vec<u8> {
    let mut e = Encoder::new(&StreamHeader::new(pid, 130001, TimestampClock::Monotonic));
    for r in records {
        e.push(r);
    }
    e.bytes().to_vec()
}

fn read_all(bytes: &[u8]) -> (Vec<TraceItem>, Vec<TraceFileError>) {
    let (mut items, mut errors) = (Vec::new(), Vec::new());
    for item in TraceReader::new(bytes) {
        match item {
            Ok(i) => items.push(i),
            Err(e) => errors.push(e),
        }
    }
    (items, errors)
}

fn records_of(items: &[TraceItem], stream: u32) -> Vec<Record> {
    items
        .iter()
        .filter_map(|i| match i {
            TraceItem::Record { stream: s, record } if *s == stream => Some(record.clone()),
            _ => None,
        })
        .collect()
}

fn stream_a() -> Vec<Record> {
    vec![
        api("cudaLaunchKernel", 1000, 1100, 1, 11),
        kernel("gemm", 1200, 2200, 1),
        memcpy(2300, 2400, 4096, 2),
    ]
}

fn stream_b() -> Vec<Record> {
    vec![
        marker(10, MarkerKind::Start, 5, 22, "step"),
        kernel("relu", 20, 30, 9),
        marker(40, MarkerKind::End, 5, 22, ""),
    ]
}

/// Two streams interleaved in pieces of `piece` bytes, as a tracer reading two connections writes them.
fn two_stream_file(piece: usize) -> Vec<u8> {
    let (a, b) = (encode(100, &stream_a()), encode(200, &stream_b()));
    let mut w = TraceFileWriter::new(Vec::new()).unwrap();
    let (sa, sb) = (w.add_stream(), w.add_stream());
    let (mut ia, mut ib) = (a.chunks(piece), b.chunks(piece));
    loop {
        let (pa, pb) = (ia.next(), ib.next());
        if pa.is_none() && pb.is_none() {
            break;
        }
        if let Some(p) = pa {
            w.write(sa, p).unwrap();
        }
        if let Some(p) = pb {
            w.write(sb, p).unwrap();
        }
    }
    w.close(sa).unwrap();
    w.close(sb).unwrap();
    let written = w.bytes_written();
    let out = w.finish().unwrap();
    // The final chunk follows: the end time, the bytes and chunks before it, two streams of 12 bytes each.
    assert_eq!(
        written + (CHUNK_HEADER_LEN + 28 + 2 * 12) as u64,
        out.len() as u64
    );
    out
}

#[test]
fn several_streams_round_trip_in_any_piece_size() {
    for piece in [1, 7, 64, 1 << 20] {
        let file = two_stream_file(piece);
        let (items, errors) = read_all(&file);
        assert_eq!(errors, vec![], "piece {piece}");
        assert_eq!(records_of(&items, 0), stream_a(), "piece {piece}");
        assert_eq!(records_of(&items, 1), stream_b(), "piece {piece}");
        let headers: Vec<(u32, u32)> = items
            .iter()
            .filter_map(|i| match i {
                TraceItem::Header { stream, header } => Some((*stream, header.pid)),
                _ => None,
            })
            .collect();
        assert_eq!(headers, vec![(0, 100), (1, 200)]);
        let closed = items
            .iter()
            .filter(|i| matches!(i, TraceItem::Closed { .. }))
            .count();
        assert_eq!(closed, 2);
    }
}

#[test]
fn coded_notices_go_through_a_files_packed_frames_and_back() {
    // Two, so that the second is packed against the first, as every frame of a tag the readers of earlier
    // releases do not know must be (they unpack it so, then skip it).
    let coded = |code: u16, values: Vec<u64>, detail: &str, text: &str| {
        Record::CodedNotice(CodedNotice {
            level: NoticeLevel::Info,
            code,
            values,
            detail: detail.into(),
            text: text.into(),
        })
    };
    let records = vec![
        coded(
            3,
            vec![2, 4242],
            "",
            "profiling ready: 2 context(s), this thread is 4242",
        ),
        kernel("gemm", 1200, 2200, 1),
        coded(
            5,
            vec![760],
            "",
            "profiling finished: 760 stall records or ranges",
        ),
        coded(
            7,
            vec![],
            "no device has an active context",
            "profiling not possible: ...",
        ),
    ];
    let mut w = TraceFileWriter::new(Vec::new()).unwrap();
    let stream = w.add_stream();
    w.write(stream, &encode(100, &records)).unwrap();
    w.close(stream).unwrap();
    let file = w.finish().unwrap();
    let (items, errors) = read_all(&file);
    assert_eq!(errors, vec![]);
    assert_eq!(records_of(&items, 0), records);
}

#[test]
fn a_single_stream_is_read_as_stream_zero() {
    let (items, errors) = read_all(&encode(100, &stream_a()));
    assert_eq!(errors, vec![]);
    assert_eq!(records_of(&items, 0), stream_a());
}

#[test]
fn bad_inputs_give_their_precise_errors() {
    assert_eq!(read_all(&[]).1, vec![TraceFileError::Empty]);
    assert_eq!(
        read_all(b"{\"traceEvents\": []}").1,
        vec![TraceFileError::NotATrace {
            found: b"{\"traceEv".to_vec()[..8].to_vec()
        }]
    );
    let mut newer = two_stream_file(64);
    for version in [0u16, 1, FILE_VERSION + 1] {
        // As the writer of that version would have written it: versions 0 and 1 have zeros where version 3 has
        // its checksum; a newer one has its own checksum.
        newer[8..10].copy_from_slice(&version.to_le_bytes());
        newer[24..28].fill(0);
        if version > FILE_VERSION {
            reseal_file_header(&mut newer);
        }
        let errors = read_all(&newer).1;
        assert_eq!(errors, vec![TraceFileError::UnsupportedVersion { version }]);
        let text = errors[0].to_string();
        let want = if version > FILE_VERSION {
            "newer"
        } else {
            "older"
        };
        assert!(text.contains(want), "{text}");
    }
    let mut short = two_stream_file(64);
    short[10..12].copy_from_slice(&16u16.to_le_bytes());
    reseal_file_header(&mut short);
    assert_eq!(
        read_all(&short).1,
        vec![TraceFileError::BadHeaderLength { len: 16 }]
    );
    // A length above the largest chunk, with the header's checksums made to hold (a writer's bug): refused there.
    let mut corrupt = two_stream_file(64);
    corrupt[FILE_HEADER_LEN + 5..FILE_HEADER_LEN + 9].copy_from_slice(&u32::MAX.to_le_bytes());
    let h = FILE_HEADER_LEN;
    let header_crc = crc32fast::hash(&corrupt[h..h + 13]);
    corrupt[h + 13..h + 17].copy_from_slice(&header_crc.to_le_bytes());
    assert_eq!(
        read_all(&corrupt).1,
        vec![TraceFileError::Corrupt {
            offset: FILE_HEADER_LEN as u64,
            kind: 1,
            len: u32::MAX
        }]
    );
}

/// Makes a version 3 file header's checksum hold again after a deliberate change.
fn reseal_file_header(file: &mut [u8]) {
    let mut c = crc32fast::Hasher::new();
    c.update(&file[..24]);
    c.update(&file[28..32]);
    let crc = c.finalize();
    file[24..28].copy_from_slice(&crc.to_le_bytes());
}

/// Makes the chunk at `at` hold again (both checksums) after a deliberate change of its header or payload.
fn reseal_chunk(file: &mut [u8], at: usize) {
    let len = u32::from_le_bytes(file[at + 5..at + 9].try_into().unwrap()) as usize;
    let mut c = crc32fast::Hasher::new();
    c.update(&file[at..at + 9]);
    c.update(&file[at + CHUNK_HEADER_LEN..at + CHUNK_HEADER_LEN + len]);
    let crc = c.finalize();
    file[at + 9..at + 13].copy_from_slice(&crc.to_le_bytes());
    let header_crc = crc32fast::hash(&file[at..at + 13]);
    file[at + 13..at + 17].copy_from_slice(&header_crc.to_le_bytes());
}

#[test]
fn a_corrupt_packed_chunk_ends_only_its_stream_with_its_offset() {
    let mut file = two_stream_file(1 << 20);
    let chunks = chunk_offsets(&file);
    // The first packed chunk (kind 3) of stream 0: its last byte cut off inside the length stays a valid file,
    // so the damage is a last frame that ends inside one of its numbers.
    let at = *chunks
        .iter()
        .find(|&&o| file[o] == 3 && file[o + 1..o + 5] == [0, 0, 0, 0])
        .expect("a packed chunk");
    let len = u32::from_le_bytes(file[at + 5..at + 9].try_into().unwrap());
    file[at + 5..at + 9].copy_from_slice(&(len - 1).to_le_bytes());
    file.remove(at + CHUNK_HEADER_LEN + len as usize - 1);
    // Written so, by a writer's bug: the checksums hold, the final chunk counts the bytes written, and the packed
    // form is what is wrong.
    reseal_chunk(&mut file, at);
    let last = *chunk_offsets(&file).last().unwrap();
    file[last + CHUNK_HEADER_LEN + 8..last + CHUNK_HEADER_LEN + 16]
        .copy_from_slice(&(last as u64).to_le_bytes());
    reseal_chunk(&mut file, last);
    let (items, errors) = read_all(&file);
    assert_eq!(
        errors,
        vec![TraceFileError::BadPackedChunk {
            stream: 0,
            offset: at as u64,
            detail: "it ends inside a number"
        }]
    );
    assert!(!errors[0].is_fatal());
    assert_eq!(
        records_of(&items, 0),
        vec![],
        "stream 0 stops at the damage"
    );
    assert_eq!(records_of(&items, 1), stream_b(), "stream 1 is whole");
}

/// Offsets of the chunks of a well-formed file.
fn chunk_offsets(file: &[u8]) -> Vec<usize> {
    let mut at = FILE_HEADER_LEN;
    let mut out = Vec::new();
    while at < file.len() {
        out.push(at);
        let len = u32::from_le_bytes(file[at + 5..at + 9].try_into().unwrap()) as usize;
        at += CHUNK_HEADER_LEN + len;
    }
    assert_eq!(at, file.len());
    out
}

/// Every strict prefix of a file is an error: inside a chunk, truncated at that chunk; between two chunks, not
/// finished by its writer.
#[test]
fn a_file_cut_anywhere_says_where_and_keeps_every_whole_chunk() {
    let file = two_stream_file(16);
    let chunks = chunk_offsets(&file);
    assert_eq!(read_all(&file).1, vec![]);
    for cut in 0..file.len() {
        let (items, errors) = read_all(&file[..cut]);
        if cut == 0 {
            assert_eq!(errors, vec![TraceFileError::Empty]);
            continue;
        }
        if cut < FILE_HEADER_LEN {
            assert_eq!(
                errors,
                vec![TraceFileError::Truncated {
                    offset: 0,
                    pending: cut
                }],
                "cut {cut}"
            );
            continue;
        }
        // The chunk the cut falls in (none where it falls between chunks).
        let inside = chunks
            .iter()
            .rev()
            .find(|&&o| o < cut && chunks.binary_search(&cut).is_err());
        let fatal: Vec<_> = errors.iter().filter(|e| e.is_fatal()).collect();
        match inside {
            Some(&o) => assert_eq!(
                fatal,
                vec![&TraceFileError::Truncated {
                    offset: o as u64,
                    pending: cut - o
                }],
                "cut {cut}"
            ),
            None => assert_eq!(
                fatal,
                vec![&TraceFileError::Unfinished { offset: cut as u64 }],
                "cut {cut}"
            ),
        }
        // Whatever was decoded is a prefix of what was written.
        let a = records_of(&items, 0);
        let b = records_of(&items, 1);
        assert_eq!(a[..], stream_a()[..a.len()], "cut {cut}");
        assert_eq!(b[..], stream_b()[..b.len()], "cut {cut}");
    }
}

proptest! {
    #[test]
    fn arbitrary_bytes_after_a_file_header_never_panic(tail in proptest::collection::vec(any::<u8>(), 0..4096)) {
        let mut file = two_stream_file(1 << 20)[..FILE_HEADER_LEN].to_vec();
        file.extend_from_slice(&tail);
        let (_, errors) = read_all(&file);
        prop_assert!(errors.iter().filter(|e| e.is_fatal()).count() <= 1);
    }

    #[test]
    fn mutated_files_never_panic_and_fail_at_most_once(
        piece in 1usize..80,
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut file = two_stream_file(piece);
        for (at, byte) in edits {
            let i = at.index(file.len());
            file[i] = byte;
        }
        let cut = cut.index(file.len() + 1);
        let (items, errors) = read_all(&file[..cut]);
        let fatal = errors.iter().filter(|e| e.is_fatal()).count();
        prop_assert!(fatal <= 1);
        // A fatal error is the last thing yielded.
        if fatal == 1 {
            prop_assert!(errors.last().unwrap().is_fatal());
        }
        prop_assert!(items.len() <= 2 * 3 + 4);
    }

    #[test]
    fn truncation_is_reported_at_the_chunk_it_cuts(piece in 1usize..80, cut in any::<prop::sample::Index>()) {
        let file = two_stream_file(piece);
        let chunks = chunk_offsets(&file);
        let cut = FILE_HEADER_LEN + 1 + cut.index(file.len() - FILE_HEADER_LEN);
        let (_, errors) = read_all(&file[..cut]);
        let fatal: Vec<_> = errors.into_iter().filter(|e| e.is_fatal()).collect();
        if cut == file.len() {
            prop_assert_eq!(fatal, vec![]);
        } else if chunks.binary_search(&cut).is_ok() {
            prop_assert_eq!(fatal, vec![TraceFileError::Unfinished { offset: cut as u64 }]);
        } else {
            let o = *chunks.iter().rev().find(|&&o| o < cut).unwrap();
            prop_assert_eq!(fatal, vec![TraceFileError::Truncated { offset: o as u64, pending: cut - o }]);
        }
    }
}

fn table<'a>(tables: &'a [Table], name: &str) -> &'a Table {
    tables
        .iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("no table {name}"))
}

fn column<'a>(t: &'a Table, row: usize, name: &str) -> &'a Cell {
    let c = t
        .columns
        .iter()
        .position(|&c| c == name)
        .unwrap_or_else(|| panic!("no column {name} in {}", t.name));
    &t.rows[row][c]
}

fn int(c: &Cell) -> u64 {
    match c {
        Cell::Int(v) => *v,
        other => panic!("not a whole number: {other:?}"),
    }
}

fn text(c: &Cell) -> &str {
    match c {
        Cell::Text(v) => v,
        other => panic!("not text: {other:?}"),
    }
}

/// A run of one process: a range "step" on thread 11 around two launches and a copy, a launch outside it.
fn synthetic_run(pid: u32, host: &str, anchor: Option<ClockAnchor>) -> Vec<Record> {
    let mut r = vec![Record::ProcessInfo(ProcessInfo {
        host: host.into(),
        boot_id: format!("boot-{host}"),
        labels: vec![("RANK".into(), pid.to_string())],
    })];
    if let Some(a) = anchor {
        r.push(Record::ClockAnchor(a));
    }
    r.extend([
        marker(1_000, MarkerKind::Start, 1, 11, "step"),
        api("cudaLaunchKernel", 1_100, 1_200, 1, 11),
        api("cudaLaunchKernel", 1_300, 1_400, 2, 11),
        api("cudaMemcpyAsync", 1_500, 1_700, 3, 11),
        marker(2_000, MarkerKind::End, 1, 11, ""),
        api("cudaLaunchKernel", 3_000, 3_100, 4, 11),
        kernel("gemm", 1_500, 2_500, 1),
        kernel("gemm", 2_500, 4_500, 2),
        memcpy(4_500, 4_600, 1 << 20, 3),
        kernel("relu", 5_000, 5_300, 4),
    ]);
    r
}

#[test]
fn reports_of_a_synthetic_run_have_exact_values() {
    let mut a = Analysis::new();
    let errors = a.read(0, &encode(100, &synthetic_run(100, "h1", None))[..]);
    assert_eq!(errors, vec![]);
    let tables = a.reports();

    let k = table(&tables, "cuda_gpu_kern_sum");
    assert_eq!(k.rows.len(), 2);
    assert_eq!(text(column(k, 0, "Name")), "gemm");
    assert_eq!(int(column(k, 0, "Total Time (ns)")), 3_000);
    assert_eq!(int(column(k, 0, "Instances")), 2);
    assert_eq!(int(column(k, 0, "Min (ns)")), 1_000);
    assert_eq!(int(column(k, 0, "Max (ns)")), 2_000);
    assert_eq!(text(column(k, 1, "Name")), "relu");
    assert_eq!(int(column(k, 1, "Total Time (ns)")), 300);

    let api_t = table(&tables, "cuda_api_sum");
    assert_eq!(text(column(api_t, 0, "Name")), "cudaLaunchKernel");
    assert_eq!(int(column(api_t, 0, "Total Time (ns)")), 300);
    assert_eq!(int(column(api_t, 0, "Instances")), 3);
    assert_eq!(text(column(api_t, 1, "Name")), "cudaMemcpyAsync");
    assert_eq!(int(column(api_t, 1, "Total Time (ns)")), 200);

    let mt = table(&tables, "cuda_gpu_mem_time_sum");
    assert_eq!(mt.rows.len(), 1);
    assert_eq!(int(column(mt, 0, "Total Time (ns)")), 100);
    assert_eq!(int(column(mt, 0, "Instances")), 1);

    let n = table(&tables, "nvtx_sum");
    assert_eq!(n.rows.len(), 1);
    assert_eq!(text(column(n, 0, "Range")), "step");
    assert_eq!(text(column(n, 0, "Style")), "PushPop");
    assert_eq!(int(column(n, 0, "Total Time (ns)")), 1_000);
    assert_eq!(int(column(n, 0, "Instances")), 1);

    // The two kernels and the copy launched inside "step" (not the later launch): first start 1_500 to last end
    // 4_600.
    let p = table(&tables, "nvtx_gpu_proj_sum");
    assert_eq!(p.rows.len(), 1);
    assert_eq!(text(column(p, 0, "Range")), "step");
    assert_eq!(int(column(p, 0, "Total Proj Time (ns)")), 3_100);
    assert_eq!(int(column(p, 0, "Total Range Time (ns)")), 1_000);
    assert_eq!(int(column(p, 0, "Range Instances")), 1);
    assert_eq!(int(column(p, 0, "Total GPU Ops")), 3);

    // Every table renders in every format.
    for format in [
        report::Format::Text,
        report::Format::Csv,
        report::Format::Json,
    ] {
        let mut out = Vec::new();
        report::write_tables(&tables, format, &mut out).unwrap();
        assert!(String::from_utf8(out).unwrap().contains("gemm"));
    }
}

fn file_of(streams: &[Vec<u8>]) -> Vec<u8> {
    let mut w = TraceFileWriter::new(Vec::new()).unwrap();
    for s in streams {
        let n = w.add_stream();
        w.write(n, s).unwrap();
        w.close(n).unwrap();
    }
    w.finish().unwrap()
}

#[test]
fn two_runs_of_one_host_merge_without_shifting() {
    let anchor = |m: u64| ClockAnchor {
        monotonic: m,
        realtime: 1_700_000_000_000_000_000 + m,
        uncertainty: 300,
    };
    let one = file_of(&[encode(100, &synthetic_run(100, "h1", Some(anchor(500))))]);
    let two = file_of(&[encode(101, &synthetic_run(101, "h1", Some(anchor(900))))]);
    let mut a = Analysis::new();
    assert_eq!(a.read(0, &one[..]), vec![]);
    assert_eq!(a.read(1, &two[..]), vec![]);
    let domains = a.alignment().domains();
    assert_eq!(domains.len(), 1);
    assert_eq!(domains[0].shift, 0);
    assert_eq!(domains[0].streams, 2);
    assert_eq!(a.alignment().apply(1, 0, 1_234), 1_234);
    let tables = a.reports();
    let k = table(&tables, "cuda_gpu_kern_sum");
    assert_eq!(int(column(k, 0, "Instances")), 4);
    assert_eq!(table(&tables, "processes").rows.len(), 2);
}

#[test]
fn two_hosts_are_aligned_on_the_wall_clock_within_the_anchor_uncertainty() {
    // Host h2's monotonic clock reads 7 s more than h1's at the same wall-clock instant.
    let wall = 1_700_000_000_000_000_000u64;
    let h1 = ClockAnchor {
        monotonic: 1_000,
        realtime: wall,
        uncertainty: 200,
    };
    let h2 = ClockAnchor {
        monotonic: 7_000_001_000,
        realtime: wall,
        uncertainty: 450,
    };
    let one = file_of(&[encode(100, &synthetic_run(100, "h1", Some(h1)))]);
    let two = file_of(&[encode(200, &synthetic_run(200, "h2", Some(h2)))]);
    let mut a = Analysis::new();
    assert_eq!(a.read(0, &one[..]), vec![]);
    assert_eq!(a.read(1, &two[..]), vec![]);
    let domains = a.alignment().domains();
    assert_eq!(domains.len(), 2);
    assert_eq!((domains[0].host.as_str(), domains[0].shift), ("h1", 0));
    assert_eq!(
        (domains[1].host.as_str(), domains[1].shift),
        ("h2", -7_000_000_000)
    );
    assert_eq!(domains[1].uncertainty, 450);
    // The same instant on both hosts lands on the same common time.
    assert_eq!(
        a.alignment().apply(1, 0, 7_000_001_000),
        a.alignment().apply(0, 0, 1_000)
    );
}

/// Names as PyTorch's launch loop produces them: one kernel and seven API calls per launch.
#[test]
fn a_200k_launch_trace_takes_at_most_a_tenth_of_the_chrome_json() {
    const LAUNCHES: u32 = 200_000;
    let kernels = [
        "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)",
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)",
    ];
    let calls: [(&str, ApiDomain); 7] = [
        ("cudaGetDevice", ApiDomain::Runtime),
        ("cudaGetLastError", ApiDomain::Runtime),
        ("cuDevicePrimaryCtxGetState", ApiDomain::Driver),
        ("cuKernelGetName", ApiDomain::Driver),
        ("cudaStreamIsCapturing", ApiDomain::Runtime),
        ("cuLaunchKernel", ApiDomain::Driver),
        ("cudaLaunchKernel", ApiDomain::Runtime),
    ];
    let header = StreamHeader::new(4242, 130001, TimestampClock::Monotonic);
    let mut w = TraceFileWriter::new(Vec::new()).unwrap();
    let s = w.add_stream();
    let mut e = Encoder::new(&header);
    let mut t = 1_000_000_000u64;
    for i in 0..LAUNCHES {
        for (j, (name, domain)) in calls.iter().enumerate() {
            e.push(&Record::Api(ApiRecord {
                start: t,
                end: t + 700 + (i as u64 * 37 % 300),
                domain: *domain,
                cbid: 13 + j as u32,
                name: Arc::from(*name),
                correlation: i * 8 + j as u32,
                process: 4242,
                thread: 4242,
                return_value: 0,
            }));
            t += 1_100;
        }
        e.push(&kernel(
            kernels[(i % 2) as usize],
            t + 5_000,
            t + 7_300 + (i as u64 % 97),
            i * 8 + 6,
        ));
        // The tracer writes what it reads, as it arrives.
        if e.bytes().len() > 60_000 {
            w.write(s, e.bytes()).unwrap();
            e.clear();
        }
    }
    w.write(s, e.bytes()).unwrap();
    w.close(s).unwrap();
    let bytes = w.bytes_written();
    let per_launch = bytes as f64 / f64::from(LAUNCHES);
    println!(
        "200000 launches (1 kernel + 7 API records each): {bytes} bytes, {per_launch:.1} bytes per launch, {:.1} per record",
        per_launch / 8.0
    );
    // A tenth of the 354 MB of Chrome JSON the same 200k launches took: 177 bytes per launch.
    assert!(per_launch <= 177.0, "{per_launch} bytes per launch");
    // And it reads back whole.
    let file = w.finish().unwrap();
    let mut records = 0u64;
    for item in TraceReader::new(&file[..]) {
        if let TraceItem::Record { .. } = item.unwrap() {
            records += 1;
        }
    }
    assert_eq!(records, u64::from(LAUNCHES) * 8);
}

#[test]
fn reader_and_writer_are_send() {
    fn send<T: Send>() {}
    send::<TraceReader<std::fs::File>>();
    send::<TraceFileWriter<std::fs::File>>();
    send::<Analysis>();
}
