//! The trace stream format: round trips, every error a receiver can meet, and property tests on arbitrary and
//! mutated bytes (no panic, no read past the input). `PROPTEST_CASES` raises the number of cases.

use std::sync::Arc;

use gpu_tools_trace::wire::{HEADER_LEN, MAX_FRAME};
use gpu_tools_trace::*;
use proptest::prelude::*;

fn header() -> StreamHeader {
    StreamHeader::new(4242, 130001, TimestampClock::Monotonic)
}

fn kernel(name: &str, start: u64) -> Record {
    Record::Kernel(KernelRecord {
        start,
        end: start + 1500,
        device: 0,
        context: 1,
        stream: 7,
        correlation: 33,
        grid_id: 12,
        grid: [2, 1, 1],
        block: [32, 1, 1],
        static_shared: 0,
        dynamic_shared: 128,
        registers: 16,
        graph_id: 0,
        graph_node_id: 0,
        name: Arc::from(name),
    })
}

fn sample() -> Vec<Record> {
    vec![
        Record::ProcessStart(ProcessStart {
            pid: 4242,
            parent_pid: 1,
            time: 10,
            command: "./app --flag".into(),
        }),
        kernel("_Z7add_onePji", 100),
        kernel("_Z7add_onePji", 2000),
        kernel("other", 3000),
        Record::Memcpy(MemcpyRecord {
            start: 5,
            end: 9,
            device: 0,
            context: 1,
            stream: 13,
            correlation: 40,
            bytes: 1 << 20,
            kind: CopyKind::HtoD,
            src: MemoryKind::Pinned,
            dst: MemoryKind::Device,
            is_async: true,
        }),
        Record::Memset(MemsetRecord {
            start: 11,
            end: 19,
            device: 0,
            context: 1,
            stream: 13,
            correlation: 41,
            bytes: 4096,
            value: 0xab,
            memory: MemoryKind::Device,
            is_async: false,
        }),
        Record::Api(ApiRecord {
            start: 1,
            end: 3,
            domain: ApiDomain::Driver,
            cbid: 307,
            name: Arc::from("cuLaunchKernel"),
            correlation: 33,
            process: 4242,
            thread: 4243,
            return_value: 0,
        }),
        Record::Api(ApiRecord {
            start: 1,
            end: 3,
            domain: ApiDomain::Runtime,
            cbid: 9999,
            name: Arc::from(""),
            correlation: 34,
            process: 4242,
            thread: 4243,
            return_value: 1,
        }),
        Record::Synchronization(SyncRecord {
            start: 20,
            end: 30,
            kind: SyncKind::ContextSynchronize,
            context: 1,
            stream: u32::MAX,
            event: 0,
            correlation: 42,
        }),
        Record::Overhead(OverheadRecord {
            start: 1,
            end: 2,
            kind: 1,
            object_kind: 2,
            object_id: 4243,
        }),
        Record::Dropped(DroppedRecords {
            context: 1,
            stream: 7,
            count: 99,
        }),
        Record::Notice(Notice {
            level: NoticeLevel::Warning,
            text: "tiny buffers".into(),
        }),
        Record::CodedNotice(CodedNotice {
            level: NoticeLevel::Error,
            code: 7,
            values: vec![2, u64::MAX],
            detail: "the program's own profiler is recording".into(),
            text: "profiling not possible: the program's own profiler is recording".into(),
        }),
        Record::ProcessEnd(ProcessEnd {
            time: 50,
            reason: EndReason::Exit,
            records: 11,
            dropped: 99,
            skipped: 0,
            callback_panics: 0,
        }),
    ]
}

fn encode(records: &[Record]) -> Vec<u8> {
    let mut e = Encoder::new(&header());
    for r in records {
        e.push(r);
    }
    e.bytes().to_vec()
}

