#!/usr/bin/env python3
"""Which kernel launches of a trace have no kernel record? Reads the Chrome JSON that `gpu-tools export --chrome`
writes and matches each kernel-launch API record (cudaLaunchKernel, cudaLaunchKernelExC, cudaLaunchCooperativeKernel,
cuLaunchKernel, cuLaunchKernelEx, cuLaunchCooperativeKernel) to the GPU records of its correlation id. Prints, per
file, the launches without a record in each tenth of the window (by the launch's start: loss spread evenly means
records thinned, loss at one end a window cut short), per launch call, and whether missing ones come in runs.
Launches are matched per process (pid and correlation id); launches between a stream capture's begin and end
calls of their process are left out (a captured launch runs nothing), and a process's launches after its last
launch that has a record are counted apart as queued (the GPU had not run them when the window closed), as
`gpu-tools trace` itself counts them. With --check N: exits 1 when more than N launches, and more than 1% of them,
have no record before the queue.

    python3 trace_launch_coverage.py [--check N] TRACE.json...
"""
import json
import re
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
        calls = [e for e in spans if e.get("cat") in ("cuda_runtime", "cuda_driver")]
        # A GPU's track is a process of its own in the export, named "GPU N (..., pid P)": its records belong to P.
        owner = {}
        for e in events:
            if e.get("ph") == "M" and e.get("name") == "process_name":
                m = re.search(r"pid (\d+)\)$", e.get("args", {}).get("name", ""))
                if m and e.get("args", {}).get("name", "").startswith("GPU"):
                    owner[e.get("pid")] = int(m.group(1))
        gpu = {(owner.get(e.get("pid"), e.get("pid")), e.get("args", {}).get("correlation")) for e in spans
               if e.get("cat") not in ("cuda_runtime", "cuda_driver")}
        captures = {}
        for e in sorted(calls, key=lambda e: e["ts"]):
            if "BeginCapture" in e["name"]:
                captures.setdefault(e.get("pid"), []).append([e["ts"], float("inf")])
            elif "EndCapture" in e["name"]:
                open_ = [c for c in captures.get(e.get("pid"), []) if c[1] == float("inf")]
                if open_:
                    open_[-1][1] = e["ts"] + e.get("dur", 0)
        key = lambda e: (e.get("pid"), e.get("args", {}).get("correlation"))
        def captured(e):
            return any(b <= e["ts"] <= end for b, end in captures.get(e.get("pid"), []))
        api = [e for e in calls if e["name"] in LAUNCHES and not captured(e)]
        in_capture = sum(1 for e in calls if e["name"] in LAUNCHES and captured(e))
        last_run = {}
        for e in api:
            if key(e) in gpu:
                last_run[e.get("pid")] = max(last_run.get(e.get("pid"), e["ts"]), e["ts"])
        queued = {id(e) for e in api if key(e) not in gpu and e.get("pid") in last_run and e["ts"] > last_run[e.get("pid")]}
        t0 = min(e["ts"] for e in spans)
        t1 = max(e["ts"] for e in spans)
        width = max(t1 - t0, 1e-9)
        missing, launches = [0] * 10, [0] * 10
        for e in api:
            b = min(9, int((e["ts"] - t0) / width * 10))
            launches[b] += 1
            if key(e) not in gpu and id(e) not in queued:
                missing[b] += 1
        pids = sorted({e.get("pid") for e in api})
        print(f"{path}: window {width / 1000:.1f} ms, {len(api)} launches of {len(pids)} process(es), {sum(missing)} without "
              f"a GPU record, {len(queued)} queued at the end, {in_capture} inside captures (not judged)")
        for pid in pids if len(pids) > 1 else []:
            mine = [e for e in api if e.get("pid") == pid]
            lost = sum(1 for e in mine if key(e) not in gpu and id(e) not in queued)
            print(f"  process {pid}: {len(mine)} launches, {lost} without a GPU record")
        print(f"  without, per tenth: {missing}")
        print(f"  launches, per tenth: {launches}")
        by_name = {}
        for e in api:
            n = by_name.setdefault(e["name"], [0, 0])
            n[0] += 1
            n[1] += key(e) not in gpu and id(e) not in queued
        print("  by call (launches, without): " + ", ".join(f"{k} {v[0]} {v[1]}" for k, v in sorted(by_name.items())))
        # Does a launch without a record follow another such launch more often than chance would have it?
        seq = [key(e) not in gpu and id(e) not in queued for e in sorted(api, key=lambda e: e["ts"])]
        pairs = sum(1 for a, b in zip(seq, seq[1:]) if a and b)
        if sum(seq) > 1:
            print(f"  a launch without a record after one without: {pairs} of {sum(seq[:-1])}")
        if check is not None and sum(missing) > max(check, len(api) // 100):
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
