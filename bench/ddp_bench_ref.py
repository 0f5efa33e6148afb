"""PyTorch's DDP (gloo) step time, the peer of ddp_bench.cpp: same models, batches and timing.
Run under a launcher (torchrun or ddplaunch):  ddp_bench_ref.py --model small|large --steps N --warmup W
Rank 0 prints: ddp_bench model=<m> ranks=<n> overlap=1 step_ms=<median> min_ms=<min> max_ms=<max>
"""
import argparse
import statistics
import time

import torch
import torch.distributed as dist
from torch import nn


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", choices=["small", "large"], default="small")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    a = p.parse_args()
    dist.init_process_group("gloo", init_method="env://")
    large = a.model == "large"
    torch.manual_seed(0)
    if large:
        model = nn.Sequential(nn.Linear(1024, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, 1024))
    else:
        model = nn.Sequential(nn.Linear(2, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 3))
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    batch = 32 if large else 64
    x = torch.randn(batch, 1024 if large else 2)
    y = torch.randn(batch, 1024) if large else torch.randint(0, 3, (batch,))
    loss_fn = nn.functional.mse_loss if large else nn.functional.cross_entropy
    times = []
    for s in range(a.warmup + a.steps):
        dist.barrier()
        start = time.perf_counter()
        opt.zero_grad()
        loss_fn(ddp(x), y).backward()
        opt.step()
        ms = (time.perf_counter() - start) * 1000
        if s >= a.warmup:
            times.append(ms)
    if dist.get_rank() == 0:
        print(f"ddp_bench model={a.model} ranks={dist.get_world_size()} overlap=1 "
              f"step_ms={statistics.median(times):.3f} min_ms={min(times):.3f} max_ms={max(times):.3f}", flush=True)
    # Drop DDP and meet before tearing the group down: in torch 2.15 (gloo) destroying the group
    # while another rank's DDP reducer is still alive aborts one rank now and then ("terminate
    # called without an active exception", also under torchrun: 3 runs in 12 here).
    del ddp
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