fn decode_all(bytes: &[u8]) -> (Vec<Record>, Vec<WireError>) {
    let mut ok = Vec::new();
    let mut errors = Vec::new();
    for item in StreamReader::new(bytes) {
        match item {
            Ok(r) => ok.push(r),
            Err(e) => errors.push(e),
        }
    }
    (ok, errors)
}

#[test]
fn round_trip_keeps_every_field() {
    let records = sample();
    let bytes = encode(&records);
    let mut reader = StreamReader::new(bytes.as_slice());
    let decoded: Vec<Record> = reader.by_ref().map(|r| r.expect("valid frame")).collect();
    assert_eq!(decoded, records);
    assert_eq!(reader.header(), Some(&header()));
}

#[test]
fn a_name_is_sent_once_per_stream() {
    let one = encode(&[kernel("_Z7add_onePji", 1)]);
    let two = encode(&[kernel("_Z7add_onePji", 1), kernel("_Z7add_onePji", 2)]);
    let name_frame = 5 + 4 + "_Z7add_onePji".len();
    let kernel_frame = one.len() - HEADER_LEN - name_frame;
    assert_eq!(
        two.len(),
        one.len() + kernel_frame,
        "second launch sends no name"
    );
    let (decoded, errors) = decode_all(&two);
    assert!(errors.is_empty(), "{errors:?}");
    let names: Vec<&str> = decoded
        .iter()
        .map(|r| match r {
            Record::Kernel(k) => &*k.name,
            _ => "?",
        })
        .collect();
    assert_eq!(names, ["_Z7add_onePji", "_Z7add_onePji"]);
    // Decoded records of one name share one allocation.
    if let (Record::Kernel(a), Record::Kernel(b)) = (&decoded[0], &decoded[1]) {
        assert!(Arc::ptr_eq(&a.name, &b.name));
    }
}

#[test]
fn names_survive_clear_between_sends() {
    let mut e = Encoder::new(&header());
    let mut wire = Vec::new();
    for i in 0..3 {
        e.push(&kernel("k", i));
        wire.extend_from_slice(e.bytes());
        e.clear();
    }
    assert_eq!(e.records(), 3);
    let (decoded, errors) = decode_all(&wire);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(decoded.len(), 3);
}

#[test]
fn byte_by_byte_feeding_gives_the_same_records() {
    let records = sample();
    let bytes = encode(&records);
    let mut d = Decoder::new();
    let mut out = Vec::new();
    for b in &bytes {
        d.feed(std::slice::from_ref(b));
        while let Some(r) = d.next_record().expect("valid") {
            out.push(r);
        }
    }
    d.finish().expect("ends at a frame boundary");
    assert_eq!(out, records);
}

#[test]
fn wrong_magic_is_fatal_at_once() {
    let mut d = Decoder::new();
    d.feed(b"GPUX");
    let e = d.next_record().expect_err("bad magic");
    assert!(matches!(e, WireError::BadMagic { .. }), "{e:?}");
    assert!(e.is_fatal());
    assert_eq!(d.next_record(), Err(WireError::Poisoned));
}

#[test]
fn newer_version_is_refused() {
    let mut bytes = encode(&[]);
    bytes[8] = 2;
    let (_, errors) = decode_all(&bytes);
    assert_eq!(errors, [WireError::UnsupportedVersion { version: 2 }]);
}

#[test]
fn short_header_length_is_refused() {
    let mut bytes = encode(&[]);
    bytes[10] = 12;
    let (_, errors) = decode_all(&bytes);
    assert_eq!(errors, [WireError::BadHeaderLength { len: 12 }]);
}

#[test]
fn a_longer_header_of_a_later_version_is_skipped() {
    let records = sample();
    let bytes = encode(&records);
    let mut longer = bytes[..HEADER_LEN].to_vec();
    longer[10] = (HEADER_LEN + 8) as u8;
    longer.extend_from_slice(&[0xee; 8]);
    longer.extend_from_slice(&bytes[HEADER_LEN..]);
    let (decoded, errors) = decode_all(&longer);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(decoded, records);
}

