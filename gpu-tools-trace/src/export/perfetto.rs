//! Perfetto's native trace format (`perfetto.protos.Trace`), encoded by hand: a trace is a sequence of
//! `TracePacket`s, each written as field 1 of `Trace` the moment it is made. Tracks are `TrackDescriptor`s, slices
//! are `TrackEvent` begin/end pairs, event names and categories are interned on one packet sequence.
//!
//! Field numbers, from Perfetto's `protos/perfetto/trace/`: `Trace.packet` 1; `TracePacket`: `timestamp` 8,
//! `trusted_packet_sequence_id` 10, `track_event` 11, `interned_data` 12, `sequence_flags` 13,
//! `track_descriptor` 60; `TrackDescriptor`: `uuid` 1, `name` 2, `process` 3, `parent_uuid` 5, `counter` 8,
//! `sibling_order_rank` 12 (int32), `process_ordering` 19 (PROCESS_ORDERING_EXPLICIT 1);
//! `ProcessDescriptor`: `pid` 1, `process_name` 6; `CounterDescriptor`: `unit_name` 6; `TrackEvent`:
//! `category_iids` 3, `debug_annotations` 4, `type` 9, `name_iid` 10, `track_uuid` 11, `double_counter_value` 44
//! (double), `flow_ids` 47 (fixed64), `terminating_flow_ids` 48 (fixed64);
//! `DebugAnnotation`: `bool_value` 2, `uint_value` 3, `int_value` 4, `double_value` 5, `string_value` 6,
//! `name` 10; `InternedData`: `event_categories` 1, `event_names` 2; `EventCategory` and `EventName`: `iid` 1,
//! `name` 2. `TrackEvent.Type`: SLICE_BEGIN 1, SLICE_END 2, INSTANT 3, COUNTER 4. Sequence flags:
//! INCREMENTAL_STATE_CLEARED 1, NEEDS_INCREMENTAL_STATE 2.
//!
//! The groups (process tracks) are ordered as the timeline orders them ([`Track::sort`], ranks by host then rank):
//! Perfetto orders process groups by their own heuristics (most slices first) unless the root track descriptor
//! (uuid 0, the first packet) sets `process_ordering` to explicit; then by each process track's
//! `sibling_order_rank`, lowest first.
//!
//! Counter tracks are `TrackDescriptor`s with a `CounterDescriptor` (its unit in `unit_name`), under their
//! device's group; their values are `TYPE_COUNTER` events with a `double_counter_value`.

use std::collections::HashMap;
use std::io::{self, Write};

use super::timeline::{Arg, CounterTrack, CounterValue, Slice, TimelineSink, Track};

/// The one packet sequence of the export.
const SEQUENCE: u64 = 1;

mod field {
    pub const TRACE_PACKET: u32 = 1;
    pub mod packet {
        pub const TIMESTAMP: u32 = 8;
        pub const SEQUENCE_ID: u32 = 10;
        pub const TRACK_EVENT: u32 = 11;
        pub const INTERNED_DATA: u32 = 12;
        pub const SEQUENCE_FLAGS: u32 = 13;
        pub const TRACK_DESCRIPTOR: u32 = 60;
    }
    pub mod track {
        pub const UUID: u32 = 1;
        pub const NAME: u32 = 2;
        pub const PROCESS: u32 = 3;
        pub const PARENT_UUID: u32 = 5;
        pub const COUNTER: u32 = 8;
        pub const SIBLING_ORDER_RANK: u32 = 12;
        pub const PROCESS_ORDERING: u32 = 19;
    }
    pub mod counter {
        pub const UNIT_NAME: u32 = 6;
    }
    pub mod process {
        pub const PID: u32 = 1;
        pub const NAME: u32 = 6;
    }
    pub mod event {
        pub const CATEGORY_IIDS: u32 = 3;
        pub const DEBUG_ANNOTATIONS: u32 = 4;
        pub const TYPE: u32 = 9;
        pub const NAME_IID: u32 = 10;
        pub const TRACK_UUID: u32 = 11;
        pub const FLOW_IDS: u32 = 47;
        pub const TERMINATING_FLOW_IDS: u32 = 48;
        pub const DOUBLE_COUNTER_VALUE: u32 = 44;
    }
    pub mod annotation {
        pub const UINT: u32 = 3;
        pub const INT: u32 = 4;
        pub const DOUBLE: u32 = 5;
        pub const STRING: u32 = 6;
        pub const NAME: u32 = 10;
    }
    pub mod interned {
        pub const CATEGORIES: u32 = 1;
        pub const NAMES: u32 = 2;
        pub const IID: u32 = 1;
        pub const NAME: u32 = 2;
    }
}

