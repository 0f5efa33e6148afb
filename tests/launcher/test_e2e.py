#!/usr/bin/env python3
"""End-to-end tests of the ddplaunch binary.

    python3 test_e2e.py /path/to/ddplaunch /path/to/venv/python
"""
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

LAUNCHER = None
VENV_PY = None
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TIMEOUT = 60


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0); treat it as dead
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class Base(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="ddplaunch_e2e_")
        self.dir = self.tmp.name
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait(timeout=10)
        self.kill_pids()
        self.tmp.cleanup()

    def kill_pids(self):
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def script(self, name, body, mode=0o755):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(body)
        os.chmod(path, mode)
        return path

    def start(self, args, env=None):
        e = dict(os.environ)
        e.pop("OMP_NUM_THREADS", None)
        e.pop("CUDA_VISIBLE_DEVICES", None)
        e["PIDDIR"] = self.dir
        if env:
            e.update(env)
        p = subprocess.Popen([LAUNCHER] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             stdin=subprocess.DEVNULL, text=True, env=e, start_new_session=True,
                             cwd=self.dir)
        self.procs.append(p)
        return p

    def run_l(self, args, env=None, timeout=TIMEOUT):
        p = self.start(args, env)
        out, err = p.communicate(timeout=timeout)
        return p.returncode, out, err

    def pids(self):
        res = []
        for n in os.listdir(self.dir):
            if n.startswith("pid."):
                with open(os.path.join(self.dir, n)) as f:
                    t = f.read().strip()
                if t:
                    res.append(int(t))
        return res

    def wait_pids(self, n, timeout=20):
        end = time.time() + timeout
        while time.time() < end:
            if len(self.pids()) >= n:
                return
            time.sleep(0.05)
        self.fail(f"only {len(self.pids())} of {n} workers wrote their pid")

    def assert_no_survivors(self, timeout=5):
        end = time.time() + timeout
        while time.time() < end and any(alive(p) for p in self.pids()):
            time.sleep(0.05)
        left = [p for p in self.pids() if alive(p)]
        self.assertEqual(left, [], "worker processes survived the launcher")

    def read_env(self, path):
        env = {}
        with open(path) as f:
            for line in f.read().split("\0"):
                if "=" in line:
                    k, v = line.split("=", 1)
                    env[k] = v
        return env


ENV_DUMP = """#!/bin/bash
env -0 > "$PIDDIR/env.$RANK"
"""