#[test]
fn the_thread_id_kind_round_trips_and_older_streams_read_as_the_vendors() {
    let linux = header().with_thread_ids(ThreadIds::Linux);
    let mut e = Encoder::new(&linux);
    e.push(&sample()[0]);
    let mut reader = StreamReader::new(e.bytes());
    assert!(reader.next().is_some());
    assert_eq!(
        reader.header().map(|h| h.thread_ids),
        Some(ThreadIds::Linux)
    );
    // Bytes 24..32 of a stream written before the field existed are zero: CUPTI's own ids.
    let bytes = encode(&sample());
    assert_eq!(bytes[24..32], [0; 8]);
    let mut reader = StreamReader::new(&bytes[..]);
    assert!(reader.next().is_some());
    assert_eq!(
        reader.header().map(|h| h.thread_ids),
        Some(ThreadIds::Vendor)
    );
    // A code this crate does not know is kept.
    let mut other = bytes.clone();
    other[24] = 9;
    let mut reader = StreamReader::new(&other[..]);
    assert!(reader.next().is_some());
    assert_eq!(
        reader.header().map(|h| h.thread_ids),
        Some(ThreadIds::Other(9))
    );
}

#[test]
fn empty_input_has_no_header() {
    let (decoded, errors) = decode_all(&[]);
    assert!(decoded.is_empty());
    assert_eq!(errors, [WireError::NoHeader { received: 0 }]);
}

#[test]
fn a_cut_stream_keeps_the_records_before_the_cut() {
    let records = sample();
    let bytes = encode(&records);
    let cut = bytes.len() - 7;
    let (decoded, errors) = decode_all(&bytes[..cut]);
    assert_eq!(decoded, records[..records.len() - 1]);
    assert_eq!(errors.len(), 1);
    assert!(matches!(errors[0], WireError::TruncatedStream { pending } if pending > 0));
}

#[test]
fn oversized_frame_poisons_the_stream() {
    let mut bytes = encode(&[]);
    bytes.push(2);
    bytes.extend_from_slice(&(MAX_FRAME + 1).to_le_bytes());
    let (_, errors) = decode_all(&bytes);
    assert_eq!(
        errors,
        [WireError::FrameTooLarge {
            tag: 2,
            len: MAX_FRAME + 1
        }]
    );
}

#[test]
fn short_and_unknown_frames_are_skipped_and_the_rest_is_read() {
    let mut bytes = encode(&[]);
    // A memcpy frame of 3 bytes.
    bytes.extend_from_slice(&[3, 3, 0, 0, 0, 1, 2, 3]);
    // A frame of a future tag.
    bytes.extend_from_slice(&[200, 2, 0, 0, 0, 9, 9]);
    let tail = encode(&sample());
    bytes.extend_from_slice(&tail[HEADER_LEN..]);
    let (decoded, errors) = decode_all(&bytes);
    assert_eq!(decoded, sample());
    assert_eq!(
        errors,
        [
            WireError::ShortFrame {
                tag: 3,
                need: 44,
                have: 3
            },
            WireError::UnknownFrame { tag: 200, len: 2 },
        ]
    );
    assert!(errors.iter().all(|e| !e.is_fatal()));
}

#[test]
fn a_kernel_frame_with_part_of_a_graph_node_id_is_short_not_node_0() {
    let k = kernel("k", 100);
    let one = encode(std::slice::from_ref(&k));
    let len_at = one.len() - (1 + 4 + 82 + 8);
    assert_eq!(one[len_at], 2, "the kernel frame is last");
    for extra in 0..=8u32 {
        let mut bytes = one[..len_at].to_vec();
        bytes.push(2);
        bytes.extend_from_slice(&(82 + extra).to_le_bytes());
        let payload = len_at + 5;
        bytes.extend_from_slice(&one[payload..payload + 82 + extra as usize]);
        let (decoded, errors) = decode_all(&bytes);
        match extra {
            // 0: a frame of a version before node ids, node 0; 8: the whole id.
            0 | 8 => assert_eq!(decoded, std::slice::from_ref(&k), "{errors:?}"),
            _ => {
                assert!(decoded.is_empty(), "{extra} bytes: {decoded:?}");
                assert_eq!(
                    errors,
                    [WireError::ShortFrame {
                        tag: 2,
                        need: 90,
                        have: 82 + extra as usize
                    }]
                );
            }
        }
    }
}

