//! The repository's task runner (kept out of the published crate).
//!
//! `cargo run -p xtask -- bindings` regenerates `src/sys/*.rs` from vendor headers, with any of these set:
//! - `GPU_TOOLS_CUPTI_INCLUDE`: folder with `cupti_checkpoint.h`, `cupti_result.h`, `cupti_version.h`,
//!   `cupti_activity.h`, `cupti_callbacks.h`, the profiling headers (`cupti_target.h`, `cupti_profiler_target.h`,
//!   `cupti_profiler_host.h`, `cupti_range_profiler.h`, `cupti_pmsampling.h`, `cupti_pcsampling.h`,
//!   `cupti_sass_metrics.h`) and the headers they include;
//!   `GPU_TOOLS_CUDA_INCLUDE`: folder with `cuda.h` (both needed for the CUPTI and driver bindings);
//! - `GPU_TOOLS_CUDBG_INCLUDE`: folder with `cudadebugger.h` and `cuda_stdint.h`;
//!   and `cudacoredump.h` (the core-dump format, used only to check the reader's layouts);
//! - `GPU_TOOLS_ROCM_INCLUDE`: folder with `rocprofiler/v2/rocprofiler.h`;
//! - `GPU_TOOLS_ROCPROFILER_SDK_INCLUDE`: an include folder as ROCm installs it (`/opt/rocm-7.0.0/include`), with
//!   `rocprofiler-sdk/`, `rocprofiler-sdk-roctx/`, `hsa/`, `hsakmt/` and `hip/`. Without a ROCm install,
//!   `cargo run -p xtask -- stage-rocprofiler-sdk-headers DIR` assembles one from source checkouts (see
//!   [`stage_sdk_headers`]).
//!
//! `cargo xtask record --out DIR` (an alias of `cargo run -p xtask --`) records real CUPTI activity buffers as
//! test fixtures on a host with an NVIDIA GPU (see [`record`]).
//!
//! `cargo run -p xtask -- rewrite-trace IN OUT` writes a trace file of an older format in the current one, and
//! checks that both read to the same records and reports (see [`rewrite_trace`]).
//!
//! `cargo run -p xtask -- job-trace DIR` writes the synthetic 8-rank job of the test support as one trace file per
//! host: the committed fixture `tests/fixtures/traces/job-8rank/` (see [`job_trace`]).
//!
//! Output goes to `GPU_TOOLS_BINDINGS_OUT` (default `src/sys`). `GPU_TOOLS_LAYOUT_TESTS=1` adds bindgen's
//! layout assertions (clang's size, alignment and offset of every struct) to the output, to check that the
//! generated `packed(8)` records match the C layout; the committed files leave them out.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

mod job_trace;
mod record;
mod rewrite_trace;

/// Pinned in xtask/Cargo.toml (`bindgen = "=0.72.1"`), named in each generated file's first line.
const BINDGEN_VERSION: &str = "0.72.1";

fn main() {
    let mut args = env::args().skip(1);
    match args.next().as_deref() {
        Some("bindings") if args.next().is_none() => bindings(),
        Some("stage-rocprofiler-sdk-headers") => match (args.next(), args.next()) {
            (Some(dir), None) => stage_sdk_headers(Path::new(&dir)),
            _ => usage(),
        },
        Some("record") => match record::Args::parse(args) {
            Ok(args) => {
                if let Err(e) = record::run(&args) {
                    eprintln!("xtask record: {e}");
                    std::process::exit(1);
                }
            }
            Err(e) => {
                eprintln!("xtask record: {e}\nusage: {}", record::USAGE);
                std::process::exit(2);
            }
        },
        Some("rewrite-trace") => match (args.next(), args.next(), args.next()) {
            (Some(input), Some(output), None) => {
                if let Err(e) = rewrite_trace::run(Path::new(&input), Path::new(&output)) {
                    eprintln!("xtask rewrite-trace: {e}");
                    std::process::exit(1);
                }
            }
            _ => usage(),
        },
        Some("job-trace") => match (args.next(), args.next()) {
            (Some(dir), None) => {
                if let Err(e) = job_trace::run(Path::new(&dir)) {
                    eprintln!("xtask job-trace: {e}");
                    std::process::exit(1);
                }
            }
            _ => usage(),
        },
        _ => usage(),
    }
}

fn usage() {
    eprintln!(
        "usage: cargo run -p xtask -- bindings\n       cargo run -p xtask -- stage-rocprofiler-sdk-headers DIR\n       \
         {}\n       {}\n       {}\n\n\
         Regenerates src/sys/*.rs from the vendor headers named by GPU_TOOLS_*_INCLUDE, assembles the \
         rocprofiler-sdk include folder from source checkouts, records CUPTI buffers as test fixtures, or writes \
         a trace file of an older format in the current one, or writes the synthetic multi-rank job fixture (see \
         xtask/src/main.rs).",
        record::USAGE,
        rewrite_trace::USAGE,
        job_trace::USAGE
    );
    std::process::exit(2);
}

