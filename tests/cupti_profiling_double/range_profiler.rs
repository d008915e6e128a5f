//! The range profiler: auto and user ranges, passes, ranges beyond the image.

use super::*;

#[test]
fn auto_ranges_give_one_range_per_kernel() {
    let (_g, d) = serial();
    let ctx = Context::primary(0).unwrap();
    let mut p = RangeProfiler::builder(&ctx)
        .metrics([DRAM, "dram__bytes_write.sum"])
        .start()
        .unwrap();
    assert_eq!((p.chip(), p.passes_needed()), ("GH100", 1));
    d.launch(c"copy");
    d.launch(c"scale");
    let r = p.results().unwrap();
    assert_eq!(
        r.ranges.iter().map(|x| x.name.as_str()).collect::<Vec<_>>(),
        vec!["copy", "scale"]
    );
    assert_eq!(r.value(1, "dram__bytes_write.sum"), Some(201.0));
    assert_eq!(r.dropped, 0);
    assert!(p.push_range("x").is_err(), "no user ranges in auto mode");
    p.resume().unwrap();
    d.launch(c"again");
    assert_eq!(p.results().unwrap().ranges.len(), 1);
    drop(p);
    assert_eq!(d.counts().range_enabled, 0);
}

#[test]
fn user_ranges_replay_until_every_pass_is_in() {
    let (_g, _d) = serial();
    let ctx = Context::primary(0).unwrap();
    let mut p = RangeProfiler::builder(&ctx)
        .metrics(["sm__throughput.avg.pct_of_peak_sustained_elapsed"])
        .range(RangeMode::User)
        .replay(Replay::User)
        .nesting(2, 1)
        .start()
        .unwrap();
    assert_eq!(p.passes_needed(), 2);
    let passes = p
        .run_passes(|p| {
            p.push_range("step")?;
            p.push_range("inner")?;
            p.pop_range()?;
            p.pop_range()
        })
        .unwrap();
    assert_eq!(passes, 2);
    let r = p.results().unwrap();
    let names: Vec<&str> = r.iter().map(|(n, _, _)| n).collect();
    assert_eq!(names, vec!["step/inner", "step"]);
    assert!(matches!(
        p.pop_range().map_err(profiling),
        Err(ProfilingError::State(_))
    ));
}

#[test]
fn ranges_beyond_the_image_are_counted() {
    let (_g, d) = serial();
    let ctx = Context::primary(0).unwrap();
    let mut p = RangeProfiler::builder(&ctx)
        .metrics([DRAM])
        .max_ranges(2)
        .start()
        .unwrap();
    for _ in 0..5 {
        d.launch(c"k");
    }
    let r = p.results().unwrap();
    assert_eq!((r.ranges.len(), r.dropped), (2, 3));
    assert!(matches!(
        RangeProfiler::builder(&ctx)
            .metrics([DRAM])
            .max_ranges(0)
            .start()
            .map_err(profiling),
        Err(ProfilingError::BufferTooSmall { .. })
    ));
}
