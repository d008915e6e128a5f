//! The settings' encodings read back as written, every field of them; the defaults; the errors.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use super::*;

/// Settings in which every field differs from [`Settings::new`]'s (checked field by field below: a field added to
/// [`Settings`] does not compile here until it is given a value of its own, and that value must travel).
fn every_field_changed() -> Settings {
    Settings {
        destination: Destination::Socket("/tmp/gpu-tools-trace-x/trace.sock".into()),
        kinds: vec![TraceKind::Sync, TraceKind::Kernel, TraceKind::Nvtx],
        graph: GraphMode::Node,
        api: ApiMode::Launches,
        api_skip: vec!["cudaGetLastError".into(), "cuKernelGetName".into()],
        buffer_size: 64 << 10,
        max_buffers: 3,
        flush_interval: Some(Duration::from_millis(50)),
        log: Some(log::LevelFilter::Debug),
        stage: Stage::NoEncode,
        signals: false,
        flight_recorder: false,
        profile: Some(ProfileRequest {
            metrics: vec!["sm__cycles_elapsed.avg".into()],
            pc_sampling: true,
            max_ranges: 16,
            launches_per_kernel: Some(3),
            graph_profiling: GraphMode::Graph,
            primer: true,
        }),
        cupti: Some("/opt/cuda/lib64/libcupti.so.13".into()),
        seen_as: Some(SeenAs {
            pid: 4_000_123,
            parent: 4_000_001,
        }),
    }
}

#[test]
fn the_changed_settings_differ_from_the_defaults_in_every_field() {
    let changed = every_field_changed();
    let Settings {
        destination,
        kinds,
        graph,
        api,
        api_skip,
        buffer_size,
        max_buffers,
        flush_interval,
        log,
        stage,
        signals,
        flight_recorder,
        profile,
        cupti,
        seen_as,
    } = &changed;
    let d = Settings::new(Destination::File("/t/%p.gputrace".into()));
    assert_ne!(destination, &d.destination);
    assert_ne!(kinds, &d.kinds);
    assert_ne!(graph, &d.graph);
    assert_ne!(api, &d.api);
    assert_ne!(api_skip, &d.api_skip);
    assert_ne!(buffer_size, &d.buffer_size);
    assert_ne!(max_buffers, &d.max_buffers);
    assert_ne!(flush_interval, &d.flush_interval);
    assert_ne!(log, &d.log);
    assert_ne!(stage, &d.stage);
    assert_ne!(signals, &d.signals);
    assert_ne!(flight_recorder, &d.flight_recorder);
    assert_ne!(profile, &d.profile);
    assert_ne!(cupti, &d.cupti);
    assert_ne!(seen_as, &d.seen_as);
}

