#!/usr/bin/env python3
"""The jobs of the attach survival matrix (gpu-host/scripts/attach_matrix.sh): each deterministic, so that an attached
run's result can be compared with an untouched one's.

    python3 survival_job.py KIND (--seconds S | --steps N)

KIND: eager, amp, graph (torch.cuda.graph captured at the start, replayed), compile (torch.compile default),
compile-ro (torch.compile mode="reduce-overhead": CUDA graph trees), profiler-open (eager training inside one
torch.profiler session open for the whole run), capture-late (captures a new CUDA graph every 200 steps and
replays it), fork-child (forks and execs a CUDA child every 2000 steps and checks its result), jax (a jitted
chain of matmuls: XLA runs it as command buffers, CUDA graphs), cupy-graph (CuPy kernels captured into a graph
on a stream, replayed), profiler-schedule (eager training under a torch.profiler on a `schedule`: wait 2, warmup 1,
active 3 steps, repeated, as training frameworks' profiler callbacks run it: CUPTI started and stopped every few
steps), profiler-late (eager training with a torch.profiler session of 50 steps begun every 250 steps, so that
sessions start and end inside attach windows), nvtx (eager training with NVTX ranges pushed every step through
torch.cuda.nvtx), serving (a serving-like loop: requests of varying batch size, each an eager prefill then decode
steps replaying the CUDA graph captured for its batch size).

With --seconds the loop ends at the first step after S seconds, and the job says how many it ran; with --steps it
runs exactly N. The result depends on the step count alone, never on the time: a run of --steps N reproduces the
result of a timed run that ran N steps (the matrix compares an attached timed run with an untouched one so).

Prints `ready PID` once the job's first step is done, `progress STEP` about every half second, then
`result ... steps N` (values that depend on every step, with enough digits to see any difference), and for
the profiler kinds `torch_profiler kernels N steps M` (the GPU records the job's own profiler gave: kernels, copies and
sets) and `torch_profiler repeats N` (records it was handed twice), with profiler-schedule and profiler-late also
`torch_profiler_cycles` (the count of each cycle or session, run lengths as COUNTxTIMES: a cycle of 0 shows a window
that took the profiler's records). profiler-schedule synchronises before each schedule step, so that each full cycle
holds exactly its active steps' records whatever the GPU's pace. PROFILER_SCHEDULE=WAIT,WARMUP,ACTIVE (profiler-schedule;
default 2,1,3): its cycle, for instance 0,1,1 for a flush of the profiler's every other step, which makes a window's
start inside one of its flushes likely (the injection library's probe waits for such a flush: a run with its debug log
says how often). NEW_WORK_FILE (eager, jax): see NewWork. PAUSE_FILE (timed runs): while the file it names exists, the
job launches nothing and sleeps on the host between steps (`paused STEP` once, `resumed STEP` after), as fork-child
does while it waits for its child: pc_order_probe.sh's SET=4 attaches during such a pause. CAPTURE_EVERY=N
(capture-late; default 200): a new graph is captured every N steps, so that with a small N most of the job's time is
spent capturing (where_capture_probe.sh asks `where` against such a job).
"""
import argparse
import os
import sys
import time

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
# JAX takes 75% of the GPU's memory at its start unless told not to: the matrix runs other jobs on the same GPU.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
# XLA picks each GEMM's algorithm by timing the candidates at compile time (autotuning): with other jobs on the GPU
# the timings, and so the algorithm and the result's last digits, can differ between two runs. Three untouched runs
# alone on an H200 agreed to the last digit; the matrix runs jobs side by side, so autotuning is off for the
# comparison to mean something.
if "--xla_gpu_autotune_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_gpu_autotune_level=0").strip()

KINDS = ["eager", "amp", "graph", "compile", "compile-ro", "profiler-open", "profiler-schedule", "profiler-late",
         "nvtx", "serving", "capture-late", "fork-child", "jax", "cupy-graph"]


def ready():
    print(f"ready {os.getpid()}", flush=True)