const SLICE_BEGIN: u64 = 1;
const SLICE_END: u64 = 2;
const INSTANT: u64 = 3;
const COUNTER: u64 = 4;
const SEQ_INCREMENTAL_STATE_CLEARED: u64 = 1;
const SEQ_NEEDS_INCREMENTAL_STATE: u64 = 2;
/// `TrackDescriptor.ProcessOrdering.PROCESS_ORDERING_EXPLICIT`.
const PROCESS_ORDERING_EXPLICIT: u64 = 1;

/// Protobuf wire types.
const VARINT: u32 = 0;
const FIXED64: u32 = 1;
const LEN: u32 = 2;

fn varint(b: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        b.push((v as u8) | 0x80);
        v >>= 7;
    }
    b.push(v as u8);
}

fn key(b: &mut Vec<u8>, field: u32, wire: u32) {
    varint(b, (u64::from(field) << 3) | u64::from(wire));
}

fn put_varint(b: &mut Vec<u8>, field: u32, v: u64) {
    key(b, field, VARINT);
    varint(b, v);
}

fn put_bytes(b: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    key(b, field, LEN);
    varint(b, bytes.len() as u64);
    b.extend_from_slice(bytes);
}

/// A nested message: `fill` writes its body into `scratch`, then it is appended as a length-delimited field.
fn put_message(b: &mut Vec<u8>, field: u32, fill: impl FnOnce(&mut Vec<u8>)) {
    let mut body = Vec::new();
    fill(&mut body);
    put_bytes(b, field, &body);
}

/// Writes Perfetto's protobuf trace to any `io::Write`, packet by packet.
#[derive(Debug)]
pub struct PerfettoWriter<W: Write> {
    out: W,
    names: HashMap<String, u64>,
    categories: HashMap<&'static str, u64>,
    first: bool,
    /// Whether the root track descriptor (explicit process order) was written.
    root: bool,
    packet: Vec<u8>,
    packets: u64,
}

impl<W: Write> PerfettoWriter<W> {
    /// Writes to `out` (buffer it: each packet is one write).
    pub fn new(out: W) -> Self {
        PerfettoWriter {
            out,
            names: HashMap::new(),
            categories: HashMap::new(),
            first: true,
            root: false,
            packet: Vec::with_capacity(256),
            packets: 0,
        }
    }

    /// Packets written so far.
    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// Flushes and returns the writer.
    pub fn into_inner(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }

    /// Writes the packet built in `self.packet` as `Trace.packet`.
    fn emit(&mut self) -> io::Result<()> {
        let mut head = Vec::with_capacity(8);
        key(&mut head, field::TRACE_PACKET, LEN);
        varint(&mut head, self.packet.len() as u64);
        self.out.write_all(&head)?;
        self.out.write_all(&self.packet)?;
        self.packet.clear();
        self.packets += 1;
        Ok(())
    }

