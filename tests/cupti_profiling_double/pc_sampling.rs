//! PC sampling: samples per function, PC and reason; settings checked.

use super::*;

#[test]
fn pc_samples_come_per_function_pc_and_reason() {
    let (_g, d) = serial();
    let ctx = Context::primary(0).unwrap();
    let mut s = PcSampler::builder(&ctx)
        .period(10)
        .pcs_per_read(2)
        .start()
        .unwrap();
    assert_eq!(s.stall_reasons().len(), 3);
    assert_eq!(
        s.stall_reasons()[0].name,
        "smsp__pcsamp_warps_issue_stalled_long_scoreboard"
    );
    d.pc(c"chase", 0x40, 4, 90);
    d.pc(c"chase", 0x50, 4, 10);
    d.pc(c"chase", 0x40, 17, 3);
    d.pc(c"other", 0x10, 9, 5);
    s.read().unwrap();
    let all = s.finish().unwrap();
    assert_eq!(all.records.len(), 4);
    let f = all.functions();
    assert_eq!(&*f[0].name, "chase");
    assert_eq!(f[0].samples, 103);
    assert_eq!(
        all.reason_name(f[0].top_stall().unwrap().0),
        "smsp__pcsamp_warps_issue_stalled_long_scoreboard"
    );
    assert_eq!(f[0].hot_pcs[0], (0x40, 93));
    assert_eq!(d.counts().pc_enabled, 0);
}

#[test]
fn records_read_while_sampling_and_those_left_at_the_disable_come_once_each_through_separate_buffers()
 {
    let (_g, d) = serial();
    let ctx = Context::primary(0).unwrap();
    let mut s = PcSampler::builder(&ctx).pcs_per_read(2).start().unwrap();
    // Read while sampling: into the sampler's read buffer (the double refuses a read into the configured one).
    d.pc(c"chase", 0x40, 4, 90);
    d.pc(c"chase", 0x50, 4, 10);
    s.read().unwrap();
    assert_eq!(s.collected().records.len(), 2);
    // Left in CUPTI at the finish: the stop writes them into the configured buffer, the next read takes them.
    d.pc(c"other", 0x10, 9, 5);
    d.pc(c"other", 0x20, 17, 7);
    let all = s.finish().unwrap();
    let mut pcs: Vec<(String, u64, u64)> = all
        .records
        .iter()
        .map(|r| {
            let samples = r.stalls.iter().map(|&(_, n)| u64::from(n)).sum();
            (r.function.to_string(), r.pc_offset, samples)
        })
        .collect();
    pcs.sort();
    assert_eq!(
        pcs,
        [
            ("chase".to_string(), 0x40, 90),
            ("chase".to_string(), 0x50, 10),
            ("other".to_string(), 0x10, 5),
            ("other".to_string(), 0x20, 7),
        ]
    );
    assert_eq!(d.counts().pc_enabled, 0);
}

#[test]
fn pcs_the_disable_cannot_fit_in_the_configured_buffer_are_counted_not_dropped_unsaid() {
    let (_g, d) = serial();
    let ctx = Context::primary(0).unwrap();
    let s = PcSampler::builder(&ctx)
        .pcs_per_read(2)
        .pcs_at_disable(2)
        .start()
        .unwrap();
    // Three PCs left at the finish's stop (its read fails: CUPTI_ERROR_UNKNOWN), for a configured buffer of
    // two: the third is lost, and counted.
    d.pc(c"chase", 0x40, 4, 90);
    d.pc(c"chase", 0x50, 4, 10);
    d.pc(c"other", 0x10, 9, 5);
    d.fail(c"cuptiPCSamplingGetData", 999);
    let (all, error) = s.finish_keeping();
    d.clear_failure();
    assert!(error.is_some(), "the read's failure is the finish's error");
    assert_eq!(all.records.len(), 2);
    assert_eq!(all.truncated_pcs, 1);
    assert_eq!(d.counts().pc_enabled, 0);
}

