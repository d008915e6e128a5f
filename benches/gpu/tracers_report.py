#!/usr/bin/env python3
"""The tables of benches/gpu/tracers.sh, from the files it wrote in DIR, and DIR/results.json.

    python3 tracers_report.py DIR

Reads raw.tsv (one row per workload per run: part round config workload ms units rc wall_ms check), listing.tsv,
the attach jobs' logs and machine.txt. Medians, min-max and the interquartile range of the rounds; ratios of medians
to native and to the floor of the same kinds; in how many rounds gpu-tools' defaults beat torch.profiler (the same
round's runs); the attached windows' rates; the listing's cost; the profile's split per launch; the kernel part's
steps per workload; the attrs part's attributes against the kernel floor.
"""
import json
import os
import re
import statistics
import sys

FLOOR_OF = {"gt-default": "floor-default", "gt-kernel": "floor-kernel", "gt-nodriver": "floor-nodriver",
            "gt-all": "floor-default", "torch-profiler": "floor-default", "nsys": "floor-default"}
MAIN_ORDER = ["native", "floor-default", "floor-kernel", "floor-nodriver", "floor-essential", "gt-default", "gt-kernel",
              "gt-nodriver", "gt-all", "torch-profiler", "nsys"]
PROFILE_STEPS = [
    ("floor-default", "native", "CUPTI recording the default kinds, buffers unread (the floor)"),
    ("floor-clock-flush", "floor-default", "gpu-tools' CLOCK_MONOTONIC callback and 200 ms flush thread, in CUPTI"),
    ("stage-no-decode", "floor-clock-flush", "the injection library's session, buffers handed back unread"),
    ("stage-no-convert", "stage-no-decode", "walking and decoding each record"),
    ("stage-no-encode", "stage-no-convert", "converting to trace records"),
    ("stage-no-send", "stage-no-encode", "encoding the stream"),
    ("stage-full", "stage-no-send", "writing the stream (a file)"),
    ("gt-default", "stage-full", "the socket and the gpu-tools process instead of a file"),
]

# The kernel part (KERNEL_LADDER=1): each step of `--kinds kernel` above its floor, per workload.
KERNEL_STEPS = [
    ("floor-kernel", "native", "CUPTI recording kernels (and graph launches), buffers unread (the floor)"),
    ("floor-kernel-zeroed", "floor-kernel", "buffers zeroed off the launching thread, CUPTI told so (not on the way up)"),
    ("floor-kernel-clock-flush", "floor-kernel", "gpu-tools' CLOCK_MONOTONIC callback and 200 ms flush thread"),
    ("floor-kernel-subscribed", "floor-kernel-clock-flush", "a callback subscriber of the resource domain"),
    ("stage-kernel-no-decode", "floor-kernel-subscribed", "the injection library's session, buffers unread"),
    ("stage-kernel-full", "stage-kernel-no-decode", "decoding, converting, encoding, writing to a file"),
    ("gt-kernel", "stage-kernel-full", "the socket and the gpu-tools process instead of a file"),
]

# The attrs part (ATTRS=1): the kernel floor with one of CUPTI's activity attributes set, against the plain floor.
ATTR_CONFIGS = [
    ("floor-kernel-pinned", "pinned host memory for the device buffers (CUPTI_ACTIVITY_ATTR_MEM_ALLOCATION_TYPE_HOST_PINNED)"),
    ("floor-kernel-unthreaded", "one activity buffer for all threads (CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER 0)"),
    ("floor-kernel-prealloc", "16 device buffers pre-allocated (CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_PRE_ALLOCATE_VALUE)"),
    ("floor-kernel-bigbuf", "32 MB device buffers (CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE)"),
]


def stats(values):
    v = sorted(values)
    if not v:
        return None
    q = statistics.quantiles(v, n=4, method="inclusive") if len(v) > 1 else [v[0], v[0], v[0]]
    return {"n": len(v), "median": statistics.median(v), "min": v[0], "max": v[-1], "q1": q[0], "q3": q[2],
            "values": values}


def read_raw(path):
    rows = []
    if not os.path.exists(path):
        return rows
    for line in open(path):
        f = line.rstrip("\n").split("\t")
        if len(f) < 9:
            continue
        part, rnd, config, workload, ms, units, rc, wall, check = f[:9]
        rows.append({"part": part, "round": int(rnd), "config": config, "workload": workload,
                     # A run its tracer did not trace (`check` missing) is a failed run, not a figure.
                     "ms": float(ms) if ms != "-" and check != "missing" else None, "units": units, "rc": int(rc),
                     "wall_ms": int(wall),
                     "check": check})
    return rows


