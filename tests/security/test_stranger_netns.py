"""A stranger who keeps trying, against a 4-node gloo job on five network-namespace hosts (issue 24).

Hosts 10.232.0.1-4 run the job's four launchers (one PyTorch worker each, 300 all_reduces whose
sums every rank checks); host 10.232.0.9 is the stranger, on the same bridge, with a PyTorch
TCPStore client. The job's heartbeat timeout is 3 s and the stranger keeps trying for longer than
it (and than the store's 10 s request deadline).

With a job secret:
  * a connection the stranger opened before the round formed is closed when it forms;
  * before the round, the stranger cannot take node 3's place (nor read, write or delete any
    launcher key: bad-MAC and plain outcome, heartbeat and node records): each such request
    closes its connection;
  * after the round, new connections are refused, for the whole attack;
  * every launcher exits 0 and every rank's 300 sums are right.
With a job secret and a store of 8 MiB, the stranger fills it (halving the value at each refusal,
down to 1 byte; issue 41):
  * before a 2-node static round: it stores 512 KiB at most, node 1 still proves the secret, the
    workers store 2 MiB of their own and train, both exit 0;
  * while round 0 of an elastic job with a spare runs (no allowlist): the same, and after the
    kill of the active node the spare takes its place and the job exits 0.
Without a secret:
  * every launcher warns once that any host reaching the port can join as a node and poison
    results;
  * a stranger's `ddplaunch --node_rank=3` that arrives first becomes node 3 (the documented
    outcome); the real node 3 is refused at once and exits non-zero saying so.
`ddplaunch --dump_stacks` from the stranger's host, with the job secret, against a 2-node job with
one: refused, and the message says the host is not one of the job's nodes (not the secret).

Needs root and `ip netns` (skipped otherwise).
    pytest test_stranger_netns.py --ddplaunch=/path/to/ddplaunch
"""
import os
import subprocess
import sys
import textwrap
import time

import pytest

from pyfixtures import netns_hosts_or_skip

pytestmark = pytest.mark.timeout(240)

NODES = ["10.232.0.1", "10.232.0.2", "10.232.0.3", "10.232.0.4"]
STRANGER = "10.232.0.9"
PORT = 29561
SECRET = "netns-job-secret-0123456789abcdef"
HEARTBEAT_TIMEOUT = 3


def sh(*args, check=True):
    return subprocess.run(args, check=check, capture_output=True, text=True)


@pytest.fixture(scope="module")
def hosts():
    for made in netns_hosts_or_skip(NODES + [STRANGER]):
        yield [(h.ns, h.ifname) for h in made]


ALLREDUCE = """\
    import os, sys, torch, torch.distributed as dist
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    {before}
    wrong = 0
    for i in range(300):
        t = torch.tensor([float(rank + i)])
        dist.all_reduce(t)
        wrong += t.item() != sum(r + i for r in range(world))
    with open(os.path.join(sys.argv[1], f"sums_{{rank}}"), "w") as f:
        f.write(f"{{300 - wrong}} of 300 right\\n")
    dist.destroy_process_group()
    """


@pytest.fixture
def worker(tmp_path):
    path = tmp_path / "allreduce.py"
    path.write_text(textwrap.dedent(ALLREDUCE.format(before="")))
    return str(path)


@pytest.fixture
def storing_worker(tmp_path):
    """The allreduce worker, after rank 0 has stored 2 MiB in the job's store for rank 1 to read
    (the workers' own data: four times what a stranger may store, in a store whose budget leaves
    6 MiB for stored data and room for the reply)."""
    path = tmp_path / "store_allreduce.py"
    path.write_text(textwrap.dedent(ALLREDUCE.format(before=(
        "store = dist.distributed_c10d._get_default_store()\n"
        "    if rank == 0: store.set('big', b'w' * (2 << 20))\n"
        "    dist.barrier()\n"
        "    assert rank != 1 or store.get('big') == b'w' * (2 << 20)"))))
    return str(path)


