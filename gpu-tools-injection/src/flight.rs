//! The flight recorder's report: what `gpu-tools where` reads from the injection library of a process that an
//! attach traced or profiled, where the CUDA driver refuses the debugger for the rest of the process's life.
//!
//! After such an attach the library keeps an account of the program's kernel and graph launches per stream (from
//! CUPTI's launch callbacks: the stream, the kernel's name, the thread, when) and of what its own synchronisation
//! says has finished. It listens on a socket in the process's `/tmp` ([`socket_file_name`]); a connection that
//! sends [`REQUEST`] gets one [`FlightReport`], encoded by [`FlightReport::encode`], and is closed. The tool decodes
//! it with [`FlightReport::decode`]. Both ends live here, so that the wording of what is printed is the tool's and
//! the protocol is this type's.
//!
//! The encoding is text: one record per line, fields separated by tabs, the free text (kernel names, reasons) last
//! and escaped (`\\`, `\t`, `\n`). The first line names the format and its version.

use std::fmt;

/// The byte a `where` sends to ask for a report.
pub const REQUEST: u8 = b'W';

/// The first line of a report, with its version.
const HEADER: &str = "gpu-tools-flight 1";

/// The most unfinished launches a report lists per stream (the rest are counted).
pub const LISTED_PER_STREAM: usize = 16;

/// The recorder's socket file, in the `/tmp` of the process's mount namespace, for the process's own pid (as it
/// sees it: in a PID namespace, the last `NSpid` of its `/proc/PID/status`).
pub fn socket_file_name(pid_in_namespace: u32) -> String {
    format!("gpu-tools-flight-{pid_in_namespace}.sock")
}

/// Where the tool finds the recorder of the process `pid` (as this process sees it): through the process's root, in
/// its `/tmp`, named after its own pid (the last `NSpid` of its status, which differs in a PID namespace).
pub fn socket_of(pid: u32) -> std::io::Result<std::path::PathBuf> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let own = status
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))
        .and_then(|v| v.split_whitespace().last())
        .and_then(|v| v.parse::<u32>().ok())
        .unwrap_or(pid);
    Ok(std::path::PathBuf::from(format!("/proc/{pid}/root/tmp")).join(socket_file_name(own)))
}

/// Why a recorder gave no report.
#[derive(Debug, thiserror::Error)]
pub enum AskError {
    /// Nothing listens there: no recorder runs in the process (none was started, or it ended with the process).
    #[error("no flight recorder answers at {path}: {source}")]
    NotThere {
        /// The socket asked.
        path: std::path::PathBuf,
        /// What connecting said.
        source: std::io::Error,
    },
    /// It connected but no whole report came within the time given.
    #[error("the flight recorder at {path} gave no report: {source}")]
    NoReport {
        /// The socket asked.
        path: std::path::PathBuf,
        /// What reading said.
        source: std::io::Error,
    },
    /// A report came but could not be read.
    #[error(transparent)]
    Decode(#[from] DecodeError),
}

/// Asks the recorder listening at `path` for its report, waiting at most `limit` for it.
pub fn ask(path: &std::path::Path, limit: std::time::Duration) -> Result<FlightReport, AskError> {
    use std::io::{Read, Write};
    let mut conn =
        std::os::unix::net::UnixStream::connect(path).map_err(|source| AskError::NotThere {
            path: path.to_path_buf(),
            source,
        })?;
    let no_report = |source| AskError::NoReport {
        path: path.to_path_buf(),
        source,
    };
    conn.set_read_timeout(Some(limit)).map_err(no_report)?;
    conn.set_write_timeout(Some(limit)).map_err(no_report)?;
    conn.write_all(&[REQUEST]).map_err(no_report)?;
    let mut bytes = Vec::new();
    // At most `REPORT_LIMIT` bytes: whatever listens at the path (another process may have made a socket of that
    // name) cannot make the tool hold more; a longer report fails to decode, said as such (cut inside a character,
    // the rest is read as it stands, so that the missing end says so).
    conn.take(REPORT_LIMIT)
        .read_to_end(&mut bytes)
        .map_err(no_report)?;
    let text = match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) if e.as_bytes().len() as u64 == REPORT_LIMIT => {
            String::from_utf8_lossy(e.as_bytes()).into_owned()
        }
        Err(e) => {
            return Err(no_report(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                e.utf8_error(),
            )));
        }
    };
    Ok(FlightReport::decode(&text)?)
}

