//! Streamed exports of a recorded trace for timeline viewers: Perfetto's native protobuf format
//! ([`PerfettoWriter`]) and the Chrome trace JSON format ([`ChromeWriter`]), both written to any `io::Write` as
//! the records are read, never holding the trace (gzip, if wanted, is the caller's: wrap the writer).
//!
//! [`Timeline`] turns records into tracks and slices, the same for both formats: a process group per traced
//! process (named with its command, host and rank), under it a track per host thread and API (runtime, driver,
//! NVTX), a group per GPU with a track per stream, and a track for synchronisation and one for CUPTI's overhead.
//! Slices that overlap on one track (graph nodes running concurrently on one stream, start/end NVTX ranges) go to
//! extra lanes of that track, so that every track nests properly. Arrows (flows) lead from each launch or copy
//! call to the device work it issued, whichever of the two records comes first. Timestamps are put on one timeline across hosts ([`report::Alignment`]).
//!
//! A counter stream ([`counters`](crate::counters)) becomes a group per device, `GPU N counters [host]`, with a
//! counter track per metric (`SM active (%)`, `DRAM read (B/s)`, ...) on the kernels' time base, and a `counter
//! gaps` track where samples were lost. Timeline formats have no "no value" for a counter: where nothing is known
//! (a gap, after the last sample) the track reads 0 and the gap's slice says so. Perfetto gets counter track
//! descriptors and counter events, Chrome JSON `"C"` events (one counter per metric, its value under `value`).
//!
//! ```no_run
//! use gpu_tools_trace::export::{PerfettoWriter, Timeline};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let out = std::io::BufWriter::new(std::fs::File::create("run.perfetto-trace")?);
//! let mut timeline = Timeline::new(PerfettoWriter::new(out));
//! let input = std::io::BufReader::new(std::fs::File::open("run.gputrace")?);
//! for error in timeline.read(0, input)? {
//!     eprintln!("{error}");
//! }
//! timeline.finish()?;
//! # Ok(()) }
//! ```
//!
//! [`report::Alignment`]: super::report::Alignment

mod chrome;
mod perfetto;
mod timeline;

pub use chrome::ChromeWriter;
pub use perfetto::PerfettoWriter;
pub use timeline::{
    Arg, CounterTrack, CounterValue, Slice, Timeline, TimelineSink, Track, TrackProcess,
};
