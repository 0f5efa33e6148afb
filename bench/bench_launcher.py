"""Launcher benchmarks, ddplaunch against the venv's torchrun (and, in the launch rows, NVIDIA's
ft_launcher where bench/peers.py finds it), measured side by side; the launch rows end with their
guard verdicts (bench/guards.py).

1. Launch overhead: whole-command wall time of running N workers of /bin/true (N = 1, 8, 32)
   under ddplaunch, under `torchrun --no-python`, and the fork+exec+wait floor (spawn_floor): as
   spawn_floor times itself (spawns and waits only) and as a whole command timed like the
   launchers (adding the start and exit of a process, which every launcher pays too). Then
   ddplaunch before and after the start-up work of this benchmark's issue (BEFORE below).
2. Failure teardown: one worker exits 1 at once while its siblings sleep; time until the launcher
   has exited (every worker reaped).
   Then the hang report: with --hang_timeout T, rank 1 stops itself (SIGSTOP) while rank 0 waits; time from
   the stop to ddplaunch's "suspected hang" report, stacks included (target T + 2 s at most); and the
   same for a C++ worker on the ddplaunch runtime (ddp_step_worker), whose collective hang fails the job, and
   for an unmodified gloo script whose rank 1 never enters all_reduce #4 (PyTorch's Flight Recorder).
   torchrun has no such report: nothing to compare with.

Each figure is the median of several repetitions, with min and max. Writes a Markdown section to
stdout.   python bench_launcher.py BUILD_BIN_DIR [--quick]
"""
import os
import statistics
import subprocess
import sys
import tempfile
import time

from guards import LAUNCH_GUARDS, verdict
from peers import FT_LAUNCHER, bar_plot, ft_available, ft_missing_note, ft_version

BIN = sys.argv[1]
QUICK = "--quick" in sys.argv
REPS = 3 if QUICK else 7
# torchrun takes ~1.7 s a run whatever it starts: fewer repetitions of it.
PEER_REPS = 2 if QUICK else 3
# The millisecond-scale commands repeat more; they run interleaved (ddplaunch, floor, floor as a
# command, in turn) so a burst of load on the shared machine hits all of them alike, and the
# ratios to the floor are taken within each repetition.
FAST_REPS = 7 if QUICK else 31
PY = sys.executable
DDPLAUNCH = os.path.join(BIN, "ddplaunch")
FLOOR = os.path.join(BIN, "spawn_floor")
ENV = dict(os.environ, OMP_NUM_THREADS="1", LOGLEVEL="ERROR")

# ddplaunch's launch overhead before the start-up fixes, measured on this machine with this
# script's method (Release build of commit d4b57e5, interleaved with the floor, medians of 25
# runs): milliseconds for 1, 8 and 32 workers of /bin/true, and the whole-command floor measured
# in the same session (for the ratio, which moves less with the machine's load than times do).
BEFORE_COMMIT = "d4b57e5"
BEFORE_MS = {1: 4.3, 8: 8.6, 32: 25.6}
BEFORE_FLOOR_MS = {1: 2.3, 8: 5.4, 32: 15.9}


def wall(cmd, env=ENV):
    # A blocking wait, not subprocess.run(timeout=...): waiting with a timeout polls waitpid with
    # sleeps that double from 0.5 ms, which rounds a few-millisecond command up to 0.5+1+2+4 ms.
    t0 = time.perf_counter()
    subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env).wait()
    return time.perf_counter() - t0


def stats(samples):
    return statistics.median(samples), min(samples), max(samples)


def fmt(s):
    med, lo, hi = s
    return f"{med * 1000:.1f} ms ({lo * 1000:.1f}–{hi * 1000:.1f})"


