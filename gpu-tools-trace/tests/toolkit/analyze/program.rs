//! A simulated CUDA program, for traces with one problem planted: one host thread issuing work to one stream of
//! one GPU, with the timing rules of the CUDA runtime that matter to the analysis. The records are what CUPTI
//! would give: an API record per call, a kernel or copy record per operation with the call's correlation id.
//!
//! - A launch call takes `call` ns; its kernel starts 1 µs after the call returns, or 1 µs after the stream's
//!   last operation ends, whichever is later.
//! - An asynchronous copy of page-locked memory is issued like a kernel.
//! - A copy of pageable memory first waits for the stream to drain, then the host stages the bytes (at 10 GB/s)
//!   while the GPU waits, then the transfer runs (at 20 GB/s); the call returns when it ends.
//! - A blocking copy (`cudaMemcpy`) waits for the stream, runs, and returns 2 µs after it ends.
//! - A synchronisation returns 2 µs after the stream's last operation ends (1 µs after it is called, at least).

use std::sync::Arc;

use gpu_tools_testing::records::kernel_record;
use gpu_tools_trace::file::TraceFileWriter;
use gpu_tools_trace::{
    ApiDomain, ApiRecord, CopyKind, Encoder, EndReason, KernelRecord, MarkerKind, MarkerRecord,
    MemcpyRecord, MemoryKind, ProcessEnd, ProcessInfo, ProcessStart, Record, StreamHeader,
    TimestampClock,
};

/// Where a copy's host memory lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Host {
    Pinned,
    Pageable,
}

/// A simulated program (see the module docs).
#[derive(Debug)]
pub struct Program {
    /// The host's clock, ns.
    pub now: u64,
    /// When the stream's last operation ends.
    pub gpu_free: u64,
    /// Extra time the next operation waits on the device's side after the last one (a dependency).
    pub device_delay: u64,
    correlation: u32,
    marker: u32,
    pub records: Vec<Record>,
    pub pid: u32,
    pub thread: u32,
    pub rank: Option<u32>,
    /// How its stream ends (its end record's reason).
    pub end: EndReason,
}

impl Program {
    pub fn new(pid: u32) -> Self {
        Program {
            now: 1_000_000,
            gpu_free: 0,
            device_delay: 0,
            correlation: 0,
            marker: 0,
            records: Vec::new(),
            pid,
            thread: 7,
            rank: None,
            end: EndReason::Exit,
        }
    }

    /// Host work outside CUDA.
    pub fn host(&mut self, ns: u64) {
        self.now += ns;
    }

    fn call(&mut self, name: &str, start: u64, end: u64) -> u32 {
        self.correlation += 1;
        self.records.push(Record::Api(ApiRecord {
            start,
            end,
            domain: ApiDomain::Runtime,
            cbid: 1,
            name: Arc::from(name),
            correlation: self.correlation,
            process: self.pid,
            thread: self.thread,
            return_value: 0,
        }));
        self.correlation
    }

    /// When an operation issued at `issued` starts.
    fn starts(&self, issued: u64) -> u64 {
        (issued + 1_000).max(self.gpu_free + 1_000 + self.device_delay)
    }

    /// A kernel launch: the call takes `call` ns, the kernel runs `run` ns.
    pub fn kernel(&mut self, name: &str, call: u64, run: u64) -> KernelRecord {
        let (start_call, end_call) = (self.now, self.now + call);
        let correlation = self.call("cudaLaunchKernel", start_call, end_call);
        let start = self.starts(end_call);
        let k = kernel_record(name, start, start + run, correlation);
        self.records.push(Record::Kernel(k.clone()));
        self.gpu_free = start + run;
        self.now = end_call;
        k
    }

    /// A copy record of the call `correlation`, over `(start, end)`.
    fn copy_record(
        &mut self,
        correlation: u32,
        (kind, host, bytes): (CopyKind, Host, u64),
        (start, end): (u64, u64),
        is_async: bool,
    ) {
        let host_kind = match host {
            Host::Pinned => MemoryKind::Pinned,
            Host::Pageable => MemoryKind::Pageable,
        };
        let (src, dst) = match kind {
            CopyKind::DtoH => (MemoryKind::Device, host_kind),
            _ => (host_kind, MemoryKind::Device),
        };
        self.records.push(Record::Memcpy(MemcpyRecord {
            start,
            end,
            device: 0,
            context: 1,
            stream: 7,
            correlation,
            bytes,
            kind,
            src,
            dst,
            is_async,
        }));
        self.gpu_free = end;
    }

