//! Counters attributed to kernels on synthetic timelines: a long kernel inside constant samples, partial coverage,
//! gaps and lost samples, kernels shorter than a sample (statistical shares that conserve the sample's amount),
//! overlapping kernels, two devices, two hosts in one file; and properties over random timelines.

use std::sync::Arc;

use gpu_tools_trace::counters::{
    Attribution, CounterAttribution, DRAM_READ_PER_SECOND, DRAM_WRITE_PER_SECOND, KernelCounters,
    MetricKind, OCCUPANCY, SM_ACTIVE, TENSOR_ACTIVE,
};
use gpu_tools_trace::file::TraceItem;
use gpu_tools_trace::report::{Analysis, Cell};
use gpu_tools_trace::*;
use proptest::prelude::*;

const MS: u64 = 1_000_000;

fn sample(device: u32, start: u64, end: u64, values: &[(&str, f64)]) -> CounterSample {
    CounterSample {
        start,
        end,
        device,
        values: values.iter().map(|(m, v)| (Arc::from(*m), *v)).collect(),
    }
}

fn gap(device: u32, start: u64, end: u64, samples: u64) -> CounterGap {
    CounterGap {
        start,
        end,
        device,
        samples,
    }
}

fn row<'a>(r: &'a CounterAttribution, name: &str) -> &'a KernelCounters {
    r.kernels
        .iter()
        .find(|k| &*k.name == name)
        .unwrap_or_else(|| panic!("a row for {name} in {r:#?}"))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

#[track_caller]
fn assert_close(a: f64, b: f64) {
    assert!(close(a, b), "{a} != {b}");
}

/// The default set with these values.
fn default_set(
    sm: f64,
    tensor: f64,
    occupancy: f64,
    read: f64,
    write: f64,
) -> Vec<(&'static str, f64)> {
    vec![
        (SM_ACTIVE, sm),
        (TENSOR_ACTIVE, tensor),
        (OCCUPANCY, occupancy),
        (DRAM_READ_PER_SECOND, read),
        (DRAM_WRITE_PER_SECOND, write),
    ]
}

#[test]
fn a_long_kernel_inside_constant_samples_gets_their_values_exactly() {
    let mut a = Attribution::new();
    let values = default_set(80.0, 40.0, 55.0, 1e11, 5e10);
    for i in 0..20 {
        a.add_sample("h", &sample(0, i * MS, (i + 1) * MS, &values));
    }
    let name: Arc<str> = Arc::from("copy");
    a.add_kernel("h", 0, &name, 2 * MS + MS / 2, 12 * MS + MS / 2);
    let r = a.attribute();
    let k = row(&r, "copy");
    assert_eq!(
        (k.launches, k.gpu_time, k.covered_time),
        (1, 10 * MS, 10 * MS)
    );
    assert_close(k.covered(), 1.0);
    // Shares of elapsed time (SM and tensor active) count a sample's busy part: the half-covered samples at each
    // end read 80 and 40 over their whole window, so 160 (at most 100) and 80 over the kernel's half. A level
    // (occupancy, per active cycle) is the samples' value.
    for (metric, v) in [
        (SM_ACTIVE, (9.0 * 80.0 + 100.0) / 10.0),
        (TENSOR_ACTIVE, (9.0 * 40.0 + 80.0) / 10.0),
        (OCCUPANCY, 55.0),
    ] {
        assert_close(k.value(metric).unwrap(), v);
    }
    // 1e11 B/s over 10 ms, 5e10 B/s over 10 ms.
    assert_close(k.value(DRAM_READ_PER_SECOND).unwrap(), 1e9);
    assert_close(k.value(DRAM_WRITE_PER_SECOND).unwrap(), 5e8);
    // Half a sample at each end, nine whole ones between.
    assert_eq!(k.samples, 11);
    assert_close(k.shared(), 1.0 / 11.0);
    assert!(!k.statistical());
    assert_eq!(k.overlapped_time, 0);
    let kinds: Vec<MetricKind> = k.metrics.iter().map(|m| m.kind).collect();
    assert_eq!(
        kinds,
        [
            MetricKind::Share,
            MetricKind::Share,
            MetricKind::Level,
            MetricKind::Rate,
            MetricKind::Rate
        ]
    );
    let d = &r.devices[0];
    assert_eq!(
        (d.samples, d.interval, d.sampled_time, d.busy_time),
        (20, MS, 20 * MS, 10 * MS)
    );
}