/// The most bytes of a report read: a recorder lists at most `LISTED_PER_STREAM` launches a stream, in lines of
/// a few hundred bytes.
const REPORT_LIMIT: u64 = 16 << 20;

/// What the recorder of one process has seen, as of the moment it was asked.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FlightReport {
    /// The process, as it sees its pid.
    pub pid: u32,
    /// When the report was made (CLOCK_MONOTONIC, ns): the times below are on the same clock.
    pub now_ns: u64,
    /// When the recorder started.
    pub since_ns: u64,
    /// Launches it recorded.
    pub launches: u64,
    /// Why it stopped recording before now, if it did (the program's own profiler took CUPTI's one callback
    /// subscriber, say): launches after that moment are not known.
    pub stopped: Option<String>,
    /// Every stream it saw launches on.
    pub streams: Vec<StreamReport>,
    /// The program's threads that were inside a synchronisation call when asked.
    pub waits: Vec<Wait>,
}

/// One stream's account.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StreamReport {
    /// The stream's handle in the process (0: the legacy default stream).
    pub stream: u64,
    /// CUPTI's id of its context.
    pub context: u32,
    /// Whether it has work left, as the driver answered when asked.
    pub state: StreamState,
    /// Launches recorded on it.
    pub launched: u64,
    /// Launches not known to have finished: after the last point the program's own synchronisation (or the
    /// driver's answer) says finished. Oldest first, at most [`LISTED_PER_STREAM`].
    pub unfinished: Vec<Launch>,
    /// How many there are in all.
    pub unfinished_count: u64,
    /// The last launch known to have finished, if one is.
    pub last_finished: Option<Launch>,
}

/// Whether a stream has work left.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum StreamState {
    /// The driver says its work has not all finished.
    Busy,
    /// The driver says its work has finished.
    Idle,
    /// The program destroyed it.
    Destroyed,
    /// Not asked, or the driver gave another answer (said).
    #[default]
    Unknown,
    /// The driver's answer, when it was neither.
    Answer(String),
    /// Not asked, and why: a question then would have ended a CUDA graph capture of the program's, say.
    NotAsked(String),
}

/// One launch.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Launch {
    /// Its number among the stream's launches (from 1).
    pub seq: u64,
    /// When it was made (CLOCK_MONOTONIC, ns).
    pub at_ns: u64,
    /// The Linux thread id that made it.
    pub thread: u32,
    /// CUPTI's correlation id of the launch call.
    pub correlation: u32,
    /// For a graph launch, the executable graph's handle (0 for a kernel).
    pub graph: u64,
    /// The kernel's name as the driver gives it (mangled), or for a graph launch its kernels' names joined by
    /// `; ` (or `graph (kernels unknown)`).
    pub name: String,
}

/// A program thread inside a synchronisation call.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Wait {
    /// The Linux thread id.
    pub thread: u32,
    /// The driver function (`cuStreamSynchronize`, ...).
    pub call: String,
    /// The stream it waits for (for a stream synchronisation), or the one the event was recorded on.
    pub stream: Option<u64>,
    /// Since when (CLOCK_MONOTONIC, ns).
    pub since_ns: u64,
}

/// A report that could not be read: the line (from 1) and what was wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("flight report line {line}: {what}")]
pub struct DecodeError {
    /// The line, from 1 (0: the report as a whole).
    pub line: usize,
    /// What was wrong.
    pub what: String,
}

fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            // A line's reader drops a carriage return before its end: one ending a name would be lost.
            '\r' => out.push_str("\\r"),
            c => out.push(c),
        }
    }
    out
}

