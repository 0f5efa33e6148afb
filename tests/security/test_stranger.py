"""A stranger on the network against a running 2-node job on loopback (issue 11), with a plain
PyTorch TCPStore client as an attacker would use:

  * a forged success (in ddplaunch's own outcome format) never makes a launcher exit 0 while its
    workers run: both stop with 1 and say that another program writes ddplaunch's keys;
  * a forged failure whose text carries terminal escape bytes is printed escaped, as "reported by
    node N (host)", never raw;
  * a single-node job's store listens on loopback only;
  * with a job secret (DDPLAUNCH_RDZV_TOKEN) the store serves the launchers' keys to proven
    launchers only: every attack above, plus a decremented success counter, a squatted node slot,
    forged or deleted heartbeats and a --dump_stacks request, closes the stranger's connection
    (whether it names the keys a stranger guesses or the real ones a sniffer saw), LIST_KEYS hides
    them, and the job ends with its workers' own result (0, or a worker's failure code); a node
    with another secret is refused at once;
  * with a job secret, a stranger who fills the store before node 1 arrives (issue 41) stores
    1/16 of its budget at most, and the job still forms, its workers store 2 MiB and train.

    pytest test_stranger.py --ddplaunch=/path/to/ddplaunch   (PyTorch from the running interpreter)
"""
import hashlib
import hmac
import os
import subprocess
import sys
import textwrap
import time
from datetime import timedelta

import pytest
import torch.distributed as dist

from pyfixtures import free_port
from store_fill import fill

TIMEOUT = 60
pytestmark = pytest.mark.timeout(120)
RUN_ID = "victim"


@pytest.fixture
def worker(tmp_path):
    # Runs until the test lets it finish (a file appears), at most 30 s.
    path = tmp_path / "w.sh"
    path.write_text(textwrap.dedent(f"""\
        #!/bin/bash
        echo "running $RANK"
        touch {tmp_path}/running-$GROUP_RANK
        for _ in $(seq 600); do [ -e {tmp_path}/finish ] && exit 0; sleep 0.05; done
        exit 9
        """))
    path.chmod(0o755)
    return str(path)


def start_job(ddplaunch, worker, port, secrets=(None, None), args=(), ranks=(0, 1)):
    nodes = []
    for n, secret in zip(ranks, secrets):
        env = dict(os.environ)
        env.pop("DDPLAUNCH_RDZV_TOKEN", None)
        if secret:
            env["DDPLAUNCH_RDZV_TOKEN"] = secret
        nodes.append(subprocess.Popen([ddplaunch, "--nnodes=2", f"--node_rank={n}", "--master_addr=127.0.0.1",
                                       f"--master_port={port}", f"--rdzv_id={RUN_ID}", "--nproc_per_node=1",
                                       *args, worker],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env))
    return nodes


def stranger(port):
    return dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timedelta(seconds=10), use_libuv=True)


def namespace(secret=None):
    """Where the launchers keep the job's keys (launcher/rdzv/job_secret.cpp, store_namespace)."""
    if not secret:
        return "ddplaunch"
    tag = hmac.new(secret.encode(), b"ddplaunch store namespace v1", hashlib.sha256).hexdigest()[:32]
    return f"ddplaunch/{tag}"


def wait_running(store, secret=None):
    # Both nodes' heartbeats exist once their workers run (the launchers' own keys).
    job = f"{namespace(secret)}/{RUN_ID}"
    store.wait([f"{job}/r0/hb/0", f"{job}/r0/hb/1"], timedelta(seconds=20))


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


SECRET = "test-job-secret-0123456789abcdef"
FORGED_MAC = "ddps1:" + "0" * 64 + ":"


def attack(port, job):
    """Every attack of issue 11 (1) against the job's keys under `job`, each on a fresh
    connection: with a secret the store closes the connection at the first launcher key."""
    def forge(s):
        s.set(f"{job}/r0/outcome", "ddplaunch-outcome 1 success 0 1\n")
        s.set(f"{job}/r0/outcome", FORGED_MAC + "ddplaunch-outcome 1 failure 77 1\n\x1b[2Jpwned")

    attacks = [
        forge,
        lambda s: s.add(f"{job}/r0/succeeded", -5),
        lambda s: s.add(f"{job}/r0/joined", 7),
        lambda s: s.delete_key(f"{job}/r0/outcome"),
        lambda s: s.get(f"{job}/r0/hb/0"),
        lambda s: s.check([f"{job}/r0/hb/1"]),
        lambda s: s.set(f"{job}/r0/ready", "error: forged verdict"),
        lambda s: s.add(f"{job}/stacks/request", 1),       # --dump_stacks: neither trigger
        lambda s: s.get(f"{job}/stacks/1/node/0"),          # nor read the answer
    ]
    for n in (0, 1):
        attacks += [lambda s, n=n: s.set(f"{job}/r0/hb/{n}", "999"),
                    lambda s, n=n: s.delete_key(f"{job}/r0/hb/{n}"),
                    lambda s, n=n: s.set(f"{job}/r0/done/{n}", FORGED_MAC + "1")]
    for hit in attacks:
        s = stranger(port)
        with pytest.raises((RuntimeError, dist.DistNetworkError)):
            hit(s)
            s.get("some/worker/key/after")  # a SET has no reply: the next request sees the close


def wait_file(path, seconds=20):
    # The stranger learns that the workers run from their files: it cannot read the launchers'.
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} did not appear"
        time.sleep(0.05)


