//! A progress line on stderr for long runs (`trace`'s records as they arrive, `profile`'s kernels): one line,
//! rewritten in place with `\r` at most [`PER_SECOND`] times a second, and cleared when the run ends, so that
//! nothing of it stays in the terminal.
//!
//! It is on by default where stderr is a terminal, and off where stderr is a file or a pipe, and with `--quiet`;
//! `--progress` forces it on (also into a pipe), `--no-progress` off. After drawing, the cursor goes back to the
//! start of the line: output of the traced program on the same terminal then starts at the left margin, over the
//! line, instead of after it, and the next update draws the line again.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// Most updates a second.
pub const PER_SECOND: u32 = 4;

/// `--progress` and `--no-progress`, flattened into a subcommand's options.
#[derive(Debug, Clone, Copy, Default, clap::Args)]
pub struct ProgressArgs {
    /// Show a progress line on stderr, rewritten in place [default: where stderr is a terminal, unless --quiet].
    #[arg(long, overrides_with = "no_progress")]
    pub progress: bool,
    /// Show no progress line.
    #[arg(long, overrides_with = "progress")]
    pub no_progress: bool,
}

impl ProgressArgs {
    /// Whether the line is shown: as asked, else where stderr is a terminal and the run is not `quiet`.
    pub fn enabled(&self, quiet: bool) -> bool {
        if self.progress {
            true
        } else if self.no_progress {
            false
        } else {
            !quiet && std::io::stderr().is_terminal()
        }
    }
}

/// The line: drawn by [`update`](Self::update), cleared by [`clear`](Self::clear) or when dropped.
#[derive(Debug)]
pub struct Progress {
    on: bool,
    started: Instant,
    last: Option<Instant>,
    drawn: bool,
}

impl Progress {
    /// A line that is drawn only when `on`.
    pub fn new(on: bool) -> Self {
        Progress {
            on,
            started: Instant::now(),
            last: None,
            drawn: false,
        }
    }

    /// Time since the line was made.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Draws `text()` unless the line is off or was drawn less than a quarter of a second ago (`text` is not
    /// called then).
    pub fn update(&mut self, text: impl FnOnce() -> String) {
        if !self.on {
            return;
        }
        let now = Instant::now();
        if self
            .last
            .is_some_and(|t| now.duration_since(t) < Duration::from_secs(1) / PER_SECOND)
        {
            return;
        }
        self.last = Some(now);
        let mut err = std::io::stderr().lock();
        // Erase the line, draw, and go back to its start. A failed write only loses the line.
        let _ = write!(err, "\r\x1b[K{}\r", text());
        let _ = err.flush();
        self.drawn = true;
    }

    /// Erases the line, if it was drawn; later updates draw it again.
    pub fn clear(&mut self) {
        if self.drawn {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[K");
            let _ = err.flush();
            self.drawn = false;
            self.last = None;
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.clear();
    }
}

/// `12,345`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `812 B`, `4.2 MB`, `1.3 GB`.
pub fn size(bytes: u64) -> String {
    let b = bytes as f64;
    if bytes >= 1_000_000_000 {
        format!("{:.1} GB", b / 1e9)
    } else if bytes >= 1_000_000 {
        format!("{:.1} MB", b / 1e6)
    } else if bytes >= 1_000 {
        format!("{:.1} kB", b / 1e3)
    } else {
        format!("{bytes} B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_easily() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000), "1,000");
        assert_eq!(thousands(12_345_678), "12,345,678");
        assert_eq!(size(812), "812 B");
        assert_eq!(size(4_200_000), "4.2 MB");
        assert_eq!(size(1_300_000_000), "1.3 GB");
    }

    #[test]
    fn the_flags_decide_over_the_terminal() {
        let on = ProgressArgs {
            progress: true,
            no_progress: false,
        };
        let off = ProgressArgs {
            progress: false,
            no_progress: true,
        };
        assert!(on.enabled(true), "forced on, even with --quiet");
        assert!(!off.enabled(false));
    }

    #[test]
    fn updates_are_throttled_and_an_off_line_asks_for_nothing() {
        let mut p = Progress::new(false);
        p.update(|| unreachable!("an off line computes no text"));
        let mut p = Progress::new(true);
        let mut calls = 0;
        for _ in 0..100 {
            p.update(|| {
                calls += 1;
                String::new()
            });
        }
        assert_eq!(calls, 1, "one draw per quarter second");
        p.clear();
        p.update(|| {
            calls += 1;
            String::new()
        });
        assert_eq!(calls, 2, "drawn again right after a clear");
    }
}
