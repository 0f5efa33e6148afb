"""Allreduce benchmark, the peer's side: the loop of allreduce_bench.cpp over PyTorch's Gloo.

One rank per process; RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT from the environment (rank 0
hosts the TCPStore). Per size: a correctness check (ones sum to WORLD_SIZE), one warm-up
iteration, then REPS timed loops of ITERS float32 allreduces over zeros between barriers, each
timed as the slowest rank's. Rank 0 prints "SIZE ITERS T1 .. Tn C1 .. Cn": per loop, seconds
per allreduce, then CPU seconds (user + system, all threads, summed over the ranks) per allreduce.
   python gloo_allreduce.py REPS SIZE:ITERS...
"""
import resource
import sys
import time

import torch
import torch.distributed as dist


def cpu_seconds():
    """User + system CPU seconds of this process so far, all threads (Gloo's I/O threads too)."""
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def main():
    reps = int(sys.argv[1])
    sizes = [tuple(int(x) for x in s.split(":")) for s in sys.argv[2:]]
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    for nbytes, iters in sizes:
        n = nbytes // 4
        check = torch.ones(n)
        dist.all_reduce(check)
        if not torch.equal(check, torch.full((n,), float(world))):
            sys.exit(f"rank {rank}: wrong allreduce result at {nbytes} bytes")
        t = torch.zeros(n)
        dist.all_reduce(t)
        per_iter, cpu_per_iter = [], []
        for _ in range(reps):
            dist.barrier()
            t0, c0 = time.perf_counter(), cpu_seconds()
            for _ in range(iters):
                dist.all_reduce(t)
            elapsed = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
            cpu = torch.tensor([cpu_seconds() - c0], dtype=torch.float64)
            dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
            dist.all_reduce(cpu)
            per_iter.append(elapsed.item() / iters)
            cpu_per_iter.append(cpu.item() / iters)
        if rank == 0:
            print(nbytes, iters, " ".join(f"{s:.9f}" for s in per_iter + cpu_per_iter), flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