    /// The sequence id and, on the first packet, the flag that starts the sequence's interning.
    fn sequence(&mut self, needs_state: bool) {
        put_varint(&mut self.packet, field::packet::SEQUENCE_ID, SEQUENCE);
        if self.first {
            self.first = false;
            put_varint(
                &mut self.packet,
                field::packet::SEQUENCE_FLAGS,
                SEQ_INCREMENTAL_STATE_CLEARED | SEQ_NEEDS_INCREMENTAL_STATE,
            );
        } else if needs_state {
            put_varint(
                &mut self.packet,
                field::packet::SEQUENCE_FLAGS,
                SEQ_NEEDS_INCREMENTAL_STATE,
            );
        }
    }

    fn event(&mut self, ts: u64, kind: u64, slice: &Slice<'_>, begin: bool) -> io::Result<()> {
        // Interned ids: new names and categories go into this packet's interned data.
        let mut new_names: Vec<(u64, String)> = Vec::new();
        let mut new_categories: Vec<(u64, &'static str)> = Vec::new();
        let (name_iid, category_iid) = if begin {
            let next = self.names.len() as u64 + 1;
            let name_iid = *self.names.entry(slice.name.to_string()).or_insert_with(|| {
                new_names.push((next, slice.name.to_string()));
                next
            });
            let next = self.categories.len() as u64 + 1;
            let category_iid = *self.categories.entry(slice.category).or_insert_with(|| {
                new_categories.push((next, slice.category));
                next
            });
            (Some(name_iid), Some(category_iid))
        } else {
            (None, None)
        };
        self.sequence(true);
        put_varint(&mut self.packet, field::packet::TIMESTAMP, ts);
        if !new_names.is_empty() || !new_categories.is_empty() {
            put_message(&mut self.packet, field::packet::INTERNED_DATA, |b| {
                for (iid, name) in &new_categories {
                    put_message(b, field::interned::CATEGORIES, |c| {
                        put_varint(c, field::interned::IID, *iid);
                        put_bytes(c, field::interned::NAME, name.as_bytes());
                    });
                }
                for (iid, name) in &new_names {
                    put_message(b, field::interned::NAMES, |c| {
                        put_varint(c, field::interned::IID, *iid);
                        put_bytes(c, field::interned::NAME, name.as_bytes());
                    });
                }
            });
        }
        put_message(&mut self.packet, field::packet::TRACK_EVENT, |b| {
            put_varint(b, field::event::TYPE, kind);
            put_varint(b, field::event::TRACK_UUID, slice.track);
            if let Some(iid) = category_iid {
                put_varint(b, field::event::CATEGORY_IIDS, iid);
            }
            if let Some(iid) = name_iid {
                put_varint(b, field::event::NAME_IID, iid);
            }
            if begin {
                for (name, value) in &slice.args {
                    put_message(b, field::event::DEBUG_ANNOTATIONS, |a| {
                        put_bytes(a, field::annotation::NAME, name.as_bytes());
                        match value {
                            Arg::U(v) => put_varint(a, field::annotation::UINT, *v),
                            Arg::I(v) => put_varint(a, field::annotation::INT, *v as u64),
                            Arg::F(v) => {
                                key(a, field::annotation::DOUBLE, FIXED64);
                                a.extend_from_slice(&v.to_le_bytes());
                            }
                            Arg::S(s) => put_bytes(a, field::annotation::STRING, s.as_bytes()),
                        }
                    });
                }
                if let Some(f) = slice.flow_out {
                    key(b, field::event::FLOW_IDS, FIXED64);
                    b.extend_from_slice(&f.to_le_bytes());
                }
                if let Some(f) = slice.flow_in {
                    key(b, field::event::TERMINATING_FLOW_IDS, FIXED64);
                    b.extend_from_slice(&f.to_le_bytes());
                }
            }
        });
        self.emit()
    }
}

/// A place as the 32-bit `sibling_order_rank` (a value beyond taken as the nearest end), as protobuf writes an
/// `int32`: a negative one sign-extended to 64 bits.
fn order_rank(sort: i64) -> u64 {
    let clamped = sort.clamp(i64::from(i32::MIN), i64::from(i32::MAX));
    clamped as u64
}

impl<W: Write> PerfettoWriter<W> {
    /// The root track descriptor (uuid 0), before any other: process groups in the order of their ranks.
    fn root(&mut self) -> io::Result<()> {
        if self.root {
            return Ok(());
        }
        self.root = true;
        self.sequence(false);
        put_message(&mut self.packet, field::packet::TRACK_DESCRIPTOR, |b| {
            put_varint(b, field::track::UUID, 0);
            put_varint(b, field::track::PROCESS_ORDERING, PROCESS_ORDERING_EXPLICIT);
        });
        self.emit()
    }
}

impl<W: Write> TimelineSink for PerfettoWriter<W> {
    fn track(&mut self, track: &Track) -> io::Result<()> {
        self.root()?;
        self.sequence(false);
        put_message(&mut self.packet, field::packet::TRACK_DESCRIPTOR, |b| {
            put_varint(b, field::track::UUID, track.id);
            if let Some(p) = track.parent {
                put_varint(b, field::track::PARENT_UUID, p);
            }
            put_bytes(b, field::track::NAME, track.name.as_bytes());
            if let Some(p) = &track.process {
                put_message(b, field::track::PROCESS, |d| {
                    put_varint(d, field::process::PID, u64::from(p.pid));
                    put_bytes(d, field::process::NAME, p.name.as_bytes());
                });
                put_varint(b, field::track::SIBLING_ORDER_RANK, order_rank(track.sort));
            }
        });
        self.emit()
    }

