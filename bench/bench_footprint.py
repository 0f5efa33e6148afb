"""Launcher footprint: peak RSS and CPU time of the launcher process itself (not its workers) while
it supervises 8 sleeping workers, ddplaunch against the venv's torchrun and, where installed,
NVIDIA's ft_launcher (bench/peers.py). A launcher may run helpers besides its workers (ddplaunch's
reaper, ft_launcher's rank monitor servers, one per worker): the last column is the peak of the
summed PSS (proportional set size: a page shared by k processes counts 1/k in each, so forked
helpers are not counted twice) of every process under the launcher but the workers (/bin/sleep).

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

from bench_standby import tree
from peers import FT_GPU_NOTE, FT_LAUNCHER, bar_plot, ft_available, ft_missing_note, ft_version

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
    out = {
        "ddplaunch": [os.path.join(BIN, "ddplaunch"), "--standalone", "--nproc_per_node", str(WORKERS),
                      "--no_python"] + sleep,
        "torchrun": [PY, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(WORKERS),
                     "--no-python"] + sleep,
    }
    if ft_available():
        out["ft_launcher"] = [FT_LAUNCHER, "--standalone", "--nproc_per_node", str(WORKERS), "--no-python"] + sleep
    return out


def proc_kib(pid, file, field):
    """The KiB value of `field` ("Pss:", "VmHWM:") in /proc/PID/`file`, None once the process is gone."""
    try:
        with open(f"/proc/{pid}/{file}") as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1])
    except OSError:
        pass  # exited while we looked
    return None


def pss_kib(pid):
    return proc_kib(pid, "smaps_rollup", "Pss:") or 0


def helpers(root):
    """The processes under `root` that are not its workers (/bin/sleep), root included."""
    found = []
    for pid in tree(root):
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() != "sleep":
                    found.append(pid)
        except OSError:
            pass  # exited while we looked
    return found


def peak_rss_kib(pid):
    return proc_kib(pid, "status", "VmHWM:")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # Fields 14 and 15 of stat (utime, stime) are at 11 and 12 after the ")".
    return (int(fields[11]) + int(fields[12])) / TICK


def measure_all():
    """Starts every launcher at once; returns {name: (peak RSS KiB, CPU s, wall s, peak summed PSS KiB of
    the launcher's processes but the workers, how many such processes were seen)}."""
    procs = {name: subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
             for name, cmd in commands().items()}
    t0 = time.perf_counter()
    peak = {name: 0 for name in procs}
    pss_peak = {name: 0 for name in procs}
    seen = {name: set() for name in procs}
    cpu, wall = {}, {}
    while len(cpu) < len(procs):
        for name, p in procs.items():
            if name in cpu:
                continue
            rss = peak_rss_kib(p.pid)
            if rss:
                peak[name] = max(peak[name], rss)
            mine = helpers(p.pid)
            seen[name].update(mine)
            pss_peak[name] = max(pss_peak[name], sum(pss_kib(pid) for pid in mine))
            # Exited (a zombie until reaped): read its own CPU times, then reap it.
            info = os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            if info is not None:
                wall[name] = time.perf_counter() - t0
                cpu[name] = cpu_seconds(p.pid)
                p.wait()
        time.sleep(0.02)
    return {name: (peak[name], cpu[name], wall[name], pss_peak[name], len(seen[name])) for name in procs}


def main():
    runs = [measure_all() for _ in range(REPS)]
    names = list(commands())

    def col(name, i):
        return [r[name][i] for r in runs]

    out = [f"## 7. Launcher footprint ({WORKERS} workers of /bin/sleep {SECONDS}, the launcher process only)", "",
           "| | peak RSS | CPU time | share of one core | all launcher processes: peak summed PSS (processes seen) |",
           "|---|---|---|---|---|"]
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
                   f"{pct(statistics.median(share))} ({pct(min(share))}–{pct(max(share))}) | "
                   f"{statistics.median(col(name, 3)) / 1024:.1f} MiB ({max(col(name, 4))}) |")
    o_rss, o_cpu, o_all = (statistics.median(col("ddplaunch", i)) for i in (0, 1, 3))
    for name in names[1:]:
        p_rss, p_cpu, p_all = (statistics.median(col(name, i)) for i in (0, 1, 3))
        cpu_ratio = f"{p_cpu / o_cpu:.0f}×" if o_cpu > 0 else f"> {p_cpu * TICK:.0f}×"
        out.append(f"| {name} / ddplaunch | {p_rss / o_rss:.0f}× | {cpu_ratio} | | {p_all / o_all:.0f}× |")
    out += ["", f"CPU times come in clock ticks of {1000 // TICK} ms; the launch itself is included. "
            "Target: ≤ 10 MiB and ≤ 1% of a core. All launcher processes: the largest sum, over the polls (every "
            "20 ms or slower: each poll walks /proc), of the PSS of every process under the launcher but the "
            "workers; processes seen counts every such pid, short-lived ones (a worker before its exec) included."]
    png = bar_plot("footprint_peers.png", f"Launcher memory, {WORKERS} sleeping workers (median, MiB)",
                   ["launcher process: peak RSS", "all its processes but the workers: peak PSS"],
                   {n: [statistics.median(col(n, 0)) / 1024, statistics.median(col(n, 3)) / 1024] for n in names},
                   "MiB (log scale)", log=True)
    if png:
        out += ["", f"![launcher memory, ddplaunch / torchrun / ft_launcher]({png})"]
    if ft_available():
        out += ["", f"ft_launcher: nvidia-resiliency-ext {ft_version()}, --standalone, its defaults; it starts one rank "
                "monitor server process per worker. " + FT_GPU_NOTE]
    else:
        out += ["", ft_missing_note()]
    print("\n".join(out))


if __name__ == "__main__":
    main()
