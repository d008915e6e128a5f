//! The final chunk of format 4: the writer ends each file with what it wrote, so that a file cut at a chunk
//! boundary (or a tracer killed) is an error and not a complete-looking file, while a traced program that crashed
//! stays one; a final chunk that disagrees with what was read says what differs; bytes after it are refused; a
//! writer whose write failed leaves the file unfinished; format 3 files still read as before; and `rewrite` copies
//! an older file into the current format with the same records.

use gpu_tools_trace::file::{
    CHUNK_HEADER_LEN, FILE_HEADER_LEN, FILE_VERSION, TraceFileError, TraceFileWriter, TraceItem,
    TraceReader, format_limits, rewrite,
};
use gpu_tools_trace::report::{Analysis, Cell};
use gpu_tools_trace::*;

use gpu_tools_testing::records::{api, kernel};

fn start(pid: u32) -> Record {
    Record::ProcessStart(ProcessStart {
        pid,
        parent_pid: 1,
        time: 10,
        command: format!("prog{pid}"),
    })
}

fn end(records: u64) -> Record {
    Record::ProcessEnd(ProcessEnd {
        time: 9_000,
        reason: EndReason::Exit,
        records,
        dropped: 0,
        skipped: 0,
        callback_panics: 0,
    })
}

/// A process that ended (stream 0) and one that crashed (stream 1: no end record, its connection closed).
fn streams() -> [Vec<Record>; 2] {
    [
        vec![
            start(100),
            api("cudaLaunchKernel", 1000, 1100, 1, 11),
            kernel("gemm", 1200, 2200, 1),
            end(3),
        ],
        vec![start(200), kernel("relu", 20, 30, 9)],
    ]
}

fn encode(pid: u32, records: &[Record]) -> Vec<u8> {
    let mut e = Encoder::new(&StreamHeader::new(pid, 130001, TimestampClock::Monotonic));
    for r in records {
        e.push(r);
    }
    e.bytes().to_vec()
}

/// The writer fed both streams in pieces of 40 bytes, each closed; `finish`ed at `end` (ns).
fn writer() -> TraceFileWriter<Vec<u8>> {
    let [a, b] = streams();
    let (a, b) = (encode(100, &a), encode(200, &b));
    let mut w = TraceFileWriter::created_at(Vec::new(), 1_700_000_000_000_000_000).unwrap();
    let (sa, sb) = (w.add_stream(), w.add_stream());
    for i in 0..a.len().max(b.len()).div_ceil(40) {
        for (s, bytes) in [(sa, &a), (sb, &b)] {
            if let Some(p) = bytes.chunks(40).nth(i) {
                w.write(s, p).unwrap();
            }
        }
    }
    w.close(sa).unwrap();
    w.close(sb).unwrap();
    w
}

const END: u64 = 1_700_000_000_500_000_000;

