"""A small TorchFT job on the CPU (after torchft's examples/train_ddp.py): one Manager per rank
over torchft's ProcessGroupGloo, torchft's DistributedDataParallel and Optimizer wrappers, a tiny
MLP on random data. Run by tests/launcher/replica_groups (test_torchft.py) under
`ddplaunch --replica_groups` and under torchrun.

Each rank appends "<unix time> <step> <pid>" to OUT/g<REPLICA_GROUP_ID>r<RANK>.steps after every
committed step, writes "<pid> <unix time it started>" to OUT/g<G>r<R>.pid at start (a restarted
rank, which finds the file, then waits --rejoin_delay seconds before it joins), and group rank 0 writes the step to
OUT/step.replica_<G>.txt (ddplaunch's --progress_file, named for the group). It stops, exit 0, at
the first step after OUT/stop appears.
"""
import os
import time

START = time.time()  # before torch's import: what a restart costs the launcher is measured from here

import argparse  # noqa: E402
import sys  # noqa: E402
from datetime import timedelta  # noqa: E402

import torch  # noqa: E402
from torch import nn, optim

from torchft import DistributedDataParallel, Manager, Optimizer, ProcessGroupGloo


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--step_delay", type=float, default=0.05)
    parser.add_argument("--rejoin_delay", type=float, default=0,
                        help="a restarted rank waits this long before it joins (a slow recovery)")
    args = parser.parse_args()
    group = int(os.environ["REPLICA_GROUP_ID"])
    rank = int(os.environ["RANK"])
    tag = f"g{group}r{rank}"
    pid_file = os.path.join(args.out, tag + ".pid")
    restarted = os.path.exists(pid_file)
    with open(pid_file + ".tmp", "w") as f:
        f.write(f"{os.getpid()} {START:.3f}\n")
    os.replace(pid_file + ".tmp", pid_file)
    if restarted:
        time.sleep(args.rejoin_delay)
    torch.manual_seed(group * 100 + rank)
    torch.set_num_threads(1)

    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    inner = optim.AdamW(model.parameters(), lr=1e-3)

    def load_state_dict(state):
        model.load_state_dict(state["model"])
        inner.load_state_dict(state["optim"])

    def state_dict():
        return {"model": model.state_dict(), "optim": inner.state_dict()}

    manager = Manager(
        pg=ProcessGroupGloo(timeout=timedelta(seconds=10)),
        min_replica_size=1,
        load_state_dict=load_state_dict,
        state_dict=state_dict,
        replica_id=f"train_ft_{group}",
        timeout=timedelta(seconds=10),
    )
    ddp = DistributedDataParallel(manager, model)
    optimizer = Optimizer(manager, inner)  # zero_grad starts the step's quorum
    steps = open(os.path.join(args.out, tag + ".steps"), "a", buffering=1)
    progress = os.path.join(args.out, f"step.replica_{group}.txt")
    stop = os.path.join(args.out, "stop")
    while not os.path.exists(stop):
        inputs = torch.rand(8, 16)
        labels = torch.randint(4, (8,))
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(ddp(inputs), labels)
        loss.backward()
        if manager.should_commit():  # what optimizer.step() asks, its answer kept
            inner.step()
            step = manager.current_step()
            steps.write(f"{time.time():.3f} {step} {os.getpid()}\n")
            if rank == 0:
                tmp = progress + ".tmp"
                with open(tmp, "w") as f:
                    f.write(f"{step}\n")
                os.replace(tmp, progress)
        time.sleep(args.step_delay)
    print(f"{tag}: stopping at step {manager.current_step()}", flush=True)
    manager.shutdown(wait=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