class Loop:
    """The step numbers of the main loop: exactly `steps` of them, or as many as start within `seconds` (ending
    sooner once the file STOP_FILE names exists: the matrix ends a job when its attaches are done)."""

    def __init__(self, steps, seconds, sync):
        self.limit, self.seconds, self.sync = steps, seconds, sync
        self.stop_file = os.environ.get("STOP_FILE") if not steps else None
        self.pause_file = os.environ.get("PAUSE_FILE") if not steps else None
        self.steps = 0

    def __iter__(self):
        start = last = time.perf_counter()
        i = 0
        while True:
            if self.limit and i >= self.limit:
                break
            if not self.limit and i % 50 == 0:
                now = time.perf_counter()
                if now - start >= self.seconds or (self.stop_file and os.path.exists(self.stop_file)):
                    break
                if now - last >= 0.5:
                    self.sync()
                    print(f"progress {i}", flush=True)
                    last = now
                if self.pause_file and os.path.exists(self.pause_file):
                    self.pause(i)
            yield i
            i += 1
        self.steps = i

    def pause(self, i):
        """Idle on the GPU and the host until the pause file is gone (the step count, and so the result, unchanged)."""
        self.sync()
        print(f"paused {i}", flush=True)
        while os.path.exists(self.pause_file) and not (self.stop_file and os.path.exists(self.stop_file)):
            time.sleep(0.01)
        print(f"resumed {i}", flush=True)


class NewWork:
    """Work the job starts only once the file NEW_WORK_FILE names exists (checked every 50 steps), with kernels of
    its own that the job had not run (or compiled) before: pc_order_probe.sh's SET=3 asks whether PC sampling
    attributes kernels whose modules were loaded after an attach, where it attributes none loaded before. Its
    results are discarded: the job's result does not depend on it."""

    def __init__(self):
        self.file = os.environ.get("NEW_WORK_FILE")
        self.on = False

    def due(self, i):
        if self.file and not self.on and i % 50 == 0 and os.path.exists(self.file):
            self.on = True
            print(f"new_work from step {i}", flush=True)
        return self.on


def torch_model(width=512):
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                          nn.Linear(width, 10)).cuda()
    x = torch.randn(128, width, device="cuda")
    y = torch.randint(0, 10, (128,), device="cuda")
    return model, x, y


def checksum(model):
    return sum(p.double().sum().item() for p in model.parameters())


