"""CPU allreduce: our CpuCommunicator (allreduce_bench; shared memory between same-host ranks, and
with it turned off, the pipelined TCP ring) against PyTorch's Gloo (gloo_allreduce.py), measured
side by side.

2 and 4 ranks as separate processes on this machine, float32 sums of 4 KiB to 64 MiB. Both sides
run the same loop: a correctness check, a warm-up, then REPS timed loops (between barriers,
slowest rank's time). Reported: latency per allreduce and bus bandwidth 2(n-1)/n * bytes / time,
medians with min-max over the loops. The loopback stream is one plain TCP connection over
127.0.0.1 (allreduce_bench stream), which the issue measures the 64 MiB case against: once from a
1 MiB buffer that stays in cache, once between two 64 MiB buffers as the allreduce's tensor.
Writes a Markdown section to stdout and bench/allreduce.png.
   python bench_allreduce.py BUILD_BIN_DIR [--quick]
"""
import os
import socket
import statistics
import subprocess
import sys

BIN = sys.argv[1]
QUICK = "--quick" in sys.argv
REPS = 2 if QUICK else 5
PY = sys.executable
HERE = os.path.dirname(os.path.abspath(__file__))
OURS = os.path.join(BIN, "allreduce_bench")
PEER = os.path.join(HERE, "gloo_allreduce.py")
SIZES = [4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20]
WORLDS = (2, 4)
# Bytes moved per timed loop, which sets the iteration count per size (within 3..MAX_ITERS).
BUDGET = (24 << 20) if QUICK else (256 << 20)
MAX_ITERS = 50 if QUICK else 1000
STREAM_BYTES = (256 << 20) if QUICK else (1 << 30)


