"""End-to-end tests of the worker runtime through the real binaries: examples/train started by
ddplaunch, by the venv's torchrun, by itself (--nprocs), and by hand with the legacy --local_rank
or Slurm per-task variables against a standalone ddplaunch-store.

    python -m pytest test_train_e2e.py::TestInitPaths --train TRAIN --ddplaunch DDPLAUNCH --store STORE

The classes are the groups ctest runs one by one (Converges, InitPaths, Faults, Checkpoint,
BadInput); torchrun is the one next to the interpreter running the tests (the venv's). Every run
is bounded in time. Every process a test starts carries a private marker variable (inherited by
launchers' workers and spawned ranks), so each test can check through /proc that nothing it
started is still alive, and kill whatever is.
"""
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from pyfixtures import Processes, free_port, note, port_is_free

pytestmark = pytest.mark.timeout(800)

RUN_TIMEOUT = 240  # seconds for one training run; generous because the 2 cores are shared
FINAL = re.compile(r"final: loss=(\S+) accuracy=([0-9.]+)")
# Variables a launcher may have left in our own environment; each run sets only its own.
LAUNCH_VARS = re.compile(r"^(RANK|WORLD_SIZE|LOCAL_RANK|LOCAL_WORLD_SIZE|GROUP_RANK|GROUP_WORLD_SIZE|ROLE_.*|"
                         r"MASTER_ADDR|MASTER_PORT|TORCHELASTIC_.*|SLURM_.*|DDPLAUNCH_.*|OMP_NUM_THREADS)$")


