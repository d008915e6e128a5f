//! The counter records of the trace stream (tags 18–22: device counter samples and gaps, kernel metrics,
//! PC-sampling stalls, profile losses): round
//! trips, short frames and undefined names as per-frame errors, and property tests on arbitrary records and
//! mutated bytes (no panic, no read past the input). `PROPTEST_CASES` raises the number of cases.

use std::sync::Arc;

use gpu_tools_trace::*;
use proptest::prelude::*;

fn header() -> StreamHeader {
    StreamHeader::new(7, 130001, TimestampClock::Monotonic)
}

fn encode(records: &[Record]) -> Vec<u8> {
    let mut e = Encoder::new(&header());
    for r in records {
        e.push(r);
    }
    e.bytes().to_vec()
}

fn decode(bytes: &[u8]) -> (Vec<Record>, Vec<WireError>) {
    let mut d = Decoder::new();
    d.feed(bytes);
    let (mut records, mut errors) = (Vec::new(), Vec::new());
    loop {
        match d.next_record() {
            Ok(Some(r)) => records.push(r),
            Ok(None) => break,
            Err(e) => {
                let fatal = e.is_fatal();
                errors.push(e);
                if fatal {
                    break;
                }
            }
        }
    }
    (records, errors)
}

fn metrics(launch: u32, values: &[(&str, f64)]) -> Record {
    Record::KernelMetrics(KernelMetricsRecord {
        device: 0,
        context: 1,
        correlation: 100 + launch,
        launch,
        kernel: Arc::from("_Z4copyPKfPfm"),
        metrics: values.iter().map(|(m, v)| (Arc::from(*m), *v)).collect(),
    })
}

#[test]
fn counter_records_round_trip() {
    let records = vec![
        metrics(
            0,
            &[
                ("dram__bytes_read.sum", 1.5e9),
                ("gpu__time_duration.sum", f64::NAN),
            ],
        ),
        metrics(1, &[("dram__bytes_read.sum", 0.0)]),
        Record::Stall(StallRecord {
            context: 1,
            function: Arc::from("_Z5chasePj"),
            pc_offset: 0x1f0,
            stalls: vec![
                (
                    Arc::from("smsp__pcsamp_warps_issue_stalled_long_scoreboard"),
                    900,
                ),
                (Arc::from("selected"), 3),
            ],
        }),
        Record::ProfileLoss(ProfileLoss {
            kind: ProfileLossKind::Ranges,
            count: 12,
            context: 1,
        }),
        Record::ProfileLoss(ProfileLoss {
            kind: ProfileLossKind::Other(9),
            count: 1,
            context: 0,
        }),
        Record::CounterSample(CounterSample {
            start: 1_000,
            end: 1_001_000,
            device: 1,
            values: vec![
                (
                    Arc::from("sm__cycles_active.avg.pct_of_peak_sustained_elapsed"),
                    97.5,
                ),
                (Arc::from("dram__bytes_read.sum"), 2.5e6),
            ],
        }),
        Record::CounterGap(CounterGap {
            start: 1_001_000,
            end: 9_000_000,
            device: 1,
            samples: 0,
        }),
    ];
    let (back, errors) = decode(&encode(&records));
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(back, records, "NaN values compare by their bits");
    let Record::KernelMetrics(k) = &back[0] else {
        panic!()
    };
    assert_eq!(k.value("dram__bytes_read.sum"), Some(1.5e9));
    assert_eq!(k.value("nothing"), None);
    let Record::CounterSample(c) = &back[5] else {
        panic!()
    };
    assert_eq!(c.value("dram__bytes_read.sum"), Some(2.5e6));
    assert_eq!(back[5].span(), Some((1_000, 1_001_000)));
}

#[test]
fn names_are_sent_once_per_stream() {
    let one = encode(&[metrics(0, &[("dram__bytes_read.sum", 1.0)])]);
    let two = encode(&[
        metrics(0, &[("dram__bytes_read.sum", 1.0)]),
        metrics(1, &[("dram__bytes_read.sum", 2.0)]),
    ]);
    // The second record adds only its own frame: 5 header bytes and 22 + 12 payload bytes.
    assert_eq!(two.len() - one.len(), 5 + 22 + 12);
}

