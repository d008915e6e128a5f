//! Property tests of the activity buffer decoder on bytes from anywhere: no panic, no read outside the bytes
//! (the walk stays inside them, and the slices it hands out lie inside them), pointers never followed; and on
//! well-formed buffers, every record comes back once, with a cut-off last record reported as truncated.
//!
//! `PROPTEST_CASES` scales the number of cases (default below).
#![cfg(feature = "cupti")]

use gpu_tools::cupti::activity::{Activity, ActivityBatch, RecordError, RecordLayout};
use proptest::prelude::*;

const LAYOUTS: [RecordLayout; 2] = [RecordLayout::Cupti12_9, RecordLayout::Cupti13_0];

/// Reads every field an accessor offers (pointers excepted: `name()` must say `None` here), so that each read
/// happens; returns a sum to keep the reads.
fn touch(a: &Activity<'_>) -> u64 {
    let t = |r: gpu_tools::cupti::activity::TimeRange| r.start ^ r.end ^ r.duration_ns();
    let mut sum = u64::from(a.kind().0) ^ u64::from(a.correlation_id().unwrap_or(0));
    sum ^= a.time().map(t).unwrap_or(0);
    sum ^= match a {
        Activity::Kernel(k) => {
            assert!(
                k.name().is_none(),
                "pointers are not followed in bytes from anywhere"
            );
            u64::from(k.device_id() ^ k.context_id() ^ k.stream_id())
                ^ k.grid().count()
                ^ k.block().count()
                ^ k.cluster().count()
                ^ u64::from(k.static_shared_memory() ^ k.dynamic_shared_memory())
                ^ u64::from(k.registers_per_thread())
                ^ k.local_memory_total()
                ^ u64::from(k.graph_id())
                ^ k.graph_node_id()
                ^ k.grid_id() as u64
                ^ k.completed()
                ^ k.queued()
                ^ k.submitted()
                ^ u64::from(k.is_device_launched().unwrap_or(false))
                ^ format!("{:?}", k.launch_type()).len() as u64
        }
        Activity::Memcpy(m) => {
            m.bytes()
                ^ u64::from(m.stream_id())
                ^ u64::from(m.is_async())
                ^ format!("{:?}{:?}{:?}", m.copy_kind(), m.src_kind(), m.dst_kind()).len() as u64
                ^ m.copy_count()
                ^ u64::from(m.runtime_correlation_id())
                ^ u64::from(m.is_device_launched().unwrap_or(false))
        }
        Activity::PeerCopy(p) => p.bytes() ^ u64::from(p.src().0 ^ p.dst().1),
        Activity::Memset(m) => {
            m.bytes() ^ u64::from(m.value()) ^ format!("{:?}", m.memory_kind()).len() as u64
        }
        Activity::Api(api) => {
            u64::from(api.thread_id() ^ api.process_id() ^ api.return_value())
                ^ api.function_name().map_or(0, |n| n.len() as u64)
        }
        Activity::Synchronization(s) => {
            u64::from(s.stream_id().unwrap_or(0) ^ s.cuda_event_id().unwrap_or(0))
                ^ s.cuda_event_sync_id().unwrap_or(0)
                ^ format!("{:?}", s.sync_type()).len() as u64
        }
        Activity::Overhead(o) => format!("{:?}{:?}", o.overhead_kind(), o.object()).len() as u64,
        Activity::Context(c) => u64::from(c.context_id() ^ c.device_id()),
        Activity::Stream(s) => u64::from(s.stream_id() ^ s.priority()),
        Activity::Device(d) => {
            assert!(d.name().is_none());
            d.global_memory_size() ^ u64::from(d.uuid()[0])
        }
        Activity::Name(n) => {
            assert!(n.name().is_none());
            format!("{:?}", n.object()).len() as u64
        }
        Activity::Marker(m) => {
            assert!(m.name().is_none() && m.domain().is_none());
            m.timestamp() ^ u64::from(m.is_start())
        }
        Activity::ExternalCorrelation(e) => e.external_id(),
        Activity::Memory(m) => {
            assert!(m.name().is_none());
            m.address() ^ m.bytes() ^ m.pc()
        }
        Activity::Unknown { bytes, .. } => bytes.len() as u64,
        _ => 0,
    };
    // Debug formatting reads everything the Debug impls show.
    sum ^ format!("{a:?}").len() as u64
}

/// Walks `bytes` and checks that every slice handed out lies inside them; returns (records, errors).
fn walk(bytes: &[u8], layout: RecordLayout) -> (usize, Vec<RecordError>) {
    let batch = ActivityBatch::from_bytes(bytes, layout);
    let range = bytes.as_ptr_range();
    let mut ok = 0;
    let mut errors = Vec::new();
    for r in batch.records() {
        match r {
            Ok(a) => {
                if let Activity::Unknown { bytes: b, .. } = &a {
                    let inner = b.as_ptr_range();
                    assert!(inner.start >= range.start && inner.end <= range.end);
                }
                std::hint::black_box(touch(&a));
                ok += 1;
            }
            Err(e) => errors.push(e),
        }
    }
    assert_eq!(
        batch.count(),
        ok + errors.len(),
        "count() walks as records() does"
    );
    // The undecoded walk: whole records, back to back from the start, inside the bytes, the kinds the decoding
    // walk gives; where it does not stop early it covers every byte.
    let mut raw = batch.raw_records();
    let mut next = 0;
    let mut kinds = Vec::new();
    for r in raw.by_ref() {
        assert_eq!(r.offset, next, "records are back to back");
        assert!(!r.bytes.is_empty() && r.bytes.len() % 8 == 0);
        let inner = r.bytes.as_ptr_range();
        assert!(inner.start >= range.start && inner.end <= range.end);
        next += r.bytes.len();
        kinds.push(r.kind.0);
    }
    let decoded: Vec<u32> = batch
        .records()
        .map_while(|r| r.ok().map(|a| a.kind().0))
        .collect();
    assert!(decoded.starts_with(&kinds), "{kinds:?} against {decoded:?}");
    match raw.stopped_at() {
        Some(at) => assert_eq!(at, next, "it stops where the last whole record ends"),
        None => assert_eq!(next, batch.len_bytes(), "it reaches the end"),
    }
    (ok, errors)
}