#[test]
fn partial_coverage_integrates_only_the_covered_part() {
    let mut a = Attribution::new();
    for i in 0..5 {
        a.add_sample(
            "h",
            &sample(
                0,
                i * MS,
                (i + 1) * MS,
                &[(DRAM_READ_PER_SECOND, 2e9), (SM_ACTIVE, 50.0)],
            ),
        );
    }
    a.add_kernel("h", 0, &Arc::from("k"), 2 * MS, 10 * MS);
    let r = a.attribute();
    let k = row(&r, "k");
    assert_eq!(k.covered_time, 3 * MS);
    assert_close(k.covered(), 3.0 / 8.0);
    // 2e9 B/s over the 3 ms that samples saw; not extrapolated to 8 ms.
    assert_close(k.value(DRAM_READ_PER_SECOND).unwrap(), 6e6);
    assert_close(k.value(SM_ACTIVE).unwrap(), 50.0);
    assert_eq!(k.metrics[0].time, 3 * MS);
    // A metric no sample held is missing, not 0.
    assert_eq!(k.value(TENSOR_ACTIVE), None);
}

#[test]
fn gaps_and_lost_samples_are_uncovered_time() {
    let mut a = Attribution::new();
    let values = [(SM_ACTIVE, 30.0), (DRAM_READ_PER_SECOND, 1e9)];
    for i in [0, 1, 2, 3, 6, 7, 8, 9] {
        a.add_sample("h", &sample(0, i * MS, (i + 1) * MS, &values));
    }
    // Samples lost over [4, 5), none taken over [5, 6).
    a.add_gap("h", &gap(0, 4 * MS, 5 * MS, 2));
    a.add_gap("h", &gap(0, 5 * MS, 6 * MS, 0));
    a.add_kernel("h", 0, &Arc::from("k"), 3 * MS, 8 * MS);
    let r = a.attribute();
    let k = row(&r, "k");
    assert_eq!((k.gpu_time, k.covered_time, k.samples), (5 * MS, 3 * MS, 3));
    assert_close(k.covered(), 0.6);
    assert_close(k.value(DRAM_READ_PER_SECOND).unwrap(), 3e6);
    let d = &r.devices[0];
    assert_eq!((d.samples, d.lost, d.gaps, d.gap_time), (8, 2, 2, 2 * MS));
    assert_eq!(d.sampled_time, 8 * MS);
}

