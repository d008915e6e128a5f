//! Clock anchors: the stream's clock and the wall clock read together, and the `clock_gettime` calls that read them.

/// The stream's clock and the wall clock read together, so that streams of several hosts can be put on one
/// timeline. `monotonic` is on the stream's clock; `realtime` is `CLOCK_REALTIME` nanoseconds since the Unix epoch,
/// read between two readings of the stream's clock that lie `uncertainty` ns apart (`monotonic` is their midpoint).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct ClockAnchor {
    /// The stream's clock, ns.
    pub monotonic: u64,
    /// `CLOCK_REALTIME`, ns since the epoch.
    pub realtime: u64,
    /// Distance between the two readings of the stream's clock around the wall-clock reading, ns.
    pub uncertainty: u32,
}

impl ClockAnchor {
    /// Reads both clocks now (`CLOCK_MONOTONIC` and `CLOCK_REALTIME`), taking the tightest of a few tries.
    pub fn now() -> ClockAnchor {
        let mut best: Option<ClockAnchor> = None;
        for _ in 0..5 {
            let a = monotonic_ns();
            let r = realtime_ns();
            let b = monotonic_ns();
            let anchor = ClockAnchor {
                monotonic: a + (b.saturating_sub(a)) / 2,
                realtime: r,
                uncertainty: u32::try_from(b.saturating_sub(a)).unwrap_or(u32::MAX),
            };
            if best.is_none_or(|x| anchor.uncertainty < x.uncertainty) {
                best = Some(anchor);
            }
        }
        best.unwrap_or(ClockAnchor {
            monotonic: 0,
            realtime: 0,
            uncertainty: u32::MAX,
        })
    }

    /// `realtime - monotonic`: what to add to a stream timestamp to put it on the wall clock.
    pub fn offset(&self) -> i128 {
        i128::from(self.realtime) - i128::from(self.monotonic)
    }
}

fn read_clock(id: libc_clock::ClockId) -> u64 {
    libc_clock::now_ns(id)
}

fn monotonic_ns() -> u64 {
    read_clock(libc_clock::ClockId::Monotonic)
}

fn realtime_ns() -> u64 {
    read_clock(libc_clock::ClockId::Realtime)
}

/// The two clocks without a dependency: `Instant` is `CLOCK_MONOTONIC` on Linux, but its value is opaque, so the
/// vDSO `clock_gettime` is called directly.
mod libc_clock {
    #[repr(C)]
    struct Timespec {
        tv_sec: i64,
        tv_nsec: i64,
    }

    // glibc's `int clock_gettime(clockid_t, struct timespec *)`: `clockid_t` is an int, and `Timespec` is the
    // 64-bit Linux `struct timespec` (two 64-bit fields), which is what makes the declaration sound.
    unsafe extern "C" {
        fn clock_gettime(clock: i32, ts: *mut Timespec) -> i32;
    }

    #[derive(Clone, Copy)]
    pub(super) enum ClockId {
        Realtime = 0,
        Monotonic = 1,
    }

    pub(super) fn now_ns(id: ClockId) -> u64 {
        let mut ts = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: a valid out-pointer; CLOCK_REALTIME (0) and CLOCK_MONOTONIC (1) exist on every Linux.
        if unsafe { clock_gettime(id as i32, &mut ts) } != 0 {
            return 0;
        }
        (ts.tv_sec.max(0) as u64)
            .saturating_mul(1_000_000_000)
            .saturating_add(ts.tv_nsec.max(0) as u64)
    }
}
