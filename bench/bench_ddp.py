"""DDP step time: our C++ DistributedDataParallel (ddp_bench) against PyTorch's DDP over gloo
(ddp_bench_ref.py), both started by ddplaunch with 2 ranks, the same models, batches and timing
(a barrier, then zero_grad + forward + backward + optimizer step). Models: small = the example's
MLP (batch 64); large = MLP 1024-2048-2048-1024, 32 MiB of gradients (batch 32). Also ours with
the overlap of reduction and backward turned off. Each configuration runs REPS times; a run's
figure is its median step; the table shows the median of the runs with min-max.
   python bench_ddp.py BUILD_BIN_DIR [--quick]
"""
import os
import re
import statistics
import subprocess
import sys

BIN = sys.argv[1]
QUICK = "--quick" in sys.argv
REPS = 2 if QUICK else 5
STEPS = {"small": 30 if QUICK else 100, "large": 4 if QUICK else 30}
HERE = os.path.dirname(os.path.abspath(__file__))
PY = sys.executable


def run(cmd):
    env = dict(os.environ, PYTHON_EXEC=PY)
    out = subprocess.run([os.path.join(BIN, "ddplaunch"), "--nproc_per_node", "2", *cmd], env=env,
                         capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed (exit {out.returncode}): {out.stderr[-2000:]}")
    m = re.search(r"step_ms=([\d.]+)", out.stdout)
    return float(m.group(1))


def fmt(samples):
    return f"{statistics.median(samples):.2f} ms ({min(samples):.2f}–{max(samples):.2f})"


def main():
    print("## 6. DDP step time (2 ranks, CPU, ddplaunch starts both)")
    print()
    print("| model | ours (C++ DDP) | PyTorch DDP (gloo) | ours / PyTorch | ours, overlap off | overlap on / off |")
    print("|---|---|---|---|---|---|")
    for model in ("small", "large"):
        args = ["--model", model, "--steps", str(STEPS[model]), "--warmup", "3"]
        ours, peer, serial = [], [], []
        for _ in range(REPS):  # interleaved, so drift in machine load hits all three alike
            ours.append(run([os.path.join(BIN, "ddp_bench"), *args]))
            peer.append(run([os.path.join(HERE, "ddp_bench_ref.py"), *args]))
            serial.append(run([os.path.join(BIN, "ddp_bench"), *args, "--no-overlap"]))
        o, p, s = (statistics.median(x) for x in (ours, peer, serial))
        print(f"| {model} | {fmt(ours)} | {fmt(peer)} | {o / p:.2f}× | {fmt(serial)} | {o / s:.2f}× |")
    print()
    print("Target: ours ≤ 0.9× PyTorch's step; overlap on measurably faster than off. Both ranks and "
          "their communication share this machine's 2 cores, which limits what overlap can hide.")


if __name__ == "__main__":
    main()
