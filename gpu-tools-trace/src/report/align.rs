//! Putting the streams of several hosts on one timeline.
//!
//! Every stream's timestamps are on its host's `CLOCK_MONOTONIC`. Processes of one host (same host name and boot
//! id: a *clock domain*) share that clock, so their records line up exactly as they are. Between hosts the
//! monotonic clocks are unrelated; each stream carries [`ClockAnchor`]s (its monotonic clock and the wall clock,
//! `CLOCK_REALTIME`, read together), and a domain is shifted by the difference between its wall-clock offset and
//! the reference domain's (the first one seen).
//!
//! **Error bound.** Within a domain: none (one clock). Between domains, a timestamp's error is at most
//! `wall-clock disagreement between the two hosts + reading uncertainty of both anchors + drift`, where the
//! reading uncertainty is the width of the monotonic readings around each wall-clock reading (reported, typically
//! well under a microsecond), the drift is how far the wall clock moved against the monotonic clock during the run
//! (NTP slewing; reported from the first and last anchor of each stream), and the disagreement between hosts is
//! whatever their time synchronisation leaves: typically below 1 ms with NTP on one network, below 1 µs with PTP.
//! The alignment cannot measure that last term: it is only as good as the hosts' clocks.

use std::collections::HashMap;

use crate::{ClockAnchor, ProcessInfo};

/// One clock domain: the processes of one host boot.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct ClockDomain {
    /// Host name.
    pub host: String,
    /// Boot id (empty where the streams did not say).
    pub boot_id: String,
    /// What is added to this domain's timestamps to put them on the reference domain's clock, ns.
    pub shift: i64,
    /// Reading uncertainty of the anchor used, ns (`u32::MAX` where the domain had no anchor and was not shifted).
    pub uncertainty: u32,
    /// Largest drift of the wall clock against the monotonic clock seen over one stream of the domain, ns.
    pub drift: u64,
    /// Streams in the domain.
    pub streams: usize,
}

/// Which domain each stream belongs to, and each domain's shift.
#[derive(Debug, Clone, Default)]
pub struct Alignment {
    domains: Vec<ClockDomain>,
    /// The wall-clock offset (`realtime - monotonic`) each domain was shifted by.
    offsets: Vec<Option<i128>>,
    by_key: HashMap<(String, String), usize>,
    stream_domain: HashMap<(u32, u32), usize>,
    first_anchor: HashMap<(u32, u32), ClockAnchor>,
    /// Moves beyond the anchors, by host and boot id ([`Alignment::correct`]).
    corrections: HashMap<(String, String), i64>,
    /// The correction of each domain, as `corrections` gives it.
    domain_correction: Vec<i64>,
    /// The domain whose anchor came first: every shift is taken against it.
    reference: Option<usize>,
}

impl Alignment {
    /// No stream yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Notes the host of a stream (`file`, `stream`), from its [`ProcessInfo`].
    pub fn process_info(&mut self, file: u32, stream: u32, info: &ProcessInfo) {
        let key = (info.host.clone(), info.boot_id.clone());
        let d = match self.by_key.get(&key) {
            Some(&d) => d,
            None => {
                self.domains.push(ClockDomain {
                    host: info.host.clone(),
                    boot_id: info.boot_id.clone(),
                    shift: 0,
                    uncertainty: u32::MAX,
                    drift: 0,
                    streams: 0,
                });
                self.offsets.push(None);
                self.domain_correction
                    .push(self.corrections.get(&key).copied().unwrap_or(0));
                self.by_key.insert(key, self.domains.len() - 1);
                self.domains.len() - 1
            }
        };
        if self.stream_domain.insert((file, stream), d).is_none() {
            self.domains[d].streams += 1;
        }
        if let Some(a) = self.first_anchor.get(&(file, stream)).copied() {
            self.anchor_domain(d, &a);
        }
    }

