"""Standby nodes (--active_nodes, docs/resilience.md "Standby nodes") on three network-namespace hosts.

Hosts 10.243.0.1-3 each run one launcher with `--nnodes=2:3 --active_nodes=2 --nproc_per_node=2`:
node 0 (the store's host) and the first other node to arrive run workers (world size 4), the third
stands by. The workers are tiny shell scripts that print their RANK, WORLD_SIZE, GROUP_RANK and the
time they started, then wait for a file (round 0) or exit 0 at once (after a restart).

  * kill -9 of the active node's launcher (its workers end through the parent-death chain): the
    standby takes its place in the next round, the world size stays 4, the job succeeds; the time
    from the kill to every rank running again is measured and noted.
  * kill -9 of the standby's launcher: the running round goes on undisturbed and succeeds.

Needs root and `ip netns` (skipped otherwise).
    pytest test_standby.py --ddplaunch=/path/to/ddplaunch
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from typing import Dict, List

import pytest

from pyfixtures import netns_hosts_or_skip, note

pytestmark = pytest.mark.timeout(60)

ADDRESSES = ["10.243.0.1", "10.243.0.2", "10.243.0.3"]
PORT = 29577
HEARTBEAT_TIMEOUT = 2
NPROC = 2

WORKER = """#!/bin/sh
echo "started restart=$TORCHELASTIC_RESTART_COUNT rank=$RANK world=$WORLD_SIZE group=$GROUP_RANK ts=$(date +%s.%N)"
[ "$TORCHELASTIC_RESTART_COUNT" = 0 ] || exit 0
# A shell has no file event to wait on (inotifywait is not installed everywhere): poll.
while [ ! -e "$1/finish" ]; do sleep 0.05; done
"""

STARTED = re.compile(r"started restart=(\d+) rank=(\d+) world=(\d+) group=(\d+) ts=([\d.]+)")


@pytest.fixture(scope="module")
def hosts():
    yield from netns_hosts_or_skip(ADDRESSES)


class Node:
    """One launcher on one host; a thread collects its output lines (stdout and stderr merged)."""

    def __init__(self, procs, ddplaunch, host, rank: int, directory: str, worker: str) -> None:
        self.rank, self.address = rank, host.address
        self.lines: List[str] = []
        self.cond = threading.Condition()
        cmd = host.cmd(ddplaunch, "--nnodes=2:3", "--active_nodes=2", "--max_restarts=1", f"--node_rank={rank}",
                       f"--master_addr={ADDRESSES[0]}", f"--master_port={PORT}", f"--local_addr={host.address}",
                       f"--nproc_per_node={NPROC}", f"--heartbeat_timeout={HEARTBEAT_TIMEOUT}", "--rdzv_timeout=20",
                       "--rdzv_conf", "last_call_timeout=1", "--no_python", worker, directory)
        self.p = procs.start(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.p.stdout:
            with self.cond:
                self.lines.append(line.rstrip("\n"))
                self.cond.notify_all()
        with self.cond:
            self.lines.append("<eof>")
            self.cond.notify_all()

    def wait_for(self, predicate, timeout: float = 20):
        """Blocks until predicate(lines) is true (returns its value) or fails after `timeout` s."""
        with self.cond:
            ok = self.cond.wait_for(lambda: predicate(self.lines), timeout)
            assert ok, f"node {self.rank}: timed out; output:\n" + "\n".join(self.lines)
            return predicate(self.lines)

    def starts(self, restart: int) -> Dict[int, tuple]:
        """rank -> (world, group, time) of the workers started in `restart`, as printed so far."""
        out = {}
        for line in list(self.lines):
            m = STARTED.search(line)
            if m and int(m.group(1)) == restart:
                out[int(m.group(2))] = (int(m.group(3)), int(m.group(4)), float(m.group(5)))
        return out

    def text(self) -> str:
        with self.cond:
            return "\n".join(self.lines)


def start_job(procs, ddplaunch, hosts, tmp_path) -> List[Node]:
    worker = tmp_path / "worker.sh"
    worker.write_text(WORKER)
    worker.chmod(0o755)
    nodes = [Node(procs, ddplaunch, hosts[0], 0, str(tmp_path), str(worker))]
    nodes[0].wait_for(lambda lines: any("waiting for nodes" in l for l in lines))  # node 0's store is up
    nodes += [Node(procs, ddplaunch, hosts[r], r, str(tmp_path), str(worker)) for r in (1, 2)]
    return nodes


def roles(nodes: List[Node]):
    """(active other node, standby node) from the rank map node 0 logs."""
    rank_map = nodes[0].wait_for(lambda lines: "\n".join(lines) if any("standby (no workers)" in l for l in lines)
                                 else None)
    standby = [n for n in nodes[1:] if re.search(rf"node 2 \([^)]*{re.escape(n.address)}\): standby", rank_map)]
    assert len(standby) == 1, rank_map
    active = [n for n in nodes[1:] if n is not standby[0]]
    return active[0], standby[0]


def all_started(nodes: List[Node], restart: int) -> Dict[int, tuple]:
    merged = {}
    for n in nodes:
        merged.update(n.starts(restart))
    return merged


def wait_exit(node: Node, timeout: float = 30) -> int:
    try:
        return node.p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"node {node.rank} did not exit; output:\n{node.text()}")


def test_a_standby_takes_a_killed_nodes_place_with_the_same_world_size(ddplaunch, hosts, procs, tmp_path):
    nodes = start_job(procs, ddplaunch, hosts, tmp_path)
    active, standby = roles(nodes)
    active.wait_for(lambda lines: len(active.starts(0)) == NPROC)
    nodes[0].wait_for(lambda lines: len(nodes[0].starts(0)) == NPROC)
    standby.wait_for(lambda lines: any("round 0: standby (group rank 2): no workers" in l for l in lines))
    assert standby.starts(0) == {}, standby.text()

    killed_at = time.time()
    os.kill(active.p.pid, signal.SIGKILL)  # the launcher only: its workers go by the parent-death chain
    survivors = [nodes[0], standby]
    for n in survivors:
        n.wait_for(lambda lines, n=n: len(n.starts(1)) == NPROC)
    started = all_started(survivors, 1)
    recovery = max(t for _, _, t in started.values()) - killed_at
    assert sorted(started) == [0, 1, 2, 3]
    assert {w for w, _, _ in started.values()} == {4}, started  # the world size is kept
    assert {r: g for r, (_, g, _) in started.items()} == {0: 0, 1: 0, 2: 1, 3: 1}, started
    assert sorted(standby.starts(1)) == [2, 3]
    for n in survivors:
        assert wait_exit(n) == 0, n.text()
    # Node 0 or the standby notices first (both watch the active nodes); the other reads its word.
    assert "lost node 1: no heartbeat" in nodes[0].text() + standby.text(), nodes[0].text() + standby.text()
    assert "round 1: this standby node takes an active node's place: group rank 1, world size 4" in standby.text()
    note(f"standby: kill -9 of an active node -> all 4 ranks running again with the spare: {recovery:.2f} s "
         f"(heartbeat timeout {HEARTBEAT_TIMEOUT} s, last call 1 s)")
    procs.assert_no_survivors()


def test_losing_the_standby_does_not_disturb_the_running_round(ddplaunch, hosts, procs, tmp_path):
    nodes = start_job(procs, ddplaunch, hosts, tmp_path)
    active, standby = roles(nodes)
    for n in (nodes[0], active):
        n.wait_for(lambda lines, n=n: len(n.starts(0)) == NPROC)
    os.kill(standby.p.pid, signal.SIGKILL)
    # Nothing happens is the thing to show: wait past the heartbeat timeout (and a check interval)
    # in which a watched node would have been declared lost.
    time.sleep(HEARTBEAT_TIMEOUT * 2)
    (tmp_path / "finish").touch()
    for n in (nodes[0], active):
        assert wait_exit(n) == 0, n.text()
        assert "lost node" not in n.text() and "restarting" not in n.text(), n.text()
        assert n.starts(1) == {}
    procs.assert_no_survivors()