#[test]
fn the_configured_buffer_has_room_beyond_a_read_for_what_the_disable_decodes_last() {
    let (_g, d) = serial();
    let ctx = Context::primary(0).unwrap();
    // Reads of two PCs; the finish's stop finds five (its read fails, so all five stay there): by default
    // the configured buffer takes them all.
    let s = PcSampler::builder(&ctx).pcs_per_read(2).start().unwrap();
    for pc in 0..5 {
        d.pc(c"chase", 0x40 + 0x10 * pc, 4, 1);
    }
    d.fail(c"cuptiPCSamplingGetData", 999);
    let (all, error) = s.finish_keeping();
    d.clear_failure();
    assert!(error.is_some(), "the read's failure is the finish's error");
    assert_eq!(all.records.len(), 5);
    assert_eq!(all.truncated_pcs, 0);
    // Never smaller than a read.
    let s = PcSampler::builder(&ctx)
        .pcs_per_read(3)
        .pcs_at_disable(1)
        .start()
        .unwrap();
    for pc in 0..3 {
        d.pc(c"other", 0x10 * pc, 9, 1);
    }
    d.fail(c"cuptiPCSamplingGetData", 999);
    let (all, _) = s.finish_keeping();
    d.clear_failure();
    assert_eq!((all.records.len(), all.truncated_pcs), (3, 0));
    assert_eq!(d.counts().pc_enabled, 0);
}

#[test]
fn pc_sampling_settings_are_checked() {
    let (_g, d) = serial();
    let ctx = Context::primary(0).unwrap();
    assert!(matches!(
        PcSampler::builder(&ctx)
            .period(40)
            .start()
            .map_err(profiling),
        Err(ProfilingError::InvalidSetting { what: "period", .. })
    ));
    assert!(matches!(
        PcSampler::builder(&ctx)
            .stall_reasons(["no_such_reason"])
            .start()
            .map_err(profiling),
        Err(ProfilingError::InvalidSetting {
            what: "stall reasons",
            ..
        })
    ));
    assert_eq!(
        d.counts().pc_enabled,
        0,
        "a refused configuration disables again"
    );
    assert!(matches!(
        PcSampler::builder(&ctx)
            .pcs_per_read(0)
            .start()
            .map_err(profiling),
        Err(ProfilingError::BufferTooSmall { .. })
    ));
    assert!(matches!(
        PcSampler::builder(&ctx)
            .worker_sleep_ms(0)
            .start()
            .map_err(profiling),
        Err(ProfilingError::InvalidSetting {
            what: "worker sleep",
            ..
        })
    ));
}

#[test]
fn the_workers_sleep_is_set_only_when_asked() {
    let (_g, d) = serial();
    let ctx = Context::primary(0).unwrap();
    let s = PcSampler::builder(&ctx)
        .worker_sleep_ms(10)
        .start()
        .unwrap();
    assert_eq!(d.pc_sleep_span(), 10);
    s.finish().unwrap();
    let s = PcSampler::builder(&ctx).start().unwrap();
    assert_eq!(
        d.pc_sleep_span(),
        0,
        "CUPTI's own default where none is asked"
    );
    s.finish().unwrap();
}

#[test]
fn a_failed_disable_keeps_what_was_read_and_says_sampling_stays_on() {
    let (_g, d) = serial();
    let ctx = Context::primary(0).unwrap();
    let mut s = PcSampler::builder(&ctx).pcs_per_read(8).start().unwrap();
    d.pc(c"chase", 0x40, 4, 90);
    d.pc(c"other", 0x10, 9, 5);
    s.read().unwrap();
    // CUPTI_ERROR_INVALID_PARAMETER, as an H200 answered it after a trace of the same process.
    d.fail(c"cuptiPCSamplingDisable", 1);
    let (samples, error) = s.finish_keeping();
    d.clear_failure();
    let error = error.expect("the failed disable is the finish's error");
    assert!(
        gpu_tools::cupti::pc_sampling::still_enabled(&error),
        "the error says sampling stays on: {error}"
    );
    assert_eq!(samples.records.len(), 2, "what was read before is kept");
    assert_eq!(samples.functions()[0].samples, 90);
    assert_eq!(d.counts().pc_enabled, 1, "CUPTI kept sampling on");
    // The process's end, as CUPTI would have it: sampling off, for the next test.
    d.pc_reset();
    assert_eq!(d.counts().pc_enabled, 0);
}

