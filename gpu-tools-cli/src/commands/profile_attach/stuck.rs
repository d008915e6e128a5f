//! A thread that sits inside the CUDA driver or CUPTI at every stop of `profile --pid`'s search for a quiet moment
//! (a long synchronisation, or a hang: on an H200 a job whose main thread waited in `cudaDeviceSynchronize` for a
//! hung kernel kept the search busy for its whole 20 s). Told after a few stops from a busy job whose threads pass
//! through the driver, so that the profile is refused at once, naming the thread, instead of at the search's end.
//!
//! The rule: a thread is stuck when it was found inside, at the same place (its innermost frame in the vendor code
//! in the same library), at the end of every one of [`STUCK_STOPS`] stops in a row spanning at least
//! [`STUCK_AFTER`], after its runs alone to leave. A thread found outside at one stop starts again from nothing:
//! a busy job whose thread is inside at some stops and not at others keeps the whole search. Once every thread
//! still inside has been found so at the end of the stop before, a stop's runs alone are cut to [`SHORT_DRAIN`]:
//! the first stop gave them the whole drain already.

use std::collections::BTreeMap;
use std::time::Duration;

/// Stops in a row, and the time they span, after which a thread found inside at the end of each is stuck.
pub(super) const STUCK_STOPS: u32 = 3;
pub(super) const STUCK_AFTER: Duration = Duration::from_secs(2);
/// How long a stop's runs alone last when every thread inside was found inside at the end of the stop before.
pub(super) const SHORT_DRAIN: Duration = Duration::from_millis(200);

/// Where a stopped thread was found inside the vendor code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Place {
    /// Its program counter is in this library (by file name): it runs there (a spinning synchronisation).
    Runs(String),
    /// A live frame of its stack returns into this library (the innermost one that does): it waits below it.
    Waits(String),
    /// It could not be shown to be outside (its stack unreadable or too deep): why.
    Unknown(String),
}

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Place::Runs(lib) => write!(f, "runs inside {lib}"),
            Place::Waits(lib) => write!(f, "waits inside {lib}"),
            Place::Unknown(why) => write!(f, "may be inside the CUDA driver or CUPTI ({why})"),
        }
    }
}

/// A thread found inside at the end of a stop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Sighting {
    pub tid: u32,
    /// Its name, as `/proc` gives it.
    pub name: String,
    pub place: Place,
}

/// A thread found inside at the end of each of the last stops.
#[derive(Debug, Clone)]
struct Streak {
    place: Place,
    name: String,
    /// When the first stop of the streak began, from the search's start.
    since: Duration,
    stops: u32,
}

/// A thread that is stuck inside, by the rule above.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Stuck {
    pub sighting: Sighting,
    pub stops: u32,
    /// From the start of the first of those stops to the end of the last.
    pub over: Duration,
}

impl Stuck {
    /// The refusal: the thread named, what it likely is, and what to use instead. `flight_recorder`: whether this
    /// attach leaves a recorder in the process.
    pub(super) fn refusal(&self, pid: u32, flight_recorder: bool) -> String {
        let s = &self.sighting;
        let recorder = if flight_recorder {
            "the flight recorder gpu-tools leaves in a process it attached to (the launches made since then that \
             have not finished, and the threads waiting)"
        } else {
            "a flight recorder an earlier attach left there (this one left none: --no-flight-recorder)"
        };
        format!(
            "process {pid}: thread {} ({}) {} at every stop ({} stops in {:.1} s; run alone, it did not leave): a long \
             synchronisation or a hang. Nothing was profiled, and the process runs on as it was. To see where it \
             waits, use `gpu-tools where {pid}`: the CUDA driver refuses the debugger in a process where CUPTI has \
             run, so it answers from {recorder}",
            s.tid,
            s.name,
            s.place,
            self.stops,
            self.over.as_secs_f64()
        )
    }
}

/// The threads found inside at the end of the last stops.
#[derive(Debug, Default)]
pub(super) struct Watch {
    streaks: BTreeMap<u32, Streak>,
}

impl Watch {
    /// Whether every thread of `tids` was found inside at the end of the stop before (so its runs alone may be cut
    /// short). False for none.
    pub(super) fn all_seen_before(&self, mut tids: impl Iterator<Item = u32>) -> bool {
        let mut any = false;
        let all = tids.all(|t| {
            any = true;
            self.streaks.contains_key(&t)
        });
        any && all
    }

