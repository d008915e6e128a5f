//! The metric catalogue of the real CUPTI 13.0 libraries (`nvidia-cuda-cupti` 13.0.85 from PyPI), on a machine
//! without a GPU or driver: `libnvperf_host.so` is found beside the loaded `libcupti`, the chips and GH100's
//! metrics are listed per method, names are checked with typed errors, and configuration images are built.
//! `GPU_TOOLS_CUPTI_WHEEL_LIB` names the wheel's `nvidia/cu13/lib` (CI sets it; unset elsewhere, the checks are
//! reported as ignored). The catalogue is printed, for the record.
use crate::wheel;

use std::path::Path;

use gpu_tools::cupti::CuptiLibrary;
use gpu_tools::cupti::profiler::host::{Catalog, ConfigImage, Methods};
use gpu_tools::cupti::profiler::{Method, MetricKind, NvperfHost, ProfilingError};

pub fn main() {
    wheel::main(
        &wheel::CUDA13,
        &[
            wheel::Check {
                name: "the_real_catalogue_of_gh100",
                run: the_real_catalogue_of_gh100,
                without_driver: false,
            },
            wheel::Check {
                name: "real_names_are_checked_with_typed_errors",
                run: real_names_are_checked_with_typed_errors,
                without_driver: false,
            },
            wheel::Check {
                name: "real_configuration_images",
                run: real_configuration_images,
                without_driver: false,
            },
        ],
        &[],
        include_str!("cupti_profiling_wheel.rs"),
    );
}

fn load(dir: &Path) {
    CuptiLibrary::load_from(dir.join("libcupti.so.13")).expect("the wheel's CUPTI loads");
}

fn the_real_catalogue_of_gh100(dir: &Path) {
    load(dir);
    let chips = gpu_tools::cupti::profiler::host::supported_chips().expect("chips");
    println!("supported chips ({}): {}", chips.len(), chips.join(" "));
    // CUPTI opens libnvperf_host.so itself; the crate found it beside the loaded libcupti.
    let nvperf = NvperfHost::get().expect("libnvperf_host.so loaded before CUPTI looked for it");
    assert_eq!(nvperf.path(), Some(dir.join("libnvperf_host.so").as_path()));
    assert_eq!(chips.len(), 30);
    assert!(chips.iter().any(|c| c == "GH100") && chips.iter().any(|c| c == "GA100"));

    let c = Catalog::for_chip("GH100").expect("GH100 catalogue");
    let range = c.filter(Some(Method::RangeProfiler), "").count();
    let pm = c.filter(Some(Method::PmSampling), "").count();
    println!(
        "GH100: {} base metrics, {range} for the range profiler, {pm} for PM sampling",
        c.metrics().len()
    );
    assert_eq!((range, pm), (3650, 1279));
    for kind in MetricKind::ALL {
        println!(
            "  {}: {}",
            kind.name(),
            c.metrics().iter().filter(|m| m.kind == kind).count()
        );
    }
    let dram = c.get("dram__bytes_read").expect("dram__bytes_read");
    assert_eq!(
        (dram.unit.as_str(), dram.hw_unit.as_str(), dram.kind),
        ("byte", "dram", MetricKind::Counter)
    );
    assert_eq!(dram.methods, Methods::RANGE_PROFILER | Methods::PM_SAMPLING);
    println!("gpu-tools metrics --chip GH100 --method pm dram__bytes:");
    for m in c.filter(Some(Method::PmSampling), "dram__bytes") {
        println!(
            "  {:32} {:10} {:10} {:8} {}",
            m.name,
            m.kind.name(),
            m.unit,
            m.methods.names(),
            m.description
        );
    }
    assert!(c.filter(Some(Method::PmSampling), "dram__bytes").count() >= 3);
}