fn lookup<'a>(vars: &'a [(&'static str, OsString)]) -> impl Fn(&str) -> Option<OsString> + 'a {
    move |k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone())
}

#[test]
fn every_field_travels_through_the_environment_and_back() {
    let changed = every_field_changed();
    for library in [
        Library::Cuda("/opt/libgpu_tools_inject.so".as_ref()),
        Library::Rocm("/opt/libgpu_tools_inject_rocm.so".as_ref()),
    ] {
        let vars = changed.environment(library);
        assert_eq!(Settings::from_lookup(lookup(&vars)), Ok(changed.clone()));
    }
    // The other destination, and the unset values.
    let file = Settings::new(Destination::File("/t/%h-%p.gputrace".into()));
    let vars = file.environment(Library::Cuda("/l.so".as_ref()));
    assert_eq!(Settings::from_lookup(lookup(&vars)), Ok(file));
    let no_flush = Settings {
        flush_interval: None,
        log: Some(log::LevelFilter::Off),
        ..every_field_changed()
    };
    let vars = no_flush.variables();
    assert_eq!(Settings::from_lookup(lookup(&vars)), Ok(no_flush));
}

#[test]
fn a_flush_period_that_is_not_whole_milliseconds_is_rounded_up_never_to_none() {
    for (period, ms) in [
        (Duration::from_micros(1), 1),
        (Duration::from_micros(500), 1),
        (Duration::ZERO, 1),
        (Duration::from_micros(1500), 2),
        (Duration::from_millis(200), 200),
    ] {
        let s = Settings {
            flush_interval: Some(period),
            ..Settings::new(Destination::Socket("/s".into()))
        };
        let read = Settings::from_lookup(lookup(&s.variables())).unwrap();
        assert_eq!(
            read.flush_interval,
            Some(Duration::from_millis(ms)),
            "{period:?}"
        );
    }
}

#[test]
fn every_field_travels_through_an_attach_argument_and_back() {
    let changed = every_field_changed();
    let argument = changed.attach_argument().unwrap();
    assert_eq!(Settings::from_attach_argument(&argument), Ok(changed));
    assert!(!argument.contains(env::CUDA_INJECTION), "{argument}");
    assert!(!argument.contains(env::NVTX_INJECTION), "{argument}");
    let defaults = Settings::new(Destination::Socket("/s".into()));
    let argument = defaults.attach_argument().unwrap();
    assert_eq!(Settings::from_attach_argument(&argument), Ok(defaults));
    assert!(!argument.contains("GPU_TOOLS_PROFILE_"), "{argument}");
    // A carriage return is a path's character like any other, last in a line too.
    let cr = Settings::new(Destination::Socket("/s\r".into()));
    let argument = cr.attach_argument().unwrap();
    assert_eq!(Settings::from_attach_argument(&argument), Ok(cr));
}

#[test]
fn the_variables_are_listed_once_and_cleared_but_the_users_own() {
    let mut written: Vec<&str> = every_field_changed()
        .variables()
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    written.insert(1, env::FILE);
    assert_eq!(
        written,
        Settings::VARIABLES,
        "VARIABLES lists what is written, in order"
    );
    let loaders = [
        env::CUDA_INJECTION,
        env::NVTX_INJECTION,
        env::ROCM_TOOL_LIBRARIES,
    ];
    for var in Settings::VARIABLES.iter().chain(&loaders) {
        let kept = [env::LOG, env::CUPTI_LIBRARY].contains(var);
        assert_eq!(!kept, Settings::CLEARED.contains(var), "{var}");
    }
    assert_eq!(
        Settings::CLEARED.len(),
        Settings::VARIABLES.len() - 2 + loaders.len()
    );
}

#[test]
fn unset_variables_are_the_defaults() {
    let s = Settings::from_lookup(|k| (k == env::SOCKET).then(|| "/tmp/s".into())).unwrap();
    assert_eq!(s, Settings::new(Destination::Socket("/tmp/s".into())));
    assert_eq!(s.kinds, TraceKind::DEFAULT);
    assert_eq!(s.buffer_size, 4 << 20);
    assert_eq!(s.max_buffers, 64);
    assert_eq!(s.flush_interval, Some(Duration::from_millis(200)));
    assert_eq!(
        (s.graph, s.api, s.stage, s.signals, s.nvtx(), s.log),
        (
            GraphMode::Graph,
            ApiMode::Essential,
            Stage::Full,
            true,
            false,
            None
        )
    );
    assert!(s.api_skip.is_empty() && s.profile.is_none() && s.cupti.is_none());
    assert_eq!(s.seen_as, None);
}

fn with(vars: &[(&str, &str)]) -> Result<Settings, SettingError> {
    let map: HashMap<String, OsString> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), OsString::from(v)))
        .collect();
    Settings::from_lookup(|k| map.get(k).cloned())
}

#[test]
fn the_variables_take_what_a_person_writes() {
    let s = with(&[
        (env::FILE, "/tmp/t-%p.bin"),
        (env::KINDS, " kernel , sync,overhead,kernel"),
        (env::BUFFER_SIZE, "64k"),
        (env::MAX_BUFFERS, "3"),
        (env::FLUSH_MS, "0"),
        (env::LOG, "debug"),
        (env::API_SKIP, "cudaGetLastError, cuKernelGetName,"),
        (env::SIGNALS, "off"),
        (env::CUDA_GRAPH, " "),
    ])
    .unwrap();
    assert_eq!(s.destination, Destination::File("/tmp/t-%p.bin".into()));
    assert_eq!(
        s.kinds,
        [TraceKind::Kernel, TraceKind::Sync, TraceKind::Overhead]
    );
    assert_eq!((s.buffer_size, s.max_buffers), (64 << 10, 3));
    assert_eq!(s.flush_interval, None);
    assert_eq!(s.log, Some(log::LevelFilter::Debug));
    assert_eq!(s.api_skip, ["cudaGetLastError", "cuKernelGetName"]);
    assert!(!s.signals);
    assert_eq!(s.graph, GraphMode::Graph, "blank: the default");
    assert_eq!(
        with(&[(env::SOCKET, "s"), (env::KINDS, "all")])
            .unwrap()
            .kinds,
        TraceKind::ALL
    );
    assert_eq!(
        with(&[(env::SOCKET, "s"), (env::BUFFER_SIZE, "2M")])
            .unwrap()
            .buffer_size,
        2 << 20
    );
    // A library named to implement NVTX records it, as if the kind were named.
    let nvtx = with(&[
        (env::SOCKET, "s"),
        (env::KINDS, "kernel"),
        (env::NVTX_INJECTION, "/lib/inject.so"),
    ])
    .unwrap();
    assert_eq!(nvtx.kinds, [TraceKind::Kernel, TraceKind::Nvtx]);
    assert!(nvtx.nvtx());
    // One profile variable is a request; the others take their defaults.
    let profile = with(&[(env::SOCKET, "s"), (env::PROFILE_PC_SAMPLING, "1")]).unwrap();
    let request = profile.profile.unwrap();
    assert!(request.pc_sampling && request.metrics.is_empty());
    assert_eq!(request.max_ranges, profile_request::DEFAULT_MAX_RANGES);
}

