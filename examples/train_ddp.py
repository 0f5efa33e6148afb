"""An ordinary PyTorch DDP training script (gloo, env://), the kind users run under torchrun.

It reads RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT from the environment, trains a small MLP on a
fixed synthetic regression set with a DistributedSampler, and prints one loss line per step on
rank 0 ("step N loss X"). Deterministic: the same world size gives the same loss trace under any
launcher, which the end-to-end tests compare.

    python examples/train_ddp.py [--steps 20] [--batch-size 16] [--lr 0.05]
"""
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=16, help="per-process batch size")
    parser.add_argument("--lr", type=float, default=0.05)
    args = parser.parse_args()

    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(0)
    features = torch.randn(1024, 16)
    targets = features @ torch.randn(16, 1) + 0.1 * torch.randn(1024, 1)
    dataset = TensorDataset(features, targets)
    sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler, drop_last=True)

    model = DDP(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1)))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    loss_fn = nn.MSELoss()

    step, epoch = 0, 0
    while step < args.steps:
        sampler.set_epoch(epoch)
        for x, y in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            # The mean loss over all ranks, so the trace does not depend on which rank prints.
            mean = loss.detach().clone()
            dist.all_reduce(mean)
            mean /= world
            if rank == 0:
                print(f"step {step} loss {mean.item():.6f}", flush=True)
            step += 1
            if step >= args.steps:
                break
        epoch += 1

    dist.barrier()
    if rank == 0:
        print(f"done: {world} processes, {step} steps, local rank {os.environ.get('LOCAL_RANK', '?')}",
              flush=True)
    # Drop DDP and meet before tearing the group down: in torch 2.15 (gloo) destroying the group
    # while another rank's DDP reducer is still alive aborts one rank now and then ("terminate
    # called without an active exception", also under torchrun: 3 runs in 12 here).
    del model
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
