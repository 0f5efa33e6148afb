"""A stranger on the network against a running 2-node job on loopback (issue 11), with a plain
PyTorch TCPStore client as an attacker would use:

  * a forged success (in ddplaunch's own outcome format) never makes a launcher exit 0 while its
    workers run: both stop with 1 and say that another program writes ddplaunch's keys;
  * a forged failure whose text carries terminal escape bytes is printed escaped, as "reported by
    node N (host)", never raw;
  * a single-node job's store listens on loopback only.

    pytest test_stranger.py --ddplaunch=/path/to/ddplaunch   (PyTorch from the running interpreter)
"""
import os
import socket
import subprocess
import textwrap
from datetime import timedelta

import pytest
import torch.distributed as dist

TIMEOUT = 60
pytestmark = pytest.mark.timeout(120)
RUN_ID = "victim"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def worker(tmp_path):
    # Runs until the test lets it finish (a file appears), at most 30 s.
    path = tmp_path / "w.sh"
    path.write_text(textwrap.dedent(f"""\
        #!/bin/bash
        echo "running $RANK"
        for _ in $(seq 600); do [ -e {tmp_path}/finish ] && exit 0; sleep 0.05; done
        exit 9
        """))
    path.chmod(0o755)
    return str(path)


def start_job(ddplaunch, worker, port):
    return [subprocess.Popen([ddplaunch, "--nnodes=2", f"--node_rank={n}", "--master_addr=127.0.0.1",
                              f"--master_port={port}", f"--rdzv_id={RUN_ID}", "--nproc_per_node=1", worker],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for n in (0, 1)]


def stranger(port):
    return dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timedelta(seconds=10), use_libuv=True)


def wait_running(store):
    # Both nodes' heartbeats exist once their workers run (the launchers' own keys).
    store.wait([f"ddplaunch/{RUN_ID}/r0/hb/0", f"ddplaunch/{RUN_ID}/r0/hb/1"], timedelta(seconds=20))


def finish(nodes):
    try:
        return [p.communicate(timeout=TIMEOUT) for p in nodes]
    except subprocess.TimeoutExpired:
        for p in nodes:
            p.kill()
        outs = [p.communicate() for p in nodes]
        pytest.fail(f"a launcher did not end within {TIMEOUT} s: {outs}")
    finally:
        for p in nodes:
            p.kill()


def forge_outcome(ddplaunch, worker, value):
    """Runs the job, writes `value` as its outcome once the workers run; returns the nodes and
    their (stdout, stderr)."""
    port = free_port()
    nodes = start_job(ddplaunch, worker, port)
    s = stranger(port)
    wait_running(s)
    s.set(f"ddplaunch/{RUN_ID}/r0/outcome", value)
    return nodes, finish(nodes)


def test_a_forged_success_never_exits_0(ddplaunch, worker):
    nodes, outs = forge_outcome(ddplaunch, worker, "ddplaunch-outcome 1 success 0 1\n")
    for p, (out, err) in zip(nodes, outs):
        assert p.returncode == 1, err
    # The node that reads the forged value first says why; the other may instead lose the store
    # of node 0, which stopped meanwhile.
    assert any("another program is writing ddplaunch's keys" in err for _, err in outs), outs


def test_a_forged_failure_is_shown_escaped(ddplaunch, worker):
    nodes, outs = forge_outcome(ddplaunch, worker, "ddplaunch-outcome 1 failure 77 1\n\x1b[2J\x1b[31mpwned\r")
    _, err0 = outs[0]
    assert nodes[0].returncode != 0
    assert "\x1b" not in err0 and "\r" not in err0
    assert "reported by node 1 (" in err0
    assert "\\x1b[2J\\x1b[31mpwned\\x0d" in err0


def test_a_single_node_store_listens_on_loopback_only(ddplaunch, tmp_path):
    # The worker prints its MASTER_PORT and the listening sockets (state 0A) of /proc/net/tcp{,6}.
    prog = tmp_path / "w.sh"
    prog.write_text("#!/bin/bash\necho port $MASTER_PORT\n"
                    "cat /proc/net/tcp /proc/net/tcp6 | awk '$4 == \"0A\" {print \"listen\", $2}'\n")
    prog.chmod(0o755)
    r = subprocess.run([ddplaunch, str(prog)], capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    port = int(r.stdout.split("port ")[1].split()[0])
    addrs = [line.split()[1].rsplit(":", 1)[0] for line in r.stdout.splitlines()
             if line.startswith("listen") and int(line.split()[1].rsplit(":", 1)[1], 16) == port]
    assert addrs == ["0100007F"], f"the store's port {port} listens on {addrs}, not only 127.0.0.1"