#[test]
fn bad_values_name_the_variable() {
    // (variables, the variable the error names, text the message holds)
    type Case<'a> = (&'a [(&'a str, &'a str)], &'a str, &'a str);
    let cases: &[Case<'_>] = &[
        (&[], env::SOCKET, "nowhere to send"),
        (
            &[(env::SOCKET, "a"), (env::FILE, "b")],
            env::SOCKET,
            "only one",
        ),
        (
            &[(env::SOCKET, "a"), (env::KINDS, "kernel,bogus")],
            env::KINDS,
            "unknown kind \"bogus\"",
        ),
        (
            &[(env::SOCKET, "a"), (env::KINDS, " , ")],
            env::KINDS,
            "no kind",
        ),
        (
            &[(env::SOCKET, "a"), (env::BUFFER_SIZE, "12x")],
            env::BUFFER_SIZE,
            "not a byte count",
        ),
        (
            &[(env::SOCKET, "a"), (env::BUFFER_SIZE, "100")],
            env::BUFFER_SIZE,
            "between",
        ),
        (
            &[
                (env::SOCKET, "a"),
                (env::BUFFER_SIZE, "99999999999999999999G"),
            ],
            env::BUFFER_SIZE,
            "byte count",
        ),
        (
            &[(env::SOCKET, "a"), (env::BUFFER_SIZE, "9999999999999G")],
            env::BUFFER_SIZE,
            "too large",
        ),
        (
            &[(env::SOCKET, "a"), (env::MAX_BUFFERS, "0")],
            env::MAX_BUFFERS,
            "at least 1",
        ),
        (
            &[(env::SOCKET, "a"), (env::FLUSH_MS, "-1")],
            env::FLUSH_MS,
            "milliseconds",
        ),
        (
            &[(env::SOCKET, "a"), (env::LOG, "loud")],
            env::LOG,
            "not one of",
        ),
        (
            &[(env::SOCKET, "a"), (env::CUDA_GRAPH, "graphs")],
            env::CUDA_GRAPH,
            "node, graph",
        ),
        (
            &[(env::SOCKET, "a"), (env::API, "some")],
            env::API,
            "all, launches",
        ),
        (
            &[(env::SOCKET, "a"), (env::STAGE, "half")],
            env::STAGE,
            "no-send",
        ),
        (
            &[(env::SOCKET, "a"), (env::SIGNALS, "maybe")],
            env::SIGNALS,
            "not 0 or 1",
        ),
        (
            &[(env::SOCKET, "a"), (env::PIDS, "12")],
            env::PIDS,
            "PID,PARENT",
        ),
        (
            &[(env::SOCKET, "a"), (env::PIDS, "0,1")],
            env::PIDS,
            "at least 1",
        ),
        (
            &[(env::SOCKET, "a"), (env::PIDS, "12,-1")],
            env::PIDS,
            "whole numbers",
        ),
        (
            &[(env::SOCKET, "a"), (env::PROFILE_MAX_RANGES, "0")],
            env::PROFILE_MAX_RANGES,
            "a count",
        ),
        (
            &[(env::SOCKET, "a"), (env::PROFILE_METRICS, "fast")],
            env::PROFILE_METRICS,
            "basic",
        ),
    ];
    for (vars, var, text) in cases {
        let e = with(vars).expect_err(&format!("{vars:?} must fail"));
        assert_eq!(e.var, *var, "{e}");
        assert!(e.to_string().contains(text), "{e} lacks {text:?}");
    }
}

#[test]
fn an_attach_argument_refuses_what_it_cannot_carry() {
    let s = Settings {
        api_skip: vec!["cudaGetLastError\nGPU_TOOLS_TRACE_KINDS=kernel".into()],
        ..Settings::new(Destination::Socket("/s".into()))
    };
    let e = s.attach_argument().unwrap_err();
    assert_eq!(e.var, env::API_SKIP);
    assert!(e.reason.contains("newline"), "{e}");
    let s = Settings::new(Destination::Socket(PathBuf::from("/s\0")));
    assert_eq!(s.attach_argument().unwrap_err().var, env::SOCKET);
}
