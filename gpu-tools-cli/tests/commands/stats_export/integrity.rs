//! The file's checks: a changed byte (a checksum fails: exit 1, naming where), a final chunk that disagrees with
//! what was read (exit 1), and files of format versions 2 and 3, which lack them (read as before, with a line
//! saying what they cannot show).

use std::path::Path;

use gpu_tools::trace::file::{CHUNK_HEADER_LEN, FILE_HEADER_LEN};

use super::{chunks_v3, gpu_tools, s, trace_file};

#[test]
fn a_changed_byte_is_refused_with_where_it_is_and_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let good = trace_file(dir.path());
    let bytes = std::fs::read(&good).unwrap();
    let out = gpu_tools(&["stats", s(&good)]);
    assert_eq!(out.status.code(), Some(0));
    // The packed chunk of the records: the largest one.
    let (at, len) = *chunks_v3(&bytes).iter().max_by_key(|c| c.1).unwrap();
    assert!(len > 40, "{len}");
    let out_path = dir.path().join("keep.pb");
    for (i, says) in [
        (20, "the file header (bytes 0 to 31) is corrupt".to_string()),
        (
            at + 6,
            format!("corrupt at byte {at}: the chunk header there fails its checksum"),
        ),
        (
            at + CHUNK_HEADER_LEN + len / 2,
            format!(
                "corrupt at byte {at}: the chunk of stream 0 there ({len} bytes) fails its checksum"
            ),
        ),
    ] {
        let mut changed = bytes.clone();
        changed[i] ^= 0x10;
        let path = dir.path().join("changed.gputrace");
        std::fs::write(&path, &changed).unwrap();
        let out = gpu_tools(&["stats", s(&path)]);
        assert_eq!(out.status.code(), Some(1), "byte {i}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(&says), "byte {i}: {err}");
        assert!(out.stdout.is_empty(), "byte {i}: no report of another run");
        // Merged with a whole file: refused all the same.
        let out = gpu_tools(&["stats", s(&good), s(&path)]);
        assert_eq!(out.status.code(), Some(1), "byte {i}");
        assert!(String::from_utf8_lossy(&out.stderr).contains(&says));
        assert!(out.stdout.is_empty());
        std::fs::write(&out_path, "previous").unwrap();
        let out = gpu_tools(&["export", s(&path), "--perfetto", s(&out_path)]);
        assert_eq!(out.status.code(), Some(1), "byte {i}");
        assert!(String::from_utf8_lossy(&out.stderr).contains(&says));
        assert_eq!(std::fs::read_to_string(&out_path).unwrap(), "previous");
    }
}

/// Whether `path` is said on `stderr` to be of an older format (`limits`, the start of what is said), once, on a
/// line of its own.
fn said_once(stderr: &[u8], command: &str, path: &Path, limits: &str) -> bool {
    let line = format!("gpu-tools {command}: {}: {limits}", path.display());
    let err = String::from_utf8_lossy(stderr);
    err.lines().filter(|l| l.starts_with(&line)).count() == 1 && err.matches(limits).count() == 1
}

#[test]
fn files_of_versions_2_and_3_read_as_their_current_form_and_say_once_what_they_cannot_show() {
    let dir = tempfile::tempdir().unwrap();
    let v4_path = trace_file(dir.path());
    let v4 = std::fs::read(&v4_path).unwrap();
    let kept: Vec<(usize, usize)> = chunks_v3(&v4)
        .into_iter()
        .filter(|&(at, _)| v4[at] != 4)
        .collect();
    assert_eq!(kept.len() + 1, chunks_v3(&v4).len(), "one final chunk");
    // As the version 2 writer wrote it: no checksums, zeros in the header's bytes 24 to 31, no final chunk.
    let mut v2 = v4[..FILE_HEADER_LEN].to_vec();
    v2[8..10].copy_from_slice(&2u16.to_le_bytes());
    v2[24..32].fill(0);
    for &(at, len) in &kept {
        v2.extend_from_slice(&v4[at..at + 9]);
        v2.extend_from_slice(&v4[at + CHUNK_HEADER_LEN..at + CHUNK_HEADER_LEN + len]);
    }
    // As the version 3 writer wrote it: checksums, no final chunk.
    let mut v3 = v4[..kept
        .last()
        .map_or(0, |&(at, len)| at + CHUNK_HEADER_LEN + len)]
        .to_vec();
    v3[8..10].copy_from_slice(&3u16.to_le_bytes());
    let mut crc = crc32fast::Hasher::new();
    crc.update(&v3[..24]);
    crc.update(&v3[28..32]);
    let crc = crc.finalize();
    v3[24..28].copy_from_slice(&crc.to_le_bytes());
    let v2_path = dir.path().join("v2.gputrace");
    let v3_path = dir.path().join("v3.gputrace");
    std::fs::write(&v2_path, &v2).unwrap();
    std::fs::write(&v3_path, &v3).unwrap();
    let limits = [
        (
            &v2_path,
            "trace file format 2 has no checksums and no final chunk",
        ),
        (
            &v3_path,
            "trace file format 3 has no final chunk: the file cannot be checked for completeness",
        ),
    ];
    for format in ["text", "json"] {
        let a = gpu_tools(&["stats", "--format", format, s(&v4_path)]);
        assert_eq!(a.status.code(), Some(0));
        assert!(a.stderr.is_empty(), "the current format: nothing to say");
        for (path, says) in limits {
            let b = gpu_tools(&["stats", "--format", format, s(path)]);
            assert_eq!(b.status.code(), Some(0));
            assert!(String::from_utf8_lossy(&b.stdout).contains("cuda_gpu_kern_sum"));
            assert_eq!(a.stdout, b.stdout, "{format}");
            assert!(
                said_once(&b.stderr, "stats", path, says),
                "{}",
                String::from_utf8_lossy(&b.stderr)
            );
        }
    }
    // Each file of an older format is said once, whatever else is read with it.
    let out_path = dir.path().join("t.json");
    let out = gpu_tools(&["export", s(&v2_path), s(&v3_path), "--chrome", s(&out_path)]);
    assert_eq!(out.status.code(), Some(0));
    for (path, says) in limits {
        assert!(
            said_once(&out.stderr, "export", path, says),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn a_final_chunk_that_disagrees_with_what_was_read_is_refused_with_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(trace_file(dir.path())).unwrap();
    let chunks = chunks_v3(&bytes);
    // The closing chunk (17 bytes, no payload) left out: every chunk's checksum holds.
    let (closing, len) = chunks[chunks.len() - 2];
    assert_eq!((bytes[closing], len), (2, 0));
    let mut out_of = bytes[..closing].to_vec();
    out_of.extend_from_slice(&bytes[closing + CHUNK_HEADER_LEN..]);
    let path = dir.path().join("less.gputrace");
    std::fs::write(&path, &out_of).unwrap();
    let out = gpu_tools(&["stats", s(&path)]);
    assert_eq!(out.status.code(), Some(1));
    let says = format!(
        "gpu-tools stats: {}: the file is corrupt: its final chunk (at byte {closing}) says {} bytes come before \
         it, but it is at byte {closing}",
        path.display(),
        closing + CHUNK_HEADER_LEN
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains(&says));
    assert!(out.stdout.is_empty(), "no report of another run");
}