#[test]
fn short_frames_and_undefined_names_are_per_frame_errors() {
    // A kernel-metrics frame announcing 3 pairs but holding one, then a valid loss record.
    let mut bytes = encode(&[]);
    let mut payload = Vec::new();
    for v in [0u32, 1, 2, 3, 0] {
        payload.extend_from_slice(&v.to_le_bytes());
    }
    payload.extend_from_slice(&3u16.to_le_bytes());
    payload.extend_from_slice(&0u32.to_le_bytes());
    payload.extend_from_slice(&1.0f64.to_bits().to_le_bytes());
    bytes.push(20);
    bytes.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    bytes.extend_from_slice(&payload);
    // A stall frame naming function id 99, never defined.
    let mut stall = Vec::new();
    stall.extend_from_slice(&1u32.to_le_bytes());
    stall.extend_from_slice(&99u32.to_le_bytes());
    stall.extend_from_slice(&0u64.to_le_bytes());
    stall.extend_from_slice(&0u16.to_le_bytes());
    bytes.push(21);
    bytes.extend_from_slice(&(stall.len() as u32).to_le_bytes());
    bytes.extend_from_slice(&stall);
    let loss = Record::ProfileLoss(ProfileLoss {
        kind: ProfileLossKind::PcSamples,
        count: 5,
        context: 2,
    });
    let mut e = Encoder::new(&header());
    e.push(&loss);
    bytes.extend_from_slice(&e.bytes()[wire::HEADER_LEN..]);
    let (records, errors) = decode(&bytes);
    assert_eq!(records, vec![loss]);
    assert!(
        matches!(errors[0], WireError::ShortFrame { tag: 20, .. }),
        "{errors:?}"
    );
    assert_eq!(errors[1], WireError::UndefinedName { tag: 21, id: 99 });
}

fn name() -> impl Strategy<Value = Arc<str>> {
    "[a-z_.]{0,24}".prop_map(|s| Arc::from(s.as_str()))
}

fn record() -> impl Strategy<Value = Record> {
    prop_oneof![
        (
            any::<(u32, u32, u32, u32)>(),
            name(),
            proptest::collection::vec((name(), any::<f64>()), 0..6)
        )
            .prop_map(
                |((device, context, correlation, launch), kernel, metrics)| {
                    Record::KernelMetrics(KernelMetricsRecord {
                        device,
                        context,
                        correlation,
                        launch,
                        kernel,
                        metrics,
                    })
                }
            ),
        (
            any::<u32>(),
            name(),
            any::<u64>(),
            proptest::collection::vec((name(), any::<u32>()), 0..6)
        )
            .prop_map(|(context, function, pc_offset, stalls)| Record::Stall(
                StallRecord {
                    context,
                    function,
                    pc_offset,
                    stalls
                }
            )),
        (any::<u8>(), any::<u64>(), any::<u32>()).prop_map(|(k, count, context)| {
            Record::ProfileLoss(ProfileLoss {
                kind: ProfileLossKind::from_code(k),
                count,
                context,
            })
        }),
    ]
}

proptest! {
    #[test]
    fn arbitrary_counter_records_round_trip(records in proptest::collection::vec(record(), 0..20)) {
        let (back, errors) = decode(&encode(&records));
        prop_assert!(errors.is_empty(), "{:?}", errors);
        prop_assert_eq!(back, records);
    }

    #[test]
    fn mutated_streams_never_panic(
        records in proptest::collection::vec(record(), 1..8),
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8),
        cut in any::<usize>(),
    ) {
        let mut bytes = encode(&records);
        for (at, x) in flips {
            let i = wire::HEADER_LEN + at % (bytes.len() - wire::HEADER_LEN);
            bytes[i] ^= x;
        }
        let cut = cut % (bytes.len() + 1);
        let _ = decode(&bytes[..cut]);
    }
}
