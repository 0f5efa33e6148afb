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
LAST_OUTPUT = [""]


def run(cmd, extra_env=None):
    env = dict(os.environ, PYTHON_EXEC=PY, **(extra_env or {}))
    out = subprocess.run([os.path.join(BIN, "ddplaunch"), "--nproc_per_node", "2", *cmd], env=env,
                         capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed (exit {out.returncode}): {out.stderr[-2000:]}")
    m = re.search(r"step_ms=([\d.]+)", out.stdout)
    LAST_OUTPUT[0] = out.stdout
    return float(m.group(1))


def fmt(samples):
    return f"{statistics.median(samples):.2f} ms ({min(samples):.2f}–{max(samples):.2f})"


def progress_slots():
    # The collective-progress slots (--hang_timeout's source) cost a few atomic stores per
    # collective; DDPLAUNCH_PROGRESS=0 turns them off. More runs: the difference is below the noise.
    print("Collective-progress slots on (the default) vs off (DDPLAUNCH_PROGRESS=0), ours, interleaved:")
    print()
    cost = subprocess.run([os.path.join(BIN, "progress_cost")], capture_output=True, text=True, check=True).stdout
    ns = float(re.search(r"ns_per_collective=([\d.]+)", cost).group(1))
    print("| model | slots on | slots off | on / off | collectives per step | their recording (progress_cost) "
          "/ step |")
    print("|---|---|---|---|---|---|")
    for model in ("small", "large"):
        args = ["--model", model, "--steps", str(STEPS[model] * 2), "--warmup", "3"]
        on, off = [], []
        for _ in range(REPS * 2):
            on.append(run([os.path.join(BIN, "ddp_bench"), *args]))
            per_step = int(re.search(r"collectives_per_step=(\d+)", LAST_OUTPUT[0]).group(1))
            off.append(run([os.path.join(BIN, "ddp_bench"), *args], {"DDPLAUNCH_PROGRESS": "0"}))
        bound = per_step * ns / (statistics.median(off) * 1e6)
        print(f"| {model} | {fmt(on)} | {fmt(off)} | {statistics.median(on) / statistics.median(off):.3f}× | "
              f"{per_step} | {per_step} × {ns:.0f} ns = {100 * bound:.2g}% |")
    print()
    print("Target: slots on ≤ 1.01× off. The whole-step ratio is as noisy as this machine (two ranks on two "
          "cores); the last column is the cost itself: what recording a step's collectives takes "
          "(bench/progress_cost.cpp, enter + leave of one slot, best of five runs of 5 million) as a "
          "share of the step.")
    print()


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
    # The same with our allreduce over the TCP ring (DDPLAUNCH_SHM=0): there communication is
    # mostly waiting on the kernel, which overlap can hide; through shared memory it is copying,
    # which competes with backward for the same two cores.
    print("Overlap with our allreduce over the TCP ring instead of shared memory (DDPLAUNCH_SHM=0):")
    print()
    print("| model | ours, TCP ring, overlap on | ours, TCP ring, overlap off | overlap on / off |")
    print("|---|---|---|---|")
    tcp = {"DDPLAUNCH_SHM": "0"}
    for model in ("small", "large"):
        args = ["--model", model, "--steps", str(STEPS[model]), "--warmup", "3"]
        on, off = [], []
        for _ in range(REPS):
            on.append(run([os.path.join(BIN, "ddp_bench"), *args], tcp))
            off.append(run([os.path.join(BIN, "ddp_bench"), *args, "--no-overlap"], tcp))
        print(f"| {model} | {fmt(on)} | {fmt(off)} | {statistics.median(on) / statistics.median(off):.2f}× |")
    print()
    progress_slots()
    print("Target: ours ≤ 0.9× PyTorch's step; overlap on measurably faster than off. The second target is "
          "not met on this machine, with either transport: the two ranks' backward passes already keep both "
          "cores busy, and communication between ranks of one host is CPU work too (copies through shared "
          "memory, or the kernel's copies for loopback TCP), so overlap has no idle resource to fill and its "
          "communication thread only adds switching (overlap on / off above 1 in the large rows). Overlap is "
          "real: ctest \"with overlap, the first bucket is reduced while backward still runs\" shows the "
          "first bucket reduced before backward reaches the first layer. It pays where communication waits "
          "on something other than these cores (a network card, NCCL's stream) or where cores are spare "
          "(ddplaunch sets OMP_NUM_THREADS=1 per worker); on a host whose ranks fill every core, "
          "DistributedDataParallelOptions().overlap(false) (train --no-overlap) is faster.")


if __name__ == "__main__":
    main()
