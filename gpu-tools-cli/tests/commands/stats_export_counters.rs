//! `gpu-tools stats` and `gpu-tools export` on a trace with a counter stream: counters per kernel in the reports,
//! counter tracks per device in the export, on the kernels' time base.

use std::path::{Path, PathBuf};

use gpu_tools::trace::counters::{
    DRAM_READ_PER_SECOND, DRAM_WRITE_PER_SECOND, OCCUPANCY, SM_ACTIVE, TENSOR_ACTIVE,
};
use gpu_tools::trace::file::TraceFileWriter;
use gpu_tools::trace::*;
use gpu_tools_testing::perfetto;
use gpu_tools_testing::records::{counter_sample, kernel, stream_of_host};

use super::stats_export::{gpu_tools, s, trace_file};

const MS: u64 = 1_000_000;

/// A trace of one process and its host's counter stream (the tracer's: pid 0): 20 samples of 1 ms of the default
/// set; `copy` runs 10 ms alone under samples of SM active 80 and 100 GB/s read, 50 GB/s written; `scale` runs
/// 100 µs in each of six samples of SM active 3 (a tenth of each: statistical; 30 while it ran).
fn counter_trace(dir: &Path) -> PathBuf {
    let base = 50 * MS;
    let mut records = vec![Record::ProcessStart(ProcessStart {
        pid: 100,
        parent_pid: 1,
        time: base,
        command: "train.py".into(),
    })];
    records.push(kernel(
        "_Z4copyPKfPfm",
        base + 2 * MS + MS / 2,
        base + 12 * MS + MS / 2,
        1,
    ));
    for i in 0..6 {
        let t = base + (14 + i) * MS + 200_000;
        records.push(kernel(
            "scale",
            t,
            t + 100_000,
            2 + u32::try_from(i).unwrap(),
        ));
    }
    records.push(Record::ProcessEnd(ProcessEnd {
        time: base + 30 * MS,
        reason: EndReason::Exit,
        records: 10,
        dropped: 0,
        skipped: 0,
        callback_panics: 0,
    }));
    let process = stream_of_host(100, "gpu-host", base, &records);
    let mut samples = Vec::new();
    for i in 0..20 {
        let sm = if i < 14 { 80.0 } else { 3.0 };
        samples.push(counter_sample(
            0,
            base + i * MS,
            base + (i + 1) * MS,
            &[
                (SM_ACTIVE, sm),
                (TENSOR_ACTIVE, 40.0),
                (OCCUPANCY, 55.0),
                (DRAM_READ_PER_SECOND, 1e11),
                (DRAM_WRITE_PER_SECOND, 5e10),
            ],
        ));
    }
    samples.push(Record::CounterGap(CounterGap {
        start: base + 20 * MS,
        end: base + 21 * MS,
        device: 0,
        samples: 1,
    }));
    let counters = stream_of_host(0, "gpu-host", base, &samples);
    let mut w = TraceFileWriter::new(Vec::new()).unwrap();
    for bytes in [process, counters] {
        let s = w.add_stream();
        w.write(s, &bytes).unwrap();
        w.close(s).unwrap();
    }
    let path = dir.join("counters.gputrace");
    std::fs::write(&path, w.finish().unwrap()).unwrap();
    path
}