/// An 8-aligned copy of `bytes` (as CUPTI's buffers are), cut to `len`.
fn aligned(words: &[u64], len: usize) -> Vec<u64> {
    let mut v = words.to_vec();
    v.truncate(len.div_ceil(8));
    v
}

fn as_bytes(words: &[u64], len: usize) -> &[u8] {
    // SAFETY: u64 words are readable as bytes; `len` is clamped to their size.
    unsafe { std::slice::from_raw_parts(words.as_ptr().cast::<u8>(), len.min(words.len() * 8)) }
}

/// Kinds the decoder types, with a kind word the walk will recognise.
const DECODED: [u32; 16] = [1, 2, 3, 4, 5, 8, 9, 10, 11, 12, 17, 22, 37, 38, 39, 49];

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(4096);
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    /// Any bytes, any length, any of the two layouts: no panic, nothing read outside.
    #[test]
    fn arbitrary_bytes_never_panic(words in prop::collection::vec(any::<u64>(), 0..200), cut in 0usize..1600) {
        let v = aligned(&words, cut);
        for layout in LAYOUTS {
            walk(as_bytes(&v, cut), layout);
        }
    }

    /// Arbitrary bytes whose kind words are kinds the decoder types, so that records decode and their fields
    /// are read.
    #[test]
    fn records_of_decoded_kinds_with_arbitrary_fields(
        words in prop::collection::vec(any::<u64>(), 1..400),
        kinds in prop::collection::vec(prop::sample::select(&DECODED[..]), 1..40),
        cut in 0usize..3200,
    ) {
        for layout in LAYOUTS {
            let mut v = words.clone();
            // Put a decoded kind at the start of each record the walk will find.
            let mut at = 0usize;
            for k in &kinds {
                if at / 8 >= v.len() { break; }
                v[at / 8] = (v[at / 8] & !0xffff_ffff) | u64::from(*k);
                at += layout.record_size(*k).unwrap_or(8);
            }
            let v = aligned(&v, cut);
            walk(as_bytes(&v, cut), layout);
        }
    }

    /// A buffer that is not 8-aligned is refused at its first record, never read.
    #[test]
    fn misaligned_buffers_are_refused(words in prop::collection::vec(any::<u64>(), 2..50), shift in 1usize..8) {
        let bytes = &as_bytes(&words, words.len() * 8)[shift..];
        for layout in LAYOUTS {
            let (ok, errors) = walk(bytes, layout);
            prop_assert_eq!(ok, 0);
            prop_assert_eq!(errors, vec![RecordError::Misaligned { offset: 0 }]);
        }
    }

    /// Well-formed records come back once each, in order, with their kinds; a cut inside the last one is one
    /// `Truncated` error, after every whole record.
    #[test]
    fn whole_records_come_back_once_and_a_cut_is_reported(
        kinds in prop::collection::vec(prop::sample::select(&DECODED[..]), 1..60),
        fill in any::<u64>(),
        cut_back in 0usize..200,
    ) {
        for layout in LAYOUTS {
            let mut v: Vec<u64> = Vec::new();
            let mut offsets = Vec::new();
            for k in &kinds {
                let size = layout.record_size(*k).unwrap();
                offsets.push(v.len() * 8);
                let mut rec = vec![fill; size / 8];
                rec[0] = (fill & !0xffff_ffff) | u64::from(*k);
                v.extend(rec);
            }
            let full = v.len() * 8;
            let len = full.saturating_sub(cut_back);
            let batch = ActivityBatch::from_bytes(as_bytes(&v, len), layout);
            let got: Vec<_> = batch.records().collect();
            let whole = offsets.iter().zip(&kinds).filter(|(o, k)| **o + layout.record_size(**k).unwrap() <= len).count();
            for (r, k) in got.iter().zip(&kinds).take(whole) {
                let a = r.as_ref().expect("a whole record decodes");
                prop_assert_eq!(a.kind().0, *k);
                touch(a);
            }
            if len == full || offsets.contains(&len) {
                // The cut fell between records.
                prop_assert_eq!(got.len(), whole);
            } else {
                // The rest is one truncated record (or, if fewer than 4 bytes remain, a record without a kind).
                prop_assert_eq!(got.len(), whole + 1);
                let is_truncated = matches!(got[whole], Err(RecordError::Truncated { offset, .. }) if offset == offsets[whole]);
                prop_assert!(is_truncated, "{:?}", got[whole]);
            }
        }
    }
}
