//! Trace file checksums (format 3 and later): every changed byte of a file, its final chunk's included, is an
//! error that names where, never a different record; a file cut inside its last chunk is still "truncated" with
//! everything before it read; version 2 files (no checksums) still read, and the same sweep over a version 2 file
//! shows the changes it could not see.

use gpu_tools_trace::file::{
    CHUNK_HEADER_LEN, FILE_HEADER_LEN, FILE_VERSION, TraceFileError, TraceFileWriter, TraceItem,
    TraceReader,
};
use gpu_tools_trace::*;
use proptest::prelude::*;

use gpu_tools_testing::records::{api, kernel};

fn stream_a() -> Vec<Record> {
    vec![
        api("cudaLaunchKernel", 1000, 1100, 1, 11),
        kernel("gemm", 1200, 2200, 1),
        api("cudaLaunchKernel", 2300, 2400, 2, 11),
        kernel("gemm", 2500, 4500, 2),
    ]
}

fn stream_b() -> Vec<Record> {
    vec![
        kernel("relu", 20, 30, 9),
        Record::CounterGap(CounterGap {
            start: 40,
            end: 90,
            device: 0,
            samples: 3,
        }),
    ]
}

fn encode(pid: u32, records: &[Record]) -> Vec<u8> {
    let mut e = Encoder::new(&StreamHeader::new(pid, 130001, TimestampClock::Monotonic));
    for r in records {
        e.push(r);
    }
    e.bytes().to_vec()
}

