//! Perfetto's protobuf, decoded with message types declared here with the field numbers of Perfetto's published
//! `.proto` files (`protos/perfetto/trace/`): the parts the export writes, for the tests that read exports back
//! (gpu-tools-trace's and the command line's).

use std::collections::HashMap;

/// `perfetto.protos.Trace` and the parts of `TracePacket` the export writes.
pub mod pb {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Trace {
        #[prost(message, repeated, tag = "1")]
        pub packet: Vec<TracePacket>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct TracePacket {
        #[prost(uint64, optional, tag = "8")]
        pub timestamp: Option<u64>,
        #[prost(uint32, optional, tag = "10")]
        pub trusted_packet_sequence_id: Option<u32>,
        #[prost(message, optional, tag = "11")]
        pub track_event: Option<TrackEvent>,
        #[prost(message, optional, tag = "12")]
        pub interned_data: Option<InternedData>,
        #[prost(uint32, optional, tag = "13")]
        pub sequence_flags: Option<u32>,
        #[prost(message, optional, tag = "60")]
        pub track_descriptor: Option<TrackDescriptor>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct TrackDescriptor {
        #[prost(uint64, optional, tag = "1")]
        pub uuid: Option<u64>,
        #[prost(string, optional, tag = "2")]
        pub name: Option<String>,
        #[prost(message, optional, tag = "3")]
        pub process: Option<ProcessDescriptor>,
        #[prost(uint64, optional, tag = "5")]
        pub parent_uuid: Option<u64>,
        #[prost(message, optional, tag = "8")]
        pub counter: Option<CounterDescriptor>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct CounterDescriptor {
        #[prost(string, optional, tag = "6")]
        pub unit_name: Option<String>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ProcessDescriptor {
        #[prost(int32, optional, tag = "1")]
        pub pid: Option<i32>,
        #[prost(string, optional, tag = "6")]
        pub process_name: Option<String>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct TrackEvent {
        #[prost(uint64, repeated, packed = "false", tag = "3")]
        pub category_iids: Vec<u64>,
        #[prost(message, repeated, tag = "4")]
        pub debug_annotations: Vec<DebugAnnotation>,
        #[prost(int32, optional, tag = "9")]
        pub r#type: Option<i32>,
        #[prost(uint64, optional, tag = "10")]
        pub name_iid: Option<u64>,
        #[prost(uint64, optional, tag = "11")]
        pub track_uuid: Option<u64>,
        #[prost(double, optional, tag = "44")]
        pub double_counter_value: Option<f64>,
        #[prost(fixed64, repeated, packed = "false", tag = "47")]
        pub flow_ids: Vec<u64>,
        #[prost(fixed64, repeated, packed = "false", tag = "48")]
        pub terminating_flow_ids: Vec<u64>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct DebugAnnotation {
        #[prost(string, optional, tag = "10")]
        pub name: Option<String>,
        #[prost(uint64, optional, tag = "3")]
        pub uint_value: Option<u64>,
        #[prost(int64, optional, tag = "4")]
        pub int_value: Option<i64>,
        #[prost(double, optional, tag = "5")]
        pub double_value: Option<f64>,
        #[prost(string, optional, tag = "6")]
        pub string_value: Option<String>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct InternedData {
        #[prost(message, repeated, tag = "1")]
        pub event_categories: Vec<Interned>,
        #[prost(message, repeated, tag = "2")]
        pub event_names: Vec<Interned>,
    }
    /// `EventCategory` and `EventName` (same fields).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Interned {
        #[prost(uint64, optional, tag = "1")]
        pub iid: Option<u64>,
        #[prost(string, optional, tag = "2")]
        pub name: Option<String>,
    }
}

/// `TrackEvent.Type` TYPE_COUNTER.
pub const COUNTER: i32 = 4;

/// A counter track of a decoded trace.
#[derive(Debug, Clone, PartialEq)]
pub struct Counter {
    /// The track's name.
    pub name: String,
    /// Its unit (`unit_name`).
    pub unit: String,
    /// The name of the group it is under (its parent's process name, or the parent's name).
    pub group: String,
    /// (timestamp, value) in the order written.
    pub values: Vec<(u64, f64)>,
}

/// Decodes a Perfetto trace, checks that every event's track is described before it, and returns its counter
/// tracks in the order described.
pub fn counters(bytes: &[u8]) -> Vec<Counter> {
    let trace =
        <pb::Trace as prost::Message>::decode(bytes).expect("a valid perfetto.protos.Trace");
    let mut tracks: HashMap<u64, pb::TrackDescriptor> = HashMap::new();
    let mut order: Vec<u64> = Vec::new();
    let mut values: HashMap<u64, Vec<(u64, f64)>> = HashMap::new();
    for p in &trace.packet {
        if let Some(d) = &p.track_descriptor {
            let uuid = d.uuid.expect("a track has a uuid");
            if let Some(parent) = d.parent_uuid {
                assert!(
                    tracks.contains_key(&parent),
                    "parent track {parent} described first"
                );
            }
            if d.counter.is_some() {
                order.push(uuid);
            }
            tracks.insert(uuid, d.clone());
        }
        if let Some(ev) = &p.track_event {
            let uuid = ev.track_uuid.expect("an event names its track");
            let track = tracks
                .get(&uuid)
                .expect("the track is described before its events");
            if ev.r#type == Some(COUNTER) {
                assert!(
                    track.counter.is_some(),
                    "a counter value on a counter track"
                );
                let v = ev
                    .double_counter_value
                    .expect("a counter event has a value");
                values
                    .entry(uuid)
                    .or_default()
                    .push((p.timestamp.expect("a timestamp"), v));
            } else {
                assert!(track.counter.is_none(), "no slice on a counter track");
            }
        }
    }
    order
        .into_iter()
        .map(|uuid| {
            let d = &tracks[&uuid];
            let parent = d.parent_uuid.and_then(|p| tracks.get(&p));
            let group = parent
                .map(|p| {
                    p.process
                        .as_ref()
                        .and_then(|q| q.process_name.clone())
                        .or_else(|| p.name.clone())
                        .unwrap_or_default()
                })
                .unwrap_or_default();
            Counter {
                name: d.name.clone().unwrap_or_default(),
                unit: d
                    .counter
                    .as_ref()
                    .and_then(|c| c.unit_name.clone())
                    .unwrap_or_default(),
                group,
                values: values.remove(&uuid).unwrap_or_default(),
            }
        })
        .collect()
}

/// The flow ids events start (`flow_ids`) and end (`terminating_flow_ids`), each sorted.
pub fn flows(bytes: &[u8]) -> (Vec<u64>, Vec<u64>) {
    let trace =
        <pb::Trace as prost::Message>::decode(bytes).expect("a valid perfetto.protos.Trace");
    let (mut starts, mut ends) = (Vec::new(), Vec::new());
    for e in trace.packet.iter().filter_map(|p| p.track_event.as_ref()) {
        starts.extend(&e.flow_ids);
        ends.extend(&e.terminating_flow_ids);
    }
    starts.sort_unstable();
    ends.sort_unstable();
    (starts, ends)
}
