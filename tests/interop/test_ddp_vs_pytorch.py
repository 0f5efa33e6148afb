"""Interop test: our C++ DistributedDataParallel against PyTorch's, step by step.

Run by ctest:  python -m pytest test_ddp_vs_pytorch.py --ddplaunch DDPLAUNCH --ddp-step-worker DDP_STEP_WORKER

Trains the same model from the same initial weights on the same per-rank batches twice, both
started by our launcher (``DDPLAUNCH --nproc_per_node W``, a free port per run):

  * ddp_reference.py (next to this file): the venv's torch, gloo over env://,
    torch.nn.parallel.DistributedDataParallel (run with this interpreter via PYTHON_EXEC);
  * DDP_STEP_WORKER (tests/runtime/ddp_step_worker.cpp): LibTorch, our CPU communicator,
    ddp::runtime::DistributedDataParallel.

Each rank prints "step S rank R loss L" per step and a parameter checksum at the end. Checks, for
every run: every rank printed every step; ranks' losses differ (each rank has its own data); the
checksums are identical on every rank. Against the reference of the same world size:

  world 2 and 3, default hook            losses within 1e-5 relative at every step and rank
  world 2, tiny bucket cap (many buckets) the same, and more than 3 buckets
  world 3, divide-first hook (PyTorch's reduction order: scale by 1/W, then sum)  the same
  world 2, bf16 compression hook         within 1e-2, and the loss at least halves on every rank
                                         (mean of the first 5 steps vs the last 5)

Reports the largest relative difference of each configuration (pytest's "notes" section).
OMP_NUM_THREADS=1 everywhere. Every launcher run is bounded (SIGTERM, then SIGKILL of its process
group); each test by pytest-timeout. The reference runs are shared by the tests of this file.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import pytest

from pyfixtures import Processes, free_port, note

pytestmark = pytest.mark.timeout(600)

HERE = os.path.dirname(os.path.abspath(__file__))
REFERENCE = os.path.join(HERE, "ddp_reference.py")
STEPS = 30
RUN_TIMEOUT_S = 240
EXACT_TOL = 1e-5
BF16_TOL = 1e-2

FLOAT = r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf)"
STEP_RE = re.compile(rf"step (\d+) rank (\d+) loss ({FLOAT})")
CHECKSUM_RE = re.compile(rf"checksum rank (\d+) sum ({FLOAT}) abssum ({FLOAT})")
BUCKETS_RE = re.compile(r"\bbuckets (\d+)")


class Run:
    """One launcher run: the per-rank losses, checksums and bucket count it printed."""

    def __init__(self, name: str, world: int, output: str):
        self.name, self.world, self.output = name, world, output
        self.losses: dict[tuple[int, int], float] = {}
        self.checksums: dict[int, tuple[str, str]] = {}
        for m in STEP_RE.finditer(output):
            self.losses[(int(m.group(2)), int(m.group(1)))] = float(m.group(3))
        for m in CHECKSUM_RE.finditer(output):
            self.checksums[int(m.group(1))] = (m.group(2), m.group(3))
        b = BUCKETS_RE.search(output)
        self.buckets = int(b.group(1)) if b else None

    def fail(self, why: str) -> None:
        raise AssertionError(f"{self.name}: {why}\n----- output -----\n{self.output[-6000:]}\n-----")

    def check_self(self) -> None:
        want = {(r, s) for r in range(self.world) for s in range(STEPS)}
        if set(self.losses) != want:
            self.fail(f"missing loss lines: {sorted(want - set(self.losses))[:10]}")
        if set(self.checksums) != set(range(self.world)):
            self.fail(f"checksum lines from ranks {sorted(self.checksums)}, expected 0..{self.world - 1}")
        if len(set(self.checksums.values())) != 1:
            self.fail(f"parameters differ between ranks after training: {self.checksums}")
        for r in range(1, self.world):
            if self.losses[(r, 0)] == self.losses[(0, 0)]:
                self.fail(f"rank {r} and rank 0 report the same loss at step 0; the data should differ")


def launch(procs: Processes, ddplaunch: str, name: str, world: int, program: list[str]) -> Run:
    env = dict(os.environ)
    env.update({"OMP_NUM_THREADS": "1", "PYTHON_EXEC": sys.executable, "PYTHONUNBUFFERED": "1"})
    if "GLOO_SOCKET_IFNAME" not in env and os.path.exists("/sys/class/net/lo"):
        env["GLOO_SOCKET_IFNAME"] = "lo"  # keep gloo on loopback
    cmd = [ddplaunch, "--nproc_per_node", str(world), "--master_addr", "127.0.0.1", "--master_port",
           str(free_port()), "--shutdown_timeout", "5", *program]
    t0 = time.monotonic()
    p = procs.start(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        out, _ = p.communicate(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        procs.stop(p, grace=15)
        out, _ = p.communicate()
        raise AssertionError(f"{name}: still running after {RUN_TIMEOUT_S} s (stopped)\n{out[-6000:]}")
    run = Run(name, world, out)
    if p.returncode != 0:
        run.fail(f"launcher exited with {p.returncode}: {' '.join(cmd)}")
    run.check_self()
    note(f"ddp vs pytorch: {name}: {time.monotonic() - t0:.1f} s" + (f", {run.buckets} buckets" if run.buckets else ""))
    return run


def max_rel(run: Run, ref: Run) -> tuple[float, tuple[int, int]]:
    worst, where = 0.0, (0, 0)
    for key, want in ref.losses.items():
        d = abs(run.losses[key] - want) / max(abs(want), 1e-30)
        if d > worst:
            worst, where = d, key
    return worst, where


def compare(run: Run, ref: Run, tol: float) -> None:
    worst, (rank, step) = max_rel(run, ref)
    params = max(abs(float(a) - float(b)) / max(abs(float(b)), 1e-30)
                 for a, b in zip(run.checksums[0], ref.checksums[0]))
    note(f"ddp vs pytorch: {run.name:<42} max rel. loss diff {worst:<10.3g} (rank {rank}, step {step}); "
         f"checksum diff {params:.3g}")
    if worst > tol:
        rows = [f"  step {s:2d} rank {r}: ours {run.losses[(r, s)]:.9g} torch {ref.losses[(r, s)]:.9g}"
                for s in range(STEPS) for r in range(run.world)]
        raise AssertionError(f"{run.name}: loss differs from PyTorch's by {worst:.3g} relative at rank {rank} "
                             f"step {step} (allowed {tol:g})\n" + "\n".join(rows))


STEP_ARGS = ["--steps", str(STEPS)]


@pytest.fixture(scope="module")
def reference(ddplaunch):
    """reference(world) -> the Run of torch's DDP with `world` ranks, run once per module."""
    refs: dict[int, Run] = {}
    procs = Processes()

    def get(world: int) -> Run:
        if world not in refs:
            refs[world] = launch(procs, ddplaunch, f"torch DDP, {world} ranks", world, [REFERENCE, *STEP_ARGS])
        return refs[world]

    yield get
    procs.kill_all()


