"""IPv6 as documented: `--master_addr '[::1]'` and `::1` with PyTorch gloo workers, one node and two
nodes (two launchers on loopback). Workers must get MASTER_ADDR without brackets, as torchrun
passes it; with brackets PyTorch loops on "Name or service not known".

    pytest test_ipv6.py --ddplaunch=/path/to/ddplaunch   (PyTorch from the running interpreter)
"""
import os
import socket
import subprocess
import sys
import textwrap

import pytest

from pyfixtures import free_port

TIMEOUT = 120

SCRIPT = textwrap.dedent("""\
    import os, torch, torch.distributed as dist
    dist.init_process_group("gloo")
    t = torch.tensor([1.0])
    dist.all_reduce(t)
    print(f"MASTER_ADDR={os.environ['MASTER_ADDR']} sum={t.item():g}")
    dist.barrier()
    dist.destroy_process_group()
    """)


def ipv6_loopback_usable():
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


pytestmark = [pytest.mark.timeout(240),
              pytest.mark.skipif(not ipv6_loopback_usable(), reason="no IPv6 loopback here")]


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "allreduce.py"
    path.write_text(SCRIPT)
    return str(path)


def env():
    return dict(os.environ, PYTHON_EXEC=sys.executable, OMP_NUM_THREADS="1")


@pytest.mark.parametrize("addr", ["[::1]", "::1"])
def test_one_node(ddplaunch, script, addr):
    r = subprocess.run([ddplaunch, "--nproc_per_node=2", f"--master_addr={addr}", script], env=env(),
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("MASTER_ADDR=::1 sum=2") == 2, r.stdout


@pytest.mark.parametrize("addr", ["[::1]", "::1"])
def test_two_nodes(ddplaunch, script, addr):
    port = str(free_port("::1"))
    nodes = [subprocess.Popen([ddplaunch, "--nnodes=2", f"--node_rank={n}", f"--master_addr={addr}",
                               f"--master_port={port}", "--nproc_per_node=1", script], env=env(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for n in (0, 1)]
    try:
        outs = [p.communicate(timeout=TIMEOUT) for p in nodes]
    finally:
        for p in nodes:
            p.kill()
    for p, (out, err) in zip(nodes, outs):
        assert p.returncode == 0, err
        assert "MASTER_ADDR=::1 sum=2" in out, out