def final_of(text, prefix=""):
    """The last non-empty line (of those starting with `prefix`, prefix removed) if it is the
    final line, else None."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if prefix:
        lines = [line[len(prefix):].strip() for line in lines if line.startswith(prefix)]
    if lines and FINAL.fullmatch(lines[-1]):
        return lines[-1]
    return None


def accuracy(line):
    return float(FINAL.fullmatch(line).group(2))


class Runs:
    """Starts the trainer (alone, under ddplaunch, by hand) and stores for one test."""

    def __init__(self, procs, directory, binaries, start_store=None):
        self.procs = procs
        self.dir = str(directory)
        self.train, self.ddplaunch_binary = binaries
        self.start_store = start_store

    def env(self, extra=None):
        e = {k: v for k, v in os.environ.items() if not LAUNCH_VARS.match(k)}
        e.update(extra or {})
        return e

    def start(self, cmd, env=None, name=None):
        """Starts cmd in its own session, stdout/stderr to files <name>.out/.err in the test's
        directory (several processes at once cannot fill a pipe)."""
        with open(os.path.join(self.dir, name + ".out"), "w") as out, \
                open(os.path.join(self.dir, name + ".err"), "w") as err:
            return self.procs.start(cmd, env=self.env(env), stdout=out, stderr=err, text=True, cwd=self.dir)

    def run_cmd(self, cmd, env=None, timeout=RUN_TIMEOUT):
        return self.procs.run(cmd, timeout=timeout, env=self.env(env), cwd=self.dir)

    def output(self, name, stream):
        with open(os.path.join(self.dir, f"{name}.{stream}")) as f:
            return f.read()

    def wait_all(self, procs, timeout=RUN_TIMEOUT):
        end = time.monotonic() + timeout
        for p in procs:
            try:
                p.wait(timeout=max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                pytest.fail(f"{p.args} did not finish within {timeout} s")

    def store(self, port=0):
        """A standalone store on 127.0.0.1:port (0: an ephemeral one), listening."""
        return self.start_store(port=port)

    # --- training runs ---------------------------------------------------------------------
    def ddplaunch(self, launcher_args, train_args, env=None, timeout=RUN_TIMEOUT):
        return self.run_cmd([self.ddplaunch_binary, "--master_port", "0", "--nproc_per_node=2", *launcher_args,
                             "--no_python", self.train, *train_args], env=env, timeout=timeout)

    def ddplaunch_final(self, launcher_args, train_args, env=None):
        rc, out, err, _ = self.ddplaunch(launcher_args, train_args, env)
        assert rc == 0, f"stdout:\n{out}\nstderr:\n{err}"
        line = final_of(out, "[0]:")
        assert line is not None, f"rank 0's last line is not the final line:\n{out}"
        return line

    def by_hand(self, per_rank_env, per_rank_args, common_args):
        """Starts one train per entry of per_rank_env (with OMP_NUM_THREADS=1, as every launcher
        sets), waits for all and returns their return codes; outputs are in rank<i>.out/.err."""
        procs = [self.start([self.train, *per_rank_args[i], *common_args], {"OMP_NUM_THREADS": "1", **e},
                            name=f"rank{i}") for i, e in enumerate(per_rank_env)]
        self.wait_all(procs)
        return [p.returncode for p in procs]

    def final_by_hand(self, per_rank_env, common_args, per_rank_args=None):
        per_rank_args = per_rank_args or [[] for _ in per_rank_env]
        codes = self.by_hand(per_rank_env, per_rank_args, common_args)
        report = "".join(f"\n--- rank {i} stdout:\n{self.output(f'rank{i}', 'out')}\n--- rank {i} stderr:\n"
                         f"{self.output(f'rank{i}', 'err')}" for i in range(len(codes)))
        assert codes == [0] * len(codes), report
        line = final_of(self.output("rank0", "out"))
        assert line is not None, report
        return line


@pytest.fixture
def runs(procs, tmp_path, train, ddplaunch, start_store):
    return Runs(procs, tmp_path, (train, ddplaunch), start_store)


# ----------------------------------------------------------------------------- Converges
class TestConverges:
    @pytest.mark.parametrize("train_args", [[], ["--comm-hook", "bf16"], ["--bf16"]],
                             ids=["ddplaunch_two_ranks", "bf16_comm_hook", "bf16_autocast"])
    def test_converges(self, runs, train_args):
        t0 = time.monotonic()
        line = runs.ddplaunch_final([], ["--epochs", "3", *train_args])
        note(f"{' '.join(train_args) or 'default'}: {line} ({time.monotonic() - t0:.1f} s)")
        assert accuracy(line) >= 0.9, line
        runs.procs.assert_no_survivors()


# ----------------------------------------------------------------------------- InitPaths
# The CPU backend explicitly: on a GPU host "auto" would pick NCCL and the comparison with the CPU
# reference would not hold.
COMMON = ["--epochs", "2", "--seed", "7", "--backend", "cpu"]


@pytest.fixture(scope="class")
def reference(train, ddplaunch, tmp_path_factory):
    """The final line of two ranks under ddplaunch (torchrun environment) for COMMON."""
    procs = Processes()
    try:
        line = Runs(procs, tmp_path_factory.mktemp("reference"), (train, ddplaunch)).ddplaunch_final([], COMMON)
        note(f"reference (ddplaunch): {line}")
        procs.assert_no_survivors()
        yield line
    finally:
        procs.kill_all()


class TestInitPaths:
    """Every way of starting two ranks gives the same final line for the same seed and epochs."""

    @staticmethod
    def check_same(runs, reference, line, path):
        assert line is not None
        note(f"{path}: {line}")
        assert line == reference, f"{path} differs from ddplaunch (torchrun environment)"
        runs.procs.assert_no_survivors()

    @pytest.mark.parametrize("launcher_args", [[], ["--use_env=false"], ["--local_rank_arg"]],
                             ids=["torchrun_env", "use_env_false", "local_rank_arg"])
    def test_ddplaunch(self, runs, reference, launcher_args):
        self.check_same(runs, reference, runs.ddplaunch_final(launcher_args, COMMON),
                        " ".join(["ddplaunch", *launcher_args]))

    def test_real_torchrun(self, runs, reference):
        torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
        if not os.path.exists(torchrun):
            pytest.skip(f"no torchrun next to {sys.executable}")
        rc, out, err, _ = runs.run_cmd([torchrun, "--nproc_per_node", "2", "--master_port", str(free_port()),
                                        "--no-python", runs.train, *COMMON])
        assert rc == 0, f"stdout:\n{out}\nstderr:\n{err}"
        self.check_same(runs, reference, final_of(out), "torchrun")

    def test_spawn(self, runs, reference):
        rc, out, err, _ = runs.run_cmd([runs.train, "--nprocs", "2", *COMMON])
        assert rc == 0, f"stdout:\n{out}\nstderr:\n{err}"
        self.check_same(runs, reference, final_of(out), "train --nprocs 2")

    def test_legacy_local_rank_by_hand(self, runs, reference):
        # torch.distributed.launch before torchrun: --local_rank in argv, no LOCAL_RANK variable.
        store = runs.store()
        envs = [{"RANK": str(r), "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(store.port)}
                for r in range(2)]
        line = runs.final_by_hand(envs, COMMON, per_rank_args=[[f"--local_rank={r}"] for r in range(2)])
        assert "backend cpu" in runs.output("rank0", "out")
        store.stop()
        self.check_same(runs, reference, line, "legacy --local_rank")

    @staticmethod
    def slurm_env(job_id, port=None):
        envs = []
        for r in range(2):
            e = {"SLURM_PROCID": str(r), "SLURM_NTASKS": "2", "SLURM_LOCALID": str(r), "SLURM_NODEID": "0",
                 "SLURM_JOB_NODELIST": "localhost", "SLURM_TASKS_PER_NODE": "2", "SLURM_JOB_NUM_NODES": "1",
                 "SLURM_JOB_ID": str(job_id)}
            if port is not None:
                e["MASTER_PORT"] = str(port)
            envs.append(e)
        return envs

    def test_slurm_variables_by_hand(self, runs, reference):
        # What srun leaves each task; the runtime connects to the first host of the node list, so
        # someone must host the store there: ddplaunch-store.
        store = runs.store()
        line = runs.final_by_hand(self.slurm_env(4242, store.port), COMMON)
        store.stop()
        self.check_same(runs, reference, line, "slurm variables")

    def test_slurm_port_from_job_id(self, runs, reference):
        # Without MASTER_PORT the port is 15000 + SLURM_JOB_ID % 20000: pick a job id whose port is free.
        job = next(j for j in range(int(time.time()) % 20000, 10 ** 9, 7919) if port_is_free(15000 + j % 20000))
        store = runs.store(15000 + job % 20000)
        line = runs.final_by_hand(self.slurm_env(job), COMMON)
        store.stop()
        self.check_same(runs, reference, line, "slurm variables, port from SLURM_JOB_ID")


# ----------------------------------------------------------------------------- Faults
class TestFaults:
    def test_rank_killed_under_ddplaunch(self, runs):
        rc, out, err, elapsed = runs.ddplaunch(["--shutdown_timeout", "5"],
                                               ["--epochs", "3", "--crash-at-step", "5", "--crash-rank", "1"])
        assert rc == 137, f"stdout:\n{out}\nstderr:\n{err}"
        assert "FAILED" in err
        assert re.search(r"rank\s*:\s*1 \(local_rank: 1\)", err), err
        assert "SIGKILL" in err
        assert "final:" not in out
        note(f"ddplaunch exited {rc} {elapsed:.1f} s after it started")
        # The whole run (startup and 5 steps) takes a few seconds on an idle machine; a launcher
        # that waited for the collective timeout (10 min) would take far longer.
        assert elapsed < 90, err
        runs.procs.assert_no_survivors()

    def test_rank_killed_under_spawn(self, runs):
        rc, out, err, elapsed = runs.run_cmd([runs.train, "--nprocs", "2", "--backend", "cpu", "--epochs", "3", "--crash-at-step", "5",
                                              "--crash-rank", "1"])
        assert rc == 137, f"stdout:\n{out}\nstderr:\n{err}"
        assert re.search(r"spawn: rank 1 \(pid \d+\) was killed by signal 9 \(SIGKILL\)", err), err
        assert "final:" not in out
        note(f"train --nprocs 2 exited {rc} {elapsed:.1f} s after it started")
        assert elapsed < 90, err
        runs.procs.assert_no_survivors()

    def test_rank_killed_without_launcher(self, runs):
        # No launcher tears rank 0 down: it must notice on its own that rank 1 is gone.
        store = runs.store()
        envs = [{"RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2",
                 "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(store.port)} for r in range(2)]
        args = ["--backend", "cpu", "--epochs", "3", "--crash-at-step", "5", "--crash-rank", "1"]
        p0, p1 = [runs.start([runs.train, *args], {"OMP_NUM_THREADS": "1", **e}, name=f"rank{i}")
                  for i, e in enumerate(envs)]
        assert p1.wait(timeout=RUN_TIMEOUT) == -signal.SIGKILL, runs.output("rank1", "err")
        t0 = time.monotonic()
        try:
            p0.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail("rank 0 still runs 30 s after rank 1 died:\n" + runs.output("rank0", "err"))
        elapsed = time.monotonic() - t0
        err0 = runs.output("rank0", "err")
        assert p0.returncode != 0, err0
        assert "rank 1" in err0
        assert "final:" not in runs.output("rank0", "out")
        note(f"rank 0 exited {p0.returncode} {elapsed:.2f} s after rank 1 died: "
             f"{err0.strip().splitlines()[-1] if err0.strip() else ''}")
        assert elapsed < 30
        store.stop()
        runs.procs.assert_no_survivors()


# ----------------------------------------------------------------------------- Checkpoint
def resume_other_model(runs):
    """Resumes a --hidden 64 model from a --hidden 128 checkpoint; returns rank 0's stderr lines."""
    d = os.path.join(runs.dir, "d")
    runs.ddplaunch_final([], ["--epochs", "1", "--checkpoint-dir", d])
    rc, out, err, _ = runs.ddplaunch([], ["--epochs", "2", "--hidden", "64", "--checkpoint-dir", d])
    assert rc != 0, f"stdout:\n{out}\nstderr:\n{err}"
    assert "final:" not in out
    assert "FAILED" in err
    runs.procs.assert_no_survivors()
    return [line.strip()[len("[0]:"):] for line in err.splitlines() if line.strip().startswith("[0]:")]


