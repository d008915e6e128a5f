//! `gpu-tools stats` and `gpu-tools export` on the real traces of `tests/fixtures/traces/` (recorded on a GPU
//! host in file format 2, rewritten in the current format): the kernel report's top names (demangled, and as
//! recorded with `--raw-names`), their launches and GPU time, in text and JSON; every kernel counted; the
//! processes and ranks; the Chrome and Perfetto exports' flow starts and ends. The same numbers are counted from
//! the decoded records in `gpu-tools-trace/tests/toolkit/real_traces.rs`. The format 2 recording kept reports the
//! same and says once that it cannot be checked; cut and changed copies of a current one do not exit 0.

use std::path::PathBuf;
use std::process::{Command, Output};

/// Perfetto's messages, as gpu-tools-trace's export test declares them.
use gpu_tools_testing::perfetto;

fn fixture(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/traces")
        .join(name)
        .to_str()
        .unwrap()
        .to_string()
}

fn gpu_tools(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_gpu-tools"))
        .args(args)
        .output()
        .expect("run gpu-tools");
    assert!(
        out.status.success(),
        "{args:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

struct Expected {
    file: &'static str,
    kernel_launches: u64,
    kernel_names: usize,
    kernel_ns: u64,
    /// The first rows of the kernel report: (demangled name, name as recorded, launches, GPU time ns).
    top: [(&'static str, &'static str, u64, u64); 3],
    /// The rank column of the processes report, one per traced process.
    ranks: &'static [&'static str],
    flows: usize,
}

const FIXTURES: [Expected; 3] = [
    Expected {
        file: "torch_loop.gputrace",
        kernel_launches: 1080,
        kernel_names: 33,
        kernel_ns: 5_471_644,
        top: [
            (
                "void wgrad_alg0_engine<float, 128, 5, 5, 3, 3, 3, false, 512>(int, int, int, float const*, int, float*, float const*, kernel_grad_params, unsigned long long, int, float, int, int, int, int)",
                "_Z17wgrad_alg0_engineIfLi128ELi5ELi5ELi3ELi3ELi3ELb0ELi512EEviiiPKT_iPS0_S2_18kernel_grad_paramsyifiiii",
                20,
                622_339,
            ),
            (
                "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, 4, 4> >(at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, 4, 4>)",
                "_ZN2at6native13reduce_kernelILi512ELi1ENS0_8ReduceOpIfNS0_14func_wrapper_tIfZNS0_11sum_functorIfffEclERNS_14TensorIteratorEEUlffE_EEjfLi4ELi4EEEEEvT1_",
                40,
                535_263,
            ),
            (
                "sm80_xmma_wgrad_implicit_gemm_indexed_wo_smem_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize16x64x64_stage1_warpsize1x4x1_g1_tensor16x8x8_aligna8_alignc8_execute_kernel__5x_cudnn",
                "sm80_xmma_wgrad_implicit_gemm_indexed_wo_smem_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize16x64x64_stage1_warpsize1x4x1_g1_tensor16x8x8_aligna8_alignc8_execute_kernel__5x_cudnn",
                20,
                532_061,
            ),
        ],
        ranks: &[""],
        flows: 1210,
    },
    Expected {
        file: "torch_compile.gputrace",
        kernel_launches: 201,
        kernel_names: 23,
        kernel_ns: 665_760,
        top: [
            (
                "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<2>, at::native::(anonymous namespace)::BinaryOpListAlphaFunctor<float, 2, 2, 0>, std::plus<float>, float>(at::native::(anonymous namespace)::TensorListMetadata<2>, at::native::(anonymous namespace)::BinaryOpListAlphaFunctor<float, 2, 2, 0>, std::plus<float>, float)",
                "_ZN2at6native55_GLOBAL__N__d25d856e_22_ForeachBinaryOpList_cu_a911ec4325multi_tensor_apply_kernelINS1_18TensorListMetadataILi2EEENS1_24BinaryOpListAlphaFunctorIfLi2ELi2ELi0EEEJSt4plusIfEfEEEvT_T0_DpT1_",
                20,
                189_665,
            ),
            (
                "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<2>, at::native::(anonymous namespace)::UnaryOpFunctor<float, 2, 1, 1>, at::native::Copy<float, float> >(at::native::(anonymous namespace)::TensorListMetadata<2>, at::native::(anonymous namespace)::UnaryOpFunctor<float, 2, 1, 1>, at::native::Copy<float, float>)",
                "_ZN2at6native55_GLOBAL__N__d25d856e_22_ForeachBinaryOpList_cu_a911ec4325multi_tensor_apply_kernelINS1_18TensorListMetadataILi2EEENS1_14UnaryOpFunctorIfLi2ELi1ELi1EEEJNS0_4CopyIffEEEEEvT_T0_DpT1_",
                38,
                170_401,
            ),
            (
                "void at::native::(anonymous namespace)::nll_loss_forward_reduce_cuda_kernel_2d<float, float, long>(float*, float*, float const*, long const*, float const*, bool, long, long, long, long)",
                "_ZN2at6native39_GLOBAL__N__5cd812b1_7_Loss_cu_5b0651e138nll_loss_forward_reduce_cuda_kernel_2dIfflEEvPT_S4_PKS3_PKT1_S6_bllll",
                20,
                94_495,
            ),
        ],
        ranks: &["", ""],
        flows: 247,
    },
    Expected {
        file: "ddp_2rank.gputrace",
        kernel_launches: 10_418,
        kernel_names: 25,
        kernel_ns: 297_678_595,
        top: [
            (
                "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
                "_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE",
                400,
                239_262_022,
            ),
            (
                "void sgemm_largek_lds64<true, false, 5, 5, 4, 4, 4, 34>(float*, float const*, float const*, int, int, int, int, int, int, float const*, float const*, float, float, int, int, int*, int*)",
                "_Z18sgemm_largek_lds64ILb1ELb0ELi5ELi5ELi4ELi4ELi4ELi34EEvPfPKfS2_iiiiiiS2_S2_ffiiPiS3_",
                800,
                17_356_047,
            ),
            (
                "ncclDevKernel_Broadcast_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
                "_Z31ncclDevKernel_Broadcast_RING_LL24ncclDevKernelArgsStorageILm4096EE",
                8,
                14_393_558,
            ),
        ],
        // The launcher (torchrun) and the two ranks, in stream order.
        ranks: &["", "rank 1 (local 1)", "rank 0 (local 0)"],
        flows: 13_345,
    },
];

/// The rows of one report of `stats --format json`.
fn json_rows(file: &str, report: &str, raw: bool) -> Vec<serde_json::Value> {
    let path = fixture(file);
    let mut args = vec!["stats", "--format", "json", "--report", report, &path];
    if raw {
        args.insert(1, "--raw-names");
    }
    let out = gpu_tools(&args);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let tables = doc.as_array().unwrap();
    assert_eq!(tables.len(), 1);
    assert_eq!(tables[0]["name"], report);
    tables[0]["rows"].as_array().unwrap().clone()
}

#[test]
fn stats_json_gives_the_exact_kernel_counts_and_times_of_each_fixture() {
    for e in &FIXTURES {
        for raw in [false, true] {
            let rows = json_rows(e.file, "cuda_gpu_kern_sum", raw);
            let launches: u64 = rows.iter().map(|r| r["Instances"].as_u64().unwrap()).sum();
            let ns: u64 = rows
                .iter()
                .map(|r| r["Total Time (ns)"].as_u64().unwrap())
                .sum();
            assert_eq!(
                (rows.len(), launches, ns),
                (e.kernel_names, e.kernel_launches, e.kernel_ns),
                "{}",
                e.file
            );
            for (row, (demangled, recorded, n, t)) in rows.iter().zip(e.top) {
                let name = if raw { recorded } else { demangled };
                assert_eq!(row["Name"], name, "{}", e.file);
                assert_eq!(row["Instances"], n, "{}", e.file);
                assert_eq!(row["Total Time (ns)"], t, "{}", e.file);
            }
        }
        let processes = json_rows(e.file, "processes", false);
        let ranks: Vec<&str> = processes
            .iter()
            .map(|p| p["Rank"].as_str().unwrap())
            .collect();
        assert_eq!(ranks, e.ranks, "{}", e.file);
        assert!(
            processes.iter().all(|p| p["Complete"] == "yes"),
            "{}",
            e.file
        );
        // Every recorded process exited (none crashed, none was attached).
        assert!(processes.iter().all(|p| p["End"] == "exit"), "{}", e.file);
    }
}

#[test]
fn stats_text_gives_the_same_top_rows() {
    for e in &FIXTURES {
        let out = gpu_tools(&["stats", "--report", "cuda_gpu_kern_sum", &fixture(e.file)]);
        let text = String::from_utf8(out.stdout).unwrap();
        // The title, a blank line, the column names, the rule, then the rows.
        let rows: Vec<&str> = text.lines().skip(4).take(3).collect();
        assert_eq!(rows.len(), 3, "{text}");
        for (line, (name, _, n, t)) in rows.iter().zip(e.top) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            assert_eq!(fields[1], t.to_string(), "{}: {line}", e.file);
            assert_eq!(fields[2], n.to_string(), "{}: {line}", e.file);
            // Long names are cut to the column: the row shows the name's start.
            let shown = line
                .split("  ")
                .filter(|s| !s.is_empty())
                .last()
                .unwrap()
                .trim();
            let shown = shown.trim_end_matches('…');
            assert!(shown.len() >= name.len().min(60), "{}: {line}", e.file);
            assert!(
                name.starts_with(shown),
                "{}: {shown:?} is not the start of {name:?}",
                e.file
            );
        }
    }
}

