"""GPU section: allreduce bus bandwidth per size (nccl-tests' formula, busbw = algbw * 2(n-1)/n)
and the DDP step of a 50 M-parameter MLP on both GPU backends, nccl-c10d (LibTorch's
ProcessGroupNCCL) and nccl (ours), each run by ddplaunch with one rank per GPU (gpu_bench). Also
PyTorch's own torch.distributed all_reduce over NCCL at the same sizes, as the peer. Skipped with
a note on a machine without a CUDA device.
   python bench_gpu.py BUILD_BIN_DIR [--quick]
"""
import os
import re
import subprocess
import sys

BIN = sys.argv[1]
QUICK = "--quick" in sys.argv
HERE = os.path.dirname(os.path.abspath(__file__))

PEER = r"""
import os, time, torch, torch.distributed as dist
dist.init_process_group("nccl")
r, n = dist.get_rank(), dist.get_world_size()
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
b = 8
while b <= 256 << 20:
    t = torch.ones(b // 4, device="cuda")
    for _ in range(5): dist.all_reduce(t)
    times = []
    for _ in range(20):
        dist.barrier(); torch.cuda.synchronize(); s = time.perf_counter()
        dist.all_reduce(t); torch.cuda.synchronize(); times.append(time.perf_counter() - s)
    s = sorted(times)[len(times) // 2]
    if r == 0: print(f"gpu_bench allreduce backend=torch ranks={n} bytes={b} time_us={s*1e6:.1f} algbw={b/s/1e9:.3f} busbw={b/s/1e9*2*(n-1)/n:.3f}", flush=True)
    b *= 4
dist.destroy_process_group()
"""


def gpus():
    out = subprocess.run([sys.executable, "-c", "import torch; print(torch.cuda.device_count())"],
                         capture_output=True, text=True)
    return int(out.stdout.strip() or 0) if out.returncode == 0 else 0


def run(cmd):
    out = subprocess.run([os.path.join(BIN, "ddplaunch"), f"--nproc_per_node={GPUS}", *cmd], capture_output=True,
                         text=True, timeout=1800, env=dict(os.environ, PYTHON_EXEC=sys.executable))
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed (exit {out.returncode}): {out.stderr[-2000:]}")
    return [dict(kv.split("=") for kv in line.split()[2:]) | {"what": line.split()[1]}
            for line in out.stdout.splitlines() if line.startswith("gpu_bench ")]


print("## GPU: allreduce bus bandwidth and DDP step (nccl-c10d, nccl, PyTorch)")
print()
GPUS = gpus()
if GPUS == 0:
    print("Skipped: no CUDA device on this machine. Run bench/run.sh on a GPU host for this section "
          "(gpu_bench under ddplaunch, one rank per GPU, both backends, and PyTorch's NCCL all_reduce as the peer).")
    sys.exit(0)
iters = ["--iters", "5", "--ddp-steps", "5"] if QUICK else []
rows = {}
for backend in ("nccl-c10d", "nccl"):
    rows[backend] = run([os.path.join(BIN, "gpu_bench"), "--backend", backend, *iters])
peer_file = os.path.join(HERE, ".gpu_peer.py")
with open(peer_file, "w") as f:
    f.write(PEER)
try:
    rows["torch"] = run([peer_file])
finally:
    os.unlink(peer_file)
print(f"{GPUS} GPU(s), one rank each. busbw in GB/s (nccl-tests' allreduce formula); ratio = ours / PyTorch.")
print()
print("| bytes | nccl-c10d busbw | nccl busbw | PyTorch busbw | nccl-c10d / PyTorch | nccl / PyTorch |")
print("|---|---|---|---|---|---|")
by_size = {b: {r["bytes"]: r for r in rows[b] if r["what"] == "allreduce"} for b in rows}
for size in by_size["torch"]:
    c, o, t = (float(by_size[b][size]["busbw"]) for b in ("nccl-c10d", "nccl", "torch"))
    print(f"| {size} | {c:.2f} | {o:.2f} | {t:.2f} | {c / t:.2f}x | {o / t:.2f}x |" if t > 0 else
          f"| {size} | {c:.2f} | {o:.2f} | {t:.2f} | - | - |")
print()
print("| DDP step (MLP 4096x3, batch 64) | median | min–max |")
print("|---|---|---|")
for backend in ("nccl-c10d", "nccl"):
    d = next(r for r in rows[backend] if r["what"] == "ddp")
    print(f"| {backend} | {float(d['step_ms']):.2f} ms | {float(d['min_ms']):.2f}–{float(d['max_ms']):.2f} ms |")