/// The repository root: the xtask member sits one folder below it.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask is a member folder of the workspace")
        .to_path_buf()
}

fn bindings() {
    let out = env::var("GPU_TOOLS_BINDINGS_OUT")
        .map(PathBuf::from)
        .unwrap_or_else(|_| root().join("src/sys"));
    let mut generated = 0;
    let var = |name: &str| env::var(name).ok().map(PathBuf::from);
    if let (Some(cupti), Some(cuda)) = (
        var("GPU_TOOLS_CUPTI_INCLUDE"),
        var("GPU_TOOLS_CUDA_INCLUDE"),
    ) {
        cupti_bindings(&cupti, &cuda, &out);
        cupti_profiling_bindings(&cupti, &cuda, &out);
        driver_bindings(&cuda, &out);
        generated += 1;
    }
    if let Some(cudbg) = var("GPU_TOOLS_CUDBG_INCLUDE") {
        cudbg_bindings(&cudbg, &out);
        coredump_bindings(&cudbg, &out);
        generated += 1;
    }
    if let Some(rocm) = var("GPU_TOOLS_ROCM_INCLUDE") {
        rocprofiler_bindings(&rocm, &out);
        generated += 1;
    }
    if let Some(sdk) = var("GPU_TOOLS_ROCPROFILER_SDK_INCLUDE") {
        rocprofiler_sdk_bindings(&sdk, &out);
        generated += 1;
    }
    if generated == 0 {
        eprintln!(
            "no header folder given: set GPU_TOOLS_CUPTI_INCLUDE and GPU_TOOLS_CUDA_INCLUDE, GPU_TOOLS_CUDBG_INCLUDE, \
             GPU_TOOLS_ROCM_INCLUDE or GPU_TOOLS_ROCPROFILER_SDK_INCLUDE"
        );
        std::process::exit(2);
    }
}

/// The value of `#define NAME value` in a header, for the provenance line.
fn define(header: &Path, name: &str) -> String {
    let text = std::fs::read_to_string(header)
        .unwrap_or_else(|e| panic!("read {}: {e}", header.display()));
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("#define "))
        .find_map(|l| {
            let mut parts = l.split_whitespace();
            (parts.next() == Some(name)).then(|| parts.next().unwrap_or("").to_string())
        })
        .unwrap_or_else(|| panic!("{name} not defined in {}", header.display()))
}

fn base(define_macro: &str) -> bindgen::Builder {
    bindgen::Builder::default()
        .header(root().join("wrapper.h").to_string_lossy())
        .clang_arg(format!("-D{define_macro}"))
        .generate_comments(false)
        .layout_tests(std::env::var_os("GPU_TOOLS_LAYOUT_TESTS").is_some())
        .derive_default(true)
        .derive_debug(true)
        .prepend_enum_name(false)
        .default_enum_style(bindgen::EnumVariation::Consts)
        .size_t_is_usize(true)
        .merge_extern_blocks(true)
        .formatter(bindgen::Formatter::Prettyplease)
}

fn write(bindings: bindgen::Bindings, out: &Path, file: &str, provenance: String) {
    let body = bindings.to_string();
    let text = format!(
        "// Generated by bindgen {BINDGEN_VERSION} from {provenance}. Do not edit; see \
         docs/development.md, \"Regenerating the sys layer\".\n{body}"
    );
    std::fs::create_dir_all(out).expect("create bindings folder");
    let path = out.join(file);
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    rustfmt(&path);
}

/// Committed files are kept as `cargo fmt` leaves them, so a regeneration compares byte for byte.
fn rustfmt(path: &Path) {
    let rustfmt = env::var_os("RUSTFMT").unwrap_or_else(|| "rustfmt".into());
    let formatted = Command::new(rustfmt)
        .args(["--edition", "2024"])
        .arg(path)
        .status();
    if !formatted.is_ok_and(|s| s.success()) {
        eprintln!("rustfmt failed on {}", path.display());
    }
}

