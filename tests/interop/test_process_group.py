"""Interop test: real ``torch.distributed`` gloo process groups rendezvous through ddplaunch-store.

Run by ctest:  python -m pytest test_process_group.py --store /path/to/ddplaunch-store

For each variant (plain, and with TORCH_DIST_INIT_BARRIER=1) it starts a fresh server
and two worker processes (process_group_worker.py next to this file, same python) with env
RANK, WORLD_SIZE=2, LOCAL_RANK, MASTER_ADDR, MASTER_PORT and
TORCHELASTIC_USE_AGENT_STORE=True, i.e. exactly as torchrun's workers: every rank is
a pure TCPStore client of the external store.  Each worker runs
``dist.init_process_group("gloo", init_method="env://", timeout=60 s)``, all_reduces
``tensor([r+1.0, 10.0*(r+1)])`` and checks the sum ``[3, 30]``, runs ``dist.barrier()``
and ``destroy_process_group()``, then exits 0.  The test then checks, over a raw
connection, that both workers registered in the un-prefixed "init/" counter, and
(for the barrier variant) that the process group used a store_based_barrier_key; the keys
in the store are reported either way.

Workers are killed at 120 s per variant; each variant is bounded by pytest-timeout; every
process started is killed on exit or failure.  A failure shows the workers' output.
"""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
import time
from datetime import timedelta

import pytest
import torch.distributed as dist

from pyfixtures import note

pytestmark = pytest.mark.timeout(200)

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "process_group_worker.py")
WORLD_SIZE = 2
WORKER_KILL_S = 120
VALIDATE, ADD = 0, 4
MAGIC = 0x3C85F7CE


def init_counter(server) -> int:
    """Reads the un-prefixed "init/" counter (ADD 0 on the raw wire key), which Python clients
    cannot address through the TCPStore API."""
    key = b"init/"
    with socket.create_connection((server.host, server.port), timeout=10) as s:
        s.sendall(struct.pack("<BI", VALIDATE, MAGIC))
        s.sendall(struct.pack("<BQ", ADD, len(key)) + key + struct.pack("<q", 0))
        reply = b""
        while len(reply) < 8:
            chunk = s.recv(8 - len(reply))
            assert chunk, "server closed the connection"
            reply += chunk
        return struct.unpack("<q", reply)[0]


@pytest.mark.parametrize("name, extra_env", [("plain", {}), ("init_barrier", {"TORCH_DIST_INIT_BARRIER": "1"})])
def test_gloo_process_group(name, extra_env, start_store, procs, tmp_path):
    server = start_store()
    workers, logs = [], []
    for rank in range(WORLD_SIZE):
        env = dict(os.environ)
        env.update({
            "RANK": str(rank),
            "WORLD_SIZE": str(WORLD_SIZE),
            "LOCAL_RANK": str(rank),
            "LOCAL_WORLD_SIZE": str(WORLD_SIZE),
            "MASTER_ADDR": server.host,
            "MASTER_PORT": str(server.port),
            "TORCHELASTIC_USE_AGENT_STORE": "True",
            "PYTHONUNBUFFERED": "1",
        })
        env.pop("TORCH_DIST_INIT_BARRIER", None)
        # keep gloo on loopback (hostname resolution may point elsewhere)
        if "GLOO_SOCKET_IFNAME" not in os.environ and os.path.exists("/sys/class/net/lo"):
            env["GLOO_SOCKET_IFNAME"] = "lo"
        env.update(extra_env)
        log = tmp_path / f"rank{rank}.log"
        logs.append(log)
        with open(log, "w") as f:
            workers.append(procs.start([sys.executable, WORKER], env=env, stdout=f, stderr=subprocess.STDOUT))

    # A crashed worker would leave its peer hanging until its own timeout; keep waiting anyway
    # (the peer's exit code is reported below).
    deadline = time.monotonic() + WORKER_KILL_S
    timed_out = []
    for rank, p in enumerate(workers):
        try:
            p.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            timed_out.append(rank)
    for rank in timed_out:
        procs.kill(workers[rank])
    rcs = [p.wait() for p in workers]

    def outputs() -> str:
        return "".join(f"\n----- {name}: worker rank {r} output (exit code {rcs[r]}) -----\n"
                       f"{logs[r].read_text()[-6000:].rstrip()}" for r in range(WORLD_SIZE))

    why = f"workers {timed_out} still running after {WORKER_KILL_S} s (killed); " if timed_out else ""
    assert not timed_out and rcs == [0] * WORLD_SIZE, f"variant {name}: {why}worker exit codes {rcs}{outputs()}"

    if os.environ.get("INTEROP_VERBOSE"):
        note(outputs())

    # Both workers connected with world_size=2 -> "init/" counted to 2
    init_count = init_counter(server)
    assert init_count == WORLD_SIZE, f"variant {name}: 'init/' counter is {init_count}, expected {WORLD_SIZE}"
    s = dist.TCPStore(server.host, server.port, is_master=False, timeout=timedelta(seconds=10), use_libuv=True)
    if hasattr(s, "list_keys"):
        keys = sorted(s.list_keys())
        note(f"process group, variant {name}: keys in store after the run: {keys}")
        if "TORCH_DIST_INIT_BARRIER" in extra_env:
            assert any("store_based_barrier_key" in k for k in keys), \
                f"variant {name}: no store_based_barrier_key in the store: {keys}"
    note(f"process group, variant {name}: num_keys={s.num_keys()}, init/={init_count}")
