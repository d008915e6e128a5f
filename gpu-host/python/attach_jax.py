#!/usr/bin/env python3
"""A JAX job to attach to: a jitted matmul step in a loop for --seconds; prints `ready PID`, then
`steps N result R` (R: a value that depends on every step)."""
import argparse
import os
import sys
import time


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=10.0)
    args = p.parse_args()
    import jax
    import jax.numpy as jnp

    @jax.jit
    def step(a, b):
        c = jnp.tanh(a @ b) * 0.5
        return c, jnp.sum(c)

    a = jnp.ones((512, 512), jnp.float32) * 0.01
    b = jnp.eye(512, dtype=jnp.float32)
    a, s = step(a, b)
    s.block_until_ready()
    print(f"ready {os.getpid()}", flush=True)
    n = 0
    end = time.time() + args.seconds
    while time.time() < end:
        a, s = step(a, b)
        s.block_until_ready()
        n += 1
    print(f"steps {n} result {float(s):.6f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