class Job:
    def __init__(self, ddplaunch, hosts, worker, out_dir, secret, nnodes="4", args=()):
        """`nnodes` and `args` (more flags) are every node's."""
        self.ddplaunch, self.hosts, self.worker, self.out_dir, self.secret = ddplaunch, hosts, worker, out_dir, secret
        self.nnodes, self.args = nnodes, list(args)
        self.procs = {}

    def start(self, rank, ns=None, out_name=None, rdzv_timeout=60):
        """Starts node `rank`'s launcher on its host (ns="stranger": on the stranger's)."""
        env = dict(os.environ)
        env.pop("DDPLAUNCH_RDZV_TOKEN", None)
        env["PYTHON_EXEC"] = sys.executable
        if self.secret:
            env["DDPLAUNCH_RDZV_TOKEN"] = self.secret
        ns, ifname = self.hosts[-1] if ns == "stranger" else self.hosts[rank]
        env["GLOO_SOCKET_IFNAME"] = ifname  # the host name resolves to loopback in every namespace
        log = open(self.out_dir / f"{out_name or f'node{rank}'}.log", "w")
        p = subprocess.Popen(
            ["ip", "netns", "exec", ns, self.ddplaunch, f"--nnodes={self.nnodes}", f"--node_rank={rank}",
             f"--master_addr={NODES[0]}", f"--master_port={PORT}", "--nproc_per_node=1",
             f"--heartbeat_timeout={HEARTBEAT_TIMEOUT}", f"--rdzv_timeout={rdzv_timeout}", *self.args, self.worker,
             str(self.out_dir)],
            stdout=log, stderr=subprocess.STDOUT, env=env)
        self.procs[out_name or f"node{rank}"] = p
        return p

    def finish(self, timeout=120):
        codes = {}
        try:
            for name, p in self.procs.items():
                codes[name] = p.wait(timeout=timeout)
        finally:
            for p in self.procs.values():
                if p.poll() is None:
                    p.kill()
                    p.wait()
        return codes

    def log(self, name):
        return (self.out_dir / f"{name}.log").read_text()