    /// A stop that began at `began` and ended at `ended` (both from the search's start) left `inside` inside after
    /// their runs alone: each one's streak grows (or starts, at a new place), every other thread's ends. The first
    /// thread that is now stuck, if any.
    pub(super) fn stop_ended(
        &mut self,
        began: Duration,
        ended: Duration,
        inside: Vec<Sighting>,
    ) -> Option<Stuck> {
        let mut next = BTreeMap::new();
        for s in inside {
            let streak = match self.streaks.remove(&s.tid) {
                Some(mut old) if old.place == s.place => {
                    old.stops += 1;
                    old.name = s.name;
                    old
                }
                _ => Streak {
                    place: s.place,
                    name: s.name,
                    since: began,
                    stops: 1,
                },
            };
            next.insert(s.tid, streak);
        }
        self.streaks = next;
        self.streaks
            .iter()
            .find(|(_, k)| k.stops >= STUCK_STOPS && ended.saturating_sub(k.since) >= STUCK_AFTER)
            .map(|(&tid, k)| Stuck {
                sighting: Sighting {
                    tid,
                    name: k.name.clone(),
                    place: k.place.clone(),
                },
                stops: k.stops,
                over: ended.saturating_sub(k.since),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn at(tid: u32, lib: &str) -> Sighting {
        Sighting {
            tid,
            name: "python3".into(),
            place: Place::Waits(lib.into()),
        }
    }

    #[test]
    fn a_thread_inside_at_every_stop_is_stuck_after_three_stops_and_two_seconds() {
        let mut w = Watch::default();
        // The first stop drains for 2 s; the next ones are cut short.
        assert_eq!(
            w.stop_ended(ms(0), ms(2000), vec![at(42, "libcuda.so.1")]),
            None
        );
        assert!(w.all_seen_before([42].into_iter()));
        assert_eq!(
            w.stop_ended(ms(2001), ms(2201), vec![at(42, "libcuda.so.1")]),
            None
        );
        let stuck = w
            .stop_ended(ms(2202), ms(2402), vec![at(42, "libcuda.so.1")])
            .expect("stuck at the third stop");
        assert_eq!(stuck.sighting, at(42, "libcuda.so.1"));
        assert_eq!((stuck.stops, stuck.over), (3, ms(2402)));
        let text = stuck.refusal(7, true);
        assert!(
            text.starts_with(
                "process 7: thread 42 (python3) waits inside libcuda.so.1 at every stop (3 stops in 2.4 s"
            ),
            "{text}"
        );
        assert!(text.contains("a long synchronisation or a hang"), "{text}");
        assert!(text.contains("`gpu-tools where 7`"), "{text}");
        assert!(
            text.contains("the flight recorder gpu-tools leaves"),
            "{text}"
        );
        assert!(
            stuck
                .refusal(7, false)
                .contains("this one left none: --no-flight-recorder")
        );
    }

    #[test]
    fn three_quick_stops_are_not_enough_time() {
        let mut w = Watch::default();
        for i in 0..3 {
            assert_eq!(
                w.stop_ended(ms(i * 100), ms(i * 100 + 50), vec![at(42, "libcuda.so.1")]),
                None
            );
        }
        assert!(
            w.stop_ended(ms(2000), ms(2050), vec![at(42, "libcuda.so.1")])
                .is_some()
        );
    }

    #[test]
    fn a_thread_outside_at_one_stop_starts_again() {
        let mut w = Watch::default();
        w.stop_ended(ms(0), ms(2000), vec![at(42, "libcuda.so.1")]);
        w.stop_ended(ms(2001), ms(2201), vec![at(42, "libcuda.so.1")]);
        // Another thread inside at this stop's end: 42 left.
        w.stop_ended(ms(2202), ms(4202), vec![at(43, "libcupti.so.13")]);
        assert!(!w.all_seen_before([42].into_iter()));
        assert_eq!(
            w.stop_ended(ms(4203), ms(6203), vec![at(42, "libcuda.so.1")]),
            None
        );
        assert_eq!(
            w.stop_ended(ms(6204), ms(6404), vec![at(42, "libcuda.so.1")]),
            None
        );
        // Two threads taking turns, each inside at every other stop: neither is stuck, however long.
        let mut w = Watch::default();
        for i in 0..20u64 {
            let tid = if i % 2 == 0 { 1 } else { 2 };
            assert_eq!(
                w.stop_ended(
                    ms(i * 2000),
                    ms(i * 2000 + 1900),
                    vec![at(tid, "libcuda.so.1")]
                ),
                None,
                "stop {i}"
            );
        }
    }

    #[test]
    fn a_thread_found_at_another_place_starts_again() {
        let mut w = Watch::default();
        w.stop_ended(ms(0), ms(2000), vec![at(42, "libcuda.so.1")]);
        w.stop_ended(ms(2001), ms(2201), vec![at(42, "libcupti.so.13")]);
        assert_eq!(
            w.stop_ended(ms(2202), ms(2402), vec![at(42, "libcupti.so.13")]),
            None
        );
        let stuck = w
            .stop_ended(ms(2403), ms(4100), vec![at(42, "libcupti.so.13")])
            .expect("three stops at one place over 2 s");
        assert_eq!(stuck.over, ms(2099));
    }

    #[test]
    fn runs_alone_are_cut_short_only_when_every_thread_inside_was_seen_there() {
        let mut w = Watch::default();
        assert!(!w.all_seen_before([].into_iter()));
        assert!(!w.all_seen_before([42].into_iter()));
        w.stop_ended(ms(0), ms(2000), vec![at(42, "libcuda.so.1")]);
        assert!(w.all_seen_before([42].into_iter()));
        assert!(
            !w.all_seen_before([42, 43].into_iter()),
            "43 gets its chance"
        );
    }
}