    /// Notes a clock anchor of a stream. The first anchor of a domain fixes its shift; later ones measure drift.
    pub fn anchor(&mut self, file: u32, stream: u32, anchor: &ClockAnchor) {
        match self.first_anchor.get(&(file, stream)) {
            None => {
                self.first_anchor.insert((file, stream), *anchor);
            }
            Some(first) => {
                let wall = i128::from(anchor.realtime) - i128::from(first.realtime);
                let mono = i128::from(anchor.monotonic) - i128::from(first.monotonic);
                let drift = u64::try_from((wall - mono).unsigned_abs()).unwrap_or(u64::MAX);
                if let Some(&d) = self.stream_domain.get(&(file, stream)) {
                    self.domains[d].drift = self.domains[d].drift.max(drift);
                }
                return;
            }
        }
        if let Some(&d) = self.stream_domain.get(&(file, stream)) {
            self.anchor_domain(d, anchor);
        }
    }

    fn anchor_domain(&mut self, d: usize, anchor: &ClockAnchor) {
        if self.offsets[d].is_some() {
            return;
        }
        let offset = anchor.offset();
        self.offsets[d] = Some(offset);
        self.domains[d].uncertainty = anchor.uncertainty;
        // The first domain anchored stays the reference: a domain seen earlier but anchored later is moved to it,
        // as the shifts already given (and applied by a streamed export) were taken against it.
        let reference = *self.reference.get_or_insert(d);
        let shift = offset - self.offsets[reference].unwrap_or(offset);
        self.domains[d].shift =
            i64::try_from(shift).unwrap_or(if shift < 0 { i64::MIN } else { i64::MAX });
    }

    /// Moves the streams of a host (and boot) by `ns` beyond what their clock anchors say: the correction
    /// [`Job::collective_alignment`](super::Job::collective_alignment) found on the job's collectives. Given before
    /// or after the host's streams are read; a second call for one host replaces the first.
    pub fn correct(&mut self, host: &str, boot_id: &str, ns: i64) {
        let key = (host.to_string(), boot_id.to_string());
        if let Some(&d) = self.by_key.get(&key) {
            self.domain_correction[d] = ns;
        }
        self.corrections.insert(key, ns);
    }

    /// What to add to the timestamps of a stream (0 for a stream of the reference domain, or one whose host is
    /// not known), with the host's correction.
    pub fn shift(&self, file: u32, stream: u32) -> i64 {
        self.stream_domain.get(&(file, stream)).map_or(0, |&d| {
            self.domains[d]
                .shift
                .saturating_add(self.domain_correction[d])
        })
    }

    /// `t` of a stream on the common timeline (saturating at 0 and `u64::MAX`).
    pub fn apply(&self, file: u32, stream: u32, t: u64) -> u64 {
        let s = self.shift(file, stream);
        if s >= 0 {
            t.saturating_add(s as u64)
        } else {
            t.saturating_sub(s.unsigned_abs())
        }
    }

    /// The domains seen, in order. The reference, the domain the others are moved to, is the first anchored: the
    /// first seen unless another was anchored before it.
    pub fn domains(&self) -> &[ClockDomain] {
        &self.domains
    }

    /// The domain the others were moved to: the first anchored; the first seen where none was.
    pub(crate) fn reference(&self) -> Option<&ClockDomain> {
        self.domains.get(self.reference.unwrap_or(0))
    }
}

impl ClockDomain {
    /// Whether the domain's streams had a clock anchor (without one they were left as they are).
    pub fn anchored(&self) -> bool {
        self.uncertainty != u32::MAX
    }