/// The CUPTI functions the crate calls or exposes: checkpoint, version and result strings, the Activity API
/// and the Callback API.
const CUPTI_FUNCTIONS: &str = "(.*::)?(cuptiCheckpoint.*|cuptiGetResultString|cuptiGetErrorMessage\
    |cuptiGetVersion|cuptiActivity[A-Za-z_0-9]*|cuptiGetTimestamp|cuptiGetContextId|cuptiGetStreamId(Ex)?\
    |cuptiGetDeviceId|cuptiGetThreadIdType|cuptiSetThreadIdType|cuptiFinalize|cuptiGetLastError\
    |cuptiSubscribe(_v2)?|cuptiUnsubscribe|cuptiEnableCallback|cuptiEnableDomain|cuptiEnableAllDomains\
    |cuptiGetCallbackState|cuptiGetCallbackName|cuptiSupportedDomains|cuptiGetGraphId|cuptiGetGraphNodeId\
    |cuptiGetGraphExecId)";

/// The CUPTI types: checkpoint, results, every activity record (current and deprecated versions, so older
/// releases' layouts can be decoded), callback data, the callback-id enums.
const CUPTI_TYPES: &str = "(.*::)?(CUpti_Checkpoint.*|CUptiResult|CUpti_Activity.*|CUpti_Callback.*\
    |CUpti_ApiCallbackSite|CUpti_ResourceData|CUpti_ModuleResourceData|CUpti_SynchronizeData\
    |CUpti_driver_api_trace_cbid.*|CUpti_runtime_api_trace_cbid.*|CUpti_Subscriber.*\
    |CUpti_ExternalCorrelationKind|CUpti_Buffers.*|CUpti_TimestampCallbackFunc|CUpti_GraphData)";

/// Driver types that CUPTI declarations use; they come from the driver bindings so both agree.
const SHARED_DRIVER_TYPES: &[&str] = &[
    "CUcontext",
    "CUstream",
    "CUdevice",
    "CUmodule",
    "CUfunction",
    "CUuuid",
    "CUgraph",
    "CUgraphNode",
    "CUgraphExec",
    "CUgraphNodeType",
    "CUlaunchConfig",
];

fn cupti_bindings(cupti: &Path, cuda: &Path, out: &Path) {
    let shared = SHARED_DRIVER_TYPES.join(", ");
    let bindings = base("GPU_TOOLS_BIND_CUPTI")
        .clang_args(["-x", "c++", "-std=c++14"])
        .clang_arg(format!("-I{}", cupti.display()))
        .clang_arg(format!("-I{}", cuda.display()))
        // Items of cupti_checkpoint.h sit in namespace NV::Cupti::Checkpoint; their C names are plain.
        .allowlist_function(CUPTI_FUNCTIONS)
        .allowlist_type(CUPTI_TYPES)
        .allowlist_var("CUPTI_API_VERSION")
        .blocklist_type(
            "CUctx_st|CUcontext|CUstream_st|CUstream|CUdevice|CUdevice_v1|CUmod_st|CUmodule|CUfunc_st\
             |CUfunction|CUuuid|CUuuid_st|CUgraph_st|CUgraph|CUgraphNode_st|CUgraphNode|CUgraphExec_st\
             |CUgraphExec|CUgraphNodeType|CUgraphNodeType_enum|CUlaunchConfig|CUlaunchConfig_st",
        )
        .raw_line(format!("pub use super::cuda_driver::{{{shared}}};"))
        .dynamic_library_name("CuptiFns")
        .dynamic_link_require_all(false)
        .generate()
        .expect("bindgen: CUPTI");
    let version = define(&cupti.join("cupti_version.h"), "CUPTI_API_VERSION");
    let provenance = format!(
        "cupti_checkpoint.h, cupti_result.h, cupti_version.h, cupti_activity.h, cupti_callbacks.h, \
         cupti_driver_cbid.h, cupti_runtime_cbid.h (CUPTI_API_VERSION {version}, CUDA_VERSION {})",
        define(&cuda.join("cuda.h"), "CUDA_VERSION")
    );
    write(bindings, out, "cupti.rs", provenance);
    cbid_names(cupti, out, &version);
}

/// The CUPTI profiling functions: chip names, the profiler host and target, the range profiler, PM sampling, PC
/// sampling and SASS metrics.
const CUPTI_PROFILING_FUNCTIONS: &str = "cuptiDeviceGetChipName|cuptiProfiler[A-Za-z]*|cuptiRangeProfiler[A-Za-z]*\
    |cuptiPmSampling[A-Za-z]*|cuptiPCSampling[A-Za-z]*|cuptiSassMetrics[A-Za-z]*|cuptiGetSassToSourceCorrelation\
    |cuptiGetCubinCrc|cuptiRegisterComputeCrcCallback";

/// Their parameter structs and enums.
const CUPTI_PROFILING_TYPES: &str = "CUpti_Device_GetChipName_Params|CUpti_Profiler.*|CUpti_RangeProfiler.*\
    |CUpti_PmSampling.*|CUpti_PCSampling.*|CUpti_SassMetrics.*|CUpti_MetricType|CUpti_ProfilerType\
    |CUpti_ProfilerRange|CUpti_ProfilerReplayMode|CUpti_GetSassToSourceCorrelationParams|CUpti_GetCubinCrcParams\
    |CUpti_ComputeCrcCallbackFunc";