#[test]
fn a_longer_frame_of_a_later_version_keeps_its_known_fields() {
    let one = encode(&[Record::Dropped(DroppedRecords {
        context: 3,
        stream: 4,
        count: 5,
    })]);
    let mut bytes = one[..HEADER_LEN].to_vec();
    let frame = &one[HEADER_LEN..];
    bytes.push(frame[0]);
    bytes.extend_from_slice(&(16u32 + 4).to_le_bytes());
    bytes.extend_from_slice(&frame[5..]);
    bytes.extend_from_slice(&[1, 2, 3, 4]);
    let (decoded, errors) = decode_all(&bytes);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(
        decoded,
        [Record::Dropped(DroppedRecords {
            context: 3,
            stream: 4,
            count: 5
        })]
    );
}

#[test]
fn undefined_and_redefined_names_are_errors_for_their_frame() {
    let bytes = encode(&[kernel("k", 1)]);
    // Drop the name frame: the kernel then refers to an undefined id.
    let name_len = 5 + 4 + 1;
    let mut without = bytes[..HEADER_LEN].to_vec();
    without.extend_from_slice(&bytes[HEADER_LEN + name_len..]);
    let (decoded, errors) = decode_all(&without);
    assert!(decoded.is_empty());
    assert_eq!(errors, [WireError::UndefinedName { tag: 2, id: 1 }]);
    // Define id 1 twice: the second definition is refused, the first kept.
    let mut twice = bytes[..HEADER_LEN + name_len].to_vec();
    twice.extend_from_slice(&[1, 5, 0, 0, 0, 1, 0, 0, 0, b'x']);
    twice.extend_from_slice(&bytes[HEADER_LEN + name_len..]);
    let (decoded, errors) = decode_all(&twice);
    assert_eq!(errors, [WireError::BadNameId { id: 1 }]);
    assert_eq!(decoded, [kernel("k", 1)]);
}

#[test]
fn text_that_is_not_utf8_is_an_error_for_its_frame_not_another_name() {
    let bytes = encode(&[kernel("k", 1)]);
    // The name frame's text "k" made 0xff, then a notice of text 0xfe: the encoder writes UTF-8 only, so each is
    // damage.
    let mut damaged = bytes.clone();
    let name_text = HEADER_LEN + 5 + 4;
    assert_eq!(damaged[name_text], b'k');
    damaged[name_text] = 0xff;
    damaged.extend_from_slice(&[11, 2, 0, 0, 0, 3, 0xfe]);
    let (decoded, errors) = decode_all(&damaged);
    assert!(decoded.is_empty(), "{decoded:?}");
    assert_eq!(
        errors,
        [
            WireError::BadText { tag: 1 },
            WireError::UndefinedName { tag: 2, id: 1 },
            WireError::BadText { tag: 11 },
        ]
    );
    assert!(errors.iter().all(|e| !e.is_fatal()));
}

#[test]
fn long_names_are_cut_at_a_character_boundary() {
    let long: String = "é".repeat(40_000);
    let bytes = encode(&[kernel(&long, 1)]);
    let (decoded, errors) = decode_all(&bytes);
    assert!(errors.is_empty());
    let Record::Kernel(k) = &decoded[0] else {
        panic!("kernel expected")
    };
    assert_eq!(k.name.len(), 64 << 10);
    assert!(long.starts_with(&*k.name));
}

