"""Straggler detection (docs/stragglers.md): what it costs and how fast it names a slow rank.

A gloo training loop (each step: a 256x256 float32 matmul loop of ~150 ms of work (20% of it is
above the 20 ms absolute threshold), one all_reduce of
1M floats, a second all_reduce that ends every rank together) on 2 nodes x 2 ranks: two ddplaunch
launchers on loopback (the store exchange and the clock offsets run as between machines).

1. Overhead: the same job with --stragglers=off and with detection on (the default, warn; the
   window 30 s, so every 10 s each worker's Flight Recorder is read), the two jobs running at the
   same time, side by side, so that the load of the shared machine hits both alike; each job's
   median step time on rank 0, each pair's ratio on/off, and the median of the ratios (target
   <= 1.01).
   On a machine shared with other jobs the step times of two runs differ by tens of percent
   whatever is measured, so the cost is also measured where it is paid:
1b. One read of a worker's Flight Recorder as the launcher asks for it: a worker with ddplaunch's
   hook (its worker server) and a full ring (2000 entries, TORCH_FR_BUFFER_SIZE's default under
   ddplaunch), asked "ddplaunch_fr_entries" over its socket while it sleeps: the answer's wall
   time and the CPU time the worker spent on it (from /proc), per read; at one read per scoring
   interval (10 s by default) that CPU time over 10 s bounds the step-time cost (the read holds
   the GIL, so at worst the training thread waits that long once per interval).
2. False flags: straggler lines printed in the healthy runs with detection on (target 0).
3. Detection: rank 3 slowed by 20% of a step from 8 s into the run, (a) sleeping that long more
   per step, (b) its CPU quota cut to 80% of the CPU it was using (measured over 1 s; 4 ranks on
   2 cores get about half a core each, so a quota of 80% of one core would slow nothing) through
   its cgroup (cgroup v1 cpu.cfs_quota_us, or v2 cpu.max; skipped with a note where neither can be
   written): seconds from the slowdown to the
   console line naming it (target <= 60 s), and which rank was named.
Writes a Markdown section to stdout.
    python bench_stragglers.py BUILD_BIN_DIR [--quick]
"""
import http.client
import os
import pathlib
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

QUICK = "--quick" in sys.argv
BIN = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("--") else "build/bin")
DDPLAUNCH = str(BIN / "ddplaunch")
RUNS = 3 if QUICK else 10
SECONDS = 25 if QUICK else 40
DETECT_SECONDS = 80  # the slowdown starts 8 s in; the target is to name it within 60 s
DETECT_RUNS = 1 if QUICK else 3
FOUND = re.compile(r"ddplaunch: straggler: (rank (\d+) on node \d+|node (\d+)) .*enters collectives (\d+) ms late")

TRAIN = '''\
import os, statistics, sys, time
import torch, torch.distributed as dist
torch.set_num_threads(1)
dist.init_process_group("gloo")
rank = dist.get_rank()
out = sys.argv[1]
a = torch.randn(256, 256)
g = torch.ones(1 << 20)
def work(n):
    x = a
    for _ in range(n):
        x = torch.tanh(x @ a)
    return x
# Calibrate: about 150 ms of work per step on this machine, the same count on every rank.
t = time.perf_counter(); work(10); per = (time.perf_counter() - t) / 10
n = torch.tensor([max(1, int(0.15 / per))]); dist.broadcast(n, 0); n = int(n.item())
late_rank, late_from = int(os.environ.get("LATE_RANK", "-1")), float(os.environ.get("LATE_FROM", "8"))
start = time.time(); end = start + float(os.environ["SECONDS_"])
steps = []; late_s = None; slowed = False
while True:
    t = time.perf_counter()
    work(n)
    if rank == late_rank and time.time() - start > late_from:
        if not slowed:
            slowed = True
            with open(out + ".slowed", "w") as f:
                f.write(repr(time.time()))
            if os.environ.get("THROTTLE"):  # the bench moves this pid into a throttled cgroup
                with open(out + ".throttle_me", "w") as f:
                    f.write(str(os.getpid()))
        if late_s:
            time.sleep(late_s)
    dist.all_reduce(g)
    stop = torch.tensor([1.0 if time.time() > end else 0.0])
    dist.all_reduce(stop)
    steps.append(time.perf_counter() - t)
    if late_s is None and len(steps) == 20:
        late_s = 0.2 * statistics.median(steps) if not os.environ.get("THROTTLE") else 0
    if stop.item() > 0:
        break
if rank == 0:
    with open(out, "w") as f:
        f.write(repr(statistics.median(steps[5:])))
dist.destroy_process_group()
'''


