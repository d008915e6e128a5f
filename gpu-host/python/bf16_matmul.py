#!/usr/bin/env python3
"""A bf16 matmul loop that keeps the GPU's SMs and tensor pipes busy, for the PM-sampling tests and benchmarks.

    python3 bf16_matmul.py [--seconds 10] [--iters N] [--size 8192] [--device 0]

Prints `bf16_matmul ready` once warmed up (flushed), then loops until --seconds have passed, or runs exactly --iters
matmuls; ends with `bf16_matmul iters N elapsed_ms T tflops F` (elapsed from after the warm-up to the final
synchronize).
"""
import argparse
import sys
import time


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--iters", type=int, default=0)
    p.add_argument("--size", type=int, default=8192)
    p.add_argument("--device", type=int, default=0)
    args = p.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("bf16_matmul: CUDA is not available", file=sys.stderr)
        return 1
    dev = torch.device("cuda", args.device)
    a = torch.randn(args.size, args.size, device=dev, dtype=torch.bfloat16)
    b = torch.randn(args.size, args.size, device=dev, dtype=torch.bfloat16)
    for _ in range(3):
        c = a @ b
    torch.cuda.synchronize(dev)
    print("bf16_matmul ready", flush=True)
    t0 = time.perf_counter()
    iters = 0
    while True:
        for _ in range(10):
            c = a @ b
        iters += 10
        if args.iters and iters >= args.iters:
            break
        if not args.iters:
            torch.cuda.synchronize(dev)
            if time.perf_counter() - t0 >= args.seconds:
                break
    torch.cuda.synchronize(dev)
    ms = (time.perf_counter() - t0) * 1e3
    tflops = 2 * args.size**3 * iters / (ms / 1e3) / 1e12
    print(f"bf16_matmul iters {iters} elapsed_ms {ms:.1f} tflops {tflops:.1f}", flush=True)
    del c
    return 0


if __name__ == "__main__":
    sys.exit(main())
