"""The live status of a running launcher (launcher/status/), through the real ddplaunch binary:

  * `ddplaunch --status` finds a running 2-worker job through this user's job registry and shows
    both ranks running with their real pids; `--status PID` and `--status SOCKET` pick the same;
    `--status_port=0` serves the same JSON over HTTP (GET /status, /healthz; 404 otherwise);
    the job secret appears in neither;
  * a slow client and a garbage one hold neither the job nor other clients;
  * /healthz is answered beside 40 connections held open (silent, or a slowloris), which the
    server drops at its header deadline or to make room for new ones;
  * a worker that exited shows its code while the round stops;
  * Python ranks show their Flight Recorder's progress;
  * two nodes in network namespaces (10.244.0.0/24): each node's status says its group rank,
    role, round and the two nodes; node 1's port answers from node 0's host;
  * once the launcher exits nothing listens: the socket file is gone, the port refuses;
  * `--status SOCKET` prints no control character of a hostile reply raw (JSON or not, 200 or not);
  * no job: one line and exit 1; a wrong argument: exit 2; two jobs started in the caller's
    directory: both listed with the pid that chooses each, exit 2.

Each test has its own registry (XDG_RUNTIME_DIR in its temporary directory) and its own working
directory, which --status prefers among the jobs of this user (other tests' jobs are also seen,
in /tmp/ddplaunch-<uid>/jobs); `lx` comes from tests/launcher/conftest.py.

    pytest test_status.py --ddplaunch=/path/to/ddplaunch
"""
import http.client
import json
import os
import re
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from launches import PRIVATE_REGISTRY
from pyfixtures import netns_hosts_or_skip

pytestmark = pytest.mark.timeout(60)

SECRET = "0123456789abcdef0123456789abcdef-status"
SLEEPER = '#!/bin/bash\necho $$ > "$PIDDIR/pid.$RANK"\nexec sleep 60\n'
PORT_LINE = re.compile(r"ddplaunch: status: http://(\S+):(\d+)/status, the job's page: \S+?(?:token=([0-9a-f]+))?$")


@pytest.fixture
def xdg(tmp_path):
    d = tmp_path / "xdg"
    d.mkdir(mode=0o700)
    return d




def status(lx, xdg, *args, expect=0, prefix=PRIVATE_REGISTRY):
    """`ddplaunch --status ARGS` with this test's registry: the parsed JSON (or stderr). The caller
    sees no other test's job: by default, /tmp/ddplaunch-<uid> (which every launcher also writes)
    is an empty one of its own."""
    code, out, err = lx.run(["--status", *args], env={"XDG_RUNTIME_DIR": str(xdg)}, timeout=15, prefix=prefix)
    assert code == expect, f"exit {code}\nstdout:\n{out}\nstderr:\n{err}"
    return json.loads(out) if expect == 0 else err


