//! Turns CUPTI batches into the trace stream and sends it: one lock around the converter, the encoder and the
//! sink, so that a name frame always precedes its first use in the bytes sent.

use std::sync::{Mutex, MutexGuard};

use gpu_tools::cupti::TraceConverter;
use gpu_tools::cupti::activity::ActivityBatch;
use gpu_tools::trace::{
    DroppedRecords, Encoder, EndReason, Notice, NoticeLevel, ProcessEnd, Record, StreamHeader,
};

use crate::sink::{SendError, Sink};

struct State {
    encoder: Encoder,
    converter: TraceConverter,
    /// Records not carried (kinds the format has no record for, or records that did not decode).
    skipped: u64,
    /// Dropped records already sent with their batch.
    dropped_sent: u64,
    /// The stream failed: nothing more is sent.
    failed: bool,
}

/// The stream of one traced process.
pub struct Writer {
    sink: Sink,
    state: Mutex<State>,
}

/// What the stream's end record says, from the tracer's final report.
#[derive(Debug, Default, Clone, Copy)]
pub struct EndCounts {
    /// Records CUPTI reported dropped in all.
    pub dropped: u64,
    /// Batches lost to a panic while they were written.
    pub callback_panics: u64,
}

impl Writer {
    /// A stream to `sink` starting with `header` (sent with the first record).
    pub fn new(sink: Sink, header: &StreamHeader) -> Writer {
        Writer {
            sink,
            state: Mutex::new(State {
                encoder: Encoder::new(header),
                converter: TraceConverter::new(),
                skipped: 0,
                dropped_sent: 0,
                failed: false,
            }),
        }
    }

    /// The state, or `None` in a forked child: it must not touch a lock another thread of its parent may have
    /// held at the fork.
    fn lock(&self) -> Option<MutexGuard<'_, State>> {
        if !self.sink.is_owner() {
            return None;
        }
        Some(self.state.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Converts and sends one batch of CUPTI records (on CUPTI's thread, or the one that flushes).
    pub fn write_batch(&self, batch: &ActivityBatch<'_>) {
        let Some(mut st) = self.lock() else { return };
        let st = &mut *st;
        for record in batch.records() {
            match record {
                Ok(activity) => match st.converter.convert(&activity) {
                    Some(r) => st.encoder.push(&r),
                    None => st.skipped += 1,
                },
                Err(e) => {
                    st.skipped += 1;
                    log::debug!("activity record skipped: {e}");
                }
            }
        }
        let dropped = batch.dropped_records();
        if dropped > 0 {
            st.dropped_sent += dropped;
            // CUPTI reports drops for its global queue: no context, stream 0.
            st.encoder.push(&Record::Dropped(DroppedRecords {
                context: u32::MAX,
                stream: 0,
                count: dropped,
            }));
        }
        self.send(st);
    }

    /// Sends one record of the library's own (start, notice).
    pub fn push(&self, record: &Record) {
        let Some(mut st) = self.lock() else { return };
        st.encoder.push(record);
        self.send(&mut st);
    }

    /// Sends a notice (and logs it).
    pub fn notice(&self, level: NoticeLevel, text: String) {
        match level {
            NoticeLevel::Error => log::error!("{text}"),
            NoticeLevel::Warning => log::warn!("{text}"),
            _ => log::info!("{text}"),
        }
        self.push(&Record::Notice(Notice { level, text }));
    }

    /// Sends the end record with the counts, and ends the stream.
    pub fn end(&self, reason: EndReason, counts: EndCounts, time: u64) {
        let Some(mut st) = self.lock() else { return };
        // Drops CUPTI reported after the last batch (its final count at stop).
        let late = counts.dropped.saturating_sub(st.dropped_sent);
        if late > 0 {
            st.dropped_sent += late;
            st.encoder.push(&Record::Dropped(DroppedRecords {
                context: u32::MAX,
                stream: 0,
                count: late,
            }));
        }
        let records = st.encoder.records();
        let end = ProcessEnd {
            time,
            reason,
            records,
            dropped: st.dropped_sent,
            skipped: st.skipped,
            callback_panics: counts.callback_panics,
        };
        st.encoder.push(&Record::ProcessEnd(end));
        self.send(&mut st);
        self.sink.finish();
        log::debug!(
            "stream ended: {records} records, {} dropped, {} skipped",
            st.dropped_sent,
            st.skipped
        );
    }

    fn send(&self, st: &mut State) {
        if !st.failed && !st.encoder.bytes().is_empty() {
            match self.sink.send(st.encoder.bytes()) {
                Ok(()) => {}
                Err(SendError::ForkedChild) => {}
                Err(e) => {
                    st.failed = true;
                    log::error!(
                        "writing the trace to {} failed, nothing more is sent: {e}",
                        self.sink.describe()
                    );
                }
            }
        }
        st.encoder.clear();
    }
}
