#!/usr/bin/env python3
"""The wheel's `cupti` extra admits only the nvidia-cuda-cupti releases that were tried and work without a driver.

From 13.2 on, CUPTI's first call (even `cuptiGetVersion`) opens libcuda.so.1 and needs the driver's
`cuGetExportTable`: on a machine without an NVIDIA driver 13.2.x recurses until the stack overflows and 13.3 to 13.5
answer CUPTI_ERROR_UNKNOWN to every call, so `gpu-tools --version` and `gpu-tools metrics --chip` fail there
(docs/driver-notes.md, "CUPTI 13.2 and later need the driver"). This check reads the extra from
gpu-tools-cli/pyproject.toml and:
  - requires every release tried and working to be admitted, every release tried and failing to be excluded, and
    nothing newer than the newest release tried (the upper bound);
  - asks pip which release the requirement resolves to on the index now (a dry run: nothing is installed), and
    requires it to be one of the working ones.

Usage (from the repository root): PYTHON check_cupti_extra.py [pyproject.toml]; PYTHON needs `packaging`.
Exits 1 with the reasons when the range is wrong.
"""

import json
import subprocess
import sys
import tempfile
import tomllib

from packaging.requirements import Requirement
from packaging.version import Version

# Tried on a machine without a GPU (cuptiGetVersion, cuptiProfilerHostGetSupportedChips, cuptiProfilerHostInitialize
# for GH100; `gpu-tools --version` and `gpu-tools metrics --chip GH100 dram` for 13.0.85, 13.1.115, 13.2.86, 13.5.25).
WORKS = ["13.0.48", "13.0.85", "13.1.75", "13.1.115"]
FAILS = ["13.2.23", "13.2.75", "13.2.86", "13.3.35", "13.3.75", "13.4.58", "13.4.92", "13.5.25"]
# Not tried: the bound must keep them out until they are.
UNTRIED = ["13.1.116", "13.2.0", "14.0.0"]


def main() -> int:
    path = sys.argv[1] if len(sys.argv) > 1 else "gpu-tools-cli/pyproject.toml"
    with open(path, "rb") as f:
        extra = tomllib.load(f)["project"]["optional-dependencies"]["cupti"]
    reqs = [Requirement(r) for r in extra if Requirement(r).name == "nvidia-cuda-cupti"]
    if len(reqs) != 1:
        print(f"{path}: the cupti extra names nvidia-cuda-cupti {len(reqs)} times: {extra}")
        return 1
    req = reqs[0]
    spec = req.specifier
    problems = []
    problems += [f"{v} works but is excluded" for v in WORKS if not spec.contains(Version(v))]
    problems += [f"{v} fails without a driver but is admitted" for v in FAILS if spec.contains(Version(v))]
    problems += [f"{v} was never tried but is admitted" for v in UNTRIED if spec.contains(Version(v))]

    with tempfile.NamedTemporaryFile(suffix=".json") as report:
        pip = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--ignore-installed", "--quiet",
             "--disable-pip-version-check", "--report", report.name, str(req)],
            capture_output=True, text=True, timeout=120,
        )
        if pip.returncode != 0:
            problems.append(f"pip could not resolve {req}: {pip.stderr.strip()}")
        else:
            chosen = [i["metadata"]["version"] for i in json.load(open(report.name))["install"]]
            print(f"pip resolves {req} to {', '.join(chosen)}")
            problems += [f"pip chose {v}, which is not one of the working releases {WORKS}"
                         for v in chosen if v not in WORKS]

    for p in problems:
        print(f"{path}: cupti extra {req}: {p}")
    if not problems:
        print(f"cupti extra {req}: admits {', '.join(WORKS)}; excludes {', '.join(FAILS + UNTRIED)}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
