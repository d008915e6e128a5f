#!/usr/bin/env python3
"""CUDA work from two threads, each printing its Linux thread id, for checking a trace's thread tracks.

    python3 thread_tids.py [--steps 200] [--profile FILE.json]

The main thread and a worker thread each launch --steps small kernels and print `tid NAME TID` (the id `top -H` and
py-spy show, `threading.get_native_id()`). With --profile the work runs under torch.profiler (Kineto) and its
Chrome trace goes to FILE.json; `kineto_tids A,B` then lists the thread ids of its `cuda_runtime` events.
"""
import argparse
import sys
import threading


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--profile")
    a = p.parse_args()
    import torch

    x = torch.zeros(1024, device="cuda")
    y = torch.zeros(1024, device="cuda")
    torch.cuda.synchronize()

    def work(name, t):
        # One write per line: two threads printing at once must not run their lines together.
        sys.stdout.write(f"tid {name} {threading.get_native_id()}\n")
        sys.stdout.flush()
        for _ in range(a.steps):
            t.add_(1)
        torch.cuda.synchronize()

    def both():
        w = threading.Thread(target=work, args=("worker", y))
        w.start()
        work("main", x)
        w.join()

    if a.profile:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            both()
        prof.export_chrome_trace(a.profile)
        import json

        events = json.load(open(a.profile))["traceEvents"]
        tids = sorted({e["tid"] for e in events if e.get("cat") == "cuda_runtime"})
        print("kineto_tids " + ",".join(str(t) for t in tids), flush=True)
    else:
        both()
    print(f"sum {float(x.sum()) + float(y.sum())}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
