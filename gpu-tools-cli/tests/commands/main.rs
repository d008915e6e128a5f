//! The `gpu-tools` command line end to end, one module per subcommand or concern, each running the built binary
//! (`CARGO_BIN_EXE_gpu-tools`) without a GPU: against the C doubles, real trace fixtures, and this test binary run
//! again as a stand-in traced program (`MODULE::standin`, an ignored test of each module that has one).

mod analyze;
mod bad_input;
mod broken_pipe;
mod cli;
mod coredump;
mod cupti_or_debugger;
mod freeze;
mod job;
mod no_driver;
mod outputs;
mod profile;
mod real_traces;
mod sleepers;
mod stats_export;
mod stats_export_counters;
mod stragglers;
mod top;
mod trace;
mod trace_counters;
mod trace_rocm;
mod where_namespace;
