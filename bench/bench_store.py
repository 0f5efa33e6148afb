"""Store benchmark: the same C++ load generator (bench/store_load.cpp, our TcpStoreClient, one
thread per connection) against ddplaunch-store and against PyTorch's own TCPStore server (libuv
backend, hosted by tests/interop/torch_master_store.py), at 1, 16 and 256 connections, for a
set/get/add/check mix and a wait/set ping-pong. Writes a Markdown section to stdout.
    python bench_store.py BUILD_BIN_DIR [--quick]
"""
import json
import os
import statistics
import subprocess
import sys

BIN = sys.argv[1]
QUICK = "--quick" in sys.argv
REPS = 1 if QUICK else 3
SECONDS = "1" if QUICK else "2"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Ours:
    name = "ddplaunch-store"

    def __enter__(self):
        self.p = subprocess.Popen([os.path.join(BIN, "ddplaunch-store"), "--host", "127.0.0.1", "--port", "0", "-q"],
                                  stdout=subprocess.PIPE, text=True)
        self.port = int(self.p.stdout.readline().rsplit(":", 1)[1])
        return self

    def __exit__(self, *exc):
        self.p.terminate()
        self.p.wait(timeout=10)


class Torch:
    name = "PyTorch TCPStore (libuv)"

    def __enter__(self):
        self.p = subprocess.Popen([sys.executable, os.path.join(REPO, "tests", "interop", "torch_master_store.py")],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = self.p.stdout.readline()
        self.port = int(line.strip().split("=")[1])
        return self

    def __exit__(self, *exc):
        self.p.stdin.close()
        self.p.wait(timeout=10)


def load(port, conns, mode):
    runs = []
    for _ in range(REPS):
        out = subprocess.check_output([os.path.join(BIN, "store_load"), "127.0.0.1", str(port), str(conns), SECONDS,
                                       mode], timeout=120)
        runs.append(json.loads(out))
    best = statistics.median_high([r["ops_per_s"] for r in runs])
    return next(r for r in runs if r["ops_per_s"] == best)


def main():
    rows = []
    for mode in ("mix", "pingpong"):
        for conns in (1, 16, 256):
            res = {}
            for server in (Ours, Torch):
                with server() as s:
                    res[server.name] = load(s.port, conns, mode)
            rows.append((mode, conns, res[Ours.name], res[Torch.name]))
    out = ["## 3. Store throughput and latency (same C++ load generator against both servers)", "",
           "| load | connections | ddplaunch-store ops/s (p50 / p99 µs) | PyTorch ops/s (p50 / p99 µs) | ours / PyTorch |",
           "|---|---|---|---|---|"]
    for mode, conns, ours, peer in rows:
        out.append(f"| {mode} | {conns} | {ours['ops_per_s']:.0f} ({ours['p50_us']:.0f} / {ours['p99_us']:.0f}) | "
                   f"{peer['ops_per_s']:.0f} ({peer['p50_us']:.0f} / {peer['p99_us']:.0f}) | "
                   f"{ours['ops_per_s'] / peer['ops_per_s']:.2f}× |")
    out += ["", "mix = set / get (WAIT+GET) / add / check in turn; pingpong = pairs of connections, one sets a key, "
            "the other waits for it and answers, one op = one round trip. The client is ours for both servers, "
            "so the ratio compares the servers."]
    print("\n".join(out))


if __name__ == "__main__":
    main()
