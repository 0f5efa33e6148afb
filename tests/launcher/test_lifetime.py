"""Nothing a worker started outlives the job (README: "What is left running, and when").

Each test runs the real ddplaunch on lifetime_worker.sh, whose workers leave a background job
ignoring SIGINT, a Python subprocess and a setsid daemon behind, and checks that they are gone
after kill -9 of the launcher (within 1 s), after Ctrl-C and after a worker failure (when the
launcher has exited); with the job's cgroup v2 and without it (DDPLAUNCH_CGROUP=0, process
groups only: then a daemon survives kill -9, as documented). Also: a worker holds stdin, stdout
and stderr only, on both nodes of a 2-node job; the store's port is free right after kill -9.
Waits are on events (a line on the launcher's stdout, a pidfd becoming readable, an exit);
every process started is killed at the end.
"""
import os
import select
import signal
import subprocess
import sys
import time

import pytest

from pyfixtures import free_port

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "lifetime_worker.sh")
pytestmark = pytest.mark.timeout(120)


def cgroup_writable():
    with open("/proc/self/mountinfo") as f:
        mounts = [line.split(" - ")[0].split()[4] for line in f if " - cgroup2 " in line]
    if not mounts:
        return False
    probe = os.path.join(mounts[0], f"ddplaunch-probe-{os.getpid()}")
    try:
        os.mkdir(probe)
        os.rmdir(probe)
        return True
    except OSError:
        return False


