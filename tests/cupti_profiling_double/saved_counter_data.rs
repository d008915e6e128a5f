//! Counter data saved by the samplers evaluates to the same values; results survive a profiler that cannot be
//! configured again.

use super::*;
use gpu_tools::cupti::profiler::image::{CounterDataFile, RecordInfo};

#[test]
fn saved_range_counter_data_evaluates_to_the_same_values() {
    let (_g, d) = serial();
    let ctx = Context::primary(0).unwrap();
    let mut p = RangeProfiler::builder(&ctx)
        .metrics([DRAM, SM])
        .keep_counter_data(true)
        .start()
        .unwrap();
    d.launch(c"copy");
    d.launch(c"copy");
    let r = p.results().unwrap();
    let file = CounterDataFile {
        method: Method::RangeProfiler,
        chip: p.chip().to_string(),
        metrics: r.metrics.clone(),
        records: r
            .ranges
            .iter()
            .map(|x| RecordInfo {
                name: x.name.clone(),
                start: 0,
                end: 0,
            })
            .collect(),
        image: r.counter_data.clone().expect("kept"),
    };
    let back = CounterDataFile::parse(&file.to_bytes()).unwrap();
    // SAFETY: the image is the one the (double's) CUPTI wrote, read back with a matching hash.
    let evaluated = unsafe { back.evaluate() }.unwrap();
    assert_eq!(evaluated.len(), 2);
    for (e, range) in evaluated.iter().zip(&r.ranges) {
        assert_eq!((&e.name, &e.values), (&range.name, &range.values));
    }
}

#[test]
fn saved_pm_counter_data_evaluates_to_the_same_values() {
    let (_g, d) = serial();
    let saved = Arc::new(Mutex::new(Vec::new()));
    let s2 = Arc::clone(&saved);
    let s = pm(&[SM, DRAM])
        .keep_counter_data(true)
        .start_with(move |b| {
            if let Some((image, first)) = b.counter_data() {
                let samples: Vec<_> = b.iter().map(|x| x.to_owned()).collect();
                s2.lock().unwrap().push((image.to_vec(), first, samples));
            }
        })
        .unwrap();
    for i in 0..3u64 {
        d.push_sample(100 * i, 100 * i + 100, i as f64 * 10.0);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while saved
        .lock()
        .unwrap()
        .iter()
        .map(|x| x.2.len())
        .sum::<usize>()
        < 3
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(5));
    }
    s.stop().unwrap();
    let saved = saved.lock().unwrap();
    let (image, first, samples) = saved
        .iter()
        .find(|x| !x.2.is_empty())
        .expect("a batch with samples");
    let file = CounterDataFile {
        method: Method::PmSampling,
        chip: "GH100".into(),
        metrics: vec![SM.into(), DRAM.into()],
        records: Vec::new(),
        image: image.clone(),
    };
    // SAFETY: as above.
    let evaluated =
        unsafe { CounterDataFile::parse(&file.to_bytes()).unwrap().evaluate() }.unwrap();
    for (k, s) in samples.iter().enumerate() {
        let e = &evaluated[first + k];
        assert_eq!(
            (e.start, e.end, &e.values),
            (s.start_ns, s.end_ns, &s.values)
        );
    }
}

#[test]
fn saved_pm_counter_data_names_the_image_index_of_each_sample_when_stale_ones_are_left_out() {
    let (_g, d) = serial();
    let saved = Arc::new(Mutex::new(Vec::new()));
    let s2 = Arc::clone(&saved);
    let s = pm(&[SM, DRAM])
        .keep_counter_data(true)
        .start_with(move |b| {
            if let Some((image, first)) = b.counter_data() {
                let samples: Vec<_> = b.iter().map(|x| x.to_owned()).collect();
                s2.lock().unwrap().push((image.to_vec(), first, samples));
            }
        })
        .unwrap();
    // As after an image restart on an H100: a stale zero-length span first, another among the sound ones. Both
    // are left out of the batch, but the image keeps them.
    d.push_sample(7, 7, 0.0);
    d.push_sample(100, 200, 10.0);
    d.push_sample(200, 300, 20.0);
    d.push_sample(7, 7, 30.0);
    d.push_sample(300, 400, 40.0);
    let deadline = Instant::now() + Duration::from_secs(10);
    while saved
        .lock()
        .unwrap()
        .iter()
        .map(|x| x.2.len())
        .sum::<usize>()
        < 3
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(5));
    }
    s.stop().unwrap();
    let saved = saved.lock().unwrap();
    let mut checked = 0;
    for (image, first, samples) in saved.iter() {
        let file = CounterDataFile {
            method: Method::PmSampling,
            chip: "GH100".into(),
            metrics: vec![SM.into(), DRAM.into()],
            records: Vec::new(),
            image: image.clone(),
        };
        // SAFETY: the image is the one the (double's) CUPTI wrote, read back with a matching hash.
        let evaluated =
            unsafe { CounterDataFile::parse(&file.to_bytes()).unwrap().evaluate() }.unwrap();
        for (k, s) in samples.iter().enumerate() {
            let e = &evaluated[first + k];
            assert_eq!(
                (e.start, e.end, &e.values),
                (s.start_ns, s.end_ns, &s.values),
                "sample {k} of the batch from image index {first}"
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 3);
}

#[test]
fn results_survive_a_profiler_that_cannot_be_configured_again() {
    let (_g, d) = serial();
    let ctx = Context::primary(0).unwrap();
    let mut p = RangeProfiler::builder(&ctx)
        .metrics([DRAM])
        .start()
        .unwrap();
    d.launch(c"copy");
    d.fail(c"cuptiRangeProfilerSetConfig", 7);
    let r = p.results().expect("the decoded ranges are returned");
    assert_eq!(r.ranges.len(), 1);
    let e = p.resume().map_err(profiling).unwrap_err();
    assert!(
        matches!(
            e,
            ProfilingError::Vendor {
                call: "cuptiRangeProfilerSetConfig",
                ..
            }
        ),
        "{e}"
    );
    d.clear_failure();
}