#[test]
fn kernels_shorter_than_a_sample_share_it_by_overlap() {
    let rate = 4e9;
    let mut a = Attribution::new();
    a.add_sample(
        "h",
        &sample(
            0,
            0,
            1_000,
            &[(DRAM_READ_PER_SECOND, rate), (SM_ACTIVE, 20.0)],
        ),
    );
    let (ka, kb): (Arc<str>, Arc<str>) = (Arc::from("a"), Arc::from("b"));
    a.add_kernel("h", 0, &ka, 100, 200);
    a.add_kernel("h", 0, &kb, 300, 500);
    a.add_kernel("h", 0, &ka, 600, 700);
    let r = a.attribute();
    let (ra, rb) = (row(&r, "a"), row(&r, "b"));
    // Both rest on the one sample, shared with each other and with idle time.
    assert_eq!((ra.samples, rb.samples), (1, 1));
    assert_close(ra.shared(), 0.8);
    assert!(ra.statistical() && rb.statistical());
    // Kernels ran in 400 ns of the 1000: the window's 20% SM active was 50% while they ran.
    assert_close(ra.value(SM_ACTIVE).unwrap(), 50.0);
    assert_close(ra.value(DRAM_READ_PER_SECOND).unwrap(), rate * 200e-9);
    assert_close(rb.value(DRAM_READ_PER_SECOND).unwrap(), rate * 200e-9);
    let shares = &a.sample_shares()[0];
    let mut got: Vec<(String, f64)> = shares
        .shares
        .iter()
        .map(|(n, s)| (n.to_string(), *s))
        .collect();
    got.sort_by(|x, y| x.0.cmp(&y.0));
    assert_eq!(got.len(), 2);
    assert_close(got[0].1, 0.2);
    assert_close(got[1].1, 0.2);
    // Idle time is attributed to nobody: the kernels' bytes and the idle part make up the sample's amount.
    let amount = rate * 1_000e-9;
    let kernels = ra.value(DRAM_READ_PER_SECOND).unwrap() + rb.value(DRAM_READ_PER_SECOND).unwrap();
    assert_close(kernels + rate * 600e-9, amount);

    // Kernels filling the window leave nothing over: their shares sum to the sample's amount.
    let mut a = Attribution::new();
    a.add_sample(
        "h",
        &sample(
            0,
            0,
            1_000,
            &[(DRAM_READ_PER_SECOND, rate), ("lts__t_bytes.sum", 640.0)],
        ),
    );
    for (name, start, end) in [("a", 0, 250), ("b", 250, 400), ("a", 400, 1_000)] {
        a.add_kernel("h", 0, &Arc::from(name), start, end);
    }
    let r = a.attribute();
    let sum = |m: &str| r.kernels.iter().filter_map(|k| k.value(m)).sum::<f64>();
    assert_close(sum(DRAM_READ_PER_SECOND), amount);
    // An amount per interval (`….sum`) is shared the same way.
    assert_close(sum("lts__t_bytes.sum"), 640.0);
    assert_close(
        row(&r, "b").value("lts__t_bytes.sum").unwrap(),
        640.0 * 0.15,
    );
    assert!(!row(&r, "a").statistical(), "a had 85% of the window");
}

#[test]
fn statistical_attribution_over_many_launches_weighs_each_sample_by_overlap() {
    // 100 samples of 1 ms; a 100 µs kernel in each, its SM active alternating 20 and 80 with the sample; a longer
    // stretch of the same kernel in the samples at 80. The samples read what that is over their whole window: 2
    // (20 over a tenth of it) and 24 (80 over three tenths).
    let mut a = Attribution::new();
    let k: Arc<str> = Arc::from("small");
    for i in 0..100u64 {
        let sm = if i % 2 == 0 { 2.0 } else { 24.0 };
        a.add_sample("h", &sample(0, i * MS, (i + 1) * MS, &[(SM_ACTIVE, sm)]));
        let len = if i % 2 == 0 { 100_000 } else { 300_000 };
        a.add_kernel("h", 0, &k, i * MS + 10_000, i * MS + 10_000 + len);
    }
    let r = a.attribute();
    let row = row(&r, "small");
    assert_eq!((row.launches, row.samples), (100, 100));
    // (50 × 0.1 × 20 + 50 × 0.3 × 80) / (50 × 0.1 + 50 × 0.3)
    assert_close(row.value(SM_ACTIVE).unwrap(), 65.0);
    assert!(row.statistical());
    assert_close(row.shared(), 0.8);
}