def check_value(check):
    m = re.match(r"(\w+)=(\d+)", check or "")
    return (m.group(1), int(m.group(2))) if m else (None, None)


def main_part(rows, results):
    ok = [r for r in rows if r["part"] == "main" and r["ms"] is not None]
    failed = [r for r in rows if r["part"] == "main" and r["ms"] is None]
    workloads = sorted({r["workload"] for r in ok}, key=lambda w: (not w.startswith("c_"), w))
    table = {}
    print("== main: the workload's timed loop in ms, median [min-max] (IQR) of the rounds; ratios of medians")
    print(f"{'workload':<15} {'config':<15} {'n':>2} {'median':>10} {'min-max':>21} {'IQR':>21} "
          f"{'x native':>9} {'x floor':>8}  check")
    for w in workloads:
        table[w] = {}
        for c in MAIN_ORDER:
            vals = [r["ms"] for r in ok if r["workload"] == w and r["config"] == c]
            s = stats(vals)
            if not s:
                continue
            checks = [check_value(r["check"]) for r in ok if r["workload"] == w and r["config"] == c]
            names = {k for k, _ in checks if k}
            s["check"] = {k: statistics.median([v for kk, v in checks if kk == k]) for k in names}
            table[w][c] = s
        native = table[w].get("native", {}).get("median")
        for c, s in table[w].items():
            s["x_native"] = s["median"] / native if native else None
            floor = table[w].get(FLOOR_OF.get(c, ""), {}).get("median")
            s["x_floor"] = s["median"] / floor if floor else None
            s["floor"] = FLOOR_OF.get(c)
            xn = f"{s['x_native']:.3f}" if s["x_native"] else "-"
            xf = f"{s['x_floor']:.3f}" if s["x_floor"] else "-"
            chk = " ".join(f"{k} {v:.0f}" for k, v in s["check"].items())
            print(f"{w:<15} {c:<15} {s['n']:>2} {s['median']:>10.1f} {s['min']:>10.1f}-{s['max']:<10.1f} "
                  f"{s['q1']:>10.1f}-{s['q3']:<10.1f} {xn:>9} {xf:>8}  {chk}")
    results["main"] = table
    # In how many rounds the defaults (and, with NODRIVER=1, the defaults without driver records; with ALL_API=1,
    # every API call) beat torch.profiler, round by round.
    for mine, label, key in (("gt-default", "gpu-tools defaults", "defaults_vs_torch_profiler"),
                             ("gt-nodriver", "gpu-tools defaults without driver records",
                              "nodriver_vs_torch_profiler"),
                             ("gt-all", "gpu-tools with every API call (--api all)", "all_api_vs_torch_profiler")):
        beats = {}
        for w in workloads:
            by_round = {}
            for r in ok:
                if r["workload"] == w and r["config"] in (mine, "torch-profiler"):
                    by_round.setdefault(r["round"], {})[r["config"]] = r["ms"]
            pairs = [v for v in by_round.values() if len(v) == 2]
            if pairs:
                wins = sum(1 for v in pairs if v[mine] < v["torch-profiler"])
                beats[w] = {"rounds": len(pairs), "defaults_faster": wins,
                            "pairs": [[v[mine], v["torch-profiler"]] for v in pairs]}
        if beats:
            print(f"{label} faster than torch.profiler, round by round: " +
                  "; ".join(f"{w} {b['defaults_faster']} of {b['rounds']}" for w, b in beats.items()) +
                  (" (every round)" if all(b["defaults_faster"] == b["rounds"] for b in beats.values()) else
                   " (NOT every round)"))
        if beats or mine == "gt-default":
            results[key] = beats
    bars = {}
    for w, t in table.items():
        d, k = t.get("gt-default", {}), t.get("gt-kernel", {})
        bars[w] = {"defaults_within_3pct_of_floor": d.get("x_floor") is not None and d["x_floor"] <= 1.03,
                   "kernels_at_or_below_kernel_floor": k.get("x_floor") is not None and k["x_floor"] <= 1.0}
    print("the issue's bars (defaults within 3% of the floor of the same kinds; --kinds kernel at or below its floor): "
          + "; ".join(f"{w} {'yes' if b['defaults_within_3pct_of_floor'] else 'no'}/"
                      f"{'yes' if b['kernels_at_or_below_kernel_floor'] else 'no'}" for w, b in bars.items()))
    results["bars"] = bars
    if failed:
        print("failed runs: " + ", ".join(f"{r['config']} {r['workload']} round {r['round']} (exit {r['rc']})"
                                          for r in failed))
    results["main_failed"] = failed


