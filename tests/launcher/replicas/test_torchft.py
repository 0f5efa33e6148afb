"""TorchFT for real: 2 replica groups of train_ft.py (torchft's Manager, its DDP and Optimizer
wrappers over gloo, on the CPU), one group's rank SIGKILLed mid-training. Run as one command,
`ddplaunch --replica_groups 2` with the lighthouse it supervises, and as torchft's own layout
(torchft/torchx.py): a lighthouse and one torchrun per group, started side by side. Both must:

  * keep the other group stepping during the outage (steps committed between the kill and the
    killed group's first step after it);
  * restart the killed group only (the other group's rank keeps its pid) and have it rejoin
    (steps committed by its new process);
  * end with nothing left running.
Under ddplaunch the killed group is killed twice with --max_no_progress_restarts 1 and a
--progress_file the script writes: a group that heals counts as progress, so the breaker never
stops it. The times to rejoin and the steps each group made are printed as notes (and recorded
in docs/orchestrators/torchft.md).

torchft comes from its own venv over the project's .venv (scripts/torchft_venv.sh, which
scripts/setup.sh runs; this suite runs it too when the venv lacks torchft)."""
import os
import signal
import subprocess
import sys
import time

import pytest

from pyfixtures import free_port, note

pytestmark = pytest.mark.timeout(420)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
SCRIPT = os.path.join(HERE, "train_ft.py")
LIGHTHOUSE_ARGS = ["--min_replicas", "1", "--quorum_tick_ms", "100", "--join_timeout_ms", "10000"]
START_TIMEOUT = 240  # two groups importing torch on a loaded 2-core machine
REJOIN_TIMEOUT = 120
# A restarted rank waits this long before it joins, longer than the healthy group takes to give
# up on it (its gloo timeout, 10 s, and the lighthouse's heartbeat timeout, 5 s): the healthy
# group then steps alone whatever the machine's speed, and the outage is never too short to see.
REJOIN_DELAY = 20
RESULTS = {}


@pytest.fixture(scope="module")
def venv(pytestconfig):
    path = pytestconfig.getoption("torchft_venv") or os.path.join(ROOT, ".venv-torchft")
    python = os.path.join(path, "bin", "python")
    if subprocess.run([python, "-c", "import torchft"], capture_output=True).returncode != 0:
        made = subprocess.run([os.path.join(ROOT, "scripts", "torchft_venv.sh"), sys.prefix, path],
                              capture_output=True, text=True, timeout=900)
        if made.returncode != 0:
            pytest.fail(f"torchft could not be installed into {path}:\n{made.stdout}\n{made.stderr}")
    return path


class Steps:
    """What the ranks of train_ft.py wrote in OUT: their pids and committed steps."""

    def __init__(self, out):
        self.out = out

    def started(self, group):
        """(pid, unix time the process started) of group `group`'s rank 0, or (None, None)."""
        try:
            with open(os.path.join(self.out, f"g{group}r0.pid")) as f:
                pid, start = f.read().split()
            return int(pid), float(start)
        except FileNotFoundError:
            return None, None

    def pid(self, group):
        return self.started(group)[0]

    def lines(self, group):
        """[(time, step, pid)] of group `group`'s rank 0, in order."""
        try:
            with open(os.path.join(self.out, f"g{group}r0.steps")) as f:
                rows = [line.split() for line in f]
        except FileNotFoundError:
            return []
        return [(float(t), int(s), int(p)) for t, s, p in (r for r in rows if len(r) == 3)]

    def of(self, group, pid):
        return [row for row in self.lines(group) if row[2] == pid]


def wait_for(what, predicate, timeout, alive=None):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        if alive and not alive():
            pytest.fail(f"the job ended while waiting for {what}")
        time.sleep(0.1)  # the workers write files; no event tells us
    pytest.fail(f"timed out after {timeout} s waiting for {what}")


def kill_and_rejoin(steps, running):
    """SIGKILLs group 1's rank 0; returns the measures once its new process has committed a step."""
    old = steps.pid(1)
    before = steps.of(1, old)
    other_pid = steps.pid(0)
    t_kill = time.time()
    os.kill(old, signal.SIGKILL)
    wait_for("group 1 to rejoin", lambda: steps.pid(1) not in (None, old) and steps.of(1, steps.pid(1)),
             REJOIN_TIMEOUT, running)
    new, started = steps.started(1)
    first = steps.of(1, new)[0]
    during = [row for row in steps.lines(0) if t_kill < row[0] < first[0]]
    assert during, "group 0 committed no step while group 1 was down"
    assert steps.pid(0) == other_pid, "group 0 was restarted too"
    return {"restart_s": started - t_kill, "rejoin_s": first[0] - t_kill - REJOIN_DELAY,
            "other_steps_during": len(during), "killed_last_step": before[-1][1], "rejoined_at_step": first[1]}