#[test]
fn overlapping_kernels_are_flagged_and_split_amounts() {
    let rate = 1e10;
    let mut a = Attribution::new();
    a.add_sample(
        "h",
        &sample(
            0,
            0,
            1_000,
            &[(DRAM_READ_PER_SECOND, rate), (SM_ACTIVE, 90.0)],
        ),
    );
    a.add_kernel("h", 0, &Arc::from("a"), 0, 600);
    a.add_kernel("h", 0, &Arc::from("b"), 400, 1_000);
    a.add_kernel("h", 0, &Arc::from("c"), 2_000, 2_500);
    let r = a.attribute();
    let (ra, rb, rc) = (row(&r, "a"), row(&r, "b"), row(&r, "c"));
    assert_eq!(
        (ra.overlapped_time, rb.overlapped_time, rc.overlapped_time),
        (200, 200, 0)
    );
    assert_close(ra.overlap(), 200.0 / 600.0);
    // The device's level goes to each; the bytes of the overlap are split evenly.
    assert_close(ra.value(SM_ACTIVE).unwrap(), 90.0);
    assert_close(rb.value(SM_ACTIVE).unwrap(), 90.0);
    assert_close(ra.value(DRAM_READ_PER_SECOND).unwrap(), rate * 500e-9);
    assert_close(
        ra.value(DRAM_READ_PER_SECOND).unwrap() + rb.value(DRAM_READ_PER_SECOND).unwrap(),
        rate * 1_000e-9,
    );
    // c ran where no sample was.
    assert_eq!((rc.covered_time, rc.samples), (0, 0));
    assert!(rc.metrics.is_empty() && !rc.statistical());
}

#[test]
fn devices_are_kept_apart_and_rows_sum_over_them() {
    let mut a = Attribution::new();
    a.add_sample("h", &sample(0, 0, 10 * MS, &[(SM_ACTIVE, 80.0)]));
    a.add_sample("h", &sample(1, 0, 10 * MS, &[(SM_ACTIVE, 20.0)]));
    let k: Arc<str> = Arc::from("k");
    a.add_kernel("h", 0, &k, 0, 10 * MS);
    a.add_kernel("h", 1, &k, 0, 10 * MS);
    a.add_kernel("h", 1, &Arc::from("only1"), 0, 5 * MS);
    // The same ordinal on another host is another device.
    a.add_kernel("other", 0, &Arc::from("elsewhere"), 0, 5 * MS);
    let r = a.attribute();
    assert_eq!(r.devices.len(), 3);
    let k = row(&r, "k");
    assert_eq!((k.launches, k.samples), (2, 2));
    assert_close(k.value(SM_ACTIVE).unwrap(), 50.0);
    assert_close(row(&r, "only1").value(SM_ACTIVE).unwrap(), 20.0);
    assert_eq!(
        row(&r, "only1").overlapped_time,
        5 * MS,
        "beside k on device 1"
    );
    assert_eq!(row(&r, "elsewhere").covered_time, 0);
    // Rows by GPU time, longest first.
    let names: Vec<&str> = r.kernels.iter().map(|k| &*k.name).collect();
    assert_eq!(names, ["k", "elsewhere", "only1"]);
}

// Two hosts in one merged file: a process stream and a counter stream each, their monotonic clocks 4 ms apart.

fn header(stream: u32, pid: u32) -> TraceItem {
    TraceItem::Header {
        stream,
        header: StreamHeader::new(pid, 0, TimestampClock::Monotonic),
    }
}

fn host_records(host: &str, monotonic: u64) -> [Record; 2] {
    [
        Record::ClockAnchor(ClockAnchor {
            monotonic,
            realtime: 1_700_000_000_000_000_000,
            uncertainty: 50,
        }),
        Record::ProcessInfo(ProcessInfo {
            host: host.into(),
            boot_id: format!("boot-{host}"),
            labels: vec![],
        }),
    ]
}

fn kernel(name: &str, start: u64, end: u64) -> Record {
    Record::Kernel(KernelRecord {
        start,
        end,
        device: 0,
        context: 1,
        stream: 7,
        correlation: 1,
        grid_id: 1,
        grid: [1, 1, 1],
        block: [32, 1, 1],
        static_shared: 0,
        dynamic_shared: 0,
        registers: 8,
        graph_id: 0,
        graph_node_id: 0,
        name: Arc::from(name),
    })
}