def wait_status(lx, xdg, pred, *args, timeout=15):
    """Asks until `pred(status)` holds: the launcher registers a second after its workers start,
    and a worker's exit is its own event, which a test cannot wait on from outside."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        code, out, _ = lx.run(["--status", *args], env={"XDG_RUNTIME_DIR": str(xdg)}, timeout=15,
                              prefix=PRIVATE_REGISTRY)  # no other test's job, as status() above
        if code == 0:
            last = json.loads(out)
            if pred(last):
                return last
        time.sleep(0.1)  # see above: no event to wait on
    pytest.fail(f"the status never matched; last: {json.dumps(last, indent=1)}")


def read_port(p):
    for line in p.stderr:  # said at start, before the rendezvous; the test's timeout bounds it
        m = PORT_LINE.search(line.rstrip("\n"))
        if m:
            return m.group(1), int(m.group(2)), m.group(3) or ""
    pytest.fail(f"no status port line; the launcher ended ({p.wait()})")


def http_get(host, port, path, timeout=5, source=None):
    c = http.client.HTTPConnection(host, port, timeout=timeout, source_address=source and (source, 0))
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read().decode()
    finally:
        c.close()


def test_status_of_a_running_job(lx, xdg):
    prog = lx.script("sleeper.sh", SLEEPER)
    env = {"XDG_RUNTIME_DIR": str(xdg), "DDPLAUNCH_RDZV_TOKEN": SECRET}
    p = lx.start(["--nproc_per_node", "2", "--status_port", "0", "--rdzv_id", "statusjob", prog], env=env)
    host, port, token = read_port(p)
    assert host == "127.0.0.1"  # a single node's store binds --master_addr; so does the status
    lx.wait_pids(2)
    t0 = time.monotonic()
    s = wait_status(lx, xdg, lambda s: len(s["ranks"]) == 2)
    real = {int(n.split(".")[1]): int(open(os.path.join(lx.dir, n)).read()) for n in os.listdir(lx.dir)
            if n.startswith("pid.")}
    assert {r["rank"]: r["pid"] for r in s["ranks"]} == real
    assert all(r["state"] == "running" for r in s["ranks"])
    assert s["job_id"] == "statusjob" and s["round"] == 0 and s["world_size"] == 2
    assert s["node"]["launcher_pid"] == p.pid and s["node"]["role"] == "active"
    assert s["node"]["state"] == "running" and s["hang"] == {"state": "none"}
    assert s["restarts"] == {"count": 0, "max": 0, "causes": []} and s["ended"] is None

    # The same launcher by pid and by socket path.
    assert status(lx, xdg, str(p.pid))["node"]["launcher_pid"] == p.pid
    record = json.loads((xdg / "ddplaunch" / "jobs" / f"{p.pid}.json").read_text())
    sock = record["status_socket"]
    assert status(lx, xdg, sock)["job_id"] == "statusjob"

    # A slow client (half a request) and a garbage one hold nobody up.
    slow = socket.create_connection((host, port))
    slow.sendall(b"GET /status HTTP/1.1\r\nHost: x\r\n")
    garbage = socket.socket(socket.AF_UNIX)
    garbage.connect(sock)
    garbage.sendall(b"\x00\xff" * 100 + b"\r\n\r\n")
    t1 = time.monotonic()
    # With a job secret, TCP answers /status only with the page's token (docs/job-page.md).
    assert http_get(host, port, "/status")[0] == 401 and token
    code, body = http_get(host, port, "/status?token=" + token)
    assert code == 200 and json.loads(body)["node"]["launcher_pid"] == p.pid
    assert http_get(host, port, "/healthz") == (200, "ok\n")
    assert http_get(host, port, "/metrics")[0] == 404
    assert status(lx, xdg)["job_id"] == "statusjob"
    asked = time.monotonic() - t1
    assert asked < 5, f"answers took {asked:.1f} s beside a slow client"
    assert garbage.recv(100).startswith(b"HTTP/1.1 400")
    slow.close()
    garbage.close()

    for text in (body, json.dumps(s), (xdg / "ddplaunch" / "jobs" / f"{p.pid}.json").read_text()):
        assert SECRET not in text

    # Once the launcher has gone, nothing listens.
    lx.procs.stop(p, grace=10)
    assert not os.path.exists(sock)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((host, port), timeout=2)
    lx.assert_no_survivors()
    print(f"status answered {time.monotonic() - t0:.1f} s into the test; {asked * 1000:.0f} ms with a slow client")


class Crowd:
    """`n` connections to the status port, kept open on a thread of their own: each one the server
    closes is opened again at once (as a stranger holding the port would). Silent, or with
    `drip`, a slowloris: one more byte of a request on each connection every `drip` seconds."""

    REQUEST = b"GET /healthz HTTP/1.1\r\nX-Slow: " + b"a" * 200 + b"\r\n\r\n"

    def __init__(self, host, port, n=40, drip=None):
        self.address, self.n, self.drip = (host, port), n, drip
        self.selector = selectors.DefaultSelector()
        self.sent = {}
        self.reopened = 0
        self.stop = threading.Event()
        for _ in range(n):
            self._open()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _open(self):
        s = socket.create_connection(self.address, timeout=5)
        self.selector.register(s, selectors.EVENT_READ)
        self.sent[s] = 0

    def _run(self):
        next_drip = time.monotonic()
        while not self.stop.is_set():
            # Woken by the server closing one (readable: end of file or reset), or for the next drip.
            for key, _ in self.selector.select(timeout=self.drip or 0.2):
                s = key.fileobj
                try:
                    data = s.recv(4096)
                except OSError:
                    data = b""
                if not data:
                    self.selector.unregister(s)
                    del self.sent[s]
                    s.close()
                    self._open()
                    self.reopened += 1
            if self.drip and time.monotonic() >= next_drip:
                next_drip += self.drip
                for s, i in list(self.sent.items()):
                    try:
                        s.send(self.REQUEST[i % len(self.REQUEST):i % len(self.REQUEST) + 1])
                        self.sent[s] = i + 1
                    except OSError:
                        pass  # closed by the server: the select above sees it and reopens it

    def close(self):
        self.stop.set()
        self.thread.join(timeout=10)
        for s in list(self.sent):
            s.close()


@pytest.mark.parametrize("drip", [None, 0.1], ids=["silent", "slowloris"])
def test_healthz_is_answered_beside_40_held_connections(lx, xdg, drip):
    """Issue 41: 40 connections held on the status port (the server keeps 32 at most) made every
    /healthz fail, so a Kubernetes liveness probe would restart the pod. Every probe over 7 s (past
    the server's deadlines, which close the held connections and the crowd reopens) is answered 200.
    The probes come from 127.0.0.2 and the crowd from 127.0.0.1, as a kubelet's and a stranger's
    addresses differ (the server makes room from the address that holds the most)."""
    prog = lx.script("sleeper.sh", SLEEPER)
    p = lx.start(["--nproc_per_node", "1", "--status_port", "0", prog], env={"XDG_RUNTIME_DIR": str(xdg)})
    host, port, _ = read_port(p)
    lx.wait_pids(1)
    assert http_get(host, port, "/healthz") == (200, "ok\n")
    crowd = Crowd(host, port, drip=drip)
    answers, slowest = [], 0.0
    try:
        end = time.monotonic() + 7
        while time.monotonic() < end:
            t = time.monotonic()
            try:
                answers.append(http_get(host, port, "/healthz", timeout=3, source="127.0.0.2"))
            except OSError as e:
                answers.append(repr(e))
            slowest = max(slowest, time.monotonic() - t)
            time.sleep(0.2)  # the probe's period: what is tested is every probe, not a wait
    finally:
        crowd.close()
    failed = [a for a in answers if a != (200, "ok\n")]
    assert len(answers) >= 10 and not failed, f"{len(failed)} of {len(answers)} probes failed: {failed[:5]}"
    assert slowest < 2, f"the slowest probe took {slowest:.1f} s"
    print(f"{len(answers)} probes answered beside 40 {'slowloris' if drip else 'silent'} connections "
          f"(slowest {slowest * 1000:.0f} ms; the crowd reopened {crowd.reopened})")
    lx.procs.stop(p, grace=10)
    lx.assert_no_survivors()


def test_a_worker_that_exited_shows_its_code(lx, xdg):
    # Rank 1 fails with 3; rank 0 ignores SIGTERM, so the round stays stopping for the grace. Rank 1's
    # 1.5 s is not an ordering wait: the test reads the board while it is "stopping", whenever that is.
    prog = lx.script("fail.sh", '#!/bin/bash\necho $$ > "$PIDDIR/pid.$RANK"\n'
                     'if [ "$RANK" = 1 ]; then sleep 1.5; exit 3; fi\ntrap "" TERM\nexec sleep 60\n')
    p = lx.start(["--nproc_per_node", "2", "--shutdown_timeout", "20", prog], env={"XDG_RUNTIME_DIR": str(xdg)})
    s = wait_status(lx, xdg, lambda s: any(r["state"] == "exited" for r in s["ranks"]))
    by_rank = {r["rank"]: r for r in s["ranks"]}
    assert by_rank[1]["state"] == "exited" and by_rank[1]["exit_code"] == 3 and by_rank[1]["signal"] is None
    assert by_rank[0]["state"] == "stopping"
    assert s["node"]["state"] == "stopping" and s["stopping"] == {"code": 3, "origin_node": 0}
    lx.procs.kill(p)
    lx.kill_workers()


def test_python_ranks_show_flight_recorder_progress(lx, xdg):
    # Two gloo ranks doing all_reduces: their last progress comes from PyTorch's Flight Recorder,
    # as the launcher's watch polls it (every 2 s).
    prog = lx.script("allreduce.py", "import os, time, torch, torch.distributed as dist\n"
                     "open(os.path.join(os.environ['PIDDIR'], 'pid.' + os.environ['RANK']), 'w').write(str(os.getpid()))\n"
                     "dist.init_process_group('gloo')\n"
                     "while True:\n    dist.all_reduce(torch.ones(4))\n    time.sleep(0.05)\n", mode=0o644)
    env = {"XDG_RUNTIME_DIR": str(xdg), "PYTHON_EXEC": sys.executable, "OMP_NUM_THREADS": "1"}
    p = lx.start(["--nproc_per_node", "2", prog], env=env)
    # A poll may come before a rank's first all_reduce completed (a loaded machine): wait for one
    # that saw a completed collective on both ranks, not just for the first poll.
    s = wait_status(lx, xdg, lambda s: len(s["ranks"]) == 2 and all(
        r["last_progress"] and r["last_progress"]["collectives_completed"] > 0 for r in s["ranks"]), timeout=30)
    for r in s["ranks"]:
        lp = r["last_progress"]
        assert lp["source"] == "flight_recorder" and lp["collectives_completed"] > 0, lp
        assert 0 <= lp["age_s"] < 10
    print(json.dumps(s["ranks"]))
    lx.procs.stop(p, grace=10)
    lx.assert_no_survivors()


def test_a_python_rank_waiting_names_its_op_as_dump_stacks_does(lx, xdg):
    # Rank 0 waits in a barrier rank 1 never enters: once two polls saw the same wait, --status names
    # the op as --dump_stacks does ("gloo:barrier #2"); rank 1, in no collective, names none.
    prog = lx.script("barrier.py", "import os, time, torch, torch.distributed as dist\n"
                     "open(os.path.join(os.environ['PIDDIR'], 'pid.' + os.environ['RANK']), 'w').write(str(os.getpid()))\n"
                     "dist.init_process_group('gloo')\n"
                     "dist.all_reduce(torch.ones(4))\n"
                     "time.sleep(600) if dist.get_rank() == 1 else dist.barrier()\n", mode=0o644)
    env = {"XDG_RUNTIME_DIR": str(xdg), "PYTHON_EXEC": sys.executable, "OMP_NUM_THREADS": "1"}
    p = lx.start(["--nproc_per_node", "2", prog], env=env)
    s = wait_status(lx, xdg, lambda s: len(s["ranks"]) == 2 and all(r["last_progress"] for r in s["ranks"])
                    and s["ranks"][0]["last_progress"].get("op"), timeout=60)
    by_rank = {r["rank"]: r["last_progress"] for r in s["ranks"]}
    assert by_rank[0]["op"] == "gloo:barrier #2" and by_rank[0]["in_collective"] == "#2 in group 0", by_rank
    assert by_rank[1]["op"] is None and by_rank[1]["in_collective"] is None, by_rank
    lx.procs.stop(p, grace=10)
    lx.assert_no_survivors()


class FakeStatusSocket:
    """A unix socket that answers every request with `reply` (raw HTTP bytes), on a thread."""

    def __init__(self, path):
        self.path, self.reply = str(path), b""
        self.listener = socket.socket(socket.AF_UNIX)
        self.listener.bind(self.path)
        self.listener.listen(8)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return  # closed: the test is over
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    data += chunk
                conn.sendall(self.reply)

    def answer(self, code, body):
        self.reply = (f"HTTP/1.1 {code} X\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body

    def close(self):
        self.listener.close()
        self.thread.join(timeout=5)


HOSTILE = "\x1b]0;owned\x07\x1b[2J\x1b[31mred\x7f\u009b31m"  # title, clear, colour, DEL, C1 CSI


def test_status_escapes_a_hostile_reply(lx, xdg, tmp_path):
    """Issue 41: `--status SOCKET` printed a reply's escape bytes to the terminal. Whatever listens on
    the socket, no control character reaches stdout or stderr raw: a JSON reply keeps its strings
    (escaped as JSON), a reply that is not JSON or not 200 is quoted escaped."""
    fake = FakeStatusSocket(tmp_path / "fake.sock")
    try:
        fake.answer(200, json.dumps({"job_id": HOSTILE, "node": {"host": "h\u0085"}}, ensure_ascii=False).encode())
        code, out, err = lx.run(["--status", fake.path], env={"XDG_RUNTIME_DIR": str(xdg)}, timeout=15)
        assert code == 0, err
        assert json.loads(out) == {"job_id": HOSTILE, "node": {"host": "h\u0085"}}  # the same document
        assert "\\u001b]0;owned" in out and "\\u009b" in out and "\\u007f" in out and "\\u0085" in out

        fake.answer(200, HOSTILE.encode() + b" not json")
        code, out2, err2 = lx.run(["--status", fake.path], env={"XDG_RUNTIME_DIR": str(xdg)}, timeout=15)
        assert code == 1 and f"{fake.path} answered with something that is not JSON: \"\\u001b]0;owned" in err2, err2

        fake.answer(500, HOSTILE.encode())
        code, out3, err3 = lx.run(["--status", fake.path], env={"XDG_RUNTIME_DIR": str(xdg)}, timeout=15)
        assert code == 1 and f"{fake.path} answered GET /status with HTTP status 500: \"\\u001b" in err3, err3
    finally:
        fake.close()
    for text in (out, err, out2, err2, out3, err3):
        raw = [c for c in text if (ord(c) < 0x20 and c not in "\n\t") or 0x7f <= ord(c) <= 0x9f]
        assert not raw, f"control characters printed raw: {raw!r} in {text!r}"
    print(f"printed: {out.strip()!r}\n{err2.strip()!r}\n{err3.strip()!r}")


def test_no_job_and_wrong_arguments(lx, xdg, tmp_path):
    fifo = tmp_path / "not-a-socket"
    os.mkfifo(fifo)  # connecting to it failed as a gone launcher's socket does (exit 1)
    err = status(lx, xdg, str(fifo), expect=2)
    assert f"--status {fifo}: this is a FIFO, not a launcher's status socket" in err and len(err.splitlines()) == 1
    err = status(lx, xdg, expect=1)
    assert "no running ddplaunch launcher of this user on this machine" in err and len(err.splitlines()) == 1
    assert "with pid 1 " in status(lx, xdg, "1", expect=1)
    assert "cannot connect to /nonexistent/status.sock" in status(lx, xdg, "/nonexistent/status.sock", expect=1)
    assert "--status takes a launcher's pid" in status(lx, xdg, "train.py", expect=2)
    code, _, err = lx.run(["--status_port", "70000", "x.sh"])
    assert code == 2 and "70000 is not a port" in err


def test_two_jobs_in_the_callers_directory_are_listed_and_neither_is_asked(lx, xdg):
    prog = lx.script("sleeper.sh", '#!/bin/bash\necho $$ > "$PIDDIR/pid.$RANK.$TORCHELASTIC_RUN_ID"\nexec sleep 60\n')
    jobs = [lx.start(["--nproc_per_node", "1", "--rdzv_id", run, prog], env={"XDG_RUNTIME_DIR": str(xdg)})
            for run in ("first", "second")]
    records = [xdg / "ddplaunch" / "jobs" / f"{p.pid}.json" for p in jobs]
    deadline = time.monotonic() + 20
    while not all(r.exists() for r in records):  # a launcher registers a second after its workers start
        assert time.monotonic() < deadline and all(p.poll() is None for p in jobs), "the jobs did not register"
        time.sleep(0.05)  # no event for "a file appeared" short of inotify
    err = status(lx, xdg, expect=2)
    lines = err.splitlines()
    assert lines[0] == (f"ddplaunch: 2 ddplaunch jobs of this user run on this machine and several were started in "
                        f"{lx.dir}, so ddplaunch --status asks none; choose one with the arguments below, or run it "
                        "in the job's directory"), err
    assert len(lines) == 3, err
    for p, run in zip(jobs, ("first", "second")):
        assert any(line.startswith(f"ddplaunch: job '{run}' at 127.0.0.1:") and f"(pid {p.pid}, started " in line
                   and line.endswith(f"; choose it with ddplaunch --status {p.pid}") for line in lines[1:]), err
        assert status(lx, xdg, str(p.pid))["job_id"] == run
    for p in jobs:
        lx.procs.stop(p, grace=10)
    lx.assert_no_survivors()


NODES = ["10.244.0.1", "10.244.0.2"]


@pytest.fixture(scope="module")
def hosts():
    yield from netns_hosts_or_skip(NODES)


def test_two_nodes_each_say_their_role_and_round(lx, xdg, hosts):
    prog = lx.script("sleeper.sh", SLEEPER)
    env = {"XDG_RUNTIME_DIR": str(xdg)}
    launchers = []
    for rank, h in enumerate(hosts):
        args = ["--nnodes", "2", "--node_rank", str(rank), "--master_addr", NODES[0], "--master_port", "29561",
                "--nproc_per_node", "1", "--rdzv_id", "twonodes", "--status_port", "0", "--heartbeat_timeout", "3",
                "--rdzv_timeout", "20", prog]
        e = dict(os.environ, PIDDIR=lx.dir, **env)
        launchers.append(lx.procs.start(h.cmd(lx.launcher, *args), env=e, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True, cwd=lx.dir))
    ports = [read_port(p) for p in launchers]
    assert ports[0][0] == NODES[0]  # node 0: the store's address; node 1: every interface
    for p in launchers:  # `ip netns exec` execs the launcher: its pid is the launcher's
        s = wait_status(lx, xdg, lambda s: len(s["ranks"]) == 1, str(p.pid))
        g = s["node"]["group_rank"]
        assert g == launchers.index(p)
        assert s["node"]["role"] == "active" and s["node"]["state"] == "running"
        assert s["round"] == 0 and s["world_size"] == 2 and s["job_id"] == "twonodes"
        assert [n["group_rank"] for n in s["nodes"]] == [0, 1] and [x["rank"] for x in s["ranks"]] == [g]
        print(f"node {g}: node={json.dumps(s['node'])} round={s['round']} nodes={json.dumps(s['nodes'])}")
    # Node 1's port from node 0's host, over the bridge.
    ask = ("import http.client, sys; c = http.client.HTTPConnection(sys.argv[1], int(sys.argv[2]), timeout=5); "
           "c.request('GET', '/status'); r = c.getresponse(); print(r.status, r.read().decode())")
    out = subprocess.run(hosts[0].cmd("python3", "-c", ask, NODES[1], str(ports[1][1])), capture_output=True,
                         text=True, timeout=15).stdout
    code, body = out.split(" ", 1)
    assert code == "200" and json.loads(body)["node"]["group_rank"] == 1
    for p in launchers:
        lx.procs.stop(p, grace=10)
    lx.assert_no_survivors()
