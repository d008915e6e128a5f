//! The trace stream of one process: a Unix socket or a file named by `gpu_tools_injection::settings`, written only by the
//! process that opened it (a forked child writes nothing).

use std::sync::{Arc, Mutex};

use gpu_tools::rocprofiler_sdk::{Agent, Batch, SdkLibrary};
use gpu_tools::trace::{
    DroppedRecords, Encoder, EndReason, ProcessEnd, ProcessStart, Record, StreamHeader, ThreadIds,
    TimestampClock,
};
use gpu_tools_injection::settings::Destination;
use gpu_tools_injection::sink::Sink;

use crate::convert::Converter;
use crate::roctx::{Notes, Source};

struct State {
    encoder: Encoder,
    converter: Converter,
    sink: Sink,
    skipped: u64,
    dropped: u64,
    failed: bool,
    ended: bool,
}

/// The stream, shared by the buffer callback, the code-object callback and the finalisation.
pub struct Stream {
    lib: &'static SdkLibrary,
    owner: u32,
    state: Mutex<State>,
}

impl Stream {
    /// Opens `destination` and writes the stream's start. `marker_calls`: ROCTx calls are written as API calls.
    pub fn open(
        lib: &'static SdkLibrary,
        agents: Vec<Agent>,
        destination: &Destination,
        marker_calls: bool,
    ) -> std::io::Result<Stream> {
        let pid = std::process::id();
        let sink = match destination {
            Destination::Socket(s) => Sink::connect(s)?,
            // `%p` and `%h` expanded as the CUDA library does: one sink for both.
            Destination::File(f) => Sink::create_file(f)?,
        };
        let (major, minor, patch) = lib.version();
        // The SDK's timestamps are on its own clock (`rocprofiler_get_timestamp`).
        // rocprofiler-sdk's thread ids are the kernel's (`gettid()`).
        let header = StreamHeader::new(
            pid,
            major * 10000 + minor * 100 + patch,
            TimestampClock::Unspecified,
        )
        .with_thread_ids(ThreadIds::Linux);
        let stream = Stream {
            lib,
            owner: pid,
            state: Mutex::new(State {
                encoder: Encoder::new(&header),
                converter: Converter::new(lib, &agents, marker_calls),
                sink,
                skipped: 0,
                dropped: 0,
                failed: false,
                ended: false,
            }),
        };
        let command = gpu_tools::linux::procfs::Process::current()
            .command_line_text()
            .unwrap_or_default();
        stream.push(&Record::ProcessStart(ProcessStart {
            pid,
            parent_pid: 0,
            time: lib.timestamp().unwrap_or(0),
            command,
        }));
        Ok(stream)
    }

    fn lock(&self) -> Option<std::sync::MutexGuard<'_, State>> {
        // A forked child must not touch a lock its parent's threads may have held at the fork.
        (std::process::id() == self.owner)
            .then(|| self.state.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn push(&self, record: &Record) {
        let Some(mut st) = self.lock() else { return };
        st.encoder.push(record);
        send(&mut st);
    }

    /// Remembers a kernel's name.
    pub fn kernel_symbol(&self, id: u64, name: &str) {
        if let Some(mut st) = self.lock() {
            st.converter.kernel_symbol(id, name);
        }
    }

    /// Writes ROCTx ranges and marks from `source`'s records, named by `notes`.
    pub fn follow_roctx(&self, source: Source, notes: Arc<Notes>) {
        if let Some(mut st) = self.lock() {
            st.converter.follow_roctx(source, notes);
        }
    }

    /// Converts and sends one batch.
    pub fn write_batch(&self, batch: &Batch<'_>) {
        let Some(mut st) = self.lock() else { return };
        let st = &mut *st;
        for record in batch.records() {
            let encoder = &mut st.encoder;
            let converted = record
                .ok()
                .is_some_and(|r| st.converter.convert(&r, &mut |t| encoder.push(&t)));
            if !converted {
                st.skipped += 1;
            }
        }
        if batch.dropped_records() > 0 {
            st.dropped += batch.dropped_records();
            st.encoder.push(&Record::Dropped(DroppedRecords {
                context: u32::MAX,
                stream: u32::MAX,
                count: batch.dropped_records(),
            }));
        }
        send(st);
    }

    /// Ends the stream with its counts (once).
    pub fn end(&self, dropped: u64, callback_panics: u64) {
        let time = self.lib.timestamp().unwrap_or(0);
        let Some(mut st) = self.lock() else { return };
        if st.ended {
            return;
        }
        st.ended = true;
        let st = &mut *st;
        let encoder = &mut st.encoder;
        st.converter.finish(&mut |t| encoder.push(&t));
        let late = dropped.saturating_sub(st.dropped);
        if late > 0 {
            st.dropped += late;
            st.encoder.push(&Record::Dropped(DroppedRecords {
                context: u32::MAX,
                stream: u32::MAX,
                count: late,
            }));
        }
        let end = ProcessEnd {
            time,
            reason: EndReason::Exit,
            records: st.encoder.records(),
            dropped: st.dropped,
            skipped: st.skipped,
            callback_panics,
        };
        st.encoder.push(&Record::ProcessEnd(end));
        send(st);
        st.sink.finish();
    }
}

fn send(st: &mut State) {
    if !st.failed && !st.encoder.bytes().is_empty() {
        // The sink writes to a socket without SIGPIPE: a tracer that went away is an error, never a signal that
        // kills the traced program.
        if let Err(e) = st.sink.send(st.encoder.bytes()) {
            st.failed = true;
            log::error!("writing the trace failed, nothing more is sent: {e}");
        }
    }
    st.encoder.clear();
}
