"""The restart loop (issue 26, part A; docs/resilience.md "Restart loops" and "Graces").

Two launchers on network-namespace hosts 10.241.0.1-2 (node 0 hosts the store), tiny shell
workers: node 0's rank fails, node 1's sleeps until it is stopped. Node 0 has the progress file on
its local disk; node 1 has none (the path does not exist there).
  * the job fails identically 3 times, --max_restarts=5 --max_no_progress_restarts=2, the progress
    file stays at 100: every node exits 123 with the breaker's summary (the rounds, what was
    measured, "do not requeue");
  * the same with the file advancing each round: no breaker; the restarts go on to --max_restarts
    and the job exits with the worker's code.
One node:
  * every restart prints its cause first; the final summary (and --summary_json) lists every round;
    a failure a restart cured is said when the job succeeds;
  * a preemption (SIGTERM to the launcher) with --preemption_grace=60: the worker checkpoints in
    about 2 s and exits, never killed at the short --shutdown_timeout; a restart after a failure
    kills a worker that ignores SIGTERM after the short --shutdown_timeout=1.
The multi-node tests need root and `ip netns` (skipped otherwise).
    pytest test_restart_loop.py --ddplaunch=/path/to/ddplaunch
"""
import json
import os
import signal
import subprocess
import time

import pytest

from pyfixtures import netns_hosts_or_skip, note

pytestmark = pytest.mark.timeout(120)

NODES = ["10.241.0.1", "10.241.0.2"]
PORT = 29571

# Rank 0 (node 0) fails the same way every round; with $ADVANCE it first writes a higher
# iteration to $PROGRESS_FILE (110, 120, ...). Rank 1 (node 1) sleeps until stopped.
FAILING_WORKER = """#!/bin/bash
if [ "$RANK" = 0 ]; then
  if [ -n "$ADVANCE" ]; then echo $(( (TORCHELASTIC_RESTART_COUNT + 1) * 10 + 100 )) > "$PROGRESS_FILE"; fi
  echo "ValueError: the same failure every round" >&2
  exit 3
fi
exec sleep 30
"""


@pytest.fixture(scope="module")
def hosts():
    yield from netns_hosts_or_skip(NODES)


def two_node_job(ddplaunch, procs, hosts, tmp_path, port, extra_by_node, env):
    """Runs the failing job on both hosts (node n adds extra_by_node[n] to its flags); returns
    [(code, stdout, stderr), ...] by node and the seconds until the last launcher exited."""
    worker = tmp_path / "worker.sh"
    worker.write_text(FAILING_WORKER)
    worker.chmod(0o755)
    started = time.monotonic()
    launchers = []
    for node, host in enumerate(hosts):
        cmd = host.cmd(ddplaunch, "--nnodes=2", f"--node_rank={node}", f"--master_addr={NODES[0]}",
                       f"--master_port={port}", "--nproc_per_node=1", "--no_python", "--shutdown_timeout=2",
                       "--heartbeat_timeout=3", "--rdzv_timeout=20", *extra_by_node[node], str(worker))
        launchers.append(procs.start(cmd, env=dict(os.environ, **env), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, cwd=str(tmp_path)))
    results = []
    for p in launchers:
        out, err = p.communicate(timeout=60)
        results.append((p.returncode, out, err))
    seconds = time.monotonic() - started
    procs.assert_no_survivors()
    return results, seconds


def test_no_progress_breaker_stops_every_node_with_123(ddplaunch, procs, hosts, tmp_path):
    progress = tmp_path / "latest_checkpointed_iteration.txt"
    progress.write_text("100\n")
    flags = ["--max_restarts=5", "--max_no_progress_restarts=2"]
    # Node 1 names a path that does not exist there: a file on node 0's local disk only.
    results, seconds = two_node_job(ddplaunch, procs, hosts, tmp_path, PORT,
                                    [flags + [f"--progress_file={progress}"],
                                     flags + [f"--progress_file={tmp_path / 'not_on_node1.txt'}"]],
                                    {"PROGRESS_FILE": str(progress)})
    for node, (code, _, err) in enumerate(results):
        note(f"no-progress breaker, node {node}: exit {code}, the last launcher gone {seconds:.2f} s after the "
             f"start; stderr:\n{err}")
        assert code == 123, f"node {node} exited {code}, not 123\n{err}"
        assert "2 restarts in a row made no progress (--max_no_progress_restarts=2)" in err, err
        assert "do not requeue" in err, err
        assert "restarting the job (restart 2 of 5)" in err, err
        assert "restart 3 of 5" not in err, err
        assert "node 0: iteration 100 (before: 100)" in err, err
        assert "node 1: nothing measured (no --progress_file here" in err, err
        # The cause comes before the restart it caused.
        cause = err.index("round 0 failed: rank 0 (local_rank: 0) on node 0")
        assert cause < err.index("restarting the job (restart 1 of 5)"), err
        assert "ValueError: the same failure every round" in err[cause:err.index("\n", cause)]
    assert seconds < 20


