//! `gpu-tools analyze`, `gpu-tools diff` and `export --findings` on the real traces of `tests/fixtures/traces/`: the
//! findings as text (the first three, names demangled) and as JSON (its documented fields), the diff of two ranks side
//! by side, the findings drawn on the timeline, a rank that crashed (named before the findings), and bad input: a file
//! that is not a trace (exit 1, naming it), a file cut short (exit 3, what was read analysed), a rank traced twice
//! (exit 1), a selection that selects nothing (exit 1), bad arguments (exit 2).

use std::path::PathBuf;
use std::process::{Command, Output};

fn gpu_tools(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_gpu-tools"))
        .args(args)
        .output()
        .expect("run gpu-tools");
    println!(
        "{args:?}: {}\n--- stdout\n{}--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn fixture(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/traces")
        .join(name)
        .display()
        .to_string()
}

fn job() -> Vec<String> {
    (0..4)
        .map(|h| fixture(&format!("job-8rank/h{h}.gputrace")))
        .collect()
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).expect("JSON on stdout")
}

#[test]
fn analyze_text_leads_with_the_three_findings_that_matter() {
    let out = gpu_tools(&["analyze", &fixture("torch_loop.gputrace")]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("37.88 ms of GPU time analysed on 1 GPU: 4 findings\n\n1. "));
    // The findings first, then the GPUs.
    assert!(text.contains(
        "\nGPUs:\n  GPU 0 of pid 1611 on vm: 37.88 ms analysed, busy 14%, idle 86% (launch 76%, sync 5.8%, small_copy \
         2.7%, pageable_copy 1.1%, queued 0.3%)\n    18 steps of 2.06 ms (median; p90 2.27 ms) from the repeating \
         pattern of operations, each from a [CUDA memcpy HtoD 786432 B]; the 3.67 s before them left out (1 step of \
         warm-up)\n"
    ));
    assert!(text.contains("\n1. The GPU waits for the host to launch short kernels (launch-bound inside the step loop)\n   costs 28.79 ms, 76% of the GPU time [launch_bound]\n"));
    assert!(text.contains(
        "\n2. The GPU idles after `.item()`-style reads of results inside the step loop"
    ));
    assert!(text.contains("\n3. Small repeated copies stall the GPU inside the step loop"));
    assert!(text.contains("\n1 more finding (`--top 0` shows them): pageable_copies 1.9%\n"));
    // Kernel names demangled, long ones cut.
    assert!(text.contains("     - void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*,…: 180 launches"));
    assert!(text.contains("The trace lacks:\n  - no device counters"));

    let all = gpu_tools(&[
        "analyze",
        "--top",
        "0",
        "--raw-names",
        &fixture("torch_loop.gputrace"),
    ]);
    let text = String::from_utf8_lossy(&all.stdout);
    assert!(text.contains("\n4. Copies from pageable host memory stall the GPU"));
    assert!(text.contains("_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_"));
}

#[test]
fn analyze_json_has_every_finding_with_the_documented_fields() {
    let mut args = vec!["analyze", "--json"];
    let files = job();
    args.extend(files.iter().map(String::as_str));
    let out = gpu_tools(&args);
    assert_eq!(out.status.code(), Some(0));
    let d = json(&out);
    assert_eq!(d["files"].as_array().unwrap().len(), 4);
    assert_eq!(d["gpus"].as_array().unwrap().len(), 8);
    let gpu = &d["gpus"][5];
    assert_eq!(
        (gpu["host"].as_str(), gpu["rank"].as_u64()),
        (Some("h2"), Some(5))
    );
    assert_eq!(gpu["steps"]["source"], "pattern");
    assert_eq!(gpu["steps"]["count"], 29);
    for field in [
        "file",
        "stream",
        "device",
        "pid",
        "start_ns",
        "end_ns",
        "window_ns",
        "busy_ns",
        "idle_ns",
        "before_ns",
        "idle_by_cause",
    ] {
        assert!(!gpu[field].is_null(), "{field}");
    }
    let f = &d["findings"][0];
    assert_eq!(f["rank"], 1);
    assert_eq!(f["kind"], "straggler");
    assert_eq!(
        f["title"],
        "Rank 5 on h2 is the straggler: the other ranks wait for it in collectives"
    );
    assert_eq!(f["cost_ns"], 983_199_072u64);
    assert!((f["share"].as_f64().unwrap() - 0.546).abs() < 0.001);
    assert!(f["basis"].as_str().unwrap().contains("stragglers report"));
    assert_eq!(f["evidence"][0]["kind"], "rank");
    assert!(f["evidence"][0]["count"].is_null());
    assert!(f["advice"].as_array().unwrap().len() >= 2);
    let span = &f["spans"][0];
    assert!(span["end_ns"].as_u64() > span["start_ns"].as_u64());
    assert_eq!(
        d["lacks"][0]
            .as_str()
            .map(|l| l.starts_with("no device counters")),
        Some(true)
    );
}

