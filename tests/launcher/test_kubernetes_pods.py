"""Kubernetes pods that come back (issue 26): a static 2-node job on two network-namespace "pods",
each launcher configured only through the environment Kubeflow's PyTorchJob v1 gives its pod
(PET_NNODES, PET_NODE_RANK, PET_MASTER_ADDR/PORT, MASTER_*, WORLD_SIZE, RANK, PYTHONUNBUFFERED)
plus what a pod spec adds (PET_MAX_RESTARTS=1, a short PET_HEARTBEAT_TIMEOUT, the job secret),
with its own host name (a UTS namespace: mnist-master-0, mnist-worker-0). The master's service
name is its address here (no cluster DNS).

  * pod 1's launcher is SIGKILLed: its worker dies with it (the parent-death chain); the pod gets
    a new address and a fresh launcher with the same environment; it rejoins in round 1 (a
    restart), both launchers exit 0, and node 0's rank map and allowlist name the new address.
    With a job secret, and without one (node 0 then says that any host could take the place
    while the round forms: docs/security.md).
  * pod 0 (the store's host) is SIGKILLed: pod 1 loses the store and exits 1 saying so.
  * an elastic PyTorchJob's contract (c10d at worker-0, no node rank): the endpoint's pod hosts
    the store and is rank 0 whichever pod starts first.

Needs root and `ip netns` (skipped otherwise).
    pytest test_kubernetes_pods.py --ddplaunch=/path/to/ddplaunch
"""
import os
import re
import select
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from pyfixtures import netns_hosts_or_skip

pytestmark = pytest.mark.timeout(120)

POD_ADDRESSES = ["10.245.0.1", "10.245.0.2"]
NEW_ADDRESS = "10.245.0.3"
POD_NAMES = ["mnist-master-0", "mnist-worker-0"]
PORT = 23456  # the PyTorchJob's default port
SECRET = "kubernetes-pods-job-secret-0123456789"


@pytest.fixture
def pods():
    yield from netns_hosts_or_skip(POD_ADDRESSES)


@pytest.fixture
def worker(tmp_path):
    """A tiny train.py: says its pid; in round 0 it trains "forever", after a restart it is done."""
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent("""\
        import os, time
        restart = os.environ["TORCHELASTIC_RESTART_COUNT"]
        print(f"worker rank {os.environ['RANK']} of {os.environ['WORLD_SIZE']} restart {restart} pid {os.getpid()}",
              flush=True)
        if restart == "0":
            time.sleep(60)
        """))
    return str(path)


def pod_env(rank, secret):
    """What PyTorchJob v1 sets in the pod of node `rank` (Master + 1 Worker, nprocPerNode 1), and
    what the pod spec adds."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PET_", "DDPLAUNCH_", "TORCHELASTIC_"))}
    for k in ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK"):
        env.pop(k, None)
    env.update({
        "PYTHONUNBUFFERED": "1",
        "MASTER_ADDR": POD_ADDRESSES[0], "PET_MASTER_ADDR": POD_ADDRESSES[0],
        "MASTER_PORT": str(PORT), "PET_MASTER_PORT": str(PORT),
        "WORLD_SIZE": "2", "RANK": str(rank), "PET_NODE_RANK": str(rank),
        "PET_NNODES": "2", "PET_NPROC_PER_NODE": "1",
        "PET_MAX_RESTARTS": "1", "PET_HEARTBEAT_TIMEOUT": "2", "PET_RDZV_TIMEOUT": "30",
        "PYTHON_EXEC": sys.executable,
    })
    if secret:
        env["DDPLAUNCH_RDZV_TOKEN"] = secret
    return env


class Pod:
    """One launcher in a pod; its output is read as it comes (wait_for blocks on it)."""

    def __init__(self, procs, ddplaunch, host, name, rank, worker, secret):
        cmd = host.cmd("unshare", "--uts", "sh", "-c", f'hostname {name} && exec "$@"', "sh", ddplaunch, worker)
        self.p = procs.start(cmd, env=pod_env(rank, secret), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True)
        self.t0 = time.monotonic()
        self.lines = []
        self.cond = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.p.stdout:
            with self.cond:
                self.lines.append((time.monotonic(), line.rstrip("\n")))
                self.cond.notify_all()
        with self.cond:
            self.lines.append((time.monotonic(), None))
            self.cond.notify_all()

    def wait_for(self, pattern, timeout=30):
        """The first match of `pattern` in an output line, and when it came; waits for it."""
        rx = re.compile(pattern)
        with self.cond:
            end = time.monotonic() + timeout
            while True:
                for t, line in self.lines:
                    if line is not None and rx.search(line):
                        return rx.search(line), t
                if self.lines and self.lines[-1][1] is None:
                    raise AssertionError(f"{pattern!r} never came:\n{self.text()}")
                if not self.cond.wait(timeout=max(0, end - time.monotonic())):
                    raise AssertionError(f"{pattern!r} not within {timeout} s:\n{self.text()}")

    def finish(self, timeout=60):
        code = self.p.wait(timeout=timeout)
        self.reader.join(timeout=10)
        return code, time.monotonic()

    def text(self):
        return "\n".join(line for _, line in self.lines if line is not None)


def exits_within(pid, timeout):
    """Whether process `pid` (not our child) exits within `timeout` s: waits on its pidfd."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], timeout)[0])
    finally:
        os.close(fd)


def show(title, pods_out):
    print(f"--- {title}")
    for name, text in pods_out:
        print(f"[{name}]\n{text}")