class EnvContract(Base):
    def test_single_node_four_workers(self):
        prog = self.script("dump.sh", ENV_DUMP)
        rc, out, err = self.run_l(["--master_port", "0", "--nproc_per_node", "4", "--no_python", prog])
        self.assertEqual(rc, 0, err)
        for r in range(4):
            e = self.read_env(os.path.join(self.dir, f"env.{r}"))
            self.assertEqual(e["RANK"], str(r))
            self.assertEqual(e["LOCAL_RANK"], str(r))
            self.assertEqual(e["WORLD_SIZE"], "4")
            self.assertEqual(e["LOCAL_WORLD_SIZE"], "4")
            self.assertEqual(e["GROUP_RANK"], "0")
            self.assertEqual(e["TORCHELASTIC_USE_AGENT_STORE"], "True")
            self.assertEqual(e["TORCHELASTIC_RESTART_COUNT"], "0")
            self.assertTrue(e.get("TORCHELASTIC_RUN_ID"))
            self.assertTrue(e.get("MASTER_ADDR"))
            self.assertTrue(int(e["MASTER_PORT"]) > 0)
            self.assertEqual(e["OMP_NUM_THREADS"], "1")

    def test_store_host_raises_its_descriptor_limit_but_not_the_workers(self):
        # Every rank holds a connection to node 0's store: the launcher hosting it raises its
        # soft RLIMIT_NOFILE to the hard limit; workers get the limit the launcher started with.
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard != resource.RLIM_INFINITY and hard <= 512:
            self.skipTest(f"hard descriptor limit {hard} leaves nothing to raise")
        prog = self.script("limits.sh", '#!/bin/sh\nulimit -Sn > "$PIDDIR/mine.$RANK"\n'
                                        'grep "Max open files" /proc/$PPID/limits > "$PIDDIR/launcher.$RANK"\n')
        lowered = lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
        p = subprocess.Popen([LAUNCHER, "--master_port", "0", "--nproc_per_node", "2", "--no_python", prog],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=self.dir,
                             env=dict(os.environ, PIDDIR=self.dir), preexec_fn=lowered, start_new_session=True)
        self.procs.append(p)
        out, err = p.communicate(timeout=TIMEOUT)
        self.assertEqual(p.returncode, 0, err)
        for r in range(2):
            with open(os.path.join(self.dir, f"mine.{r}")) as f:
                self.assertEqual(f.read().strip(), "256")
            with open(os.path.join(self.dir, f"launcher.{r}")) as f:
                launcher_soft = f.read().split()[3]
            expected = "unlimited" if hard == resource.RLIM_INFINITY else str(hard)
            self.assertEqual(launcher_soft, expected)

    def _two_nodes(self, n0, n1):
        prog = self.script("dump.sh", ENV_DUMP)
        port = str(free_port())
        ps = [self.start(["--nnodes", "2", "--node_rank", str(i), "--master_addr", "127.0.0.1",
                          "--master_port", port, "--nproc_per_node", str(n), "--no_python", prog])
              for i, n in ((0, n0), (1, n1))]
        for p in ps:
            out, err = p.communicate(timeout=TIMEOUT)
            self.assertEqual(p.returncode, 0, err)
        envs = {r: self.read_env(os.path.join(self.dir, f"env.{r}")) for r in range(n0 + n1)}
        for r, e in envs.items():
            self.assertEqual(e["RANK"], str(r))
            self.assertEqual(e["WORLD_SIZE"], str(n0 + n1))
            node = 0 if r < n0 else 1
            self.assertEqual(e["GROUP_RANK"], str(node))
            self.assertEqual(e["LOCAL_RANK"], str(r if node == 0 else r - n0))
        return envs

    def test_two_nodes_loopback(self):
        envs = self._two_nodes(2, 2)
        self.assertEqual(envs[2]["GROUP_RANK"], "1")
        self.assertEqual(envs[3]["LOCAL_RANK"], "1")

    def test_two_nodes_heterogeneous(self):
        envs = self._two_nodes(3, 1)
        self.assertEqual(envs[3]["GROUP_RANK"], "1")
        self.assertEqual(envs[3]["WORLD_SIZE"], "4")

    def test_cuda_visible_devices_passthrough(self):
        prog = self.script("dump.sh", ENV_DUMP)
        rc, out, err = self.run_l(["--master_port", "0", "--nproc_per_node", "2", "--no_python", prog],
                                  env={"CUDA_VISIBLE_DEVICES": "3,5"})
        self.assertEqual(rc, 0, err)
        for r in range(2):
            self.assertEqual(self.read_env(os.path.join(self.dir, f"env.{r}"))["CUDA_VISIBLE_DEVICES"], "3,5")


ARGV_DUMP = """#!/bin/bash
printf '%s\\n' "$@" > "$PIDDIR/argv.$LOCAL_RANK"
"""