/// `src/sys/cupti_profiling.rs`: the profiling headers, as a table of their own (`CuptiProfilingFns`) opened on
/// the same `libcupti`. Result codes and driver handles come from the CUPTI and driver bindings.
fn cupti_profiling_bindings(cupti: &Path, cuda: &Path, out: &Path) {
    let bindings = base("GPU_TOOLS_BIND_CUPTI_PROFILING")
        // cupti_profiler_host.h includes <string>.
        .clang_args(["-x", "c++", "-std=c++14"])
        .clang_arg(format!("-I{}", cupti.display()))
        .clang_arg(format!("-I{}", cuda.display()))
        .allowlist_function(CUPTI_PROFILING_FUNCTIONS)
        .allowlist_type(CUPTI_PROFILING_TYPES)
        .allowlist_var("CUPTI_STALL_REASON_STRING_SIZE")
        .blocklist_type("CUptiResult|CUctx_st|CUcontext|CUdevice|CUdevice_v1|CUfunc_st|CUfunction|CUmod_st|CUmodule")
        .raw_line("pub use super::cuda_driver::{CUcontext, CUdevice};")
        .raw_line("pub use super::cupti::CUptiResult;")
        .dynamic_library_name("CuptiProfilingFns")
        .dynamic_link_require_all(false)
        .generate()
        .expect("bindgen: CUPTI profiling");
    let version = define(&cupti.join("cupti_version.h"), "CUPTI_API_VERSION");
    let provenance = format!(
        "cupti_target.h, cupti_profiler_target.h, cupti_profiler_host.h, cupti_range_profiler.h, \
         cupti_pmsampling.h, cupti_pcsampling.h, cupti_sass_metrics.h (CUPTI_API_VERSION {version}, CUDA_VERSION {})",
        define(&cuda.join("cuda.h"), "CUDA_VERSION")
    );
    write(bindings, out, "cupti_profiling.rs", provenance);
}

/// `(name, value)` of each enumerator `PREFIX<name> = <value>,` in a header, in header order.
fn enumerators(header: &Path, prefix: &str) -> Vec<(String, u32)> {
    let text = std::fs::read_to_string(header)
        .unwrap_or_else(|e| panic!("read {}: {e}", header.display()));
    text.lines()
        .filter_map(|l| l.trim().strip_prefix(prefix))
        .filter_map(|rest| {
            let (name, value) = rest.split_once('=')?;
            let value = value.trim().trim_end_matches(',').trim();
            let value = if let Some(hex) = value.strip_prefix("0x") {
                u32::from_str_radix(hex, 16).ok()?
            } else {
                value.parse().ok()?
            };
            Some((name.trim().to_string(), value))
        })
        .collect()
}

/// `src/sys/cupti_cbid_names.rs`: the name of every driver and runtime callback id, from the headers, as
/// arrays indexed by id (empty where the header has no enumerator). `INVALID`, `SIZE` and `FORCE_INT` are
/// not names.
fn cbid_names(cupti: &Path, out: &Path, version: &str) {
    let mut text = format!(
        "// Generated by xtask from cupti_driver_cbid.h and cupti_runtime_cbid.h (CUPTI_API_VERSION \
         {version}). Do not edit; see docs/development.md, \"Regenerating the sys layer\".\n"
    );
    for (file, prefix, konst, what) in [
        (
            "cupti_driver_cbid.h",
            "CUPTI_DRIVER_TRACE_CBID_",
            "DRIVER_CBID_NAMES",
            "driver API",
        ),
        (
            "cupti_runtime_cbid.h",
            "CUPTI_RUNTIME_TRACE_CBID_",
            "RUNTIME_CBID_NAMES",
            "runtime API",
        ),
    ] {
        let all = enumerators(&cupti.join(file), prefix);
        let size = all
            .iter()
            .find(|(n, _)| n == "SIZE")
            .map(|(_, v)| *v as usize)
            .unwrap_or_else(|| panic!("{file}: no {prefix}SIZE"));
        let mut names = vec![String::new(); size];
        for (name, value) in all {
            if matches!(name.as_str(), "INVALID" | "SIZE" | "FORCE_INT") {
                continue;
            }
            let slot = names
                .get_mut(value as usize)
                .unwrap_or_else(|| panic!("{file}: {name} = {value} is not below SIZE"));
            assert!(slot.is_empty(), "{file}: two names for {value}");
            *slot = name;
        }
        text.push_str(&format!(
            "\n/// Names of the {what} callback ids of `{file}`, indexed by id, without the `{prefix}` prefix.\n\
             pub const {konst}: [&str; {size}] = [\n"
        ));
        for name in names {
            text.push_str(&format!("    {name:?},\n"));
        }
        text.push_str("];\n");
    }
    let path = out.join("cupti_cbid_names.rs");
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    rustfmt(&path);
}

