//! The catalogue's checks and their typed errors, configuration images and their passes.

use super::*;

#[test]
fn the_catalogue_lists_metrics_with_their_methods() {
    let (_g, _d) = serial();
    assert_eq!(
        profiler::host::supported_chips().unwrap(),
        vec!["GH100", "TU102"]
    );
    let c = Catalog::for_chip("GH100").unwrap();
    assert_eq!(c.chip(), "GH100");
    assert_eq!(c.metrics().len(), 7);
    let dram = c.get("dram__bytes_read").unwrap();
    assert_eq!(dram.methods, Methods::RANGE_PROFILER | Methods::PM_SAMPLING);
    assert_eq!(dram.unit, "byte");
    assert_eq!(
        c.get("gpu__time_duration").unwrap().methods,
        Methods::RANGE_PROFILER
    );
    let pm: Vec<&str> = c
        .filter(Some(Method::PmSampling), "")
        .map(|m| m.name.as_str())
        .collect();
    assert_eq!(
        pm,
        vec![
            "dram__bytes_read",
            "dram__bytes_write",
            "sm__cycles_active",
            "sm__throughput"
        ]
    );
    assert_eq!(c.filter(None, "DRAM").count(), 2);
    assert!(
        c.submetrics("dram__bytes_read", Method::RangeProfiler)
            .unwrap()
            .contains(&".sum".to_string())
    );
    assert_eq!(
        c.resolve(
            "TPC.TriageCompute.sm__cycles_active.avg",
            Method::RangeProfiler
        )
        .unwrap(),
        "TPC.TriageCompute.sm__cycles_active.avg"
    );
}

#[test]
fn bad_metric_names_get_typed_errors() {
    let (_g, _d) = serial();
    let c = Catalog::for_chip("GH100").unwrap();
    match c.resolve("dram__bytes_reed.sum", Method::RangeProfiler) {
        Err(ProfilingError::UnknownMetric { close, .. }) => {
            assert_eq!(close[0], "dram__bytes_read.sum")
        }
        other => panic!("{other:?}"),
    }
    match c.resolve("gpu__time_duration.sum", Method::PmSampling) {
        Err(ProfilingError::NotSupportedByMethod { other, .. }) => {
            assert_eq!(other, Some(Method::RangeProfiler))
        }
        other => panic!("{other:?}"),
    }
    match c.resolve("dram__bytes_read", Method::RangeProfiler) {
        Err(ProfilingError::BadSubmetric { base, valid, .. }) => {
            assert_eq!(base, "dram__bytes_read");
            assert!(valid.contains(&".sum".to_string()));
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        c.resolve("dram__bytes_read.bogus", Method::RangeProfiler),
        Err(ProfilingError::BadSubmetric { .. })
    ));
    let text = c
        .resolve("dram__bytes_reed.sum", Method::RangeProfiler)
        .unwrap_err()
        .to_string();
    assert!(text.contains("close names: dram__bytes_read.sum"), "{text}");
    match Catalog::for_chip("XX100").map_err(profiling) {
        Err(ProfilingError::UnknownChip { known, .. }) => assert_eq!(known, vec!["GH100", "TU102"]),
        other => panic!("{other:?}"),
    }
}

#[test]
fn configuration_images_say_their_passes() {
    let (_g, _d) = serial();
    let c = Catalog::for_chip("GH100").unwrap();
    let one = c.resolve_all(&[DRAM, SM], Method::RangeProfiler).unwrap();
    let image = ConfigImage::build("GH100", Method::RangeProfiler, None, &one).unwrap();
    assert_eq!((image.bytes().len(), image.passes()), (12, 1));
    let tp = c
        .resolve_all(
            &["sm__throughput.avg.pct_of_peak_sustained_elapsed"],
            Method::PmSampling,
        )
        .unwrap();
    assert_eq!(
        ConfigImage::build("GH100", Method::PmSampling, None, &tp)
            .unwrap()
            .passes(),
        3
    );
    // Every host object made is gone again.
    drop(c);
    assert_eq!(double().counts().hosts_live, 0);
}