/// Host a's clock reads `base` when host b's reads `base + 4 ms`; each host's kernel runs 1 ms after the anchor,
/// under samples of its own host (SM active 70 on a, 30 on b).
fn two_hosts() -> Analysis {
    let mut an = Analysis::new();
    let base = 100 * MS;
    for (host, offset, sm, first) in [("a", 0, 70.0, 0), ("b", 4 * MS, 30.0, 2)] {
        let now = base + offset;
        let (process, counters) = (first, first + 1);
        an.add_item(0, &header(process, 1000 + first));
        an.add_item(0, &header(counters, 0));
        for r in host_records(host, now) {
            an.add((0, process), &r);
            an.add((0, counters), &r);
        }
        an.add(
            (0, process),
            &Record::ProcessStart(ProcessStart {
                pid: 1000 + first,
                parent_pid: 1,
                time: now,
                command: format!("train on {host}"),
            }),
        );
        an.add(
            (0, process),
            &kernel(&format!("k_{host}"), now + MS, now + 2 * MS),
        );
        an.add(
            (0, process),
            &Record::ProcessEnd(ProcessEnd {
                time: now + 3 * MS,
                reason: EndReason::Exit,
                records: 4,
                dropped: 0,
                skipped: 0,
                callback_panics: 0,
            }),
        );
        for i in 0..4 {
            let s = sample(0, now + i * MS, now + (i + 1) * MS, &[(SM_ACTIVE, sm)]);
            an.add((0, counters), &Record::CounterSample(s));
        }
    }
    an
}

#[test]
fn two_hosts_in_one_file_meet_their_own_samples_on_the_common_timeline() {
    let an = two_hosts();
    let r = an.counter_attribution();
    let (ka, kb) = (row(&r, "k_a"), row(&r, "k_b"));
    // Each kernel is covered by its own host's samples, shifted as its process stream is.
    assert_eq!((ka.covered_time, kb.covered_time), (MS, MS));
    assert_close(ka.value(SM_ACTIVE).unwrap(), 70.0);
    assert_close(kb.value(SM_ACTIVE).unwrap(), 30.0);
    let hosts: Vec<&str> = r.devices.iter().map(|d| &*d.device.host).collect();
    assert_eq!(hosts, ["a", "b"]);

    // The counter streams are not traced processes.
    let processes = an.report("processes").unwrap();
    assert_eq!(processes.rows.len(), 2, "{processes:#?}");
    assert!(
        processes
            .notes
            .iter()
            .any(|n| n == "2 streams hold the tracer's device counters, not traced processes (see cuda_gpu_kern_counters_sum)"),
        "{:#?}",
        processes.notes
    );
    assert!(!format!("{processes:?}").contains("crashed or killed"));
    // The report is among the default ones, after the kernels.
    let names: Vec<&str> = an.reports().iter().map(|t| t.name).collect();
    let at = names
        .iter()
        .position(|n| *n == "cuda_gpu_kern_counters_sum");
    assert_eq!(
        at,
        names
            .iter()
            .position(|n| *n == "cuda_gpu_kern_sum")
            .map(|i| i + 1)
    );
}

