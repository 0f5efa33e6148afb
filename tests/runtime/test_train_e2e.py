#!/usr/bin/env python3
"""End-to-end tests of the worker runtime through the real binaries: examples/train started by
ddplaunch, by the venv's torchrun, by itself (--nprocs), and by hand with the legacy --local_rank
or Slurm per-task variables against a standalone ddplaunch-store.

    python3 test_train_e2e.py TRAIN DDPLAUNCH DDPLAUNCH_STORE [VENV_PYTHON] [unittest args...]

Every run is bounded in time. Every process a test starts carries a private marker variable
(inherited by launchers' workers and spawned ranks), so each test can check through /proc that
nothing it started is still alive, and kill whatever is.
"""
import os
import re
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import uuid

TRAIN = DDPLAUNCH = STORE = VENV_PY = None
RUN_TIMEOUT = 240  # seconds for one training run; generous because the 2 cores are shared
TAG = "DDP_TRAIN_E2E_TAG"
FINAL = re.compile(r"final: loss=(\S+) accuracy=([0-9.]+)")
# Variables a launcher may have left in our own environment; each run sets only its own.
LAUNCH_VARS = re.compile(r"^(RANK|WORLD_SIZE|LOCAL_RANK|LOCAL_WORLD_SIZE|GROUP_RANK|GROUP_WORLD_SIZE|ROLE_.*|"
                         r"MASTER_ADDR|MASTER_PORT|TORCHELASTIC_.*|SLURM_.*|DDPLAUNCH_.*|OMP_NUM_THREADS)$")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_is_free(port):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has exited
    except OSError:
        return False


def note(text):
    """A measured value (accuracy, a timing) shown in the test log."""
    print(f"  {text}", file=sys.stderr, flush=True)


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline") as f:
            return f.read().replace("\0", " ").strip()
    except OSError:
        return "exited"


def final_of(text, prefix=""):
    """The last non-empty line (of those starting with `prefix`, prefix removed) if it is the
    final line, else None."""
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    if prefix:
        lines = [l[len(prefix):].strip() for l in lines if l.startswith(prefix)]
    if lines and FINAL.fullmatch(lines[-1]):
        return lines[-1]
    return None