HOOK = pathlib.Path(__file__).resolve().parents[1] / "python" / "ddplaunch" / "worker_hook"
READ_REPS = 5 if QUICK else 20

FULL_RING = '''\
import os, sys, time
import torch, torch.distributed as dist
dist.init_process_group("gloo", init_method="tcp://127.0.0.1:" + sys.argv[2], rank=0, world_size=1)
t = torch.ones(1000)
for _ in range(2100):
    dist.all_reduce(t)
with open(sys.argv[1], "w") as f:
    f.write("ready")
time.sleep(600)
'''


class UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=30)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.path)


def cpu_s(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def read_cost(tmp):
    """(wall ms per read, CPU ms per read, entries answered first) of ddplaunch_fr_entries."""
    sock = os.path.join(tmp, "w.sock")
    ready = os.path.join(tmp, "ready")
    with open(os.path.join(tmp, "ring.py"), "w") as f:
        f.write(FULL_RING)
    env = dict(os.environ, PYTHONPATH=str(HOOK), DDPLAUNCH_WORKER_SOCKET=sock, TORCH_FR_BUFFER_SIZE="2000",
               OMP_NUM_THREADS="1")
    p = subprocess.Popen([sys.executable, os.path.join(tmp, "ring.py"), ready, str(free_port())], env=env)
    try:
        deadline = time.time() + 120
        while not os.path.exists(ready) and time.time() < deadline:
            time.sleep(0.1)  # the worker fills its ring first; nothing to wait on
        walls, cpus, first = [], [], None
        for _ in range(READ_REPS):
            c0, t0 = cpu_s(p.pid), time.perf_counter()
            conn = UnixHTTP(sock)
            conn.request("POST", "/handler/ddplaunch_fr_entries")
            body = conn.getresponse().read().decode()
            conn.close()
            walls.append(time.perf_counter() - t0)
            time.sleep(0.2)  # let /proc's tick-based counters catch up
            cpus.append(cpu_s(p.pid) - c0)
            if first is None:
                first = len(body.splitlines())
        return walls, cpus, first
    finally:
        p.kill()
        p.wait()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Job:
    """Two launchers (2 nodes x 2 ranks) on loopback; stderr lines timestamped as they come."""

    def __init__(self, tmp, mode, env_extra, seconds=SECONDS):
        self.out = os.path.join(tmp, f"step.{time.monotonic_ns()}")
        port = free_port()
        env = dict(os.environ, PYTHON_EXEC=sys.executable, OMP_NUM_THREADS="1", SECONDS_=str(seconds), **env_extra)
        self.seconds = seconds
        self.lines = []
        self.procs = []
        for node in (0, 1):
            p = subprocess.Popen([DDPLAUNCH, "--nnodes=2", f"--node_rank={node}", "--nproc_per_node=2",
                                  "--master_addr=127.0.0.1", f"--master_port={port}", f"--stragglers={mode}",
                                  os.path.join(tmp, "train.py"), self.out],
                                 env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            threading.Thread(target=self.read, args=(p,), daemon=True).start()
            self.procs.append(p)

    def read(self, p):
        for line in p.stderr:
            self.lines.append((time.time(), line))

    def wait(self):
        for p in self.procs:
            try:
                p.wait(timeout=self.seconds + 120)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        ok = all(p.returncode == 0 for p in self.procs)
        step = float(open(self.out).read()) if ok and os.path.exists(self.out) else None
        return ok, step


def cpu_share(pid, seconds=1.0):
    """The CPU `pid` used over `seconds` (all its threads), in cores."""
    def used():
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    before, t = used(), time.monotonic()
    time.sleep(seconds)  # a sampling window, nothing to wait on
    return (used() - before) / (time.monotonic() - t)


def throttle(pid_file, deadline):
    """Moves the pid written to `pid_file` into a new cgroup whose quota is 80% of the CPU it was
    using; a note when this machine does not let us. Runs on its own thread until the pid appears."""
    while time.time() < deadline and not os.path.exists(pid_file):
        time.sleep(0.05)  # the worker writes it when it slows down; nothing to wait on
    if not os.path.exists(pid_file):
        return "no pid"
    pid = open(pid_file).read().strip()
    quota = str(max(1000, int(0.8 * cpu_share(pid) * 100000)))
    for root, files in (("/sys/fs/cgroup/cpu", {"cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": quota}),
                        ("/sys/fs/cgroup", {"cpu.max": f"{quota} 100000"})):
        d = os.path.join(root, f"ddp_bench_straggler_{os.getpid()}")
        try:
            os.makedirs(d, exist_ok=True)
            for name, value in files.items():
                with open(os.path.join(d, name), "w") as f:
                    f.write(value)
            with open(os.path.join(d, "cgroup.procs"), "w") as f:
                f.write(pid)
            return d
        except OSError:
            continue
    return None


def detection(tmp, how):
    env = {"LATE_RANK": "3", "LATE_FROM": "8"}
    holder = {}
    if how == "cpu":
        env["THROTTLE"] = "1"
    job = Job(tmp, "warn", env, DETECT_SECONDS)
    if how == "cpu":
        t = threading.Thread(target=lambda: holder.update(cg=throttle(job.out + ".throttle_me", time.time() + 60)))
        t.start()
    ok, _ = job.wait()
    if how == "cpu":
        t.join()
        cg = holder.get("cg")
        if cg and cg.startswith("/"):
            try:
                os.rmdir(cg)
            except OSError:
                pass  # a process still in it (none should be): left for the next boot
        else:
            return None, "the CPU quota could not be set here (no writable cpu cgroup)"
    slowed = float(open(job.out + ".slowed").read()) if os.path.exists(job.out + ".slowed") else None
    for at, line in job.lines:
        m = FOUND.search(line)
        if m and slowed:
            return at - slowed, m.group(1)
    return None, "not named" + ("" if ok else " (the job failed)")


def main():
    with tempfile.TemporaryDirectory(prefix="ddp_straggler_bench_") as tmp:
        with open(os.path.join(tmp, "train.py"), "w") as f:
            f.write(TRAIN)
        steps = {"off": [], "warn": []}
        ratios = []
        false_flags = 0
        for _ in range(RUNS):
            jobs = {mode: Job(tmp, mode, {}) for mode in ("off", "warn")}
            results = {mode: job.wait() for mode, job in jobs.items()}
            if all(ok and step for ok, step in results.values()):
                for mode, (_, step) in results.items():
                    steps[mode].append(step)
                ratios.append(results["warn"][1] / results["off"][1])
            false_flags += sum(1 for _, line in jobs["warn"].lines if "straggler:" in line)
        walls, cpus, answered = read_cost(tmp)
        detect = {how: [detection(tmp, how) for _ in range(DETECT_RUNS)] for how in ("sleep", "cpu")}

    def span(xs):
        return f"{statistics.median(xs) * 1000:.1f} ms ({min(xs) * 1000:.1f}–{max(xs) * 1000:.1f})" if xs else "n/a"

    print("## Stragglers: detection cost and time to name a slow rank (2 nodes x 2 ranks on loopback, gloo)")
    print()
    print(f"Each run {SECONDS} s of steps of ~150 ms of matmul work, one all_reduce of 1M floats and a stop flag; "
          f"{RUNS} pairs of runs, off and on at the same time; rank 0's median step time per run.")
    print()
    print("| | step time, median of runs (min–max) |")
    print("|---|---|")
    print(f"| `--stragglers=off` | {span(steps['off'])} |")
    print(f"| detection on (default, window 30 s) | {span(steps['warn'])} |")
    if ratios:
        print(f"| ratio on/off, median of the pairs (min–max) | {statistics.median(ratios):.3f} "
              f"({min(ratios):.3f}–{max(ratios):.3f}) (target <= 1.01) |")
    print()
    cpu_ms = statistics.median(cpus) * 1000
    print(f"One read of a worker's Flight Recorder (a full ring, 2000 entries; {answered} answered the first time, "
          f"none after): {span(walls)} wall, {cpu_ms:.0f} ms of the worker's CPU (median of {len(cpus)}); at one "
          f"read per 10 s: **{cpu_ms / 10000 * 100:.2f}%** of the worker's time at most (target <= 1%). Runtime "
          f"workers pay four stores to shared memory per collective and no read.")
    print()
    print(f"False flags in the {len(steps['warn'])} healthy runs with detection on: {false_flags} (target 0).")
    print()
    print("Detection of rank 3 slowed by 20% of a step from 8 s into the run (default window 30 s; target <= 60 s):")
    print()
    print("| slowdown | seconds to the console line (per run) | named |")
    print("|---|---|---|")
    labels = {"sleep": "sleeps 20% of a step more per step", "cpu": "CPU quota cut to 80% of its use (its cgroup)"}
    for how, results in detect.items():
        times = [f"{t:.0f}" for t, _ in results if t is not None]
        named = sorted({w for t, w in results if t is not None}) or sorted({w for _, w in results})
        print(f"| {labels[how]} | {', '.join(times) or 'none'} | {'; '.join(named)} |")


if __name__ == "__main__":
    main()