def progress(path):
    points = []
    if os.path.exists(path):
        for line in open(path):
            f = line.split()
            if len(f) == 3 and f[0] == "progress":
                points.append((float(f[2]), int(f[1])))
    return points


def rate(points, a, b):
    """Units per second between the first sample at or after a and the last at or before b."""
    inside = [p for p in points if a <= p[0] <= b]
    if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
        return None
    return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])


def windows(err_path):
    """(start, end) of each attached window, from the injection library's log lines in the job's stderr."""
    starts, ends = [], []
    if os.path.exists(err_path):
        for line in open(err_path):
            m = re.match(r"gpu-tools-inject\[\d+\] ([0-9.]+) \w+ \S+: (.*)", line)
            if not m:
                continue
            if m.group(2).startswith("tracing with CUPTI"):
                starts.append(float(m.group(1)))
            elif m.group(2).startswith("stream ended"):
                ends.append(float(m.group(1)))
    return list(zip(starts, ends))


def attach_part(out, results):
    jobs = [j for j in ("c", "torch") if os.path.exists(os.path.join(out, f"attach-{j}.job.log"))]
    if not jobs:
        return
    launched = {"c": "c_flood", "torch": "torch_flood"}
    print("== attach: the job's rate (floods of 1000 launches a second) before, inside and after each 2 s window")
    print(f"{'job':<6} {'window':<14} {'exit':>4} {'before':>9} {'inside':>9} {'after':>9} {'in/before':>9}  "
          "launched flood: native/gpu-tools defaults")
    res = {}
    for j in jobs:
        pts = progress(os.path.join(out, f"attach-{j}.job.log"))
        wins = windows(os.path.join(out, f"attach-{j}.job.err"))
        rcs = []
        rc_path = os.path.join(out, f"attach-{j}.rc")
        if os.path.exists(rc_path):
            rcs = [line.split() for line in open(rc_path) if line.strip()]
        main = results.get("main", {}).get(launched[j], {})
        launched_ratio = (main["native"]["median"] / main["gt-default"]["median"]
                          if "native" in main and "gt-default" in main else None)
        res[j] = []
        for i, (name, rc) in enumerate(rcs):
            if i >= len(wins):
                print(f"{j:<6} {name:<14} {rc:>4}  no window found in the job's log")
                res[j].append({"window": name, "exit": int(rc), "found": False})
                continue
            ws, we = wins[i]
            before = rate(pts, ws - 2.0, ws - 0.1)
            inside = rate(pts, ws + 0.1, we - 0.05)
            after = rate(pts, we + 0.3, we + 1.3)
            ratio = inside / before if inside and before else None
            fmt = lambda x: f"{x:9.1f}" if x else f"{'-':>9}"
            print(f"{j:<6} {name:<14} {rc:>4} {fmt(before)} {fmt(inside)} {fmt(after)} "
                  f"{(f'{ratio:.3f}' if ratio else '-'):>9}  "
                  f"{(f'{launched_ratio:.3f}' if launched_ratio else '-')}")
            res[j].append({"window": name, "exit": int(rc), "start": ws, "end": we, "before": before,
                           "inside": inside, "after": after, "inside_over_before": ratio,
                           "launched_native_over_defaults": launched_ratio})
    results["attach"] = res


def recorder_part(out, results):
    """The flight recorder's cost: each job's rate from 0.5 s to 4.5 s after its window over its rate in the 2.5 s
    before it, with the recorder the window left and without (a twin job); their quotient is the recorder's share."""
    jobs = [j for j in ("c", "torch") if os.path.exists(os.path.join(out, f"recorder-{j}-on.job.log"))]
    if not jobs:
        return
    print("== recorder: the job's rate (floods a second) before and after a 0.5 s window that left the flight "
          "recorder (on) or none (off)")
    print(f"{'job':<6} {'recorder':<8} {'exit':>4} {'before':>9} {'after':>9} {'after/before':>12}")
    res = {}
    for j in jobs:
        kept = {}
        for variant in ("on", "off"):
            name = f"{j}-{variant}"
            pts = progress(os.path.join(out, f"recorder-{name}.job.log"))
            wins = windows(os.path.join(out, f"recorder-{name}.job.err"))
            rc_path = os.path.join(out, f"recorder-{name}.rc")
            rc = open(rc_path).read().strip() if os.path.exists(rc_path) else "-"
            if not wins:
                print(f"{j:<6} {variant:<8} {rc:>4}  no window found in the job's log")
                continue
            ws, we = wins[0]
            before = rate(pts, ws - 2.5, ws - 0.1)
            after = rate(pts, we + 0.5, we + 4.5)
            ratio = after / before if after and before else None
            fmt = lambda x: f"{x:9.1f}" if x else f"{'-':>9}"
            print(f"{j:<6} {variant:<8} {rc:>4} {fmt(before)} {fmt(after)} "
                  f"{(f'{ratio:.3f}' if ratio else '-'):>12}")
            kept[variant] = {"exit": rc, "before": before, "after": after, "after_over_before": ratio}
        on = kept.get("on", {}).get("after_over_before")
        off = kept.get("off", {}).get("after_over_before")
        if on and off:
            kept["recorder_share"] = on / off
            print(f"{j:<6} the recorder: {on / off:.3f} of the rate without it (after/before, on over off)")
        res[j] = kept
    results["recorder"] = res


