//! `processes`: the traced processes, whether each stream was read whole, and how it ended (a crash at a fatal
//! signal among them).

use super::counters;
use super::stream::StreamInfo;
use super::{Analysis, Cell, DuplicateRank, Table, count};
use crate::record::EndReason;

impl Analysis {
    /// Refuses a rank traced twice (two streams of processes with device work and one rank number, in one file or
    /// two): every report would count its time twice. [`Job::check`](super::Job::check) says the same for the
    /// job-wide reports; this is for the others, which keep no [`Job`](super::Job).
    pub fn check_ranks(&self) -> Result<(), DuplicateRank> {
        super::job::first_duplicate_rank(
            self.streams
                .iter()
                .filter(|(_, s)| !s.is_counters() && !s.ops.is_empty())
                .filter_map(|(key, s)| Some((*key, s.pid, s.info.as_ref()?))),
        )
    }

    /// `processes`: every traced process with its host, rank, whether its stream is complete and how it ended
    /// (`End`: `exit`, `tracing stopped`, `signal 11 (SIGSEGV)`; empty without an end record).
    pub fn processes(&self) -> Table {
        let mut t = Table::new(
            "processes",
            "Traced Processes",
            vec![
                "File", "Stream", "PID", "Host", "Rank", "Records", "Dropped", "Complete", "End",
                "Command",
            ],
        );
        let mut counter_streams = 0u64;
        let (mut at_signal, mut ran_on) = (0u64, 0u64);
        for (key, s) in &self.streams {
            if s.is_counters() {
                counter_streams += 1;
                continue;
            }
            let (host, rank) = s.info.as_ref().map_or((String::new(), String::new()), |i| {
                (i.host.clone(), i.rank_label())
            });
            if s.ended
                .as_ref()
                .is_some_and(|e| matches!(e.reason, EndReason::Signal(_)))
            {
                at_signal += 1;
                ran_on += u64::from(s.after_end() > 0);
            }
            t.rows.push(vec![
                Cell::Int(u64::from(key.0)),
                Cell::Int(u64::from(key.1)),
                Cell::Int(u64::from(s.pid)),
                Cell::Text(host),
                Cell::Text(rank),
                Cell::Int(s.records),
                Cell::Int(s.dropped),
                Cell::Text(complete(s)),
                Cell::Text(end(s)),
                Cell::Text(s.command.clone()),
            ]);
        }
        if at_signal > 0 {
            t.notes.push(format!(
                "{} at a fatal signal (End): what {} recorded until then was flushed, but its work still in \
                 flight (kernels queued or running, calls not yet returned) has no record",
                count(at_signal, "stream ended", "streams ended"),
                if at_signal == 1 {
                    "its process"
                } else {
                    "each process"
                }
            ));
        }
        if ran_on > 0 {
            t.notes.push(if ran_on == 1 {
                "1 stream has records after its end record (the process handled the signal and ran on): they \
                 count in every report, but its end record does not count them"
                    .to_string()
            } else {
                format!(
                    "{ran_on} streams have records after their end record (the processes handled the signal and \
                     ran on): they count in every report, but their end records do not count them"
                )
            });
        }
        if counter_streams > 0 {
            t.notes.push(format!(
                "{} the tracer's device counters, not {} (see {})",
                count(counter_streams, "stream holds", "streams hold"),
                if counter_streams == 1 {
                    "a traced process"
                } else {
                    "traced processes"
                },
                counters::REPORT
            ));
        }
        // Processes of one host boot share one clock: only other hosts (or boots) are moved, and said so.
        if let Some(reference) = self.alignment.reference() {
            for d in self.alignment.domains().iter().filter(|d| *d != reference) {
                t.notes.push(d.note(reference));
            }
        }
        if self.inverted > 0 {
            t.notes.push(format!(
                "{} before {} (a kernel, copy, set, graph launch, call or synchronisation): counted as 0 ns in \
                 every report",
                count(self.inverted, "record ended", "records ended"),
                if self.inverted == 1 { "it started" } else { "they started" }
            ));
        }
        if self.errors > 0 {
            t.notes.push(format!(
                "{} while reading (reported on stderr)",
                count(self.errors, "error", "errors")
            ));
        }
        t
    }
}

/// The `Complete` column: whether every record the stream's end record counted was read.
fn complete(s: &StreamInfo) -> String {
    match &s.ended {
        Some(e) if e.records + 1 == s.records_at_end => "yes".to_string(),
        Some(e) => format!(
            "{} of {} records",
            s.records_at_end.saturating_sub(1),
            e.records
        ),
        None => match s.unread {
            // The trace file ends early: the process may well have finished.
            Some(why) => format!("unknown ({why}: its end was not read)"),
            None => "no (no end record: crashed or killed?)".to_string(),
        },
    }
}

/// The `End` column: why the stream ended, and the records read after its end record; empty without one.
fn end(s: &StreamInfo) -> String {
    match (&s.ended, s.after_end()) {
        (None, _) => String::new(),
        (Some(e), 0) => e.reason.to_string(),
        (Some(e), after) => format!(
            "{}, {} after it",
            e.reason,
            count(after, "record", "records")
        ),
    }
}
