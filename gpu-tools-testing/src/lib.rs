//! Test support for the gpu-tools repository; never published.
//!
//! - The C doubles of the vendor libraries (`doubles/*.c`), built by this crate's
//!   build script: [`doubles_dir`], [`double_path`]. Only this repository's tests build them, never a crate that
//!   depends on gpu-tools.
//! - Where the repository's executables are, on this machine or staged on a GPU host: [`example`],
//!   [`gpu_tools_cli`], [`inject_lib`].
//! - Helpers shared by the tests of several crates: [`process`] (child processes that are killed when a test
//!   ends), [`container`] (programs run in a mount namespace with a `/tmp` of their own, as a container's
//!   are), [`coredump_writer`] (small CUDA core dumps), [`cupti_double`] (the CUPTI double's controls),
//!   [`nvtx_module`] (a loaded copy of the double of a module with NVTX v3 compiled in), [`kernels`] (the `step` kernel, patterns and checksums), and, for the hardware tests, `cudbg` (debuggees
//!   and debugger sessions). A helper that loads a C double through feature-gated library APIs must compile
//!   under the features of the crate whose tests use it (a dev-dependency cannot follow them): it is a macro
//!   expanded there ([`cupti_double_loader!`]), or it stays in the one test binary of the library that uses it
//!   (`tests/NAME/common.rs`) when no other crate needs it.
//! - [`own_process`]: a test that needs a process of its own, run alone in a child process of its test binary,
//!   so that tests of process-wide state share a binary with others.
//! - [`job`]: a synthetic multi-host training job as trace files (the committed multi-rank fixture, the job
//!   benchmark).
//! - [`records`]: trace records with plain values ([`records::kernel`], [`records::api`]) for the tests and benches
//!   of every crate, gpu-tools-trace's included (a dev-dependency: its tests and this crate link one
//!   gpu-tools-trace); [`perfetto`]: Perfetto's messages, to read exports back.
//! - The hardware tests (`tests/*_hw/` of this crate: `checkpoint_hw`, `cupti_hw`, `cudbg_hw`, `amd_hw`), behind
//!   this crate's features `nvidia-hw-tests` and `amd-hw-tests`, so that the library has no test features;
//!   `gpu_memory` (device memory as `nvidia-smi` reports it) is theirs. (`cudbg` and `gpu_memory` exist only with `nvidia-hw-tests`: named here without links,
//!   which a build without the feature could not resolve.)

use std::path::PathBuf;

pub mod container;
pub mod coredump_writer;
#[cfg(feature = "nvidia-hw-tests")]
pub mod cudbg;
pub mod cupti_double;
#[cfg(feature = "nvidia-hw-tests")]
pub mod gpu_memory;
pub mod job;
pub mod kernels;
pub mod nvtx_module;
mod own_process;
pub mod perfetto;
pub mod process;
pub mod records;

pub use own_process::own_process;

/// Variable that names the folder of staged binaries on a GPU host (`example-NAME`, `bin-NAME`, the cdylibs).
pub const STAGE_BIN: &str = "GPU_STAGE_BIN";

/// Where the build script put the C test doubles; `GPU_TOOLS_DOUBLES_DIR` at run time overrides it (for test
/// binaries copied to another machine).
pub fn doubles_dir() -> PathBuf {
    std::env::var_os("GPU_TOOLS_DOUBLES_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("GPU_TOOLS_DOUBLES_DIR")))
}

/// Path of a compiled test double, `lib<name>.so` for `doubles/<name>.c`.
pub fn double_path(name: &str) -> PathBuf {
    doubles_dir().join(format!("lib{name}.so"))
}

/// Path of a C double's source, `doubles/<name>.c` (for a test that builds a variant of it, such as a stripped one).
pub fn double_source(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("doubles")
        .join(format!("{name}.c"))
}

/// `target/<profile>/` of the running test or bench binary (which lives in `target/<profile>/deps/`).
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    exe.parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>/deps/<test binary>")
        .to_path_buf()
}

/// An example of any workspace member: `$GPU_STAGE_BIN/example-NAME` on a GPU host, otherwise
/// `target/<profile>/examples/NAME` (built by `cargo test --workspace`, or `cargo build --examples`).
pub fn example(name: &str) -> PathBuf {
    if let Some(dir) = std::env::var_os(STAGE_BIN) {
        return PathBuf::from(dir).join(format!("example-{name}"));
    }
    profile_dir().join("examples").join(name)
}

/// The `gpu-tools` command-line tool: `$GPU_STAGE_BIN/bin-gpu-tools` on a GPU host, otherwise
/// `target/<profile>/gpu-tools` (built by `cargo test --workspace`, or `cargo build -p gpu-tools-cli`). The CLI's
/// own tests use `CARGO_BIN_EXE_gpu-tools` instead.
pub fn gpu_tools_cli() -> PathBuf {
    if let Some(dir) = std::env::var_os(STAGE_BIN) {
        return PathBuf::from(dir).join("bin-gpu-tools");
    }
    profile_dir().join("gpu-tools")
}