class Args(Base):
    def argv(self, r):
        with open(os.path.join(self.dir, f"argv.{r}")) as f:
            return f.read().splitlines()

    def test_local_rank_arg(self):
        prog = self.script("argv.sh", ARGV_DUMP)
        rc, out, err = self.run_l(["--master_port", "0", "--nproc_per_node", "2", "--local_rank_arg",
                                   "--no_python", prog, "a", "b"])
        self.assertEqual(rc, 0, err)
        for r in range(2):
            self.assertEqual(self.argv(r), [f"--local_rank={r}", "a", "b"])

    def test_local_rank_substitution(self):
        prog = self.script("argv.sh", ARGV_DUMP)
        rc, out, err = self.run_l(["--master_port", "0", "--nproc_per_node", "2", "--no_python", prog,
                                   "--dev=cuda:${local_rank}", "${local_rank}"])
        self.assertEqual(rc, 0, err)
        for r in range(2):
            self.assertEqual(self.argv(r), [f"--dev=cuda:{r}", str(r)])

    def test_dry_run(self):
        prog = self.script("mark.sh", "#!/bin/bash\ntouch \"$PIDDIR/marker\"\n")
        rc, out, err = self.run_l(["--master_port", "0", "--nproc_per_node", "2", "--dry-run",
                                   "--no_python", prog])
        self.assertEqual(rc, 0, err)
        both = out + err
        self.assertIn(prog, both)
        self.assertIn("RANK=0", both)
        self.assertIn("RANK=1", both)
        time.sleep(0.3)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "marker")))

    def test_output_prefix(self):
        prog = self.script("hello.sh", "#!/bin/bash\necho hello $RANK\n")
        rc, out, err = self.run_l(["--master_port", "0", "--nproc_per_node", "2", "--no_python", prog])
        self.assertEqual(rc, 0, err)
        lines = [l.strip() for l in out.splitlines()]
        self.assertIn("[0]:hello 0", lines)
        self.assertIn("[1]:hello 1", lines)


WORKER = """#!/bin/bash
echo $$ > "$PIDDIR/pid.$RANK.$TORCHELASTIC_RESTART_COUNT"
"""


