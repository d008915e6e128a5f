//! The trace toolkit's tests, one module each: the stream's wire format and its metric records, the trace file
//! (round trips, checksums, cuts and mutations), reports and exports, counter attribution, and the real traces
//! recorded on GPU hosts (`tests/fixtures/traces/`). One binary: functions over bytes and records.

mod analyze;
mod counter_attribution;
mod job;
mod real_traces;
mod trace_export;
mod trace_file;
mod trace_file_checksums;
mod trace_file_final;
mod trace_metrics_wire;
mod trace_wire;
