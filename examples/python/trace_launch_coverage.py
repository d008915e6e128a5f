#!/usr/bin/env python3
"""Which kernel launches of a trace have no kernel record? Reads the Chrome JSON that `gpu-tools export --chrome`
writes and matches each kernel-launch API record (cudaLaunchKernel, cudaLaunchKernelExC, cudaLaunchCooperativeKernel,
cuLaunchKernel, cuLaunchKernelEx, cuLaunchCooperativeKernel) to the GPU records of its correlation id. Prints, per
file, the launches without a record in each tenth of the window (by the launch's start: loss spread evenly means
records thinned, loss at one end a window cut short), per launch call, and whether missing ones come in runs.
With --check N: exits 1 when more than N launches, and more than 1% of them, have no record (a launch in the
window's last moment may run after it ends).

    python3 trace_launch_coverage.py [--check N] TRACE.json...
"""
import json
import sys

LAUNCHES = {"cudaLaunchKernel", "cudaLaunchKernelExC", "cudaLaunchCooperativeKernel", "cuLaunchKernel",
            "cuLaunchKernelEx", "cuLaunchCooperativeKernel"}


def main(args):
    check = None
    if args[:1] == ["--check"]:
        check, args = int(args[1]), args[2:]
    failed = False
    for path in args:
        with open(path) as f:
            data = json.load(f)
        events = data["traceEvents"] if isinstance(data, dict) else data
        spans = [e for e in events if e.get("ph") == "X"]
        if not spans:
            print(f"{path}: no events")
            continue
        api = [e for e in spans if e.get("cat") in ("cuda_runtime", "cuda_driver") and e["name"] in LAUNCHES]
        gpu = {e.get("args", {}).get("correlation") for e in spans
               if e.get("cat") not in ("cuda_runtime", "cuda_driver")}
        t0 = min(e["ts"] for e in spans)
        t1 = max(e["ts"] for e in spans)
        width = max(t1 - t0, 1e-9)
        missing, launches = [0] * 10, [0] * 10
        for e in api:
            b = min(9, int((e["ts"] - t0) / width * 10))
            launches[b] += 1
            if e.get("args", {}).get("correlation") not in gpu:
                missing[b] += 1
        print(f"{path}: window {width / 1000:.1f} ms, {len(api)} launches, {sum(missing)} without a GPU record")
        print(f"  without, per tenth: {missing}")
        print(f"  launches, per tenth: {launches}")
        by_name = {}
        for e in api:
            n = by_name.setdefault(e["name"], [0, 0])
            n[0] += 1
            n[1] += e.get("args", {}).get("correlation") not in gpu
        print("  by call (launches, without): " + ", ".join(f"{k} {v[0]} {v[1]}" for k, v in sorted(by_name.items())))
        # Does a launch without a record follow another such launch more often than chance would have it?
        seq = [e.get("args", {}).get("correlation") not in gpu for e in sorted(api, key=lambda e: e["ts"])]
        pairs = sum(1 for a, b in zip(seq, seq[1:]) if a and b)
        if sum(seq) > 1:
            print(f"  a launch without a record after one without: {pairs} of {sum(seq[:-1])}")
        if check is not None and sum(missing) > max(check, len(api) // 100):
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
