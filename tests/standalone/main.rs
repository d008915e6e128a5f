//! The library's tests that load no vendor library, one module each: the core-dump reader (recorded dumps, written
//! dumps, fuzzing), the counter-data and CUPTI record decoders' properties, the crate's docs, the error
//! conversions, the loader's refusals (no library is loaded into a process-wide slot here, so every case sees the
//! search), `linux::inject` on plain C programs, the raw layouts and serialisation. One binary: they share no
//! process-wide state. The search's environment variables (`loading_env`) change the process's environment: each
//! of those tests runs in a process of its own (`gpu_tools_testing::own_process`); `loading_python` runs its cases
//! in child processes itself.

mod coredump_fixtures;
mod coredump_fuzz;
mod coredump_reader;
mod counter_data_file_props;
mod crate_docs;
mod cupti_decode_props;
mod errors;
mod inject_process;
mod layout;
mod loading;
mod loading_env;
mod loading_python;
mod serde;