def gone(pid):
    """True when `pid` has exited (a zombie waiting for its new parent counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def wait_exit(pidfds, timeout):
    """Waits until every pidfd is readable (its process exited); returns the pids still alive."""
    deadline = time.monotonic() + timeout
    pending = dict(pidfds)
    while pending:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        ready, _, _ = select.select(list(pending), [], [], left)
        for fd in ready:
            pending.pop(fd)
    return sorted(pending.values())


class Job:
    """One ddplaunch run of lifetime_worker.sh; kills everything it knows of on close()."""

    def __init__(self, ddplaunch, tmp_path, nproc=2, cgroup=True, fail_rank=None, extra=()):
        self.dir = tmp_path
        os.mkfifo(tmp_path / "go")
        env = dict(os.environ, LIFETIME_DIR=str(tmp_path), DDPLAUNCH_CGROUP="1" if cgroup else "0")
        if fail_rank is not None:
            env["FAIL_RANK"] = str(fail_rank)
        self.nproc = nproc
        self.proc = subprocess.Popen(
            [ddplaunch, "--log_level", "debug", f"--nproc_per_node={nproc}", "--shutdown_timeout=2", *extra, WORKER],
            # Unbuffered bytes: readline() then reads no further than the line, so select() on the pipe
            # never misses a line already pulled into a buffer.
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, start_new_session=True, bufsize=0)
        self.lines = []
        self.pids = []

    def wait_ready(self, timeout=30):
        deadline = time.monotonic() + timeout
        ready = 0
        while ready < self.nproc:
            left = deadline - time.monotonic()
            assert left > 0, f"workers not ready after {timeout} s:\n" + "".join(self.lines)
            r, _, _ = select.select([self.proc.stdout], [], [], left)
            if not r:
                continue
            line = self.proc.stdout.readline().decode(errors="replace")
            assert line, "ddplaunch ended early:\n" + "".join(self.lines)
            self.lines.append(line)
            ready += line.rstrip().endswith("ready")
        for rank in range(self.nproc):
            with open(self.dir / f"pids.{rank}") as f:
                self.pids += [int(p) for p in f.read().split()]
        # pidfds now, while the pids are surely still ours.
        self.pidfds = {os.pidfd_open(p): p for p in self.pids}

    def finish(self, timeout=30):
        out, _ = self.proc.communicate(timeout=timeout)
        self.lines.append(out.decode(errors="replace"))
        return self.proc.returncode

    def output(self):
        return "".join(self.lines)

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for fd, pid in getattr(self, "pidfds", {}).items():
            try:
                signal.pidfd_send_signal(fd, signal.SIGKILL)
            except ProcessLookupError:
                pass  # gone already: what the test wanted
            os.close(fd)


@pytest.fixture
def job(ddplaunch, tmp_path):
    jobs = []

    def make(**kw):
        jobs.append(Job(ddplaunch, tmp_path, **kw))
        return jobs[-1]

    yield make
    for j in jobs:
        j.close()


MODES = [pytest.param(True, id="cgroup"), pytest.param(False, id="process-groups")]


def need(cgroup):
    if cgroup and not cgroup_writable():
        pytest.skip("the cgroup v2 hierarchy is not writable here; the process-group variant covers this machine")


@pytest.mark.parametrize("cgroup", MODES)
def test_kill9_leaves_nothing_within_a_second(job, cgroup):
    need(cgroup)
    j = job(cgroup=cgroup)
    j.wait_ready()
    assert ("workers run in cgroup" in j.output()) == cgroup, j.output()
    os.kill(j.proc.pid, signal.SIGKILL)
    alive = wait_exit(j.pidfds, 1.0)
    daemons = {j.pids[i] for i in range(3, len(j.pids), 4)}
    if cgroup:
        assert alive == []
    else:
        # Without a cgroup nothing can find a process that left its group after the launcher
        # died: the setsid daemons are the documented exception.
        assert set(alive) == daemons


@pytest.mark.parametrize("cgroup", MODES)
def test_ctrl_c_leaves_nothing_when_the_launcher_exits(job, cgroup):
    need(cgroup)
    j = job(cgroup=cgroup)
    j.wait_ready()
    j.proc.send_signal(signal.SIGINT)
    assert j.finish() == 130, j.output()
    assert [p for p in j.pids if not gone(p)] == []


@pytest.mark.parametrize("cgroup", MODES)
def test_failure_leaves_nothing_when_the_launcher_exits(job, cgroup):
    need(cgroup)
    j = job(cgroup=cgroup, fail_rank=1)
    j.wait_ready()
    with open(j.dir / "go", "w") as go:
        go.write("fail\n")
    assert j.finish() == 3, j.output()
    assert [p for p in j.pids if not gone(p)] == []


def test_second_ctrl_c_during_the_final_grace_kills_at_once(ddplaunch, tmp_path):
    # The worker succeeds at once, leaving a daemon that ignores SIGTERM: the launcher waits the
    # grace (60 s) for it, and a Ctrl-C meanwhile ends that wait with SIGKILL.
    pidfile = tmp_path / "daemon"
    # The daemon prints its pid on the pipe, then closes it: `read` returns once it is written.
    script = "setsid -f sh -c 'trap \"\" TERM INT; echo $$; exec sleep 298 >/dev/null 2>&1' </dev/null " \
             f"| (read -r pid; echo $pid > {pidfile})"
    proc = subprocess.Popen([ddplaunch, "--log_level=debug", "--nproc_per_node=1", "--shutdown_timeout=60",
                             "/bin/sh", "-c", script], stderr=subprocess.PIPE, text=True, start_new_session=True)
    daemon = None
    try:
        for line in proc.stderr:
            if "stopping what the workers left behind" in line:
                break
        daemon = int(pidfile.read_text())
        fd = os.pidfd_open(daemon)
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=10)
        assert wait_exit({fd: daemon}, 1.0) == []
        assert time.monotonic() - started < 5
        os.close(fd)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if daemon and not gone(daemon):
            os.kill(daemon, signal.SIGKILL)


def test_store_port_is_free_right_after_kill9(job, ddplaunch, tmp_path):
    port = free_port()
    j = job(extra=("--master_addr=127.0.0.1", f"--master_port={port}"))
    j.wait_ready()
    os.kill(j.proc.pid, signal.SIGKILL)
    assert wait_exit(j.pidfds, 1.0) == []
    rerun = subprocess.run([ddplaunch, "--master_addr=127.0.0.1", f"--master_port={port}", "--nproc_per_node=1",
                            "/bin/true"], capture_output=True, text=True, timeout=60)
    assert rerun.returncode == 0, rerun.stderr


def test_workers_hold_only_stdio_and_the_progress_table_on_both_nodes(ddplaunch, tmp_path):
    # ls lists /proc/self/fd through its own fd 3; anything else was inherited.
    script = "ls -l /proc/self/fd | awk 'NR > 1 {print \"fd\", $9, $11}'"
    port = free_port()
    common = ["--nnodes=2", "--nproc_per_node=2", "--master_addr=127.0.0.1", f"--master_port={port}",
              "--rdzv_conf", "join_timeout=60", "/bin/sh", "-c", script]
    nodes = [subprocess.Popen([ddplaunch, f"--node_rank={r}", *common], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, start_new_session=True) for r in (0, 1)]
    try:
        outs = [n.communicate(timeout=90)[0] for n in nodes]
    finally:
        for n in nodes:
            if n.poll() is None:
                n.kill()
                n.wait()
    for rank, (node, out) in enumerate(zip(nodes, outs)):
        assert node.returncode == 0, out
        fds = [line.split(":", 1)[-1].split() for line in out.splitlines() if ":fd " in line]
        # The one descriptor a worker inherits on purpose: the collective-progress table (a memfd,
        # no socket, no port; README "Failure reports").
        progress = [f for f in fds if f[2:] == ["/memfd:ddplaunch-progress"]]
        assert len(progress) == 2, out
        fds = [f for f in fds if f not in progress]
        assert len(fds) == 2 * 4, out  # two workers, fds 0-3 each
        assert sorted({f[1] for f in fds}) == ["0", "1", "2", "3"], out
        assert not any("socket:" in " ".join(f) for f in fds), f"node {rank} worker holds a socket:\n{out}"