@pytest.fixture
def ours(procs, ddplaunch, ddp_step_worker):
    """ours(world, name, *extra) -> the Run of our C++ DDP (ddp_step_worker) with `world` ranks."""

    def run(world: int, name: str, *extra: str) -> Run:
        return launch(procs, ddplaunch, name, world, ["--no_python", ddp_step_worker, *STEP_ARGS, *extra])

    return run


@pytest.mark.parametrize("world", [2, 3])
def test_default_hook(world, ours, reference):
    compare(ours(world, f"ours, {world} ranks"), reference(world), EXACT_TOL)


def test_many_buckets(ours, reference):
    run = ours(2, "ours, 2 ranks, --bucket-cap-mb 0.0001", "--bucket-cap-mb", "0.0001")
    if run.buckets is None or run.buckets <= 3:
        run.fail(f"expected more than 3 buckets with a 105-byte cap, got {run.buckets}")
    compare(run, reference(2), EXACT_TOL)


def test_bf16_hook(ours, reference):
    run = ours(2, "ours, 2 ranks, bf16 hook", "--comm-hook", "bf16")
    compare(run, reference(2), BF16_TOL)
    for r in range(2):
        first = sum(run.losses[(r, s)] for s in range(5)) / 5
        last = sum(run.losses[(r, s)] for s in range(STEPS - 5, STEPS)) / 5
        if not last < 0.5 * first:
            run.fail(f"rank {r}: mean loss of the first 5 steps {first:.6g}, of the last 5 {last:.6g}; "
                     "expected it to at least halve")


def test_divide_first_hook(ours, reference):
    compare(ours(3, "ours, 3 ranks, divide-first hook", "--comm-hook", "divide-first"), reference(3), EXACT_TOL)