#[test]
fn continuous_sampling_is_never_read_while_cuptis_decoding_worker_runs() {
    let (_g, d) = serial();
    let ctx = Context::primary(0).unwrap();
    let before = d.pc_reads_while_decoding();
    let mut s = PcSampler::builder(&ctx).pcs_per_read(2).start().unwrap();
    assert!(
        d.pc_running(),
        "sampling runs from the start, as without start-stop control"
    );
    d.pc(c"chase", 0x40, 4, 90);
    d.pc(c"chase", 0x50, 4, 10);
    d.pc(c"other", 0x10, 9, 5);
    // A read in the middle stops sampling for itself and starts it again.
    s.read().unwrap();
    assert!(d.pc_running(), "sampling runs again after the read");
    d.pc(c"other", 0x20, 17, 7);
    let all = s.finish().unwrap();
    assert_eq!(
        d.pc_reads_while_decoding(),
        before,
        "no cuptiPCSamplingGetData while CUPTI's workers decode"
    );
    let mut pcs: Vec<(String, u64)> = all
        .records
        .iter()
        .map(|r| (r.function.to_string(), r.pc_offset))
        .collect();
    pcs.sort();
    assert_eq!(
        pcs,
        [
            ("chase".to_string(), 0x40),
            ("chase".to_string(), 0x50),
            ("other".to_string(), 0x10),
            ("other".to_string(), 0x20),
        ],
        "every PC once: what the stops decoded came through the reads"
    );
    assert_eq!(all.truncated_pcs, 0);
    assert_eq!(d.counts().pc_enabled, 0);
}

#[test]
fn a_failed_stop_leaves_sampling_on_and_calls_cupti_no_more() {
    let (_g, d) = serial();
    let ctx = Context::primary(0).unwrap();
    let before = d.pc_reads_while_decoding();
    // At a read: the stop fails (libcupti 13.0.85 then has joined one worker of three and still counts sampling
    // as started; a disable would join it again).
    let mut s = PcSampler::builder(&ctx).start().unwrap();
    d.pc(c"chase", 0x40, 4, 90);
    d.fail(c"cuptiPCSamplingStop", 1);
    let error = s.read().expect_err("the stop's failure is the read's");
    d.clear_failure();
    assert!(
        gpu_tools::cupti::pc_sampling::still_enabled(&error),
        "the error says sampling stays on: {error}"
    );
    // Later reads and the finish ask CUPTI nothing: no GetData beside the workers, no disable.
    assert!(s.read().is_err(), "a later read says the same");
    let (samples, error) = s.finish_keeping();
    let error = error.expect("the finish says sampling stays on");
    assert!(gpu_tools::cupti::pc_sampling::still_enabled(&error));
    assert!(samples.records.is_empty());
    assert_eq!(
        d.pc_reads_while_decoding(),
        before,
        "no read after the failed stop"
    );
    assert_eq!(d.counts().pc_enabled, 1, "CUPTI kept sampling on");
    // The same at the finish's own stop.
    d.pc_reset();
    let s = PcSampler::builder(&ctx).start().unwrap();
    d.pc(c"chase", 0x40, 4, 90);
    d.fail(c"cuptiPCSamplingStop", 1);
    let (samples, error) = s.finish_keeping();
    d.clear_failure();
    assert!(gpu_tools::cupti::pc_sampling::still_enabled(
        &error.expect("the stop's failure is the finish's error")
    ));
    assert!(samples.records.is_empty());
    assert_eq!(d.pc_reads_while_decoding(), before);
    assert_eq!(d.counts().pc_enabled, 1);
    d.pc_reset();
    assert_eq!(d.counts().pc_enabled, 0);
}

