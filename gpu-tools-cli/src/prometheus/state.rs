//! What the sampling loop hands the scrapes: each GPU's latest values and counts, and when they go stale.

use std::time::{Duration, Instant};

use gpu_tools::counters::top::{TopColumn, TopGpu, TopRow, TopTotals};

use super::exposition::{ExportGpu, exposition};

/// A GPU's state between the sampling loop and the scrapes.
#[derive(Debug, Clone)]
struct GpuState {
    gpu: TopGpu,
    totals: TopTotals,
    /// Means of its latest refresh with samples, and when it ended.
    latest: Option<(Vec<f64>, Instant)>,
    /// Its latest read failed.
    failed: bool,
    stale_scrapes: u64,
}

/// What the sampling loop hands the scrapes.
#[derive(Debug, Clone)]
pub struct State {
    hostname: String,
    columns: Vec<TopColumn>,
    gpus: Vec<GpuState>,
    /// How long a GPU's gauges stay current without a new sample.
    pub stale_after: Duration,
}

impl State {
    /// The state of a view of `columns` over `gpus`, no refresh yet (every GPU stale until its first samples).
    pub fn new(
        hostname: String,
        columns: Vec<TopColumn>,
        gpus: Vec<TopGpu>,
        stale_after: Duration,
    ) -> Self {
        State {
            hostname,
            columns,
            gpus: gpus
                .into_iter()
                .map(|gpu| GpuState {
                    gpu,
                    totals: TopTotals::default(),
                    latest: None,
                    failed: false,
                    stale_scrapes: 0,
                })
                .collect(),
            stale_after,
        }
    }

    /// Takes one refresh: the rows and the totals, in the order of the GPUs, at `now`.
    pub fn update(&mut self, rows: &[TopRow], totals: &[(TopGpu, TopTotals)], now: Instant) {
        for ((g, row), (_, t)) in self.gpus.iter_mut().zip(rows).zip(totals) {
            g.totals = *t;
            g.failed = row.error.is_some();
            if !g.failed && row.samples > 0 {
                g.latest = Some((row.values.clone(), now));
            }
        }
    }

    /// The GPUs as a scrape at `now` shows them; counts the scrape for each stale one.
    pub fn scrape(&mut self, now: Instant) -> Vec<ExportGpu> {
        let stale_after = self.stale_after;
        self.gpus
            .iter_mut()
            .map(|g| {
                let values = match &g.latest {
                    Some((v, at))
                        if !g.failed && now.saturating_duration_since(*at) <= stale_after =>
                    {
                        Some(v.clone())
                    }
                    _ => None,
                };
                if values.is_none() {
                    g.stale_scrapes += 1;
                }
                ExportGpu {
                    gpu: g.gpu.clone(),
                    values,
                    totals: g.totals,
                    stale_scrapes: g.stale_scrapes,
                }
            })
            .collect()
    }

    /// A scrape's body at `now`.
    pub fn body(&mut self, now: Instant) -> String {
        let gpus = self.scrape(now);
        exposition(&self.hostname, &self.columns, &gpus)
    }
}