def listing_part(out, rows, results):
    path = os.path.join(out, "listing.tsv")
    if not os.path.exists(path):
        return
    runs = {}
    for line in open(path):
        rnd, config, wall, lines, size = line.split()
        runs.setdefault(config, []).append((int(wall), int(lines), int(size)))
    work = {c: [r["ms"] for r in rows if r["part"] == "listing" and r["config"] == c and r["ms"]] for c in runs}
    print("== listing: the C flood under trace -o FILE, the gpu-tools process's whole wall time (its standard output "
          "to a file)")
    res = {}
    for c, v in runs.items():
        wall = stats([w for w, _, _ in v])
        loop = stats(work.get(c, []))
        res[c] = {"wall_ms": wall, "loop_ms": loop, "lines": max(n for _, n, _ in v),
                  "bytes": max(b for _, _, b in v)}
        loop_ms = f"{loop['median']:.1f}" if loop else "-"
        print(f"{c:<12} wall median {wall['median']:.0f} ms [{wall['min']}-{wall['max']}], loop "
              f"{loop_ms} ms, {res[c]['lines']} listing lines, "
              f"{res[c]['bytes']} bytes on standard output")
    if "gt-list" in res and "gt-default" in res:
        d = res["gt-list"]["wall_ms"]["median"] - res["gt-default"]["wall_ms"]["median"]
        print(f"the listing costs {d:.0f} ms of the tool's wall time here")
        res["listing_extra_wall_ms"] = d
    results["listing"] = res


def step_costs(med, steps, units, unit, indent):
    """Each step's cost per unit of work: the difference of its median and its base's over `units`, printed."""
    out = []
    for c, base, what in steps:
        if c in med and base in med:
            ns = (med[c]["median"] - med[base]["median"]) * 1e6 / units
            print(f"{indent}{c} - {base}: {ns:8.1f} ns per {unit}  {what}")
            out.append({"config": c, "base": base, f"ns_per_{unit}": ns, "what": what})
    return out


def profile_part(rows, results):
    ok = [r for r in rows if r["part"] == "profile" and r["ms"] is not None]
    if not ok:
        return
    med = {}
    for c in {r["config"] for r in ok}:
        med[c] = stats([r["ms"] for r in ok if r["config"] == c])
    launches = max(int(r["units"]) for r in ok if r["units"].isdigit())
    print(f"== profile: the C flood ({launches} launches), medians of the rounds; each step's cost per launch")
    res = {"medians": med, "launches": launches, "steps": []}
    for c, s in sorted(med.items(), key=lambda kv: kv[1]["median"]):
        print(f"{c:<20} {s['median']:10.1f} ms [{s['min']:.1f}-{s['max']:.1f}]")
    res["steps"] = step_costs(med, PROFILE_STEPS, launches, "launch", "  ")
    results["profile"] = res


def per_workload(rows, part):
    """The timed runs of `part`, per workload: (workload, each configuration's stats, the workload's units of work),
    in the workloads' order."""
    ok = [r for r in rows if r["part"] == part and r["ms"] is not None]
    for w in sorted({r["workload"] for r in ok}):
        mine = [r for r in ok if r["workload"] == w]
        med = {c: stats([r["ms"] for r in mine if r["config"] == c]) for c in {r["config"] for r in mine}}
        units = max((int(r["units"]) for r in mine if r["units"].isdigit()), default=0)
        yield w, med, units


def kernel_part(rows, results):
    """Medians of the kernel part per workload, and each step's cost per unit of work (launch, step, request)."""
    workloads = list(per_workload(rows, "kernel"))
    if not workloads:
        return
    res = {}
    print("== kernel: where --kinds kernel spends its time above its floor, medians of the rounds")
    for w, med, units in workloads:
        print(f"{w} ({units} units):")
        for c, _, _ in [("native", None, None)] + KERNEL_STEPS:
            if c in med:
                s = med[c]
                print(f"  {c:<26} {s['median']:10.1f} ms [{s['min']:.1f}-{s['max']:.1f}]")
        steps = step_costs(med, KERNEL_STEPS, units, "unit", "    ") if units else []
        res[w] = {"medians": med, "units": units, "steps": steps}
    results["kernel"] = res


