//! The findings on the Perfetto timeline (`Timeline::annotate`): a track per finding under the GPU's group, a
//! slice over each of its time ranges (on the timeline's clock), its estimate, basis and advice as arguments.

use gpu_tools_testing::perfetto::pb;
use gpu_tools_trace::export::{PerfettoWriter, Timeline};

use super::diagnose;
use super::program::{Program, compute};

#[test]
fn each_finding_is_a_track_of_its_gpu_with_a_slice_per_range() {
    let mut p = Program::new(4242);
    for _ in 0..20 {
        compute(&mut p);
        p.sync("cudaDeviceSynchronize");
        p.host(300_000);
    }
    let file = p.file();
    let d = diagnose(std::slice::from_ref(&file));
    let f = &d.findings[0];
    assert_eq!(f.spans.len(), 19);

    let mut t = Timeline::new(PerfettoWriter::new(Vec::new()));
    assert!(t.read(0, &file[..]).unwrap().is_empty());
    t.annotate(&d).unwrap();
    let bytes = t.finish().unwrap().into_inner().unwrap();
    let trace = <pb::Trace as prost::Message>::decode(&bytes[..]).expect("a Perfetto trace");
    let tracks: Vec<&pb::TrackDescriptor> = trace
        .packet
        .iter()
        .filter_map(|p| p.track_descriptor.as_ref())
        .collect();
    let finding = tracks
        .iter()
        .find(|t| t.name.as_deref() == Some("finding 1: sync_stall"))
        .expect("the finding's track");
    // Under the GPU's group.
    let parent = tracks
        .iter()
        .find(|t| t.uuid == finding.parent_uuid)
        .expect("its parent");
    assert!(
        parent
            .name
            .as_deref()
            .is_some_and(|n| n.starts_with("GPU 0")),
        "{parent:?}"
    );
    // A slice (begin and end) per range, at the range's times (one host: the timeline's clock is the stream's).
    let events: Vec<(&pb::TracePacket, &pb::TrackEvent)> = trace
        .packet
        .iter()
        .filter_map(|p| Some((p, p.track_event.as_ref()?)))
        .filter(|(_, e)| e.track_uuid == finding.uuid)
        .collect();
    assert_eq!(events.len(), 2 * f.spans.len());
    assert_eq!(events[0].0.timestamp, Some(f.spans[0].start));
    assert_eq!(events[1].0.timestamp, Some(f.spans[0].end));
    let args: Vec<(String, Option<u64>)> = events[0]
        .1
        .debug_annotations
        .iter()
        .map(|a| (a.name.clone().unwrap_or_default(), a.uint_value))
        .collect();
    assert!(
        args.contains(&("estimate_ns".to_string(), Some(f.cost))),
        "{args:?}"
    );
    assert!(args.iter().any(|a| a.0 == "basis") && args.iter().any(|a| a.0 == "advice"));
}
