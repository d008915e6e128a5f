#!/usr/bin/env python3
"""A small model trained under torch.compile(mode="reduce-overhead"): Triton kernels replayed through CUDA graphs.

    python3 compiled_graphs.py [--steps 20] [--batch 64] [--width 256]

An MLP (Linear, GELU, LayerNorm, Linear) is compiled with mode="reduce-overhead" and trained with SGD for --steps
steps on one fixed batch made on the GPU. Inductor fuses it into Triton kernels; CUDA graph trees run the first
step eagerly (warm-up), record the forward and backward graphs at the second, and replay them from the third on.
The optimizer step stays eager, so a step mixes graph launches with plain kernel launches. The work is the same in
every run: the seed, the data and the step count fix it (a profiler's kernel counts are comparable across runs).
Inductor benchmarks some kernels the first time it compiles them; keep TORCHINDUCTOR_CACHE_DIR between runs (and
run once beforehand) so that no run benchmarks.

Prints `compiled_graphs steps N cuda_ms T loss L`, T being the time of the training loop with its final
synchronize.
"""
import argparse
import sys
import time


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--width", type=int, default=256)
    args = p.parse_args()

    import torch
    from torch import nn

    if not torch.cuda.is_available():
        print("compiled_graphs: CUDA is not available", file=sys.stderr)
        return 1
    torch.manual_seed(0)
    device = torch.device("cuda")
    w = args.width
    model = nn.Sequential(
        nn.Linear(w, 2 * w),
        nn.GELU(),
        nn.LayerNorm(2 * w),
        nn.Linear(2 * w, w),
    ).to(device)
    compiled = torch.compile(model, mode="reduce-overhead")
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(args.batch, w, device=device)
    y = torch.randn(args.batch, w, device=device)
    mark_step = getattr(torch.compiler, "cudagraph_mark_step_begin", None)

    torch.cuda.synchronize()
    t0 = time.perf_counter()
    loss = None
    for _ in range(args.steps):
        if mark_step is not None:
            # A new training step: outputs of the previous replay may be overwritten.
            mark_step()
        opt.zero_grad(set_to_none=True)
        out = compiled(x)
        loss = nn.functional.mse_loss(out, y)
        loss.backward()
        opt.step()
    final = loss.item() if loss is not None else float("nan")
    torch.cuda.synchronize()
    ms = (time.perf_counter() - t0) * 1e3
    print(f"compiled_graphs steps {args.steps} cuda_ms {ms:.1f} loss {final:.6f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
