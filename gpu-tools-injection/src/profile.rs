//! Per-kernel profiles of a program run under the injection library: the request ([`ProfileRequest`], carried by
//! the `GPU_TOOLS_PROFILE_*` variables of [`env`](crate::env)), running a program with it ([`run`],
//! [`run_with_progress`]), and, re-exported from `gpu_tools_trace::profile`, what the program sent
//! ([`ProfileRun`]) and the reports made from it: one row per kernel name with each metric's mean, minimum and
//! maximum ([`KernelTable`]), the top stall reasons per function with their PC offsets ([`StallTable`]).
//!
//! ```no_run
//! use std::process::Command;
//! use gpu_tools_injection::profile::{self, KernelTable, ProfileError, ProfileRequest};
//!
//! fn main() -> Result<(), ProfileError> {
//!     let request = ProfileRequest::new(ProfileRequest::parse_metrics("basic").map_err(ProfileError::Request)?);
//!     let mut cmd = Command::new("python3");
//!     cmd.args(["train.py", "--steps", "5"]);
//!     let run = profile::run(cmd, "/path/to/libgpu_tools_inject.so".as_ref(), &request)?;
//!     let table = KernelTable::from_records(&run.metrics);
//!     table
//!         .write_text(&mut std::io::stdout(), |name| name.to_string())
//!         .map_err(|e| ProfileError::Io(e.to_string()))?;
//!     Ok(())
//! }
//! ```

pub mod notice;
mod run;

use crate::env::{GraphMode, TraceKind};
use crate::settings::{Destination, Settings};

pub use crate::settings::profile_request::{
    BASIC_SET, DEFAULT_MAX_RANGES, ProfileRequest, named_set,
};
pub use gpu_tools_trace::profile::*;
pub use run::{ProfileError, ProfileProgress, run, run_with_progress};

/// What a profiled program's library is told, launched ([`run`]) or attached (`gpu-tools profile --pid`):
/// `request`, and kernel records (each profiled kernel's duration), those of CUDA graph nodes too (one per profiled
/// kernel, whatever the graph profiling), sent to `destination`. An attached library that profiles records no
/// trace, so the kinds do not reach it.
pub fn settings(destination: Destination, request: &ProfileRequest) -> Settings {
    Settings {
        kinds: vec![TraceKind::Kernel],
        graph: GraphMode::Node,
        profile: Some(request.clone()),
        ..Settings::new(destination)
    }
}
