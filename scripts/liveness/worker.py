"""A plain DDP-style worker for the liveness stress experiment: a small gloo all_reduce loop for
LIVENESS_SECONDS (default 90) that prints one progress line per step, and LIVENESS_CHATTY extra
lines per step (to load the launcher's console and log writing)."""

import os
import sys
import time

import torch
import torch.distributed as dist

seconds = float(os.environ.get("LIVENESS_SECONDS", "90"))
chatty = int(os.environ.get("LIVENESS_CHATTY", "0"))
dist.init_process_group("gloo")
rank = dist.get_rank()
t = torch.ones(4096)
start = last = time.monotonic()
step = 0
longest = 0.0
while True:
    # Element 0 votes to stop: every rank leaves after the same all_reduce.
    t[0] = 1.0 if time.monotonic() - start >= seconds else 0.0
    dist.all_reduce(t)
    if t[0] > 0:
        break
    t.fill_(1.0)
    step += 1
    now = time.monotonic()
    longest = max(longest, now - last)
    last = now
    print(f"rank {rank} step {step} t={now - start:.1f}", flush=True)
    for i in range(chatty):
        print(f"rank {rank} step {step} line {i} " + "x" * 100)
    sys.stdout.flush()
    time.sleep(0.05)
print(f"rank {rank} done: {step} steps, longest step gap {longest:.1f} s", flush=True)
dist.destroy_process_group()