fn unescape(text: &str) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('\\') => out.push('\\'),
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            other => {
                return Err(format!(
                    "bad escape \\{}",
                    other.map(String::from).unwrap_or_default()
                ));
            }
        }
    }
    Ok(out)
}

impl fmt::Display for StreamState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StreamState::Busy => f.write_str("busy"),
            StreamState::Idle => f.write_str("idle"),
            StreamState::Destroyed => f.write_str("destroyed"),
            StreamState::Unknown => f.write_str("unknown"),
            StreamState::Answer(a) => write!(f, "answer {}", escape(a)),
            StreamState::NotAsked(why) => write!(f, "not-asked {}", escape(why)),
        }
    }
}

impl Launch {
    fn encode(&self, tag: &str, out: &mut String) {
        out.push_str(&format!(
            "{tag}\t{}\t{}\t{}\t{}\t{}\t{}\n",
            self.seq,
            self.at_ns,
            self.thread,
            self.correlation,
            self.graph,
            escape(&self.name)
        ));
    }

    fn decode(fields: &[&str]) -> Result<Launch, String> {
        let [seq, at, thread, corr, graph, name] = fields else {
            return Err(format!("a launch has 6 fields, not {}", fields.len()));
        };
        Ok(Launch {
            seq: number(seq)?,
            at_ns: number(at)?,
            thread: number(thread)?,
            correlation: number(corr)?,
            graph: number(graph)?,
            name: unescape(name)?,
        })
    }
}

fn number<T: std::str::FromStr>(field: &str) -> Result<T, String> {
    field
        .parse()
        .map_err(|_| format!("{field:?} is not a number"))
}

impl FlightReport {
    /// The report as the recorder sends it.
    pub fn encode(&self) -> String {
        let mut out = format!("{HEADER}\n");
        out.push_str(&format!(
            "process\t{}\t{}\t{}\t{}\n",
            self.pid, self.now_ns, self.since_ns, self.launches
        ));
        if let Some(why) = &self.stopped {
            out.push_str(&format!("stopped\t{}\n", escape(why)));
        }
        for s in &self.streams {
            out.push_str(&format!(
                "stream\t{}\t{}\t{}\t{}\t{}\n",
                s.stream, s.context, s.launched, s.unfinished_count, s.state
            ));
            if let Some(l) = &s.last_finished {
                l.encode("finished", &mut out);
            }
            for l in &s.unfinished {
                l.encode("unfinished", &mut out);
            }
        }
        for w in &self.waits {
            out.push_str(&format!(
                "wait\t{}\t{}\t{}\t{}\n",
                w.thread,
                w.stream.map_or_else(|| "-".to_string(), |s| s.to_string()),
                w.since_ns,
                escape(&w.call)
            ));
        }
        out.push_str("end\n");
        out
    }