def stranger(hosts, script, timeout=90):
    """Runs `script` (Python with torch, `store()` opens a new TCPStore connection) on the
    stranger's host; returns its stdout lines."""
    prelude = textwrap.dedent(f"""\
        import sys
        import time
        from datetime import timedelta
        import torch.distributed as dist
        def store(timeout=3):
            return dist.TCPStore("{NODES[0]}", {PORT}, is_master=False, timeout=timedelta(seconds=timeout),
                                 use_libuv=True)
        def closed(fn):
            try:
                fn()
                return False
            except Exception:
                return True
        """)
    r = subprocess.run(["ip", "netns", "exec", hosts[-1][0], sys.executable, "-c", prelude + textwrap.dedent(script)],
                       capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout.splitlines()


def no_process_left(job):
    for p in job.procs.values():
        assert p.poll() is not None
    left = sh("pgrep", "-f", job.worker, check=False).stdout.split()
    assert not left, f"processes left running: {left}"


def test_with_a_secret_a_stranger_who_keeps_trying_changes_nothing(ddplaunch, hosts, worker, tmp_path):
    job = Job(ddplaunch, hosts, worker, tmp_path, SECRET)
    job.start(0)
    # Before the round: a connection kept open, and node 3's slot (and every launcher key a
    # stranger or a sniffer could name) attacked, each on its own connection.
    pre = subprocess.Popen(["ip", "netns", "exec", hosts[-1][0], sys.executable, "-c", textwrap.dedent(f"""\
        import time, sys
        from datetime import timedelta
        import torch.distributed as dist
        s = dist.TCPStore("{NODES[0]}", {PORT}, is_master=False, timeout=timedelta(seconds=3), use_libuv=True)
        s.set("pre/round", "1")
        print("open", flush=True)
        sys.stdin.readline()
        try:
            s.set("after/round", "1"); s.get("after/round"); print("still served", flush=True)
        except Exception as e:
            print("closed", flush=True)
        """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert pre.stdout.readline().strip() == "open"
    lines = stranger(hosts, """\
        names = ["ddplaunch/default", "ddplaunch/ddplaunch-job"]
        attacks = []
        for job in ["ddplaunch/none/default", "ddplaunch/0123456789abcdef0123456789abcdef/none"]:
            attacks += [lambda s, job=job: s.set(f"{job}/r0/node/3", "3\\n1\\nevil\\nevil\\n66\\n"),
                        lambda s, job=job: s.compare_set(f"{job}/r0/node/3", "", "evil"),
                        lambda s, job=job: s.add(f"{job}/r0/joined", 1)]
        refused = sum(closed(lambda a=a: (lambda s: (a(s), s.get("x/y")))(store())) for a in attacks)
        print(f"refused {refused} of {len(attacks)}")
        """)
    assert lines[-1] == "refused 6 of 6", lines
    for rank in (1, 2, 3):
        job.start(rank)
    # After the round: keep trying, on new connections, for longer than every timeout.
    lines = stranger(hosts, f"""\
        deadline = time.monotonic() + {HEARTBEAT_TIMEOUT * 4 + 2}
        tries = served = 0
        while time.monotonic() < deadline:
            tries += 1
            try:
                s = store(timeout=1)
                s.set("ddplaunch/x/r0/outcome", "ddps1:" + "0" * 64 + ":ddplaunch-outcome 1 failure 77 1\\n")
                s.delete_key("ddplaunch/x/r0/hb/3")
                served += 1
            except Exception:
                pass
            time.sleep(0.2)
        print(f"served {{served}} of {{tries}}")
        """)
    served, tries = lines[-1].split()[1], lines[-1].split()[3]
    assert int(tries) >= 5 and served == "0", lines
    pre.stdin.write("\n")
    pre.stdin.flush()
    assert pre.stdout.readline().strip() == "closed"
    pre.wait(timeout=30)
    codes = job.finish()
    assert codes == {f"node{r}": 0 for r in range(4)}, {n: job.log(n) for n in codes}
    for r in range(4):
        assert (tmp_path / f"sums_{r}").read_text() == "300 of 300 right\n"
    assert "store: closed " in job.log("node0")  # the summary lines (one example each)
    no_process_left(job)


def test_without_a_secret_the_warning_and_the_documented_outcome(ddplaunch, hosts, worker, tmp_path):
    job = Job(ddplaunch, hosts, worker, tmp_path, None)
    job.start(0)
    job.start(1)
    job.start(2)
    # The stranger's own launcher arrives first as node 3 (from the stranger's host).
    job.start(3, ns="stranger", out_name="stranger")
    # An ordering sleep: the stranger's launcher must have claimed node 3's place before the real one
    # comes, and nothing it prints marks that moment from outside (it waits silently for the round).
    time.sleep(2)
    real = job.start(3)
    codes = job.finish()
    for n in ("node0", "node1", "node2"):
        assert job.log(n).count("no job secret: any host that can reach the store") == 1, job.log(n)
        assert "join this job as a node before the round forms and poison the workers' results" in job.log(n)
    assert codes["stranger"] == 0, job.log("stranger")  # it took node 3's place
    assert codes["node3"] != 0, job.log("node3")
    assert "refuses connections from this host (10.232.0.4): the job's round formed without it" in \
        job.log("node3"), job.log("node3")
    assert "refused: not an address of the job's nodes" in job.log("node0"), job.log("node0")
    assert real.returncode != 0
    no_process_left(job)


def test_dump_stacks_from_a_stranger_host_says_why_it_is_refused(ddplaunch, hosts, tmp_path):
    """Issue 41: `--dump_stacks` from a host outside the job's allowlist blamed "a job without a
    secret" though the job has one. The store refuses the host before any proof of the secret, and
    the message says so: the host is not one of the job's nodes; run it on one of them."""
    sleeper = tmp_path / "sleeper.sh"
    sleeper.write_text("#!/bin/bash\nexec sleep 60\n")
    sleeper.chmod(0o755)
    env = dict(os.environ, DDPLAUNCH_RDZV_TOKEN=SECRET)
    port = PORT + 1
    launchers = []
    for rank in (0, 1):
        ns, _ = hosts[rank]
        launchers.append(subprocess.Popen(
            ["ip", "netns", "exec", ns, ddplaunch, "--nnodes=2", f"--node_rank={rank}", f"--master_addr={NODES[0]}",
             f"--master_port={port}", "--nproc_per_node=1", "--rdzv_id=stacksjob", "--rdzv_timeout=30",
             str(sleeper)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    try:
        seen = []
        for line in launchers[0].stdout:  # the test's timeout bounds it
            seen.append(line)
            if "store: new connections only from loopback and" in line:
                break
        else:
            pytest.fail("node 0 ended before its round formed:\n" + "".join(seen))
        r = subprocess.run(["ip", "netns", "exec", hosts[-1][0], ddplaunch, "--dump_stacks",
                            f"--master_addr={NODES[0]}", f"--master_port={port}", "--rdzv_id=stacksjob"],
                           env=env, capture_output=True, text=True, timeout=30)
        assert r.returncode == 1, r.stdout + r.stderr
        assert f"the store at {NODES[0]}:{port} refuses connections from this host ({STRANGER}): once a job's round " \
               "has formed, its store admits new connections only from the job's nodes and loopback, with a job " \
               "secret or without; run ddplaunch --dump_stacks on one of the job's nodes" in r.stderr, r.stderr
        assert "without a secret" not in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr
        print(r.stderr.strip())
    finally:
        for p in launchers:  # ended by pid; `ip netns exec` execs the launcher
            p.terminate()
        for p in launchers:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            p.stdout.close()
    left = sh("pgrep", "-f", str(sleeper), check=False).stdout.split()
    assert not left, f"processes left running: {left}"


# Issue 41's stranger (store_fill.py), run on the stranger's host.
FILL = """\
    sys.path.insert(0, {here!r})
    from store_fill import fill
    print(f"stored {{fill(store)}}")
    """.format(here=os.path.dirname(os.path.abspath(__file__)))
SMALL_STORE = ("--rdzv_conf", "store_memory=8MiB")  # stored data 6 MiB, a stranger's part 512 KiB


def filled(hosts):
    """Fills the job's store from the stranger's host; returns the bytes it stored."""
    lines = stranger(hosts, FILL)
    return int(lines[-1].split()[1])


def test_with_a_secret_a_store_filled_before_the_round_still_forms_and_trains(ddplaunch, hosts, storing_worker,
                                                                               tmp_path):
    # Issue 41 (1): node 1's proof of the secret found no room and both nodes exited 1 at
    # --rdzv_timeout blaming the secret. Now the proof is answered whatever the budget, the
    # stranger fills 1/16 of it at most, and the round's workers store 2 MiB.
    job = Job(ddplaunch, hosts, storing_worker, tmp_path, SECRET, nnodes="2", args=SMALL_STORE)
    job.start(0, rdzv_timeout=20)
    stored = filled(hosts)
    job.start(1, rdzv_timeout=20)
    codes = job.finish(timeout=60)
    assert codes == {"node0": 0, "node1": 0}, {n: job.log(n) for n in codes}
    for r in range(2):
        assert (tmp_path / f"sums_{r}").read_text() == "300 of 300 right\n"
    assert 0 < stored <= 512 << 10, f"the stranger stored {stored} bytes of an 8 MiB store"
    no_process_left(job)


# Round 0's workers wait for the test; after a restart they succeed at once.
SPARE_WORKER = """#!/bin/sh
touch "$1/running-$TORCHELASTIC_RESTART_COUNT-$GROUP_RANK"
[ "$TORCHELASTIC_RESTART_COUNT" = 0 ] || exit 0
while [ ! -e "$1/finish" ]; do sleep 0.05; done
"""


def wait_until(predicate, what, seconds=30):
    # Files and logs written by other processes: there is no event to wait on short of inotify.
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_with_a_secret_an_elastic_job_filled_after_the_round_cures_a_lost_node_with_its_spare(
        ddplaunch, hosts, tmp_path):
    # Issue 41 (1): an elastic job keeps no allowlist, so the stranger fills the store while round
    # 0 runs; at the restart node 0's own connection had to prove the secret again, was refused
    # for memory, and every node exited 1 four seconds after the loss that the spare would cure.
    worker = tmp_path / "w.sh"
    worker.write_text(SPARE_WORKER)
    worker.chmod(0o755)
    job = Job(ddplaunch, hosts, str(worker), tmp_path, SECRET, nnodes="2:3",
              args=("--active_nodes=2", "--max_restarts=1", "--no_python", "--rdzv_conf",
                    "last_call_timeout=1,store_memory=8MiB"))
    try:
        for rank in range(3):
            job.start(rank, rdzv_timeout=20)
        wait_until(lambda: (tmp_path / "running-0-0").exists() and (tmp_path / "running-0-1").exists() and
                   any("round 0: standby" in job.log(n) for n in ("node1", "node2")), "round 0")
        standby = next(n for n in ("node1", "node2") if "round 0: standby" in job.log(n))
        active = "node2" if standby == "node1" else "node1"
        stored = filled(hosts)
        job.procs[active].kill()  # SIGKILL of its launcher: its workers go by the parent-death chain
        codes = job.finish(timeout=60)
    finally:
        (tmp_path / "finish").touch()  # round 0's workers, should a launcher have left one behind
    assert codes["node0"] == 0 and codes[standby] == 0, {n: job.log(n) for n in codes}
    assert (tmp_path / "running-1-0").exists() and (tmp_path / "running-1-1").exists()
    assert "this standby node takes an active node's place" in job.log(standby), job.log(standby)
    assert 0 < stored <= 512 << 10, f"the stranger stored {stored} bytes of an 8 MiB store"
    no_process_left(job)