#[test]
fn analyze_refuses_top_with_json_which_has_every_finding() {
    let out = gpu_tools(&[
        "analyze",
        "--json",
        "--top",
        "1",
        &fixture("torch_loop.gputrace"),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--top"));
}

#[test]
fn analyze_refuses_what_is_not_a_trace_and_analyses_what_a_cut_file_holds() {
    let dir = tempfile::tempdir().unwrap();
    let notes = dir.path().join("notes.txt");
    std::fs::write(&notes, "not a trace\n").unwrap();
    let out = gpu_tools(&["analyze", &notes.display().to_string()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("notes.txt: not a gpu-tools trace"));

    let whole = std::fs::read(fixture("torch_loop.gputrace")).unwrap();
    let cut = dir.path().join("cut.gputrace");
    std::fs::write(&cut, &whole[..whole.len() * 2 / 3]).unwrap();
    let out = gpu_tools(&["analyze", &cut.display().to_string()]);
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("the file is truncated"));
    assert!(String::from_utf8_lossy(&out.stdout).contains("of GPU time analysed on 1 GPU"));

    // A rank in two files.
    let again = dir.path().join("again.gputrace");
    std::fs::copy(fixture("job-8rank/h0.gputrace"), &again).unwrap();
    let out = gpu_tools(&[
        "analyze",
        &fixture("job-8rank/h0.gputrace"),
        &again.display().to_string(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is traced twice"));

    assert_eq!(
        gpu_tools(&["analyze", "--top", "x", &fixture("torch_loop.gputrace")])
            .status
            .code(),
        Some(2)
    );
    assert_eq!(gpu_tools(&["analyze"]).status.code(), Some(2));
}

#[test]
fn diff_puts_two_ranks_side_by_side() {
    let ddp = fixture("ddp_2rank.gputrace");
    let out = gpu_tools(&[
        "diff",
        &ddp,
        &ddp,
        "--a-process",
        "rank=0",
        "--b-process",
        "rank=1",
        "--top",
        "3",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("[rank=0]: rank 0 (pid 1886) on 1 GPU, 275.07 ms analysed"));
    assert!(
        text.contains(
            "  step (median)                       1.33 ms        1.33 ms   -258 ns (-0%)"
        )
    );
    assert!(text.contains("Kernels whose time changed most, a step:"));
    assert!(text.contains("     792.5 µs     270.8 µs   -521.7 µs (-66%)         ncclDevKernel_AllReduce_Sum_f32_RING_LL"));

    let out = gpu_tools(&[
        "diff",
        "--json",
        &ddp,
        &ddp,
        "--a-process",
        "pid=1886",
        "--b-process",
        "rank=1",
    ]);
    let d = json(&out);
    assert_eq!(d["a"]["select"], "pid=1886");
    assert_eq!(d["b"]["processes"][0]["rank"], 1);
    assert_eq!(d["a"]["steps"], 198);
    assert_eq!(d["per_step"], true);
    let top = &d["kernels_by_time"][0];
    assert!(
        top["name"]
            .as_str()
            .unwrap()
            .starts_with("ncclDevKernel_AllReduce")
    );
    assert_eq!(
        (top["a_count"].as_u64(), top["b_count"].as_u64()),
        (Some(198), Some(198))
    );
    assert!(top["a_per_step_ns"].as_f64().unwrap() > 790_000.0);
    for list in [
        "kernels_by_count",
        "new_kernels",
        "gone_kernels",
        "api",
        "copies",
    ] {
        assert!(d[list].is_array(), "{list}");
    }
}

#[test]
fn diff_top_0_shows_every_change_as_analyze_top_0_does() {
    let (a, b) = (
        fixture("torch_loop.gputrace"),
        fixture("torch_compile.gputrace"),
    );
    let all = json(&gpu_tools(&["diff", "--json", "--top", "0", &a, &b]));
    let every = json(&gpu_tools(&["diff", "--json", "--top", "1000", &a, &b]));
    for list in [
        "kernels_by_time",
        "kernels_by_count",
        "new_kernels",
        "gone_kernels",
        "api",
    ] {
        assert_eq!(all[list], every[list], "{list}");
    }
    assert!(all["api"].as_array().unwrap().len() > 10);
    let text = gpu_tools(&["diff", "--top", "0", &a, &b]);
    assert_eq!(text.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&text.stdout).contains("Kernels new in B"));
}

#[test]
fn diff_says_how_many_changes_each_list_leaves_out() {
    let (a, b) = (
        fixture("torch_loop.gputrace"),
        fixture("torch_compile.gputrace"),
    );
    let out = gpu_tools(&["diff", "--top", "2", &a, &b]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    // 28 kernels are gone and 19 API functions changed; 2 of each are listed.
    let gone = text.split("Kernels gone from A").nth(1).unwrap();
    let gone = gone.split("\n\n").next().unwrap();
    assert!(
        gone.ends_with("and 26 more (`--top 0` lists them)"),
        "{gone}"
    );
    assert!(
        text.contains("and 17 more (`--top 0` lists them)"),
        "{text}"
    );
    // A list shown whole says nothing more.
    let new = text.split("Kernels new in B").nth(1).unwrap();
    assert!(!new.split("\n\n").next().unwrap().contains("more"), "{new}");
}

#[test]
fn diff_refuses_a_selection_of_nothing_and_bad_arguments() {
    let ddp = fixture("ddp_2rank.gputrace");
    let out = gpu_tools(&["diff", &ddp, &ddp, "--b-process", "rank=7"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("no traced process with device work is rank 7")
    );
    assert_eq!(
        gpu_tools(&["diff", &ddp, &ddp, "--a-process", "node=1"])
            .status
            .code(),
        Some(2)
    );
    assert_eq!(gpu_tools(&["diff", &ddp]).status.code(), Some(2));
    assert_eq!(gpu_tools(&["diff", "-", "-"]).status.code(), Some(2));
}

/// One host's trace file of two ranks, each in a PID namespace of its own: both pid 1.
fn two_containers(dir: &std::path::Path) -> String {
    let spec = gpu_tools_testing::job::JobSpec {
        hosts: 1,
        ranks_per_host: 2,
        steps: 12,
        pid_namespaces: true,
        ..gpu_tools_testing::job::JobSpec::fixture()
    };
    let path = dir.join("h0.gputrace");
    std::fs::write(&path, spec.host_file(0)).unwrap();
    path.display().to_string()
}

#[test]
fn diff_refuses_a_pid_that_names_two_processes_and_selects_one_by_its_stream() {
    let dir = tempfile::tempdir().unwrap();
    let file = two_containers(dir.path());
    // pid 1 is both ranks: one side of both would sum two processes as one.
    let out = gpu_tools(&["diff", &file, &file, "--a-process", "pid=1"]);
    assert_eq!(out.status.code(), Some(1), "refused");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("pid 1 is 2 traced processes with device work") && err.contains("stream=N"),
        "{err}"
    );
    // Each by its stream.
    let d = json(&gpu_tools(&[
        "diff",
        "--json",
        &file,
        &file,
        "--a-process",
        "stream=0",
        "--b-process",
        "stream=1",
    ]));
    assert_eq!(d["a"]["select"], "stream=0");
    assert_eq!(
        (
            &d["a"]["processes"][0]["stream"],
            &d["a"]["processes"][0]["rank"]
        ),
        (&serde_json::json!(0), &serde_json::json!(0))
    );
    assert_eq!(
        (
            &d["b"]["processes"][0]["stream"],
            &d["b"]["processes"][0]["rank"]
        ),
        (&serde_json::json!(1), &serde_json::json!(1))
    );
    assert_eq!(d["a"]["processes"].as_array().map(Vec::len), Some(1));
}

#[test]
fn analyze_names_a_rank_that_crashed_before_its_findings_in_text_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let spec = gpu_tools_testing::job::JobSpec {
        hosts: 1,
        ranks_per_host: 2,
        steps: 12,
        crashed_rank: Some(1),
        ..gpu_tools_testing::job::JobSpec::fixture()
    };
    let path = dir.path().join("h0.gputrace");
    std::fs::write(&path, spec.host_file(0)).unwrap();
    let file = path.display().to_string();

    let out = gpu_tools(&["analyze", &file]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    let note = text
        .lines()
        .position(|l| {
            l.starts_with("Note: the trace of rank 1 (pid 1001 on h0) ended at signal 11 (SIGSEGV)")
        })
        .unwrap_or_else(|| panic!("no note of the crash:\n{text}"));
    let first = text.lines().position(|l| l.starts_with("1. "));
    assert!(
        first.is_none_or(|f| note < f),
        "the note comes before the findings:\n{text}"
    );
    assert_eq!(
        text.matches("ended at signal").count(),
        1,
        "rank 0 exited:\n{text}"
    );

    let d = json(&gpu_tools(&["analyze", "--json", &file]));
    let ended = d["ended_at_signal"].as_array().expect("ended_at_signal[]");
    assert_eq!(ended.len(), 1, "{ended:?}");
    let e = &ended[0];
    assert_eq!(
        (
            &e["file"],
            &e["stream"],
            &e["pid"],
            &e["host"],
            &e["rank"],
            &e["signal"]
        ),
        (
            &serde_json::json!(0),
            &serde_json::json!(1),
            &serde_json::json!(1001),
            &serde_json::json!("h0"),
            &serde_json::json!(1),
            &serde_json::json!(11)
        )
    );
    assert!(e["end_ns"].as_u64().is_some_and(|t| t > 0), "{e}");
    assert!(
        e["text"]
            .as_str()
            .is_some_and(|t| t.contains("signal 11 (SIGSEGV)")),
        "{e}"
    );
}

#[test]
fn export_draws_the_findings_on_the_timeline() {
    let dir = tempfile::tempdir().unwrap();
    let out_json = dir.path().join("t.json");
    let out = gpu_tools(&[
        "export",
        &fixture("torch_loop.gputrace"),
        "--findings",
        "--chrome",
        &out_json.display().to_string(),
    ]);
    assert_eq!(out.status.code(), Some(0));
    let trace: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&out_json).unwrap()).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    let findings: Vec<&serde_json::Value> =
        events.iter().filter(|e| e["cat"] == "finding").collect();
    let first = findings
        .iter()
        .find(|e| e["args"]["rank"] == 1)
        .expect("the first finding drawn");
    assert_eq!(first["args"]["finding"], "launch_bound");
    assert_eq!(first["args"]["estimate_ns"], 28_790_588u64);
    assert!(
        events
            .iter()
            .any(|e| e["args"]["name"] == "finding 2: sync_stall")
    );
    // Without --findings, none.
    let plain = dir.path().join("p.json");
    gpu_tools(&[
        "export",
        &fixture("torch_loop.gputrace"),
        "--chrome",
        &plain.display().to_string(),
    ]);
    assert!(
        !std::fs::read_to_string(&plain)
            .unwrap()
            .contains("\"finding\"")
    );
    // Standard input cannot be read twice.
    let pb = dir.path().join("t.pb");
    let out = gpu_tools(&[
        "export",
        "-",
        "--findings",
        "--perfetto",
        &pb.display().to_string(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(!pb.exists());
}