def launch_overhead():
    rows = []
    for n in (1, 8, 32):
        ours, no_cgroup, floor, floor_cmd = [], [], [], []
        cmd = [DDPLAUNCH, "--standalone", "--nproc_per_node", str(n), "--no_python", "/bin/true"]
        for _ in range(FAST_REPS):
            ours.append(wall(cmd))
            no_cgroup.append(wall(cmd, dict(ENV, DDPLAUNCH_CGROUP="0")))
            floor.append(float(subprocess.check_output([FLOOR, str(n), "/bin/true"])))
            floor_cmd.append(wall([FLOOR, str(n), "/bin/true"]))
        peer_runs, ft_runs = [], []
        for _ in range(PEER_REPS):  # interleaved, like the fast ones
            peer_runs.append(wall([PY, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(n),
                                   "--no-python", "/bin/true"]))
            if ft_available():
                ft_runs.append(wall([FT_LAUNCHER, "--standalone", "--nproc_per_node", str(n), "--no-python", "/bin/true"]))
        peer, ft = stats(peer_runs), (stats(ft_runs) if ft_runs else None)
        vs_floor = statistics.median(o / f for o, f in zip(ours, floor))
        vs_floor_cmd = statistics.median(o / f for o, f in zip(ours, floor_cmd))
        no_cgroup_vs_floor_cmd = statistics.median(o / f for o, f in zip(no_cgroup, floor_cmd))
        rows.append((n, stats(ours), peer, stats(floor), stats(floor_cmd), vs_floor, vs_floor_cmd,
                     no_cgroup_vs_floor_cmd, ft))
    out = ["## 1. Launch overhead (N workers of /bin/true, whole command)", "",
           "| workers | ddplaunch | torchrun --no-python | ft_launcher --no-python | floor: spawns only | "
           "floor: whole command | torchrun / ddplaunch | ft_launcher / ddplaunch | ddplaunch / floor: spawns only | "
           "ddplaunch / floor: whole command | without a cgroup / floor: whole command |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for n, ours, peer, floor, floor_cmd, vs_floor, vs_floor_cmd, no_cgroup_vs, ft in rows:
        ft_cells = (fmt(ft), f"{ft[0] / ours[0]:.0f}×") if ft else ("not run", "—")
        out.append(f"| {n} | {fmt(ours)} | {fmt(peer)} | {ft_cells[0]} | {fmt(floor)} | {fmt(floor_cmd)} | "
                   f"{peer[0] / ours[0]:.0f}× | {ft_cells[1]} | {vs_floor:.1f}× | {vs_floor_cmd:.2f}× | {no_cgroup_vs:.2f}× |")
    png = bar_plot("launch_peers.png", "Launch of N workers of /bin/true (whole command, median)",
                   [f"{n} worker{'s' if n > 1 else ''}" for n, *_ in rows],
                   {"ddplaunch": [r[1][0] * 1000 for r in rows], "torchrun": [r[2][0] * 1000 for r in rows],
                    **({"ft_launcher": [r[8][0] * 1000 for r in rows]} if ft_available() else {})},
                   "ms (log scale)", log=True)
    out.append("")
    for n, *_, vs_floor_cmd, _, _ in rows:
        out.append(verdict(f"launch of {n} worker{'s' if n > 1 else ''}: ddplaunch / whole-command floor",
                           vs_floor_cmd, LAUNCH_GUARDS[n]))
    out += ["", "Floor, spawns only: spawn_floor's own timer around posix_spawn and waitpid of the N workers. "
            "Floor, whole command: the same program timed from here like the launchers, so it also pays for "
            "starting and ending a process, as every launcher does. Ratios to the floor are medians of "
            f"per-repetition ratios ({FAST_REPS} interleaved repetitions). Without a cgroup: the same "
            "launch with DDPLAUNCH_CGROUP=0, process groups only, as on a machine where the launcher may not "
            "write cgroup v2 (a Slurm step, most ssh sessions of a user without a delegated subtree). "
            + (f"ft_launcher: NVIDIA's nvidia-resiliency-ext {ft_version()} from the bench's venv (bench/peers.py), "
               f"{PEER_REPS} runs per size interleaved with torchrun's, its defaults (it logs that its GPU health "
               "check and NIC monitor are off on this machine without NVML or InfiniBand)."
               if ft_available() else ft_missing_note())]
    if png:
        out += ["", f"![launch time, ddplaunch / torchrun / ft_launcher]({png})"]
    return out, {n: (ours[0], vs_floor_cmd) for n, ours, _, _, _, _, vs_floor_cmd, _, _ in rows}


def before_after(after):
    out = [f"### Launch overhead before and after the start-up fixes (ddplaunch at {BEFORE_COMMIT} → now)", "",
           "| workers | before | after (this run) | before / after | before / floor then | after / floor now |",
           "|---|---|---|---|---|---|"]
    for n, ms in BEFORE_MS.items():
        now, now_vs_floor = after[n]
        out.append(f"| {n} | {ms:.1f} ms | {now * 1000:.1f} ms | {ms / (now * 1000):.2f}× | "
                   f"{ms / BEFORE_FLOOR_MS[n]:.1f}× | {now_vs_floor:.1f}× |")
    out += ["", "Before: constants in bench_launcher.py, measured with this script's method at the commit named. "
            "Floor: the whole-command floor of the same session. The first RESULTS.md (commit c8f7472) showed "
            "8.6 / 15.7 / 32.5 ms for the same binary: its harness waited with subprocess.run(timeout=...), "
            "which polls with sleeps of 0.5, 1, 2, 4, 8, 16 ms, so every time was rounded up to one of "
            "3.5, 7.5, 15.5, 31.5 ms plus the poll's own cost; most of the \"fixed ~7 ms start cost\" was that. "
            "What changed: command-line parsing without std::regex; workers started with vfork+exec "
            "(spawn_process.cpp) instead of Boost.Process's fork; libstdc++ linked statically (binding its "
            "symbols was half of the launcher's own start-up instructions); the console writer thread starts "
            "with the first output line; a static single-node job runs no outcome watcher (thread and store "
            "connection), and a node that declares success itself exits without waiting to read it back."]
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
                            "--no-python", prog]) for _ in range(PEER_REPS)])
    return ["## 2. Failure teardown (4 workers, local rank 0 exits 1 at once, siblings sleep)", "",
            "| | ddplaunch | torchrun | torchrun / ddplaunch |", "|---|---|---|---|",
            f"| launcher exit, all reaped | {fmt(ours)} | {fmt(peer)} | {peer[0] / ours[0]:.0f}× |"]