#[test]
fn the_report_has_a_row_per_name_and_a_line_per_device() {
    let an = two_hosts();
    let t = an.report("cuda_gpu_kern_counters_sum").unwrap();
    let col = |name: &str| t.columns.iter().position(|c| *c == name).unwrap();
    assert_eq!(t.rows.len(), 2);
    let a = t
        .rows
        .iter()
        .find(|r| r[col("Name")] == Cell::Text("k_a".into()))
        .unwrap();
    assert_eq!(a[col("GPU Time (ns)")], Cell::Int(MS));
    assert_eq!(a[col("Launches")], Cell::Int(1));
    assert_eq!(a[col("Samples")], Cell::Int(1));
    assert_eq!(a[col("SM Active (%)")], Cell::Float(70.0));
    assert_eq!(a[col("Covered (%)")], Cell::Float(100.0));
    assert_eq!(a[col("Attribution")], Cell::Text("direct".into()));
    // Not sampled: missing.
    for c in [
        "Tensor Active (%)",
        "Occupancy (%)",
        "DRAM Read (B)",
        "DRAM Write (B)",
    ] {
        assert_eq!(a[col(c)], Cell::Missing, "{c}");
    }
    let mut text = Vec::new();
    t.write_text(&mut text).unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(
        text.contains("GPU 0 on a: 4 samples, 1.000 ms each (median); 0 lost, 0 gaps; kernels ran in 25.0% of the sampled time"),
        "{text}"
    );
    let mut json = Vec::new();
    t.write_json(&mut json).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
    assert!(v["rows"][0]["DRAM Read (B)"].is_null(), "{v}");

    // Asked for by name without samples: no rows, and why.
    let empty = Analysis::new()
        .report("cuda_gpu_kern_counters_sum")
        .unwrap();
    assert!(empty.rows.is_empty());
    assert!(
        empty.notes[0].contains("no counter samples"),
        "{:?}",
        empty.notes
    );
    assert!(
        !Analysis::new()
            .reports()
            .iter()
            .any(|t| t.name == "cuda_gpu_kern_counters_sum")
    );
}

// Properties over random timelines of one device: disjoint samples (with holes), kernels of three names anywhere
// (overlapping each other or not).

#[derive(Debug, Clone)]
struct Timeline {
    /// (start, end, SM active, DRAM read B/s)
    samples: Vec<(u64, u64, f64, f64)>,
    /// (name, start, end)
    kernels: Vec<(usize, u64, u64)>,
}

const NAMES: [&str; 3] = ["a", "b", "c"];

fn timeline() -> impl Strategy<Value = Timeline> {
    let samples =
        prop::collection::vec((0u64..300, 1u64..2_000, 0.0f64..100.0, 0.0f64..1e12), 0..10);
    let kernels = prop::collection::vec((0usize..3, 0u64..12_000, 0u64..3_000), 0..16);
    (samples, kernels).prop_map(|(samples, kernels)| {
        let mut at = 0;
        let samples = samples
            .into_iter()
            .map(|(hole, len, sm, read)| {
                let start = at + hole;
                at = start + len;
                (start, at, sm, read)
            })
            .collect();
        let kernels = kernels
            .into_iter()
            .map(|(n, start, len)| (n, start, start + len))
            .collect();
        Timeline { samples, kernels }
    })
}

fn attribution(t: &Timeline) -> Attribution {
    let mut a = Attribution::new();
    for &(start, end, sm, read) in &t.samples {
        a.add_sample(
            "h",
            &sample(
                0,
                start,
                end,
                &[(OCCUPANCY, sm), (DRAM_READ_PER_SECOND, read)],
            ),
        );
    }
    for &(n, start, end) in &t.kernels {
        a.add_kernel("h", 0, &Arc::from(NAMES[n]), start, end);
    }
    a
}

/// The integral of the DRAM read rate over the union of the kernels, computed point by point.
fn read_over_union(t: &Timeline) -> f64 {
    let mut points: Vec<u64> = t
        .samples
        .iter()
        .flat_map(|s| [s.0, s.1])
        .chain(t.kernels.iter().flat_map(|k| [k.1, k.2]))
        .collect();
    points.sort_unstable();
    points.dedup();
    points
        .windows(2)
        .map(|w| {
            let (a, b) = (w[0], w[1]);
            let busy = t.kernels.iter().any(|k| k.1 <= a && b <= k.2);
            let rate = t.samples.iter().find(|s| s.0 <= a && b <= s.1).map(|s| s.3);
            match (busy, rate) {
                (true, Some(r)) => r * (b - a) as f64 * 1e-9,
                _ => 0.0,
            }
        })
        .sum()
}