#[test]
fn process_info_with_the_most_and_longest_labels_keeps_the_stream_readable() {
    let long = "x".repeat(4096);
    let info = ProcessInfo {
        host: long.clone(),
        boot_id: long.clone(),
        labels: vec![(long.clone(), long.clone()); 256],
    };
    let after = kernel("k", 1);
    let (decoded, errors) =
        decode_all(&encode(&[Record::ProcessInfo(info.clone()), after.clone()]));
    assert!(errors.is_empty(), "{errors:?}");
    let [Record::ProcessInfo(got), k] = decoded.as_slice() else {
        panic!("{} records", decoded.len())
    };
    assert_eq!((&got.host, &got.boot_id), (&info.host, &info.boot_id));
    assert!(
        !got.labels.is_empty() && info.labels.starts_with(&got.labels),
        "the labels that fit, in order"
    );
    assert_eq!(k, &after, "the record after it");
}

#[test]
fn codes_this_crate_does_not_know_are_kept() {
    let r = Record::Memcpy(MemcpyRecord {
        start: 0,
        end: 0,
        device: 0,
        context: 0,
        stream: 0,
        correlation: 0,
        bytes: 0,
        kind: CopyKind::Other(77),
        src: MemoryKind::Other(66),
        dst: MemoryKind::Other(55),
        is_async: false,
    });
    let (decoded, _) = decode_all(&encode(std::slice::from_ref(&r)));
    assert_eq!(decoded, [r]);
    for c in 0..=255u8 {
        assert_eq!(CopyKind::from_code(c).code(), c);
        assert_eq!(MemoryKind::from_code(c).code(), c);
        assert_eq!(SyncKind::from_code(c).code(), c);
        assert_eq!(ApiDomain::from_code(c).code(), c);
        assert_eq!(EndReason::from_code(c).code(), c);
        assert_eq!(NoticeLevel::from_code(c).code(), c);
    }
}

#[test]
fn public_types_are_send_and_sync() {
    fn both<T: Send + Sync>() {}
    both::<Record>();
    both::<Encoder>();
    both::<Decoder>();
    both::<WireError>();
    both::<StreamHeader>();
    both::<NameTable>();
    both::<StreamReader<std::fs::File>>();
}

fn arb_name() -> impl Strategy<Value = Arc<str>> {
    prop_oneof![Just(String::new()), "[a-z_:<>0-9]{1,24}", ".{0,8}"].prop_map(Arc::from)
}