    /// How this domain was put on `reference`'s clock, in words: `host b's timestamps moved by +731.0 s to align
    /// with host a (clock anchors, ±0.4 µs, plus whatever the hosts' wall clocks disagree)`. Two boots of one host
    /// name each by its boot id.
    pub fn note(&self, reference: &ClockDomain) -> String {
        let same_host = self.host == reference.host;
        let name = |d: &ClockDomain| {
            if !same_host {
                return format!("host {}", d.host);
            }
            match d.boot_id.get(..8).filter(|_| !d.boot_id.is_empty()) {
                Some(short) => format!("host {} (boot {short})", d.host),
                None if d.boot_id.is_empty() => format!("host {} (boot not recorded)", d.host),
                None => format!("host {} (boot {})", d.host, d.boot_id),
            }
        };
        let (me, other) = (name(self), name(reference));
        if !self.anchored() {
            return format!(
                "{me}'s timestamps were not moved: its streams have no clock anchor, so they are not aligned with \
                 {other}'s"
            );
        }
        let mut error = u64::from(self.uncertainty) + self.drift + reference.drift;
        if reference.anchored() {
            error += u64::from(reference.uncertainty);
        }
        let why = if same_host {
            "the clock restarts at boot; aligned on the wall clock"
        } else {
            "clock anchors"
        };
        let rest = if same_host {
            ""
        } else {
            ", plus whatever the hosts' wall clocks disagree"
        };
        format!(
            "{me}'s timestamps moved by {} to align with {other} ({why}, ±{}{rest})",
            signed_duration(self.shift),
            error_bound(error)
        )
    }
}

/// `+731.0 s`, `-12.5 ms`, `+3.2 µs`, `+800 ns`.
pub(super) fn signed_duration(ns: i64) -> String {
    let sign = if ns < 0 { "-" } else { "+" };
    format!("{sign}{}", duration(ns.unsigned_abs()))
}

/// An error bound: microseconds below a millisecond (`0.4 µs`), else as [`duration`].
fn error_bound(ns: u64) -> String {
    if ns < 1_000_000 {
        format!("{:.1} µs", ns as f64 / 1e3)
    } else {
        duration(ns)
    }
}