class Faults(Base):
    def fault(self, rank1_body, extra=(), nproc=2):
        prog = self.script("w.sh", WORKER + 'if [ "$RANK" = 1 ]; then\n' + rank1_body +
                           '\nfi\nsleep 30\n')
        return self.run_l(["--master_port", "0", "--nproc_per_node", str(nproc), *extra,
                           "--no_python", prog])

    def test_exit_code(self):
        rc, out, err = self.fault("echo 'boom tail line' >&2; sleep 0.3; exit 3")
        self.assertEqual(rc, 3, err)
        self.assertIn("FAILED", err)
        self.assertIn("exitcode", err)
        self.assertIn("boom tail line", err)
        self.assertIn("rank", err)
        self.assert_no_survivors()

    def test_sigsegv(self):
        rc, out, err = self.fault("sleep 0.3; kill -SEGV $$")
        self.assertEqual(rc, 139, err)
        self.assert_no_survivors()

    def test_sigkill(self):
        rc, out, err = self.fault("sleep 0.3; kill -KILL $$")
        self.assertEqual(rc, 137, err)
        self.assert_no_survivors()

    def test_sigterm_ignoring_worker_is_killed(self):
        prog = self.script("w.sh", WORKER + 'if [ "$RANK" = 1 ]; then sleep 1; exit 5; fi\n'
                           "trap '' TERM\nwhile true; do sleep 0.1; done\n")
        t0 = time.time()
        rc, out, err = self.run_l(["--master_port", "0", "--nproc_per_node", "2",
                                   "--shutdown_timeout", "1", "--no_python", prog])
        self.assertEqual(rc, 5, err)
        self.assertLess(time.time() - t0, 20)  # 1 s to fail + 1 s grace; without SIGKILL it never ends
        self.assert_no_survivors()

    def _signal_launcher(self, sig, expected):
        prog = self.script("w.sh", WORKER + "sleep 30\n")
        p = self.start(["--master_port", "0", "--nproc_per_node", "2", "--shutdown_timeout", "2",
                        "--no_python", prog])
        self.wait_pids(2)
        os.kill(p.pid, sig)
        out, err = p.communicate(timeout=TIMEOUT)
        self.assertEqual(p.returncode, expected, err)
        self.assert_no_survivors()

    def test_sigint(self):
        self._signal_launcher(signal.SIGINT, 130)

    def test_sigterm(self):
        self._signal_launcher(signal.SIGTERM, 143)

    def test_launcher_sigkill_kills_workers(self):
        prog = self.script("w.sh", WORKER + "sleep 30\n")
        p = self.start(["--master_port", "0", "--nproc_per_node", "2", "--no_python", prog])
        self.wait_pids(2)
        os.kill(p.pid, signal.SIGKILL)
        p.communicate(timeout=TIMEOUT)
        self.assert_no_survivors(timeout=5)

    def test_restart_recovers(self):
        body = '[ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && exit 4; exit 0'
        prog = self.script("w.sh", WORKER + 'if [ "$RANK" = 1 ]; then ' + body + '; fi\nexit 0\n')
        for _ in range(3):  # a stale attempt-0 event once broke the restart now and then
            rc, out, err = self.run_l(["--master_port", "0", "--nproc_per_node", "2", "--max_restarts", "1",
                                       "--no_python", prog])
            self.assertEqual(rc, 0, err)
            self.assertIn("restarting the job (restart 1 of 1)", err)
        self.assert_no_survivors()

    def _two_launchers(self):
        prog = self.script("w.sh", WORKER + "sleep 30\n")
        port = str(free_port())
        common = ["--nnodes", "2", "--master_port", port, "--nproc_per_node", "2", "--heartbeat_timeout", "2",
                  "--shutdown_timeout", "2", "--no_python", prog]
        p0 = self.start(["--node_rank", "0"] + common)
        p1 = self.start(["--node_rank", "1"] + common)
        self.wait_pids(4)
        return p0, p1

    def test_non_master_launcher_killed(self):
        p0, p1 = self._two_launchers()
        os.kill(p1.pid, signal.SIGKILL)
        t0 = time.time()
        out, err = p0.communicate(timeout=TIMEOUT)
        self.assertEqual(p0.returncode, 1, err)
        self.assertIn("lost node 1", err)
        self.assertLess(time.time() - t0, 20)
        p1.communicate(timeout=TIMEOUT)
        self.assert_no_survivors()

    def test_master_launcher_killed(self):
        p0, p1 = self._two_launchers()
        os.kill(p0.pid, signal.SIGKILL)
        out, err = p1.communicate(timeout=TIMEOUT)
        self.assertEqual(p1.returncode, 1, err)
        self.assertIn("node 0", err)
        p0.communicate(timeout=TIMEOUT)
        self.assert_no_survivors()

    def test_failure_without_restarts(self):
        body = '[ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && exit 4; exit 0'
        prog = self.script("w.sh", WORKER + 'if [ "$RANK" = 1 ]; then ' + body + '; fi\nexit 0\n')
        rc, out, err = self.run_l(["--master_port", "0", "--nproc_per_node", "2", "--no_python", prog])
        self.assertEqual(rc, 4, err)
        self.assert_no_survivors()


class Torch(Base):
    LOSS = re.compile(r"step (\d+) loss ([0-9.eE+-]+)")

    def losses(self, text, prefix):
        res = []
        for line in text.splitlines():
            line = line.strip()
            if prefix:
                if not line.startswith("[0]:"):
                    continue
                line = line[len("[0]:"):]
            m = self.LOSS.fullmatch(line.strip())
            if m:
                res.append((int(m.group(1)), m.group(2)))
        return res

    def test_train_ddp_matches_torchrun(self):
        if not VENV_PY or not os.path.exists(VENV_PY):
            self.skipTest("no venv python")
        script = os.path.join(REPO, "examples", "train_ddp.py")
        port = str(free_port())
        env = {"PYTHON_EXEC": VENV_PY}
        ps = [self.start(["--nnodes", "2", "--node_rank", str(i), "--master_addr", "127.0.0.1",
                          "--master_port", port, "--nproc_per_node", "2", script, "--steps", "5"],
                         env=env) for i in (0, 1)]
        outs = []
        for i, p in enumerate(ps):
            out, err = p.communicate(timeout=TIMEOUT)
            self.assertEqual(p.returncode, 0, err)
            outs.append(out)
        ours = self.losses(outs[0], prefix=True)
        e = dict(os.environ)
        e.pop("OMP_NUM_THREADS", None)
        ref = subprocess.run([VENV_PY, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node",
                              "4", "--master_port", str(free_port()), script, "--steps", "5"],
                             capture_output=True, text=True, timeout=TIMEOUT, env=e,
                             start_new_session=True)
        self.assertEqual(ref.returncode, 0, ref.stderr)
        theirs = self.losses(ref.stdout, prefix=False)
        self.assertEqual(len(ours), 5, outs[0])
        self.assertEqual(ours, theirs)