/// A small file of the current version: two streams written in pieces of 48 bytes (header chunks, packed chunks,
/// the ends, the final chunk).
fn small_file() -> Vec<u8> {
    let (a, b) = (encode(100, &stream_a()), encode(200, &stream_b()));
    let mut w = TraceFileWriter::new(Vec::new()).unwrap();
    let (sa, sb) = (w.add_stream(), w.add_stream());
    for (i, p) in a.chunks(48).enumerate() {
        w.write(sa, p).unwrap();
        if let Some(q) = b.chunks(48).nth(i) {
            w.write(sb, q).unwrap();
        }
    }
    for q in b.chunks(48).skip(a.chunks(48).count()) {
        w.write(sb, q).unwrap();
    }
    w.close(sa).unwrap();
    w.close(sb).unwrap();
    w.finish().unwrap()
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

/// A chunk of a well-formed file: its offset, stream, header length and payload length.
#[derive(Debug, Clone, Copy)]
struct Chunk {
    at: usize,
    stream: u32,
    header: usize,
    len: usize,
}

fn chunks(file: &[u8], header: usize) -> Vec<Chunk> {
    let mut at = FILE_HEADER_LEN;
    let mut out = Vec::new();
    while at < file.len() {
        let len = u32::from_le_bytes(file[at + 5..at + 9].try_into().unwrap()) as usize;
        let stream = u32::from_le_bytes(file[at + 1..at + 5].try_into().unwrap());
        out.push(Chunk {
            at,
            stream,
            header,
            len,
        });
        at += header + len;
    }
    assert_eq!(at, file.len());
    out
}

/// The version 2 form of a current file, as the version 2 writer wrote it: the header's bytes 24 to 31 zero,
/// chunk headers of kind, stream and length only, no final chunk.
fn to_v2(file: &[u8]) -> Vec<u8> {
    let mut out = file[..FILE_HEADER_LEN].to_vec();
    out[8..10].copy_from_slice(&2u16.to_le_bytes());
    out[24..32].fill(0);
    for c in chunks(file, CHUNK_HEADER_LEN)
        .iter()
        .filter(|c| file[c.at] != 4)
    {
        out.extend_from_slice(&file[c.at..c.at + 9]);
        out.extend_from_slice(&file[c.at + CHUNK_HEADER_LEN..c.at + CHUNK_HEADER_LEN + c.len]);
    }
    out
}

/// Every way one byte can change that the sweep tries: each single bit, and all eight at once.
const CHANGES: [u8; 9] = [1, 2, 4, 8, 16, 32, 64, 128, 0xff];

/// What reading the file with byte `i` changed must give: the one error that names where.
fn expected_error(file: &[u8], i: usize, changed: &[u8]) -> TraceFileError {
    if i < 8 {
        return TraceFileError::NotATrace {
            found: changed[..8].to_vec(),
        };
    }
    if i < FILE_HEADER_LEN {
        let version = u16::from_le_bytes([changed[8], changed[9]]);
        let detail = if version == FILE_VERSION {
            "its checksum does not match its bytes"
        } else {
            "the version field is damaged (the checksum holds for version 4)"
        };
        return TraceFileError::BadFileHeader { detail };
    }
    let c = chunks(file, CHUNK_HEADER_LEN)
        .into_iter()
        .rfind(|c| c.at <= i)
        .unwrap();
    if i < c.at + CHUNK_HEADER_LEN {
        TraceFileError::ChunkHeaderChecksum {
            offset: c.at as u64,
        }
    } else {
        TraceFileError::ChunkChecksum {
            offset: c.at as u64,
            stream: c.stream,
            len: c.len as u32,
        }
    }
}

#[test]
fn every_changed_byte_of_a_current_file_is_an_error_that_says_where() {
    let file = small_file();
    let cs = chunks(&file, CHUNK_HEADER_LEN);
    assert!(
        cs.len() >= 8 && cs.iter().any(|c| c.len > 0),
        "the file has chunks of every part: {cs:?}"
    );
    let (whole, errors) = read_all(&file);
    assert_eq!(errors, vec![]);
    assert_eq!(records_of(&whole, 0), stream_a());
    assert_eq!(records_of(&whole, 1), stream_b());

    let mut tried = 0;
    for i in 0..file.len() {
        for x in CHANGES {
            let mut changed = file.clone();
            changed[i] ^= x;
            let (items, errors) = read_all(&changed);
            let want = expected_error(&file, i, &changed);
            assert_eq!(errors, vec![want.clone()], "byte {i} ^ {x:#x}");
            assert!(errors[0].is_fatal(), "byte {i}");
            // It names where: the chunk's offset, or the file header.
            let text = errors[0].to_string();
            let place = match want {
                TraceFileError::ChunkHeaderChecksum { offset }
                | TraceFileError::ChunkChecksum { offset, .. } => format!("at byte {offset}"),
                TraceFileError::BadFileHeader { .. } => "file header (bytes 0 to 31)".into(),
                _ => "it starts with".into(),
            };
            assert!(text.contains(&place), "byte {i}: {text}");
            // What came before the damage is exactly what was written: no record read differs.
            assert_eq!(items[..], whole[..items.len()], "byte {i} ^ {x:#x}");
            tried += 1;
        }
    }
    assert_eq!(tried, file.len() * CHANGES.len());
}

/// The defect version 3 removes, shown on the version 2 form of the same file: some changed bytes read with no
/// error at all and different records.
#[test]
fn the_same_sweep_over_the_version_2_form_finds_changes_read_as_other_numbers() {
    let v2 = to_v2(&small_file());
    let (whole, errors) = read_all(&v2);
    assert_eq!(errors, vec![]);
    let mut silent_and_different = 0;
    for i in FILE_HEADER_LEN..v2.len() {
        for x in CHANGES {
            let mut changed = v2.clone();
            changed[i] ^= x;
            let (items, errors) = read_all(&changed);
            if errors.is_empty() && items != whole {
                silent_and_different += 1;
            }
        }
    }
    assert!(silent_and_different > 0);
    println!(
        "version 2: {silent_and_different} of {} one-byte changes read with no error and other records",
        (v2.len() - FILE_HEADER_LEN) * CHANGES.len()
    );
}

#[test]
fn a_version_2_file_still_reads_whole() {
    let v3 = small_file();
    let v2 = to_v2(&v3);
    let mut reader = TraceReader::new(&v2[..]);
    let items: Vec<TraceItem> = reader.by_ref().map(Result::unwrap).collect();
    assert_eq!(reader.file_version(), Some(2));
    assert_eq!(items, read_all(&v3).0);
    let mut reader = TraceReader::new(&v3[..]);
    reader.by_ref().for_each(drop);
    assert_eq!(reader.file_version(), Some(FILE_VERSION));
    let single = encode(5, &stream_b());
    let mut reader = TraceReader::new(&single[..]);
    assert_eq!(reader.by_ref().filter(Result::is_ok).count(), 3);
    assert_eq!(
        reader.file_version(),
        None,
        "a single stream has no file version"
    );
}

#[test]
fn a_version_2_header_with_bytes_where_version_3_keeps_its_checksum_is_refused() {
    let mut v2 = to_v2(&small_file());
    v2[29] = 1;
    assert_eq!(
        read_all(&v2),
        (
            vec![],
            vec![TraceFileError::BadFileHeader {
                detail: "a version 2 header has 0 in bytes 24 to 31, this one does not"
            }]
        )
    );
}

#[test]
fn a_file_cut_inside_its_last_chunk_is_truncated_with_everything_before_it_read() {
    let file = small_file();
    let cs = chunks(&file, CHUNK_HEADER_LEN);
    // The last chunk with a payload, then the file cut at every byte inside it (a tracer killed there).
    let last = *cs.iter().rfind(|c| c.len > 0).unwrap();
    let before = read_all(&file[..last.at]).0;
    for cut in last.at + 1..last.at + last.header + last.len {
        let (items, errors) = read_all(&file[..cut]);
        assert_eq!(
            errors,
            vec![TraceFileError::Truncated {
                offset: last.at as u64,
                pending: cut - last.at
            }],
            "cut {cut}"
        );
        assert_eq!(items, before, "cut {cut}");
    }
}

#[test]
fn a_changed_length_is_a_checksum_error_where_version_2_saw_a_cut() {
    let file = small_file();
    let last = *chunks(&file, CHUNK_HEADER_LEN)
        .iter()
        .rfind(|c| c.len > 0)
        .unwrap();
    let mut v3 = file.clone();
    v3[last.at + 6] ^= 1;
    assert_eq!(
        read_all(&v3).1,
        vec![TraceFileError::ChunkHeaderChecksum {
            offset: last.at as u64
        }]
    );
    // The same change in the version 2 form: the chunk now reaches past the end, as if cut.
    let mut v2 = to_v2(&file);
    let at = chunks(&v2, 9).iter().rfind(|c| c.len > 0).unwrap().at;
    v2[at + 6] ^= 1;
    let fatal: Vec<_> = read_all(&v2)
        .1
        .into_iter()
        .filter(TraceFileError::is_fatal)
        .collect();
    assert!(
        matches!(fatal[..], [TraceFileError::Truncated { offset, .. }] if offset == at as u64),
        "{fatal:?}"
    );
}

proptest! {
    /// Several changed bytes anywhere: an error, and never a record that differs from what was written.
    #[test]
    fn changed_bytes_never_give_other_records(
        edits in proptest::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..6),
    ) {
        let file = small_file();
        let (whole, _) = read_all(&file);
        let mut changed = file.clone();
        for (at, x) in edits {
            changed[at.index(file.len())] ^= x;
        }
        prop_assume!(changed != file);
        let (items, errors) = read_all(&changed);
        prop_assert_eq!(errors.iter().filter(|e| e.is_fatal()).count(), 1, "{:?}", errors);
        for stream in [0, 1] {
            let got = records_of(&items, stream);
            let all = records_of(&whole, stream);
            prop_assert_eq!(&got[..], &all[..got.len()]);
        }
    }
}