    /// `cudaMemcpyAsync` of `bytes` (see the module docs for pageable memory).
    pub fn copy_async(&mut self, kind: CopyKind, host: Host, bytes: u64) {
        let transfer = 1_000 + bytes / 20;
        let call_start = self.now;
        match host {
            Host::Pinned => {
                let end_call = call_start + 4_000;
                let correlation = self.call("cudaMemcpyAsync", call_start, end_call);
                let start = self.starts(end_call);
                self.copy_record(
                    correlation,
                    (kind, host, bytes),
                    (start, start + transfer),
                    true,
                );
                self.now = end_call;
            }
            Host::Pageable => {
                let staged = self.gpu_free.max(call_start + 2_000) + bytes / 10;
                let start = staged + 1_000;
                let end_call = start + transfer + 1_000;
                let correlation = self.call("cudaMemcpyAsync", call_start, end_call);
                self.copy_record(
                    correlation,
                    (kind, host, bytes),
                    (start, start + transfer),
                    true,
                );
                self.now = end_call;
            }
        }
    }

    /// `cudaMemcpy` of `bytes`: waits for the stream, returns when the copy is done.
    pub fn copy_blocking(&mut self, kind: CopyKind, host: Host, bytes: u64) {
        let call_start = self.now;
        let start = self.gpu_free.max(call_start + 3_000) + 1_000;
        let end = start + 1_000 + bytes / 20;
        let end_call = end + 2_000;
        let correlation = self.call("cudaMemcpy", call_start, end_call);
        self.copy_record(correlation, (kind, host, bytes), (start, end), false);
        self.now = end_call;
    }

    /// A synchronisation call `name` (`cudaDeviceSynchronize`, `cudaStreamSynchronize`).
    pub fn sync(&mut self, name: &str) {
        let start = self.now;
        let end = (start + 1_000).max(self.gpu_free + 2_000);
        self.call(name, start, end);
        self.now = end;
    }

    /// `.item()`: a 4-byte device-to-host copy into pinned memory, then a stream synchronisation.
    pub fn item(&mut self) {
        self.copy_async(CopyKind::DtoH, Host::Pinned, 4);
        self.sync("cudaStreamSynchronize");
    }

    /// Opens an NVTX range (returns its id).
    pub fn push(&mut self, name: &str) -> u32 {
        self.marker += 1;
        self.records.push(marker(
            MarkerKind::Start,
            self.marker,
            self.now,
            self.pid,
            self.thread,
            name,
        ));
        self.marker
    }

    /// Closes the NVTX range `id`.
    pub fn pop(&mut self, id: u32) {
        self.records.push(marker(
            MarkerKind::End,
            id,
            self.now,
            self.pid,
            self.thread,
            "",
        ));
    }

    /// The records as one stream of a process that started and ended (with API records when `api`).
    pub fn stream(&self, api: bool) -> Vec<u8> {
        self.stream_where(|r| api || !matches!(r, Record::Api(_)))
    }

    /// The records that `keep` accepts as one stream of a process that started and ended.
    pub fn stream_where(&self, keep: impl Fn(&Record) -> bool) -> Vec<u8> {
        let mut e = Encoder::new(&StreamHeader::new(
            self.pid,
            13_000,
            TimestampClock::Monotonic,
        ));
        e.push(&Record::ProcessStart(ProcessStart {
            pid: self.pid,
            parent_pid: 1,
            time: 1_000_000,
            command: "python3 planted.py".into(),
        }));
        let mut labels = Vec::new();
        if let Some(r) = self.rank {
            labels.push(("RANK".to_string(), r.to_string()));
        }
        e.push(&Record::ProcessInfo(ProcessInfo {
            host: "sim".into(),
            boot_id: "boot-sim".into(),
            labels,
        }));
        let mut n = 2;
        for r in self.records.iter().filter(|r| keep(r)) {
            e.push(r);
            n += 1;
        }
        e.push(&Record::ProcessEnd(ProcessEnd {
            time: self.now + 1_000,
            reason: self.end,
            records: n,
            dropped: 0,
            skipped: 0,
            callback_panics: 0,
        }));
        e.bytes().to_vec()
    }

    /// The program's trace file (API records included).
    pub fn file(&self) -> Vec<u8> {
        file_of(&[self.stream(true)])
    }
}

/// A trace file of these streams.
pub fn file_of(streams: &[Vec<u8>]) -> Vec<u8> {
    let mut w = TraceFileWriter::created_at(Vec::new(), 1_700_000_000_000_000_000)
        .expect("a file in memory");
    for s in streams {
        let n = w.add_stream();
        w.write(n, s).expect("written");
        w.close(n).expect("closed");
    }
    w.finish().expect("finished")
}

fn marker(kind: MarkerKind, id: u32, time: u64, process: u32, thread: u32, name: &str) -> Record {
    Record::Marker(MarkerRecord {
        time,
        kind,
        id,
        process,
        thread,
        domain: Arc::from(""),
        name: name.into(),
    })
}

/// The healthy part of every planted program: a step of 20 kernels of 50 µs, each launched by a 5 µs call (the
/// host runs ahead of the GPU).
pub fn compute(p: &mut Program) {
    for k in 0..20 {
        p.kernel(&format!("layer_{k:02}"), 5_000, 50_000);
    }
}