#[test]
fn the_exports_of_each_fixture_end_every_flow_they_start() {
    let dir = tempfile::tempdir().unwrap();
    for e in &FIXTURES {
        let json = dir.path().join("t.json");
        gpu_tools(&[
            "export",
            &fixture(e.file),
            "--chrome",
            json.to_str().unwrap(),
        ]);
        let doc: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        let events = doc["traceEvents"].as_array().unwrap();
        let ph = |p: &str| events.iter().filter(|ev| ev["ph"] == p).count();
        assert_eq!((ph("s"), ph("f")), (e.flows, e.flows), "{}", e.file);
        let pb = dir.path().join("t.pb");
        gpu_tools(&[
            "export",
            &fixture(e.file),
            "--perfetto",
            pb.to_str().unwrap(),
        ]);
        let (starts, ends) = perfetto::flows(&std::fs::read(&pb).unwrap());
        assert_eq!((starts.len(), ends.len()), (e.flows, e.flows), "{}", e.file);
        assert_eq!(starts, ends, "{}", e.file);
    }
}

/// `gpu-tools ARGS` as it ran, whatever its exit.
fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gpu-tools"))
        .args(args)
        .output()
        .expect("run gpu-tools")
}

#[test]
fn the_format_2_recording_reports_as_its_rewrite_and_says_once_that_it_cannot_be_checked() {
    let v2 = fixture("torch_compile.format2.gputrace");
    let says = format!(
        "gpu-tools stats: {v2}: trace file format 2 has no checksums and no final chunk: a changed byte, or a \
         file cut short, cannot be told from what was written"
    );
    for format in ["text", "json"] {
        let old = run(&["stats", "--format", format, &v2]);
        let new = gpu_tools(&[
            "stats",
            "--format",
            format,
            &fixture("torch_compile.gputrace"),
        ]);
        assert_eq!(old.status.code(), Some(0));
        assert_eq!(old.stdout, new.stdout, "{format}");
        let err = String::from_utf8_lossy(&old.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.starts_with(&says), "{err}");
    }
}

