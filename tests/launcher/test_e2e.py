"""End-to-end tests of the ddplaunch binary: the worker environment contract (one node, two
nodes on loopback, CUDA_VISIBLE_DEVICES, descriptor limits), argument passing (--local_rank_arg,
${local_rank}, --dry-run, output prefixes), faults (exit codes, signals, the launcher killed, a
lost node, restarts; no worker survives any of them), a PyTorch script against torchrun's
losses, and malformed invocations (exit 2, one "ddplaunch:" message, no crash).

    python -m pytest test_e2e.py --ddplaunch /path/to/ddplaunch

The PyTorch case uses the interpreter running the tests (the venv's) for PYTHON_EXEC and
torchrun. Each test is bounded by pytest-timeout and kills every process it started.
"""
import importlib.util
import os
import pty
import re
import resource
import select
import signal
import subprocess
import sys
import time

import pytest

from launches import ENV_DUMP, TIMEOUT, Launches
from pyfixtures import free_port

pytestmark = pytest.mark.timeout(300)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def lx(ddplaunch, procs, tmp_path):
    launches = Launches(ddplaunch, procs, tmp_path)
    yield launches
    launches.kill_workers()  # procs' teardown kills the launchers and everything they started


# ----------------------------------------------------------------------------- environment contract
def test_single_node_four_workers(lx):
    prog = lx.script("dump.sh", ENV_DUMP)
    rc, out, err = lx.run(["--master_port", "0", "--nproc_per_node", "4", "--no_python", prog])
    assert rc == 0, err
    for r in range(4):
        e = lx.read_env(f"env.{r}")
        assert e["RANK"] == str(r)
        assert e["LOCAL_RANK"] == str(r)
        assert e["WORLD_SIZE"] == "4"
        assert e["LOCAL_WORLD_SIZE"] == "4"
        assert e["GROUP_RANK"] == "0"
        assert e["TORCHELASTIC_USE_AGENT_STORE"] == "True"
        assert e["TORCHELASTIC_RESTART_COUNT"] == "0"
        assert e.get("TORCHELASTIC_RUN_ID")
        assert e.get("MASTER_ADDR")
        assert int(e["MASTER_PORT"]) > 0
        assert e["OMP_NUM_THREADS"] == "1"


def test_store_host_raises_its_descriptor_limit_but_not_the_workers(lx):
    # Every rank holds a connection to node 0's store: the launcher hosting it raises its
    # soft RLIMIT_NOFILE to the hard limit; workers get the limit the launcher started with.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard <= 512:
        pytest.skip(f"hard descriptor limit {hard} leaves nothing to raise")
    prog = lx.script("limits.sh", '#!/bin/sh\nulimit -Sn > "$PIDDIR/mine.$RANK"\n'
                                  'grep "Max open files" /proc/$PPID/limits > "$PIDDIR/launcher.$RANK"\n')

    def lowered():
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))

    p = lx.procs.start([lx.launcher, "--master_port", "0", "--nproc_per_node", "2", "--no_python", prog],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=lx.dir,
                       env=dict(os.environ, PIDDIR=lx.dir), preexec_fn=lowered)
    out, err = lx.communicate(p)
    assert p.returncode == 0, err
    for r in range(2):
        with open(os.path.join(lx.dir, f"mine.{r}")) as f:
            assert f.read().strip() == "256"
        with open(os.path.join(lx.dir, f"launcher.{r}")) as f:
            launcher_soft = f.read().split()[3]
        expected = "unlimited" if hard == resource.RLIM_INFINITY else str(hard)
        assert launcher_soft == expected


def two_nodes(lx, n0, n1):
    prog = lx.script("dump.sh", ENV_DUMP)
    port = str(free_port())
    ps = [lx.start(["--nnodes", "2", "--node_rank", str(i), "--master_addr", "127.0.0.1",
                    "--master_port", port, "--nproc_per_node", str(n), "--no_python", prog])
          for i, n in ((0, n0), (1, n1))]
    for p in ps:
        out, err = lx.communicate(p)
        assert p.returncode == 0, err
    envs = {r: lx.read_env(f"env.{r}") for r in range(n0 + n1)}
    for r, e in envs.items():
        assert e["RANK"] == str(r)
        assert e["WORLD_SIZE"] == str(n0 + n1)
        node = 0 if r < n0 else 1
        assert e["GROUP_RANK"] == str(node)
        assert e["LOCAL_RANK"] == str(r if node == 0 else r - n0)
    return envs


def test_two_nodes_loopback(lx):
    envs = two_nodes(lx, 2, 2)
    assert envs[2]["GROUP_RANK"] == "1"
    assert envs[3]["LOCAL_RANK"] == "1"


