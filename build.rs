//! Build script.
//!
//! 1. Builds the C test doubles in `tests/doubles/` as shared libraries (when that folder exists, i.e. in a
//!    checkout, not in a published crate) and tells the tests where they are through `GPU_TOOLS_DOUBLES_DIR`.
//! 2. With the `regenerate-bindings` feature, regenerates `src/sys/*.rs` from vendor headers named by environment
//!    variables (see README.md). The default build needs neither libclang nor any vendor header.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    build_doubles();
    #[cfg(feature = "regenerate-bindings")]
    regenerate::run();
}

/// Compiles each `tests/doubles/*.c` into `lib<name>.so` in OUT_DIR. A failure here only warns: the library
/// itself does not need the doubles, and the tests that do report their absence clearly.
fn build_doubles() {
    let src = Path::new("tests/doubles");
    println!("cargo:rerun-if-changed=tests/doubles");
    let Ok(entries) = std::fs::read_dir(src) else {
        return;
    };
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("doubles");
    std::fs::create_dir_all(&out).expect("create OUT_DIR/doubles");
    let mut sources: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "c"))
        .collect();
    sources.sort();
    let compiler = cc::Build::new().opt_level(2).get_compiler();
    // Sanitizer flags for the doubles, e.g. GPU_TOOLS_DOUBLES_CFLAGS="-fsanitize=address".
    println!("cargo:rerun-if-env-changed=GPU_TOOLS_DOUBLES_CFLAGS");
    let extra = env::var("GPU_TOOLS_DOUBLES_CFLAGS").unwrap_or_default();
    for source in sources {
        println!("cargo:rerun-if-changed={}", source.display());
        let stem = source
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("double");
        let target = out.join(format!("lib{stem}.so"));
        let mut cmd: Command = compiler.to_command();
        cmd.args(["-shared", "-fPIC", "-pthread", "-Wall", "-Werror", "-g"])
            .args(extra.split_whitespace())
            .arg("-o")
            .arg(&target)
            .arg(&source)
            .arg("-lpthread");
        match cmd.status() {
            Ok(s) if s.success() => {}
            Ok(s) => println!(
                "cargo:warning=test double {} did not build ({s})",
                source.display()
            ),
            Err(e) => println!(
                "cargo:warning=no C compiler for test double {}: {e}",
                source.display()
            ),
        }
    }
    println!("cargo:rustc-env=GPU_TOOLS_DOUBLES_DIR={}", out.display());
}

#[cfg(feature = "regenerate-bindings")]
mod regenerate {
    //! `cargo build --features regenerate-bindings` with any of these set:
    //! - `GPU_TOOLS_CUPTI_INCLUDE`: folder with `cupti_checkpoint.h`, `cupti_result.h`, `cupti_version.h`,
    //!   `cupti_activity.h`, `cupti_callbacks.h` and the headers they include;
    //!   `GPU_TOOLS_CUDA_INCLUDE`: folder with `cuda.h` (both needed for the CUPTI and driver bindings);
    //! - `GPU_TOOLS_CUDBG_INCLUDE`: folder with `cudadebugger.h` and `cuda_stdint.h`;
    //! - `GPU_TOOLS_ROCM_INCLUDE`: folder with `rocprofiler/v2/rocprofiler.h`.
    //!
    //! Output goes to `GPU_TOOLS_BINDINGS_OUT` (default `src/sys`). `GPU_TOOLS_LAYOUT_TESTS=1` adds bindgen's
    //! layout assertions (clang's size, alignment and offset of every struct) to the output, to check that the
    //! generated `packed(8)` records match the C layout; the committed files leave them out.

    use super::*;

    /// Pinned in Cargo.toml (`bindgen = "=0.72.1"`), named in each generated file's first line.
    const BINDGEN_VERSION: &str = "0.72.1";

    pub fn run() {
        for var in [
            "GPU_TOOLS_CUPTI_INCLUDE",
            "GPU_TOOLS_CUDA_INCLUDE",
            "GPU_TOOLS_CUDBG_INCLUDE",
            "GPU_TOOLS_ROCM_INCLUDE",
            "GPU_TOOLS_BINDINGS_OUT",
            "GPU_TOOLS_LAYOUT_TESTS",
        ] {
            println!("cargo:rerun-if-env-changed={var}");
        }
        println!("cargo:rerun-if-changed=wrapper.h");
        let out = env::var("GPU_TOOLS_BINDINGS_OUT")
            .map(PathBuf::from)
            .unwrap_or_else(|_| {
                PathBuf::from(
                    env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
                )
                .join("src/sys")
            });
        let var = |name: &str| env::var(name).ok().map(PathBuf::from);
        if let (Some(cupti), Some(cuda)) = (
            var("GPU_TOOLS_CUPTI_INCLUDE"),
            var("GPU_TOOLS_CUDA_INCLUDE"),
        ) {
            cupti_bindings(&cupti, &cuda, &out);
            driver_bindings(&cuda, &out);
        }
        if let Some(cudbg) = var("GPU_TOOLS_CUDBG_INCLUDE") {
            cudbg_bindings(&cudbg, &out);
        }
        if let Some(rocm) = var("GPU_TOOLS_ROCM_INCLUDE") {
            rocprofiler_bindings(&rocm, &out);
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
            .header("wrapper.h")
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
            "// Generated by bindgen {BINDGEN_VERSION} from {provenance}. Do not edit; see README.md, \
             \"Regenerating the sys layer\".\n{body}"
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
            println!("cargo:warning=rustfmt failed on {}", path.display());
        }
    }

