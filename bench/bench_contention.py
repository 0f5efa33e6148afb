"""Workers under contention: the CPU share a launcher's workers get beside other work.

Linux's scheduler autogroups (/proc/sys/kernel/sched_autogroup_enabled) make each session one
scheduling group, wherever tasks are in no cgroup with the cpu controller. torchrun starts each
worker in a session of its own (start_new_session), so each gets a group's share; a launcher whose
workers stay in its session gives the whole job one share, the same as the busy loops of the shell
it was started from. This runs 4 workers that each do a fixed amount of CPU work in Python, with 4
busy loops beside them in this script's own session (a user's shell's other work), under ddplaunch
and under torchrun, interleaved, in the same run. It times the workers, from the first one's start
to the last one's end (each notes both): the whole command would time torchrun's own start-up
too, its `import torch` in this session beside the busy loops, which dwarfs the workers' time.

Where autogroup is off, or this script runs in a cgroup with the cpu controller, the section says
so instead of reporting a ratio that measures nothing.

    python bench_contention.py BUILD_BIN_DIR [--quick]     (writes a Markdown section to stdout)
"""
import os
import statistics
import subprocess
import sys
import tempfile
import time

BIN = sys.argv[1]
QUICK = "--quick" in sys.argv
REPS = 2 if QUICK else 4
WORKERS = 4
BUSY_LOOPS = 4
# Iterations of the worker's loop: about 1 s of CPU each here (0.3 s with --quick).
ITERATIONS = 6_000_000 if QUICK else 20_000_000
PY = sys.executable
DDPLAUNCH = os.path.join(BIN, "ddplaunch")
TORCHRUN = os.path.join(os.path.dirname(PY), "torchrun")
# The worker: its loop, then its start and end times in $CONTENTION_DIR/$RANK.
WORK = f"""import os, time
start = time.time()
n = 0
for i in range({ITERATIONS}): n += i
with open(os.path.join(os.environ["CONTENTION_DIR"], os.environ["RANK"]), "w") as f: f.write(f"{{start}} {{time.time()}}")
"""
ENV = dict(os.environ, OMP_NUM_THREADS="1", LOGLEVEL="ERROR")


def autogroup_off_reason():
    """Why autogroup cannot apply to processes started from here, or None when it does."""
    try:
        with open("/proc/sys/kernel/sched_autogroup_enabled") as f:
            if f.read().strip() != "1":
                return "sched_autogroup_enabled is 0 on this machine"
    except FileNotFoundError:
        return "this kernel has no scheduler autogroups (CONFIG_SCHED_AUTOGROUP off)"
    with open("/proc/self/cgroup") as f:
        entries = [line.rstrip("\n").split(":", 2) for line in f]
    for _, controllers, path in entries:
        if "cpu" in controllers.split(",") and path != "/":
            return f"this runs in the cgroup v1 cpu group {path}"
    v1_cpu = any("cpu" in c.split(",") for _, c, _ in entries)
    unified = [path for hid, c, path in entries if hid == "0" and c == ""]
    if not v1_cpu and unified and unified[0] != "/":
        # cgroup v2: with cpu enabled below the root, every cgroup under it is a scheduling group.
        try:
            with open("/sys/fs/cgroup/cgroup.subtree_control") as f:
                if "cpu" in f.read().split():
                    return f"this runs in the cgroup v2 {unified[0]}, under the root's cpu controller"
        except OSError:
            pass  # not readable here: assume no controller, as autogroup then applies
    return None


def workers_span(cmd, workers):
    """Seconds from the first worker's start to the last one's end, as they noted them."""
    with tempfile.TemporaryDirectory() as d:
        rc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              env=dict(ENV, CONTENTION_DIR=d, RANK="0")).wait()
        if rc != 0:
            raise SystemExit(f"bench_contention: {cmd[0]} exited {rc}; run it by hand to see why")
        times = []
        for rank in range(workers):
            with open(os.path.join(d, str(rank))) as f:
                times.append([float(t) for t in f.read().split()])
    return max(end for _, end in times) - min(start for start, _ in times)


def measure():
    ours_cmd = [DDPLAUNCH, "--standalone", f"--nproc_per_node={WORKERS}", "--no_python", PY, "-c", WORK]
    peer_cmd = [TORCHRUN, "--standalone", f"--nproc_per_node={WORKERS}", "--no-python", PY, "-c", WORK]
    alone = workers_span([PY, "-c", WORK], 1)
    # In this script's session, as a shell's other jobs are in the launcher's.
    loops = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(BUSY_LOOPS)]
    ours, peer = [], []
    try:
        for _ in range(REPS):
            ours.append(workers_span(ours_cmd, WORKERS))
            peer.append(workers_span(peer_cmd, WORKERS))
    finally:
        for p in loops:
            p.kill()
            p.wait()
    return alone, ours, peer


def fmt(samples):
    return f"{statistics.median(samples):.1f} s ({min(samples):.1f}–{max(samples):.1f})"


def main():
    title = (f"## 9. Workers under contention ({WORKERS} workers × {ITERATIONS:,} Python loop iterations, "
             f"{BUSY_LOOPS} busy loops in the launcher's session)")
    reason = autogroup_off_reason()
    if reason:
        print("\n".join([title, "", f"Not measured: {reason}, so no session gets a share of its own "
                         "and both launchers' workers compete alike."]))
        return
    alone, ours, peer = measure()
    ratios = [o / p for o, p in zip(ours, peer)]
    print("\n".join([
        title, "",
        "| | ddplaunch | torchrun | ddplaunch / torchrun |", "|---|---|---|---|",
        f"| workers under contention: first start → last end | {fmt(ours)} | {fmt(peer)} | "
        f"{statistics.median(ratios):.2f}× |",
        "",
        f"One worker's loop alone, without the busy loops: {alone:.1f} s (the machine's other load included). "
        "Scheduler autogroups on, no cpu cgroup: each session is one scheduling group. torchrun starts each "
        "worker in a session of its own; so does ddplaunch since issue 42 (before, its workers shared the "
        "launcher's session, and with it one share with the busy loops). The workers note their own start "
        "and end, so torchrun's start-up (its `import torch`, slow beside the busy loops) is not counted. "
        f"The ratio is the median of per-repetition ratios ({len(ratios)} interleaved repetitions)."]))

if __name__ == "__main__":
    main()
