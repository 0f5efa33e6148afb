"""Interop test: real ``torch.distributed`` gloo process groups rendezvous through ddplaunch-store.

Usage:  python test_process_group.py /path/to/ddplaunch-store

For each variant (plain, and with TORCH_DIST_INIT_BARRIER=1) it starts a fresh server
and two worker processes (this same file with ``--worker``, same python) with env
RANK, WORLD_SIZE=2, LOCAL_RANK, MASTER_ADDR, MASTER_PORT and
TORCHELASTIC_USE_AGENT_STORE=True, i.e. exactly as torchrun's workers: every rank is
a pure TCPStore client of the external store.  Each worker runs
``dist.init_process_group("gloo", init_method="env://", timeout=60 s)``, all_reduces
``tensor([r+1.0, 10.0*(r+1)])`` and checks the sum ``[3, 30]``, runs ``dist.barrier()``
and ``destroy_process_group()``, then exits 0.  The driver then checks, over a raw
connection, that both workers registered in the un-prefixed "init/" counter, and
(informationally / for the barrier variant) which keys the process group used.

Workers are killed at 120 s per variant; the whole script is bounded by a 300 s
watchdog; every process started is killed on exit or failure.  Exit 0 on success,
1 with the failing variant's worker output on failure, 124 on watchdog.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
WORLD_SIZE = 2
WORKER_PG_TIMEOUT_S = 60
WORKER_KILL_S = 120
TOTAL_TIMEOUT_S = 300


# ----------------------------------------------------------------------------- worker
def worker() -> int:
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    ws = int(os.environ["WORLD_SIZE"])
    tag = f"[worker rank {rank}]"
    t0 = time.monotonic()
    dist.init_process_group("gloo", init_method="env://",
                            timeout=timedelta(seconds=WORKER_PG_TIMEOUT_S))
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


# ----------------------------------------------------------------------------- driver
def run_variant(binary: str, name: str, extra_env: dict) -> None:
    import store_server
    from store_server import log, raw_add, running_store

    log(f"=== variant {name} ===")
    with running_store(binary) as (host, port):
        procs = []
        logs = []
        try:
            for rank in range(WORLD_SIZE):
                env = dict(os.environ)
                env.update({
                    "RANK": str(rank),
                    "WORLD_SIZE": str(WORLD_SIZE),
                    "LOCAL_RANK": str(rank),
                    "LOCAL_WORLD_SIZE": str(WORLD_SIZE),
                    "MASTER_ADDR": host,
                    "MASTER_PORT": str(port),
                    "TORCHELASTIC_USE_AGENT_STORE": "True",
                    "PYTHONUNBUFFERED": "1",
                })
                env.pop("TORCH_DIST_INIT_BARRIER", None)
                # keep gloo on loopback (hostname resolution may point elsewhere)
                if "GLOO_SOCKET_IFNAME" not in os.environ and os.path.exists("/sys/class/net/lo"):
                    env["GLOO_SOCKET_IFNAME"] = "lo"
                env.update(extra_env)
                f = tempfile.TemporaryFile(mode="w+")
                logs.append(f)
                procs.append(store_server.spawn(
                    [sys.executable, os.path.abspath(__file__), "--worker"],
                    env=env, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))

            deadline = time.monotonic() + WORKER_KILL_S
            while time.monotonic() < deadline and any(p.poll() is None for p in procs):
                # a crashed worker would leave its peer hanging until its own timeout;
                # keep waiting anyway (the peer's exit code is reported below)
                time.sleep(0.2)
            timed_out = [r for r, p in enumerate(procs) if p.poll() is None]
            for r in timed_out:
                store_server._kill(procs[r])
            rcs = [p.wait() for p in procs]

            def dump():
                for r, f in enumerate(logs):
                    f.seek(0)
                    out = f.read()
                    print(f"----- {name}: worker rank {r} output (exit code {rcs[r]}) -----")
                    print(out[-6000:].rstrip())
                print("-----", flush=True)

            if timed_out or any(rc != 0 for rc in rcs):
                dump()
                why = (f"workers {timed_out} still running after {WORKER_KILL_S} s (killed); "
                       if timed_out else "")
                raise AssertionError(f"variant {name}: {why}worker exit codes {rcs}")
            if os.environ.get("INTEROP_VERBOSE"):
                dump()

            # Both workers connected with world_size=2 -> "init/" counted to 2
            init_count = raw_add(host, port, b"init/", 0)
            if init_count != WORLD_SIZE:
                raise AssertionError(f"variant {name}: 'init/' counter is {init_count}, "
                                     f"expected {WORLD_SIZE}")
            import torch.distributed as dist
            from datetime import timedelta
            s = dist.TCPStore(host, port, is_master=False, timeout=timedelta(seconds=10),
                              use_libuv=True)
            if hasattr(s, "list_keys"):
                keys = sorted(s.list_keys())
                log(f"variant {name}: keys in store after the run: {keys}")
                if "TORCH_DIST_INIT_BARRIER" in extra_env:
                    if not any("store_based_barrier_key" in k for k in keys):
                        raise AssertionError(f"variant {name}: no store_based_barrier_key "
                                             f"in the store: {keys}")
            log(f"variant {name}: PASS (num_keys={s.num_keys()}, init/={init_count})")
            del s
        finally:
            for p in procs:
                store_server._kill(p)
            for f in logs:
                f.close()


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    sys.path.insert(0, HERE)
    import store_server

    binary = os.path.abspath(sys.argv[1])
    if not os.access(binary, os.X_OK):
        print(f"FAIL: {binary} is not an executable file", file=sys.stderr)
        return 2
    store_server.install_watchdog(TOTAL_TIMEOUT_S, "test_process_group")
    failed = []
    for name, extra in (("plain", {}), ("init_barrier", {"TORCH_DIST_INIT_BARRIER": "1"})):
        t0 = time.monotonic()
        try:
            run_variant(binary, name, extra)
            print(f"PASS {name} ({time.monotonic() - t0:.1f} s)", flush=True)
        except Exception as e:  # noqa: BLE001
            detail = f"{type(e).__name__}: {e}"
            if not isinstance(e, AssertionError):
                detail += "\n" + traceback.format_exc()
            print(f"FAIL {name}: {detail}", flush=True)
            failed.append(name)
    if failed:
        print("FAILED: " + ", ".join(failed))
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--worker"]:
        sys.exit(worker())
    rc = 1
    try:
        rc = main()
    except BaseException:  # noqa: BLE001
        traceback.print_exc()
        print("FAIL: unexpected error in the test driver", flush=True)
    finally:
        if "store_server" in sys.modules:
            sys.modules["store_server"].kill_all()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)
