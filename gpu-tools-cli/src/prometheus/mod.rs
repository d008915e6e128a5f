//! `gpu-tools top --prometheus ADDR`: the view's latest values served at `GET /metrics` in Prometheus' text
//! exposition format (version 0.0.4), under dcgm-exporter's names where DCGM has a counterpart.
//!
//! The sampling loop ([`Exporter::update`]) and the HTTP thread share a [`State`]; a scrape formats it
//! ([`exposition`], a pure function) and never waits for the GPUs. A GPU whose last read failed, or that
//! delivered no sample for [`State::stale_after`], is *stale*: its gauges are left out of the scrape (Prometheus
//! then marks those series stale, as for a target that stopped reporting them), `gpu_tools_gpu_up` is 0 for it
//! and `gpu_tools_stale_scrapes_total` counts the scrape; its counters stay. The server goes on serving whatever
//! the GPUs do.

mod exposition;
mod listen;
mod server;
mod state;
#[cfg(test)]
mod tests;

pub use listen::{bind, hostname, parse_listen};
pub use server::Exporter;
pub use state::State;
