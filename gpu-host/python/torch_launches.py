#!/usr/bin/env python3
"""Back-to-back small launches from PyTorch, no synchronisation between them (a launch-bound program).

    python3 torch_launches.py [--launches 200000] [--profile] [--graph-replays N] [--nvtx]

Prints `torch_launches launches N loop_ms T`. --graph-replays N instead captures a small training-like step in a
CUDA graph and replays it N times (`torch_graph replays N loop_ms T`). --nvtx wraps steps in torch.cuda.nvtx ranges
(`replay i` / `launches`). --profile runs the loop under torch.profiler (CPU and CUDA activities).
"""
import argparse
import sys
import time


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--launches", type=int, default=200_000)
    p.add_argument("--graph-replays", type=int, default=0)
    p.add_argument("--nvtx", action="store_true")
    p.add_argument("--profile", action="store_true")
    a = p.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("CUDA is not available", file=sys.stderr)
        return 1
    x = torch.zeros(16, device="cuda")
    torch.cuda.synchronize()

    def launches():
        for _ in range(a.launches):
            x.add_(1)
        torch.cuda.synchronize()

    def graph():
        model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)).cuda()
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        inp = torch.randn(64, 256, device="cuda")
        tgt = torch.randint(0, 10, (64,), device="cuda")
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                opt.zero_grad(set_to_none=True)
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    loss = torch.nn.functional.cross_entropy(model(inp), tgt)
                loss.backward()
                opt.step()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(g):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(model(inp), tgt)
            loss.backward()
            opt.step()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for i in range(a.graph_replays):
            if a.nvtx:
                torch.cuda.nvtx.range_push(f"replay {i % 4}")
            g.replay()
            if a.nvtx:
                torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) * 1e3

    def run():
        if a.graph_replays:
            return graph()
        t0 = time.perf_counter()
        if a.nvtx:
            torch.cuda.nvtx.range_push("launches")
        launches()
        if a.nvtx:
            torch.cuda.nvtx.mark("launches done")
            torch.cuda.nvtx.range_pop()
        return (time.perf_counter() - t0) * 1e3

    if a.profile:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
            ms = run()
    else:
        ms = run()
    if a.graph_replays:
        print(f"torch_graph replays {a.graph_replays} loop_ms {ms:.1f}")
    else:
        print(f"torch_launches launches {a.launches} loop_ms {ms:.1f}")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
