//! `librocprofiler-sdk.so.1`, loaded once per process.
//!
//! Inside a program the SDK already runs in (a tool library it loaded, or a program that mapped it), the copy
//! already mapped is used: a second copy would hold a second, separate profiler. Otherwise the search looks in
//! `$GPU_TOOLS_ROCPROFILER_SDK_LIB`, `$ROCM_PATH/lib`, `/opt/rocm/lib`, every `/opt/rocm-*/lib` (newest first), the
//! lib folders of TheRock's Python packages (`_rocm_sdk_core*/lib` in each site-packages folder) and the system
//! loader. `.so.0` (SDK 0.x, ROCm 6.2–6.4) is found and refused with [`SdkError::UnsupportedVersion`].

use std::ffi::CStr;
use std::path::Path;
use std::sync::OnceLock;

use super::SdkError;
use crate::loader::{self, LibrarySpec, LoadError, Origin, Rejection, Slot};
use crate::sys::rocprofiler_sdk as sys;

/// The major version the bindings were generated for (rocprofiler-sdk 1.0.0, ROCm 7.0).
pub const SUPPORTED_MAJOR: u32 = 1;

const FILE_NAMES: &[&str] = &[
    "librocprofiler-sdk.so.1",
    "librocprofiler-sdk.so.0",
    "librocprofiler-sdk.so",
];
/// Names the library is mapped under, for the already-mapped check.
const MAPPED_PREFIX: &str = "librocprofiler-sdk.so";
/// Environment variable naming the library's path.
pub const ENV_VAR: &str = "GPU_TOOLS_ROCPROFILER_SDK_LIB";

/// The search, with the folders that need a look at the file system (`/opt/rocm-*`, the wheels' package names)
/// found once per process.
fn spec() -> &'static LibrarySpec {
    static SPEC: OnceLock<LibrarySpec> = OnceLock::new();
    SPEC.get_or_init(|| {
        let mut dirs: Vec<String> = vec!["/opt/rocm/lib".into(), "/opt/rocm/lib64".into()];
        dirs.extend(versioned_rocm_dirs(Path::new("/opt")));
        let mut wheel: Vec<String> = Vec::new();
        for site in loader::python_site_packages() {
            for sub in wheel_lib_dirs(site) {
                if !wheel.contains(&sub) {
                    wheel.push(sub);
                }
            }
        }
        LibrarySpec {
            name: "rocprofiler-sdk (librocprofiler-sdk.so.1)",
            file_names: FILE_NAMES,
            env_var: ENV_VAR,
            roots: &["ROCM_PATH"],
            root_subdirs: &["lib", "lib64"],
            standard_dirs: leak(dirs),
            wheel_subdirs: leak(wheel),
        }
    })
}

fn leak(v: Vec<String>) -> &'static [&'static str] {
    let strs: Vec<&'static str> = v
        .into_iter()
        .map(|s| &*Box::leak(s.into_boxed_str()))
        .collect();
    Box::leak(strs.into_boxed_slice())
}

/// `/opt/rocm-X.Y.Z/lib` for each versioned install, newest first.
pub(crate) fn versioned_rocm_dirs(opt: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(opt) else {
        return Vec::new();
    };
    let mut found: Vec<(Vec<u32>, String)> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let version = name.strip_prefix("rocm-")?;
            let key: Vec<u32> = version
                .split(['.', '-'])
                .map(|p| p.parse().unwrap_or(0))
                .collect();
            Some((
                key,
                opt.join(&name).join("lib").to_string_lossy().into_owned(),
            ))
        })
        .collect();
    found.sort_by(|a, b| b.0.cmp(&a.0));
    found.into_iter().map(|(_, d)| d).collect()
}

/// The lib folders of TheRock's Python packages in one site-packages folder: `_rocm_sdk_core/lib`, and the same
/// under the versioned package names the wheels use (`_rocm_sdk_core_<version>/lib`).
pub(crate) fn wheel_lib_dirs(site: &Path) -> Vec<String> {
    let mut out = vec!["_rocm_sdk_core/lib".to_string()];
    if let Ok(entries) = std::fs::read_dir(site) {
        let mut named: Vec<String> = entries
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| n.starts_with("_rocm_sdk_core") && n != "_rocm_sdk_core")
            .map(|n| format!("{n}/lib"))
            .collect();
        named.sort();
        out.extend(named);
    }
    out
}

static SDK: Slot<SdkLibrary> = Slot::new();

