"""A hung rank, launcher by launcher: from the moment a rank stops making progress to the job's end.

Two gloo ranks (Python, torch) all_reduce a small tensor every 50 ms; at iteration 20 rank 1 notes
the time and sleeps for an hour (it never enters the next all_reduce; rank 0 waits in it). Each
launcher runs the job with no restarts (--max_restarts 0), so detecting the hang ends the job:
   stop → end = the launcher's exit − the noted time   (bounded: BOUND s, then the run is stopped)
   ddplaunch             --hang_timeout 2 (PyTorch's Flight Recorder through the workers' servers); the
                         script is unchanged
   ft_launcher + beats   nvidia-resiliency-ext's heartbeat API as its docs show it: each rank makes a
                         RankMonitorClient, init_workload_monitoring(), send_heartbeat() every iteration;
                         --ft-rank-heartbeat-timeout 2 (the same 2 s), --ft-workload-check-interval 0.2
                         (ddplaunch samples every tenth of the timeout, 0.2 s)
   ft_launcher, no beats the same flags, the unchanged script
   torchrun              its defaults: nothing ends the job before gloo's 30-minute timeout
Writes a Markdown section to stdout.   python bench_hang_peers.py BUILD_BIN_DIR [--quick]
"""
import os
import statistics
import subprocess
import sys
import tempfile
import time

from bench_recovery import DDPLAUNCH, PY, QUICK, kill_leftovers, tail, write_script
from peers import FT_LAUNCHER, FT_PYTHON, bar_plot, ft_available, ft_missing_note, ft_version

