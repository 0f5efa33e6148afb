"""The etcd v3 rendezvous (--rdzv_backend etcd-v3) end to end, against real etcd (Debian's
etcd-server; scripts/setup.sh installs it): members on free loopback ports with private data
directories, started by each test and killed at its end.

  * two nodes meet in a 3-member cluster, either may start first, the workers get one store
    (hosted by group rank 0, found through etcd), and the job's keys are gone afterwards;
  * a PyTorch gloo script under two launchers that meet in etcd;
  * killing one etcd member mid-job changes nothing;
  * a launcher killed with SIGKILL is noticed through its lease within the heartbeat timeout:
    the other stops (fixed size), or carries on alone in a new round that elects a new store host
    (elastic);
  * a late node joins the next round, and one waiting for a job that ends is told so;
  * etcd with authentication: the right password works, a wrong one fails naming it;
  * etcd over TLS with client certificates (through ddplaunch-etcd-tls): a 2-node job; a wrong CA,
    a missing client certificate and a missing file each fail naming the cause;
  * bad invocations (torchrun's etcd/etcd-v2 names, no endpoint, a password on the command line,
    a certificate without its key) exit 2 with one line naming the fix; an etcd that is not there fails within the
    heartbeat timeout.

    python -m pytest test_etcd.py --ddplaunch /path/to/ddplaunch
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

from launches import ENV_DUMP, TIMEOUT, Launches
from pyfixtures import free_port, make_certs

pytestmark = pytest.mark.timeout(300)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ETCD = shutil.which("etcd") or "/usr/bin/etcd"
ETCDCTL = shutil.which("etcdctl") or "/usr/bin/etcdctl"


class EtcdCluster:
    """`size` etcd members on loopback, started through the test's process tracker (so they are
    killed at its end), ready when the constructor returns."""

    def __init__(self, procs, directory, size):
        self.procs = procs
        self.client_ports = [free_port() for _ in range(size)]
        peer_ports = [free_port() for _ in range(size)]
        initial = ",".join(f"m{i}=http://127.0.0.1:{p}" for i, p in enumerate(peer_ports))
        self.members = []
        for i in range(size):
            client = f"http://127.0.0.1:{self.client_ports[i]}"
            peer = f"http://127.0.0.1:{peer_ports[i]}"
            self.members.append(procs.start(
                [ETCD, "--name", f"m{i}", "--data-dir", os.path.join(str(directory), f"etcd{i}"),
                 "--listen-client-urls", client, "--advertise-client-urls", client, "--listen-peer-urls", peer,
                 "--initial-advertise-peer-urls", peer, "--initial-cluster", initial,
                 "--initial-cluster-state", "new", "--initial-cluster-token", os.path.basename(str(directory)),
                 "--log-level", "error"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        # etcdctl waits (up to its timeouts) for a member and a leader: the cluster is up when it
        # answers; a new cluster may still refuse a write during its first election, hence a retry.
        for _ in range(10):
            if self.ctl(["put", "/probe", "up"], check=False).returncode == 0:
                return
        raise AssertionError("etcd did not come up: " + self.ctl(["put", "/probe", "up"], check=False).stderr)

    @property
    def endpoints(self):
        return ",".join(f"127.0.0.1:{p}" for p in self.client_ports)

    def ctl(self, args, check=True, user=None):
        cmd = [ETCDCTL, "--endpoints", self.endpoints, "--dial-timeout", "20s", "--command-timeout", "20s"]
        if user:
            cmd += ["--user", user]
        r = subprocess.run(cmd + args, env=dict(os.environ, ETCDCTL_API="3"), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=60)
        if check:
            assert r.returncode == 0, r.stderr
        return r

    def keys(self, prefix, user=None):
        return self.ctl(["get", "--prefix", "--keys-only", prefix], user=user).stdout.split()

    def kill(self, i):
        self.procs.kill(self.members[i])

    def wait_key(self, key, prefix=False, count=1):
        """Blocks until `count` writes to `key` (or to keys under it) happened: an etcd watch from
        revision 1, so writes that came first count too. (Bounded by the test's timeout.)"""
        cmd = [ETCDCTL, "--endpoints", self.endpoints, "watch", "--rev=1"] + (["--prefix"] if prefix else []) + [key]
        p = self.procs.start(cmd, env=dict(os.environ, ETCDCTL_API="3"), stdout=subprocess.PIPE, text=True)
        try:
            seen = 0
            while seen < count:
                line = p.stdout.readline()  # events come as three lines: PUT, key, value
                assert line, f"etcdctl watch {key} ended"
                seen += line.strip() == "PUT"
        finally:
            self.procs.kill(p)


@pytest.fixture
def lx(ddplaunch, procs, tmp_path):
    launches = Launches(ddplaunch, procs, tmp_path)
    yield launches
    launches.kill_workers()


@pytest.fixture
def etcd3(procs, tmp_path):
    return EtcdCluster(procs, tmp_path, 3)


@pytest.fixture
def etcd1(procs, tmp_path):
    return EtcdCluster(procs, tmp_path, 1)


def etcd_args(etcd, run_id, nnodes="2", extra=()):
    return ["--nnodes", nnodes, "--rdzv_backend", "etcd-v3", "--rdzv_endpoint", etcd.endpoints, "--rdzv_id", run_id,
            *extra]


def wait_line(p, pattern, timeout=30):
    """Reads p's stderr until a line matches `pattern` (an event: the launcher printed it);
    returns the lines read."""
    lines = []
    end = time.time() + timeout
    while time.time() < end:
        line = p.stderr.readline()
        if not line:
            break
        lines.append(line)
        if re.search(pattern, line):
            return lines
    pytest.fail(f"no line matching {pattern!r} within {timeout} s; got:\n{''.join(lines)}")


def test_two_nodes_meet_in_a_three_member_cluster(lx, etcd3):
    prog = lx.script("dump.sh", ENV_DUMP)
    args = etcd_args(etcd3, "meet", extra=["--nproc_per_node", "2", "--heartbeat_timeout", "2", "--no_python", prog])
    # Either node may come first: the second here starts before the first.
    late = lx.start(args)
    wait_line(late, r"waiting for nodes: 1/2")
    early = lx.start(args)
    for p in (late, early):
        out, err = lx.communicate(p)
        assert p.returncode == 0, err
    envs = [lx.read_env(f"env.{r}") for r in range(4)]
    assert sorted(e["RANK"] for e in envs) == ["0", "1", "2", "3"]
    assert {e["WORLD_SIZE"] for e in envs} == {"4"}
    assert sorted(e["GROUP_RANK"] for e in envs) == ["0", "0", "1", "1"]
    # One store for all workers, hosted by group rank 0 on a port it chose and published.
    assert len({(e["MASTER_ADDR"], e["MASTER_PORT"]) for e in envs}) == 1
    assert int(envs[0]["MASTER_PORT"]) > 0
    assert "DDPLAUNCH_ETCD_PASSWORD" not in envs[0]
    # A successful job removes its keys (only the nodes' liveness records wait for their leases).
    assert [k for k in etcd3.keys("/ddplaunch/meet/") if "/alive/" not in k] == []
    # So the same run id runs again at once, and the first run's liveness records running out
    # (2 s) while this run goes on are not mistaken for this run's nodes.
    slow = lx.script("slow.sh", "#!/bin/sh\nsleep 4\n")
    again = [lx.start(args[:-1] + [slow]) for _ in range(2)]
    for p in again:
        out, err = lx.communicate(p)
        assert p.returncode == 0, err
        assert "lost" not in err, err


def test_a_pytorch_gloo_script_under_two_launchers(lx, etcd1):
    script = os.path.join(REPO, "examples", "train_ddp.py")
    env = {"PYTHON_EXEC": sys.executable}
    ps = [lx.start(etcd_args(etcd1, "torch", extra=["--nproc_per_node", "1", script, "--steps", "5"]), env=env)
          for _ in range(2)]
    outs = []
    for p in ps:
        out, err = lx.communicate(p, timeout=120)
        assert p.returncode == 0, err
        outs.append(out)
    assert "done: 2 processes, 5 steps" in "".join(outs), outs


WORKER = '#!/bin/sh\necho $$ > "$PIDDIR/pid.$RANK"\n'


def test_killing_an_etcd_member_mid_job_changes_nothing(lx, etcd3):
    # The workers run until the test lets them end, with etcd member 0 (every launcher's first
    # endpoint) killed in between.
    prog = lx.script("w.sh", WORKER + 'while [ ! -e "$PIDDIR/go" ]; do sleep 0.1; done\n')
    args = etcd_args(etcd3, "member", extra=["--nproc_per_node", "1", "--heartbeat_timeout", "5", "--no_python", prog])
    ps = [lx.start(args) for _ in range(2)]
    lx.wait_pids(2)
    etcd3.kill(0)
    time.sleep(6)  # longer than the heartbeat timeout: the leases must have been kept alive through the others
    open(os.path.join(lx.dir, "go"), "w").close()
    for p in ps:
        out, err = lx.communicate(p)
        assert p.returncode == 0, err
        assert "lost" not in err, err


def test_a_killed_launcher_is_noticed_through_its_lease(lx, etcd1):
    prog = lx.script("w.sh", WORKER + "sleep 60\n")
    args = etcd_args(etcd1, "killed", extra=["--nproc_per_node", "1", "--heartbeat_timeout", "3",
                                             "--shutdown_timeout", "2", "--no_python", prog])
    p0, p1 = lx.start(args), lx.start(args)
    lx.wait_pids(2)
    etcd1.wait_key("/ddplaunch/killed/alive/", prefix=True, count=2)  # both hold their leases
    os.kill(p1.pid, signal.SIGKILL)
    t0 = time.time()
    out, err = lx.communicate(p0)
    took = time.time() - t0
    assert p0.returncode == 1, err
    assert re.search(r"lost node \d: its etcd lease ran out \(no keep-alive for 3 s\)", err), err
    assert took < 3 + 3, f"noticed after {took:.1f} s (TTL 3 s)"
    lx.communicate(p1)
    lx.assert_no_survivors()


def test_an_elastic_job_goes_on_without_a_killed_store_host(lx, etcd1):
    # Round 0: two nodes, the first to arrive is group rank 0 and hosts the workers' store. It is
    # killed; the survivor notices through the lease and runs round 1 alone, hosting the store itself.
    # The environment is written before the pid file the test waits for, so it is whole when read.
    prog = lx.script("w.sh", '#!/bin/sh\nenv -0 > "$PIDDIR/env.$TORCHELASTIC_RESTART_COUNT.$GROUP_RANK"\n' +
                     WORKER.replace("#!/bin/sh\n", "").replace("pid.$RANK", "pid.$TORCHELASTIC_RESTART_COUNT.$GROUP_RANK") +
                     '[ "$TORCHELASTIC_RESTART_COUNT" = 1 ] && exit 0\nsleep 60\n')
    args = etcd_args(etcd1, "elastic", nnodes="1:2",
                     extra=["--nproc_per_node", "1", "--max_restarts", "1", "--heartbeat_timeout", "3",
                            "--shutdown_timeout", "2", "--rdzv_conf", "last_call_timeout=5", "--no_python", prog])
    host = lx.start(args)
    etcd1.wait_key("/ddplaunch/elastic/ddplaunch/elastic/r0/member/1")  # the first to arrive
    other = lx.start(args)
    lx.wait_pids(2)
    round0 = lx.read_env("env.0.0")
    assert round0["GROUP_WORLD_SIZE"] == "2"
    os.kill(host.pid, signal.SIGKILL)
    out, err = lx.communicate(other)
    assert other.returncode == 0, err
    assert "continuing with the remaining nodes in a new round" in err, err
    round1 = lx.read_env("env.1.0")
    assert round1["WORLD_SIZE"] == "1"
    assert round1["MASTER_PORT"] != round0["MASTER_PORT"]
    lx.communicate(host)


def test_a_late_node_joins_the_next_round(lx, etcd1):
    # Node A starts alone (MIN 1) and its round closes; B arrives late and waits; A's worker then
    # fails once, and round 1 has both nodes.
    prog = lx.script("w.sh", '#!/bin/sh\nenv -0 > "$PIDDIR/env.$TORCHELASTIC_RESTART_COUNT.$RANK"\n'
                             'if [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then\n'
                             '  while [ ! -e "$PIDDIR/fail" ]; do sleep 0.1; done; exit 3\nfi\n')
    args = etcd_args(etcd1, "late", nnodes="1:2",
                     extra=["--nproc_per_node", "1", "--max_restarts", "1", "--rdzv_conf", "last_call_timeout=0.5",
                            "--no_python", prog])
    a = lx.start(args)
    wait_line(a, r"rank map: 1 node")
    b = lx.start(args)
    wait_line(b, r"closed with 1 nodes before this node arrived; it joins at the next restart")
    open(os.path.join(lx.dir, "fail"), "w").close()
    for p in (a, b):
        out, err = lx.communicate(p)
        assert p.returncode == 0, err
    round1 = [lx.read_env(f"env.1.{r}") for r in range(2)]
    assert {e["WORLD_SIZE"] for e in round1} == {"2"}
    assert {e["TORCHELASTIC_RESTART_COUNT"] for e in round1} == {"1"}


def test_a_node_waiting_for_a_job_that_ends_is_told_so(lx, etcd1):
    # A runs alone (MIN 1); B arrives late and waits for the next round, which never comes: A's
    # job ends, and B exits at once saying so rather than waiting out --rdzv_timeout.
    prog = lx.script("w.sh", '#!/bin/sh\nwhile [ ! -e "$PIDDIR/end" ]; do sleep 0.1; done\n')
    args = etcd_args(etcd1, "ended", nnodes="1:2",
                     extra=["--nproc_per_node", "1", "--rdzv_conf", "last_call_timeout=0.5", "--no_python", prog])
    a = lx.start(args)
    wait_line(a, r"rank map: 1 node")
    b = lx.start(args)
    wait_line(b, r"it joins at the next restart")
    open(os.path.join(lx.dir, "end"), "w").close()
    out, err = lx.communicate(a)
    assert a.returncode == 0, err
    out, err = lx.communicate(b, timeout=20)
    assert b.returncode == 2, err
    assert "job 'ended' ended (exit code 0) before this node could join it" in err, err


def enable_auth(etcd, password):
    etcd.ctl(["user", "add", f"root:{password}"])
    etcd.ctl(["auth", "enable"])


def test_etcd_with_authentication(lx, etcd1):
    enable_auth(etcd1, "s3cret-pw")
    good = os.path.join(lx.dir, "pw")
    with open(good, "w") as f:
        f.write("s3cret-pw\n")
    os.chmod(good, 0o600)
    prog = lx.script("dump.sh", ENV_DUMP)
    args = etcd_args(etcd1, "auth", extra=["--nproc_per_node", "1", "--rdzv_conf", f"user=root,password_file={good}",
                                           "--no_python", prog])
    ps = [lx.start(args) for _ in range(2)]
    for p in ps:
        out, err = lx.communicate(p)
        assert p.returncode == 0, err
    # The password from the environment instead, and a wrong one.
    rc, out, err = lx.run(etcd_args(etcd1, "auth2", nnodes="1",
                                    extra=["--rdzv_conf", "user=root", "--no_python", prog]),
                          env={"DDPLAUNCH_ETCD_PASSWORD": "wrong"})
    assert rc == 2, err
    assert "authentication failed" in err and "user=root" in err, err
    assert "wrong" not in err
    assert len(err.strip().splitlines()) == 1, err
    rc, out, err = lx.run(etcd_args(etcd1, "auth3", nnodes="1", extra=["--no_python", prog]))
    assert rc == 2, err
    assert "user" in err, err


def test_etcd_over_tls_with_client_certificates(lx, procs, tmp_path):
    # etcd serving https only, requiring a client certificate signed by the CA.
    certs = make_certs(tmp_path)
    client, peer = free_port(), free_port()
    url = f"https://127.0.0.1:{client}"
    procs.start([ETCD, "--name", "t", "--data-dir", str(tmp_path / "etcd"), "--listen-client-urls", url,
                 "--advertise-client-urls", url, "--listen-peer-urls", f"http://127.0.0.1:{peer}",
                 "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
                 "--initial-cluster", f"t=http://127.0.0.1:{peer}", "--cert-file", certs["server.pem"],
                 "--key-file", certs["server.key"], "--trusted-ca-file", certs["ca.pem"], "--client-cert-auth",
                 "--log-level", "error"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"127.0.0.1:{client}"
    prog = lx.script("dump.sh", ENV_DUMP)
    good = f"cacert={certs['ca.pem']},cert={certs['client.pem']},key={certs['client.key']}"

    def launch(run_id, conf, nnodes="2"):
        return ["--nnodes", nnodes, "--rdzv_backend", "etcd-v3", "--rdzv_endpoint", endpoint, "--rdzv_id", run_id,
                "--heartbeat_timeout", "3", "--rdzv_conf", conf, "--no_python", prog]

    # etcdctl waits (up to its dial timeout) for the member: it is up when this answers.
    subprocess.run([ETCDCTL, "--endpoints", f"https://{endpoint}", "--cacert", certs["ca.pem"], "--cert",
                    certs["client.pem"], "--key", certs["client.key"], "--dial-timeout", "20s", "put", "/up", "1"],
                   env=dict(os.environ, ETCDCTL_API="3"), check=True, stdout=subprocess.DEVNULL, timeout=60)
    ps = [lx.start(launch("tls", good)) for _ in range(2)]
    for p in ps:
        out, err = lx.communicate(p)
        assert p.returncode == 0, err
    assert {lx.read_env(f"env.{r}")["WORLD_SIZE"] for r in range(2)} == {"2"}
    # A CA that did not sign the member's certificate: the proxy says so, the launcher fails.
    rc, out, err = lx.run(launch("tls2", f"cacert={certs['other.pem']},cert={certs['client.pem']},"
                                         f"key={certs['client.key']}", nnodes="1"))
    assert rc == 1, err
    assert f"etcd member {endpoint}: TLS handshake failed: certificate verify failed" in err, err
    # No client certificate: the member refuses it.
    rc, out, err = lx.run(launch("tls3", f"cacert={certs['ca.pem']}", nnodes="1"))
    assert rc == 1, err
    assert f"etcd member {endpoint}: TLS failed" in err, err
    # A file that is not there: exit 2 naming it.
    rc, out, err = lx.run(launch("tls4", "cacert=/nonexistent.pem", nnodes="1"))
    assert rc == 2, err
    assert "cacert=/nonexistent.pem cannot be read" in err, err
    # Nothing of the proxies is left.
    assert subprocess.run(["pgrep", "-f", f"ddplaunch-etcd-tls.*{endpoint}"], stdout=subprocess.PIPE).stdout == b""


@pytest.mark.parametrize("args, says", [
    (["--rdzv_backend", "etcd", "--rdzv_endpoint", "127.0.0.1:2379"], "use --rdzv_backend etcd-v3"),
    (["--rdzv_backend", "etcd-v2", "--rdzv_endpoint", "127.0.0.1:2379"], "use --rdzv_backend etcd-v3"),
    (["--rdzv_backend", "zookeeper"], "use static, c10d or etcd-v3"),
    (["--rdzv_backend", "etcd-v3"], "needs the etcd members"),
    (["--rdzv_backend", "etcd-v3", "--rdzv_endpoint", "bad host!"], "is not host[:port]"),
    (["--rdzv_backend", "etcd-v3", "--rdzv_endpoint", "h:2379", "--rdzv_conf", "password=x"], "password_file"),
    (["--rdzv_backend", "etcd-v3", "--rdzv_endpoint", "h:2379", "--rdzv_conf", "cert=/c.pem"], "go together"),
    (["--rdzv_backend", "etcd-v3", "--rdzv_endpoint", "h:2379", "--rdzv_conf", "protocol=ftp"], "http or https"),
    (["--rdzv_backend", "etcd-v3", "--rdzv_endpoint", "h:2379", "--rdzv_conf", "user=root"], "needs a password"),
    (["--rdzv_conf", "user=root"], "etcd-v3 only"),
    (["--rdzv_backend", "etcd-v3", "--rdzv_endpoint", "h:2379", "--standalone"], "--standalone"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_bad_etcd_invocations_exit_2_with_the_fix(lx, args, says):
    rc, out, err = lx.run(args + ["--no_python", "/bin/true"], timeout=20)
    assert rc == 2, err
    assert says in err, err
    assert len(err.strip().splitlines()) == 1, err


def test_an_etcd_that_is_not_there_fails_within_the_heartbeat_timeout(lx):
    port = free_port()
    t0 = time.time()
    rc, out, err = lx.run(["--rdzv_backend", "etcd-v3", "--rdzv_endpoint", f"127.0.0.1:{port}",
                           "--heartbeat_timeout", "2", "--no_python", "/bin/true"], timeout=TIMEOUT)
    assert rc == 1, err
    assert "no member reachable" in err and f"127.0.0.1:{port}" in err and "--rdzv_endpoint" in err, err
    assert time.time() - t0 < 10