/// Every function the crate binds; a library missing one of them is rejected at load time.
pub(crate) const REQUIRED: &[&str] = &[
    "rocprofiler_get_version",
    "rocprofiler_get_status_string",
    "rocprofiler_get_timestamp",
    "rocprofiler_is_initialized",
    "rocprofiler_is_finalized",
    "rocprofiler_force_configure",
    "rocprofiler_create_context",
    "rocprofiler_start_context",
    "rocprofiler_stop_context",
    "rocprofiler_context_is_active",
    "rocprofiler_create_buffer",
    "rocprofiler_destroy_buffer",
    "rocprofiler_flush_buffer",
    "rocprofiler_configure_buffer_tracing_service",
    "rocprofiler_configure_callback_tracing_service",
    "rocprofiler_query_buffer_tracing_kind_name",
    "rocprofiler_query_buffer_tracing_kind_operation_name",
    "rocprofiler_query_callback_tracing_kind_name",
    "rocprofiler_query_callback_tracing_kind_operation_name",
    "rocprofiler_query_available_agents",
    "rocprofiler_iterate_agent_supported_counters",
    "rocprofiler_query_counter_info",
    "rocprofiler_create_counter_config",
    "rocprofiler_destroy_counter_config",
    "rocprofiler_query_record_counter_id",
    "rocprofiler_configure_buffer_dispatch_counting_service",
    "rocprofiler_configure_device_counting_service",
    "rocprofiler_sample_device_counting_service",
];

/// The loaded rocprofiler-sdk library, of a supported major version.
pub struct SdkLibrary {
    /// The bindgen table; every entry of [`REQUIRED`] was checked present at load time.
    pub(crate) t: sys::RocprofilerSdkFns,
    version: (u32, u32, u32),
}

// SAFETY: the table holds function pointers and a never-unloaded library handle; the SDK's entry points are
// thread-safe (it serves every thread of the traced program).
unsafe impl Send for SdkLibrary {}
// SAFETY: as above.
unsafe impl Sync for SdkLibrary {}

impl std::fmt::Debug for SdkLibrary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SdkLibrary")
            .field("path", &SDK.path())
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

impl SdkLibrary {
    /// The copy of the library this process already mapped, else the crate's search; once per process. Loading
    /// runs nothing of the SDK but its library constructors.
    pub fn load() -> crate::Result<&'static Self> {
        if let Some(lib) = SDK.get() {
            return Ok(lib);
        }
        let env_set = std::env::var_os(ENV_VAR).is_some_and(|v| !v.is_empty());
        let mapped = if env_set {
            None
        } else {
            crate::linux::procfs::Process::current().mapped_library(MAPPED_PREFIX)
        };
        let result = match &mapped {
            Some(path) => SDK.load(spec(), Some(path), bind),
            None => SDK.load(spec(), None, bind),
        };
        result.map_err(version_error)
    }

    /// Loads it from an explicit path.
    pub fn load_from(path: impl AsRef<Path>) -> crate::Result<&'static Self> {
        SDK.load(spec(), Some(path.as_ref()), bind)
            .map_err(version_error)
    }

    /// The library if loaded; never loads.
    pub fn get() -> Option<&'static Self> {
        SDK.get()
    }

    /// Where it was loaded from.
    pub fn path(&self) -> Option<&'static Path> {
        SDK.path()
    }

    /// `rocprofiler_get_version`: (major, minor, patch).
    pub fn version(&self) -> (u32, u32, u32) {
        self.version
    }

    /// `rocprofiler_get_status_string`: the library's text for a status.
    pub fn status_string(&self, status: u32) -> Option<String> {
        let f = self.t.rocprofiler_get_status_string.as_ref().ok()?;
        // SAFETY: maps a status to a static string; any value is accepted.
        let p = unsafe { f(status) };
        if p.is_null() {
            return None;
        }
        // SAFETY: non-null NUL-terminated static string.
        Some(
            unsafe { CStr::from_ptr(p) }
                .to_string_lossy()
                .trim()
                .to_string(),
        )
    }

    /// `rocprofiler_get_timestamp`: the clock of every record's timestamps, in nanoseconds.
    pub fn timestamp(&self) -> crate::Result<u64> {
        let f = sym(
            &self.t.rocprofiler_get_timestamp,
            "rocprofiler_get_timestamp",
        )?;
        let mut ts = 0u64;
        // SAFETY: a valid out-pointer.
        super::check("rocprofiler_get_timestamp", unsafe { f(&mut ts) })?;
        Ok(ts)
    }

    /// `rocprofiler_is_initialized`: whether the SDK has initialised (its tools are configured and the runtimes
    /// may be running); from then on no tool can register.
    pub fn is_initialized(&self) -> crate::Result<bool> {
        let f = sym(
            &self.t.rocprofiler_is_initialized,
            "rocprofiler_is_initialized",
        )?;
        let mut status = 0;
        // SAFETY: a valid out-pointer.
        super::check("rocprofiler_is_initialized", unsafe { f(&mut status) })?;
        Ok(status != 0)
    }

    /// `rocprofiler_is_finalized`: whether the SDK has finalised (no record is delivered any more).
    pub fn is_finalized(&self) -> crate::Result<bool> {
        let f = sym(&self.t.rocprofiler_is_finalized, "rocprofiler_is_finalized")?;
        let mut status = 0;
        // SAFETY: a valid out-pointer.
        super::check("rocprofiler_is_finalized", unsafe { f(&mut status) })?;
        Ok(status != 0)
    }
}

/// A library that loaded but reports an unsupported major version, as the typed error.
fn version_error(e: LoadError) -> crate::Error {
    for a in e.attempts() {
        if let Rejection::UnsupportedVersion(found) = &a.rejection {
            // Only when no candidate was usable: `e` lists every attempt, and this is one of them.
            return SdkError::UnsupportedVersion {
                found: found.clone(),
                supported: SUPPORTED_MAJOR,
                path: a.path.display().to_string(),
            }
            .into();
        }
    }
    e.into()
}

