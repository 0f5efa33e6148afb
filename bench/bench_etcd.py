"""Meeting in etcd: ddplaunch's etcd-v3 rendezvous against torchrun's etcd backend (etcd's v2
API), two nodes on this machine, one etcd member on loopback (Debian's etcd 3.4, started here
with --enable-v2 so that torchrun's backend works at all; etcd 3.6 has no v2 API).

A job = two launchers started together (--nnodes=2 --nproc_per_node=1, one worker of /bin/true
each, a fresh --rdzv_id per run); its time runs from the first start to the last launcher's exit,
so it is rendezvous, start, teardown and leaving. torchrun needs python-etcd (bench/run.sh
installs it). The runs alternate (ddplaunch, torchrun, ...) so drift in the machine's load hits
both alike. Reports only; nothing is asserted. Writes a Markdown section to stdout.
   python bench_etcd.py BUILD_BIN_DIR [--quick]
"""
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

BIN = sys.argv[1]
QUICK = "--quick" in sys.argv
REPS = 3 if QUICK else 7
TIMEOUT = 120  # seconds for one job; nothing may hang the benchmark
PY = sys.executable
DDPLAUNCH = os.path.join(BIN, "ddplaunch")
ETCD = shutil.which("etcd") or "/usr/bin/etcd"
ENV = dict(os.environ, OMP_NUM_THREADS="1", LOGLEVEL="ERROR")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_etcd(directory):
    client, peer = free_port(), free_port()
    url = f"http://127.0.0.1:{client}"
    p = subprocess.Popen([ETCD, "--data-dir", os.path.join(directory, "etcd"), "--enable-v2=true",
                          "--listen-client-urls", url, "--advertise-client-urls", url,
                          "--listen-peer-urls", f"http://127.0.0.1:{peer}", "--log-level", "error"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # etcdctl waits (up to its dial timeout) for the member: ready when it answers.
    subprocess.run(["etcdctl", "--endpoints", f"127.0.0.1:{client}", "--dial-timeout", "20s", "put", "/up", "1"],
                   env=dict(os.environ, ETCDCTL_API="3"), check=True, stdout=subprocess.DEVNULL, timeout=60)
    return p, f"127.0.0.1:{client}"


def job(commands):
    t0 = time.perf_counter()
    ps = [subprocess.Popen(c, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=ENV)
          for c in commands]
    for p in ps:
        _, err = p.communicate(timeout=TIMEOUT)
        if p.returncode != 0:
            raise RuntimeError(f"{p.args} exited {p.returncode}:\n{err[-2000:]}")
    return time.perf_counter() - t0


def ours(endpoint):
    run_id = uuid.uuid4().hex[:12]
    return [[DDPLAUNCH, "--nnodes", "2", "--nproc_per_node", "1", "--rdzv_backend", "etcd-v3", "--rdzv_endpoint",
             endpoint, "--rdzv_id", run_id, "--no_python", "/bin/true"]] * 2


def theirs(endpoint):
    run_id = uuid.uuid4().hex[:12]
    return [[PY, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc_per_node", "1", "--rdzv_backend", "etcd",
             "--rdzv_endpoint", endpoint, "--rdzv_id", run_id, "--no-python", "/bin/true"]] * 2


def fmt(samples):
    return f"{statistics.median(samples) * 1000:.0f} ms ({min(samples) * 1000:.0f}–{max(samples) * 1000:.0f})"


def main():
    out = ["## 4b. Meeting in etcd (2 nodes on loopback, 1 worker of /bin/true each, one etcd 3.4 member)", ""]
    try:
        import etcd  # noqa: F401  (python-etcd, which torchrun's etcd backend needs)
    except ImportError:
        print("\n".join(out + ["Skipped: python-etcd is not installed in this venv (bench/run.sh installs it)."]))
        return
    with tempfile.TemporaryDirectory(prefix="bench_etcd_") as d:
        server, endpoint = start_etcd(d)
        try:
            a, b = [], []
            for _ in range(REPS):
                a.append(job(ours(endpoint)))
                b.append(job(theirs(endpoint)))
        finally:
            server.kill()
            server.wait()
    ratio = statistics.median(b) / statistics.median(a)
    out += ["| | ddplaunch (`--rdzv_backend etcd-v3`) | torchrun (`--rdzv_backend etcd`, v2 API) | torchrun / ddplaunch |",
            "|---|---|---|---|",
            f"| job, first start → last exit | {fmt(a)} | {fmt(b)} | {ratio:.0f}× |", "",
            f"Medians of {REPS} runs of each, alternating. Both meet in the same etcd member; torchrun's backend "
            "needs etcd's v2 API (`--enable-v2`), which etcd 3.6 removed."]
    print("\n".join(out))


if __name__ == "__main__":
    main()
