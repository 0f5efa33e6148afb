"""PyTorch's own DDP on the program of tests/runtime/ddp_step_worker.cpp, line for line.

Started by a launcher (torchrun or ddplaunch: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT in the
environment); gloo process group over env://, torch.nn.parallel.DistributedDataParallel.

  model   Linear(16,64)-Tanh-Linear(64,64)-Tanh-Linear(64,8); element i (flat, 0-based) of
          parameter j (registration order, 1-based) is 0.2 sin(0.37 i + 1.3 j)
  data    rank r at step s takes samples n = (s W + r) B + k, k < B (W ranks, B per batch):
          x[k][f] = sin(0.1 (16 n + f)), y[k][o] = 0.5 sin(2 x[k][o] + x[k][o + 8])
  train   MSE loss, SGD lr 0.05 momentum 0.9, --steps steps

Formulas are evaluated with the same torch ops as the C++ worker, in float64, then cast to
float32, so both sides start from bit-identical tensors.

Output, one line each: "step <s> rank <r> loss <%.9g>" per step and
"checksum rank <r> sum <%.17g> abssum <%.17g>" over the final parameters (float64 sums).

    python ddp_reference.py [--steps 30] [--batch 8] [--lr 0.05] [--bucket-cap-mb 25]
"""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def make_model() -> nn.Sequential:
    model = nn.Sequential(nn.Linear(16, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 8))
    with torch.no_grad():
        for j, p in enumerate(model.parameters(), start=1):
            i = torch.arange(p.numel(), dtype=torch.float64)
            p.copy_((0.2 * torch.sin(0.37 * i + 1.3 * j)).to(torch.float32).view(p.shape))
    return model


def batch(rank: int, world: int, step: int, size: int):
    first = (step * world + rank) * size
    xi = torch.arange(size * 16, dtype=torch.float64) + first * 16
    x = torch.sin(0.1 * xi).view(size, 16)
    y = 0.5 * torch.sin(2 * x[:, :8] + x[:, 8:])
    return x.to(torch.float32), y.to(torch.float32)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--bucket-cap-mb", type=float, default=25.0)
    args = parser.parse_args()

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    model = make_model()
    ddp = DDP(model, bucket_cap_mb=args.bucket_cap_mb)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    for s in range(args.steps):
        x, y = batch(rank, world, s, args.batch)
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        optimizer.step()
        print(f"step {s} rank {rank} loss {loss.item():.9g}", flush=True)
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).to(torch.float64)
    print(f"checksum rank {rank} sum {flat.sum().item():.17g} abssum {flat.abs().sum().item():.17g}", flush=True)
    # Drop DDP and meet before tearing the group down: in torch 2.15 (gloo) destroying the group
    # while another rank's DDP reducer is still alive aborts one rank now and then ("terminate
    # called without an active exception", also under torchrun: 3 runs in 12 here).
    del ddp
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