    /// Reads a report; anything malformed, out of order or cut short is an error naming its line.
    pub fn decode(text: &str) -> Result<FlightReport, DecodeError> {
        let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l));
        let err = |line: usize, what: String| DecodeError { line, what };
        match lines.next() {
            Some((_, HEADER)) => {}
            Some((n, other)) => return Err(err(n, format!("expected {HEADER:?}, got {other:?}"))),
            None => return Err(err(0, "empty report".into())),
        }
        let mut report = FlightReport::default();
        let mut seen_process = false;
        for (n, line) in lines {
            let fields: Vec<&str> = line.split('\t').collect();
            let bad = |what: String| err(n, what);
            match fields.as_slice() {
                ["process", pid, now, since, launches] => {
                    report.pid = number(pid).map_err(bad)?;
                    report.now_ns = number(now).map_err(bad)?;
                    report.since_ns = number(since).map_err(bad)?;
                    report.launches = number(launches).map_err(bad)?;
                    seen_process = true;
                }
                ["stopped", why] => report.stopped = Some(unescape(why).map_err(bad)?),
                ["stream", stream, ctx, launched, unfinished, state] => {
                    report.streams.push(StreamReport {
                        stream: number(stream).map_err(bad)?,
                        context: number(ctx).map_err(bad)?,
                        launched: number(launched).map_err(bad)?,
                        unfinished_count: number(unfinished).map_err(bad)?,
                        state: decode_state(state).map_err(bad)?,
                        ..StreamReport::default()
                    });
                }
                [tag @ ("finished" | "unfinished"), rest @ ..] => {
                    let launch = Launch::decode(rest).map_err(bad)?;
                    let Some(s) = report.streams.last_mut() else {
                        return Err(bad(format!("a {tag} launch before any stream")));
                    };
                    if *tag == "finished" {
                        s.last_finished = Some(launch);
                    } else {
                        s.unfinished.push(launch);
                    }
                }
                ["wait", thread, stream, since, call] => report.waits.push(Wait {
                    thread: number(thread).map_err(bad)?,
                    stream: match *stream {
                        "-" => None,
                        s => Some(number(s).map_err(bad)?),
                    },
                    since_ns: number(since).map_err(bad)?,
                    call: unescape(call).map_err(bad)?,
                }),
                ["end"] => {
                    if !seen_process {
                        return Err(bad("the report names no process".into()));
                    }
                    return Ok(report);
                }
                _ => return Err(bad(format!("unknown record {line:?}"))),
            }
        }
        Err(err(0, "the report was cut short (no end line)".into()))
    }
}