def scenario(steps, running, kills):
    wait_for("both groups to commit 10 steps", lambda: len(steps.lines(0)) >= 10 and len(steps.lines(1)) >= 10,
             START_TIMEOUT, running)
    measures = [kill_and_rejoin(steps, running)]
    for _ in range(kills - 1):
        pid = steps.pid(1)
        wait_for("group 1 to commit 5 more steps", lambda: len(steps.of(1, pid)) >= 5, REJOIN_TIMEOUT, running)
        measures.append(kill_and_rejoin(steps, running))
    # Both groups still step together after the rejoin.
    n0 = len(steps.lines(0))
    wait_for("both groups to step on", lambda: len(steps.lines(0)) > n0 + 3, REJOIN_TIMEOUT, running)
    open(os.path.join(steps.out, "stop"), "w").close()
    return measures


def record(name, measures):
    RESULTS[name] = measures[0]
    m = measures[0]
    note(f"torchft under {name}: group 1's rank started again {m['restart_s']:.1f} s after its SIGKILL and "
         f"committed its first step {m['rejoin_s']:.1f} s after it, not counting its {REJOIN_DELAY} s rejoin "
         f"delay; group 0 "
         f"committed {m['other_steps_during']} steps meanwhile; group 1 died after step {m['killed_last_step']} "
         f"and rejoined at step {m['rejoined_at_step']} (recovered from group 0)")


def logs(directory):
    text = []
    for name in ("stderr", "stdout"):
        path = os.path.join(directory, name)
        if os.path.exists(path):
            with open(path, errors="replace") as f:
                text.append(f.read()[-4000:])
    return "\n".join(text)


def test_ddplaunch_replica_groups_train_through_a_killed_group(ddplaunch, procs, venv, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    env = dict(os.environ, PYTHON_EXEC=os.path.join(venv, "bin", "python"))
    lighthouse = " ".join([os.path.join(venv, "bin", "torchft_lighthouse"), *LIGHTHOUSE_ARGS])
    cmd = [ddplaunch, "--replica_groups", "2", "--nproc_per_node", "1", "--master_port", str(free_port()),
           "--lighthouse", lighthouse, "--lighthouse_port", str(free_port()),
           "--max_no_progress_restarts", "1", "--progress_file", str(out / "step.txt"),
           SCRIPT, "--out", str(out), "--rejoin_delay", str(REJOIN_DELAY)]
    with open(tmp_path / "stdout", "w") as o, open(tmp_path / "stderr", "w") as e:
        p = procs.start(cmd, env=env, stdout=o, stderr=e, cwd=tmp_path)
    steps = Steps(str(out))
    try:
        measures = scenario(steps, lambda: p.poll() is None, kills=2)
        p.wait(timeout=60)
    except BaseException:
        print(logs(tmp_path))
        raise
    err = logs(tmp_path)
    assert p.returncode == 0, err
    with open(tmp_path / "stderr", errors="replace") as f:
        text = f.read()
    assert "ddplaunch[replica 1]: restarting the job (restart 2 of 10)" in text
    assert "ddplaunch[replica 0]: restarting" not in text
    # The round that healed and was killed again made progress: the breaker (K = 1) let it restart.
    assert ("ddplaunch[replica 1]: progress in round 1: advanced (0 of 1 restarts in a row without progress)"
            in text), text[-4000:]
    record("ddplaunch --replica_groups", measures)
    procs.assert_no_survivors()


def test_torchrun_layout_trains_through_a_killed_group(procs, venv, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    python = os.path.join(venv, "bin", "python")
    port, base = free_port(), free_port()
    env = dict(os.environ, TORCHFT_LIGHTHOUSE=f"http://localhost:{port}", NUM_REPLICA_GROUPS="2")
    files = []
    started = []
    lighthouse_log = open(tmp_path / "lighthouse", "w")
    files.append(lighthouse_log)
    started.append(procs.start([os.path.join(venv, "bin", "torchft_lighthouse"), *LIGHTHOUSE_ARGS,
                                "--bind", f"[::]:{port}"], env=env, stdout=lighthouse_log, stderr=lighthouse_log))
    for i in range(2):
        log = open(tmp_path / f"torchrun{i}", "w")
        files.append(log)
        started.append(procs.start(
            [python, "-m", "torch.distributed.run", f"--master_port={base + i}", "--nnodes=1", "--nproc_per_node=1",
             "--max_restarts=10", SCRIPT, "--out", str(out), "--rejoin_delay", str(REJOIN_DELAY)],
            env=dict(env, REPLICA_GROUP_ID=str(i)), stdout=log, stderr=log, cwd=tmp_path))
    steps = Steps(str(out))
    try:
        measures = scenario(steps, lambda: all(t.poll() is None for t in started[1:]), kills=1)
        for t in started[1:]:
            t.wait(timeout=60)
            assert t.returncode == 0
    finally:
        procs.stop(started[0], grace=10)  # the lighthouse: torchft leaves it to whoever started it
        for f in files:
            f.close()
    record("2 torchruns + lighthouse", measures)
    procs.assert_no_survivors()
    if len(RESULTS) == 2:
        d, t = RESULTS["ddplaunch --replica_groups"], RESULTS["2 torchruns + lighthouse"]
        note(f"torchft, ddplaunch / torchrun (same run): restart {d['restart_s'] / t['restart_s']:.2f}, "
             f"rejoin {d['rejoin_s'] / t['rejoin_s']:.2f}")