def test_two_nodes_heterogeneous(lx):
    envs = two_nodes(lx, 3, 1)
    assert envs[3]["GROUP_RANK"] == "1"
    assert envs[3]["WORLD_SIZE"] == "4"


def test_cuda_visible_devices_passthrough(lx):
    prog = lx.script("dump.sh", ENV_DUMP)
    rc, out, err = lx.run(["--master_port", "0", "--nproc_per_node", "2", "--no_python", prog],
                          env={"CUDA_VISIBLE_DEVICES": "3,5"})
    assert rc == 0, err
    for r in range(2):
        assert lx.read_env(f"env.{r}")["CUDA_VISIBLE_DEVICES"] == "3,5"


# ----------------------------------------------------------------------------- arguments
ARGV_DUMP = """#!/bin/bash
printf '%s\\n' "$@" > "$PIDDIR/argv.$LOCAL_RANK"
"""


def argv_of(lx, r):
    with open(os.path.join(lx.dir, f"argv.{r}")) as f:
        return f.read().splitlines()


def test_local_rank_arg(lx):
    prog = lx.script("argv.sh", ARGV_DUMP)
    rc, out, err = lx.run(["--master_port", "0", "--nproc_per_node", "2", "--local_rank_arg",
                           "--no_python", prog, "a", "b"])
    assert rc == 0, err
    for r in range(2):
        assert argv_of(lx, r) == [f"--local_rank={r}", "a", "b"]


def test_local_rank_substitution(lx):
    prog = lx.script("argv.sh", ARGV_DUMP)
    rc, out, err = lx.run(["--master_port", "0", "--nproc_per_node", "2", "--no_python", prog,
                           "--dev=cuda:${local_rank}", "${local_rank}"])
    assert rc == 0, err
    for r in range(2):
        assert argv_of(lx, r) == [f"--dev=cuda:{r}", str(r)]


def test_dry_run(lx):
    prog = lx.script("mark.sh", "#!/bin/bash\ntouch \"$PIDDIR/marker\"\n")
    rc, out, err = lx.run(["--master_port", "0", "--nproc_per_node", "2", "--dry-run", "--no_python", prog])
    assert rc == 0, err
    both = out + err
    assert prog in both
    assert "RANK=0" in both
    assert "RANK=1" in both
    # A negative check: no event says "no worker was started", so give a stray one a moment.
    time.sleep(0.3)
    assert not os.path.exists(os.path.join(lx.dir, "marker"))


def test_output_prefix(lx):
    prog = lx.script("hello.sh", "#!/bin/bash\necho hello $RANK\n")
    rc, out, err = lx.run(["--master_port", "0", "--nproc_per_node", "2", "--no_python", prog])
    assert rc == 0, err
    lines = [line.strip() for line in out.splitlines()]
    assert "[0]:hello 0" in lines
    assert "[1]:hello 1" in lines


# ----------------------------------------------------------------------------- faults
WORKER = """#!/bin/bash
echo $$ > "$PIDDIR/pid.$RANK.$TORCHELASTIC_RESTART_COUNT"
"""


def fault(lx, rank1_body, extra=(), nproc=2):
    # Rank 1 runs its body once every rank has written its pid file: the siblings the launcher must
    # stop are running (and assert_no_survivors knows them) when it fails.
    siblings = (f'for r in $(seq 0 {nproc - 1}); do\n'
                '  until [ -s "$PIDDIR/pid.$r.$TORCHELASTIC_RESTART_COUNT" ]; do sleep 0.02; done\ndone\n')
    prog = lx.script("w.sh", WORKER + 'if [ "$RANK" = 1 ]; then\n' + siblings + rank1_body + '\nfi\nsleep 30\n')
    return lx.run(["--master_port", "0", "--nproc_per_node", str(nproc), *extra, "--no_python", prog])


def test_exit_code(lx):
    rc, out, err = fault(lx, "echo 'boom tail line' >&2; exit 3")
    assert rc == 3, err
    assert "FAILED" in err
    assert "exitcode" in err
    assert "boom tail line" in err
    assert "rank" in err
    lx.assert_no_survivors()


def test_sigsegv(lx):
    rc, out, err = fault(lx, "kill -SEGV $$")
    assert rc == 139, err
    lx.assert_no_survivors()


def test_sigkill(lx):
    rc, out, err = fault(lx, "kill -KILL $$")
    assert rc == 137, err
    lx.assert_no_survivors()