def test_advancing_progress_file_keeps_restarting(ddplaunch, procs, hosts, tmp_path):
    progress = tmp_path / "iteration.txt"
    progress.write_text("100\n")
    flags = ["--max_restarts=5", "--max_no_progress_restarts=2", f"--progress_file={progress}"]
    results, seconds = two_node_job(ddplaunch, procs, hosts, tmp_path, PORT + 1, [flags, flags],
                                    {"PROGRESS_FILE": str(progress), "ADVANCE": "1"})
    for node, (code, _, err) in enumerate(results):
        note(f"advancing progress, node {node}: exit {code}, the last launcher gone {seconds:.2f} s after the "
             f"start; stderr:\n{err}")
        assert code == 3, f"node {node} exited {code}, not the worker's 3\n{err}"
        assert "restarting the job (restart 5 of 5)" in err, err
        assert "made no progress" not in err, err
        assert "Every round's failure (6 rounds, oldest first)" in err, err
        assert "round 5: rank 0" in err and "[progress: advanced]" in err, err
    assert "iteration 150 (before: 140)" in results[0][2]
    assert seconds < 20


ROUNDS_WORKER = """#!/bin/bash
if [ "$TORCHELASTIC_RESTART_COUNT" -lt "$FAIL_ROUNDS" ]; then
  echo "ValueError: failure in round $TORCHELASTIC_RESTART_COUNT" >&2
  exit 3
fi
exit 0
"""


def test_restart_prints_its_cause_and_the_summary_lists_every_round(launches, tmp_path):
    worker = launches.script("rounds.sh", ROUNDS_WORKER)
    summary = tmp_path / "summary.json"
    code, _, err = launches.run(["--max_restarts=1", "--no_python", f"--summary_json={summary}", worker],
                                env={"FAIL_ROUNDS": "2"})
    note(f"restart cause, two failed rounds: exit {code}; stderr:\n{err}")
    assert code == 3, err
    cause = err.index("round 0 failed: rank 0 (local_rank: 0) on node 0")
    assert "ValueError: failure in round 0" in err[cause:err.index("\n", cause)], err
    assert cause < err.index("restarting the job (restart 1 of 1)"), err
    section = err.index("Every round's failure (2 rounds, oldest first):")
    assert "round 0: rank 0" in err[section:] and "ValueError: failure in round 1" in err[section:], err
    rounds = json.loads(summary.read_text())["rounds"]
    assert [r["round"] for r in rounds] == [0, 1]
    assert rounds[0]["cause"].endswith("exitcode 3: ValueError: failure in round 0")
    assert rounds[0]["progress"] is None

    # A failure that a restart cured is said, and kept in the JSON.
    code, _, err = launches.run(["--max_restarts=1", "--no_python", f"--summary_json={summary}", worker],
                                env={"FAIL_ROUNDS": "1"})
    note(f"restart cause, a cured failure: exit {code}; stderr:\n{err}")
    assert code == 0, err
    assert "the job succeeded after 1 failed round(s), which restarts cured:" in err, err
    assert "round 0: rank 0" in err, err
    assert [r["round"] for r in json.loads(summary.read_text())["rounds"]] == [0]


CHECKPOINT_WORKER = """#!/bin/bash
trap 'sleep 2; echo saved > "$PIDDIR/checkpoint"; exit 0' TERM
echo $$ > "$PIDDIR/pid.$RANK"
sleep 100 &
wait $!
"""


def test_preemption_gets_the_long_grace(launches, tmp_path):
    worker = launches.script("checkpoint.sh", CHECKPOINT_WORKER)
    p = launches.start(["--no_python", "--shutdown_timeout=1", "--preemption_grace=60", worker])
    launches.wait_pids(1)
    sent = time.monotonic()
    p.send_signal(signal.SIGTERM)
    _, err = launches.communicate(p)
    seconds = time.monotonic() - sent
    note(f"preemption: SIGTERM → launcher exit {p.returncode} in {seconds:.2f} s; stderr:\n{err}")
    assert p.returncode == 128 + signal.SIGTERM, err
    assert (tmp_path / "checkpoint").read_text() == "saved\n", "the worker was killed before its checkpoint"
    assert "SIGKILL after 60 s, --preemption_grace" in err, err
    assert "sending SIGKILL" not in err, err
    assert 1.8 < seconds < 10, seconds
    launches.assert_no_survivors()


STUBBORN_WORKERS = """#!/bin/bash
echo $$ > "$PIDDIR/pid.$RANK.$TORCHELASTIC_RESTART_COUNT"
if [ "$TORCHELASTIC_RESTART_COUNT" = 1 ]; then exit 0; fi
if [ "$LOCAL_RANK" = 1 ]; then
  trap '' TERM
  touch "$PIDDIR/ready"
  while true; do sleep 0.1; done
fi
while [ ! -e "$PIDDIR/ready" ]; do sleep 0.02; done
date +%s.%N > "$PIDDIR/failed_at"
exit 5
"""


def test_restart_after_a_failure_keeps_the_short_grace(launches, tmp_path):
    worker = launches.script("stubborn.sh", STUBBORN_WORKERS)
    started = time.monotonic()
    code, _, err = launches.run(["--nproc_per_node=2", "--max_restarts=1", "--no_python", "--shutdown_timeout=1",
                                 "--preemption_grace=60", worker])
    seconds = time.monotonic() - started
    note(f"restart grace: exit {code} in {seconds:.2f} s; stderr:\n{err}")
    assert code == 0, err
    assert "1 worker(s) still running 1 s after SIGTERM; sending SIGKILL" in err, err
    assert err.index("sending SIGKILL") < err.index("restarting the job (restart 1 of 1)"), err
    assert seconds < 10, seconds
    launches.assert_no_survivors()
