"""The Python worker hook's start-up cost: the venv's interpreter started with and without the
hook (python/ddplaunch/worker_hook/sitecustomize.py, first on PYTHONPATH, with
DDPLAUNCH_WORKER_SOCKET set as the launcher sets it), on

1. a script that imports nothing (`-c pass`): what every non-torch worker pays (target <= 1 ms),
   with the hook's .pyc (the first worker writes it) and without one (PYTHONDONTWRITEBYTECODE
   before any worker imported torch: the hook's small eager part is compiled at each start);
2. `-c "import torch.distributed"`: with the hook this includes starting torch's worker server on
   the socket and shutting it down at exit.

Runs alternate (with, without, with, ...) so a burst of load on the shared machine hits both;
each figure is the median whole-command wall time with min and max, the ratio and difference of
the medians. Then `-X importtime`'s own time of importing the hook (median, µs). The hook runs
from a temporary directory as from the launcher's run directory (its __pycache__ written by a
first run, as the first worker writes it). Writes a Markdown section to stdout.
    python bench_python_hook.py [BUILD_BIN_DIR] [--quick]
"""
import os
import pathlib
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

QUICK = "--quick" in sys.argv
PY = sys.executable
HOOK = pathlib.Path(__file__).resolve().parents[1] / "python" / "ddplaunch" / "worker_hook" / "sitecustomize.py"
PASS_REPS = 11 if QUICK else 101
TORCH_REPS = 3 if QUICK else 11


def env(hook_dir, socket_path, no_pyc=False):
    e = {k: v for k, v in os.environ.items()
         if k not in ("PYTHONPATH", "DDPLAUNCH_WORKER_SOCKET", "PYTHONDONTWRITEBYTECODE")}
    e["OMP_NUM_THREADS"] = "1"
    if no_pyc:
        e["PYTHONDONTWRITEBYTECODE"] = "1"
    if hook_dir:
        e["PYTHONPATH"] = hook_dir
        e["DDPLAUNCH_WORKER_SOCKET"] = socket_path
    return e


def wall(args, e):
    t = time.perf_counter()
    subprocess.run([PY] + args, env=e, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def span(xs, scale=1000):
    return f"{statistics.median(xs) * scale:.1f} ms ({min(xs) * scale:.1f}–{max(xs) * scale:.1f})"


def import_time_us(e):
    out = subprocess.run([PY, "-X", "importtime", "-c", "pass"], env=e, check=True, capture_output=True,
                         text=True).stderr
    m = re.search(r"import time:\s+(\d+) \|\s+(\d+) \|\s+sitecustomize$", out, re.M)
    return int(m.group(2)) if m else 0


def hook_copy(tmp, name):
    d = os.path.join(tmp, name)
    os.mkdir(d, 0o700)
    shutil.copy(HOOK, os.path.join(d, "sitecustomize.py"))
    return d


def main():
    with tempfile.TemporaryDirectory(prefix="ddp_hook_bench_") as tmp:
        sock = os.path.join(tmp, "w.sock")
        hook_dir, bare_dir = hook_copy(tmp, "python"), hook_copy(tmp, "bare")
        with_hook, without = env(hook_dir, sock), env(None, None)
        wall(["-c", "pass"], with_hook)  # writes the hook's __pycache__, as the first worker does
        cases = [
            ("`-c pass` (imports nothing)", ["-c", "pass"], PASS_REPS, with_hook, without),
            ("`-c pass`, no .pyc (PYTHONDONTWRITEBYTECODE, hook never compiled)", ["-c", "pass"], PASS_REPS,
             env(bare_dir, sock, no_pyc=True), env(None, None, no_pyc=True)),
            ("`-c \"import torch.distributed\"` (with the hook: server started and shut down)",
             ["-c", "import torch.distributed"], TORCH_REPS, with_hook, without),
        ]
        out = ["## 1b. Python worker hook (start-up of one Python worker, with and without the hook)", "",
               "| script | without the hook | with the hook | ratio | difference |", "|---|---|---|---|---|"]
        for name, args, reps, e_with, e_without in cases:
            a, b = [], []
            for _ in range(reps):
                b.append(wall(args, e_with))
                a.append(wall(args, e_without))
            diff = (statistics.median(b) - statistics.median(a)) * 1000
            out.append(f"| {name} | {span(a)} | {span(b)} | {statistics.median(b) / statistics.median(a):.3f} | "
                       f"{diff:+.2f} ms |")
        reps = 5 if QUICK else 21
        t_with = statistics.median(import_time_us(with_hook) for _ in range(reps))
        t_without = statistics.median(import_time_us(without) for _ in range(reps))
        out += ["", f"`-X importtime`, cumulative µs of `import sitecustomize` (median of {reps}; with the hook it "
                f"also runs Debian's /etc/python3.X/sitecustomize.py, as without): {t_with:.0f} µs with the hook, "
                f"{t_without:.0f} µs without. Target: ≤ 1 ms in total for a worker that never imports torch."]
    print("\n".join(out))


if __name__ == "__main__":
    main()