/// `731.0 s`, `12.5 ms`, `3.2 µs`, `800 ns`.
pub(super) fn duration(ns: u64) -> String {
    let f = ns as f64;
    if ns >= 1_000_000_000 {
        format!("{:.1} s", f / 1e9)
    } else if ns >= 1_000_000 {
        format!("{:.1} ms", f / 1e6)
    } else if ns >= 1_000 {
        format!("{:.1} µs", f / 1e3)
    } else {
        format!("{ns} ns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(host: &str, boot: &str) -> ProcessInfo {
        ProcessInfo {
            host: host.into(),
            boot_id: boot.into(),
            labels: vec![],
        }
    }

    #[test]
    fn one_host_is_never_shifted_and_two_hosts_meet_on_the_wall_clock() {
        let mut a = Alignment::new();
        // Host A: monotonic 1_000 at wall 10_000_000.
        a.process_info(0, 0, &info("a", "x"));
        a.anchor(
            0,
            0,
            &ClockAnchor {
                monotonic: 1_000,
                realtime: 10_000_000,
                uncertainty: 40,
            },
        );
        // A second process of host A with another (noisier) anchor: same clock, no shift.
        a.process_info(0, 1, &info("a", "x"));
        a.anchor(
            0,
            1,
            &ClockAnchor {
                monotonic: 5_000,
                realtime: 10_004_100,
                uncertainty: 90,
            },
        );
        // Host B: monotonic 700_000 at wall 10_000_500.
        a.anchor(
            1,
            0,
            &ClockAnchor {
                monotonic: 700_000,
                realtime: 10_000_500,
                uncertainty: 30,
            },
        );
        a.process_info(1, 0, &info("b", "y"));
        assert_eq!(a.shift(0, 0), 0);
        assert_eq!(a.shift(0, 1), 0);
        // B's 700_000 is wall 10_000_500, which is A's monotonic 1_500.
        assert_eq!(a.apply(1, 0, 700_000), 1_500);
        assert_eq!(a.domains().len(), 2);
        assert_eq!(a.domains()[1].uncertainty, 30);
        // A later anchor of B whose wall clock moved 100 ns more than its monotonic clock: drift.
        a.anchor(
            1,
            0,
            &ClockAnchor {
                monotonic: 1_700_000,
                realtime: 11_000_600,
                uncertainty: 30,
            },
        );
        assert_eq!(a.domains()[1].drift, 100);
        // A stream of an unknown host is left as it is.
        assert_eq!(a.apply(7, 7, 42), 42);
    }

    fn domain(host: &str, boot: &str, shift: i64, uncertainty: u32, drift: u64) -> ClockDomain {
        ClockDomain {
            host: host.into(),
            boot_id: boot.into(),
            shift,
            uncertainty,
            drift,
            streams: 1,
        }
    }

    #[test]
    fn notes_say_what_moved_in_words() {
        let a = domain("a", "1111aaaa-0000", 0, 150, 0);
        let b = domain("b", "2222bbbb-0000", 731_013_545_862, 200, 50);
        assert_eq!(
            b.note(&a),
            "host b's timestamps moved by +731.0 s to align with host a (clock anchors, ±0.4 µs, plus whatever \
             the hosts' wall clocks disagree)"
        );
        let back = domain("b", "2222bbbb-0000", -12_500_000, 200, 0);
        assert!(
            back.note(&a).contains("moved by -12.5 ms"),
            "{}",
            back.note(&a)
        );
        // Two boots of one host: each named by its boot id, and why a shift is needed.
        let vm1 = domain("vm", "5e1c0a9f-1234", 0, 100, 0);
        let vm2 = domain("vm", "0a9f5e1c-5678", 731_013_545_862, 100, 0);
        assert_eq!(
            vm2.note(&vm1),
            "host vm (boot 0a9f5e1c)'s timestamps moved by +731.0 s to align with host vm (boot 5e1c0a9f) (the \
             clock restarts at boot; aligned on the wall clock, ±0.2 µs)"
        );
        let unknown = domain("vm", "", 5_000, 100, 0);
        assert!(
            unknown
                .note(&vm1)
                .starts_with("host vm (boot not recorded)'s timestamps moved by +5.0 µs"),
            "{}",
            unknown.note(&vm1)
        );
        // No anchor: not moved, and said so.
        let c = domain("c", "x", 0, u32::MAX, 0);
        assert_eq!(
            c.note(&a),
            "host c's timestamps were not moved: its streams have no clock anchor, so they are not aligned with \
             host a's"
        );
    }

    #[test]
    fn a_host_anchored_after_a_later_seen_host_is_still_aligned_with_it() {
        let mut a = Alignment::new();
        // Host a is seen first, but its anchor comes after host b's (streams interleaved in one file).
        a.process_info(0, 0, &info("a", "x"));
        a.process_info(0, 1, &info("b", "y"));
        a.anchor(
            0,
            1,
            &ClockAnchor {
                monotonic: 700_000,
                realtime: 10_000_500,
                uncertainty: 30,
            },
        );
        a.anchor(
            0,
            0,
            &ClockAnchor {
                monotonic: 1_000,
                realtime: 10_000_000,
                uncertainty: 40,
            },
        );
        // b's 700_000 is wall 10_000_500, which is a's monotonic 1_500.
        assert_eq!(
            a.apply(0, 1, 700_000) as i128 - a.apply(0, 0, 1_500) as i128,
            0
        );
        // The note names the host the others were aligned with, and by how much they moved.
        // The reference the notes name is the host not moved.
        assert_eq!(
            a.reference().map(|d| (d.host.as_str(), d.shift)),
            Some(("b", 0))
        );
    }

    #[test]
    fn one_host_and_boot_is_one_domain_however_many_files() {
        let mut a = Alignment::new();
        for file in 0..3 {
            a.process_info(file, 0, &info("vm", "boot-1"));
            a.anchor(
                file,
                0,
                &ClockAnchor {
                    monotonic: 1_000 * u64::from(file + 1),
                    realtime: 731_013_545_862 * u64::from(file + 1),
                    uncertainty: 40,
                },
            );
        }
        assert_eq!(a.domains().len(), 1, "nothing to shift, nothing to say");
        assert_eq!((a.shift(1, 0), a.shift(2, 0)), (0, 0));
    }
}
