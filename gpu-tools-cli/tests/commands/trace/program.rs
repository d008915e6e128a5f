//! The stand-in traced program: what a process with the injection library sends, for each scenario of the
//! `STANDIN` variable (run by `super::standin`, an ignored test, as the program `gpu-tools trace` runs).

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use gpu_tools::trace::*;
use gpu_tools_injection::env;
use gpu_tools_testing::records::kernel_record;

use super::{LINGER, STANDIN};

pub(super) const FILL: &str = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_";
pub(super) const FILL_DEMANGLED: &str = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, \
                              std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)";

fn kernel(name: &str, start: u64, stream: u32, correlation: u32) -> Record {
    Record::Kernel(KernelRecord {
        stream,
        grid: [2, 1, 1],
        block: [32, 1, 1],
        registers: 16,
        ..kernel_record(name, start, start + 2_000, correlation)
    })
}

fn api(name: &str, domain: ApiDomain, start: u64, correlation: u32) -> Record {
    Record::Api(ApiRecord {
        start,
        end: start + 500,
        domain,
        cbid: 1,
        name: Arc::from(name),
        correlation,
        process: std::process::id(),
        thread: 77,
        return_value: 0,
    })
}

/// What a traced process sends in the normal scenario: 3 kernels of 2 names on 2 streams, a copy, a set, the API
/// calls of all of them.
fn workload(base: u64) -> Vec<Record> {
    vec![
        api("cudaLaunchKernel", ApiDomain::Runtime, base, 1),
        api("cuLaunchKernel", ApiDomain::Driver, base + 100, 1),
        kernel(FILL, base + 1_000, 7, 1),
        api("cudaLaunchKernel", ApiDomain::Runtime, base + 200, 2),
        kernel(FILL, base + 4_000, 7, 2),
        api("cuLaunchKernel", ApiDomain::Driver, base + 300, 3),
        kernel("add_one", base + 5_000, 13, 3),
        api("cudaMemcpyAsync", ApiDomain::Runtime, base + 400, 4),
        Record::Memcpy(MemcpyRecord {
            start: base + 9_000,
            end: base + 10_000,
            device: 0,
            context: 1,
            stream: 13,
            correlation: 4,
            bytes: 65536,
            kind: CopyKind::HtoD,
            src: MemoryKind::Pinned,
            dst: MemoryKind::Device,
            is_async: true,
        }),
        Record::Memset(MemsetRecord {
            start: base + 11_000,
            end: base + 11_500,
            device: 0,
            context: 1,
            stream: 13,
            correlation: 5,
            bytes: 1 << 20,
            value: 0x5a,
            memory: MemoryKind::Device,
            is_async: true,
        }),
    ]
}

/// A stand-in traced process: one connection, records, and (unless it crashes) the end record.
struct Sender {
    sock: UnixStream,
    enc: Encoder,
}

impl Sender {
    fn connect() -> Sender {
        let path = std::env::var_os(env::SOCKET).expect("gpu-tools trace sets the socket");
        assert!(
            std::env::var_os(env::CUDA_INJECTION).is_some(),
            "gpu-tools trace sets CUDA_INJECTION64_PATH"
        );
        assert_eq!(
            std::env::var(env::KINDS).as_deref(),
            Ok("kernel,memcpy,memset,driver,runtime,nvtx"),
            "default kinds"
        );
        let sock = UnixStream::connect(path).expect("connect");
        let pid = std::process::id();
        // As the injection library's streams: thread fields hold Linux thread ids.
        let mut enc = Encoder::new(
            &StreamHeader::new(pid, 130001, TimestampClock::Monotonic)
                .with_thread_ids(ThreadIds::Linux),
        );
        enc.push(&Record::ProcessStart(ProcessStart {
            pid,
            parent_pid: 1,
            time: 0,
            command: "standin".into(),
        }));
        Sender { sock, enc }
    }

    fn send(&mut self, records: &[Record]) {
        for r in records {
            self.enc.push(r);
        }
        self.sock.write_all(self.enc.bytes()).expect("send");
        self.enc.clear();
    }

    fn end(mut self) {
        let records = self.enc.records();
        self.send(&[Record::ProcessEnd(ProcessEnd {
            time: 99_000_000,
            reason: EndReason::Exit,
            records,
            dropped: 0,
            skipped: 0,
            callback_panics: 0,
        })]);
    }
}

