//! The contract between the gpu-tools tool and the libraries it injects into programs (`gpu-tools-inject` for
//! CUDA, `gpu-tools-inject-rocm` for HIP), in one place, for both sides:
//!
//! | module | what it holds | which side |
//! |---|---|---|
//! | [`env`](mod@env) | the variables a tracer sets (`CUDA_INJECTION64_PATH`, `GPU_TOOLS_TRACE_*`, ...) and the words their values take, the attach entry's name and its status ([`env::AttachStatus`]) | both |
//! | [`control`] | the control bytes of an attached session ([`control::Control`]) and their one reader in the library ([`control::ControlReader`]) | both |
//! | [`settings`] | everything the tool tells an injected library, as one typed value ([`settings::Settings`]): its encoding into a launched program's environment or an attach argument, and its decoding in the library | both |
//! | [`flight`] | the flight recorder's report: what `where` reads over a socket from a process an attach traced (launches not finished, per stream) | both |
//! | [`sink`] | the sending end: where an injected library's stream goes (the tracer's socket or a file), fork-safe | the injected library |
//! | [`collect`] | the receiving end: the socket the injected libraries stream to, a thread per connection | the tool |
//! | `attach` (feature `attach`) | attaching to running processes: the sockets, the injection library started in each (its attach entry called, its status read as an `AttachStatus`), the connections, the control bytes and the stop; one session under `trace --pid` and `profile --pid` | the tool |
//! | [`launch`] | starting a program whose processes stream to this one: a private socket folder, the program, the accepting thread | the tool |
//! | [`message`] | the messages of an injected library that the tool acts on ([`message::Message`]: attached, ready, started, finished, refused, counts), typed records on the stream with their text rendered from them | both |
//! | [`profile`] | the per-kernel profile request and running a program with it (`gpu-tools profile`) | both |
//! | [`program`] | what counts as the program's own work in a window: its threads less the library's, and the CPU share of a program that ran | both |
//!
//! The records, the stream format and the reports are `gpu-tools-trace`'s: this crate carries them, it does not
//! define them. Loading a library into a running process is `gpu_tools::linux::inject`'s; `attach` calls it. This
//! crate prints nothing and starts no program but the one `launch` is given.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(unsafe_op_in_unsafe_fn, missing_docs)]
// No unwrap or expect outside tests: a panic here would cross into the program or the vendor's code, or end the
// tool without the error's words (CI's clippy, -D warnings, holds it).
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

#[cfg(feature = "attach")]
pub mod attach;
pub mod collect;
pub mod control;
pub mod env;
pub mod flight;
pub mod launch;
pub mod message;
pub mod profile;
pub mod program;
pub mod settings;
pub mod sink;
mod socket_folder;
