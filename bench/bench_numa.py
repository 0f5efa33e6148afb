"""NUMA binding (--numa_binding): the CPUs each worker gets, per mode, on two synthetic machines
(hwloc XML topologies, DDPLAUNCH_HWLOC_XML) with their GPUs and with the GPUs hidden
(CUDA_VISIBLE_DEVICES=, ddplaunch's round-robin; torchrun refuses there), read from --dry-run;
then this machine, where each worker reports its own Cpus_allowed_list; then what the flag costs
a launch (off: nothing is loaded; on: hwloc is dlopen'ed and the topology read once).
Writes a Markdown section to stdout.   python bench_numa.py BUILD_BIN_DIR [--quick]
"""
import os
import pathlib
import statistics
import subprocess
import sys
import time

BIN = sys.argv[1]
QUICK = "--quick" in sys.argv
DDPLAUNCH = os.path.join(BIN, "ddplaunch")
FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "tests" / "launcher" / "topology" / "fixtures"
MODES = ["node", "socket", "exclusive", "core-complex"]
MACHINES = [
    ("two_socket.xml", "2 sockets × 2 NUMA nodes × 2 L3 × 2 cores × 2 threads (CPUs 0-31), GPUs on nodes 0, 0, 2, 3", 4),
    ("one_node_per_socket.xml", "2 sockets × 1 NUMA node × 4 cores (CPUs 0-7), both GPUs on node 1", 2),
]
REPS = 20 if QUICK else 60
ENV = {k: v for k, v in os.environ.items() if k not in ("CUDA_VISIBLE_DEVICES", "PET_NUMA_BINDING")}


def dry_run(xml, mode, nproc, hide_gpus):
    env = dict(ENV, DDPLAUNCH_HWLOC_XML=str(FIXTURES / xml))
    if hide_gpus:
        env["CUDA_VISIBLE_DEVICES"] = ""
    p = subprocess.run([DDPLAUNCH, "--dry-run", f"--numa_binding={mode}", f"--nproc_per_node={nproc}", "--no_python",
                        "/bin/true"], capture_output=True, text=True, env=env, timeout=60)
    if p.returncode != 0:
        return [f"exit {p.returncode}: {p.stderr.strip()}"]
    return [line.split("): ", 1)[1].split(", ")[0]
            for line in p.stdout.splitlines() if "(--numa_binding=" in line]


def real_workers(mode, nproc):
    worker = 'echo "$LOCAL_RANK $(grep Cpus_allowed_list /proc/self/status | cut -f2)"'
    p = subprocess.run([DDPLAUNCH, f"--numa_binding={mode}", f"--nproc_per_node={nproc}", "--no_python",
                        "sh", "-c", worker], capture_output=True, text=True, env=ENV, timeout=60)
    got = {}
    for line in p.stdout.splitlines():
        rank, cpus = line.rpartition("]:")[2].split()
        got[int(rank)] = cpus
    return [got.get(r, "?") for r in range(nproc)]


def launch_ms(extra):
    cmd = [DDPLAUNCH, *extra, "--nproc_per_node=1", "--no_python", "/bin/true"]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return (time.perf_counter() - t0) * 1e3


def main():
    print("## NUMA binding (--numa_binding: each worker's CPUs)")
    print()
    for xml, what, nproc in MACHINES:
        print(f"**{xml}**: {what}.")
        print()
        print("| mode | GPUs | " + " | ".join(f"local rank {r}" for r in range(nproc)) + " |")
        print("|---|---|" + "---|" * nproc)
        for hide in (False, True):
            for mode in MODES:
                cells = dry_run(xml, mode, nproc, hide)
                cells += [""] * (nproc - len(cells))
                print(f"| {mode} | {'hidden' if hide else 'all'} | " + " | ".join(cells) + " |")
        print()
    mine = subprocess.run(["sh", "-c", "grep Cpus_allowed_list /proc/self/status | cut -f2"], capture_output=True,
                          text=True).stdout.strip()
    print(f"**This machine** ({os.cpu_count()} CPUs, launcher allowed {mine}; no GPU), 2 workers reading their own "
          "Cpus_allowed_list:")
    print()
    print("| mode | local rank 0 | local rank 1 |")
    print("|---|---|---|")
    for mode in MODES:
        print(f"| {mode} | " + " | ".join(real_workers(mode, 2)) + " |")
    print()
    off, on = [], []
    for _ in range(REPS):  # interleaved, so load on the machine hits both alike
        off.append(launch_ms([]))
        on.append(launch_ms(["--numa_binding=node"]))
    m_off, m_on = statistics.median(off), statistics.median(on)
    print(f"Launch of 1 worker of /bin/true, median of {REPS}: flag off {m_off:.2f} ms, --numa_binding=node "
          f"{m_on:.2f} ms (+{m_on - m_off:.2f} ms: dlopen of libhwloc and reading this machine's topology, once "
          "per launcher).")


main()