@pytest.mark.parametrize("secret", [SECRET, ""], ids=["secret", "no_secret"])
def test_a_pod_restarted_with_a_new_address_rejoins_its_static_job(ddplaunch, pods, worker, procs, secret):
    master = Pod(procs, ddplaunch, pods[0], POD_NAMES[0], 0, worker, secret)
    first = Pod(procs, ddplaunch, pods[1], POD_NAMES[1], 1, worker, secret)
    master.wait_for(r"worker rank 0 of 2 restart 0")
    m, _ = first.wait_for(r"worker rank 1 of 2 restart 0 pid (\d+)")
    old_worker = int(m.group(1))

    t_kill = time.monotonic()
    os.kill(first.p.pid, signal.SIGKILL)
    assert first.finish()[0] == -signal.SIGKILL
    assert exits_within(old_worker, 10), f"pod 1's worker {old_worker} outlived its killed launcher"
    t_worker_gone = time.monotonic()

    pods[1].set_address(NEW_ADDRESS)
    again = Pod(procs, ddplaunch, pods[1], POD_NAMES[1], 1, worker, secret)
    _, t_lost = master.wait_for(r"lost node 1")
    _, t_rejoined = again.wait_for(r"worker rank 1 of 2 restart 1")
    master_code, t_master_end = master.finish()
    again_code, t_again_end = again.finish()
    show(f"secret={bool(secret)}", [(POD_NAMES[0], master.text()), (f"{POD_NAMES[1]} (killed)", first.text()),
                                    (f"{POD_NAMES[1]} (again, {NEW_ADDRESS})", again.text())])
    print(f"times from the kill: worker gone {t_worker_gone - t_kill:.2f} s, node 0 lost it {t_lost - t_kill:.2f} s, "
          f"new worker running {t_rejoined - t_kill:.2f} s, node 0 done {t_master_end - t_kill:.2f} s, "
          f"pod 1 done {t_again_end - t_kill:.2f} s")

    assert master_code == 0 and again_code == 0, (master_code, again_code)
    out = master.text()
    assert "restarting the job (restart 1 of 1)" in out
    assert re.search(rf"node 1 \({POD_NAMES[1]}, from {re.escape(NEW_ADDRESS)}\): ranks 1", out), out
    assert f"store: new connections only from loopback and {POD_ADDRESSES[0]}, {NEW_ADDRESS}" in out
    assert "worker rank 0 of 2 restart 1" in out
    if not secret:
        assert "without a job secret, any host that reaches the store meanwhile can join in its place" in out
    procs.assert_no_survivors()


def test_an_elastic_pytorchjob_ranks_its_pods_by_arrival(ddplaunch, pods, tmp_path, procs):
    # elasticPolicy without min/max: PET_NNODES is the Worker count, c10d at worker-0's service
    # (its address here), no node rank. Pod 1 starts first: ranks still put the endpoint's pod first.
    script = tmp_path / "ranks.py"
    script.write_text("import os\nprint(f\"worker rank {os.environ['RANK']} group {os.environ['GROUP_RANK']}\", "
                      "flush=True)\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PET_", "DDPLAUNCH_", "TORCHELASTIC_"))}
    env.update({"PYTHONUNBUFFERED": "1", "PET_RDZV_ENDPOINT": f"{POD_ADDRESSES[0]}:{PORT}", "PET_RDZV_BACKEND": "c10d",
                "PET_NNODES": "2", "PET_NPROC_PER_NODE": "1", "PET_MAX_RESTARTS": "1", "PET_RDZV_ID": "elastic",
                "PYTHON_EXEC": sys.executable})
    out = {}
    for i in (1, 0):
        out[i] = open(tmp_path / f"pod{i}.log", "w+")
        procs.start(pods[i].cmd(ddplaunch, str(script)), env=env, stdout=out[i], stderr=subprocess.STDOUT)
    codes = [p.wait(timeout=30) for p in procs.procs]
    texts = {i: (tmp_path / f"pod{i}.log").read_text() for i in (0, 1)}
    show("elastic PyTorchJob", [(f"elastic-worker-{i}", texts[i]) for i in (0, 1)])
    assert codes == [0, 0], texts
    assert "this node hosts the store" in texts[0] and "worker rank 0 group 0" in texts[0], texts[0]
    assert "this node joins the store at" in texts[1] and "worker rank 1 group 1" in texts[1], texts[1]
    procs.assert_no_survivors()


def test_the_store_pod_killed_ends_the_job_on_the_others(ddplaunch, pods, worker, procs):
    master = Pod(procs, ddplaunch, pods[0], POD_NAMES[0], 0, worker, SECRET)
    other = Pod(procs, ddplaunch, pods[1], POD_NAMES[1], 1, worker, SECRET)
    master.wait_for(r"worker rank 0 of 2 restart 0")
    other.wait_for(r"worker rank 1 of 2 restart 0")
    t_kill = time.monotonic()
    os.kill(master.p.pid, signal.SIGKILL)
    code, t_end = other.finish()
    show("the store's pod killed", [(POD_NAMES[0], master.text()), (POD_NAMES[1], other.text())])
    print(f"pod 1 exited {code} {t_end - t_kill:.2f} s after the kill")
    assert code == 1, other.text()
    # The closed connection, or (when the kill beats it) node 0's heartbeat standing still.
    assert re.search(r"lost (the store on )?node 0", other.text()), other.text()
    procs.assert_no_survivors()