#[test]
fn a_paused_sampler_reads_at_each_pause_and_resumes() {
    let (_g, d) = serial();
    let ctx = Context::primary(0).unwrap();
    let before = d.pc_reads_while_decoding();
    let mut s = PcSampler::builder(&ctx).start_stop(true).start().unwrap();
    assert!(!d.pc_running(), "configured, not sampling until resume");
    assert!(s.pause().is_err(), "no pause while not sampling");
    s.resume().unwrap();
    assert!(s.resume().is_err(), "no resume while sampling");
    d.pc(c"chase", 0x40, 4, 90);
    // Each stop writes the configured buffer again: a pause reads what its stop left.
    s.pause().unwrap();
    assert_eq!(s.collected().records.len(), 1, "read at the pause");
    s.resume().unwrap();
    d.pc(c"other", 0x10, 9, 5);
    s.pause().unwrap();
    let all = s.finish().unwrap();
    let mut names: Vec<String> = all.records.iter().map(|r| r.function.to_string()).collect();
    names.sort();
    assert_eq!(names, ["chase", "other"], "both ranges, once each");
    assert_eq!(d.pc_reads_while_decoding(), before);
    assert_eq!(d.counts().pc_enabled, 0);
}

#[test]
fn after_a_failed_pause_nothing_starts_again() {
    let (_g, d) = serial();
    let ctx = Context::primary(0).unwrap();
    let mut s = PcSampler::builder(&ctx).start_stop(true).start().unwrap();
    s.resume().unwrap();
    d.fail(c"cuptiPCSamplingStop", 1);
    let error = s.pause().expect_err("the stop's failure is the pause's");
    d.clear_failure();
    assert!(
        gpu_tools::cupti::pc_sampling::still_enabled(&error),
        "{error}"
    );
    let starts = d.pc_starts();
    let error = s.resume().expect_err("no start after a failed stop");
    assert!(
        gpu_tools::cupti::pc_sampling::still_enabled(&error),
        "{error}"
    );
    assert_eq!(d.pc_starts(), starts, "cuptiPCSamplingStart was not called");
    let (_, error) = s.finish_keeping();
    assert!(error.is_some_and(|e| gpu_tools::cupti::pc_sampling::still_enabled(&e)));
    assert_eq!(d.counts().pc_enabled, 1, "CUPTI kept sampling on");
    d.pc_reset();
}

#[test]
fn kernel_serialised_sampling_is_read_without_a_stop() {
    let (_g, d) = serial();
    let ctx = Context::primary(0).unwrap();
    let starts = d.pc_starts();
    let mut s = PcSampler::builder(&ctx)
        .mode(gpu_tools::cupti::pc_sampling::CollectionMode::KernelSerialized)
        .pcs_per_read(1)
        .start()
        .unwrap();
    assert!(
        d.pc_running(),
        "sampling from the configuration, no start-stop control"
    );
    d.pc(c"chase", 0x40, 4, 90);
    d.pc(c"chase", 0x50, 4, 10);
    // A stop would be refused (no start-stop control configured): the read goes straight to CUPTI, and repeats
    // while CUPTI says more PCs wait (one a read here).
    s.read().unwrap();
    let read = s.collected().records.len();
    assert_eq!(read, 2, "the read repeated");
    d.pc(c"other", 0x10, 9, 5);
    let all = s.finish().unwrap();
    assert_eq!(all.records.len(), 3, "the disable's flush took the rest");
    assert_eq!(d.pc_starts(), starts, "never started or stopped");
    assert_eq!(d.counts().pc_enabled, 0);
}
