"""The store's worst cases at up to the machine's descriptor limit: every rank at once on one key,
against ddplaunch-store and PyTorch's TCPStore server (libuv) in the same run.

The simulated ranks are bench/rendezvous_scale.cpp's (--pattern, see its header); the servers,
client processes, source addresses and connect window are bench_rendezvous.py's. Each rank
connects, handshakes, SETs its 170-byte address and ADDs 1 to an "arrived" key; once every rank's
ADD is answered, one controller connection starts the storm:
   wait      every rank WAITs on one key; the controller SETs it       (time to the last release)
   get       every rank does c10d's get of that key (WAIT + GET, 170 bytes), set last: a barrier storm
   add       every rank, released by that key, ADDs 1 to one counter  (includes the release: see wait)
   multiget  the controller MULTI_GETs every rank's address (N keys of 170 bytes), as an agent that
             gathers all ranks' addresses would; not every rank, which would move N²·178 bytes
             (70 GB at 19.8K)
Per run: the storm's time (controller's SET/MULTI_GET sent → last reply read, CLOCK_MONOTONIC across
the client processes), the server's CPU (user + system) during the storm and during the connect
phase, and its resident memory with every connection open and every address stored (VmRSS after
the connect phase − before it, on a server fresh at that size: a server's allocator reuses what
earlier runs freed). Per connection = the figure / N. Whether a cost grows linearly from the
smallest to the largest N: a least-squares fit of the per-run values against N (slope, R²) and the
log-log slope k (cost ∝ N^k; k = 1 is linear).
Writes a Markdown section to stdout and a plot to bench/store_storms.png.
    python bench_storm.py BUILD_BIN_DIR [--quick]
"""
import os
import statistics
import sys

from bench_rendezvous import SERVER_RESERVED, results_of, settle, start_clients, tell
from bench_servers import Ours, Torch, cpu_seconds, dns_note, fd_limit
from linear_fit import fit, linear_word

QUICK = "--quick" in sys.argv
HERE = os.path.dirname(os.path.abspath(__file__))
PATTERNS = ("wait", "get", "add", "multiget")
# The largest N: the server's descriptor limit less its own descriptors and the controller's connection.
MAX_N = fd_limit() - SERVER_RESERVED - 1
SIZES = (1000, 5000, MAX_N) if QUICK else (1000, 2000, 5000, 10000, 15000, MAX_N)
REPS = 1 if QUICK else 3
SERVERS = (("ours", "ddplaunch-store"), ("torch", "PyTorch TCPStore (libuv)"))


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def storm(server, n, pattern):
    """One storm of n ranks; returns dict(seconds, cpu_storm, cpu_connect, rss) (seconds, bytes)."""
    procs = start_clients(server, n, timeout=180, pattern=pattern)
    try:
        rss0, cpu0 = rss_bytes(server.pid), cpu_seconds(server.pid)
        tell(procs)
        for p in procs:
            if p.stdout.readline().strip() != "connected":
                raise RuntimeError(f"{pattern} storm of {n} ranks against {server.name}: a client did not connect")
        rss1, cpu1 = rss_bytes(server.pid), cpu_seconds(server.pid)
        tell(procs[:1], "storm")
        results = results_of(procs, f"{pattern} storm of {n} ranks against {server.name}")
        cpu2 = cpu_seconds(server.pid)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    start = max(r["storm_start_ns"] for r in results)
    end = max(r["storm_done_ns"] if pattern == "multiget" else r["last_release_ns"] for r in results)
    settle(server)
    return {"seconds": (end - start) / 1e9, "cpu_storm": cpu2 - cpu1, "cpu_connect": cpu1 - cpu0,
            "rss": rss1 - rss0}


def plot(data):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, axes = plt.subplots(1, len(PATTERNS), figsize=(13, 3.6))
    for ax, pattern in zip(axes, PATTERNS):
        for key, label in SERVERS:
            xs = sorted({n for (p, k, n) in data if p == pattern and k == key})
            ys = [statistics.median(r["seconds"] * 1e6 / n for r in data[(pattern, key, n)]) for n in xs]
            ax.plot(xs, ys, "o-", label=label)
        ax.set_xlabel("connections")
        ax.set_ylabel("storm time per connection (µs)")
        ax.set_title(pattern)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    path = os.path.join(HERE, "store_storms.png")
    fig.savefig(path, dpi=100)
    return os.path.basename(path)