class TestCheckpoint:
    def test_resume_matches_straight_run(self, runs):
        d1 = os.path.join(runs.dir, "d1")
        d2 = os.path.join(runs.dir, "d2")
        straight = runs.ddplaunch_final([], ["--epochs", "4", "--checkpoint-dir", d1])
        first = runs.ddplaunch_final([], ["--epochs", "2", "--checkpoint-dir", d2])
        assert os.path.exists(os.path.join(d2, "checkpoint.pt")), os.listdir(d2)
        resumed = runs.ddplaunch_final([], ["--epochs", "4", "--checkpoint-dir", d2])
        note(f"straight: {straight}; 2 epochs: {first}; resumed to 4: {resumed}")
        assert first != resumed
        assert resumed == straight
        runs.procs.assert_no_survivors()

    def test_resume_other_model_fails(self, runs):
        resume_other_model(runs)

    # One line naming the checkpoint and the parameter whose shape differs, no C++ backtrace.
    def test_resume_other_model_fails_clearly(self, runs):
        lines = resume_other_model(runs)
        assert len(lines) == 1, "\n".join(lines[:5])
        assert "checkpoint.pt" in lines[0]
        assert "in the checkpoint but" in lines[0]


# ----------------------------------------------------------------------------- BadInput
def assert_usage_error(runs, args, needle):
    rc, out, err, _ = runs.run_cmd([runs.train, *args], timeout=60)
    assert rc == 2, f"{args}: stdout:\n{out}\nstderr:\n{err}"
    lines = err.strip().splitlines()
    assert len(lines) == 1, f"{args}: expected one line on stderr, got:\n{err}"
    assert lines[0].startswith("train: "), lines[0]
    assert needle in lines[0]
    assert "final:" not in out
    return lines[0]


