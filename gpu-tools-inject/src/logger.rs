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
            // One write per line, so lines of several threads do not interleave.
            let line = format!(
                "gpu-tools-inject[{}] {} {}: {}\n",
                std::process::id(),
                record.level(),
                record.target(),
                record.args()
            );
            let _ = std::io::stderr().write_all(line.as_bytes());
        }
    }

    fn flush(&self) {}
}

static LOGGER: Stderr = Stderr;

/// Sends the library's `log` records at `level` and above to stderr (this library's own copy of the `log`
/// facade: a Rust program's logger is not affected).
pub fn init(level: log::LevelFilter) {
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(level);
    }
}
