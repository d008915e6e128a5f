//! A synthetic multi-host training job, written with the library's encoder and trace file writer: every rank's
//! stream as `gpu-tools trace` writes it (process start, clock anchor, host and rank variables, API calls, kernels,
//! NCCL collectives, NVTX steps, process end), one file per host. Deterministic: the same [`JobSpec`] gives the
//! same bytes, so the committed fixture (`tests/fixtures/traces/job-8rank/`, `cargo run -p xtask -- job-trace`)
//! is checked against a fresh generation.
//!
//! The model: a data-parallel step. Each rank computes `kernels_per_step` kernels back to back on stream 7, split
//! into `buckets` segments; after each segment it enters an AllReduce on its NCCL stream, which ends on every rank
//! when the last rank has entered it plus the transfer time (each rank's end a little later, by up to 1.5 µs: the
//! end jitter). After the last bucket an optimizer kernel runs, and the next step starts. One rank (`slow_rank`)
//! computes `slow_factor` times longer: every other rank waits for it inside the collectives.
//!
//! Clocks: host `h` has a monotonic clock `monotonic_offset(h)` ahead of true time, and a wall clock `wall_error(h)`
//! off (as NTP leaves it): clock anchors align the hosts up to `wall_error(h) - wall_error(0)`, which the
//! alignment on collectives should then remove (its correction is minus that).

use std::io::{self, Write};
use std::sync::Arc;

use gpu_tools::trace::file::TraceFileWriter;
use gpu_tools::trace::{
    ApiDomain, ApiRecord, ClockAnchor, Encoder, EndReason, KernelRecord, MarkerKind, MarkerRecord,
    ProcessEnd, ProcessInfo, ProcessStart, Record, StreamHeader, TimestampClock,
};

/// The recorded (mangled) name of NCCL's AllReduce kernel, as CUPTI reports it.
pub const ALLREDUCE: &str =
    "_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE";
/// Its name as the reports give it.
pub const ALLREDUCE_NAME: &str = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";
/// The NVTX range of a step, where [`JobSpec::nvtx`].
pub const STEP_RANGE: &str = "train_step";

/// The wall-clock time of true time 0, ns since the epoch.
const WALL_BASE: u64 = 1_760_000_000_000_000_000;

/// What job to generate.
#[derive(Debug, Clone, PartialEq)]
pub struct JobSpec {
    /// Hosts (`h0`, `h1`, ...), each with `ranks_per_host` ranks; rank `h * ranks_per_host + i`.
    pub hosts: u32,
    /// Ranks on each host.
    pub ranks_per_host: u32,
    /// Steps traced.
    pub steps: u32,
    /// Compute time of one step of a rank that is not slow, ns.
    pub compute_ns: u64,
    /// Compute kernels per step.
    pub kernels_per_step: u32,
    /// AllReduce collectives per step.
    pub buckets: u32,
    /// The transfer time of one collective once every rank has entered it, ns.
    pub transfer_ns: u64,
    /// The rank that computes longer, if any.
    pub slow_rank: Option<u32>,
    /// How much longer it computes.
    pub slow_factor: f64,
    /// An NVTX range [`STEP_RANGE`] around each step.
    pub nvtx: bool,
    /// A launch API call per kernel.
    pub api_calls: bool,
    /// Varies the jitter.
    pub seed: u64,
    /// Each rank in a PID namespace of its own (a container of its own): every rank's pid is 1, on one host as on
    /// several. Otherwise rank `r`'s pid is `1000 + r`.
    pub pid_namespaces: bool,
    /// The rank whose trace ends at a fatal signal (SIGSEGV, its end record's reason) rather than stopped, if any:
    /// a rank that crashed.
    pub crashed_rank: Option<u32>,
}

impl JobSpec {
    /// The committed fixture: 8 ranks on 4 hosts, rank 5 (on h2) 1.8 times slower, 30 steps of two buckets, no
    /// NVTX (steps from the pattern of collectives).
    pub fn fixture() -> JobSpec {
        JobSpec {
            hosts: 4,
            ranks_per_host: 2,
            steps: 30,
            compute_ns: 4_000_000,
            kernels_per_step: 8,
            buckets: 2,
            transfer_ns: 150_000,
            slow_rank: Some(5),
            slow_factor: 1.8,
            nvtx: false,
            api_calls: true,
            seed: 34,
            pid_namespaces: false,
            crashed_rank: None,
        }
    }

    /// A job of `ranks` ranks (8 per host) over about `seconds` of steps of 20 ms, 100 kernels a step with their
    /// launch calls, four buckets and NVTX steps: the benchmark's (about 5,000 kernels a second per rank).
    pub fn large(ranks: u32, seconds: f64) -> JobSpec {
        let per_host = 8.min(ranks.max(1));
        JobSpec {
            hosts: ranks.div_ceil(per_host),
            ranks_per_host: per_host,
            steps: (seconds * 50.0).round() as u32,
            compute_ns: 19_000_000,
            kernels_per_step: 100,
            buckets: 4,
            transfer_ns: 120_000,
            slow_rank: Some(ranks.saturating_sub(3)),
            slow_factor: 1.3,
            nvtx: true,
            api_calls: true,
            seed: 512,
            pid_namespaces: false,
            crashed_rank: None,
        }
    }

