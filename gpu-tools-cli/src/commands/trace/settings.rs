//! What `gpu-tools trace` tells the injected library: one [`Settings`] value made from the command line, the same
//! for a launched program (`receiver.rs`, with either library) and for an attach (`attach.rs`). Where the two
//! differ, the difference is a value given here or a rule of the encoding, each said where it is made:
//!
//! | setting | launched | attached |
//! |---|---|---|
//! | kinds | `--kinds`, or the default with NVTX | the same, but copies and sets left out unless named (`cli.rs`, [`COPY_KINDS`](super::cli::COPY_KINDS)) |
//! | NVTX | the kind; the program's NVTX calls routed to the library (`NVTX_INJECTION64_PATH`, the environment's encoding) | the kind; nothing routed (NVTX read that variable at the program's first NVTX call, long before: `Settings::attach_argument`) |
//! | destination | the launch's socket | each process's socket, written by the attach |
//! | CUPTI | the program's own search (and the user's `GPU_TOOLS_CUPTI_LIB`, inherited) | the one the tracer found, for a process that maps none |
//! | signals | flushed at a fatal signal | the same value; an attached library changes none of the program's handlers whatever it says |
//! | log | `GPU_TOOLS_TRACE_LOG` of the tracer's environment | the same |
//! | flight recorder | none is kept (the library ignores the value) | left in the process after the window unless `--no-flight-recorder` |

use std::path::Path;
use std::time::Duration;

use gpu_tools_injection::env;
use gpu_tools_injection::settings::{self, Destination, Settings};

use super::cli::Args;
use crate::failure::Failure;

/// The settings of the trace `cli` asks for, sending to `destination`; `cupti`: the CUPTI library an attached
/// process that maps none loads (`None` for a launched program, which finds its own). A value the library would
/// refuse is refused here, before the program is started or any process touched (exit 2).
pub fn injection_settings(
    cli: &Args,
    destination: Destination,
    cupti: Option<&Path>,
) -> Result<Settings, Failure> {
    let defaults = Settings::new(destination);
    let buffer_size = match &cli.buffer_size {
        Some(v) => settings::parse_buffer_size(v)
            .map_err(|e| Failure::new(2, format!("--buffer-size {v}: {e}")))?,
        None => defaults.buffer_size,
    };
    // What the library logs on the program's stderr: asked for in the tracer's own environment, which a launched
    // program would inherit anyway and an attached one cannot.
    let log = match std::env::var(env::LOG) {
        Ok(v) if !v.trim().is_empty() => Some(
            settings::parse_log(&v)
                .map_err(|e| Failure::new(2, format!("{}={v:?} (environment): {e}", env::LOG)))?,
        ),
        _ => None,
    };
    Ok(Settings {
        kinds: cli.effective_kinds(),
        graph: cli.cuda_graph_trace.map_or(defaults.graph, |g| g.mode()),
        api: cli.api_mode(),
        api_skip: cli.api_skip.clone(),
        buffer_size,
        max_buffers: cli.max_buffers.map_or(defaults.max_buffers, |n| n as usize),
        flush_interval: match cli.flush_ms {
            Some(0) => None,
            Some(ms) => Some(Duration::from_millis(ms)),
            None => defaults.flush_interval,
        },
        log,
        flight_recorder: cli.flight_recorder(),
        cupti: cupti.map(Path::to_path_buf),
        ..defaults
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use gpu_tools_injection::env::{ApiMode, GraphMode, TraceKind};

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn args(argv: &[&str]) -> Args {
        Cli::try_parse_from(argv).unwrap().args
    }

    fn socket() -> Destination {
        Destination::Socket("/tmp/s".into())
    }

    #[test]
    fn the_options_become_the_settings() {
        let cli = args(&[
            "trace",
            "--kinds",
            "kernel,runtime",
            "--api",
            "launches",
            "--api-skip",
            "cudaGetLastError",
            "--cuda-graph-trace",
            "node",
            "--buffer-size",
            "64k",
            "--max-buffers",
            "3",
            "--flush-ms",
            "0",
            "--",
            "true",
        ]);
        let s = injection_settings(&cli, socket(), None).unwrap();
        assert_eq!(s.kinds, [TraceKind::Kernel, TraceKind::Runtime]);
        assert_eq!((s.api, s.graph), (ApiMode::Launches, GraphMode::Node));
        assert_eq!(s.api_skip, ["cudaGetLastError"]);
        assert_eq!((s.buffer_size, s.max_buffers), (64 << 10, 3));
        assert_eq!(s.flush_interval, None);
        assert_eq!(s.destination, socket());
        // Nothing given: the library's defaults, NVTX among the kinds.
        let s = injection_settings(&args(&["trace", "--", "true"]), socket(), None).unwrap();
        let defaults = Settings::new(socket());
        assert_eq!(
            (s.graph, s.buffer_size, s.max_buffers, s.flush_interval),
            (
                defaults.graph,
                defaults.buffer_size,
                defaults.max_buffers,
                defaults.flush_interval
            )
        );
        assert!(s.nvtx() && s.signals);
    }

    #[test]
    fn a_launch_and_an_attach_get_the_same_settings_but_the_kinds_and_cupti() {
        let launched = injection_settings(&args(&["trace", "--", "true"]), socket(), None).unwrap();
        let cupti = Path::new("/opt/libcupti.so.13");
        let attached =
            injection_settings(&args(&["trace", "--pid", "1"]), socket(), Some(cupti)).unwrap();
        assert_eq!(attached.cupti.as_deref(), Some(cupti));
        assert!(
            !attached.kinds.contains(&TraceKind::Memcpy),
            "copies left out of an attach"
        );
        assert_eq!(
            Settings {
                kinds: launched.kinds.clone(),
                cupti: None,
                ..attached
            },
            launched
        );
    }

    #[test]
    fn a_buffer_size_the_library_would_refuse_is_a_usage_error() {
        let cli = args(&["trace", "--buffer-size", "100", "--", "true"]);
        match injection_settings(&cli, socket(), None) {
            Err(Failure::Message { code: 2, message }) => {
                assert!(
                    message.contains("--buffer-size 100: must lie between"),
                    "{message}"
                )
            }
            other => panic!("{other:?}"),
        }
    }
}
