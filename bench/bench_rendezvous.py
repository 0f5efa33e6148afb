"""Rendezvous at scale: N simulated workers (bench/rendezvous_scale.cpp, Asio, one thread per client
process) each doing on the store what torch 2.15's init_process_group does under torchrun with
TORCH_DIST_INIT_BARRIER=1 (VALIDATE, PING, ADD init/, SET its address, store-based barrier: ADD,
ADD 0, the last one SETs last_worker, all WAIT for it), timed from the first connect to the last
release, against ddplaunch-store and PyTorch's TCPStore server; then pushes ours towards 96K ranks.
Writes a Markdown section to stdout and plots to bench/rendezvous_scaling.png.
    python bench_rendezvous.py BUILD_BIN_DIR [--quick]
"""
import json
import math
import os
import statistics
import subprocess
import sys
import time

from bench_servers import Ours, Torch, cpu_seconds, cpu_split, dns_note, fd_limit

BIN = sys.argv[1]
QUICK = "--quick" in sys.argv
HERE = os.path.dirname(os.path.abspath(__file__))
SIZES = (1024, 4096) if QUICK else (1024, 4096, 16384)
REPS = 2 if QUICK else 5
PUSH_GOAL = 96 * 1024
PUSH_SECONDS = 10.0
PER_SOURCE = 2048  # connections per source address (see --sources in rendezvous_scale.cpp)
WINDOW = 512
# Descriptors a server keeps for itself (stdio, epoll, listening socket; Python's imports for
# PyTorch's): the rest of its limit is what it can give to connections.
SERVER_RESERVED = 128

_run_counter = [0]

# Profiling of our server and what was changed, measured once by hand (not by run.sh) with these
# tools, the server of commit e7ee8f1 ("before") and the working tree ("after") running side by
# side on this machine, runs interleaved. Syscall counts from `strace -f -c -p SERVER`; CPU from
# /proc/PID/stat. Kept as constants so the comparison stays readable after the change.
PROFILE_BEFORE_AFTER = [
    ("system calls per rank, 2000-rank rendezvous", "25.4", "19.3",
     "recv 11.3 → 7.2, no getpeername (accept reports the peer), no shutdown after the peer's EOF; "
     "PyTorch's server: 26.5 (5 writes, 8 reads, accept4, getpeername, setsockopt, epoll_ctl, and "
     "openat/fstat×3/lseek/close of /etc/hosts for its reverse lookup)"),
    ("server CPU per 16K-rank rendezvous (3 runs)", "860 / 990 / 920 ms", "790 / 800 / 840 ms",
     "−10%: the calls removed were the cheap ones; the kernel's TCP work per rank stays"),
    ("server CPU per op, mix at 16 conns (3 runs)", "2.45 / 2.59 / 2.64 µs", "2.35 / 2.34 / 2.34 µs",
     "−8%: a reply goes straight to the socket instead of through a posted completion"),
    ("system calls per op, 16 conns × 16 pipelined ADDs", "1.20", "0.17",
     "one write per read's worth of replies instead of one per reply"),
    ("16 conns × 16 pipelined ADDs: server CPU per op / ops/s / p50 per batch (3 runs)",
     "1.49–1.57 µs / 252K–324K / 596–637 µs", "0.27–0.40 µs / 531K–1.33M / 111–130 µs", ""),
    ("out of descriptors (server at RLIMIT_NOFILE=40, 60 clients, 2.5 s)", "633,016 log lines, loop spinning",
     "2 log lines, idle", "accept pauses 50 ms at a time instead of retrying at once"),
]