HANG_WORKER = r"""#!/bin/bash
# Both ranks work (CPU) for 0.3 s; then rank 1 notes the time and stops itself, rank 0 waits.
end=$(( ${EPOCHREALTIME/./} + 300000 ))
while (( ${EPOCHREALTIME/./} < end )); do :; done
if [ "$LOCAL_RANK" = 1 ]; then echo "$EPOCHREALTIME" > "$STOP_FILE"; kill -STOP $$; fi
exec sleep 120
"""


def read_until(p, marker, seconds):
    """p's stderr until `marker` shows (or EOF, or `seconds`): (text, time.time() when it showed or None)."""
    import select
    text, deadline = b"", time.time() + seconds
    while time.time() < deadline:
        if select.select([p.stderr], [], [], 1)[0]:
            chunk = os.read(p.stderr.fileno(), 65536)
            if not chunk:
                break
            text += chunk
            if marker in text:
                return text, time.time()
    return text, None


def stop_to_report(worker, name, flags, marker, seconds, env=None):
    """Stats of the time from a worker's stop (the time it writes to $STOP_FILE) to `marker` on
    the stderr of a 2-worker job of `worker` (written as `name`) with `flags`."""
    latencies = []
    with tempfile.TemporaryDirectory() as d:
        prog, stop_file = os.path.join(d, name), os.path.join(d, "stopped_at")
        with open(prog, "w") as f:
            f.write(worker)
        os.chmod(prog, 0o755)
        for _ in range(REPS if QUICK else 5):
            p = subprocess.Popen([DDPLAUNCH, "--standalone", "--nproc_per_node", "2", "--shutdown_timeout=1", *flags,
                                  prog], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                 env=dict(ENV, STOP_FILE=stop_file, **(env or {})))
            text, reported = read_until(p, marker, seconds)
            p.terminate()
            p.communicate(timeout=30)
            if reported is None:
                raise SystemExit(f"bench: no {marker!r} within the deadline:\n" + text.decode(errors="replace"))
            with open(stop_file) as f:
                latencies.append(reported - float(f.read()))
    return stats(latencies)


