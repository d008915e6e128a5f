//! Diagnostics on stderr, only when the environment asks for them: the library never writes to the traced
//! program's stdout, and says nothing unless asked.

struct Stderr;

impl log::Log for Stderr {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata()) {
            use std::io::Write;
            // One write per line, so lines of several threads do not interleave. Stamped with CLOCK_MONOTONIC in
            // seconds, the clock of the trace's records, so that a line can be placed among them.
            let line = format!(
                "gpu-tools-inject[{}] {:.6} {} {}: {}\n",
                std::process::id(),
                monotonic_seconds(),
                record.level(),
                record.target(),
                record.args()
            );
            let _ = std::io::stderr().write_all(line.as_bytes());
        }
    }

    fn flush(&self) {}
}

/// CLOCK_MONOTONIC in seconds (0 if the clock cannot be read).
fn monotonic_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out-pointer for clock_gettime.
    if unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) } != 0 {
        return 0.0;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

static LOGGER: Stderr = Stderr;

/// Sends the library's `log` records at `level` and above to stderr (this library's own copy of the `log`
/// facade: a Rust program's logger is not affected).
pub fn init(level: log::LevelFilter) {
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(level);
    }
}