BAD = [
    ["--bogus", "x"],
    ["--nproc_per_node=0", "x"],
    ["--nproc_per_node=abc", "x"],
    ["--nproc_per_node", "-3", "x"],
    ["--nproc_per_node", "", "x"],
    ["--nproc_per_node", "99999999999999999999", "x"],
    ["--nproc_per_node", "gpu", "x"],
    ["--node_rank", "2", "--nnodes", "2", "x"],
    ["--node_rank", "-1", "x"],
    ["--nnodes", "0", "x"],
    ["--nnodes", "3:1", "x"],
    ["--nnodes", "a:b", "x"],
    ["--nnodes", "1.5", "x"],
    ["--nnodes", "2:1:3", "x"],
    ["--master_port", "70000", "x"],
    ["--master_port", "-1", "x"],
    ["--master_port", "abc", "x"],
    ["--nnodes", "2", "--master_port", "0", "x"],
    ["--max_restarts", "-1", "x"],
    ["--max_restarts", "abc", "x"],
    [],
    ["--no_python", "-m", "x"],
    ["--rdzv_backend", "etcd", "x"],
    ["--redirects", "7", "x"],
    ["--redirects", "0:9", "x"],
    ["--tee", "x", "x"],
    ["--nproc_per_node", "2", "--local_ranks_filter", "9", "x"],
    ["--local_ranks_filter", "abc", "x"],
    ["--signals_to_handle", "SIGFOO", "x"],
    ["--monitor_interval", "0", "x"],
    ["--shutdown_timeout", "-1", "x"],
    ["--rdzv_timeout", "-5", "x"],
    ["--rdzv_endpoint", "bad host!", "x"],
    ["--rdzv_conf", "garbage", "x"],
    ["--rdzv_conf", "timeout=abc", "x"],
    ["--rdzv_conf", "foo=1", "x"],
    ["--heartbeat_timeout", "0", "x"],
    ["--master_addr", "", "x"],
    ["--master_addr", "bad host!", "/bin/true"],
    ["--local_addr", "bad host!", "/bin/true"],
    ["--rdzv_id", "", "x"],
    ["--signals_to_handle", "", "x"],
    ["--signals_to_handle", "99999999999", "x"],
    ["--log_line_prefix_template", "${foo}", "x"],
    ["--standalone", "--nnodes", "2", "x"],
    ["./nope"],
    ["--no_python", "./nope"],
    ["no-such-program-on-path"],
    ["missing_script.py"],
]


class Malformed(Base):
    def test_malformed_invocations(self):
        self.assertGreaterEqual(len(BAD), 30)
        for args in BAD:
            with self.subTest(args=args):
                rc, out, err = self.run_l(args, timeout=20)
                self.assertEqual(rc, 2, err)
                self.assertTrue(err.startswith("ddplaunch:"), err)
                self.assertNotIn("terminate", err)
                self.assertNotIn("Traceback", err)


if __name__ == "__main__":
    LAUNCHER = os.path.abspath(sys.argv[1])
    VENV_PY = os.path.abspath(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[2] else None
    unittest.main(argv=[sys.argv[0], "-v"])
