"""Edges of a launcher's life (issue 11), through the real binary:

  * a node started before node 0 listens prints a status line about every interval (10 s;
    DDPLAUNCH_STATUS_INTERVAL makes it short here) naming the address and the last error;
  * a second Ctrl-C during the shutdown grace sends SIGKILL at once, and the messages name the
    signals actually sent;
  * after a failure, node 0 keeps the store up until node 1 has read the outcome: node 1 reports
    the worker's failure, never "lost the store on node 0", run after run;
  * node 0's launcher stopped (SIGSTOP) past the heartbeat timeout: node 1 loses it and ends, and
    node 0, continued, says why it stopped (node 1's words), not a bare "stopped".

    pytest test_edges.py --ddplaunch=/path/to/ddplaunch
"""
import os
import signal
import subprocess
import time

import pytest

from pyfixtures import free_port

TIMEOUT = 60
pytestmark = pytest.mark.timeout(120)


def test_a_node_waiting_for_node_0_says_so(ddplaunch):
    port = free_port()
    env = dict(os.environ, DDPLAUNCH_STATUS_INTERVAL="0.5")
    p = subprocess.Popen([ddplaunch, "--nnodes=2", "--node_rank=1", "--master_addr=127.0.0.1",
                          f"--master_port={port}", "--rdzv_timeout=3", "/bin/true"], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, err = p.communicate(timeout=TIMEOUT)
    assert p.returncode != 0
    status = [line for line in err.splitlines() if "still waiting for the store" in line]
    assert 2 <= len(status) <= 8, err  # about every 0.5 s over 3 s, not a line per attempt
    assert f"127.0.0.1:{port}" in status[0] and "last error:" in status[0] and "refused" in status[0]


def test_a_second_ctrl_c_during_the_grace_kills_at_once(ddplaunch, tmp_path):
    prog = tmp_path / "w.sh"
    prog.write_text("#!/bin/bash\ntrap '' INT TERM\necho ready\nwhile :; do sleep 0.1; done\n")
    prog.chmod(0o755)
    p = subprocess.Popen([ddplaunch, "--shutdown_timeout=30", str(prog)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    p.send_signal(signal.SIGINT)
    # The launcher announces the first Ctrl-C before the second one is sent.
    first = p.stderr.readline()
    while "forwarding it to the workers" not in first:
        first = p.stderr.readline()
        assert first, "ddplaunch ended before forwarding the first SIGINT"
    start = time.monotonic()
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=TIMEOUT)
    assert time.monotonic() - start < 5, "the second Ctrl-C did not cut the 30 s grace short"
    assert p.returncode == 130
    assert "received SIGINT, forwarding it to the workers" in first
    assert "received SIGINT during the shutdown grace; sending SIGKILL to the workers" in err


def test_after_a_failure_node_1_reads_it_before_node_0_closes_the_store(ddplaunch, tmp_path):
    # Before: node 0 exited right after its summary, and node 1 now and then printed "lost the
    # store on node 0 (closed by the server)" instead of the failure (4 runs of 14 under mpirun).
    prog = tmp_path / "w.sh"
    prog.write_text('#!/bin/bash\n[ "$RANK" = 0 ] && exit 3\nexec sleep 20\n')
    prog.chmod(0o755)
    start = time.monotonic()
    for attempt in range(10):
        port = free_port()
        nodes = [subprocess.Popen([ddplaunch, "--nnodes=2", f"--node_rank={g}", "--master_addr=127.0.0.1",
                                   f"--master_port={port}", f"--rdzv_id=fail{attempt}", "--heartbeat_timeout=2",
                                   "--no_python", str(prog)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  text=True) for g in (0, 1)]
        errs = [p.communicate(timeout=TIMEOUT)[1] for p in nodes]
        for g, (p, err) in enumerate(zip(nodes, errs)):
            assert p.returncode == 3, f"attempt {attempt}, node {g}:\n{err}"
            assert "lost the store" not in err and "lost node" not in err, f"attempt {attempt}, node {g}:\n{err}"
        assert "reported by node 0" in errs[1], errs[1]
    assert time.monotonic() - start < 30


def test_node_0_lost_by_the_others_says_why_it_stopped(ddplaunch, tmp_path):
    # Before: node 0 printed "a failure reported by node 1 (host):" and then only "stopped".
    prog = tmp_path / "w.sh"
    prog.write_text(f'#!/bin/bash\ntouch {tmp_path}/started.$RANK\nexec sleep 30\n')
    prog.chmod(0o755)
    port = free_port()
    nodes = [subprocess.Popen([ddplaunch, "--nnodes=2", f"--node_rank={g}", "--master_addr=127.0.0.1",
                               f"--master_port={port}", "--heartbeat_timeout=2", "--shutdown_timeout=2", "--no_python",
                               str(prog)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for g in (0, 1)]
    try:
        deadline = time.monotonic() + TIMEOUT
        while not all((tmp_path / f"started.{r}").exists() for r in (0, 1)):
            assert time.monotonic() < deadline, "the workers did not start"
            time.sleep(0.05)  # no event for "a worker wrote a file" short of inotify
        nodes[0].send_signal(signal.SIGSTOP)
        _, err1 = nodes[1].communicate(timeout=TIMEOUT)
    finally:
        nodes[0].send_signal(signal.SIGCONT)
    _, err0 = nodes[0].communicate(timeout=TIMEOUT)
    # Node 1 finds node 0 gone by its heartbeats, or, when node 0 stopped before node 1's heartbeats
    # had connected (a slow launcher under the sanitizers), by the store not answering.
    assert nodes[1].returncode == 1 and ("lost node 0" in err1 or "lost the store on node 0" in err1), err1
    assert nodes[0].returncode == 1, err0
    assert "a failure reported by node 1" in err0 and "lost node 0" in err0, err0
    assert "\nstopped\n" not in err0, err0
