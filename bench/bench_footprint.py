"""Launcher footprint: peak RSS and CPU time of the launcher process itself (not its workers) while
it supervises 8 sleeping workers, ddplaunch against the venv's torchrun.

Each launcher runs `--standalone --nproc_per_node 8 --no-python /bin/sleep S` (S = 10, quick 3);
both run at the same time (their workers only sleep). Peak RSS is VmHWM from /proc/PID/status,
read until the launcher exits; CPU time is utime + stime from /proc/PID/stat (the process's own
threads, not the reaped workers' c-times), read once it has exited but before it is reaped.
Writes a Markdown section to stdout.   python bench_footprint.py BUILD_BIN_DIR [--quick]
"""
import os
import statistics
import subprocess
import sys
import time

BIN = sys.argv[1]
QUICK = "--quick" in sys.argv
SECONDS = 2 if QUICK else 10
REPS = 2 if QUICK else 3
WORKERS = 8
PY = sys.executable
TICK = os.sysconf("SC_CLK_TCK")
ENV = dict(os.environ, OMP_NUM_THREADS="1", LOGLEVEL="ERROR")


def commands():
    sleep = ["/bin/sleep", str(SECONDS)]
    return {
        "ddplaunch": [os.path.join(BIN, "ddplaunch"), "--standalone", "--nproc_per_node", str(WORKERS),
                      "--no_python"] + sleep,
        "torchrun": [PY, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(WORKERS),
                     "--no-python"] + sleep,
    }


def peak_rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        pass
    return None


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # Fields 14 and 15 of stat (utime, stime) are at 11 and 12 after the ")".
    return (int(fields[11]) + int(fields[12])) / TICK


def measure_all():
    """Starts every launcher at once; returns {name: (peak RSS KiB, CPU s, wall s)}."""
    procs = {name: subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
             for name, cmd in commands().items()}
    t0 = time.perf_counter()
    peak = {name: 0 for name in procs}
    cpu, wall = {}, {}
    while len(cpu) < len(procs):
        for name, p in procs.items():
            if name in cpu:
                continue
            rss = peak_rss_kib(p.pid)
            if rss:
                peak[name] = max(peak[name], rss)
            # Exited (a zombie until reaped): read its own CPU times, then reap it.
            info = os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            if info is not None:
                wall[name] = time.perf_counter() - t0
                cpu[name] = cpu_seconds(p.pid)
                p.wait()
        time.sleep(0.02)
    return {name: (peak[name], cpu[name], wall[name]) for name in procs}


def main():
    runs = [measure_all() for _ in range(REPS)]
    names = list(commands())

    def col(name, i):
        return [r[name][i] for r in runs]

    out = [f"## 7. Launcher footprint ({WORKERS} workers of /bin/sleep {SECONDS}, the launcher process only)", "",
           "| | peak RSS | CPU time | share of one core |", "|---|---|---|---|"]
    def ms(seconds):
        # Below one clock tick the kernel's counters show 0: say so rather than print "0 ms".
        return f"{seconds * 1000:.0f}" if seconds > 0 else f"<{1000 // TICK}"

    def pct(share):
        return f"{share:.2%}" if share > 0 else "<" + f"{1 / TICK / SECONDS:.1%}"

    for name in names:
        rss, cpu = col(name, 0), col(name, 1)
        share = [c / w for c, w in zip(cpu, col(name, 2))]
        out.append(f"| {name} | {statistics.median(rss) / 1024:.1f} MiB ({min(rss) / 1024:.1f}–{max(rss) / 1024:.1f}) | "
                   f"{ms(statistics.median(cpu))} ms ({ms(min(cpu))}–{ms(max(cpu))}) | "
                   f"{pct(statistics.median(share))} ({pct(min(share))}–{pct(max(share))}) |")
    o_rss, p_rss = statistics.median(col("ddplaunch", 0)), statistics.median(col("torchrun", 0))
    o_cpu, p_cpu = statistics.median(col("ddplaunch", 1)), statistics.median(col("torchrun", 1))
    cpu_ratio = f"{p_cpu / o_cpu:.0f}×" if o_cpu > 0 else f"> {p_cpu * TICK:.0f}×"
    out.append(f"| torchrun / ddplaunch | {p_rss / o_rss:.0f}× | {cpu_ratio} | |")
    out += ["", f"CPU times come in clock ticks of {1000 // TICK} ms; the launch itself is included. "
            "Target: ≤ 10 MiB and ≤ 1% of a core."]
    print("\n".join(out))


if __name__ == "__main__":
    main()