proptest! {
    #[test]
    fn attributed_bytes_never_exceed_the_samples_over_the_kernels(t in timeline()) {
        let r = attribution(&t).attribute();
        let attributed: f64 = r.kernels.iter().filter_map(|k| k.value(DRAM_READ_PER_SECOND)).sum();
        let union = read_over_union(&t);
        prop_assert!(attributed <= union * (1.0 + 1e-9) + 1e-6, "{attributed} > {union}");
        // No idle time is attributed, and none is lost: they are equal.
        prop_assert!(close(attributed, union) || (attributed - union).abs() < 1e-6, "{attributed} != {union}");
    }

    #[test]
    fn shares_of_a_sample_sum_to_at_most_one(t in timeline()) {
        let shares = attribution(&t).sample_shares();
        prop_assert_eq!(shares.len(), t.samples.len());
        for s in shares {
            let sum: f64 = s.shares.iter().map(|x| x.1).sum();
            prop_assert!(sum <= 1.0 + 1e-9, "{s:?}");
            prop_assert!(s.shares.iter().all(|x| x.1 > 0.0));
        }
    }

    #[test]
    fn a_level_stays_within_the_samples_it_rests_on(t in timeline()) {
        let r = attribution(&t).attribute();
        for k in &r.kernels {
            let n = NAMES.iter().position(|n| *n == &*k.name).unwrap();
            let involved: Vec<f64> = t
                .samples
                .iter()
                .filter(|s| t.kernels.iter().any(|kk| kk.0 == n && kk.1.max(s.0) < kk.2.min(s.1)))
                .map(|s| s.2)
                .collect();
            match k.value(OCCUPANCY) {
                Some(v) => {
                    let lo = involved.iter().copied().fold(f64::INFINITY, f64::min);
                    let hi = involved.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    prop_assert!(lo - 1e-9 <= v && v <= hi + 1e-9, "{v} outside [{lo}, {hi}]");
                    prop_assert_eq!(k.samples, involved.len() as u64);
                }
                None => prop_assert!(involved.is_empty()),
            }
            prop_assert!(k.covered_time <= k.gpu_time);
            prop_assert!(k.overlapped_time <= k.gpu_time);
        }
    }
}

// Real kernel timelines (the recorded fixtures of tests/fixtures/traces/) under synthetic samples: a counter
// stream of the fixture's host, anchored as its processes are, with constant values per device.

/// The fixture's records with a counter stream added as file 1: 1 ms samples over each device's kernels, SM active
/// `sm[device]` and DRAM read `1e11 × (device + 1)` B/s. Returns the analysis and each device's kernel spans.
fn fixture_with_samples(name: &str, sm: [f64; 2]) -> (Analysis, Vec<Vec<(u64, u64)>>) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/traces")
        .join(name);
    let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut an = Analysis::new();
    let mut info: Option<ProcessInfo> = None;
    let mut anchor: Option<ClockAnchor> = None;
    let mut spans: Vec<Vec<(u64, u64)>> = vec![Vec::new(); 2];
    for item in gpu_tools_trace::file::TraceReader::new(std::io::BufReader::new(file)) {
        let item = item.expect("a whole fixture");
        if let TraceItem::Record { record, stream } = &item {
            match record {
                // The first stream's: the others are of the same host and boot.
                Record::ProcessInfo(i) if *stream == 0 => info = Some(i.clone()),
                Record::ClockAnchor(a) if *stream == 0 && anchor.is_none() => anchor = Some(*a),
                Record::Kernel(k) => spans[k.device as usize].push((k.start, k.end)),
                _ => {}
            }
        }
        an.add_item(0, &item);
    }
    let (info, anchor) = (info.expect("process info"), anchor.expect("a clock anchor"));
    an.add_item(1, &header(0, 0));
    an.add((1, 0), &Record::ClockAnchor(anchor));
    an.add((1, 0), &Record::ProcessInfo(info));
    for (device, kernels) in spans.iter().enumerate() {
        let (Some(first), Some(last)) = (
            kernels.iter().map(|k| k.0).min(),
            kernels.iter().map(|k| k.1).max(),
        ) else {
            continue;
        };
        let mut t = first - first % MS;
        while t < last {
            let values = [
                (OCCUPANCY, sm[device]),
                (DRAM_READ_PER_SECOND, 1e11 * (device + 1) as f64),
            ];
            an.add(
                (1, 0),
                &Record::CounterSample(sample(device as u32, t, t + MS, &values)),
            );
            t += MS;
        }
    }
    (an, spans)
}