def attrs_part(rows, results):
    """Medians of the attrs part per workload: each attribute's floor against the plain floor, per unit of work and
    as a ratio, with the plain floor's spread beside it (a difference inside it is not a finding)."""
    workloads = list(per_workload(rows, "attrs"))
    if not workloads:
        return
    res = {}
    print("== attrs: the kernel floor with one of CUPTI's activity attributes set, medians of the rounds")
    for w, med, units in workloads:
        print(f"{w} ({units} units):")
        floor = med.get("floor-kernel")
        rows_out = []
        for c, what in [("native", ""), ("floor-kernel", "CUPTI's defaults")] + ATTR_CONFIGS:
            if c not in med:
                continue
            m = med[c]
            line = f"  {c:<24} {m['median']:10.1f} ms [{m['min']:.1f}-{m['max']:.1f}]"
            entry = {"config": c, "median": m["median"], "min": m["min"], "max": m["max"], "what": what}
            if floor and c.startswith("floor-kernel-") and units:
                ns = (m["median"] - floor["median"]) * 1e6 / units
                ratio = m["median"] / floor["median"]
                line += f"  {ratio:.3f} of the floor, {ns:+.1f} ns per unit"
                entry.update({"of_floor": ratio, "ns_per_unit": ns})
            print(line + (f"  {what}" if what else ""))
            rows_out.append(entry)
        if floor and units:
            spread = (floor["max"] - floor["min"]) * 1e6 / units
            print(f"    the floor's own rounds spread {spread:.1f} ns per unit")
        res[w] = {"units": units, "configs": rows_out}
    results["attrs"] = res


def delivery_part(out, results):
    """The injection library's debug lines `buffer of N bytes delivered in T ms` of the profile's flood."""
    path = os.path.join(out, "profile-delivery.log")
    if not os.path.exists(path):
        return
    buffers = [(int(m.group(1)), float(m.group(2))) for m in
               (re.search(r"buffer of (\d+) bytes delivered in ([0-9.]+) ms", line) for line in open(path)) if m]
    work = [line.split() for line in open(os.path.join(out, "profile-delivery.out")) if line.startswith("work ")]
    if not buffers:
        print("== delivery: no buffer lines in profile-delivery.log")
        return
    total_ms = sum(ms for _, ms in buffers)
    total_bytes = sum(b for b, _ in buffers)
    launches = int(work[0][5]) if work else 0
    res = {"buffers": len(buffers), "bytes": total_bytes, "ms_in_writer": total_ms, "launches": launches,
           "loop_ms": float(work[0][3]) if work else None}
    line = (f"== delivery: {len(buffers)} buffers, {total_bytes} bytes, {total_ms:.1f} ms in the writer on CUPTI's "
            f"thread (decode to write), {total_ms * 1e6 / total_bytes * 1024:.0f} ns per KiB")
    if launches:
        res["ns_per_launch"] = total_ms * 1e6 / launches
        line += f", {res['ns_per_launch']:.0f} ns per launch ({total_bytes / launches:.0f} bytes per launch)"
    print(line)
    results["delivery"] = res


def main():
    out = sys.argv[1]
    results = {}
    mpath = os.path.join(out, "machine.txt")
    if os.path.exists(mpath):
        results["machine"] = {l.split(" ", 1)[0]: l.split(" ", 1)[1].strip() for l in open(mpath) if " " in l}
        for k, v in results["machine"].items():
            print(f"{k}: {v}")
    fpath = os.path.join(out, "floor-reports.txt")
    if os.path.exists(fpath):
        apis = sorted({m.group(1) for m in (re.search(r"cupti_api=(\d+)", l) for l in open(fpath)) if m})
        results.setdefault("machine", {})["cupti_api"] = ",".join(apis)
        print(f"cupti_api: {','.join(apis)} (as the floor library's CUPTI reported it)")
    rows = read_raw(os.path.join(out, "raw.tsv"))
    main_part(rows, results)
    attach_part(out, results)
    recorder_part(out, results)
    listing_part(out, rows, results)
    profile_part(rows, results)
    kernel_part(rows, results)
    attrs_part(rows, results)
    delivery_part(out, results)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    print(f"results: {os.path.join(out, 'results.json')}")


if __name__ == "__main__":
    main()
