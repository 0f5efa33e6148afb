"""A frozen node is the root cause, not the rank whose connection to it closed (issue 41, item 6):

  * node 1's launcher and workers are stopped (SIGSTOP) while the job trains with gloo, then go on
    (SIGCONT). Node 0 finds node 1 lost (no heartbeat) and stops its own workers; they ignore the
    SIGTERM (as a script that saves a checkpoint at its next step does) and stay in their
    all_reduce until node 1, woken, kills its workers: then they fail with gloo's "Connection
    reset by peer", well after node 1 went silent. Both nodes' --summary_json name node 1 as the
    root cause (kind node_lost, the lost node and its host, since when it was silent and for how
    long when it was found), and node 0's ranks, failed after that silence began, only as ranks;
  * the same when node 0's ranks fail first, of a collective timeout shorter than the heartbeat
    timeout, while node 1 is silent but not yet counted lost.

    pytest test_frozen_node.py --ddplaunch=/path/to/ddplaunch
"""
import json
import os
import re
import signal
import socket
import sys
import time

import pytest

from pyfixtures import free_port

pytestmark = pytest.mark.timeout(120)

# Writes its pid once its first collective is done (every rank is connected), then trains; with
# COLLECTIVE_TIMEOUT, in a group whose collectives time out after that many seconds.
WORKER = '''\
import datetime, os, signal, time, warnings
import torch, torch.distributed as dist
signal.signal(signal.SIGTERM, signal.SIG_IGN)  # it would save a checkpoint at its next step
dist.init_process_group("gloo")
timeout = os.environ.get("COLLECTIVE_TIMEOUT")
group = dist.new_group(timeout=datetime.timedelta(seconds=float(timeout))) if timeout else None
warnings.warn(f"rank {dist.get_rank()}: a warning at start")
t = torch.ones(1000)
dist.all_reduce(t, group=group)
with open(os.path.join(os.environ["PIDDIR"], "pid." + os.environ["RANK"]), "w") as f:
    f.write(str(os.getpid()))
while True:
    dist.all_reduce(t, group=group)
    time.sleep(0.01)
'''


def signal_groups(pids, sig):
    """`sig` to each process group in `pids` (the launcher's session and each worker's group)."""
    for pid in pids:
        os.killpg(pid, sig)


def freeze_node_1(lx, tmp_path, heartbeat_timeout, freeze, env=None):
    """Two launchers of 2 ranks each; node 1's launcher and workers stopped for `freeze` s once
    training runs, then continued. Node 0 gives its workers time (they ignore SIGTERM) to fail of
    node 1's end; node 1 kills its own at once when it wakes. Returns (when node 1 was stopped,
    both nodes' summaries, node 0's stderr, node 1's stderr)."""
    prog = lx.script("frozen.py", WORKER, 0o644)
    port = free_port()
    nodes = [lx.start(["--nnodes=2", f"--node_rank={g}", "--nproc_per_node=2", f"--master_port={port}",
                       f"--heartbeat_timeout={heartbeat_timeout}", f"--shutdown_timeout={30 if g == 0 else 1}",
                       f"--summary_json={tmp_path / f'summary{g}.json'}", prog],
                      env=dict(env or {}, PYTHON_EXEC=sys.executable)) for g in (0, 1)]
    lx.wait_pids(4, timeout=60)
    node1 = [nodes[1].pid] + [int(open(os.path.join(lx.dir, f"pid.{r}")).read()) for r in (2, 3)]
    frozen_at = time.time()
    signal_groups(node1, signal.SIGSTOP)
    try:
        time.sleep(freeze)  # the freeze itself is what is tested: no event to wait for
    finally:
        signal_groups(node1, signal.SIGCONT)
    (_, err0), (_, err1) = [lx.communicate(n, timeout=60) for n in nodes]
    assert nodes[0].returncode == 1 and nodes[1].returncode == 1, (err0, err1)
    docs = [json.loads((tmp_path / f"summary{g}.json").read_text()) for g in (0, 1)]
    return frozen_at, docs, err0, err1


def assert_node_1_is_the_root_cause(frozen_at, interval, docs, err0):
    """Both summaries name node 1 as the node that stopped answering, from when it was stopped
    (its last heartbeat, within one heartbeat `interval`), with node 0's ranks failed after that:
    consequences."""
    root = docs[0]["root_cause"]
    assert root["kind"] == "node_lost", (root, err0)
    assert root["node_rank"] == 0 and root["lost_node"] == 1 and root["lost_host"] == socket.gethostname(), root
    assert frozen_at - interval - 1 <= root["silent_since"] <= frozen_at + interval + 1, (root, frozen_at)
    assert abs(root["time"] - root["silent_since"] - root["silent_for"]) < 0.01, root
    assert root["rank"] is None and "stderr_tail" not in root, root
    ranks = docs[0]["ranks"]
    assert [r["state"] for r in ranks] == ["failed", "failed"], ranks
    assert all(r["exit_code"] == 1 and r["time"] > root["silent_since"] for r in ranks), ranks
    # Node 1 says the same, from the record that came with the outcome.
    other = dict(docs[1]["root_cause"], summary=None)
    assert other == dict(root, summary=None), (other, root)
    assert "ddplaunch: node 1 (" in err0 and ") stopped answering first, at " in err0, err0
    return root


def test_a_frozen_node_is_the_root_cause_not_the_rank_whose_connection_to_it_closed(lx, procs, tmp_path):
    # Frozen longer than the heartbeat timeout: node 0 finds it lost and stops its workers, which
    # fail only when node 1, woken, kills its own (their connections to them close).
    frozen_at, docs, err0, _ = freeze_node_1(lx, tmp_path, heartbeat_timeout=2, freeze=6)
    root = assert_node_1_is_the_root_cause(frozen_at, 0.4, docs, err0)
    assert 2 <= root["silent_for"] < 6, root  # found after the heartbeat timeout, during the freeze
    assert root["reason"] == "lost node 1: no heartbeat for 2 s", root
    ranks = docs[0]["ranks"]
    assert all(r["time"] > root["time"] for r in ranks), ranks  # after node 0 found it lost
    assert any("Connection" in line for r in ranks for line in r["stderr_tail"]), ranks
    procs.assert_no_survivors()


def test_a_rank_whose_collective_times_out_while_a_node_is_silent_blames_that_node(lx, procs, tmp_path):
    # Node 0's ranks time out in their collective (7 s) before node 1 is counted lost (10 s): node 1
    # had stopped answering first (two heartbeat intervals, 4 s, are enough to say so).
    frozen_at, docs, err0, _ = freeze_node_1(lx, tmp_path, heartbeat_timeout=10, freeze=9,
                                             env={"COLLECTIVE_TIMEOUT": "7"})
    root = assert_node_1_is_the_root_cause(frozen_at, 2, docs, err0)
    assert 4 <= root["silent_for"] < 15, root  # two intervals, up to when node 0 saw its rank fail
    # Still silent when the rank failed, or (on a busy machine, the rank's exit seen late) just back.
    assert re.fullmatch(r"node 1 stopped answering: no heartbeat for \d+\.\d s \((not yet lost:|it came back "
                        r"before) --heartbeat_timeout=10 s\)", root["reason"]), root
    # The first of them timed out in its collective (the other may have seen its connection close).
    assert any("Timed out" in line for r in docs[0]["ranks"] for line in r["stderr_tail"]), docs[0]["ranks"]
    assert docs[0]["exit_code"] == 1
    procs.assert_no_survivors()