fn file() -> Vec<u8> {
    writer().finish_at(END).unwrap()
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

/// The offsets of the chunks of a well-formed file.
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

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// Makes the chunk at `at` hold again (both checksums) after a deliberate change.
fn reseal_chunk(file: &mut [u8], at: usize) {
    let len = u32::from_le_bytes(file[at + 5..at + 9].try_into().unwrap()) as usize;
    let mut c = crc32fast::Hasher::new();
    c.update(&file[at..at + 9]);
    c.update(&file[at + CHUNK_HEADER_LEN..at + CHUNK_HEADER_LEN + len]);
    file[at + 9..at + 13].copy_from_slice(&c.finalize().to_le_bytes());
    let header_crc = crc32fast::hash(&file[at..at + 13]);
    file[at + 13..at + 17].copy_from_slice(&header_crc.to_le_bytes());
}

/// The "Complete" column of the processes report, per stream.
fn complete(bytes: &[u8]) -> Vec<String> {
    let mut a = Analysis::new();
    let _ = a.read(0, bytes);
    let p = a.report("processes").unwrap();
    let col = p.columns.iter().position(|c| *c == "Complete").unwrap();
    p.rows
        .iter()
        .map(|r| match &r[col] {
            Cell::Text(t) => t.clone(),
            other => panic!("{other:?}"),
        })
        .collect()
}

#[test]
fn the_final_chunk_says_what_the_writer_wrote() {
    let w = writer();
    let before = w.bytes_written();
    let file = w.finish_at(END).unwrap();
    let chunks = chunk_offsets(&file);
    let last = *chunks.last().unwrap();
    assert_eq!(
        last as u64, before,
        "the final chunk comes last, after all that was written"
    );
    assert_eq!(file[last], 4, "kind 4");
    assert_eq!(
        file[last + 1..last + 5],
        [0xff; 4],
        "it belongs to no stream"
    );
    let p = &file[last + CHUNK_HEADER_LEN..];
    assert_eq!(u64_at(p, 0), END);
    assert_eq!(u64_at(p, 8), last as u64);
    assert_eq!(u64_at(p, 16), chunks.len() as u64 - 1);
    assert_eq!(u32::from_le_bytes(p[24..28].try_into().unwrap()), 2);
    // Stream 0: start, API call, kernel, end and the name frames of "cudaLaunchKernel" and "gemm"; stream 1:
    // start, kernel and the name "relu".
    let entries: Vec<(u32, u64)> = p[28..]
        .chunks(12)
        .map(|e| (u32::from_le_bytes(e[..4].try_into().unwrap()), u64_at(e, 4)))
        .collect();
    assert_eq!(entries, vec![(0, 6), (1, 3)]);

    let mut reader = TraceReader::new(&file[..]);
    let items: Vec<TraceItem> = reader.by_ref().map(Result::unwrap).collect();
    assert_eq!(reader.file_version(), Some(FILE_VERSION));
    assert_eq!(reader.finished(), Some(END));
    assert_eq!(reader.created(), Some(1_700_000_000_000_000_000));
    let [a, b] = streams();
    assert_eq!(records_of(&items, 0), a);
    assert_eq!(records_of(&items, 1), b);
}

#[test]
fn finish_takes_the_time_now() {
    let before = ClockAnchor::now().realtime;
    let file = writer().finish().unwrap();
    let after = ClockAnchor::now().realtime;
    let mut reader = TraceReader::new(&file[..]);
    reader.by_ref().for_each(|i| drop(i.unwrap()));
    let end = reader.finished().unwrap();
    assert!((before..=after).contains(&end), "{before} {end} {after}");
}

/// The defect the final chunk removes: the same file cut at a chunk boundary and a whole one differ only by it.
#[test]
fn a_crashed_program_stays_crashed_and_a_cut_file_says_it_was_not_finished() {
    let file = file();
    assert_eq!(read_all(&file).1, vec![]);
    assert_eq!(
        complete(&file),
        vec![
            "yes".to_string(),
            "no (no end record: crashed or killed?)".to_string()
        ]
    );
    let chunks = chunk_offsets(&file);
    // Every cut between chunks: an error at the cut, with everything before it read.
    for &cut in &chunks {
        let (items, errors) = read_all(&file[..cut]);
        assert_eq!(
            errors,
            vec![TraceFileError::Unfinished { offset: cut as u64 }],
            "cut {cut}"
        );
        let text = errors[0].to_string();
        assert!(
            text.contains("not finished by its writer") && text.contains(&format!("byte {cut}")),
            "{text}"
        );
        assert_eq!(items[..], read_all(&file).0[..items.len()], "cut {cut}");
    }
    // Cut before stream 0's last packed chunk (its end record): neither process is said to have crashed.
    let before_ends = *chunks
        .iter()
        .rfind(|&&o| file[o] == 3 && file[o + 1..o + 5] == [0, 0, 0, 0])
        .unwrap();
    assert_eq!(
        complete(&file[..before_ends]),
        vec![
            "unknown (the file was not finished by its writer: its end was not read)".to_string(),
            "unknown (the file was not finished by its writer: its end was not read)".to_string()
        ]
    );
    // Cut after stream 1's connection closed: that one did crash, whatever happened to the file after.
    let after_close = chunks[chunks.len() - 1];
    assert_eq!(file[chunks[chunks.len() - 2]], 2, "a closing");
    assert_eq!(
        complete(&file[..after_close]),
        vec![
            "yes".to_string(),
            "no (no end record: crashed or killed?)".to_string()
        ]
    );
}

#[test]
fn a_chunk_left_out_is_an_error_that_says_what_differs() {
    let file = file();
    let chunks = chunk_offsets(&file);
    // The last packed chunk (kind 3) of stream 1, whole: the checksums of every chunk still hold.
    let at = *chunks
        .iter()
        .rfind(|&&o| file[o] == 3 && file[o + 1..o + 5] == [1, 0, 0, 0])
        .unwrap();
    let next = chunks[chunks.iter().position(|&o| o == at).unwrap() + 1];
    let mut cut = file[..at].to_vec();
    cut.extend_from_slice(&file[next..]);
    let last = *chunk_offsets(&cut).last().unwrap();
    let (_, errors) = read_all(&cut);
    let fatal: Vec<_> = errors.iter().filter(|e| e.is_fatal()).cloned().collect();
    assert_eq!(
        fatal,
        vec![TraceFileError::FinalChunkMismatch {
            offset: last as u64,
            detail: format!(
                "says {last_before} bytes come before it, but it is at byte {last}",
                last_before = last + next - at
            ),
        }]
    );
    assert!(
        fatal[0]
            .to_string()
            .contains(&format!("final chunk (at byte {last})"))
    );

    // With the bytes made to agree, the count of chunks does not.
    let p = last + CHUNK_HEADER_LEN;
    cut[p + 8..p + 16].copy_from_slice(&(last as u64).to_le_bytes());
    reseal_chunk(&mut cut, last);
    let fatal: Vec<_> = read_all(&cut)
        .1
        .into_iter()
        .filter(TraceFileError::is_fatal)
        .collect();
    assert_eq!(
        fatal,
        vec![TraceFileError::FinalChunkMismatch {
            offset: last as u64,
            detail: format!(
                "says {} chunks come before it, {} were read",
                chunks.len() - 1,
                chunks.len() - 2
            ),
        }]
    );

    // And with that made to agree too, stream 1's frames do not: it names the stream.
    let n = chunk_offsets(&cut).len() as u64 - 1;
    cut[p + 16..p + 24].copy_from_slice(&n.to_le_bytes());
    reseal_chunk(&mut cut, last);
    let fatal: Vec<_> = read_all(&cut)
        .1
        .into_iter()
        .filter(TraceFileError::is_fatal)
        .collect();
    let [TraceFileError::FinalChunkMismatch { offset, detail }] = &fatal[..] else {
        panic!("{fatal:?}");
    };
    assert_eq!(*offset, last as u64);
    assert!(
        detail.starts_with("says stream 1 has 3 frames, "),
        "{detail}"
    );
}

#[test]
fn a_final_chunk_that_lists_other_streams_is_an_error() {
    let file = file();
    let last = *chunk_offsets(&file).last().unwrap();
    let entry = last + CHUNK_HEADER_LEN + 28 + 12;
    let mut other = file.clone();
    other[entry..entry + 4].copy_from_slice(&7u32.to_le_bytes());
    reseal_chunk(&mut other, last);
    assert_eq!(
        read_all(&other).1,
        vec![TraceFileError::FinalChunkMismatch {
            offset: last as u64,
            detail: "lists stream 7, of which no chunk was read".into(),
        }]
    );
    let mut twice = file.clone();
    twice[entry..entry + 4].copy_from_slice(&0u32.to_le_bytes());
    reseal_chunk(&mut twice, last);
    assert_eq!(
        read_all(&twice).1,
        vec![TraceFileError::FinalChunkMismatch {
            offset: last as u64,
            detail: "lists a stream twice among its 2".into(),
        }]
    );
}

#[test]
fn bytes_after_the_final_chunk_are_an_error_after_everything_was_read() {
    let file = file();
    let last = *chunk_offsets(&file).last().unwrap();
    let whole = read_all(&file).0;
    for tail in [&[0u8][..], &file[..]] {
        let mut longer = file.clone();
        longer.extend_from_slice(tail);
        let (items, errors) = read_all(&longer);
        assert_eq!(
            errors,
            vec![TraceFileError::AfterFinalChunk {
                offset: last as u64
            }]
        );
        assert_eq!(items, whole);
    }
}

/// A writer that takes `room` bytes, then fails.
#[derive(Debug)]
struct Full {
    out: Vec<u8>,
    room: usize,
}

impl std::io::Write for Full {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.out.len() + buf.len() > self.room {
            return Err(std::io::Error::other("no space left"));
        }
        self.out.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_writer_whose_write_failed_does_not_finish_the_file() {
    let [a, _] = streams();
    let bytes = encode(100, &a);
    let mut w = TraceFileWriter::new(Full {
        out: Vec::new(),
        room: 100,
    })
    .unwrap();
    let s = w.add_stream();
    assert!(w.write(s, &bytes).is_err(), "the disk is full");
    // Later writes are refused, and so is the final chunk, even where it would fit.
    assert!(w.close(s).is_err());
    let e = w.finish().unwrap_err();
    assert!(e.to_string().contains("left unfinished"), "{e}");
}

/// The version 3 form of a current file: its version field 3 (the header resealed), no final chunk.
fn to_v3(file: &[u8]) -> Vec<u8> {
    let last = *chunk_offsets(file).last().unwrap();
    let mut out = file[..last].to_vec();
    out[8..10].copy_from_slice(&3u16.to_le_bytes());
    let mut c = crc32fast::Hasher::new();
    c.update(&out[..24]);
    c.update(&out[28..32]);
    let crc = c.finalize();
    out[24..28].copy_from_slice(&crc.to_le_bytes());
    out
}

#[test]
fn a_version_3_file_reads_as_before_and_cannot_show_a_cut_between_chunks() {
    let v3 = to_v3(&file());
    let mut reader = TraceReader::new(&v3[..]);
    let items: Vec<TraceItem> = reader.by_ref().map(Result::unwrap).collect();
    assert_eq!(reader.file_version(), Some(3));
    assert_eq!(reader.finished(), None);
    assert_eq!(items, read_all(&file()).0);
    // Cut between chunks, it reads clean: what format_limits says of it.
    for cut in chunk_offsets(&v3) {
        assert_eq!(read_all(&v3[..cut]).1, vec![], "cut {cut}");
    }
    assert!(
        format_limits(3)
            .unwrap()
            .contains("cannot be checked for completeness")
    );
    assert!(format_limits(2).unwrap().contains("no checksums"));
    assert_eq!(format_limits(FILE_VERSION), None);
}

#[test]
fn rewrite_copies_an_older_file_into_the_current_format_with_the_same_records() {
    let v4 = file();
    let v3 = to_v3(&v4);
    let copy = rewrite(&v3[..], Vec::new()).unwrap();
    let mut reader = TraceReader::new(&copy[..]);
    let items: Vec<TraceItem> = reader.by_ref().map(Result::unwrap).collect();
    assert_eq!(reader.file_version(), Some(FILE_VERSION));
    assert_eq!(
        reader.created(),
        Some(1_700_000_000_000_000_000),
        "the original's time"
    );
    assert!(reader.finished().is_some());
    assert_eq!(items, read_all(&v4).0);
    // The same chunks as the writer wrote, and the same final chunk but for its end time (and so its checksums).
    let last = *chunk_offsets(&copy).last().unwrap();
    assert_eq!(copy.len(), v4.len());
    assert_eq!(copy[..last + 9], v4[..last + 9]);
    let p = last + CHUNK_HEADER_LEN;
    assert_eq!(copy[p + 8..], v4[p + 8..]);

    // A damaged source is refused, with the reading error inside.
    for bad in [&v4[..v4.len() - 1], &v3[..v3.len() - 3], &[][..]] {
        let e = rewrite(bad, Vec::new()).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
        assert!(
            e.get_ref()
                .and_then(|e| e.downcast_ref::<TraceFileError>())
                .is_some(),
            "{e}"
        );
    }
}