fn decode_state(text: &str) -> Result<StreamState, String> {
    Ok(match text {
        "busy" => StreamState::Busy,
        "idle" => StreamState::Idle,
        "destroyed" => StreamState::Destroyed,
        "unknown" => StreamState::Unknown,
        other => {
            if let Some(a) = other.strip_prefix("answer ") {
                StreamState::Answer(unescape(a)?)
            } else if let Some(why) = other.strip_prefix("not-asked ") {
                StreamState::NotAsked(unescape(why)?)
            } else {
                return Err(format!("unknown stream state {other:?}"));
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> FlightReport {
        let launch = |seq, name: &str| Launch {
            seq,
            at_ns: 1_000 + seq,
            thread: 4242,
            correlation: 7 + seq as u32,
            graph: 0,
            name: name.into(),
        };
        FlightReport {
            pid: 77,
            now_ns: 9_000_000_000,
            since_ns: 1_000,
            launches: 12,
            stopped: Some("the program's profiler took the subscriber\tat 5 s\nthen".into()),
            streams: vec![
                StreamReport {
                    stream: 0x7f00_1234,
                    context: 1,
                    state: StreamState::Busy,
                    launched: 10,
                    unfinished: vec![launch(9, "_Z4spinPVi"), launch(10, "a\\b\tc")],
                    unfinished_count: 2,
                    last_finished: Some(launch(8, "_Z4stepv")),
                },
                StreamReport {
                    stream: 0,
                    context: 1,
                    state: StreamState::Answer("CUDA_ERROR_INVALID_HANDLE".into()),
                    launched: 2,
                    unfinished: vec![Launch {
                        graph: 0x55,
                        name: "k1; k2".into(),
                        ..launch(2, "")
                    }],
                    unfinished_count: 1,
                    last_finished: None,
                },
                StreamReport {
                    stream: 0x7f00_2000,
                    context: 1,
                    state: StreamState::NotAsked(
                        "the program is capturing a CUDA graph on stream 0x7f00_2000".into(),
                    ),
                    launched: 1,
                    unfinished: vec![launch(1, "_Z4stepv")],
                    unfinished_count: 1,
                    last_finished: None,
                },
            ],
            waits: vec![
                Wait {
                    thread: 4242,
                    call: "cuStreamSynchronize".into(),
                    stream: Some(0x7f00_1234),
                    since_ns: 5_000,
                },
                Wait {
                    thread: 4243,
                    call: "cuCtxSynchronize".into(),
                    stream: None,
                    since_ns: 6_000,
                },
            ],
        }
    }

    #[test]
    fn a_report_reads_back_as_it_was_written() {
        let r = sample();
        assert_eq!(FlightReport::decode(&r.encode()), Ok(r));
        let empty = FlightReport {
            pid: 1,
            ..FlightReport::default()
        };
        assert_eq!(FlightReport::decode(&empty.encode()), Ok(empty));
    }

    #[test]
    fn every_character_in_a_name_reads_back() {
        let every: String = (0u32..0x250)
            .chain([0x2028, 0xfeff, 0x1f600])
            .filter_map(char::from_u32)
            .collect();
        // Each ending too: a line's reader is most likely to lose what is last on a line.
        let names: Vec<String> = ["\r", "\\", "\t", "\n", " ", "\u{0}", "\\r"]
            .iter()
            .map(|end| format!("{every}{end}"))
            .collect();
        for name in names {
            let mut r = sample();
            r.stopped = Some(name.clone());
            r.streams[0].unfinished[0].name = name.clone();
            r.streams[1].state = StreamState::Answer(name.clone());
            r.streams[2].state = StreamState::NotAsked(name.clone());
            r.waits[0].call = name.clone();
            // Not `assert_eq!`: the reports hold every character, and a failure says which ending was lost.
            let read = FlightReport::decode(&r.encode());
            assert!(
                read == Ok(r),
                "a name ending {:?} did not read back",
                name.chars().last()
            );
        }
    }

    #[test]
    fn a_damaged_report_is_an_error_naming_its_line() {
        let text = sample().encode();
        let cut = &text[..text.len() - 4];
        assert_eq!(FlightReport::decode(cut).map_err(|e| e.line), Err(0));
        let wrong = text.replacen("stream\t", "stream\tx", 1);
        assert_eq!(FlightReport::decode(&wrong).map_err(|e| e.line), Err(4));
        let orphan = format!("{HEADER}\nprocess\t1\t2\t3\t4\nunfinished\t1\t2\t3\t4\t5\tk\nend\n");
        let e = FlightReport::decode(&orphan).unwrap_err();
        assert_eq!(e.line, 3);
        assert!(e.what.contains("before any stream"), "{e}");
        assert_eq!(
            FlightReport::decode("gpu-tools-flight 2\nend\n").map_err(|e| e.line),
            Err(1)
        );
        assert!(
            FlightReport::decode(&format!("{HEADER}\nend\n")).is_err(),
            "no process line"
        );
        let bad_escape = text.replacen("_Z4spinPVi", "_Z4\\qspin", 1);
        assert!(FlightReport::decode(&bad_escape).is_err());
    }

    #[test]
    fn the_socket_is_named_after_the_pid() {
        assert_eq!(socket_file_name(42), "gpu-tools-flight-42.sock");
        let me = std::process::id();
        let path = socket_of(me).unwrap();
        assert_eq!(
            path,
            std::path::PathBuf::from(format!("/proc/{me}/root/tmp/gpu-tools-flight-{me}.sock")),
            "this test runs in the PID namespace it sees"
        );
    }

    #[test]
    fn a_recorder_is_asked_over_its_socket() {
        use std::io::{Read, Write};
        let dir = std::env::temp_dir().join(format!("flight-ask-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let text = sample().encode();
        let server = std::thread::spawn(move || {
            // A good report, then one cut short, then silence.
            for reply in [Some(text.clone()), Some(text[..20].to_string()), None] {
                let (mut c, _) = listener.accept().unwrap();
                let mut b = [0u8; 1];
                c.read_exact(&mut b).unwrap();
                assert_eq!(b[0], REQUEST);
                match reply {
                    Some(r) => c.write_all(r.as_bytes()).unwrap(),
                    None => std::thread::sleep(std::time::Duration::from_millis(500)),
                }
            }
        });
        let limit = std::time::Duration::from_millis(200);
        assert_eq!(ask(&path, limit).unwrap(), sample());
        assert!(matches!(ask(&path, limit), Err(AskError::Decode(_))));
        assert!(matches!(ask(&path, limit), Err(AskError::NoReport { .. })));
        server.join().unwrap();
        assert!(matches!(
            ask(&dir.join("none"), limit),
            Err(AskError::NotThere { .. })
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