/// A few cuts and changed bytes of a committed trace, through the binary: none exits 0, and none reports.
#[test]
fn cut_or_changed_copies_of_a_fixture_do_not_exit_0() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(fixture("torch_loop.gputrace")).unwrap();
    // The chunks' offsets: header chunk, packed records, ..., the final chunk last.
    let mut chunks = Vec::new();
    let mut at = 32;
    while at < bytes.len() {
        chunks.push(at);
        at += 17 + u32::from_le_bytes(bytes[at + 5..at + 9].try_into().unwrap()) as usize;
    }
    let last = *chunks.last().unwrap();
    let mid = chunks[chunks.len() / 2];
    let path = dir.path().join("t.gputrace");
    let cuts: [(usize, i32, &str); 4] = [
        (
            32,
            1,
            "holds no records: the file was not finished by its writer",
        ),
        (
            mid,
            3,
            "the file was not finished by its writer (cut short, or the tracer was killed)",
        ),
        (
            last,
            3,
            &format!("it ends at byte {last} without its final chunk"),
        ),
        (last + 20, 3, "the file is truncated"),
    ];
    for (cut, code, says) in cuts {
        std::fs::write(&path, &bytes[..cut]).unwrap();
        let out = run(&["stats", "--report", "processes", path.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "cut {cut}: {err}");
        assert!(err.contains(says), "cut {cut}: {err}");
    }
    for (i, x) in [
        (20, 0x01),
        (chunks[1] + 3, 0x80),
        (mid + 100, 0x10),
        (last + 30, 0x04),
    ] {
        let mut changed = bytes.clone();
        changed[i] ^= x;
        std::fs::write(&path, &changed).unwrap();
        let out = run(&["stats", path.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "byte {i}: {err}");
        assert!(err.contains("corrupt"), "byte {i}: {err}");
        assert!(out.stdout.is_empty(), "byte {i}: no report");
    }
}