def test_sigterm_ignoring_worker_is_killed(lx):
    # Rank 1 fails once rank 0 ignores SIGTERM (its file "trapped"), so that only SIGKILL ends rank 0.
    prog = lx.script("w.sh", WORKER + 'if [ "$RANK" = 1 ]; then\n'
                     '  until [ -e "$PIDDIR/trapped" ]; do sleep 0.02; done\n  exit 5\nfi\n'
                     "trap '' TERM\ntouch \"$PIDDIR/trapped\"\nwhile true; do sleep 0.1; done\n")
    t0 = time.time()
    rc, out, err = lx.run(["--master_port", "0", "--nproc_per_node", "2", "--shutdown_timeout", "1", "--no_python",
                           prog])
    assert rc == 5, err
    assert time.time() - t0 < 20  # a prompt failure + 1 s grace; without SIGKILL it never ends
    lx.assert_no_survivors()


@pytest.mark.parametrize("sig, expected", [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["sigint", "sigterm"])
def test_signal_to_launcher(lx, sig, expected):
    prog = lx.script("w.sh", WORKER + "sleep 30\n")
    p = lx.start(["--master_port", "0", "--nproc_per_node", "2", "--shutdown_timeout", "2", "--no_python", prog])
    lx.wait_pids(2)
    os.kill(p.pid, sig)
    out, err = lx.communicate(p)
    assert p.returncode == expected, err
    lx.assert_no_survivors()


# A worker that notes its pid, session and process group, leaves a child in its session, and sleeps.
SESSION_WORKER = """import os, subprocess, sys, time
d, r = os.environ["PIDDIR"], os.environ["RANK"]
child = subprocess.Popen(["sleep", "60"])
with open(f"{d}/session.{r}", "w") as f:
    f.write(f"{os.getpid()} {os.getsid(0)} {os.getpgid(0)} {os.getsid(child.pid)}")
with open(f"{d}/pid.{r}.child", "w") as f:
    f.write(str(child.pid))
with open(f"{d}/pid.{r}", "w") as f:  # last: wait_pids(4) sees every file above written
    f.write(str(os.getpid()))
time.sleep(60)
"""


@pytest.mark.parametrize("cgroup", ["1", "0"], ids=["cgroup", "process-groups"])
def test_workers_lead_sessions_of_their_own_and_a_terminal_ctrl_c_ends_them(lx, procs, cgroup):
    # Each worker is a session of its own, as torchrun's (start_new_session): one scheduler
    # autogroup each, not the launcher's and its shell's. A terminal's Ctrl-C goes to the
    # launcher's process group only, so the launcher forwards it; nothing is left after.
    prog = lx.script("w.py", SESSION_WORKER)
    p = lx.start(["--master_port", "0", "--nproc_per_node", "2", "--shutdown_timeout", "2", "--no_python",
                  sys.executable, prog], env={"DDPLAUNCH_CGROUP": cgroup})
    lx.wait_pids(4)
    launcher_session = os.getsid(p.pid)
    assert launcher_session == p.pid  # started in a session of its own, as a terminal's job is
    for rank in range(2):
        with open(os.path.join(lx.dir, f"session.{rank}")) as f:
            pid, sid, pgid, child_sid = map(int, f.read().split())
        assert (sid, pgid, child_sid) == (pid, pid, pid), f"rank {rank}"
        assert sid != launcher_session
    os.killpg(p.pid, signal.SIGINT)  # what the terminal does with Ctrl-C
    out, err = lx.communicate(p)
    assert p.returncode == 130, err
    lx.assert_no_survivors()
    procs.assert_no_survivors(timeout=5)


def test_a_worker_reads_the_launchers_terminal(lx):
    # The launcher in the foreground of a terminal (pty.fork: a session of its own, the pty its
    # controlling terminal), as typed in a shell. A worker reading that terminal (breakpoint() in a
    # rank) gets the line: it is not its controlling terminal. In a background group of the
    # launcher's session it was stopped by SIGTTIN instead, and the job hung.
    prog = lx.script("w.sh", WORKER + "read -r line\necho \"got:$line\"\n")
    pid, terminal = pty.fork()
    if pid == 0:
        os.environ["PIDDIR"] = lx.dir
        os.execv(lx.launcher, [lx.launcher, "--master_port", "0", "--nproc_per_node", "1", "--no_python", prog])
    try:
        lx.wait_pids(1)
        os.write(terminal, b"typed\n")
        out, deadline = b"", time.monotonic() + 30
        while b"got:typed" not in out and time.monotonic() < deadline:
            if select.select([terminal], [], [], deadline - time.monotonic())[0]:
                out += os.read(terminal, 4096)
        assert b"got:typed" in out, out.decode(errors="replace")
        _, status = os.waitpid(pid, 0)  # the worker exits 0 once it has read: the launcher ends
        assert os.waitstatus_to_exitcode(status) == 0, out.decode(errors="replace")
        pid = 0
    finally:
        if pid:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(terminal)
    lx.assert_no_survivors()


def test_launcher_sigkill_kills_workers(lx):
    prog = lx.script("w.sh", WORKER + "sleep 30\n")
    p = lx.start(["--master_port", "0", "--nproc_per_node", "2", "--no_python", prog])
    lx.wait_pids(2)
    os.kill(p.pid, signal.SIGKILL)
    lx.communicate(p)
    lx.assert_no_survivors(timeout=5)


def test_restart_recovers(lx):
    body = '[ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && exit 4; exit 0'
    prog = lx.script("w.sh", WORKER + 'if [ "$RANK" = 1 ]; then ' + body + '; fi\nexit 0\n')
    for _ in range(3):  # a stale attempt-0 event once broke the restart now and then
        rc, out, err = lx.run(["--master_port", "0", "--nproc_per_node", "2", "--max_restarts", "1", "--no_python",
                               prog])
        assert rc == 0, err
        assert "restarting the job (restart 1 of 1)" in err
    lx.assert_no_survivors()


def two_launchers(lx):
    prog = lx.script("w.sh", WORKER + "sleep 30\n")
    port = str(free_port())
    common = ["--nnodes", "2", "--master_port", port, "--nproc_per_node", "2", "--heartbeat_timeout", "2",
              "--shutdown_timeout", "2", "--no_python", prog]
    p0 = lx.start(["--node_rank", "0"] + common)
    p1 = lx.start(["--node_rank", "1"] + common)
    lx.wait_pids(4)
    return p0, p1


def test_non_master_launcher_killed(lx):
    p0, p1 = two_launchers(lx)
    os.kill(p1.pid, signal.SIGKILL)
    t0 = time.time()
    out, err = lx.communicate(p0)
    assert p0.returncode == 1, err
    assert "lost node 1" in err
    assert time.time() - t0 < 20
    lx.communicate(p1)
    lx.assert_no_survivors()


def test_master_launcher_killed(lx):
    p0, p1 = two_launchers(lx)
    os.kill(p0.pid, signal.SIGKILL)
    out, err = lx.communicate(p1)
    assert p1.returncode == 1, err
    assert "node 0" in err
    lx.communicate(p0)
    lx.assert_no_survivors()


def test_failure_without_restarts(lx):
    body = '[ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && exit 4; exit 0'
    prog = lx.script("w.sh", WORKER + 'if [ "$RANK" = 1 ]; then ' + body + '; fi\nexit 0\n')
    rc, out, err = lx.run(["--master_port", "0", "--nproc_per_node", "2", "--no_python", prog])
    assert rc == 4, err
    lx.assert_no_survivors()


# ----------------------------------------------------------------------------- PyTorch
LOSS = re.compile(r"step (\d+) loss ([0-9.eE+-]+)")


def losses(text, prefix):
    res = []
    for line in text.splitlines():
        line = line.strip()
        if prefix:
            if not line.startswith("[0]:"):
                continue
            line = line[len("[0]:"):]
        m = LOSS.fullmatch(line.strip())
        if m:
            res.append((int(m.group(1)), m.group(2)))
    return res


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="no torch in this interpreter")
def test_train_ddp_matches_torchrun(lx):
    script = os.path.join(REPO, "examples", "train_ddp.py")
    port = str(free_port())
    env = {"PYTHON_EXEC": sys.executable}
    ps = [lx.start(["--nnodes", "2", "--node_rank", str(i), "--master_addr", "127.0.0.1", "--master_port", port,
                    "--nproc_per_node", "2", script, "--steps", "5"], env=env) for i in (0, 1)]
    outs = []
    for p in ps:
        out, err = lx.communicate(p)
        assert p.returncode == 0, err
        outs.append(out)
    ours = losses(outs[0], prefix=True)
    e = dict(os.environ)
    e.pop("OMP_NUM_THREADS", None)
    rc, ref_out, ref_err, _ = lx.procs.run([sys.executable, "-m", "torch.distributed.run", "--nnodes", "1",
                                            "--nproc_per_node", "4", "--master_port", str(free_port()), script,
                                            "--steps", "5"], timeout=TIMEOUT, env=e)
    assert rc == 0, ref_err
    theirs = losses(ref_out, prefix=False)
    assert len(ours) == 5, outs[0]
    assert ours == theirs


# ----------------------------------------------------------------------------- malformed invocations
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


def test_enough_malformed_invocations():
    assert len(BAD) >= 30


@pytest.mark.parametrize("args", BAD, ids=lambda args: " ".join(args) or "no arguments")
def test_malformed_invocation(lx, args):
    rc, out, err = lx.run(args, timeout=20)
    assert rc == 2, err
    assert err.startswith("ddplaunch:"), err
    assert "terminate" not in err
    assert "Traceback" not in err
