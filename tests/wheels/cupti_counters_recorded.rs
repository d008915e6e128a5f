//! Decodes real counter data recorded on a GPU host by `gpu-tools-testing/programs/cupti_profile_record.rs` and
//! committed under `tests/fixtures/cupti-counters/<name>/` (not `tests/fixtures/cupti/`, whose every folder is an
//! activity-buffer fixture): each saved image is read back (length and hash checked), evaluated with the CUPTI 13.0
//! wheel's metric host (no GPU), and compared with the values the GPU host evaluated, range names and sample
//! timestamps included.
//! `GPU_TOOLS_CUPTI_WHEEL_LIB` names the wheel's library folder; unset, the check is reported as ignored.
//!
//! Recording, on the GPU host: `bash .gpu/run.sh example cupti_profile_record --out DIR`; copy `DIR` to
//! `tests/fixtures/cupti-counters/<gpu>-<cuda>/`.

use crate::wheel;

use std::path::{Path, PathBuf};

use gpu_tools::cupti::CuptiLibrary;
use gpu_tools::cupti::profiler::Method;
use gpu_tools::cupti::profiler::image::CounterDataFile;
use serde_json::Value;

pub fn main() {
    wheel::main(
        &wheel::CUDA13,
        &[wheel::Check {
            name: "recorded_counter_data_decodes_to_the_values_seen_on_the_gpu",
            run: recorded_counter_data_decodes_to_the_values_seen_on_the_gpu,
            without_driver: false,
        }],
        &[],
        include_str!("cupti_counters_recorded.rs"),
    );
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cupti-counters")
}

fn close(a: f64, b: f64) -> bool {
    (a.is_nan() && b.is_nan()) || (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// Checks one fixture folder; returns the records compared.
fn check_folder(dir: &Path) -> usize {
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("manifest.json")).expect("manifest.json"),
    )
    .expect("JSON");
    let mut compared = 0;
    for f in manifest["files"].as_array().expect("files") {
        let name = f["file"].as_str().expect("file name");
        let bytes = std::fs::read(dir.join(name)).expect("counter-data file");
        let file = CounterDataFile::parse(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(file.chip, f["chip"].as_str().expect("chip"), "{name}");
        let method = if f["method"] == "pm" {
            Method::PmSampling
        } else {
            Method::RangeProfiler
        };
        assert_eq!(file.method, method, "{name}");
        // SAFETY: an image CUPTI wrote on the GPU host, read back with its length and hash checked.
        let evaluated = unsafe { file.evaluate() }.unwrap_or_else(|e| panic!("{name}: {e}"));
        let first = f["first_index"].as_u64().unwrap_or(0) as usize;
        let expected = f["records"].as_array().expect("records");
        assert!(!expected.is_empty(), "{name}: no records");
        for (k, want) in expected.iter().enumerate() {
            let got = &evaluated[first + k];
            let values: Vec<f64> = want["values"]
                .as_array()
                .expect("values")
                .iter()
                .map(|v| v.as_f64().unwrap_or(f64::NAN))
                .collect();
            assert_eq!(got.values.len(), values.len(), "{name} record {k}");
            for (g, w) in got.values.iter().zip(&values) {
                assert!(
                    close(*g, *w),
                    "{name} record {k}: {g} here, {w} on the GPU host"
                );
            }
            if let Some(n) = want["name"].as_str() {
                assert_eq!(got.name, n, "{name} record {k}");
            }
            if let (Some(s), Some(e)) = (want["start"].as_u64(), want["end"].as_u64()) {
                // CUPTI may not give timestamps without its sampler; the values must match where it does.
                if got.start != 0 {
                    assert_eq!((got.start, got.end), (s, e), "{name} record {k}");
                }
            }
            compared += 1;
        }
        if let Some(copies) = f["bytes_per_copy"].as_array() {
            // The range profiler's DRAM bytes against the bytes each copy moved (larger than L2): within 2%.
            for (k, bytes) in copies.iter().enumerate() {
                let bytes = bytes.as_f64().expect("bytes");
                let read = evaluated[k].values[0];
                assert!(
                    (read - bytes).abs() <= 0.02 * bytes,
                    "{name} copy {k}: read {read} for {bytes}"
                );
            }
        }
    }
    compared
}

fn recorded_counter_data_decodes_to_the_values_seen_on_the_gpu(lib: &Path) {
    CuptiLibrary::load_from(lib.join("libcupti.so.13")).expect("the wheel's CUPTI");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root())
        .expect("fixture folder")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    assert!(
        !dirs.is_empty(),
        "{} holds no fixture folder",
        root().display()
    );
    for d in dirs {
        let n = check_folder(&d);
        eprintln!(
            "{}: {n} ranges and samples match the GPU host's values",
            d.display()
        );
        assert!(n > 0);
    }
}