def run_torch(kind, steps, seconds):
    import torch
    from torch import nn

    if kind != "compile-ro":
        torch.use_deterministic_algorithms(True)
    model, x, y = torch_model()
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    sync = torch.cuda.synchronize
    loop = Loop(steps, seconds, sync)

    if kind in ("profiler-schedule", "profiler-late", "nvtx"):
        return run_torch_profiled(kind, model, x, y, loss_fn, opt, loop, sync)
    if kind == "serving":
        return run_serving(model, loop, sync)

    if kind in ("eager", "amp", "compile", "profiler-open", "fork-child"):
        fwd = torch.compile(model) if kind == "compile" else model

        def step():
            opt.zero_grad(set_to_none=False)
            if kind == "amp":
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    loss = loss_fn(fwd(x), y)
            else:
                loss = loss_fn(fwd(x), y)
            loss.backward()
            opt.step()
            return loss

        prof = None
        if kind == "profiler-open":
            from torch.profiler import ProfilerActivity, profile

            prof = profile(activities=[ProfilerActivity.CUDA])
            prof.__enter__()
            entered = time.monotonic()
        loss = step()
        sync()
        ready()
        children = 0
        new_work = NewWork()
        for i in loop:
            loss = step()
            if new_work.due(i):
                # A kernel no step of the MLP's runs (the lazily loaded module's function is loaded at its first call).
                torch.special.i0e(x).sum()
            if kind == "fork-child" and i % 2000 == 1999:
                children += fork_child()
        sync()
        if prof is not None:
            prof.__exit__(None, None, None)
            starts = gpu_record_starts_us(prof)
            kernels = len(starts)
            print(f"torch_profiler kernels {kernels} steps {loop.steps}", flush=True)
            print(f"torch_profiler repeats {gpu_record_repeats(prof)}", flush=True)
            # Where in time the profiler's kernels lie (0.1 s buckets from the session's start, in us as torch
            # gives them; the session began at CLOCK_MONOTONIC `entered`): a loss shows as a dip.
            buckets = {}
            for t in starts:
                b = int(t // 100_000)
                buckets[b] = buckets.get(b, 0) + 1
            hist = " ".join(f"{b}:{buckets[b]}" for b in sorted(buckets))
            print(f"torch_profiler_hist entered {entered:.6f} {hist}", flush=True)
        extra = f" children_ok {children}" if kind == "fork-child" else ""
        print(f"result {loss.item():.10f} {checksum(model):.10f}{extra} steps {loop.steps}", flush=True)
        return 0

    if kind == "compile-ro":
        # Inference under CUDA graph trees: the forward is captured once and replayed every step.
        fwd = torch.compile(model, mode="reduce-overhead")
        acc = torch.zeros((), device="cuda", dtype=torch.float64)
        with torch.no_grad():
            for _ in range(3):
                out = fwd(x)
            sync()
            ready()
            for _ in loop:
                out = fwd(x)
                acc += out.double().sum()
        sync()
        print(f"result {acc.item():.6f} steps {loop.steps}", flush=True)
        return 0

    # Graph kinds: an inference step captured into a CUDA graph, replayed; capture-late captures new ones as it goes.
    static_x = x.clone()
    acc = torch.zeros((), device="cuda", dtype=torch.float64)

    def capture(scale):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.no_grad(), torch.cuda.stream(s):
            for _ in range(2):
                model(static_x * scale)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.no_grad(), torch.cuda.graph(g):
            out = torch.relu(model(static_x * scale)).sum(dim=1)
        return g, out

    capture_every = max(1, int(os.environ.get("CAPTURE_EVERY", "200")))
    g, out = capture(1.0)
    g.replay()
    sync()
    ready()
    captures = 1
    for i in loop:
        if kind == "capture-late" and i % capture_every == capture_every - 1:
            g, out = capture(1.0 + (captures % 7) * 0.125)
            captures += 1
        g.replay()
        acc += out.double().sum()
    sync()
    extra = f" captures {captures}" if kind == "capture-late" else ""
    print(f"result {acc.item():.6f}{extra} steps {loop.steps}", flush=True)
    return 0


def gpu_record_starts_us(prof):
    """The start of each GPU record (kernel, copy, set) a torch.profiler session gave, in us from the session's
    start. Read from Kineto's results directly: `prof.events()` makes a Python object of each event first, which took
    over 90 s for a session open across a whole job with 16 jobs on the host (the matrix took it for a hang), and 26
    times as long as this on 120,000 events (11.9 s against 0.45 s, torch 2.11)."""
    import torch

    results = prof.profiler.kineto_results
    origin = results.trace_start_ns()
    cuda = torch.autograd.DeviceType.CUDA
    return [(e.start_ns() - origin) / 1000 for e in results.events() if e.device_type() == cuda]


def record_runs(starts_us):
    """A cycle's GPU records in runs split where the GPU was idle over 1 ms (the synchronisation between steps), as
    `COUNT@FIRST_START_US` each: where in a cycle records lack."""
    runs_at, prev = [], None
    for t in starts_us:
        if prev is None or t - prev > 1000:
            runs_at.append([0, t])
        runs_at[-1][0] += 1
        prev = t
    return " ".join(f"{c}@{t:.0f}" for c, t in runs_at)


def gpu_records(prof):
    """The number of GPU records (kernels, copies, sets) a torch.profiler session gave."""
    return len(gpu_record_starts_us(prof))


def gpu_record_repeats(prof):
    """How many GPU records of a torch.profiler session repeat another of it: the same correlation id, start and
    name. The GPU runs one record of a stream at a time and CUPTI gives each launch its own correlation id, so a
    repeat is a record the profiler was handed twice."""
    import torch

    cuda = torch.autograd.DeviceType.CUDA
    seen = set()
    repeats = 0
    for e in prof.profiler.kineto_results.events():
        if e.device_type() != cuda:
            continue
        key = (e.correlation_id(), e.start_ns(), e.name())
        if key in seen:
            repeats += 1
        seen.add(key)
    return repeats


def runs(counts):
    """Run lengths, `COUNTxTIMES` each: `84x20 0x3 84x7`."""
    out = []
    for c in counts:
        if out and out[-1][0] == c:
            out[-1][1] += 1
        else:
            out.append([c, 1])
    return " ".join(f"{c}x{n}" for c, n in out)


def run_torch_profiled(kind, model, x, y, loss_fn, opt, loop, sync):
    """profiler-schedule, profiler-late and nvtx: eager training steps with the job's own tools in use."""
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    def step(i):
        opt.zero_grad(set_to_none=False)
        if kind == "nvtx":
            torch.cuda.nvtx.range_push(f"step {i % 4}")
            torch.cuda.nvtx.range_push("forward")
        loss = loss_fn(model(x), y)
        if kind == "nvtx":
            torch.cuda.nvtx.range_pop()
            torch.cuda.nvtx.mark("backward")
        loss.backward()
        opt.step()
        if kind == "nvtx":
            torch.cuda.nvtx.range_pop()
        return loss

    cycles = []
    # When each cycle was collected (CLOCK_MONOTONIC, ns: the injection library's debug log is stamped with it).
    collected_ns = []
    repeats = [0]

    # Each cycle's GPU record starts (us from its session's start), to tell where in an unusual cycle records lack.
    starts = []

    def collect(p):
        s = sorted(gpu_record_starts_us(p))
        cycles.append(len(s))
        starts.append(s)
        collected_ns.append(time.monotonic_ns())
        repeats[0] += gpu_record_repeats(p)

    prof = None
    if kind == "profiler-schedule":
        # As training frameworks' profiler callbacks run it: each cycle starts and stops CUPTI's recording.
        wait, warmup, active = (int(n) for n in os.environ.get("PROFILER_SCHEDULE", "2,1,3").split(","))
        prof = profile(activities=[ProfilerActivity.CUDA],
                       schedule=schedule(wait=wait, warmup=warmup, active=active), on_trace_ready=collect)
        prof.__enter__()
    loss = step(0)
    sync()
    ready()
    session = None
    for i in loop:
        if kind == "profiler-late" and i % 250 == 0:
            session = profile(activities=[ProfilerActivity.CUDA])
            session.__enter__()
        loss = step(i)
        if prof is not None:
            # The step's work is done before the schedule moves on (as a loop that logs its loss each step): Kineto
            # keeps the GPU records that run between a cycle's start and its stop, so without this a cycle's count
            # is the GPU's pace, not the steps': with 16 jobs on one H200 a queue of earlier steps can run inside one
            # cycle (likely how an attached cycle held 275 records where 3 steps make 188) and a cycle's last step
            # after its stop. Synchronised, every full cycle holds exactly its active steps, and any other count is a
            # record lost or repeated.
            sync()
            prof.step()
        if session is not None and i % 250 == 49:
            sync()
            session.__exit__(None, None, None)
            collect(session)
            session = None
    sync()
    if session is not None:
        session.__exit__(None, None, None)
        collect(session)
    if prof is not None:
        prof.__exit__(None, None, None)
    if kind != "nvtx":
        print(f"torch_profiler kernels {sum(cycles)} steps {loop.steps}", flush=True)
        print(f"torch_profiler_cycles {runs(cycles)}", flush=True)
        # The cycles unlike the most common count (the last, partial one aside), with when each was collected: to
        # set beside the attaches' times.
        if len(cycles) > 1:
            usual = max(set(cycles[:-1]), key=cycles[:-1].count)
            for n, (count, at) in enumerate(zip(cycles[:-1], collected_ns)):
                if count != usual:
                    print(f"torch_profiler_cycle_unlike {n} {count} of {usual} collected_ns {at} runs "
                          f"{record_runs(starts[n])}", flush=True)
        # The same for one usual cycle, to compare with.
        if len(cycles) > 2:
            n = next((i for i, c in enumerate(cycles[:-1]) if c == usual), None)
            if n is not None:
                print(f"torch_profiler_cycle_usual {n} runs {record_runs(starts[n])}", flush=True)
        print(f"torch_profiler repeats {repeats[0]}", flush=True)
    print(f"result {loss.item():.10f} {checksum(model):.10f} steps {loop.steps}", flush=True)
    return 0


def run_serving(model, loop, sync):
    """A serving-like loop: each request has a batch size (a fixed pseudo-random sequence), an eager prefill over
    its prompt, then decode steps that replay the CUDA graph captured at the start for that batch size."""
    import torch

    sizes = [1, 2, 4, 8, 16, 32]
    width = 512
    graphs = {}
    with torch.no_grad():
        for b in sizes:
            static = torch.randn(b, width, device="cuda", generator=torch.Generator("cuda").manual_seed(b))
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(2):
                    model(static)
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                out = torch.softmax(model(static), dim=1)
            graphs[b] = (g, static, out)
    prompt = torch.randn(64, width, device="cuda", generator=torch.Generator("cuda").manual_seed(7))
    acc = torch.zeros((), device="cuda", dtype=torch.float64)
    seed = 12345
    with torch.no_grad():
        graphs[1][0].replay()
        sync()
        ready()
        for i in loop:
            # Every 8th step a new request: its batch size, and an eager prefill over its prompt.
            if i % 8 == 0:
                seed = (seed * 1103515245 + 12345) % (1 << 31)
                b = sizes[seed % len(sizes)]
                g, static, out = graphs[b]
                static.copy_(torch.tanh(model(prompt)[:b].repeat(1, width // 10 + 1)[:, :width]))
            g.replay()
            acc += out.double().sum()
    sync()
    print(f"result {acc.item():.6f} steps {loop.steps}", flush=True)
    return 0


CHILD = (
    "import torch; t = torch.arange(1000, device='cuda', dtype=torch.float64); "
    "print(int((t * 2).sum().item()))"
)


def fork_child():
    """Forks; the child execs a CUDA program. 1 when it printed the right sum. The wait is stamped on
    CLOCK_MONOTONIC (`child_wait_start NS`, `child_wait_end NS`): the matrix tells a window in which this job waited
    for its child, and ran nothing on the GPU, from one that lost its records."""
    print(f"child_wait_start {time.monotonic_ns()}", flush=True)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.dup2(w, 1)
        os.execv(sys.executable, [sys.executable, "-c", CHILD])
    os.close(w)
    with os.fdopen(r) as f:
        text = f.read().strip()
    _, status = os.waitpid(pid, 0)
    print(f"child_wait_end {time.monotonic_ns()}", flush=True)
    return 1 if os.waitstatus_to_exitcode(status) == 0 and text == str(999000) else 0


def run_jax(steps, seconds):
    import jax
    import jax.numpy as jnp

    @jax.jit
    def step(a, b):
        # A chain of fusions and matmuls: XLA runs such a chain as a command buffer (a CUDA graph).
        for _ in range(6):
            a = jnp.tanh(a @ b) * 0.5 + 0.01
        return a, jnp.sum(a)

    a = jnp.ones((256, 256), jnp.float32) * 0.01
    b = (jnp.eye(256, dtype=jnp.float32) + jnp.ones((256, 256), jnp.float32) * 1e-3)
    a, s = step(a, b)
    s.block_until_ready()
    ready()
    loop = Loop(steps, seconds, lambda: s.block_until_ready())
    total = 0.0
    new_work, other = NewWork(), None
    for i in loop:
        a, s = step(a, b)
        if new_work.due(i):
            if other is None:
                # Compiled (and its module loaded) only now.
                other = jax.jit(lambda a, b: jnp.sum(jnp.sin(a @ b.T) * jnp.cos(a)))
            other(a, b)
        if i % 100 == 0:
            total += float(s)
    s.block_until_ready()
    print(f"result {float(s):.6f} {total:.6f} steps {loop.steps}", flush=True)
    return 0


def run_cupy(steps, seconds):
    import cupy as cp

    x = cp.arange(1 << 16, dtype=cp.float64) / (1 << 16)
    acc = cp.zeros((), dtype=cp.float64)
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        stream.begin_capture()
        y = cp.sin(x) * 0.5
        y = y * y + 0.25
        acc += y.sum()
        graph = stream.end_capture()
    graph.launch(stream)
    stream.synchronize()
    ready()
    loop = Loop(steps, seconds, stream.synchronize)
    for _ in loop:
        graph.launch(stream)
    stream.synchronize()
    print(f"result {float(acc):.6f} steps {loop.steps}", flush=True)
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("kind", choices=KINDS)
    limit = p.add_mutually_exclusive_group(required=True)
    limit.add_argument("--steps", type=int, default=0)
    limit.add_argument("--seconds", type=float, default=0.0)
    args = p.parse_args()
    # Python's stacks on SIGUSR1, as training frameworks arrange: the matrix's hang probe asks for them this way
    # (never with a debugger, whose CUDA attach the driver refuses in a process that ran CUPTI, killing it).
    import faulthandler
    import signal

    faulthandler.register(signal.SIGUSR1, all_threads=True)
    if args.kind == "jax":
        return run_jax(args.steps, args.seconds)
    if args.kind == "cupy-graph":
        return run_cupy(args.steps, args.seconds)
    return run_torch(args.kind, args.steps, args.seconds)


if __name__ == "__main__":
    sys.exit(main())