fn arb_record() -> impl Strategy<Value = Record> {
    let span = (any::<u64>(), any::<u64>());
    let place = (any::<u32>(), any::<u32>(), any::<u32>(), any::<u32>());
    prop_oneof![
        (
            span,
            place,
            any::<u64>(),
            any::<[u32; 3]>(),
            any::<[u32; 3]>(),
            any::<(u32, u32, u16, u32)>(),
            arb_name()
        )
            .prop_map(
                |(
                    (start, end),
                    (device, context, stream, correlation),
                    grid_id,
                    grid,
                    block,
                    (ss, ds, reg, g),
                    name,
                )| {
                    Record::Kernel(KernelRecord {
                        start,
                        end,
                        device,
                        context,
                        stream,
                        correlation,
                        grid_id,
                        grid,
                        block,
                        static_shared: ss,
                        dynamic_shared: ds,
                        registers: reg,
                        graph_id: g,
                        graph_node_id: u64::from(g) * 3,
                        name,
                    })
                }
            ),
        (span, place, any::<u64>(), any::<(u8, u8, u8, bool)>()).prop_map(
            |((start, end), (device, context, stream, correlation), bytes, (k, s, d, a))| {
                Record::Memcpy(MemcpyRecord {
                    start,
                    end,
                    device,
                    context,
                    stream,
                    correlation,
                    bytes,
                    kind: CopyKind::from_code(k),
                    src: MemoryKind::from_code(s),
                    dst: MemoryKind::from_code(d),
                    is_async: a,
                })
            }
        ),
        (span, place, any::<u64>(), any::<(u32, u8, bool)>()).prop_map(
            |((start, end), (device, context, stream, correlation), bytes, (value, m, a))| {
                Record::Memset(MemsetRecord {
                    start,
                    end,
                    device,
                    context,
                    stream,
                    correlation,
                    bytes,
                    value,
                    memory: MemoryKind::from_code(m),
                    is_async: a,
                })
            }
        ),
        (span, any::<(u8, u32, u32, u32, u32, u32)>(), arb_name()).prop_map(
            |((start, end), (d, cbid, correlation, process, thread, rv), name)| {
                Record::Api(ApiRecord {
                    start,
                    end,
                    domain: ApiDomain::from_code(d),
                    cbid,
                    name,
                    correlation,
                    process,
                    thread,
                    return_value: rv,
                })
            }
        ),
        (span, place, any::<u8>()).prop_map(
            |((start, end), (context, stream, event, correlation), k)| {
                Record::Synchronization(SyncRecord {
                    start,
                    end,
                    kind: SyncKind::from_code(k),
                    context,
                    stream,
                    event,
                    correlation,
                })
            }
        ),
        (span, any::<(u32, u32, u64)>()).prop_map(
            |((start, end), (kind, object_kind, object_id))| {
                Record::Overhead(OverheadRecord {
                    start,
                    end,
                    kind,
                    object_kind,
                    object_id,
                })
            }
        ),
        any::<(u32, u32, u64)>().prop_map(|(context, stream, count)| Record::Dropped(
            DroppedRecords {
                context,
                stream,
                count
            }
        )),
        (any::<(u32, u32, u64)>(), ".{0,40}").prop_map(|((pid, parent_pid, time), command)| {
            Record::ProcessStart(ProcessStart {
                pid,
                parent_pid,
                time,
                command,
            })
        }),
        any::<(u64, u8, u64, u64, u64, u64)>().prop_map(
            |(time, r, records, dropped, skipped, p)| {
                Record::ProcessEnd(ProcessEnd {
                    time,
                    reason: EndReason::from_code(r),
                    records,
                    dropped,
                    skipped,
                    callback_panics: p,
                })
            }
        ),
        (any::<u8>(), ".{0,40}").prop_map(|(l, text)| Record::Notice(Notice {
            level: NoticeLevel::from_code(l),
            text
        })),
        (
            any::<(u8, u16)>(),
            proptest::collection::vec(any::<u64>(), 0..8),
            ".{0,20}",
            ".{0,40}"
        )
            .prop_map(|((l, code), values, detail, text)| {
                Record::CodedNotice(CodedNotice {
                    level: NoticeLevel::from_code(l),
                    code,
                    values,
                    detail,
                    text,
                })
            }),
        (span, place, any::<(u32, u32, u32)>()).prop_map(
            |(
                (start, end),
                (device, context, stream, correlation),
                (graph_id, end_device, end_context),
            )| {
                Record::GraphLaunch(GraphLaunchRecord {
                    start,
                    end,
                    device,
                    context,
                    stream,
                    correlation,
                    graph_id,
                    end_device,
                    end_context,
                })
            }
        ),
        any::<(u64, u32, u32, u32)>().prop_map(|(time, graph_id, exec_id, node_count)| {
            Record::Graph(GraphInfo {
                time,
                graph_id,
                exec_id,
                node_count,
            })
        }),
        (any::<(u64, u8, u32, u32, u32)>(), arb_name(), ".{0,30}").prop_map(
            |((time, kind, id, process, thread), domain, name)| {
                Record::Marker(MarkerRecord {
                    time,
                    kind: MarkerKind::from_code(kind),
                    id,
                    process,
                    thread,
                    domain,
                    name,
                })
            }
        ),
        (any::<(u32, Option<u32>, u32, u8, u64)>(), -1e12f64..1e12).prop_map(
            |((id, color, category, kind, bits), f)| {
                let payload = match kind % 5 {
                    0 => MarkerPayload::None,
                    1 => MarkerPayload::Unsigned(bits),
                    2 => MarkerPayload::Signed(bits as i64),
                    3 => MarkerPayload::Float(f),
                    _ => MarkerPayload::Other(4 + kind % 200, bits),
                };
                Record::MarkerData(MarkerData {
                    id,
                    color,
                    category,
                    payload,
                })
            }
        ),
        any::<(u64, u64, u32)>().prop_map(|(monotonic, realtime, uncertainty)| {
            Record::ClockAnchor(ClockAnchor {
                monotonic,
                realtime,
                uncertainty,
            })
        }),
        (
            ".{0,20}",
            "[0-9a-f-]{0,36}",
            proptest::collection::vec(("[A-Z_]{1,12}", ".{0,8}"), 0..4)
        )
            .prop_map(|(host, boot_id, labels)| Record::ProcessInfo(ProcessInfo {
                host,
                boot_id,
                labels
            })),
    ]
}

