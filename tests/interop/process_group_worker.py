"""One rank of tests/interop/test_process_group.py: a real torch.distributed gloo worker.

Started with RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT and
TORCHELASTIC_USE_AGENT_STORE=True in the environment, exactly as torchrun starts its workers.
Runs ``dist.init_process_group("gloo", init_method="env://", timeout=60 s)``, checks rank and
world size, all_reduces ``tensor([r+1.0, 10.0*(r+1)])`` and checks the sum (``[3, 30]`` for two
ranks), runs ``dist.barrier()`` and ``destroy_process_group()``. Exit 0 on success, 1 (with a
line saying why) if the sum is wrong; an AssertionError or a torch error exits non-zero too.
"""

from __future__ import annotations

import os
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

WORKER_PG_TIMEOUT_S = 60


def main() -> int:
    rank = int(os.environ["RANK"])
    ws = int(os.environ["WORLD_SIZE"])
    tag = f"[worker rank {rank}]"
    t0 = time.monotonic()
    dist.init_process_group("gloo", init_method="env://", timeout=timedelta(seconds=WORKER_PG_TIMEOUT_S))
    print(f"{tag} init_process_group done in {time.monotonic() - t0:.2f} s", flush=True)
    assert dist.get_rank() == rank, (dist.get_rank(), rank)
    assert dist.get_world_size() == ws, (dist.get_world_size(), ws)

    t = torch.tensor([rank + 1.0, 10.0 * (rank + 1)])
    dist.all_reduce(t)
    n = ws * (ws + 1) / 2
    want = torch.tensor([n, 10.0 * n])
    if not torch.equal(t, want):
        print(f"{tag} FAIL: all_reduce gave {t.tolist()}, expected {want.tolist()}", flush=True)
        return 1
    print(f"{tag} all_reduce ok: {t.tolist()}", flush=True)
    dist.barrier()
    print(f"{tag} barrier ok", flush=True)
    dist.destroy_process_group()
    print(f"{tag} destroyed, exiting 0", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