def iters_for(size):
    return max(3, min(MAX_ITERS, BUDGET // size))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(cmd, world, extra_env=None):
    """Runs `world` ranks of `cmd`; returns {size: ([seconds per allreduce], [CPU seconds per
    allreduce, all ranks]), one entry per loop}."""
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE=str(world),
               OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo", **(extra_env or {}))
    procs = [subprocess.Popen(cmd, env=dict(env, RANK=str(r), LOCAL_RANK=str(r)), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for r in range(world)]
    outs = [p.communicate(timeout=900) for p in procs]
    for p, (_, err) in zip(procs, outs):
        if p.returncode != 0:
            sys.exit(f"{' '.join(cmd[:2])} failed (exit {p.returncode}): {err[-2000:]}")
    result = {}
    for line in outs[0][0].splitlines():
        f = [float(x) for x in line.split()[2:]]
        result[int(line.split()[0])] = (f[:REPS], f[REPS:])
    return result


def stats(samples):
    return statistics.median(samples), min(samples), max(samples)


def busbw(world, size, seconds):
    return 2 * (world - 1) / world * size / seconds


def human(size):
    return f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"


def fmt_lat(s):
    med, lo, hi = (x * 1e6 for x in s)
    return f"{med:.0f} µs ({lo:.0f}–{hi:.0f})" if med < 10000 else f"{med / 1000:.1f} ms ({lo / 1000:.1f}–{hi / 1000:.1f})"


def fmt_bw(world, size, s):
    med, lo, hi = s
    # Bandwidth is inverse to time: the slowest loop gives the lowest bandwidth.
    return f"{busbw(world, size, med) / 1e9:.2f} ({busbw(world, size, hi) / 1e9:.2f}–{busbw(world, size, lo) / 1e9:.2f})"


def plot(results, stream_bw):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "(matplotlib missing: no plot)"
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for world, style in zip(WORLDS, ("-", "--")):
        ours, tcp, peer = results[world]
        ax.plot([s for s in SIZES], [busbw(world, s, stats(ours[s][0])[0]) / 1e9 for s in SIZES], "o" + style,
                color="tab:blue", label=f"ddplaunch CpuCommunicator, {world} ranks")
        ax.plot([s for s in SIZES], [busbw(world, s, stats(tcp[s][0])[0]) / 1e9 for s in SIZES], "^" + style,
                color="tab:green", label=f"ddplaunch, TCP ring only, {world} ranks")
        ax.plot([s for s in SIZES], [busbw(world, s, stats(peer[s][0])[0]) / 1e9 for s in SIZES], "s" + style,
                color="tab:orange", label=f"PyTorch Gloo, {world} ranks")
    ax.axhline(stream_bw / 1e9, color="gray", linestyle=":", label=f"one loopback TCP stream ({human(SIZES[-1])} buffers)")
    ax.set_xscale("log", base=2)
    ax.set_xticks(SIZES)
    ax.set_xticklabels([human(s) for s in SIZES], rotation=45)
    ax.set_xlabel("allreduce size (float32)")
    ax.set_ylabel("bus bandwidth (GB/s)")
    ax.set_title(f"CPU allreduce on {os.cpu_count()} cores, one host")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(HERE, "allreduce.png"), dpi=110)
    return "![allreduce bus bandwidth](allreduce.png)"


def fmt_cpu(seconds):
    return f"{seconds * 1e6:.0f} µs" if seconds < 0.01 else f"{seconds * 1000:.1f} ms"


def main():
    spec = [f"{s}:{iters_for(s)}" for s in SIZES]

    def stream(buffer):
        """[(bytes/s, CPU seconds per byte)] of REPS transfers from/to BUFFER-byte buffers."""
        out = subprocess.check_output([OURS, "stream", str(STREAM_BYTES), str(buffer), str(REPS)], text=True)
        return [tuple(float(x) for x in line.split()) for line in out.splitlines()]

    stream_hot, stream_big = stream(1 << 20), stream(SIZES[-1])
    results = {}
    for world in WORLDS:
        ours = run_ranks([OURS, "ring", str(REPS)] + spec, world)
        tcp = run_ranks([OURS, "ring", str(REPS)] + spec, world, {"BENCH_SHM": "0"})
        peer = run_ranks([PY, PEER, str(REPS)] + spec, world)
        results[world] = (ours, tcp, peer)
    cores = os.cpu_count()
    out = ["## 5. CPU allreduce (float32 sum, ranks as processes on this machine)", "",
           f"Latency per allreduce and bus bandwidth 2(n-1)/n·bytes/time in GB/s; {REPS} timed loops per size "
           f"(3–{MAX_ITERS} allreduces each), medians (min–max). Ours: the default CpuCommunicator, which "
           "allreduces through shared memory between ranks of one host; TCP ring: the same with shared memory "
           "off (BENCH_SHM=0). Ratio = Gloo time / our time. CPU = user + system time of all ranks' threads per "
           "allreduce (median loop).", ""]
    for world in WORLDS:
        ours, tcp, peer = results[world]
        out += [f"**{world} ranks**", "",
                "| size | ours latency | TCP ring latency | Gloo latency | ours GB/s | TCP ring GB/s | Gloo GB/s | "
                "ours / Gloo | CPU ours / TCP ring / Gloo |",
                "|---|---|---|---|---|---|---|---|---|"]
        for s in SIZES:
            o, t, p = stats(ours[s][0]), stats(tcp[s][0]), stats(peer[s][0])
            oc, tc, pc = (statistics.median(x[s][1]) for x in (ours, tcp, peer))
            out.append(f"| {human(s)} | {fmt_lat(o)} | {fmt_lat(t)} | {fmt_lat(p)} | {fmt_bw(world, s, o)} | "
                       f"{fmt_bw(world, s, t)} | {fmt_bw(world, s, p)} | {p[0] / o[0]:.2f}× | "
                       f"{fmt_cpu(oc)} / {fmt_cpu(tc)} / {fmt_cpu(pc)} |")
        out.append("")
    big = SIZES[-1]
    stream_bw = statistics.median(bw for bw, _ in stream_big)
    stream_cpu = statistics.median(c for _, c in stream_big)  # CPU seconds per byte moved
    hot_bw = statistics.median(bw for bw, _ in stream_hot)

    def gbs(samples):
        bws = [bw for bw, _ in samples]
        return f"{statistics.median(bws) / 1e9:.2f} GB/s ({min(bws) / 1e9:.2f}–{max(bws) / 1e9:.2f})"

    out += [f"**{human(big)} against the loopback stream**: one TCP connection over 127.0.0.1, 1 MiB calls, "
            f"{STREAM_BYTES >> 20} MiB per transfer: {gbs(stream_big)} between two {human(big)} buffers (as the "
            f"tensor), using {stream_cpu * big * 1000:.1f} ms of CPU per {human(big)} "
            f"({stream_cpu * stream_bw:.1f} cores busy); {gbs(stream_hot)} from a 1 MiB buffer that stays in cache.",
            "",
            f"| ranks | ours GB/s | ours / stream ({human(big)} buffers) | ours / stream (cached) | TCP ring / stream "
            f"({human(big)} buffers) | Gloo / stream ({human(big)} buffers) | CPU per allreduce: ours / TCP ring / Gloo "
            f"| TCP ring if CPU-bound on {cores} cores |", "|---|---|---|---|---|---|---|---|"]
    ceilings = {}
    for world in WORLDS:
        ours, tcp, peer = results[world]
        o, t, p = (busbw(world, big, stats(x[big][0])[0]) for x in (ours, tcp, peer))
        oc, tc, pc = (statistics.median(x[big][1]) for x in (ours, tcp, peer))
        bound = busbw(world, big, tc / cores)
        ceilings[world] = bound / stream_bw
        out.append(f"| {world} | {o / 1e9:.2f} | {o / stream_bw:.0%} | {o / hot_bw:.0%} | {t / stream_bw:.0%} | "
                   f"{p / stream_bw:.0%} | {fmt_cpu(oc)} / {fmt_cpu(tc)} / {fmt_cpu(pc)} | "
                   f"{bound / 1e9:.2f} GB/s ({bound / stream_bw:.0%}) |")
    out += ["", "Reading it: a TCP ring allreduce sends 2(n-1)/n of the tensor from every rank, 2(n-1)× the tensor "
            "through loopback TCP in all, while the stream moves it once, and all ranks share the machine's "
            f"{cores} cores; the last column is the bus bandwidth the ring would reach if every core did nothing "
            "but its measured CPU work (" + ", ".join(f"{c:.0%} of the stream at n = {w}" for w, c in ceilings.items())
            + "). Through shared memory each rank copies its tensor in once, reduces 1/n of it and copies the "
            "result out: memory bandwidth instead of the TCP stack, with the ring's TCP links carrying only a "
            "few bytes per 1 MiB chunk for synchronisation.", "",
            plot(results, stream_bw)]
    print("\n".join(out))


if __name__ == "__main__":
    main()
