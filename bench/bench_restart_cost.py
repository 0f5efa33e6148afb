"""Restart cost over many rounds: whether a round costs more once many rounds came before it.

Two launchers run here as node_rank 0 and 1 (--nnodes=2 --nproc_per_node=1, loopback, a free TCP
port, --max_restarts=ROUNDS). The worker is a bash script that appends `date +%s.%N` to a file of
its rank and exits 1 at once, so every round fails and the job restarts until the restarts run
out (issue 41: 66 restarts/s at first, 5/s near the end of 1000, because each round listed every
key the rounds before had left in the store, and every SIGCHLD woke the process context of every
round before).
   round time   = the difference between consecutive rounds' starts on node 0: ddplaunch's
                  `workers_started` events (--event_log), torchrun's rank 0 start times (a bash
                  worker killed by its launcher before it notes the time misses a round, which
                  ddplaunch, stopping the other node's worker within a millisecond, often does)
   growth ratio = (sum of the last K round times) / (sum of the first K)   (1.0: no growth)
ddplaunch: --master_addr 127.0.0.1 --master_port PORT --node_rank g --rdzv_id ID --no_python,
ROUNDS = 1000 and K = 100 (--quick: 300 and 50). torchrun, for reference (not with --quick: its
rounds take about 2 s each, two one-second polls, see bench_recovery.py): --rdzv_backend=c10d on
both nodes, 100 rounds and K = 25. Reports only; nothing is asserted.
Writes a Markdown section to stdout.   python bench_restart_cost.py BUILD_BIN_DIR [--quick]
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from bench_recovery import (DDPLAUNCH, ENV, PY, QUICK, free_port, kill_leftovers, tail, torch_version, wait_codes,
                            write_script)

ROUNDS, K = (300, 50) if QUICK else (1000, 100)
TORCH_ROUNDS, TORCH_K = 100, 25
TIMEOUT = 900  # seconds for one job (both launchers); nothing may hang the benchmark

WORKER = r"""#!/bin/bash
date +%s.%N >> "$RESTART_DIR/starts_$RANK"
exit 1
"""


def commands(name, port, run_id, prog, rounds, events):
    if name == "ddplaunch":
        return [[DDPLAUNCH, "--nnodes", "2", "--nproc_per_node", "1", "--node_rank", str(g),
                 "--master_addr", "127.0.0.1", "--master_port", str(port), "--rdzv_id", run_id,
                 "--max_restarts", str(rounds)] + (["--event_log", events] if g == 0 else []) + ["--no_python", prog]
                for g in (0, 1)]
    return [[PY, "-m", "torch.distributed.run", "--nnodes=2", "--nproc-per-node=1", "--rdzv_backend=c10d",
             f"--rdzv_endpoint=127.0.0.1:{port}", f"--rdzv_id={run_id}", f"--max-restarts={rounds}", "--no-python",
             prog] for _ in (0, 1)]


def one_run(name, rounds, k):
    """Returns (node 0's round start times, seconds for the whole job) or raises RuntimeError (also
    when fewer than 4 k rounds started)."""
    with tempfile.TemporaryDirectory(prefix="bench_restart_cost_") as d:
        prog = write_script(d, WORKER)
        procs, logs = [], []
        start = time.monotonic()
        try:
            events = os.path.join(d, "events.jsonl")
            for g, cmd in enumerate(commands(name, free_port(), f"restart-cost-{os.getpid()}-{name}", prog, rounds,
                                             events)):
                err = os.path.join(d, f"node{g}.err")
                logs.append(err)
                with open(err, "wb") as fe:
                    procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=fe, start_new_session=True,
                                                  env=dict(ENV, RESTART_DIR=d)))
            codes = wait_codes(procs, TIMEOUT)
            elapsed = time.monotonic() - start
            starts = round_starts(name, d, events)
            if any(not isinstance(c, int) for c in codes) or len(starts) < 4 * k:
                msg = [f"{name}: launchers exited {codes} after {len(starts)} rounds"]
                for g, err in enumerate(logs):
                    msg.append(f"--- node {g} stderr (tail) ---\n{tail(err)}")
                raise RuntimeError("\n".join(msg))
            return starts, elapsed
        except (OSError, ValueError) as e:
            raise RuntimeError(f"{name}: missing or bad timestamp file: {e}") from e
        finally:
            kill_leftovers(procs, f"RESTART_DIR={d}".encode())


def round_starts(name, d, events):
    """The start times of the rounds on node 0, oldest first (see the module's comment)."""
    if name == "ddplaunch":
        with open(events) as f:
            return [e["time"] for e in map(json.loads, f) if e["event"] == "workers_started"]
    with open(os.path.join(d, "starts_0")) as f:
        return [float(line) for line in f if line.strip()]


def growth(starts, k):
    """(first k round times, last k round times) in seconds."""
    times = [b - a for a, b in zip(starts, starts[1:])]
    return times[:k], times[-k:]


def row(name, starts, elapsed, k):
    first, last = growth(starts, k)
    return (f"| {name} | {len(starts)} | {elapsed:.1f} s | {statistics.median(first) * 1000:.1f} ms | "
            f"{statistics.median(last) * 1000:.1f} ms | {sum(last) / sum(first):.2f} |")


def main():
    try:
        ours, ours_elapsed = one_run("ddplaunch", ROUNDS, K)
    except RuntimeError as e:
        # ddplaunch is the subject: if it cannot run the job, the benchmark itself has failed.
        sys.stderr.write(f"{e}\n")
        sys.exit(1)
    out = ["## 2d. Restart cost over many rounds (2 nodes on loopback, a worker that fails at once)", "",
           "| launcher | rounds | whole job | median round, first K | median round, last K | last K / first K (sum) |",
           "|---|---|---|---|---|---|",
           row(f"ddplaunch (K = {K})", ours, ours_elapsed, K)]
    note = ""
    if not QUICK:
        try:
            peer, peer_elapsed = one_run("torchrun", TORCH_ROUNDS, TORCH_K)
            out.append(row(f"torchrun (K = {TORCH_K})", peer, peer_elapsed, TORCH_K))
        except RuntimeError as e:
            note = f"\n\ntorchrun could not run this job; its error:\n\n```\n{e}\n```"
    out += ["", f"One run each. Two launchers on this machine (node_rank 0 and 1, --nnodes=2 --nproc_per_node=1, a fresh "
            "free port and run id per run); the worker (bash) appends its start time to a file and exits 1, so "
            "every round fails and the job restarts until --max_restarts runs out. A round's time is the "
            "difference between consecutive rounds' starts on node 0 (ddplaunch: its event log's "
            "workers_started; torchrun: rank 0's start, noted by the worker); the ratio sums the last K rounds' times and the first "
            "K's (1.0: a round costs the same however many came before). ddplaunch: --master_addr 127.0.0.1 "
            f"--master_port PORT --node_rank g --rdzv_id ID --max_restarts {ROUNDS} --no_python. "
            + ("torchrun: not run with --quick (about 2 s a round)." if QUICK else
               f"torchrun (python -m torch.distributed.run, torch {torch_version()}): --rdzv_backend=c10d "
               f"--rdzv_endpoint=127.0.0.1:PORT --max-restarts={TORCH_ROUNDS} --no-python, otherwise its defaults; "
               "fewer rounds, as each takes about 2 s (its two one-second polls, section 2b).") + note]
    print("\n".join(out))


if __name__ == "__main__":
    main()
