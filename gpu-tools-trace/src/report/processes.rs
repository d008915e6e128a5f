//! `processes`: the traced processes, and whether each stream was read whole.

use super::counters;
use super::{Analysis, Cell, DuplicateRank, Table, count};

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

    /// `processes`: every traced process with its host, rank and whether its stream is complete.
    pub fn processes(&self) -> Table {
        let mut t = Table::new(
            "processes",
            "Traced Processes",
            vec![
                "File", "Stream", "PID", "Host", "Rank", "Records", "Dropped", "Complete",
                "Command",
            ],
        );
        let mut counter_streams = 0u64;
        for (key, s) in &self.streams {
            if s.is_counters() {
                counter_streams += 1;
                continue;
            }
            let (host, rank) = s.info.as_ref().map_or((String::new(), String::new()), |i| {
                (i.host.clone(), i.rank_label())
            });
            let complete = match &s.ended {
                Some(e) if e.records + 1 == s.records => "yes".to_string(),
                Some(e) => format!("{} of {} records", s.records.saturating_sub(1), e.records),
                None => match s.unread {
                    // The trace file ends early: the process may well have finished.
                    Some(why) => format!("unknown ({why}: its end was not read)"),
                    None => "no (no end record: crashed or killed?)".to_string(),
                },
            };
            t.rows.push(vec![
                Cell::Int(u64::from(key.0)),
                Cell::Int(u64::from(key.1)),
                Cell::Int(u64::from(s.pid)),
                Cell::Text(host),
                Cell::Text(rank),
                Cell::Int(s.records),
                Cell::Int(s.dropped),
                Cell::Text(complete),
                Cell::Text(s.command.clone()),
            ]);
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