    fn slice(&mut self, slice: &Slice<'_>) -> io::Result<()> {
        if slice.instant {
            return self.event(slice.start, INSTANT, slice, true);
        }
        self.event(slice.start, SLICE_BEGIN, slice, true)?;
        self.event(slice.end.max(slice.start), SLICE_END, slice, false)
    }

    fn counter_track(&mut self, track: &CounterTrack) -> io::Result<()> {
        self.root()?;
        self.sequence(false);
        put_message(&mut self.packet, field::packet::TRACK_DESCRIPTOR, |b| {
            put_varint(b, field::track::UUID, track.id);
            put_varint(b, field::track::PARENT_UUID, track.parent);
            put_bytes(b, field::track::NAME, track.name.as_bytes());
            put_message(b, field::track::COUNTER, |c| {
                if !track.unit.is_empty() {
                    put_bytes(c, field::counter::UNIT_NAME, track.unit.as_bytes());
                }
            });
        });
        self.emit()
    }

    fn counter(&mut self, value: &CounterValue) -> io::Result<()> {
        self.sequence(true);
        put_varint(&mut self.packet, field::packet::TIMESTAMP, value.time);
        put_message(&mut self.packet, field::packet::TRACK_EVENT, |b| {
            put_varint(b, field::event::TYPE, COUNTER);
            put_varint(b, field::event::TRACK_UUID, value.track);
            key(b, field::event::DOUBLE_COUNTER_VALUE, FIXED64);
            b.extend_from_slice(&value.value.to_le_bytes());
        });
        self.emit()
    }

    fn finish(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_encode_as_protobuf_does() {
        let mut b = Vec::new();
        varint(&mut b, 300);
        assert_eq!(b, [0xac, 0x02]);
        b.clear();
        put_varint(&mut b, 60, 1);
        assert_eq!(b, [0xe0, 0x03, 0x01]);
    }

    #[test]
    fn order_ranks_are_int32_as_protobuf_writes_them() {
        // -1 as int32: ten bytes, sign-extended.
        let mut b = Vec::new();
        varint(&mut b, order_rank(-1));
        assert_eq!(
            b,
            [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]
        );
        assert_eq!(order_rank(-(1 << 40)) as i64, i64::from(i32::MIN));
        assert_eq!(order_rank(1 << 40) as i64, i64::from(i32::MAX));
        assert_eq!(order_rank(42), 42);
    }
}