/// The injection library, absolute (as `CUDA_INJECTION64_PATH` needs): `$GPU_STAGE_BIN/libgpu_tools_inject.so`
/// on a GPU host, otherwise the newer of `target/<profile>/libgpu_tools_inject.so` and the copy in `deps/`
/// (`cargo build -p gpu-tools-inject`). Panics, naming the command that builds it, when it is absent.
pub fn inject_lib() -> PathBuf {
    workspace_cdylib("libgpu_tools_inject.so", "gpu-tools-inject")
}

/// The rocprofiler-sdk tool library (`ROCP_TOOL_LIBRARIES` needs it absolute), found as [`inject_lib`] finds the
/// CUDA one.
pub fn inject_rocm_lib() -> PathBuf {
    workspace_cdylib("libgpu_tools_inject_rocm.so", "gpu-tools-inject-rocm")
}

/// A shared library built by a member of the workspace, absolute: `$GPU_STAGE_BIN/FILE` on a GPU host, otherwise
/// the newer of `target/<profile>/FILE` and `target/<profile>/deps/FILE`. Panics, naming the command that builds
/// it, when it is absent.
fn workspace_cdylib(file: &str, package: &str) -> PathBuf {
    let candidates = match std::env::var_os(STAGE_BIN) {
        Some(dir) => vec![PathBuf::from(dir).join(file)],
        None => vec![
            profile_dir().join(file),
            profile_dir().join("deps").join(file),
        ],
    };
    let newest = candidates
        .iter()
        .filter_map(|p| Some((std::fs::metadata(p).ok()?.modified().ok()?, p)))
        .max()
        .map(|(_, p)| p.clone());
    let Some(found) = newest else {
        panic!(
            "{file} is not built (looked for {candidates:?}): run `cargo test --workspace`, or `cargo build -p \
             {package}` with this test's profile"
        );
    };
    std::fs::canonicalize(&found).expect("absolute path of a workspace library")
}

/// Injects `library` into process `pid` through its `entry` with `argument`, and again while the entry answers
/// anything but 0 (the injection library answers busy while the previous attach's thread ends), for `limit` at
/// most; panics past it, or where the injection itself fails, naming `who`.
#[cfg(feature = "inject")]
pub fn inject_until_started(
    pid: u32,
    library: &std::path::Path,
    entry: &str,
    argument: &str,
    limit: std::time::Duration,
    who: &str,
) -> gpu_tools::linux::inject::Injected {
    let deadline = std::time::Instant::now() + limit;
    loop {
        let done = gpu_tools::linux::inject::Injection::new(pid, library, entry)
            .argument(argument)
            .run()
            .unwrap_or_else(|e| panic!("{who}: injecting the library: {e}"));
        if done.entry_result == 0 {
            return done;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{who}: entry result {}",
            done.entry_result
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// The first connection to `listener` within `limit` (a library that never connects fails the test instead of
/// hanging it), blocking and with reads bounded by `limit` too. `who` names the connecting side in the panic.
pub fn accept_within(
    listener: &std::os::unix::net::UnixListener,
    limit: std::time::Duration,
    who: &str,
) -> std::os::unix::net::UnixStream {
    listener
        .set_nonblocking(true)
        .expect("a non-blocking listener");
    let deadline = std::time::Instant::now() + limit;
    let conn = loop {
        match listener.accept() {
            Ok((c, _)) => break c,
            Err(_) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(10))
            }
            Err(e) => panic!("{who} did not connect within {limit:?}: {e}"),
        }
    };
    conn.set_nonblocking(false).expect("a blocking connection");
    conn.set_read_timeout(Some(limit)).expect("a read timeout");
    conn
}

/// Runs the system's C compiler `cc` with `args`; a failure fails the test with the compiler's words.
pub fn cc(args: &[&str]) {
    let out = std::process::Command::new("cc")
        .args(args)
        .output()
        .expect("the system C compiler `cc` runs");
    assert!(
        out.status.success(),
        "cc {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// For a test the sandbox cannot run (no ptrace, no mount namespace): says why and lets the test stop, except
/// under CI (`CI` or `GPU_TOOLS_REQUIRE_WHEELS` set), whose machine can, where it fails.
pub fn skip_unless_ci(why: &str) {
    if let Some(v) = ["CI", "GPU_TOOLS_REQUIRE_WHEELS"]
        .iter()
        .find(|v| std::env::var_os(v).is_some())
    {
        panic!("{why}; {v} is set, so this is a failure");
    }
    eprintln!("{why}; skipping");
}