class TestBadInput:
    @pytest.mark.parametrize("args, needle", [(["--epochs", "-1"], "--epochs"), (["--batch-size", "0"], "--batch-size"),
                                              (["--backend", "foo"], "--backend")])
    def test_bad_flags(self, runs, args, needle):
        note(assert_usage_error(runs, args, needle)[:200])
        runs.procs.assert_no_survivors()

    # Out-of-range values name the bounds plainly (CLI11's PositiveNumber printed a 309-digit one).
    def test_bad_flag_messages_are_readable(self, runs):
        lines = [assert_usage_error(runs, args, args[0]) for args in (["--epochs", "-1"], ["--batch-size", "0"])]
        assert [line for line in lines if len(line) > 160] == []

    def test_nccl_without_gpu(self, runs):
        env = {"CUDA_VISIBLE_DEVICES": ""}  # no GPU here anyway; make sure of it
        rc, out, err, _ = runs.run_cmd([runs.train, "--backend", "nccl", "--epochs", "1"], env=env, timeout=60)
        assert rc != 0, f"stdout:\n{out}\nstderr:\n{err}"
        assert "final:" not in out
        lines = err.strip().splitlines()
        assert len(lines) == 1, f"expected one line on stderr, got:\n{err}"
        note(f"exit {rc}: {lines[0]}")
        assert "no CUDA device" in lines[0]
        assert "cpu" in lines[0]  # the fix: the cpu backend
        runs.procs.assert_no_survivors()

    def test_nprocs_under_launcher(self, runs):
        rc, out, err, _ = runs.ddplaunch([], ["--nprocs", "2", "--epochs", "1"], timeout=120)
        assert rc == 2, f"stdout:\n{out}\nstderr:\n{err}"
        assert "--nprocs 2 starts ranks itself, but a launcher already started this one" in err
        assert "--nproc_per_node" in err
        assert "final:" not in out
        runs.procs.assert_no_survivors()