/// The driver calls the crate makes itself: initialisation, devices, contexts, memory, modules, launches.
const DRIVER_FUNCTIONS: &str = "cuInit|cuDriverGetVersion|cuGetErrorName|cuGetErrorString\
    |cuDeviceGet|cuDeviceGetCount|cuDeviceGetName|cuDeviceTotalMem(_v2)?|cuDeviceGetAttribute\
    |cuDevicePrimaryCtxRetain|cuDevicePrimaryCtxRelease(_v2)?|cuDevicePrimaryCtxGetState\
    |cuCtxCreate(_v[0-9])?|cuCtxDestroy(_v2)?|cuCtxGetCurrent|cuCtxSetCurrent|cuCtxPushCurrent(_v2)?\
    |cuCtxPopCurrent(_v2)?|cuCtxGetDevice|cuCtxGetApiVersion|cuCtxSynchronize\
    |cuMemAlloc(_v2)?|cuMemFree(_v2)?|cuMemGetInfo(_v2)?|cuMemcpyHtoD(_v2)?|cuMemcpyDtoH(_v2)?\
    |cuMemcpyDtoD(_v2)?|cuMemsetD8(_v2)?|cuMemsetD32(_v2)?\
    |cuModuleLoadData|cuModuleUnload|cuModuleGetFunction|cuLaunchKernel\
    |cuEventCreate|cuEventDestroy(_v2)?|cuEventRecord|cuEventSynchronize|cuEventElapsedTime(_v2)?\
    |cuStreamCreate|cuStreamDestroy(_v2)?|cuStreamSynchronize|cuStreamGetId|cuCtxGetId\
    |cuMemcpyHtoDAsync(_v2)?|cuMemcpyDtoHAsync(_v2)?|cuMemcpyDtoDAsync(_v2)?|cuMemsetD8Async|cuMemsetD32Async\
    |cuMemAllocHost(_v2)?|cuMemFreeHost|cuDeviceGetUuid(_v2)?|cuDeviceGetPCIBusId\
    |cuCheckpointProcess[A-Za-z]*\
    |cuGraphGetNodes|cuGraphGetEdges(_v2)?|cuGraphNodeGetType|cuGraphKernelNodeGetParams(_v2)?\
    |cuGraphChildGraphNodeGetGraph|cuFuncGetName|cuKernelGetName|cuStreamIsCapturing";

/// Driver types the crate names without calling a function that takes them (CUPTI records and callbacks).
const DRIVER_TYPES: &str = "CUresult|CUdevice_attribute|CUctx_flags|CUprocessState|CUcheckpoint[A-Za-z]*Args\
    |CUstream_flags|CUgraph|CUgraphNode|CUgraphExec|CUuuid|CUgraphNodeType|CUlaunchConfig";

fn driver_bindings(cuda: &Path, out: &Path) {
    let bindings = base("GPU_TOOLS_BIND_CUDA_DRIVER")
        .clang_arg(format!("-I{}", cuda.display()))
        .allowlist_function(DRIVER_FUNCTIONS)
        .allowlist_type(DRIVER_TYPES)
        .allowlist_var("CUDA_VERSION")
        .dynamic_library_name("DriverFns")
        .dynamic_link_require_all(false)
        .generate()
        .expect("bindgen: CUDA driver");
    let provenance = format!(
        "cuda.h (CUDA_VERSION {})",
        define(&cuda.join("cuda.h"), "CUDA_VERSION")
    );
    write(bindings, out, "cuda_driver.rs", provenance);
}

fn cudbg_bindings(cudbg: &Path, out: &Path) {
    let header = cudbg.join("cudadebugger.h");
    let bindings = base("GPU_TOOLS_BIND_CUDBG")
        .clang_arg(format!("-I{}", cudbg.display()))
        .allowlist_file(".*cudadebugger\\.h")
        .allowlist_type("CUDBG.*|CuDim.*|ptxStorageKind")
        .dynamic_library_name("CudbgEntryFns")
        .dynamic_link_require_all(false)
        .generate()
        .expect("bindgen: cudadebugger.h");
    let provenance = format!(
        "cudadebugger.h (CUDBG_API_VERSION {}.{}.{})",
        define(&header, "CUDBG_API_VERSION_MAJOR"),
        define(&header, "CUDBG_API_VERSION_MINOR"),
        define(&header, "CUDBG_API_VERSION_REVISION")
    );
    write(bindings, out, "cudbg.rs", provenance);
}

