"""Launcher benchmarks, ddplaunch against the venv's torchrun, measured side by side.

1. Launch overhead: whole-command wall time of running N workers of /bin/true (N = 1, 8, 32)
   under ddplaunch, under `torchrun --no-python`, and the fork+exec+wait floor (spawn_floor).
2. Failure teardown: one worker exits 1 at once while its siblings sleep; time until the launcher
   has exited (every worker reaped).

Each figure is the median of several repetitions, with min and max. Writes a Markdown section to
stdout.   python bench_launcher.py BUILD_BIN_DIR [--quick]
"""
import os
import statistics
import subprocess
import sys
import tempfile
import time

BIN = sys.argv[1]
QUICK = "--quick" in sys.argv
REPS = 3 if QUICK else 7
PY = sys.executable
DDPLAUNCH = os.path.join(BIN, "ddplaunch")
FLOOR = os.path.join(BIN, "spawn_floor")
ENV = dict(os.environ, OMP_NUM_THREADS="1", LOGLEVEL="ERROR")


def wall(cmd, env=ENV):
    t0 = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, timeout=300)
    return time.perf_counter() - t0


def stats(samples):
    return statistics.median(samples), min(samples), max(samples)


def fmt(s):
    med, lo, hi = s
    return f"{med * 1000:.1f} ms ({lo * 1000:.1f}–{hi * 1000:.1f})"


def launch_overhead():
    rows = []
    for n in (1, 8, 32):
        ours = stats([wall([DDPLAUNCH, "--standalone", "--nproc_per_node", str(n), "--no_python", "/bin/true"])
                      for _ in range(REPS)])
        peer = stats([wall([PY, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(n),
                            "--no-python", "/bin/true"]) for _ in range(max(3, REPS // 2))])
        floor = stats([float(subprocess.check_output([FLOOR, str(n), "/bin/true"])) for _ in range(REPS)])
        rows.append((n, ours, peer, floor))
    out = ["## 1. Launch overhead (N workers of /bin/true, whole command)", "",
           "| workers | ddplaunch | torchrun --no-python | fork+exec+wait floor | torchrun / ddplaunch | ddplaunch / floor |",
           "|---|---|---|---|---|---|"]
    for n, ours, peer, floor in rows:
        out.append(f"| {n} | {fmt(ours)} | {fmt(peer)} | {fmt(floor)} | {peer[0] / ours[0]:.0f}× | "
                   f"{ours[0] / floor[0]:.1f}× |")
    return out


def teardown():
    with tempfile.TemporaryDirectory() as d:
        prog = os.path.join(d, "w.sh")
        with open(prog, "w") as f:
            f.write('#!/bin/sh\n[ "$LOCAL_RANK" = 0 ] && exit 1\nexec sleep 30\n')
        os.chmod(prog, 0o755)
        ours = stats([wall([DDPLAUNCH, "--standalone", "--nproc_per_node", "4", "--no_python", prog])
                      for _ in range(REPS)])
        peer = stats([wall([PY, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "4",
                            "--no-python", prog]) for _ in range(max(3, REPS // 2))])
    return ["## 2. Failure teardown (4 workers, local rank 0 exits 1 at once, siblings sleep)", "",
            "| | ddplaunch | torchrun | torchrun / ddplaunch |", "|---|---|---|---|",
            f"| launcher exit, all reaped | {fmt(ours)} | {fmt(peer)} | {peer[0] / ours[0]:.0f}× |"]


if __name__ == "__main__":
    print("\n".join(launch_overhead() + [""] + teardown()))
