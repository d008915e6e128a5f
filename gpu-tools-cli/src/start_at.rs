//! `--start-at TIME` of `trace` (attaching) and `where`: one wall-clock instant at which every host of a job
//! starts its window, so that `srun ... gpu-tools trace --start-at +5` on 64 nodes traces the same seconds
//! everywhere (each host's wall clock, as NTP or PTP keeps it: the trace files' clock anchors then put the hosts on
//! one timeline).
//!
//! TIME is RFC 3339 (`2025-06-01T12:00:05Z`, `2025-06-01T14:00:05+02:00`, fractions of a second allowed) or
//! `+SECONDS` from now (`+5`, `+2.5`). A time in the past is refused before anything else is done (no process
//! looked at, nothing attached): exit 2, naming it as past.

use std::time::{Duration, SystemTime};

use crate::failure::Failure;

/// When the window starts: the instant, and the text it was given as.
#[derive(Debug, Clone)]
pub struct StartAt {
    pub at: SystemTime,
    pub given: String,
}

/// Parses `--start-at`'s value against `now`. `Err` says why it is not a time, or that it is past.
pub fn parse(text: &str, now: SystemTime) -> Result<StartAt, String> {
    let given = text.to_string();
    if let Some(seconds) = text.strip_prefix('+') {
        // A second plus is a typing slip (`++5`), not a sign for `parse` to read past.
        let once = !seconds.starts_with('+');
        let s: f64 = once
            .then(|| seconds.parse().ok())
            .flatten()
            .ok_or_else(|| {
                format!("'{text}' is not +SECONDS (a number of seconds from now, as +5 or +2.5)")
            })?;
        if !(s.is_finite() && s > 0.0) || s > 7.0 * 86_400.0 {
            return Err(format!(
                "'{text}': +SECONDS must be more than 0 and at most a week"
            ));
        }
        return Ok(StartAt {
            at: now + Duration::from_secs_f64(s),
            given,
        });
    }
    let stamp: jiff::Timestamp = text.parse().map_err(|e| {
        format!(
            "'{text}' is not an RFC 3339 time (2025-06-01T12:00:05Z, or with an offset: +02:00) nor +SECONDS: {e}"
        )
    })?;
    let at = SystemTime::from(stamp);
    if at <= now {
        let ago = now.duration_since(at).unwrap_or_default();
        return Err(format!(
            "{text} is in the past ({:.1} s ago by this host's clock, now {}): give a later time, or +SECONDS",
            ago.as_secs_f64(),
            jiff::Timestamp::try_from(now)
                .map(|t| t.round(jiff::Unit::Millisecond).unwrap_or(t).to_string())
                .unwrap_or_default()
        ));
    }
    Ok(StartAt { at, given })
}

/// `--start-at`'s value parser: [`parse`] against the time now (clap reports an error as a usage error, exit 2,
/// before the command does anything).
pub fn parse_now(text: &str) -> Result<StartAt, String> {
    parse(text, SystemTime::now())
}

/// Waits until the instant, by this host's wall clock (re-read as it goes, so that a clock stepped meanwhile is
/// followed); `stop` (Ctrl-C, SIGTERM) ends the wait early: `Err` then, as nothing has started.
pub fn wait(
    start: &StartAt,
    stop: &std::sync::atomic::AtomicBool,
    command: &str,
) -> Result<(), Failure> {
    let left = start
        .at
        .duration_since(SystemTime::now())
        .unwrap_or_default();
    log::info!(
        "{command}: waiting {:.3} s for --start-at {}",
        left.as_secs_f64(),
        start.given
    );
    loop {
        if stop.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(Failure::new(
                1,
                format!(
                    "stopped while waiting for --start-at {}: nothing was started",
                    start.given
                ),
            ));
        }
        let Ok(left) = start.at.duration_since(SystemTime::now()) else {
            return Ok(());
        };
        if left.is_zero() {
            return Ok(());
        }
        std::thread::sleep(left.min(Duration::from_millis(20)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> SystemTime {
        SystemTime::from(text.parse::<jiff::Timestamp>().unwrap())
    }

    #[test]
    fn relative_and_absolute_times() {
        let now = at("2025-06-01T12:00:00Z");
        assert_eq!(parse("+5", now).unwrap().at, now + Duration::from_secs(5));
        assert_eq!(
            parse("+0.25", now).unwrap().at,
            now + Duration::from_millis(250)
        );
        assert_eq!(
            parse("2025-06-01T12:00:05Z", now).unwrap().at,
            now + Duration::from_secs(5)
        );
        assert_eq!(
            parse("2025-06-01T14:00:05.5+02:00", now).unwrap().at,
            now + Duration::from_millis(5500)
        );
        assert_eq!(parse("+5", now).unwrap().given, "+5");
    }

    #[test]
    fn the_past_and_non_times_are_refused() {
        let now = at("2025-06-01T12:00:00Z");
        let e = parse("2025-06-01T11:59:00Z", now).unwrap_err();
        assert!(
            e.starts_with("2025-06-01T11:59:00Z is in the past (60.0 s ago"),
            "{e}"
        );
        assert!(e.contains("now 2025-06-01T12:00:00Z"), "{e}");
        assert!(
            parse("2025-06-01T12:00:00Z", now)
                .unwrap_err()
                .contains("in the past")
        );
        for (bad, says) in [
            ("+0", "more than 0"),
            ("+-3", "more than 0"),
            ("+x", "not +SECONDS"),
            ("++5", "not +SECONDS"),
            ("+inf", "more than 0"),
            ("+1e9", "at most a week"),
            ("tomorrow", "not an RFC 3339 time"),
            ("2025-06-01 12:00", "not an RFC 3339 time"),
        ] {
            let e = parse(bad, now).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn the_wait_ends_at_the_instant_or_when_stopped() {
        let stop = std::sync::atomic::AtomicBool::new(false);
        let start = parse("+0.05", SystemTime::now()).unwrap();
        wait(&start, &stop, "test").unwrap();
        assert!(SystemTime::now() >= start.at);
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let later = parse("+60", SystemTime::now()).unwrap();
        let Err(Failure::Message { code: 1, message }) = wait(&later, &stop, "test") else {
            panic!("a stop ends the wait");
        };
        assert!(message.contains("nothing was started"), "{message}");
    }
}