def test_with_a_secret_no_attack_changes_the_result(ddplaunch, worker, tmp_path):
    port = free_port()
    nodes = start_job(ddplaunch, worker, port, secrets=(SECRET,), ranks=(0,))
    s = stranger(port)
    s.set("some/worker/key", "1")  # the store serves everyone outside the launchers' keys
    # Before node 1 arrives: its slot squatted where a stranger and where a sniffer would.
    attack_slot = [f"ddplaunch/{RUN_ID}/r0/node/1", f"{namespace(SECRET)}/{RUN_ID}/r0/node/1"]
    for key in attack_slot:
        with pytest.raises((RuntimeError, dist.DistNetworkError)):
            s = stranger(port)
            s.set(key, FORGED_MAC + "1\n1\nevil\nevil\n66\n")
            s.get("some/worker/key")
    nodes += start_job(ddplaunch, worker, port, secrets=(SECRET,), ranks=(1,))
    wait_file(tmp_path / "running-0")
    wait_file(tmp_path / "running-1")
    s = stranger(port)
    if hasattr(s, "list_keys"):
        assert not any("ddplaunch" in k for k in s.list_keys()), "a stranger lists the launchers' keys"
    attack(port, f"ddplaunch/{RUN_ID}")              # a stranger: the names it knows
    attack(port, f"{namespace(SECRET)}/{RUN_ID}")    # a sniffer: the real names, without the secret
    (tmp_path / "finish").touch()
    outs = finish(nodes)
    for p, (out, err) in zip(nodes, outs):
        assert p.returncode == 0, err
        assert "stopping" not in err and "pwned" not in err, err
        assert "--node_rank=1 is used twice" not in err, err
        assert "fails the job-secret check" not in err, err  # nothing forged even reached them


def test_with_a_secret_a_real_failure_still_stops_the_job(ddplaunch, tmp_path):
    prog = tmp_path / "w.sh"
    prog.write_text("#!/bin/bash\n[ \"$GROUP_RANK\" = 1 ] && exit 3\nsleep 30\n")
    prog.chmod(0o755)
    nodes = start_job(ddplaunch, str(prog), free_port(), secrets=(SECRET, SECRET))
    outs = finish(nodes)
    assert [p.returncode for p in nodes] == [3, 3], outs
    assert "reported by node 1" in outs[0][1], outs[0][1]


def test_a_node_with_another_secret_never_joins(ddplaunch, worker):
    nodes = start_job(ddplaunch, worker, free_port(), secrets=(SECRET, "another-secret-0123456789"),
                      args=("--rdzv_timeout=3",))
    outs = finish(nodes)
    for p, (_, err) in zip(nodes, outs):
        assert p.returncode == 1, err
        assert "same job secret" in err, err


def test_a_worker_never_sees_the_secret(ddplaunch, tmp_path):
    prog = tmp_path / "w.sh"
    prog.write_text("#!/bin/bash\necho \"token=[${DDPLAUNCH_RDZV_TOKEN:-}]\"\n")
    prog.chmod(0o755)
    env = dict(os.environ, DDPLAUNCH_RDZV_TOKEN=SECRET)
    r = subprocess.run([ddplaunch, str(prog)], capture_output=True, text=True, timeout=TIMEOUT, env=env)
    assert r.returncode == 0, r.stderr
    assert "token=[]" in r.stdout and SECRET not in r.stdout + r.stderr


STORE_WORKER = """\
import torch, torch.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()
store = dist.distributed_c10d._get_default_store()
if rank == 0:
    store.set("big", b"w" * (2 << 20))  # the workers' own data: 4 times what a stranger may store
dist.barrier()
assert rank != 1 or store.get("big") == b"w" * (2 << 20)
t = torch.ones(4)
for _ in range(10):
    dist.all_reduce(t)
assert t.tolist() == [2.0 ** 10] * 4, t
print(f"rank {rank} trained")
"""


def test_with_a_secret_a_store_filled_by_a_stranger_still_forms_and_trains(ddplaunch, tmp_path, monkeypatch):
    # Issue 41 (1): the fill used to leave no room for node 1's proof of the secret, so both nodes
    # exited 1 at --rdzv_timeout blaming the secret. Now the proof is answered whatever the budget,
    # a stranger fills 1/16 of it at most, and the round's workers keep the rest.
    prog = tmp_path / "train.py"
    prog.write_text(STORE_WORKER)
    monkeypatch.setenv("PYTHON_EXEC", sys.executable)  # the workers' Python, with torch
    port = free_port()
    args = ("--rdzv_conf", "store_memory=8MiB", "--rdzv_timeout=20")
    nodes = start_job(ddplaunch, str(prog), port, secrets=(SECRET,), ranks=(0,), args=args)
    try:
        stored = fill(lambda: stranger(port))
    except BaseException:
        finish(nodes)
        raise
    nodes += start_job(ddplaunch, str(prog), port, secrets=(SECRET,), ranks=(1,), args=args)
    outs = finish(nodes)
    for p, (out, err) in zip(nodes, outs):
        assert p.returncode == 0, err
        assert "trained" in out, out + err
        assert "same job secret" not in err, err
    assert 0 < stored <= 512 << 10, f"a stranger stored {stored} bytes of an 8 MiB store before the round"
    assert "that connections without the job secret may fill from hosts outside the job's round" in outs[0][1]
