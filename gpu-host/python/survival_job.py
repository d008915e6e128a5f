#!/usr/bin/env python3
"""The jobs of the attach survival matrix (gpu-host/scripts/attach_matrix.sh): each deterministic, so that an attached
run's result can be compared with an untouched one's.

    python3 survival_job.py KIND (--seconds S | --steps N)

KIND: eager, amp, graph (torch.cuda.graph captured at the start, replayed), compile (torch.compile default),
compile-ro (torch.compile mode="reduce-overhead": CUDA graph trees), profiler-open (eager training inside one
torch.profiler session open for the whole run), capture-late (captures a new CUDA graph every 200 steps and
replays it), fork-child (forks and execs a CUDA child every 2000 steps and checks its result), jax (a jitted
chain of matmuls: XLA runs it as command buffers, CUDA graphs), cupy-graph (CuPy kernels captured into a graph
on a stream, replayed).

With --seconds the loop ends at the first step after S seconds, and the job says how many it ran; with --steps it
runs exactly N. The result depends on the step count alone, never on the time: a run of --steps N reproduces the
result of a timed run that ran N steps (the matrix compares an attached timed run with an untouched one so).

Prints `ready PID` once the job's first step is done, `progress STEP` about every half second, then
`result ... steps N` (values that depend on every step, with enough digits to see any difference), and for
profiler-open `torch_profiler kernels N steps M` (the kernels the job's own profiler recorded).
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

KINDS = ["eager", "amp", "graph", "compile", "compile-ro", "profiler-open", "capture-late", "fork-child", "jax",
         "cupy-graph"]


def ready():
    print(f"ready {os.getpid()}", flush=True)


class Loop:
    """The step numbers of the main loop: exactly `steps` of them, or as many as start within `seconds`."""

    def __init__(self, steps, seconds, sync):
        self.limit, self.seconds, self.sync = steps, seconds, sync
        self.steps = 0

    def __iter__(self):
        start = last = time.perf_counter()
        i = 0
        while True:
            if self.limit and i >= self.limit:
                break
            if not self.limit and i % 50 == 0:
                now = time.perf_counter()
                if now - start >= self.seconds:
                    break
                if now - last >= 0.5:
                    self.sync()
                    print(f"progress {i}", flush=True)
                    last = now
            yield i
            i += 1
        self.steps = i


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
        for i in loop:
            loss = step()
            if kind == "fork-child" and i % 2000 == 1999:
                children += fork_child()
        sync()
        if prof is not None:
            prof.__exit__(None, None, None)
            starts = [e.time_range.start for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
            kernels = len(starts)
            print(f"torch_profiler kernels {kernels} steps {loop.steps}", flush=True)
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

    g, out = capture(1.0)
    g.replay()
    sync()
    ready()
    captures = 1
    for i in loop:
        if kind == "capture-late" and i % 200 == 199:
            g, out = capture(1.0 + (captures % 7) * 0.125)
            captures += 1
        g.replay()
        acc += out.double().sum()
    sync()
    extra = f" captures {captures}" if kind == "capture-late" else ""
    print(f"result {acc.item():.6f}{extra} steps {loop.steps}", flush=True)
    return 0


CHILD = (
    "import torch; t = torch.arange(1000, device='cuda', dtype=torch.float64); "
    "print(int((t * 2).sum().item()))"
)


def fork_child():
    """Forks; the child execs a CUDA program. 1 when it printed the right sum."""
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
    for i in loop:
        a, s = step(a, b)
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
    if args.kind == "jax":
        return run_jax(args.steps, args.seconds)
    if args.kind == "cupy-graph":
        return run_cupy(args.steps, args.seconds)
    return run_torch(args.kind, args.steps, args.seconds)


if __name__ == "__main__":
    sys.exit(main())