fn bind(path: &Path) -> Result<SdkLibrary, Rejection> {
    let lib = loader::dlopen(path)?;
    // SAFETY: only looks the symbol up and copies its address out; nothing is called yet.
    let get_version: sys::RocprofilerSdkFns = unsafe { sys::RocprofilerSdkFns::from_library(lib) }
        .map_err(|e| Rejection::OpenFailed(e.to_string()))?;
    let version_fn = loader::required(
        &get_version.rocprofiler_get_version,
        "rocprofiler_get_version",
    )?;
    let (mut major, mut minor, mut patch) = (0u32, 0u32, 0u32);
    // SAFETY: three valid out-pointers; the call only reports constants and works before initialisation.
    let status = unsafe { version_fn(&mut major, &mut minor, &mut patch) };
    if status != sys::ROCPROFILER_STATUS_SUCCESS {
        return Err(Rejection::OpenFailed(format!(
            "rocprofiler_get_version failed ({status})"
        )));
    }
    if major != SUPPORTED_MAJOR {
        return Err(Rejection::UnsupportedVersion(format!(
            "{major}.{minor}.{patch}"
        )));
    }
    for name in REQUIRED {
        if symbol_missing(&get_version, name) {
            return Err(Rejection::MissingSymbol(name));
        }
    }
    Ok(SdkLibrary {
        t: get_version,
        version: (major, minor, patch),
    })
}

/// Whether the table lacks `name` (one of [`REQUIRED`]).
fn symbol_missing(t: &sys::RocprofilerSdkFns, name: &str) -> bool {
    macro_rules! missing {
        ($($f:ident),* $(,)?) => {
            match name {
                $(stringify!($f) => t.$f.is_err(),)*
                _ => true,
            }
        };
    }
    missing!(
        rocprofiler_get_version,
        rocprofiler_get_status_string,
        rocprofiler_get_timestamp,
        rocprofiler_is_initialized,
        rocprofiler_is_finalized,
        rocprofiler_force_configure,
        rocprofiler_create_context,
        rocprofiler_start_context,
        rocprofiler_stop_context,
        rocprofiler_context_is_active,
        rocprofiler_create_buffer,
        rocprofiler_destroy_buffer,
        rocprofiler_flush_buffer,
        rocprofiler_configure_buffer_tracing_service,
        rocprofiler_configure_callback_tracing_service,
        rocprofiler_query_buffer_tracing_kind_name,
        rocprofiler_query_buffer_tracing_kind_operation_name,
        rocprofiler_query_callback_tracing_kind_name,
        rocprofiler_query_callback_tracing_kind_operation_name,
        rocprofiler_query_available_agents,
        rocprofiler_iterate_agent_supported_counters,
        rocprofiler_query_counter_info,
        rocprofiler_create_counter_config,
        rocprofiler_destroy_counter_config,
        rocprofiler_query_record_counter_id,
        rocprofiler_configure_buffer_dispatch_counting_service,
        rocprofiler_configure_device_counting_service,
        rocprofiler_sample_device_counting_service,
    )
}

/// A bound function pointer. Every name in [`REQUIRED`] was checked present at load time, so the error is
/// unreachable for a loaded library; it exists so that no call site needs `unwrap`.
pub(crate) fn sym<F: Copy>(
    field: &Result<F, libloading::Error>,
    name: &'static str,
) -> Result<F, crate::LoadError> {
    loader::required(field, name).map_err(|rejection| LoadError::NotFound {
        library: "rocprofiler-sdk (librocprofiler-sdk.so.1)",
        attempts: vec![loader::Attempt {
            path: SDK.path().map(Path::to_path_buf).unwrap_or_default(),
            origin: Origin::Explicit,
            rejection,
        }],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versioned_installs_are_searched_newest_first() {
        let dir = std::env::temp_dir().join(format!("gpu-tools-opt-{}", std::process::id()));
        for v in ["rocm-6.4.1", "rocm-7.0.2", "rocm-7.10.0", "rocm", "other"] {
            std::fs::create_dir_all(dir.join(v)).unwrap();
        }
        let found = versioned_rocm_dirs(&dir);
        let names: Vec<&str> = found
            .iter()
            .map(|d| d.rsplit('/').nth(1).unwrap())
            .collect();
        assert_eq!(names, ["rocm-7.10.0", "rocm-7.0.2", "rocm-6.4.1"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn wheel_folders_include_the_versioned_package_names() {
        let dir = std::env::temp_dir().join(format!("gpu-tools-site-{}", std::process::id()));
        for p in ["_rocm_sdk_core_7_0_0", "_rocm_sdk_core", "numpy"] {
            std::fs::create_dir_all(dir.join(p)).unwrap();
        }
        assert_eq!(
            wheel_lib_dirs(&dir),
            ["_rocm_sdk_core/lib", "_rocm_sdk_core_7_0_0/lib"]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
