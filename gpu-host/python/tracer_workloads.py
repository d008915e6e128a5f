#!/usr/bin/env python3
"""The PyTorch workloads of benches/gpu/tracers.sh, all in one process (one import of torch per configuration).

    python3 tracer_workloads.py [--workloads flood,train,graph,serving] [--scale S] [--profiler]
    python3 tracer_workloads.py --steady SECONDS

Each workload is warmed up, then timed around its loop and a final synchronize (start-up, the warm-up, graph
captures and the profiler's processing after the loop are outside the timed region); one line each:

    work torch_flood ms T units N          100,000 launches of a tiny kernel back to back, one synchronize
    work torch_train ms T units N          a small MLP's training step (forward, backward, SGD), a synchronize per step
    work torch_graph ms T units N          replays of a training step captured in a CUDA graph, one synchronize
    work torch_serving ms T units N        a serving-like loop: graph replays of varying batch size (one graph per
                                           size), eager pre- and post-processing between them, a synchronize every
                                           8 requests

--scale multiplies every count (SMOKE runs use 0.02). --profiler runs each workload inside torch.profiler with CPU
and CUDA activities, the timed region inside the profiler's context; `profiler torch_flood exit_ms T events N` says
what the profiler's stop and processing took afterwards, and how many events it kept. --steady SECONDS is an attach
target: `ready PID`, then floods of 1000 launches and a synchronize for SECONDS, `progress UNITS SECONDS`
(CLOCK_MONOTONIC, the clock of the injection library's
log lines) every 0.1 s. Exit 1 when PyTorch or CUDA is missing, with the reason on stderr.
"""
import argparse
import os
import sys
import time

WORKLOADS = ("flood", "train", "graph", "serving")
FLOOD_LAUNCHES = 100_000
TRAIN_STEPS = 600
GRAPH_REPLAYS = 4_000
SERVING_REQUESTS = 16_000
SERVING_SIZES = (1, 2, 4, 8, 16, 32, 64)


def count(n, scale):
    return max(1, int(n * scale))


def flood(torch, scale):
    x = torch.zeros(16, device="cuda")
    for _ in range(100):
        x.add_(1)
    torch.cuda.synchronize()
    n = count(FLOOD_LAUNCHES, scale)

    def run():
        for _ in range(n):
            x.add_(1)
        torch.cuda.synchronize()

    return n, run


def mlp(torch, width=512, out=10):
    return torch.nn.Sequential(
        torch.nn.Linear(width, width), torch.nn.ReLU(), torch.nn.Linear(width, width), torch.nn.ReLU(),
        torch.nn.Linear(width, out),
    ).cuda()


def train(torch, scale):
    model = mlp(torch)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    inp = torch.randn(64, 512, device="cuda")
    tgt = torch.randint(0, 10, (64,), device="cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(inp), tgt)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()

    for _ in range(5):
        step()
    n = count(TRAIN_STEPS, scale)

    def run():
        for _ in range(n):
            step()

    return n, run


def graph(torch, scale):
    model = mlp(torch, 256)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    inp = torch.randn(64, 256, device="cuda")
    tgt = torch.randint(0, 10, (64,), device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            torch.nn.functional.cross_entropy(model(inp), tgt).backward()
            opt.step()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(g):
        torch.nn.functional.cross_entropy(model(inp), tgt).backward()
        opt.step()
    for _ in range(10):
        g.replay()
    torch.cuda.synchronize()
    n = count(GRAPH_REPLAYS, scale)

    def run():
        for _ in range(n):
            g.replay()
        torch.cuda.synchronize()

    return n, run


def serving(torch, scale):
    model = mlp(torch, 512, 512).eval()
    graphs = {}
    with torch.no_grad():
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for size in SERVING_SIZES:
                static_in = torch.zeros(size, 512, device="cuda")
                for _ in range(2):
                    model(static_in)
                graphs[size] = [None, static_in, None]
        torch.cuda.current_stream().wait_stream(s)
        for size in SERVING_SIZES:
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                graphs[size][2] = model(graphs[size][1])
            graphs[size][0] = g
    requests = [torch.randn(size, 512, device="cuda") for size in SERVING_SIZES]

    def serve(i):
        k = (i * 5 + 3) % len(SERVING_SIZES)
        g, static_in, static_out = graphs[SERVING_SIZES[k]]
        # Eager steps between the replays: the request in, the answer out.
        static_in.copy_(requests[k]).mul_(0.5)
        g.replay()
        answer = static_out.softmax(-1).argmax(-1)
        if i % 8 == 7:
            torch.cuda.synchronize()
        return answer

    with torch.no_grad():
        for i in range(16):
            serve(i)
        torch.cuda.synchronize()
    n = count(SERVING_REQUESTS, scale)

    def run():
        with torch.no_grad():
            for i in range(n):
                serve(i)
        torch.cuda.synchronize()

    return n, run


def timed(run):
    t0 = time.perf_counter()
    run()
    return (time.perf_counter() - t0) * 1e3


def profiled(torch, name, run):
    from torch.profiler import ProfilerActivity, profile

    p = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
    p.__enter__()
    ms = timed(run)
    t0 = time.perf_counter()
    p.__exit__(None, None, None)
    try:
        events = len(p.profiler.kineto_results.events())
    except Exception:  # the count is for the reader; an API change must not fail the run
        events = -1
    print(f"profiler torch_{name} exit_ms {(time.perf_counter() - t0) * 1e3:.1f} events {events}", flush=True)
    return ms


def steady(torch, seconds):
    x = torch.zeros(16, device="cuda")
    for _ in range(100):
        x.add_(1)
    torch.cuda.synchronize()
    print(f"ready {os.getpid()}", flush=True)
    t0 = last = time.monotonic()
    units = 0
    while time.monotonic() - t0 < seconds:
        for _ in range(1000):
            x.add_(1)
        torch.cuda.synchronize()
        units += 1
        t = time.monotonic()
        if t - last >= 0.1:
            print(f"progress {units} {t:.6f}", flush=True)
            last = t


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workloads", default=",".join(WORKLOADS))
    p.add_argument("--scale", type=float, default=1.0)
    p.add_argument("--profiler", action="store_true")
    p.add_argument("--steady", type=float, default=0.0)
    a = p.parse_args()
    names = [w for w in a.workloads.split(",") if w]
    unknown = [w for w in names if w not in WORKLOADS]
    if unknown:
        p.error(f"unknown workloads {unknown}: choose from {','.join(WORKLOADS)}")
    try:
        import torch
    except ImportError as e:
        print(f"tracer_workloads: PyTorch is not installed here ({e})", file=sys.stderr)
        return 1
    if not torch.cuda.is_available():
        print("tracer_workloads: CUDA is not available to PyTorch", file=sys.stderr)
        return 1
    if a.steady > 0:
        steady(torch, a.steady)
        return 0
    setups = {"flood": flood, "train": train, "graph": graph, "serving": serving}
    for name in names:
        n, run = setups[name](torch, a.scale)
        ms = profiled(torch, name, run) if a.profiler else timed(run)
        print(f"work torch_{name} ms {ms:.3f} units {n}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