/// Drains a decoder fed `bytes` in chunks of `chunk`; returns records and errors, checking the decoder's own
/// invariants (no progress after a fatal error).
fn drain_chunked(bytes: &[u8], chunk: usize) -> (usize, usize) {
    let mut d = Decoder::new();
    let (mut ok, mut err) = (0, 0);
    let mut fatal = false;
    for part in bytes.chunks(chunk.max(1)) {
        d.feed(part);
        loop {
            match d.next_record() {
                Ok(Some(_)) => {
                    assert!(!fatal, "record after a fatal error");
                    ok += 1;
                }
                Ok(None) => break,
                Err(e) => {
                    err += 1;
                    if fatal {
                        assert_eq!(e, WireError::Poisoned);
                        break;
                    }
                    fatal = e.is_fatal();
                    if fatal {
                        break;
                    }
                }
            }
        }
    }
    let _ = d.finish();
    (ok, err)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(512)
    ))]

    #[test]
    fn any_records_round_trip(records in proptest::collection::vec(arb_record(), 0..40)) {
        let bytes = encode(&records);
        let (decoded, errors) = decode_all(&bytes);
        prop_assert!(errors.is_empty(), "{:?}", errors);
        prop_assert_eq!(decoded, records);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048), chunk in 1usize..64) {
        drain_chunked(&bytes, chunk);
        let _ = decode_all(&bytes);
    }

    #[test]
    fn arbitrary_frames_after_a_valid_header_never_panic(
        body in proptest::collection::vec(any::<u8>(), 0..2048),
        chunk in 1usize..64,
    ) {
        let mut bytes = encode(&[]);
        bytes.extend_from_slice(&body);
        drain_chunked(&bytes, chunk);
    }

    #[test]
    fn mutated_streams_never_panic_and_keep_whole_frames_before_the_damage(
        records in proptest::collection::vec(arb_record(), 1..20),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        chunk in 1usize..97,
    ) {
        let mut bytes = encode(&records);
        let first = flips.iter().map(|(i, _)| i.index(bytes.len())).min().unwrap_or(0);
        for (i, v) in &flips {
            let at = i.index(bytes.len());
            bytes[at] ^= v | 1;
        }
        drain_chunked(&bytes, chunk);
        // Frames that end before the first changed byte decode as they were sent.
        let clean = encode(&records);
        let mut reader = StreamReader::new(&clean[..first]);
        let before: Vec<Record> = reader.by_ref().filter_map(Result::ok).collect();
        let (damaged, _) = decode_all(&bytes);
        prop_assert!(damaged.len() >= before.len());
        prop_assert_eq!(&damaged[..before.len()], &before[..]);
    }
}
