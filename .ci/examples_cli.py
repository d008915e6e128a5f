#!/usr/bin/env python3
"""Every example of every workspace package behaves like a command-line tool.

Finds the examples with `cargo metadata` (the `[[example]]` entries and `examples/*.rs`, whoever added them),
builds them, and runs each one:
  - with `--help`: exit 0 and a usage text on stdout;
  - with an argument no example takes: exit 2 and a usage line on stderr;
and, on this machine without GPUs, runs the ones that must fail readably without one: the error is the `Display`
text of the load error (it lists the places searched), never Rust's `Debug` form.

Usage (from the repository root): python3 .ci/examples_cli.py [TARGET_DIR]
Prints one line per check and exits 1 if any failed, after running all of them.
"""

import json
import os
import re
import subprocess
import sys

BAD_ARGUMENT = "--no-such-option-for-any-example"
# Rust's Debug form of a struct or tuple variant, e.g. `NotFound { library: "...", attempts: [Attempt {`.
DEBUG_FORM = re.compile(r"\b[A-Z][A-Za-z0-9]*(?: \{ [a-z_]+: |\(\")")
# Examples that run without arguments and must stop at a missing vendor library here (no GPU, no ROCm).
NO_DEVICE_RUNS = {"rocprof_trace", "checkpoint_replay"}
TIMEOUT_S = 120

failures = []


def check(name, what, ok, detail=""):
    print(f"{'ok  ' if ok else 'FAIL'} {name}: {what}" + (f"\n     {detail}" if detail and not ok else ""))
    if not ok:
        failures.append(f"{name}: {what}")


def run(binary, args):
    try:
        p = subprocess.run([binary, *args], capture_output=True, text=True, timeout=TIMEOUT_S,
                           stdin=subprocess.DEVNULL)
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        return None, "", f"timed out after {TIMEOUT_S} s"


def main():
    target = sys.argv[1] if len(sys.argv) > 1 else "target"
    meta = json.loads(subprocess.check_output(
        ["cargo", "metadata", "--format-version", "1", "--no-deps"], text=True))
    examples = sorted(
        (pkg["name"], t["name"])
        for pkg in meta["packages"]
        for t in pkg["targets"]
        if "example" in t["kind"]
    )
    if not examples:
        sys.exit("no examples found")
    print(f"{len(examples)} examples: " + ", ".join(name for _, name in examples))
    subprocess.check_call(["cargo", "build", "--release", "--workspace", "--examples", "--all-features",
                           "--target-dir", target])
    env_dir = os.path.join(target, "release", "examples")
    for _package, name in examples:
        binary = os.path.join(env_dir, name)
        if not os.access(binary, os.X_OK):
            check(name, "was built", False, f"no executable {binary}")
            continue
        code, out, err = run(binary, ["--help"])
        check(name, "--help exits 0 with a usage text", code == 0 and "Usage:" in out,
              f"exit {code}; stdout: {out[:300]!r}; stderr: {err[:300]!r}")
        code, out, err = run(binary, [BAD_ARGUMENT])
        check(name, f"{BAD_ARGUMENT} exits 2 with a usage line", code == 2 and "Usage:" in err,
              f"exit {code}; stdout: {out[:300]!r}; stderr: {err[:300]!r}")
        if name in NO_DEVICE_RUNS:
            code, out, err = run(binary, [])
            text = out + err
            readable = code not in (0, None) and "not loaded; tried" in text and not DEBUG_FORM.search(text)
            check(name, "without a GPU: fails with the load error's Display text", readable,
                  f"exit {code}; output: {text[:600]!r}")
    if failures:
        print(f"\n{len(failures)} checks failed:")
        for f in failures:
            print(f"  {f}")
        sys.exit(1)
    print(f"\nall {len(examples)} examples behave as tools")


if __name__ == "__main__":
    main()