def main():
    data = {}
    for n in SIZES:
        # Fresh servers at every size, so the first run's memory is the connections' and keys' own.
        with Ours(sys.argv[1]) as ours, Torch() as torch:
            for rep in range(REPS):
                for i, pattern in enumerate(PATTERNS):
                    order = [("ours", ours), ("torch", torch)]
                    if (rep + i) % 2:
                        order.reverse()
                    for key, server in order:
                        r = storm(server, n, pattern)
                        r["fresh"] = rep == 0 and i == 0
                        data.setdefault((pattern, key, n), []).append(r)
    png = plot(data)
    med = lambda rs, f: statistics.median(f(r) for r in rs)
    out = [f"## 4c. Store storms: every rank at once on one key (1K → {MAX_N} connections, both servers in the same run)",
           "", "| storm | connections | ddplaunch-store: time [per conn] | PyTorch: time [per conn] | PyTorch / ours time | "
           "server CPU per conn, storm: ours / PyTorch | server CPU per conn, connect: ours / PyTorch |",
           "|---|---|---|---|---|---|---|"]
    for pattern in PATTERNS:
        for n in SIZES:
            o, t = data[(pattern, "ours", n)], data[(pattern, "torch", n)]
            cell = lambda rs: (f"{med(rs, lambda r: r['seconds']) * 1000:.1f} ms "
                               f"[{med(rs, lambda r: r['seconds']) * 1e6 / n:.2f} µs]")
            cpu = lambda rs, f: f"{med(rs, lambda r: r[f]) * 1e6 / n:.2f}"
            out.append(f"| {pattern} | {n} | {cell(o)} | {cell(t)} | "
                       f"{med(t, lambda r: r['seconds']) / max(1e-9, med(o, lambda r: r['seconds'])):.2f}× | "
                       f"{cpu(o, 'cpu_storm')} / {cpu(t, 'cpu_storm')} µs | "
                       f"{cpu(o, 'cpu_connect')} / {cpu(t, 'cpu_connect')} µs |")
    out += ["", "### Memory per connection (connections open, addresses stored; fresh server at each size)", "",
            "| connections | ddplaunch-store | PyTorch |", "|---|---|---|"]
    for n in SIZES:
        first = lambda key: [r for r in data[(PATTERNS[0], key, n)] if r["fresh"]][0]["rss"]
        out.append(f"| {n} | {first('ours') / n:.0f} B ({first('ours') / 2**20:.1f} MiB) | "
                   f"{first('torch') / n:.0f} B ({first('torch') / 2**20:.1f} MiB) |")
    out += ["", f"### Does each cost grow linearly from {SIZES[0]} to {MAX_N}? (least squares on every run)", "",
            "| storm | measure | ddplaunch-store: slope per conn, R², k | PyTorch: slope per conn, R², k |", "|---|---|---|---|"]
    measures = (("time", "seconds", 1e6, "µs"), ("server CPU, storm", "cpu_storm", 1e6, "µs"),
                ("server CPU, connect", "cpu_connect", 1e6, "µs"))
    for pattern in PATTERNS:
        for label, field, scale, unit in measures:
            cells = []
            for key, _ in SERVERS:
                pts = [(n, r[field]) for n in SIZES for r in data[(pattern, key, n)]]
                b, r2, k = fit(pts)
                cells.append(f"{b * scale:.2f} {unit}, R² {r2:.2f}, k {k:.2f}: {linear_word(r2, k)}")
            out.append(f"| {pattern} | {label} | {cells[0]} | {cells[1]} |")
    cells = []
    for key, _ in SERVERS:
        b, r2, k = fit([(n, [r for r in data[(PATTERNS[0], key, n)] if r["fresh"]][0]["rss"]) for n in SIZES])
        cells.append(f"{b:.0f} B, R² {r2:.2f}, k {k:.2f}: {linear_word(r2, k)}")
    out.append(f"| (connect phase) | resident memory | {cells[0]} | {cells[1]} |")
    out += ["", f"{REPS} run(s) per size, storm and server, the two servers back to back in alternating order; "
            "medians. Time = the controller's SET (or MULTI_GET) sent → the last rank's reply read (or the "
            "MULTI_GET's reply read), from the client processes' CLOCK_MONOTONIC. Server CPU = user + system time "
            "of the server process over the storm, and over the connect phase (connect, VALIDATE + PING, SET "
            "address, ADD arrived; `connect` is the same work in every storm). Slope = the fitted cost of one more "
            "connection; k = the log-log slope (1: linear, 2: quadratic); \"linear\" when R² ≥ 0.9 and "
            "0.8 ≤ k ≤ 1.2. A fixed cost (the MULTI_GET's one request, a SET's wake-up) makes k < 1 at small N. "
            f"Clients: bench_rendezvous.py's (one Asio thread per {fd_limit() - 64} connections, "
            "512 handshakes in flight, 2048 connections per source address); they share the 2 cores with the "
            f"server. The largest N is the server's descriptor limit ({fd_limit()}) less {SERVER_RESERVED} "
            "for the server's own files and 1 for the controller.", dns_note()]
    if png:
        out += ["", f"![store storm time per connection]({png})"]
    print("\n".join(out))


if __name__ == "__main__":
    main()