REPS = 1 if QUICK else 3
BOUND = 15.0 if QUICK else 60.0
TIMEOUT_S = 2
ENV = dict(os.environ, OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo", PYTHON_EXEC=PY)

WORKER = r"""
import os, time
beats = None
if os.environ.get("BENCH_FT_HEARTBEATS") == "1":
    # nvidia-resiliency-ext's fault-tolerance API, as its usage guide shows it.
    from nvidia_resiliency_ext.fault_tolerance import RankMonitorClient
    beats = RankMonitorClient()
    beats.init_workload_monitoring()
import torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.ones(1000)
for i in range(1, 10**9):
    if beats:
        beats.send_heartbeat()
    if dist.get_rank() == 1 and i == 20:
        with open(os.path.join(os.environ["HANG_DIR"], "stopped.tmp"), "w") as f:
            f.write(repr(time.time()))
        os.rename(os.path.join(os.environ["HANG_DIR"], "stopped.tmp"), os.path.join(os.environ["HANG_DIR"], "stopped"))
        time.sleep(3600)  # rank 1 never enters the next all_reduce; rank 0 waits in it
    dist.all_reduce(t)
    time.sleep(0.05)
"""

FT_FLAGS = ["--max-restarts=0", f"--ft-rank-heartbeat-timeout={TIMEOUT_S}", "--ft-initial-rank-heartbeat-timeout=120",
            "--ft-workload-check-interval=0.2"]
CONFIGS = [
    ("ddplaunch --hang_timeout 2", lambda prog: [DDPLAUNCH, "--standalone", "--nproc_per_node", "2",
                                                  f"--hang_timeout={TIMEOUT_S}", prog], {}),
    ("ft_launcher, heartbeat API in the script", lambda prog: [FT_LAUNCHER, "--standalone", "--nproc-per-node=2",
                                                               *FT_FLAGS, prog],
     {"BENCH_FT_HEARTBEATS": "1", "PYTHON_EXEC": FT_PYTHON}),
    ("ft_launcher, script unchanged", lambda prog: [FT_LAUNCHER, "--standalone", "--nproc-per-node=2", *FT_FLAGS, prog],
     {"PYTHON_EXEC": FT_PYTHON}),
    ("torchrun", lambda prog: [PY, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
                               "--max-restarts=0", prog], {}),
]


def one_run(command, extra_env):
    """(stop → end seconds or None when still running after BOUND, exit code or None)."""
    with tempfile.TemporaryDirectory(prefix="bench_hang_peers_") as d:
        prog = write_script(d, WORKER, "hang.py")
        err = os.path.join(d, "launcher.err")
        with open(err, "wb") as fe:
            p = subprocess.Popen(command(prog), stdout=subprocess.DEVNULL, stderr=fe, start_new_session=True,
                                 env={**ENV, "HANG_DIR": d, **extra_env})
        try:
            stop_file, deadline = os.path.join(d, "stopped"), time.time() + 180
            while not os.path.exists(stop_file):  # another process's file: nothing to wait on but polling
                if p.poll() is not None or time.time() > deadline:
                    raise RuntimeError(f"rank 1 never stopped (launcher exit {p.poll()}):\n{tail(err)}")
                time.sleep(0.02)
            with open(stop_file) as f:
                stopped = float(f.read())
            try:
                code = p.wait(timeout=max(0.1, stopped + BOUND - time.time()))
                return time.time() - stopped, code
            except subprocess.TimeoutExpired:
                return None, None
        finally:
            kill_leftovers([p], f"HANG_DIR={d}".encode())


def main():
    rows, errors = [], {}
    configs = [c for c in CONFIGS if ft_available() or not c[0].startswith("ft_launcher")]
    results = {name: [] for name, _, _ in configs}
    for _ in range(REPS):
        for name, command, extra_env in configs:
            if name in errors:
                continue
            try:
                results[name].append(one_run(command, extra_env))
            except RuntimeError as e:
                errors[name] = str(e)
    if errors.get(configs[0][0]):
        sys.stderr.write(errors[configs[0][0]] + "\n")
        sys.exit(1)
    ours = statistics.median(s for s, _ in results[configs[0][0]])
    for name, _, _ in configs:
        runs = results[name]
        if not runs:
            rows.append(f"| {name} | failed (below) | — | — |")
            continue
        ended = [s for s, _ in runs if s is not None]
        codes = sorted({str(c) for _, c in runs if c is not None})
        if len(ended) == len(runs):
            cell = f"{statistics.median(ended):.2f} s ({min(ended):.2f}–{max(ended):.2f})"
            ratio = f"{statistics.median(ended) / ours:.1f}×"
        else:
            cell = f"not ended after {BOUND:.0f} s ({len(runs) - len(ended)} of {len(runs)} runs)"
            ratio = f"> {BOUND / ours:.0f}×"
        rows.append(f"| {name} | {cell} | {', '.join(codes) or '— (stopped by the bench)'} | {ratio} |")
    bars = {name: [statistics.median(s for s, _ in results[name]) if results[name] and
                   all(s is not None for s, _ in results[name]) else None] for name, _, _ in configs}
    png = bar_plot("hang_peers.png", f"A rank stops: stop → the job's end (no bar: not ended in {BOUND:.0f} s)",
                   ["2 gloo ranks, 2 s timeouts"], bars, "seconds")
    out = [f"## 2e. A hung rank: stop → the job's end ({TIMEOUT_S} s timeouts, 2 gloo ranks, --max_restarts 0)", "",
           "| launcher | stop → launcher exit | exit code | / ddplaunch |", "|---|---|---|---|"] + rows
    for name, e in errors.items():
        out += ["", f"{name} could not run this job; its error (tail):", "", "```", e[-3000:], "```"]
    out += ["", f"{REPS} run(s) of each, in turn. Rank 1 notes the time and sleeps in its 20th iteration (every "
            "iteration: a gloo all_reduce, then 50 ms of sleep); rank 0 waits in the all_reduce. ddplaunch needs no "
            "change to the script: it reads PyTorch's Flight Recorder through the workers' servers and names the "
            "rank that never entered the collective. ft_launcher detects a hang only through its rank monitors, so "
            "the script must call its API (a RankMonitorClient per rank, init_workload_monitoring(), "
            "send_heartbeat() every iteration, as in nvidia-resiliency-ext's usage guide); the same script without "
            f"the calls runs until gloo's timeout (30 min), as under torchrun. The bound: {BOUND:.0f} s, after which "
            "the bench kills the job. " +
            (f"ft_launcher: nvidia-resiliency-ext {ft_version()}, --ft-rank-heartbeat-timeout {TIMEOUT_S} "
             "--ft-initial-rank-heartbeat-timeout 120 --ft-workload-check-interval 0.2, otherwise its defaults "
             "(on a missed heartbeat its rank monitor kills the rank with SIGKILL, then the agent ends the job)."
             if ft_available() else ft_missing_note())]
    if png:
        out += ["", f"![stop → the job's end, per launcher]({png})"]
    print("\n".join(out))


if __name__ == "__main__":
    main()