    /// The CUPTI functions the crate calls or exposes: checkpoint, version and result strings, the Activity API
    /// and the Callback API.
    const CUPTI_FUNCTIONS: &str = "(.*::)?(cuptiCheckpoint.*|cuptiGetResultString|cuptiGetErrorMessage\
        |cuptiGetVersion|cuptiActivity[A-Za-z_0-9]*|cuptiGetTimestamp|cuptiGetContextId|cuptiGetStreamId(Ex)?\
        |cuptiGetDeviceId|cuptiGetThreadIdType|cuptiSetThreadIdType|cuptiFinalize|cuptiGetLastError\
        |cuptiSubscribe(_v2)?|cuptiUnsubscribe|cuptiEnableCallback|cuptiEnableDomain|cuptiEnableAllDomains\
        |cuptiGetCallbackState|cuptiGetCallbackName|cuptiSupportedDomains)";

    /// The CUPTI types: checkpoint, results, every activity record (current and deprecated versions, so older
    /// releases' layouts can be decoded), callback data, the callback-id enums.
    const CUPTI_TYPES: &str = "(.*::)?(CUpti_Checkpoint.*|CUptiResult|CUpti_Activity.*|CUpti_Callback.*\
        |CUpti_ApiCallbackSite|CUpti_ResourceData|CUpti_ModuleResourceData|CUpti_SynchronizeData\
        |CUpti_driver_api_trace_cbid.*|CUpti_runtime_api_trace_cbid.*|CUpti_Subscriber.*\
        |CUpti_ExternalCorrelationKind|CUpti_Buffers.*|CUpti_TimestampCallbackFunc)";

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
                 |CUgraphExec",
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
            "// Generated by build.rs from cupti_driver_cbid.h and cupti_runtime_cbid.h (CUPTI_API_VERSION \
             {version}). Do not edit; see README.md, \"Regenerating the sys layer\".\n"
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
        |cuDevicePrimaryCtxRetain|cuDevicePrimaryCtxRelease(_v2)?\
        |cuCtxCreate(_v[0-9])?|cuCtxDestroy(_v2)?|cuCtxGetCurrent|cuCtxSetCurrent|cuCtxPushCurrent(_v2)?\
        |cuCtxPopCurrent(_v2)?|cuCtxGetDevice|cuCtxGetApiVersion|cuCtxSynchronize\
        |cuMemAlloc(_v2)?|cuMemFree(_v2)?|cuMemGetInfo(_v2)?|cuMemcpyHtoD(_v2)?|cuMemcpyDtoH(_v2)?\
        |cuMemcpyDtoD(_v2)?|cuMemsetD8(_v2)?|cuMemsetD32(_v2)?\
        |cuModuleLoadData|cuModuleUnload|cuModuleGetFunction|cuLaunchKernel\
        |cuEventCreate|cuEventDestroy(_v2)?|cuEventRecord|cuEventSynchronize|cuEventElapsedTime(_v2)?\
        |cuStreamCreate|cuStreamDestroy(_v2)?|cuStreamSynchronize|cuStreamGetId|cuCtxGetId\
        |cuMemcpyHtoDAsync(_v2)?|cuMemcpyDtoHAsync(_v2)?|cuMemcpyDtoDAsync(_v2)?|cuMemsetD8Async|cuMemsetD32Async\
        |cuMemAllocHost(_v2)?|cuMemFreeHost|cuDeviceGetUuid(_v2)?|cuDeviceGetPCIBusId\
        |cuCheckpointProcess[A-Za-z]*";

    /// Driver types the crate names without calling a function that takes them (CUPTI records and callbacks).
    const DRIVER_TYPES: &str = "CUresult|CUdevice_attribute|CUctx_flags|CUprocessState|CUcheckpoint[A-Za-z]*Args\
        |CUstream_flags|CUgraph|CUgraphNode|CUgraphExec|CUuuid";

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
}