    /// The number of ranks.
    pub fn ranks(&self) -> u32 {
        self.hosts * self.ranks_per_host
    }

    /// Host `h`'s name.
    pub fn host_name(h: u32) -> String {
        format!("h{h}")
    }

    /// How far host `h`'s monotonic clock is ahead of true time, ns (seconds apart, as separate boots are).
    pub fn monotonic_offset(h: u32) -> u64 {
        1_000_000_000_000 + u64::from(h) * 731_013_545_862
    }

    /// How far host `h`'s wall clock is off, ns: up to a few hundred microseconds, as NTP leaves hosts.
    pub fn wall_error(h: u32) -> i64 {
        const ERRORS: [i64; 8] = [
            0, 412_300, -187_600, 88_100, -301_700, 250_900, -45_200, 133_300,
        ];
        ERRORS[(h % 8) as usize] + i64::from(h / 8) * 7_100
    }
}

/// splitmix64: deterministic noise.
fn noise(seed: u64, a: u64, b: u64, c: u64) -> u64 {
    let mut z = seed
        .wrapping_add(a.wrapping_mul(0x9e37_79b9_7f4a_7c15))
        .wrapping_add(b.wrapping_mul(0xbf58_476d_1ce4_e5b9))
        .wrapping_add(c.wrapping_mul(0x94d0_49bb_1331_11eb));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The job's timeline in true time: per step its start, per step and bucket when the last rank entered.
struct Timeline {
    starts: Vec<u64>,
    /// (step, bucket) -> the collective's end before the ranks' end jitter.
    ends: Vec<Vec<u64>>,
}

const OPTIMIZER_NS: u64 = 300_000;

impl JobSpec {
    /// Rank `r`'s compute time in step `k`.
    fn compute(&self, r: u32, k: u32) -> u64 {
        let jitter =
            1.0 + (noise(self.seed, u64::from(r), u64::from(k), 1) % 3_000) as f64 / 100_000.0;
        let factor = if Some(r) == self.slow_rank {
            self.slow_factor
        } else {
            1.0
        };
        (self.compute_ns as f64 * factor * jitter) as u64
    }

    /// Rank `r`'s end jitter on collective (`k`, `b`), ns (0 to 1,500).
    fn end_jitter(&self, r: u32, k: u32, b: u32) -> u64 {
        noise(self.seed, u64::from(r), u64::from(k), 100 + u64::from(b)) % 1_500
    }

    /// When rank `r` enters collective `b` of step `k`, given the step's start and the previous collective's end.
    fn entry(&self, r: u32, k: u32, b: u32, start: u64, previous_end: Option<u64>) -> u64 {
        let buckets = u64::from(self.buckets.max(1));
        let ready = start + self.compute(r, k) * (u64::from(b) + 1) / buckets;
        match previous_end {
            Some(e) => ready.max(e + self.end_jitter(r, k, b.saturating_sub(1)) + 1_000),
            None => ready,
        }
    }

    fn timeline(&self) -> Timeline {
        let mut starts = Vec::with_capacity(self.steps as usize);
        let mut ends = Vec::with_capacity(self.steps as usize);
        let mut start = 5_000_000u64;
        for k in 0..self.steps {
            starts.push(start);
            let mut step_ends: Vec<u64> = Vec::with_capacity(self.buckets as usize);
            for b in 0..self.buckets {
                let previous = step_ends.last().copied();
                let last_in = (0..self.ranks())
                    .map(|r| self.entry(r, k, b, start, previous))
                    .max()
                    .unwrap_or(start);
                step_ends.push(last_in + self.transfer_ns);
            }
            let last_end = step_ends.last().copied().unwrap_or(start);
            start = last_end + 5_000 + OPTIMIZER_NS + 20_000;
            ends.push(step_ends);
        }
        Timeline { starts, ends }
    }

    /// The trace file of host `h`: a stream per rank.
    pub fn host_file(&self, h: u32) -> Vec<u8> {
        let mut out = Vec::new();
        self.write_host_file(h, &mut out)
            .expect("writing to a Vec cannot fail");
        out
    }

    /// Writes the trace file of host `h` to `out`, a step at a time.
    pub fn write_host_file(&self, h: u32, out: impl Write) -> io::Result<()> {
        let timeline = self.timeline();
        let mono = Self::monotonic_offset(h);
        let local = |t: u64| t + mono;
        let wall = |t: u64| {
            (i128::from(WALL_BASE) + i128::from(t) + i128::from(Self::wall_error(h))) as u64
        };
        let mut file = TraceFileWriter::created_at(out, WALL_BASE)?;
        let compute: Arc<str> =
            Arc::from("void gemm_kernel<float, 128>(float const*, float const*, float*)");
        let optimizer: Arc<str> =
            Arc::from("void adam_step_kernel(float*, float const*, float*, float*)");
        let allreduce: Arc<str> = Arc::from(ALLREDUCE);
        let launch: Arc<str> = Arc::from("cudaLaunchKernel");
        for i in 0..self.ranks_per_host {
            let r = h * self.ranks_per_host + i;
            let pid = if self.pid_namespaces { 1 } else { 1_000 + r };
            let stream = file.add_stream();
            let mut e = Encoder::new(&StreamHeader::new(pid, 13_000, TimestampClock::Monotonic));
            e.push(&Record::ProcessStart(ProcessStart {
                pid,
                parent_pid: 999,
                time: local(1_000_000),
                command: format!("python train.py --rank {r}"),
            }));
            e.push(&Record::ClockAnchor(ClockAnchor {
                monotonic: local(1_000_000),
                realtime: wall(1_000_000),
                uncertainty: 120,
            }));
            let labels = vec![
                ("RANK".to_string(), r.to_string()),
                ("LOCAL_RANK".to_string(), i.to_string()),
                ("WORLD_SIZE".to_string(), self.ranks().to_string()),
            ];
            e.push(&Record::ProcessInfo(ProcessInfo {
                host: Self::host_name(h),
                boot_id: format!("boot-{h}"),
                labels,
            }));
            let mut correlation = 1u32;
            let nccl_stream = 13 + r % 3;
            let mut kernel =
                |e: &mut Encoder, name: &Arc<str>, stream: u32, start: u64, end: u64| {
                    if self.api_calls {
                        e.push(&Record::Api(ApiRecord {
                            start: local(start.saturating_sub(40_000)),
                            end: local(start.saturating_sub(36_000)),
                            domain: ApiDomain::Runtime,
                            cbid: 211,
                            name: Arc::clone(&launch),
                            correlation,
                            process: pid,
                            thread: pid,
                            return_value: 0,
                        }));
                    }
                    e.push(&Record::Kernel(KernelRecord {
                        start: local(start),
                        end: local(end),
                        device: 0,
                        context: 1,
                        stream,
                        correlation,
                        grid_id: u64::from(correlation),
                        grid: [128, 1, 1],
                        block: [256, 1, 1],
                        static_shared: 0,
                        dynamic_shared: 0,
                        registers: 32,
                        graph_id: 0,
                        graph_node_id: 0,
                        name: Arc::clone(name),
                    }));
                    correlation = correlation.wrapping_add(1);
                };
            for k in 0..self.steps {
                let start = timeline.starts[k as usize];
                let next = timeline
                    .starts
                    .get(k as usize + 1)
                    .copied()
                    .unwrap_or_else(|| {
                        timeline.ends[k as usize].last().copied().unwrap_or(start)
                            + 5_000
                            + OPTIMIZER_NS
                            + 20_000
                    });
                if self.nvtx {
                    e.push(&Record::Marker(MarkerRecord {
                        time: local(start - 30_000),
                        kind: MarkerKind::Start,
                        id: k + 1,
                        process: pid,
                        thread: pid,
                        domain: Arc::from(""),
                        name: STEP_RANGE.to_string(),
                    }));
                }
                let work = self.compute(r, k);
                let n = u64::from(self.kernels_per_step.max(1));
                for j in 0..n {
                    let a = start + work * j / n;
                    let b = start + work * (j + 1) / n;
                    kernel(&mut e, &compute, 7, a, b.saturating_sub(500).max(a + 1));
                }
                let mut previous = None;
                for b in 0..self.buckets {
                    let entered = self.entry(r, k, b, start, previous);
                    let end = timeline.ends[k as usize][b as usize];
                    kernel(
                        &mut e,
                        &allreduce,
                        nccl_stream,
                        entered,
                        end + self.end_jitter(r, k, b),
                    );
                    previous = Some(end);
                }
                let last_end = timeline.ends[k as usize].last().copied().unwrap_or(start);
                let opt = (last_end + 5_000).max(start + work);
                kernel(&mut e, &optimizer, 7, opt, opt + OPTIMIZER_NS);
                if self.nvtx {
                    e.push(&Record::Marker(MarkerRecord {
                        time: local(next - 40_000),
                        kind: MarkerKind::End,
                        id: k + 1,
                        process: pid,
                        thread: pid,
                        domain: Arc::from(""),
                        name: String::new(),
                    }));
                }
                file.write(stream, e.bytes())?;
                e.clear();
            }
            let end_time = timeline.starts.last().copied().unwrap_or(0) + 100_000_000;
            let records = e.records();
            e.push(&Record::ProcessEnd(ProcessEnd {
                time: local(end_time),
                reason: if self.crashed_rank == Some(r) {
                    EndReason::Signal(11)
                } else {
                    EndReason::Stopped
                },
                records,
                dropped: 0,
                skipped: 0,
                callback_panics: 0,
            }));
            file.write(stream, e.bytes())?;
            file.close(stream)?;
        }
        file.finish_at(WALL_BASE + 60_000_000_000)?;
        Ok(())
    }
}