#[test]
fn stats_shows_counters_per_kernel_when_the_trace_holds_samples() {
    let dir = tempfile::tempdir().unwrap();
    let file = counter_trace(dir.path());
    let out = gpu_tools(&["stats", s(&file)]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    let table = text
        .split("** ")
        .find(|t| t.contains("(cuda_gpu_kern_counters_sum)"))
        .unwrap_or_else(|| panic!("the counters table by default: {text}"));
    assert!(
        table.contains("copy(float const*, float*, unsigned long)"),
        "{table}"
    );
    assert!(table.contains("statistical"), "{table}");
    assert!(
        table.contains(
            "note: GPU 0 on gpu-host: 20 samples, 1.000 ms each (median); 1 lost, 1 gap (1.000 ms without samples); \
             kernels ran in 53.0% of the sampled time"
        ),
        "{table}"
    );
    // The counter stream is no traced process.
    let processes = text
        .split("** ")
        .find(|t| t.contains("(processes)"))
        .unwrap();
    assert!(!processes.contains("crashed or killed"), "{processes}");
    assert!(
        processes.contains("1 stream holds the tracer's device counters, not a traced process"),
        "{processes}"
    );

    let out = gpu_tools(&[
        "stats",
        "--format",
        "json",
        "--report",
        "cuda_gpu_kern_counters_sum,processes",
        s(&file),
    ]);
    assert_eq!(out.status.code(), Some(0));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let tables = doc.as_array().unwrap();
    assert_eq!(tables[0]["name"], "cuda_gpu_kern_counters_sum");
    let rows = tables[0]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{doc}");
    let copy = &rows[0];
    assert_eq!(copy["Name"], "copy(float const*, float*, unsigned long)");
    assert_eq!(copy["GPU Time (ns)"], 10 * MS);
    assert_eq!(copy["Launches"], 1);
    assert_eq!(copy["Samples"], 11);
    assert_eq!(copy["Covered (%)"], 100.0);
    // The half-covered samples at each end count their busy half (80 -> at most 100, 40 -> 80).
    assert_eq!(copy["SM Active (%)"], 82.0);
    assert_eq!(copy["Tensor Active (%)"], 44.0);
    assert_eq!(copy["Occupancy (%)"], 55.0);
    // 100 GB/s and 50 GB/s over 10 ms.
    assert_eq!(copy["DRAM Read (B)"], 1_000_000_000u64);
    assert_eq!(copy["DRAM Write (B)"], 500_000_000u64);
    assert_eq!(copy["Overlap (%)"], 0.0);
    assert_eq!(copy["Attribution"], "direct");
    let scale = &rows[1];
    assert_eq!(scale["Name"], "scale");
    assert_eq!(
        (scale["Launches"].as_u64(), scale["Samples"].as_u64()),
        (Some(6), Some(6))
    );
    assert_eq!(scale["SM Active (%)"], 30.0);
    assert_eq!(
        scale["Shared (%)"]
            .as_f64()
            .map(|v| (v * 1e6).round() / 1e6),
        Some(90.0)
    );
    assert_eq!(scale["Attribution"], "statistical");
    // Each sample's 100 GB/s over 100 µs, six times.
    assert_eq!(scale["DRAM Read (B)"], 60_000_000u64);
    assert_eq!(
        tables[1]["rows"].as_array().unwrap().len(),
        1,
        "one process"
    );

    let out = gpu_tools(&[
        "stats",
        "--raw-names",
        "--format",
        "csv",
        "--report",
        "cuda_gpu_kern_counters_sum",
        s(&file),
    ]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains(",_Z4copyPKfPfm\n"));

    // A trace without counter samples: no counters table unless asked for, and then empty with the reason.
    let plain = trace_file(dir.path());
    let out = gpu_tools(&["stats", s(&plain)]);
    assert!(!String::from_utf8_lossy(&out.stdout).contains("cuda_gpu_kern_counters_sum"));
    let out = gpu_tools(&["stats", "--report", "cuda_gpu_kern_counters_sum", s(&plain)]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("(no data)") && text.contains("no counter samples"),
        "{text}"
    );
}

#[test]
fn export_writes_counter_tracks_per_device_on_the_kernels_time_base() {
    let dir = tempfile::tempdir().unwrap();
    let file = counter_trace(dir.path());
    let pb = dir.path().join("t.perfetto-trace");
    assert_eq!(
        gpu_tools(&["export", s(&file), "--perfetto", s(&pb)])
            .status
            .code(),
        Some(0)
    );
    let bytes = std::fs::read(&pb).unwrap();
    let counters = perfetto::counters(&bytes);
    let tracks: Vec<(&str, &str, &str)> = counters
        .iter()
        .map(|c| (c.group.as_str(), c.name.as_str(), c.unit.as_str()))
        .collect();
    println!("{} bytes, counter tracks: {tracks:#?}", bytes.len());
    let group = "GPU 0 counters [gpu-host]";
    assert_eq!(
        tracks,
        [
            (group, "SM active (%)", "%"),
            (group, "tensor active (%)", "%"),
            (group, "achieved occupancy (%)", "%"),
            (group, "DRAM read (B/s)", "B/s"),
            (group, "DRAM write (B/s)", "B/s"),
        ]
    );
    let sm = &counters[0].values;
    // 20 values at the samples' starts, then 0 from the gap on.
    assert_eq!(sm.len(), 21);
    assert_eq!(sm[0], (50 * MS, 80.0));
    assert_eq!(sm[14], (64 * MS, 3.0));
    assert_eq!(sm[20], (70 * MS, 0.0));

    let json = dir.path().join("t.json");
    assert_eq!(
        gpu_tools(&["export", s(&file), "--chrome", s(&json)])
            .status
            .code(),
        Some(0)
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let events = doc["traceEvents"].as_array().unwrap();
    let counter_events = events.iter().filter(|e| e["ph"] == "C").count();
    assert_eq!(counter_events, 5 * 21);
    // The copy kernel at its time, demangled, on the same time base (µs).
    assert!(events.iter().any(|e| e["ph"] == "X"
        && e["name"] == "copy(float const*, float*, unsigned long)"
        && e["ts"].as_f64() == Some(52_500.0)));
    assert!(events.iter().any(|e| e["ph"] == "C"
        && e["name"] == "SM active (%)"
        && e["ts"].as_f64() == Some(50_000.0)
        && e["args"]["value"].as_f64() == Some(80.0)));
}