/// The core-dump table entries: the reader decodes them by hand, and asserts its offsets against these.
fn coredump_bindings(cudbg: &Path, out: &Path) {
    let bindings = base("GPU_TOOLS_BIND_CUDACORE")
        .clang_arg(format!("-I{}", cudbg.display()))
        .allowlist_file(".*cudacoredump\\.h")
        .allowlist_type("Cudbg.*")
        .generate()
        .expect("bindgen: cudacoredump.h");
    write(
        bindings,
        out,
        "cudacoredump.rs",
        "cudacoredump.h (CUDA 13.0, driver r580 format)".to_string(),
    );
}

fn rocprofiler_bindings(rocm: &Path, out: &Path) {
    let header = rocm.join("rocprofiler/v2/rocprofiler.h");
    let bindings = base("GPU_TOOLS_BIND_ROCPROFILER")
        .clang_arg(format!("-I{}", rocm.display()))
        .allowlist_file(".*rocprofiler/v2/rocprofiler\\.h")
        .dynamic_library_name("RocprofilerFns")
        .dynamic_link_require_all(false)
        .generate()
        .expect("bindgen: rocprofiler.h");
    let provenance = format!(
        "rocprofiler/v2/rocprofiler.h (ROCPROFILER_VERSION {}.{}, ROCm 6.1+ ABI)",
        define(&header, "ROCPROFILER_VERSION_MAJOR"),
        define(&header, "ROCPROFILER_VERSION_MINOR")
    );
    write(bindings, out, "rocprofiler.rs", provenance);
}

/// Types of rocprofiler-sdk left out: the argument and return-value unions of the traced APIs and the API id
/// enums. They mirror the HIP, HSA, ROCTx, RCCL, rocDecode, rocJPEG and OpenMP headers of one ROCm release, so
/// their layout and values change with those libraries; the crate names operations through the library's own
/// name queries instead. Records and callback payloads that embed them are left out too.
const SDK_VERSIONED_TYPES: &str = "(rocprofiler_[a-z_]*_api_args_t|rocprofiler_[a-z_]*_api_retval_t\
    |rocprofiler_[a-z_]*_api_id_t|rocprofiler_[a-z_]*_api_no_args|rocprofiler_callback_tracing_[a-z_]*_api_data_t\
    |rocprofiler_buffer_tracing_[a-z_]*_api_ext_record_t|rocprofiler_ompt_.*|rocprofiler_callback_tracing_ompt_data_t\
    |rocprofiler_[a-z_]*_api_table_t|rocprofiler_hsa_api_table_t|rocprofiler_buffer_tracing_rocdecode_api_record_t)\
    (__bindgen_.*)?";

/// Header files whose declarations stay out of the SDK bindings (see [`SDK_VERSIONED_TYPES`]).
const SDK_FOREIGN_FILES: &str = ".*/hip/[^/]*\\.hp?p?|.*/hip/amd_detail/.*|.*/ompt/.*\
    |.*rocprofiler-sdk/(rccl|rocdecode|rocjpeg|ompt)/.*|.*rocprofiler-sdk/(hsa|marker)/api_(args|id)\\.h\
    |.*rocprofiler-sdk/(hsa|marker)/[a-z_]*_api_id\\.h|.*rocprofiler-sdk-roctx/.*";

fn rocprofiler_sdk_bindings(include: &Path, out: &Path) {
    let version = include.join("rocprofiler-sdk/version.h");
    let bindings = base("GPU_TOOLS_BIND_ROCPROFILER_SDK")
        .clang_arg(format!("-I{}", include.display()))
        // The HIP headers the SDK's include need the platform named; nothing of HIP is kept.
        .clang_arg("-D__HIP_PLATFORM_AMD__")
        .allowlist_function("rocprofiler_.*")
        .allowlist_type("rocprofiler_.*")
        .allowlist_var("ROCPROFILER_.*")
        .blocklist_type(SDK_VERSIONED_TYPES)
        // What the HIP, OpenMP-tools, rocDecode and rocJPEG headers declare, and the SDK's mirrors of their API
        // ids and arguments: none of it is kept.
        .blocklist_file(SDK_FOREIGN_FILES)
        // The tool defines `rocprofiler_configure` (a Rust tool through `gpu_tools::rocprofiler_sdk`); the
        // library only calls it. Its type, `rocprofiler_configure_func_t`, stays. The OpenMP tool entry takes
        // OpenMP's own types.
        .blocklist_function("rocprofiler_configure|rocprofiler_ompt_.*")
        .dynamic_library_name("RocprofilerSdkFns")
        .dynamic_link_require_all(false)
        .generate()
        .expect("bindgen: rocprofiler-sdk/rocprofiler.h");
    let provenance = format!(
        "rocprofiler-sdk/rocprofiler.h and registration.h (ROCPROFILER_SDK_VERSION {}.{}.{})",
        define(&version, "ROCPROFILER_SDK_VERSION_MAJOR"),
        define(&version, "ROCPROFILER_SDK_VERSION_MINOR"),
        define(&version, "ROCPROFILER_SDK_VERSION_PATCH")
    );
    write(bindings, out, "rocprofiler_sdk.rs", provenance);
}

