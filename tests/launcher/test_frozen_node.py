"""A frozen node is the root cause, not the rank whose connection to it closed (issue 41, item 6):

  * node 1's launcher and workers are stopped (SIGSTOP) while the job trains with gloo, then go on
    (SIGCONT). Node 0 finds node 1 lost (no heartbeat) and stops its own workers; they ignore the
    SIGTERM (as a script that saves a checkpoint at its next step does) and stay in their
    all_reduce until node 1, woken, kills its workers: then they fail with gloo's "Connection
    reset by peer", well after node 1 went silent. Both nodes' --summary_json name node 1 as the
    root cause (kind node_lost, the lost node and its host, since when it was silent and for how
    long when it was found), and node 0's ranks, failed after that silence began, only as ranks.

    pytest test_frozen_node.py --ddplaunch=/path/to/ddplaunch
"""
import json
import os
import signal
import socket
import sys
import time

import pytest

from pyfixtures import free_port

pytestmark = pytest.mark.timeout(120)

# Writes its pid once its first collective is done (every rank is connected), then trains.
WORKER = '''\
import os, signal, time, warnings
import torch, torch.distributed as dist
signal.signal(signal.SIGTERM, signal.SIG_IGN)  # it would save a checkpoint at its next step
dist.init_process_group("gloo")
warnings.warn(f"rank {dist.get_rank()}: a warning at start")
t = torch.ones(1000)
dist.all_reduce(t)
with open(os.path.join(os.environ["PIDDIR"], "pid." + os.environ["RANK"]), "w") as f:
    f.write(str(os.getpid()))
while True:
    dist.all_reduce(t)
    time.sleep(0.01)
'''

HEARTBEAT_TIMEOUT = 2  # s
FREEZE = 6  # s: longer than the heartbeat timeout and its interval, so node 0 finds node 1 lost


def signal_groups(pids, sig):
    """`sig` to each process group in `pids` (the launcher's session and each worker's group)."""
    for pid in pids:
        os.killpg(pid, sig)


def test_a_frozen_node_is_the_root_cause_not_the_rank_whose_connection_to_it_closed(lx, procs, tmp_path):
    prog = lx.script("frozen.py", WORKER, 0o644)
    port = free_port()
    # Node 0 gives its workers time (they ignore SIGTERM) to fail of node 1's end; node 1 kills its
    # own at once when it wakes.
    nodes = [lx.start(["--nnodes=2", f"--node_rank={g}", "--nproc_per_node=2", f"--master_port={port}",
                       f"--heartbeat_timeout={HEARTBEAT_TIMEOUT}", f"--shutdown_timeout={30 if g == 0 else 1}",
                       f"--summary_json={tmp_path / f'summary{g}.json'}", prog],
                      env={"PYTHON_EXEC": sys.executable}) for g in (0, 1)]
    lx.wait_pids(4, timeout=60)
    node1 = [nodes[1].pid] + [int(open(os.path.join(lx.dir, f"pid.{r}")).read()) for r in (2, 3)]
    frozen_at = time.time()
    signal_groups(node1, signal.SIGSTOP)
    try:
        time.sleep(FREEZE)  # the freeze itself is what is tested: no event to wait for
    finally:
        signal_groups(node1, signal.SIGCONT)
    (out0, err0), (out1, err1) = [lx.communicate(n, timeout=60) for n in nodes]
    assert nodes[0].returncode == 1 and nodes[1].returncode == 1, (err0, err1)
    docs = [json.loads((tmp_path / f"summary{g}.json").read_text()) for g in (0, 1)]
    root = docs[0]["root_cause"]
    assert root["kind"] == "node_lost", (root, err0)
    assert root["node_rank"] == 0 and root["lost_node"] == 1 and root["lost_host"] == socket.gethostname(), root
    # Its silence began when it was stopped (its last heartbeat, within one interval: 0.4 s), and
    # lasted at least the heartbeat timeout when node 0 found it.
    assert frozen_at - 1 <= root["silent_since"] <= frozen_at + 1, (root, frozen_at)
    assert HEARTBEAT_TIMEOUT <= root["silent_for"] < FREEZE, root
    assert abs(root["time"] - root["silent_since"] - root["silent_for"]) < 0.01, root
    assert root["rank"] is None and "stderr_tail" not in root, root
    # Node 0's ranks did fail (their connections to node 1's workers closed), after the silence
    # began: consequences, not the root cause.
    ranks = docs[0]["ranks"]
    assert [r["state"] for r in ranks] == ["failed", "failed"], ranks
    assert all(r["exit_code"] == 1 and r["time"] > root["silent_since"] + HEARTBEAT_TIMEOUT for r in ranks), ranks
    assert any("Connection" in line for r in ranks for line in r["stderr_tail"]), ranks
    # Node 1 says the same, from the record that came with the outcome.
    other = dict(docs[1]["root_cause"], summary=None)
    assert other == dict(root, summary=None), (other, root)
    assert "ddplaunch: node 1 (" in err0 and ") stopped answering first, at " in err0, err0
    procs.assert_no_survivors()