def hang_report(timeout_s=2):
    s = stop_to_report(HANG_WORKER, "hang.sh", [f"--hang_timeout={timeout_s}", "--no_python"], b"suspected hang",
                       timeout_s + 30)
    return [f"### Hang report (--hang_timeout {timeout_s}: a rank stops itself, the other waits)", "",
            "| | ddplaunch | target | ddplaunch / target |", "|---|---|---|---|",
            f"| stop → suspected-hang report, stacks included | {s[0]:.2f} s ({s[1]:.2f}–{s[2]:.2f}) | "
            f"{timeout_s + 2} s | {s[0] / (timeout_s + 2):.2f}× |", "",
            "torchrun reports no hang; its ranks wait for the collective timeout (30 min by default)."]


def collective_hang_report(timeout_s=2):
    """The C++ path: rank 1 of ddp_step_worker (the ddplaunch runtime) stops itself between
    collectives; from its stop to the report naming it on the console (after the teardown)."""
    import re
    worker = os.path.join(BIN, "ddp_step_worker")
    latencies = []
    for _ in range(REPS if QUICK else 5):
        p = subprocess.Popen([DDPLAUNCH, "--standalone", "--nproc_per_node", "2", f"--hang_timeout={timeout_s}",
                              worker, "--steps", "1000000", "--stop-rank", "1", "--stop-step", "50"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=ENV)
        text, reported = read_until(p, b"Never entered collective #", timeout_s + 60)
        p.kill()
        p.communicate(timeout=30)
        stopped = re.search(rb"stopping at ([\d.]+)", text)
        if reported is None or not stopped:
            raise SystemExit("bench: no collective hang report within the deadline:\n" + text.decode(errors="replace"))
        latencies.append(reported - float(stopped.group(1)))
    s = stats(latencies)
    return [f"| stop → collective hang report (C++ worker on the ddplaunch runtime), stacks included, job "
            f"failed (exit 124) | {s[0]:.2f} s ({s[1]:.2f}–{s[2]:.2f}) | {timeout_s + 2} s | "
            f"{s[0] / (timeout_s + 2):.2f}× |"]


PYTHON_HANG = r"""
import os, time
import torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.ones(1000)
for i in range(1, 8):
    if dist.get_rank() == 1 and i == 4:
        with open(os.environ["STOP_FILE"], "w") as f:
            f.write(repr(time.time()))
        time.sleep(600)  # rank 1 never enters all_reduce #4; rank 0 waits in it
    dist.all_reduce(t)
"""


def python_hang_report(timeout_s=2):
    """An unmodified gloo script: from rank 1's stall to the exact report (PyTorch's Flight
    Recorder through the workers' servers) naming it on the console."""
    s = stop_to_report(PYTHON_HANG, "hang.py", [f"--hang_timeout={timeout_s}"], b"Never entered collective #",
                       timeout_s + 60, env={"PYTHON_EXEC": PY})
    return [f"| stop → exact hang report of an unmodified gloo script (PyTorch's Flight Recorder), Python stacks "
            f"included, job failed (exit 124) | {s[0]:.2f} s ({s[1]:.2f}–{s[2]:.2f}) | {timeout_s + 2} s | "
            f"{s[0] / (timeout_s + 2):.2f}× |"]


if __name__ == "__main__":
    overhead, after = launch_overhead()
    hang = hang_report()
    hang[5:5] = collective_hang_report() + python_hang_report()
    print("\n".join(overhead + [""] + before_after(after) + [""] + teardown() + [""] + hang))
