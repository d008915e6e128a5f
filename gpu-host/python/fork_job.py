"""A PyTorch job one of whose threads forks all the time: the main thread trains a small model eagerly (a
synchronize per step) while a thread "forker" forks a child that exits at once, every FORK_GAP seconds (default
0.005). For fork_pc_probe.sh: a stop of the job then often finds a thread inside fork(), where the CUDA driver's
fork handler may hold its locks.

Prints "ready PID" after its first step, and "result steps N forks M children_killed K" at the end (STOP_FILE, or
--seconds): K children died of a signal."""
import os
import sys
import threading
import time

import torch


def main() -> int:
    seconds = float(sys.argv[sys.argv.index("--seconds") + 1]) if "--seconds" in sys.argv else 120.0
    gap = float(os.environ.get("FORK_GAP", "0.005"))
    stop_file = os.environ.get("STOP_FILE")
    model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(64, 512, device="cuda")
    done = threading.Event()
    forks, killed = [0], [0]

    def forker():
        while not done.is_set():
            pid = os.fork()
            if pid == 0:
                os._exit(0)
            _, status = os.waitpid(pid, 0)
            forks[0] += 1
            # A child that returned from fork() into a breakpoint left in the parent's code dies of SIGTRAP.
            killed[0] += int(os.WIFSIGNALED(status))
            time.sleep(gap)

    def step():
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()
        torch.cuda.synchronize()

    step()
    thread = threading.Thread(target=forker, name="forker", daemon=True)
    thread.start()
    print(f"ready {os.getpid()}", flush=True)
    steps, start = 0, time.monotonic()
    while time.monotonic() - start < seconds and not (stop_file and os.path.exists(stop_file)):
        step()
        steps += 1
    done.set()
    thread.join()
    print(f"result steps {steps} forks {forks[0]} children_killed {killed[0]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