/// Plays one scenario.
pub(super) fn play(scenario: &str) {
    match scenario {
        "normal" => {
            let mut s = Sender::connect();
            s.send(&workload(1_000_000));
            s.end();
            if let Ok(ms) = std::env::var(LINGER) {
                std::thread::sleep(Duration::from_millis(ms.parse().unwrap()));
            }
        }
        "dropped" => {
            let mut s = Sender::connect();
            s.send(&workload(1_000_000));
            s.send(&[Record::Dropped(DroppedRecords {
                context: 1,
                stream: 7,
                count: 42,
            })]);
            s.end();
        }
        // The end record counts 3 records that never arrived.
        "short" => {
            let mut s = Sender::connect();
            s.send(&workload(1_000_000));
            let records = s.enc.records() + 3;
            s.send(&[Record::ProcessEnd(ProcessEnd {
                time: 99_000_000,
                reason: EndReason::Exit,
                records,
                dropped: 0,
                skipped: 0,
                callback_panics: 0,
            })]);
        }
        // The library lost 2 batches of records to a panic of its record callback.
        "panicked" => {
            let mut s = Sender::connect();
            s.send(&workload(1_000_000));
            let records = s.enc.records();
            s.send(&[Record::ProcessEnd(ProcessEnd {
                time: 99_000_000,
                reason: EndReason::Exit,
                records,
                dropped: 0,
                skipped: 0,
                callback_panics: 2,
            })]);
        }
        "crash" => {
            let mut s = Sender::connect();
            s.send(&workload(1_000_000));
            std::process::abort();
        }
        // SIGSEGV, as the library's handler meets it: the records flushed, the end record sent with the signal,
        // then the default action (the process dies of it).
        "segv" => {
            let mut s = Sender::connect();
            s.send(&workload(1_000_000));
            let records = s.enc.records();
            s.send(&[Record::ProcessEnd(ProcessEnd {
                time: 99_000_000,
                reason: EndReason::Signal(libc::SIGSEGV as u8),
                records,
                dropped: 0,
                skipped: 0,
                callback_panics: 0,
            })]);
            // SAFETY: the default action back (the test harness may have its own), then the signal: the process
            // dies of it.
            unsafe {
                libc::signal(libc::SIGSEGV, libc::SIG_DFL);
                libc::raise(libc::SIGSEGV);
            }
            unreachable!("SIGSEGV ends the process");
        }
        // A child that crashes as "segv" does, under a parent that goes on and exits 0.
        "segv-child" => {
            let mut s = Sender::connect();
            s.send(&workload(1_000_000));
            let me = std::env::current_exe().unwrap();
            let status = Command::new(me)
                .args(["trace::standin", "--exact", "--ignored", "--test-threads=1"])
                .env(STANDIN, "segv")
                .status()
                .unwrap();
            assert_eq!(
                std::os::unix::process::ExitStatusExt::signal(&status),
                Some(libc::SIGSEGV)
            );
            s.end();
        }
        "nocuda" => println!("not using CUDA"),
        // What the tracer set, on stdout, for the tests of its options; then no CUDA.
        "environment" => {
            for var in [
                env::KINDS,
                env::CUDA_INJECTION,
                env::NVTX_INJECTION,
                env::CUDA_GRAPH,
                env::API,
                env::API_SKIP,
            ] {
                println!("{var}={}", std::env::var(var).unwrap_or_default());
            }
        }
        "two" => {
            let mut s = Sender::connect();
            s.send(&workload(1_000_000));
            let me = std::env::current_exe().unwrap();
            let status = Command::new(me)
                .args(["trace::standin", "--exact", "--ignored", "--test-threads=1"])
                .env(STANDIN, "normal")
                .status()
                .unwrap();
            assert!(status.success());
            s.end();
        }
        "lingering-child" => {
            let mut s = Sender::connect();
            s.send(&workload(1_000_000));
            // A child that keeps a copy of the connection open after this process is gone (10 s), and never sends
            // an end record: the tracer must not wait for it past its drain timeout.
            // SAFETY: the child only sleeps and exits without running exit handlers.
            if unsafe { libc::fork() } == 0 {
                // Not the test's output pipes, only the trace connection stays open.
                // SAFETY: closes this child's copies of stdout and stderr.
                unsafe {
                    libc::close(1);
                    libc::close(2);
                }
                std::thread::sleep(Duration::from_secs(10));
                // SAFETY: leaves the child at once.
                unsafe { libc::_exit(0) };
            }
            // The parent dies without its end record (as a crash would).
            // SAFETY: leaves at once.
            unsafe { libc::_exit(0) };
        }
        "mute-child" => {
            let mut s = Sender::connect();
            s.send(&workload(1_000_000));
            s.end();
            // A child that connects and sends nothing (not even the stream's header) while it outlives this
            // process: the tracer must not forget the connection.
            // SAFETY: the child only connects, sleeps and exits without running exit handlers.
            if unsafe { libc::fork() } == 0 {
                // SAFETY: closes this child's copies of stdout and stderr (the test's output pipes).
                unsafe {
                    libc::close(1);
                    libc::close(2);
                }
                let path = std::env::var_os(env::SOCKET).unwrap();
                let _sock = UnixStream::connect(path);
                std::thread::sleep(Duration::from_secs(5));
                // SAFETY: leaves the child at once.
                unsafe { libc::_exit(0) };
            }
            // Exits once the child connected.
            std::thread::sleep(Duration::from_millis(200));
        }
        "garbage" => {
            let path = std::env::var_os(env::SOCKET).unwrap();
            let mut sock = UnixStream::connect(path).unwrap();
            sock.write_all(b"NOTATRACE-STREAM").unwrap();
        }
        other => panic!("unknown scenario {other}"),
    }
}