/// Total length of the union of spans.
fn union(spans: &[(u64, u64)]) -> u64 {
    let mut s = spans.to_vec();
    s.sort_unstable();
    let (mut total, mut reached) = (0, 0);
    for (start, end) in s {
        let start = start.max(reached);
        if end > start {
            total += end - start;
            reached = end;
        }
    }
    total
}

#[test]
fn a_recorded_torch_loop_under_constant_samples_gets_their_values_everywhere() {
    let (an, spans) = fixture_with_samples("torch_loop.gputrace", [75.0, 0.0]);
    let r = an.counter_attribution();
    assert!(r.kernels.len() > 10, "{} kernel names", r.kernels.len());
    for k in &r.kernels {
        assert_eq!(k.covered_time, k.gpu_time, "{} fully covered", k.name);
        if k.gpu_time > 0 {
            assert_close(k.value(OCCUPANCY).unwrap(), 75.0);
        }
    }
    // Every kernel's bytes together: the rate over the time some kernel ran, nothing more, nothing less.
    let bytes: f64 = r
        .kernels
        .iter()
        .filter_map(|k| k.value(DRAM_READ_PER_SECOND))
        .sum();
    assert!(
        (bytes - 1e11 * union(&spans[0]) as f64 * 1e-9).abs() < 1.0,
        "{bytes}"
    );
    let launches: u64 = r.kernels.iter().map(|k| k.launches).sum();
    assert_eq!(launches, spans[0].len() as u64);
    // The report: one row per name, none missing a value, and the device's line.
    let t = an.report("cuda_gpu_kern_counters_sum").unwrap();
    assert_eq!(t.rows.len(), r.kernels.len());
    assert!(
        t.notes.iter().any(|n| n.starts_with("GPU 0 on ")),
        "{:?}",
        t.notes
    );
}

#[test]
fn a_recorded_two_rank_job_keeps_its_two_devices_apart() {
    let (an, spans) = fixture_with_samples("ddp_2rank.gputrace", [80.0, 20.0]);
    assert!(
        !spans[0].is_empty() && !spans[1].is_empty(),
        "a rank on each device"
    );
    let r = an.counter_attribution();
    let sampled: Vec<u32> = r
        .devices
        .iter()
        .filter(|d| d.samples > 0)
        .map(|d| d.device.device)
        .collect();
    assert_eq!(sampled, [0, 1]);
    for k in &r.kernels {
        if let Some(v) = k.value(OCCUPANCY) {
            assert!((20.0 - 1e-9..=80.0 + 1e-9).contains(&v), "{}: {v}", k.name);
        }
    }
    let bytes: f64 = r
        .kernels
        .iter()
        .filter_map(|k| k.value(DRAM_READ_PER_SECOND))
        .sum();
    let want = (1e11 * union(&spans[0]) as f64 + 2e11 * union(&spans[1]) as f64) * 1e-9;
    assert!((bytes - want).abs() < 1.0, "{bytes} against {want}");
    // The ranks are processes; the counter stream is not.
    assert_eq!(an.report("processes").unwrap().rows.len(), 3);
}