fn real_names_are_checked_with_typed_errors(dir: &Path) {
    load(dir);
    let c = Catalog::for_chip("GH100").expect("catalogue");
    let e = c
        .resolve("dram__bytes_reed.sum", Method::RangeProfiler)
        .unwrap_err();
    println!("{e}");
    assert!(
        matches!(&e, ProfilingError::UnknownMetric { close, .. } if close[0] == "dram__bytes_read.sum"),
        "{e}"
    );
    let e = c
        .resolve("dram__bytes_read", Method::RangeProfiler)
        .unwrap_err();
    println!("{e}");
    assert!(
        matches!(&e, ProfilingError::BadSubmetric { valid, .. } if valid.len() == 44),
        "{e}"
    );
    // A metric the range profiler has and PM sampling lacks.
    let range_only = c
        .metrics()
        .iter()
        .find(|m| m.methods == Methods::RANGE_PROFILER && m.kind == MetricKind::Counter)
        .expect("a range-only counter");
    let name = format!("{}.sum", range_only.name);
    let e = c.resolve(&name, Method::PmSampling).unwrap_err();
    println!("{e}");
    assert!(matches!(
        e,
        ProfilingError::NotSupportedByMethod {
            other: Some(Method::RangeProfiler),
            ..
        }
    ));
    let e = Catalog::for_chip("XX100").unwrap_err();
    println!("{e}");
    assert!(e.to_string().contains("GH100"));
}

fn real_configuration_images(dir: &Path) {
    load(dir);
    let c = Catalog::for_chip("GH100").expect("catalogue");
    let two = c
        .resolve_all(
            &[
                "dram__bytes_read.sum",
                "sm__throughput.avg.pct_of_peak_sustained_elapsed",
            ],
            Method::RangeProfiler,
        )
        .expect("known names");
    let image = ConfigImage::build("GH100", Method::RangeProfiler, None, &two).expect("config");
    println!(
        "range profiler, {:?}: {} bytes, {} passes",
        two.names(),
        image.bytes().len(),
        image.passes()
    );
    assert_eq!(image.bytes().len(), 10448);
    let dram = c
        .resolve_all(
            &["dram__bytes_read.sum", "dram__bytes_write.sum"],
            Method::RangeProfiler,
        )
        .expect("names");
    assert_eq!(
        ConfigImage::build("GH100", Method::RangeProfiler, None, &dram)
            .expect("config")
            .passes(),
        1
    );
    let top = [
        "sm__cycles_active.avg.pct_of_peak_sustained_elapsed",
        "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
        "dram__bytes_read.sum.per_second",
        "dram__bytes_write.sum.per_second",
        "sm__warps_active.avg.pct_of_peak_sustained_active",
    ];
    let top = c
        .resolve_all(&top, Method::PmSampling)
        .expect("the top view's metrics");
    let image = ConfigImage::build("GH100", Method::PmSampling, None, &top).expect("config");
    println!(
        "PM sampling, the top view's 5 metrics: {} bytes, {} pass",
        image.bytes().len(),
        image.passes()
    );
    assert_eq!(image.passes(), 1, "PM sampling collects in one pass");
    // `top --prometheus` adds DCGM's DRAM-active and occupancy definitions: still one pass, on each chip
    // generation that has time-based PM sampling.
    let exporter: Vec<&str> = gpu_tools::cupti::top::TOP_METRICS
        .iter()
        .chain(&gpu_tools::cupti::top::EXPORT_METRICS)
        .map(|m| m.metric)
        .collect();
    for chip in ["GH100", "GA102", "AD102", "GB100"] {
        let catalog = Catalog::for_chip(chip).expect("catalogue");
        let names = catalog
            .resolve_all(&exporter, Method::PmSampling)
            .unwrap_or_else(|e| panic!("{chip}: {e}"));
        let image = ConfigImage::build(chip, Method::PmSampling, None, &names).expect("config");
        assert_eq!(
            image.passes(),
            1,
            "{chip}: the exporter's metrics in one pass"
        );
    }
    println!(
        "PM sampling, top --prometheus's {} metrics: 1 pass on GH100, GA102, AD102, GB100",
        exporter.len()
    );
    let tp = c
        .resolve_all(
            &["sm__throughput.avg.pct_of_peak_sustained_elapsed"],
            Method::PmSampling,
        )
        .expect("name");
    let passes = ConfigImage::build("GH100", Method::PmSampling, None, &tp)
        .expect("config")
        .passes();
    println!("PM sampling, sm__throughput.avg.pct_of_peak_sustained_elapsed: {passes} passes");
    assert!(passes > 1);
}
