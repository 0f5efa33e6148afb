"""Edges of a launcher's life (issue 11), through the real binary:

  * a node started before node 0 listens prints a status line about every interval (10 s;
    DDPLAUNCH_STATUS_INTERVAL makes it short here) naming the address and the last error;
  * a second Ctrl-C during the shutdown grace sends SIGKILL at once, and the messages name the
    signals actually sent.

    pytest test_edges.py --ddplaunch=/path/to/ddplaunch
"""
import os
import signal
import socket
import subprocess
import time

import pytest

TIMEOUT = 60
pytestmark = pytest.mark.timeout(120)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