def start_clients(server, n, timeout=120, pattern="init"):
    """rendezvous_scale processes simulating n ranks against `server`, started and "ready" (not
    released yet: write a line to each one's stdin)."""
    _run_counter[0] += 1
    run = _run_counter[0]
    per_proc = fd_limit() - 64
    procs = []
    group = f"bench{run}"
    for p in range(math.ceil(n / per_proc)):
        first = p * per_proc
        count = min(per_proc, n - first)
        # Fresh source addresses for every run: no clash with the previous run's TIME_WAIT sockets.
        sources = ",".join(f"127.{1 + run // 250 % 250}.{1 + run % 250}.{1 + p * 100 + k}"
                           for k in range(max(1, math.ceil(count / PER_SOURCE))))
        procs.append(subprocess.Popen(
            [os.path.join(BIN, "rendezvous_scale"), "127.0.0.1", str(server.port), str(n), str(first), str(count),
             "--group", group, "--sources", sources, "--window", str(WINDOW), "--timeout", str(timeout),
             "--pattern", pattern],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
    for p in procs:
        if p.stdout.readline().strip() != "ready":
            raise RuntimeError("rendezvous_scale did not start")
    return procs


def tell(procs, line="go"):
    for p in procs:
        p.stdin.write(line + "\n")
        p.stdin.flush()


def results_of(procs, what):
    """Each process's final JSON line; raises RuntimeError naming `what` if one failed."""
    results = []
    for p in procs:
        line = p.stdout.readline()
        rc = p.wait()
        if rc != 0 or not line:
            raise RuntimeError(f"{what} failed (exit {rc})")
        results.append(json.loads(line))
    return results


def rendezvous(server, n, timeout=120):
    """One rendezvous of n ranks; returns (seconds, server CPU seconds (user, sys))."""
    procs = start_clients(server, n, timeout)
    cpu0 = cpu_split(server.pid)
    tell(procs)
    results = results_of(procs, f"rendezvous of {n} ranks against {server.name}")
    cpu1 = cpu_split(server.pid)
    settle(server)
    seconds = (max(r["last_release_ns"] for r in results) - min(r["first_connect_ns"] for r in results)) / 1e9
    return seconds, (cpu1[0] - cpu0[0], cpu1[1] - cpu0[1])


def settle(server, limit=5.0):
    """Waits until the server has finished with the closed connections of the last run.
    There is no event for "idle" in another process, so this polls its CPU time."""
    deadline = time.monotonic() + limit
    last = cpu_seconds(server.pid)
    while time.monotonic() < deadline:
        time.sleep(0.1)
        now = cpu_seconds(server.pid)
        if now == last:
            return
        last = now


def med(xs):
    return statistics.median(xs), min(xs), max(xs)


def fmt_s(xs):
    m, lo, hi = med(xs)
    return f"{m * 1000:.0f} ms ({lo * 1000:.0f}–{hi * 1000:.0f})"


def plot(rows, push):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(6, 4))
    ns = [n for n, _, _ in rows]
    for key, label in (("ours", "ddplaunch-store"), ("torch", "PyTorch TCPStore (libuv)")):
        meds = [statistics.median(r[key]) for _, r, _ in rows]
        lo = [m - min(r[key]) for m, (_, r, _) in zip(meds, rows)]
        hi = [max(r[key]) - m for m, (_, r, _) in zip(meds, rows)]
        ax.errorbar(ns, meds, yerr=[lo, hi], marker="o", capsize=3, label=label)
    if push:
        ax.plot([n for n, _ in push], [statistics.median(t) for _, t in push], "s--", label="ddplaunch-store, push")
    ax.plot([PUSH_GOAL], [PUSH_SECONDS], "k*", markersize=10, label="goal: 96K ranks in 10 s")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("simulated ranks")
    ax.set_ylabel("first connect → last release (s)")
    ax.set_title("Rendezvous at scale (init_process_group store traffic)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    path = os.path.join(HERE, "rendezvous_scaling.png")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return os.path.basename(path)


def main():
    rows = []
    push = []
    push_failures = []
    with Ours(BIN) as ours, Torch() as torch:
        for n in SIZES:
            r = {"ours": [], "torch": [], "ours_cpu": [], "torch_cpu": [], "ratio": []}
            for rep in range(REPS):
                order = [("ours", ours), ("torch", torch)]
                if rep % 2:
                    order.reverse()
                times = {}
                for key, server in order:
                    seconds, cpu = rendezvous(server, n)
                    times[key] = seconds
                    r[key].append(seconds)
                    r[key + "_cpu"].append(cpu)
                r["ratio"].append(times["ours"] / times["torch"])
            rows.append((n, r, None))
        # The push: ours alone, up to what the server's descriptor limit allows.
        max_n = fd_limit() - SERVER_RESERVED
        for n in sorted({32768, 65536, PUSH_GOAL, max_n}):
            if n > max_n:
                continue
            try:
                push.append((n, [rendezvous(ours, n)[0] for _ in range(1 if QUICK else 3)]))
            except RuntimeError as e:
                push_failures.append(f"{n} ranks: {e}")
                break
    png = plot(rows, push)

    out = ["## 4. Rendezvous at scale (simulated init_process_group, first connect → last release)", "",
           "| ranks | ddplaunch-store | PyTorch | ours / PyTorch time | server CPU user+sys ms: ours | PyTorch |",
           "|---|---|---|---|---|---|"]
    for n, r, _ in rows:
        ratio = med(r["ratio"])
        cpu = lambda xs: "{:.0f}+{:.0f}".format(statistics.median(u for u, _ in xs) * 1000,
                                               statistics.median(s for _, s in xs) * 1000)
        out.append(f"| {n} | {fmt_s(r['ours'])} | {fmt_s(r['torch'])} | **{ratio[0]:.2f}×** ({ratio[1]:.2f}–{ratio[2]:.2f}) "
                   f"| {cpu(r['ours_cpu'])} | {cpu(r['torch_cpu'])} |")
    out += ["", f"{REPS} repetitions per size, the two servers back to back in alternating order; times median "
            "(min–max), ratio = median of the per-repetition ratios. Each rank: connect, VALIDATE + PING, "
            "ADD init/, SET /default_pg/<g>//cpu//0/<rank> (170 bytes), ADD and ADD 0 on the barrier key, the "
            "last one SETs …:last_worker, WAIT for it (torch 2.15's _store_based_barrier: its Python store has "
            "no BARRIER op). gloo's per-peer address gets (N² in total) are left out. One client process of "
            f"one Asio thread per {fd_limit() - 64} ranks, {WINDOW} handshakes in flight at most (the listen "
            f"backlog is net.core.somaxconn), {PER_SOURCE} connections per source address 127.x.y.z.", ""]
    out += ["### Push towards 96K ranks (ddplaunch-store)", "",
            "| ranks | time | ranks/s |", "|---|---|---|"]
    for n, ts in push:
        m = statistics.median(ts)
        out.append(f"| {n} | {fmt_s(ts)} | {n / m:.0f} |")
    out += [f"Failed: {f}" for f in push_failures]
    limit = fd_limit()
    biggest = push[-1][0] if push else 0
    out += ["", f"Descriptor limit (RLIMIT_NOFILE, hard = soft after setrlimit) on this machine: **{limit}** per "
            f"process; the container lacks CAP_SYS_RESOURCE, so it cannot be raised. Every rank holds one "
            f"connection open until the barrier releases, so one server process can hold at most ~{limit - SERVER_RESERVED} "
            f"ranks here: the push stops at {biggest} of the {PUSH_GOAL} goal. Client processes and source "
            "addresses are no limit (the tool spreads over both), the server's descriptors are."]
    if push:
        n, ts = push[-1]
        rate = n / statistics.median(ts)
        out.append(f"At the measured {rate:.0f} ranks/s, {PUSH_GOAL} ranks would take ~{PUSH_GOAL / rate:.1f} s "
                   f"(goal ≤ {PUSH_SECONDS:.0f} s) — an extrapolation, not a measurement.")
    out += ["", "### Profiling and changes to ddplaunch-store (before = commit e7ee8f1, measured by hand, not by this run)",
            "",
            "perf on the server during a 16K-rank rendezvous: 78% of its samples in the kernel (TCP send and receive "
            "on loopback, accept, epoll, close), 15% in the server's own code, 6% in libc; no user-space function "
            "above 2% (hash-map lookups of keys and connections, Asio's reactor). PyTorch's server does the same "
            "system calls per rank plus a reverse-DNS lookup, and spends the same CPU per rank (table above). "
            "So on this workload both servers "
            "sit near the cost of the kernel's TCP path, and halving the time is out of reach for any server here; "
            "what could be cut was cut:", "",
            "| measure | before | after | note |", "|---|---|---|---|"]
    out += [f"| {m} | {b} | {a} | {n} |" for m, b, a, n in PROFILE_BEFORE_AFTER]
    out += ["", dns_note()]
    if png:
        out += ["", f"![rendezvous time vs ranks]({png})"]
    print("\n".join(out))


if __name__ == "__main__":
    main()
