"""One line of figures from `gpu-tools stats --format json` output (read on stdin) for the GPU-host table:
kernels, API records, graph launches, NVTX ranges, ranges with a GPU projection, and the notes that matter."""
import json
import sys


def total(tables, name, column="Instances"):
    return sum(int(r.get(column) or 0) for r in tables.get(name, {}).get("rows", []))


def main():
    skip = set(sys.argv[1].split(",")) if len(sys.argv) > 1 and sys.argv[1] else set()
    try:
        tables = {t["name"]: t for t in json.load(sys.stdin)}
    except Exception as e:  # an unreadable report is a result of its own
        print(f"stats unreadable: {e}")
        return
    api_names = {r.get("Name") for r in tables.get("cuda_api_sum", {}).get("rows", [])}
    leaked = sorted(api_names & skip)
    nvtx = tables.get("nvtx_sum", {}).get("rows", [])
    proj = tables.get("nvtx_gpu_proj_sum", {}).get("rows", [])
    procs = tables.get("processes", {}).get("rows", [])
    parts = [
        f"kern={total(tables, 'cuda_gpu_kern_sum')}",
        f"api={total(tables, 'cuda_api_sum')}({len(api_names)} fns)",
        f"graphs={total(tables, 'cuda_gpu_graph_sum')}",
        f"nvtx={sum(int(r.get('Instances') or 0) for r in nvtx)}({len(nvtx)} names)",
        f"proj={sum(int(r.get('Total GPU Ops') or 0) for r in proj)}ops",
        f"procs={len(procs)} complete={sum(1 for r in procs if str(r.get('Complete')).lower() in ('yes', 'true'))}",
    ]
    if skip:
        parts.append(f"skipped-but-present={leaked or 'none'}")
    notes = [n for t in tables.values() for n in t.get("notes", [])]
    if notes:
        parts.append("notes: " + " | ".join(notes)[:300])
    print(" ".join(parts))


main()