class Base(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="ddp_train_e2e_")
        self.dir = self.tmp.name
        self.tag = uuid.uuid4().hex
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass  # already gone between poll() and killpg()
                p.wait(timeout=10)
            for stream in (p.stdout, p.stderr):
                if stream:
                    stream.close()
        for pid in self.tagged_pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass  # exited meanwhile
        self.tmp.cleanup()

    # --- processes -------------------------------------------------------------------------

    def env(self, extra=None):
        e = {k: v for k, v in os.environ.items() if not LAUNCH_VARS.match(k)}
        e[TAG] = self.tag
        e.update(extra or {})
        return e

    def start(self, cmd, env=None, name=None):
        """Starts cmd in its own session. With `name`, stdout/stderr go to files <name>.out/.err
        in the test's directory (several processes at once cannot fill a pipe); else to pipes."""
        if name:
            out = open(os.path.join(self.dir, name + ".out"), "w")
            err = open(os.path.join(self.dir, name + ".err"), "w")
        else:
            out = err = subprocess.PIPE
        p = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL, text=True,
                             env=self.env(env), start_new_session=True, cwd=self.dir)
        if name:
            out.close()
            err.close()
        self.procs.append(p)
        return p

    def run_cmd(self, cmd, env=None, timeout=RUN_TIMEOUT):
        p = self.start(cmd, env)
        t0 = time.monotonic()
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, err = p.communicate()
            self.fail(f"{cmd} did not finish within {timeout} s\nstdout:\n{out}\nstderr:\n{err}")
        return p.returncode, out, err, time.monotonic() - t0

    def output(self, name, stream):
        with open(os.path.join(self.dir, f"{name}.{stream}")) as f:
            return f.read()

    def wait_all(self, procs, timeout=RUN_TIMEOUT):
        end = time.monotonic() + timeout
        for p in procs:
            try:
                p.wait(timeout=max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.fail(f"{p.args} did not finish within {timeout} s")

    def start_store(self, port=0):
        """Hosts a standalone store on 127.0.0.1:port (0: an ephemeral one) and waits until it
        listens; returns (process, port)."""
        p = subprocess.Popen([STORE, "--host", "127.0.0.1", "--port", str(port), "-q"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True, env=self.env(),
                             start_new_session=True)
        self.procs.append(p)
        ready, _, _ = select.select([p.stdout], [], [], 30)
        self.assertTrue(ready, "ddplaunch-store printed no address within 30 s")
        line = p.stdout.readline()
        m = re.search(r"listening on 127\.0\.0\.1:(\d+)", line)
        self.assertTrue(m, f"unexpected first line from ddplaunch-store: {line!r}")
        return p, int(m.group(1))

    def stop_store(self, p):
        p.terminate()
        self.assertEqual(p.wait(timeout=10), 0, "ddplaunch-store did not stop cleanly on SIGTERM")

    def tagged_pids(self):
        """Live processes carrying this test's marker in their environment."""
        needle = f"{TAG}={self.tag}".encode()
        res = []
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/environ", "rb") as f:
                    if needle in f.read().split(b"\0") and alive(int(name)):
                        res.append(int(name))
            except OSError:
                continue  # exited while we looked, or not ours to read
        return res

    def assert_no_survivors(self, timeout=10):
        end = time.monotonic() + timeout
        while time.monotonic() < end and self.tagged_pids():
            time.sleep(0.1)  # no event tells us when an unrelated process exits
        left = self.tagged_pids()
        self.assertEqual(left, [], "processes started by this test are still alive: " +
                         ", ".join(f"{p} ({cmdline(p)})" for p in left))

    # --- training runs ---------------------------------------------------------------------

    def ddplaunch(self, launcher_args, train_args, env=None, timeout=RUN_TIMEOUT):
        return self.run_cmd([DDPLAUNCH, "--master_port", "0", "--nproc_per_node=2", *launcher_args, "--no_python",
                             TRAIN, *train_args], env=env, timeout=timeout)

    def ddplaunch_final(self, launcher_args, train_args, env=None):
        rc, out, err, _ = self.ddplaunch(launcher_args, train_args, env)
        self.assertEqual(rc, 0, f"stdout:\n{out}\nstderr:\n{err}")
        line = final_of(out, "[0]:")
        self.assertIsNotNone(line, f"rank 0's last line is not the final line:\n{out}")
        return line

    def accuracy(self, line):
        return float(FINAL.fullmatch(line).group(2))

    def by_hand(self, per_rank_env, per_rank_args, common_args):
        """Starts one train per entry of per_rank_env (with OMP_NUM_THREADS=1, as every launcher
        sets), waits for all and returns their return codes; outputs are in rank<i>.out/.err."""
        procs = [self.start([TRAIN, *per_rank_args[i], *common_args], {"OMP_NUM_THREADS": "1", **e}, name=f"rank{i}")
                 for i, e in enumerate(per_rank_env)]
        self.wait_all(procs)
        return [p.returncode for p in procs]

    def final_by_hand(self, per_rank_env, common_args, per_rank_args=None):
        per_rank_args = per_rank_args or [[] for _ in per_rank_env]
        codes = self.by_hand(per_rank_env, per_rank_args, common_args)
        report = "".join(f"\n--- rank {i} stdout:\n{self.output(f'rank{i}', 'out')}\n--- rank {i} stderr:\n"
                         f"{self.output(f'rank{i}', 'err')}" for i in range(len(codes)))
        self.assertEqual(codes, [0] * len(codes), report)
        line = final_of(self.output("rank0", "out"))
        self.assertIsNotNone(line, report)
        return line


class Converges(Base):
    def converges(self, train_args):
        t0 = time.monotonic()
        line = self.ddplaunch_final([], ["--epochs", "3", *train_args])
        note(f"{' '.join(train_args) or 'default'}: {line} ({time.monotonic() - t0:.1f} s)")
        self.assertGreaterEqual(self.accuracy(line), 0.9, line)
        self.assert_no_survivors()

    def test_ddplaunch_two_ranks(self):
        self.converges([])

    def test_bf16_comm_hook(self):
        self.converges(["--comm-hook", "bf16"])

    def test_bf16_autocast(self):
        self.converges(["--bf16"])


COMMON = ["--epochs", "2", "--seed", "7"]


class InitPaths(Base):
    """Every way of starting two ranks gives the same final line for the same seed and epochs."""

    @classmethod
    def setUpClass(cls):
        cls.reference = None

    def check_same(self, line, path):
        self.assertIsNotNone(line)
        if InitPaths.reference is None:
            InitPaths.reference = self.ddplaunch_final([], COMMON)
            note(f"reference (ddplaunch): {InitPaths.reference}")
        note(f"{path}: {line}")
        self.assertEqual(line, InitPaths.reference, f"{path} differs from ddplaunch (torchrun environment)")
        self.assert_no_survivors()

    def test_ddplaunch_torchrun_env(self):
        self.check_same(self.ddplaunch_final([], COMMON), "ddplaunch")

    def test_ddplaunch_use_env_false(self):
        self.check_same(self.ddplaunch_final(["--use_env=false"], COMMON), "ddplaunch --use_env=false")

    def test_ddplaunch_local_rank_arg(self):
        self.check_same(self.ddplaunch_final(["--local_rank_arg"], COMMON), "ddplaunch --local_rank_arg")

    def test_real_torchrun(self):
        torchrun = os.path.join(os.path.dirname(VENV_PY or ""), "torchrun")
        if not VENV_PY or not os.path.exists(torchrun):
            self.skipTest("no venv torchrun")
        rc, out, err, _ = self.run_cmd([torchrun, "--nproc_per_node", "2", "--master_port", str(free_port()),
                                        "--no-python", TRAIN, *COMMON])
        self.assertEqual(rc, 0, f"stdout:\n{out}\nstderr:\n{err}")
        self.check_same(final_of(out), "torchrun")

    def test_spawn(self):
        rc, out, err, _ = self.run_cmd([TRAIN, "--nprocs", "2", *COMMON])
        self.assertEqual(rc, 0, f"stdout:\n{out}\nstderr:\n{err}")
        self.check_same(final_of(out), "train --nprocs 2")

    def test_legacy_local_rank_by_hand(self):
        # torch.distributed.launch before torchrun: --local_rank in argv, no LOCAL_RANK variable.
        store, port = self.start_store()
        envs = [{"RANK": str(r), "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
                for r in range(2)]
        line = self.final_by_hand(envs, COMMON, per_rank_args=[[f"--local_rank={r}"] for r in range(2)])
        self.assertIn("backend cpu", self.output("rank0", "out"))
        self.stop_store(store)
        self.check_same(line, "legacy --local_rank")

    def slurm_env(self, job_id, port=None):
        envs = []
        for r in range(2):
            e = {"SLURM_PROCID": str(r), "SLURM_NTASKS": "2", "SLURM_LOCALID": str(r), "SLURM_NODEID": "0",
                 "SLURM_JOB_NODELIST": "localhost", "SLURM_TASKS_PER_NODE": "2", "SLURM_JOB_NUM_NODES": "1",
                 "SLURM_JOB_ID": str(job_id)}
            if port is not None:
                e["MASTER_PORT"] = str(port)
            envs.append(e)
        return envs

    def test_slurm_variables_by_hand(self):
        # What srun leaves each task; the runtime connects to the first host of the node list, so
        # someone must host the store there: ddplaunch-store.
        store, port = self.start_store()
        line = self.final_by_hand(self.slurm_env(4242, port), COMMON)
        self.stop_store(store)
        self.check_same(line, "slurm variables")

    def test_slurm_port_from_job_id(self):
        # Without MASTER_PORT the port is 15000 + SLURM_JOB_ID % 20000: pick a job id whose port is free.
        job = next(j for j in range(int(time.time()) % 20000, 10 ** 9, 7919) if port_is_free(15000 + j % 20000))
        store, _ = self.start_store(15000 + job % 20000)
        line = self.final_by_hand(self.slurm_env(job), COMMON)
        self.stop_store(store)
        self.check_same(line, "slurm variables, port from SLURM_JOB_ID")


class Faults(Base):
    def test_rank_killed_under_ddplaunch(self):
        rc, out, err, elapsed = self.ddplaunch(["--shutdown_timeout", "5"],
                                               ["--epochs", "3", "--crash-at-step", "5", "--crash-rank", "1"])
        self.assertEqual(rc, 137, f"stdout:\n{out}\nstderr:\n{err}")
        self.assertIn("FAILED", err)
        self.assertRegex(err, r"rank\s*:\s*1 \(local_rank: 1\)")
        self.assertIn("SIGKILL", err)
        self.assertNotIn("final:", out)
        note(f"ddplaunch exited {rc} {elapsed:.1f} s after it started")
        # The whole run (startup and 5 steps) takes a few seconds on an idle machine; a launcher
        # that waited for the collective timeout (10 min) would take far longer.
        self.assertLess(elapsed, 90, err)
        self.assert_no_survivors()

    def test_rank_killed_under_spawn(self):
        rc, out, err, elapsed = self.run_cmd([TRAIN, "--nprocs", "2", "--epochs", "3", "--crash-at-step", "5",
                                              "--crash-rank", "1"])
        self.assertEqual(rc, 137, f"stdout:\n{out}\nstderr:\n{err}")
        self.assertRegex(err, r"spawn: rank 1 \(pid \d+\) was killed by signal 9 \(SIGKILL\)")
        self.assertNotIn("final:", out)
        note(f"train --nprocs 2 exited {rc} {elapsed:.1f} s after it started")
        self.assertLess(elapsed, 90, err)
        self.assert_no_survivors()

    def test_rank_killed_without_launcher(self):
        # No launcher tears rank 0 down: it must notice on its own that rank 1 is gone.
        store, port = self.start_store()
        envs = [{"RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2",
                 "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)} for r in range(2)]
        args = ["--epochs", "3", "--crash-at-step", "5", "--crash-rank", "1"]
        p0, p1 = [self.start([TRAIN, *args], {"OMP_NUM_THREADS": "1", **e}, name=f"rank{i}")
                  for i, e in enumerate(envs)]
        self.assertEqual(p1.wait(timeout=RUN_TIMEOUT), -signal.SIGKILL, self.output("rank1", "err"))
        t0 = time.monotonic()
        try:
            p0.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.fail("rank 0 still runs 30 s after rank 1 died:\n" + self.output("rank0", "err"))
        elapsed = time.monotonic() - t0
        err0 = self.output("rank0", "err")
        self.assertNotEqual(p0.returncode, 0, err0)
        self.assertIn("rank 1", err0)
        self.assertNotIn("final:", self.output("rank0", "out"))
        note(f"rank 0 exited {p0.returncode} {elapsed:.2f} s after rank 1 died: "
             f"{err0.strip().splitlines()[-1] if err0.strip() else ''}")
        self.assertLess(elapsed, 30)
        self.stop_store(store)
        self.assert_no_survivors()


class Checkpoint(Base):
    def test_resume_matches_straight_run(self):
        d1 = os.path.join(self.dir, "d1")
        d2 = os.path.join(self.dir, "d2")
        straight = self.ddplaunch_final([], ["--epochs", "4", "--checkpoint-dir", d1])
        first = self.ddplaunch_final([], ["--epochs", "2", "--checkpoint-dir", d2])
        self.assertTrue(os.path.exists(os.path.join(d2, "checkpoint.pt")), os.listdir(d2))
        resumed = self.ddplaunch_final([], ["--epochs", "4", "--checkpoint-dir", d2])
        note(f"straight: {straight}; 2 epochs: {first}; resumed to 4: {resumed}")
        self.assertNotEqual(first, resumed)
        self.assertEqual(resumed, straight)
        self.assert_no_survivors()

    def resume_other_model(self):
        """Resumes a --hidden 64 model from a --hidden 128 checkpoint; returns rank 0's stderr lines."""
        d = os.path.join(self.dir, "d")
        self.ddplaunch_final([], ["--epochs", "1", "--checkpoint-dir", d])
        rc, out, err, _ = self.ddplaunch([], ["--epochs", "2", "--hidden", "64", "--checkpoint-dir", d])
        self.assertNotEqual(rc, 0, f"stdout:\n{out}\nstderr:\n{err}")
        self.assertNotIn("final:", out)
        self.assertIn("FAILED", err)
        self.assert_no_survivors()
        return [l.strip()[len("[0]:"):] for l in err.splitlines() if l.strip().startswith("[0]:")]

    def test_resume_other_model_fails(self):
        self.resume_other_model()

    # One line naming the checkpoint and the parameter whose shape differs, no C++ backtrace.
    def test_resume_other_model_fails_clearly(self):
        lines = self.resume_other_model()
        self.assertEqual(len(lines), 1, "\n".join(lines[:5]))
        self.assertIn("checkpoint.pt", lines[0])
        self.assertIn("in the checkpoint but", lines[0])


class BadInput(Base):
    def assert_usage_error(self, args, needle):
        rc, out, err, _ = self.run_cmd([TRAIN, *args], timeout=60)
        self.assertEqual(rc, 2, f"{args}: stdout:\n{out}\nstderr:\n{err}")
        lines = err.strip().splitlines()
        self.assertEqual(len(lines), 1, f"{args}: expected one line on stderr, got:\n{err}")
        self.assertTrue(lines[0].startswith("train: "), lines[0])
        self.assertIn(needle, lines[0])
        self.assertNotIn("final:", out)
        return lines[0]

    def test_bad_flags(self):
        for args, needle in ((["--epochs", "-1"], "--epochs"), (["--batch-size", "0"], "--batch-size"),
                             (["--backend", "foo"], "--backend")):
            with self.subTest(args=args):
                note(self.assert_usage_error(args, needle)[:200])
        self.assert_no_survivors()

    # Out-of-range values name the bounds plainly (CLI11's PositiveNumber printed a 309-digit one).
    def test_bad_flag_messages_are_readable(self):
        lines = [self.assert_usage_error(args, args[0]) for args in (["--epochs", "-1"], ["--batch-size", "0"])]
        self.assertEqual([l for l in lines if len(l) > 160], [])

    def test_nccl_without_gpu(self):
        env = {"CUDA_VISIBLE_DEVICES": ""}  # no GPU here anyway; make sure of it
        rc, out, err, _ = self.run_cmd([TRAIN, "--backend", "nccl", "--epochs", "1"], env=env, timeout=60)
        self.assertNotEqual(rc, 0, f"stdout:\n{out}\nstderr:\n{err}")
        self.assertNotIn("final:", out)
        lines = err.strip().splitlines()
        self.assertEqual(len(lines), 1, f"expected one line on stderr, got:\n{err}")
        note(f"exit {rc}: {lines[0]}")
        self.assertIn("no CUDA device", lines[0])
        self.assertIn("cpu", lines[0])  # the fix: the cpu backend
        self.assert_no_survivors()

    def test_nprocs_under_launcher(self):
        rc, out, err, _ = self.ddplaunch([], ["--nprocs", "2", "--epochs", "1"], timeout=120)
        self.assertEqual(rc, 2, f"stdout:\n{out}\nstderr:\n{err}")
        self.assertIn("--nprocs 2 starts ranks itself, but a launcher already started this one", err)
        self.assertIn("--nproc_per_node", err)
        self.assertNotIn("final:", out)
        self.assert_no_survivors()


if __name__ == "__main__":
    TRAIN, DDPLAUNCH, STORE = (os.path.abspath(a) for a in sys.argv[1:4])
    rest = sys.argv[4:]
    if rest and not rest[0].startswith("-") and os.path.sep in rest[0]:
        VENV_PY = os.path.abspath(rest.pop(0))
    unittest.main(argv=[sys.argv[0], "-v", *rest])