/// Assembles, in `dir`, the include folder `GPU_TOOLS_ROCPROFILER_SDK_INCLUDE` names, from source checkouts, where
/// no ROCm is installed (no package registry ships these headers):
/// - `GPU_TOOLS_ROCM_SYSTEMS_SRC`: a checkout of `ROCm/rocm-systems` (the committed bindings: the
///   `release/rocm-rel-7.0` branch at 64cf36def2c94b82e17a0fcf492b7cf7d22fc6a3, rocprofiler-sdk 1.0.0). Gives
///   `rocprofiler-sdk/`, `rocprofiler-sdk-roctx/` (from `projects/rocprofiler-sdk/source/include`), `hsa/` and
///   `hsakmt/` (from `projects/rocr-runtime`).
/// - `GPU_TOOLS_HIP_SRC` and `GPU_TOOLS_CLR_SRC`: checkouts of `ROCm/HIP` and `ROCm/clr` (their `include/hip` and
///   `hipamd/include/hip`). Only parsed: no HIP type reaches the bindings, so any HIP 6.2 or later does.
///
/// The headers CMake would configure are written the way the projects' CMake files write them:
/// `rocprofiler-sdk/version.h`, `rocprofiler-sdk-roctx/version.h` (from the SDK's `VERSION`),
/// `rocprofiler-sdk/ext_version.h` (from `hsa_api_trace_version.h`) and `hip/hip_version.h` (from HIP's `VERSION`).
fn stage_sdk_headers(dir: &Path) {
    let src = |name: &str| -> PathBuf {
        env::var_os(name).map(PathBuf::from).unwrap_or_else(|| {
            panic!("{name} is not set (see xtask/src/main.rs, stage_sdk_headers)")
        })
    };
    let (systems, hip, clr) = (
        src("GPU_TOOLS_ROCM_SYSTEMS_SRC"),
        src("GPU_TOOLS_HIP_SRC"),
        src("GPU_TOOLS_CLR_SRC"),
    );
    let sdk = systems.join("projects/rocprofiler-sdk");
    let rocr = systems.join("projects/rocr-runtime");
    copy_tree(
        &sdk.join("source/include/rocprofiler-sdk"),
        &dir.join("rocprofiler-sdk"),
    );
    copy_tree(
        &sdk.join("source/include/rocprofiler-sdk-roctx"),
        &dir.join("rocprofiler-sdk-roctx"),
    );
    copy_tree(&rocr.join("runtime/hsa-runtime/inc"), &dir.join("hsa"));
    copy_tree(&rocr.join("libhsakmt/include/hsakmt"), &dir.join("hsakmt"));
    copy_tree(&hip.join("include/hip"), &dir.join("hip"));
    copy_tree(&clr.join("hipamd/include/hip"), &dir.join("hip"));

    let read = |p: &Path| {
        std::fs::read_to_string(p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()))
    };
    let numbers = |text: &str| -> Vec<String> {
        text.lines()
            .map(str::trim)
            .filter(|l| l.chars().next().is_some_and(|c| c.is_ascii_digit()))
            .flat_map(|l| l.split('.').map(str::to_string).collect::<Vec<_>>())
            .collect()
    };
    let sdk_version = numbers(&read(&sdk.join("VERSION")));
    let [major, minor, patch] =
        [0, 1, 2].map(|i| sdk_version.get(i).cloned().unwrap_or_else(|| "0".into()));
    let full = format!("{major}.{minor}.{patch}");
    let configure = |template: &Path, extra: &dyn Fn(&str) -> String| {
        let text = read(template)
            .replace("@PROJECT_VERSION_MAJOR@", &major)
            .replace("@PROJECT_VERSION_MINOR@", &minor)
            .replace("@PROJECT_VERSION_PATCH@", &patch)
            .replace("@FULL_VERSION_STRING@", &full);
        let text = extra(&text);
        // Build-machine descriptions (git revision, compiler, system): empty, as in a build without them.
        let mut out = String::new();
        let mut rest = text.as_str();
        while let Some(at) = rest.find('@') {
            let tail = &rest[at + 1..];
            match tail.find('@') {
                Some(end)
                    if tail[..end]
                        .chars()
                        .all(|c| c.is_ascii_uppercase() || c == '_')
                        && end > 0 =>
                {
                    out.push_str(&rest[..at]);
                    rest = &tail[end + 1..];
                }
                _ => {
                    out.push_str(&rest[..=at]);
                    rest = tail;
                }
            }
        }
        out.push_str(rest);
        let target = template.with_extension("");
        let name = target.file_name().expect("template name");
        let parent = template
            .parent()
            .and_then(|p| p.file_name())
            .expect("template folder");
        let path = dir.join(parent).join(name);
        std::fs::write(&path, out).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    };
    let none = |t: &str| t.to_string();
    configure(&dir.join("rocprofiler-sdk/version.h.in"), &none);
    configure(&dir.join("rocprofiler-sdk-roctx/version.h.in"), &none);
    // ext_version.h: `#cmakedefine NAME @NAME@` takes the value of the HSA header's NAME without the prefix.
    let trace_version = read(&dir.join("hsa/hsa_api_trace_version.h"));
    let hsa_define = |name: &str| -> Option<u64> {
        trace_version.lines().find_map(|l| {
            let mut it = l.trim().strip_prefix("#define ")?.split_whitespace();
            (it.next()? == name)
                .then(|| it.next())
                .flatten()
                .and_then(|v| {
                    v.strip_prefix("0x")
                        .map_or_else(|| v.parse().ok(), |h| u64::from_str_radix(h, 16).ok())
                })
        })
    };
    // The runtime's version, as its CMakeLists.txt states it: `get_version("1.18.0")`.
    let rocr_cmake = read(&rocr.join("CMakeLists.txt"));
    let rocr_version: Vec<String> = rocr_cmake
        .lines()
        .find_map(|l| l.trim().strip_prefix("get_version(\""))
        .and_then(|rest| rest.split('"').next())
        .map(|v| v.split('.').map(str::to_string).collect())
        .unwrap_or_default();
    let ext = |text: &str| -> String {
        text.lines()
            .map(|l| match l.trim().strip_prefix("#cmakedefine ") {
                Some(rest) => {
                    let name = rest.split_whitespace().next().unwrap_or("");
                    match hsa_define(name.trim_start_matches("ROCPROFILER_")) {
                        Some(v) => format!("#define {name} {v}"),
                        None => format!("/* #undef {name} */"),
                    }
                }
                None => l
                    .replace(
                        "@HSA_RUNTIME_VERSION_MAJOR@",
                        rocr_version.first().map_or("1", |s| s),
                    )
                    .replace(
                        "@HSA_RUNTIME_VERSION_MINOR@",
                        rocr_version.get(1).map_or("0", |s| s),
                    ),
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    configure(&dir.join("rocprofiler-sdk/ext_version.h.in"), &ext);
    let hip_version = numbers(&read(&hip.join("VERSION")));
    let hip_part = |i: usize| hip_version.get(i).cloned().unwrap_or_else(|| "0".into());
    let hip_h = format!(
        "// Auto-generated by cmake\n\n#ifndef HIP_VERSION_H\n#define HIP_VERSION_H\n\n#define HIP_VERSION_MAJOR {}\n\
         #define HIP_VERSION_MINOR {}\n#define HIP_VERSION_PATCH {}\n#define HIP_VERSION_GITHASH \"\"\n\
         #define HIP_VERSION_BUILD_ID 0\n#define HIP_VERSION_BUILD_NAME \"\"\n\
         #define HIP_VERSION    (HIP_VERSION_MAJOR * 10000000 + HIP_VERSION_MINOR * 100000 + HIP_VERSION_PATCH)\n\n\
         #define __HIP_HAS_GET_PCH 0\n\n#endif\n",
        hip_part(0),
        hip_part(1),
        hip_part(2)
    );
    let path = dir.join("hip/hip_version.h");
    std::fs::write(&path, hip_h).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    println!(
        "{}: rocprofiler-sdk {full} headers staged; now GPU_TOOLS_ROCPROFILER_SDK_INCLUDE={}",
        dir.display(),
        dir.display()
    );
}

/// Copies the files of `from` (recursively) into `to`, keeping files already there from another tree.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap_or_else(|e| panic!("create {}: {e}", to.display()));
    let entries =
        std::fs::read_dir(from).unwrap_or_else(|e| panic!("read {}: {e}", from.display()));
    for entry in entries.flatten() {
        let path = entry.path();
        let target = to.join(entry.file_name());
        if path.is_dir() {
            copy_tree(&path, &target);
        } else {
            std::fs::copy(&path, &target)
                .unwrap_or_else(|e| panic!("copy {} to {}: {e}", path.display(), target.display()));
        }
    }
}
