"""Health checks before every rendezvous round (issue 26), on network-namespace hosts.

Hosts 10.242.0.1-3 on one bridge (pyfixtures.NetnsHosts); tiny shell workers; short timeouts.
  * static 2-node job, node 1's --health_check fails: both launchers exit 69 at once, both name
    node 1 and the check;
  * elastic --nnodes=2:3, node 2's check fails: nodes 0 and 1 run the job to success without
    waiting for a last call, and both say node 2 excluded itself; node 2 exits 69;
  * elastic --nnodes=2:3, node 2's check passes in round 0 and fails at the restart (a worker
    of node 2 creates the file the check looks for, then fails): node 2 leaves at the restart,
    the other two finish the job;
  * a log directory without room (a 1 MiB tmpfs): the built-in check names it (exit 69);
  * --dry-run lists the checks;
  * SIGTERM, SIGINT or SIGHUP while the check hangs (one node, and node 0 of two, which checks on
    the join thread): the launcher exits 128+N within a few seconds and nothing of the check is
    left;
  * a check that starts a daemon (`(setsid sleep 1000 &)`) and passes: nothing of it outlives the
    job, with the job's cgroup and without (DDPLAUNCH_CGROUP=0);
  * a launcher killed (SIGKILL) while its check hangs: the reaper ends the check, with the job's
    cgroup and without.
Needs root and `ip netns` (the netns cases skip otherwise).
    pytest test_health.py --ddplaunch=/path/to/ddplaunch
"""
import os
import signal
import subprocess
import time

import pytest

from pyfixtures import alive, free_port, netns_hosts_or_skip, note

pytestmark = pytest.mark.timeout(120)

ADDRESSES = ["10.242.0.1", "10.242.0.2", "10.242.0.3"]
BOUND = 30  # seconds any launcher may take here (each case takes well under 10)

WORKER = """#!/bin/sh
# Node 2's first attempt creates the file its health check looks for, then fails.
if [ -n "$SICK_FILE" ] && [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then touch "$SICK_FILE"; exit 3; fi
exit 0
"""


@pytest.fixture(scope="module")
def hosts():
    yield from netns_hosts_or_skip(ADDRESSES)


@pytest.fixture
def worker(tmp_path):
    path = tmp_path / "worker.sh"
    path.write_text(WORKER)
    path.chmod(0o755)
    return str(path)


class Nodes:
    """Launchers on the namespace hosts, started together and awaited with their times."""

    def __init__(self, ddplaunch, procs, hosts, port, nnodes):
        self.ddplaunch, self.procs, self.hosts, self.port, self.nnodes = ddplaunch, procs, hosts, port, nnodes
        self.started = {}

    def start(self, rank, args, env=None):
        e = dict(os.environ)
        e.update(env or {})
        cmd = self.hosts[rank].cmd(self.ddplaunch, f"--nnodes={self.nnodes}", f"--node_rank={rank}",
                                   f"--master_addr={ADDRESSES[0]}", f"--master_port={self.port}",
                                   "--nproc_per_node=1", "--rdzv_timeout=20", "--heartbeat_timeout=3",
                                   f"--local_addr={ADDRESSES[rank]}", *args)
        p = self.procs.start(cmd, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.started[rank] = (p, time.monotonic())

    def finish(self):
        """{rank: (code, stderr, seconds)}; fails the test for a launcher over BOUND."""
        out = {}
        for rank, (p, t0) in self.started.items():
            try:
                _, err = p.communicate(timeout=BOUND)
            except subprocess.TimeoutExpired:
                self.procs.kill(p)
                _, err = p.communicate()
                pytest.fail(f"node {rank} did not finish within {BOUND} s:\n{err}")
            out[rank] = (p.returncode, err, time.monotonic() - t0)
        return out


def show(results):
    return "\n".join(f"--- node {r} (exit {c}, {s:.2f} s):\n{e}" for r, (c, e, s) in sorted(results.items()))


def test_static_job_fails_on_every_node_naming_the_unhealthy_one(ddplaunch, procs, hosts, worker):
    nodes = Nodes(ddplaunch, procs, hosts, 29711, "2")
    nodes.start(0, [worker])
    nodes.start(1, ["--health_check", "echo 'ib0: link down'; exit 1", worker])
    results = nodes.finish()
    for rank in (0, 1):
        code, err, seconds = results[rank]
        assert code == 69, show(results)
        assert "node 1 (" in err and "excluded itself: health check command 'echo 'ib0: link down'; exit 1' " \
            "failed: exited with 1: ib0: link down; the job cannot run without it (--nnodes=2 is static)" in err, \
            show(results)
        assert seconds < 10, show(results)
    assert "    | ib0: link down" in results[1][1]
    note("health, static 2 nodes, node 1 unhealthy: exit 69 on both, node 0 after "
         f"{results[0][2]:.2f} s, node 1 after {results[1][2]:.2f} s")
    procs.assert_no_survivors()


def test_elastic_job_goes_on_without_the_unhealthy_node(ddplaunch, procs, hosts, worker):
    nodes = Nodes(ddplaunch, procs, hosts, 29712, "2:3")
    nodes.start(0, [worker])
    nodes.start(1, [worker])
    nodes.start(2, ["--health_check", "echo 'GPU 3: 2 uncorrectable ECC errors' >&2; exit 2", worker])
    results = nodes.finish()
    line = "excluded itself: health check command 'echo 'GPU 3: 2 uncorrectable ECC errors' >&2; exit 2' failed: " \
        "exited with 2: GPU 3: 2 uncorrectable ECC errors"
    for rank in (0, 1):
        code, err, seconds = results[rank]
        assert code == 0, show(results)
        assert "node 2 (" in err and line in err, show(results)
        assert seconds < 3, show(results)  # no last call: node 2 counted as present
    assert "world size 2" in results[0][1], show(results)
    code, err, _ = results[2]
    assert code == 69, show(results)
    assert line + "; the other nodes go on without it" in err
    note("health, elastic 2:3, node 2 unhealthy: nodes 0 and 1 exit 0 after "
         f"{results[0][2]:.2f} s / {results[1][2]:.2f} s, node 2 exits 69 after {results[2][2]:.2f} s")
    procs.assert_no_survivors()


def test_node_that_fails_at_the_restart_leaves_and_the_job_goes_on(ddplaunch, procs, hosts, worker, tmp_path):
    sick = str(tmp_path / "sick")
    nodes = Nodes(ddplaunch, procs, hosts, 29713, "2:3")
    for rank in (0, 1):
        nodes.start(rank, ["--max_restarts=1", worker])
    nodes.start(2, ["--max_restarts=1", "--health_check", f"test ! -e {sick} || {{ echo 'marked sick'; exit 1; }}",
                    worker], env={"SICK_FILE": sick})
    results = nodes.finish()
    for rank in (0, 1):
        code, err, _ = results[rank]
        assert code == 0, show(results)
        assert "restarting the job (restart 1 of 1)" in err, show(results)
        assert "node 2 (" in err and "excluded itself: health check command" in err and ": marked sick" in err, \
            show(results)
    code, err, _ = results[2]
    assert code == 69, show(results)
    assert "health checks passed before round 0" in err and "health checks before round 1 on this node" in err
    note(f"health, elastic 2:3, node 2 unhealthy at the restart: nodes 0/1 exit 0 after {results[0][2]:.2f} s / "
         f"{results[1][2]:.2f} s, node 2 exits 69 after {results[2][2]:.2f} s")
    procs.assert_no_survivors()


def test_log_directory_without_room_is_named(ddplaunch, procs, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    full = tmp_path / "full"
    full.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(full)], check=True)
    try:
        code, out, err, seconds = procs.run([ddplaunch, "--nproc_per_node=1", f"--log_dir={full}", "/bin/true"],
                                            timeout=BOUND)
    finally:
        subprocess.run(["umount", "-l", str(full)], check=False)
    assert code == 69, err
    assert f"log directory: FAILED: only " in err and f"free in {full}/" in err, err
    assert "(at least 16.0 MiB needed); free space there or pass another --log_dir, or lower --health_min_free_mb" in err
    note(f"health, log dir on a 1 MiB tmpfs: exit 69 after {seconds:.2f} s")
    procs.assert_no_survivors()


def test_dry_run_lists_the_checks(ddplaunch, procs):
    code, out, err, _ = procs.run([ddplaunch, "--dry-run", "--health_check", "true", "/bin/true"], timeout=BOUND)
    assert code == 0, err
    assert "health checks before every round (a node that fails one does not join; exit 69):" in out
    assert "  GPUs: the visible devices answer without uncorrectable ECC errors (NVML); now: " in out
    assert "  command: /bin/sh -c 'true' exits 0 within 120 s" in out


def wait_for_file(path, p, timeout=BOUND):
    """Waits until `path` exists; fails if launcher `p` exits first or `timeout` passes."""
    end = time.monotonic() + timeout
    while not os.path.exists(path):  # no event tells us when a shell creates a file
        assert p.poll() is None, f"the launcher exited with {p.returncode} before its check started"
        assert time.monotonic() < end, f"{path} not created within {timeout} s"
        time.sleep(0.05)


@pytest.mark.parametrize("signo,nnodes,at_restart", [
    (signal.SIGTERM, 1, False), (signal.SIGINT, 1, False), (signal.SIGHUP, 1, False),
    (signal.SIGTERM, 2, False), (signal.SIGINT, 2, False), (signal.SIGTERM, 1, True), (signal.SIGINT, 2, True)])
def test_signal_during_a_hanging_check_stops_at_once(ddplaunch, procs, tmp_path, signo, nnodes, at_restart):
    started = str(tmp_path / "started")
    # Two processes in the check's group (the shell does not exec the sleep), so killing the shell
    # alone would leave one. At a restart: round 0's check passes, its worker fails, round 1's hangs.
    check = f"touch {started}; sleep 1000; echo never"
    if at_restart:
        check = f'[ "$DDPLAUNCH_HEALTH_ROUND" = 0 ] || {{ {check}; }}'
    args = [ddplaunch, "--nproc_per_node=1", "--rdzv_timeout=60", "--max_restarts=1", "--health_check", check,
            "/bin/false" if at_restart else "/bin/true"]
    other = None
    if nnodes == 2:
        # Node 0 alone: it checks before its rendezvous, on the join thread; a restart needs both.
        args[1:1] = ["--nnodes=2", "--master_addr=127.0.0.1", f"--master_port={free_port()}"]
        if at_restart:
            other = procs.start([*args[:-3], "--node_rank=1", "/bin/true"], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        args[1:1] = ["--node_rank=0"]
    p = procs.start(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for_file(started, p)
    t0 = time.monotonic()
    p.send_signal(signo)
    try:
        _, err = p.communicate(timeout=BOUND)
    except subprocess.TimeoutExpired:
        procs.kill(p)
        pytest.fail(f"the launcher ignored {signo.name} for {BOUND} s while its check hung:\n{p.communicate()[1]}")
    seconds = time.monotonic() - t0
    assert p.returncode == 128 + signo, err
    assert seconds < 5, err
    assert f"interrupted by {signo.name} during this node's health checks" in err, err
    if at_restart:
        assert "restarting the job (restart 1 of 1)" in err, err
    if other:
        procs.stop(other, grace=BOUND)  # it waits for node 0 in round 1's rendezvous
    procs.assert_no_survivors(timeout=5)
    note(f"health, {signo.name} during a hanging check ({nnodes} node(s){', at the restart' if at_restart else ''}): "
         f"exit {p.returncode} after {seconds:.2f} s")


@pytest.mark.parametrize("cgroup", ["1", "0"])
def test_a_daemon_the_check_starts_does_not_outlive_the_job(ddplaunch, procs, tmp_path, cgroup):
    env = dict(os.environ, DDPLAUNCH_CGROUP=cgroup)
    pidfile = tmp_path / "daemon.pid"
    # The check passes once the daemon has left its session and group (it writes its pid after
    # setsid): the check's own group, killed when it ends, no longer holds it.
    check = f"(setsid sh -c 'echo $$ > {pidfile}; exec sleep 1000' &); until [ -s {pidfile} ]; do sleep 0.02; done"
    code, _, err, seconds = procs.run([ddplaunch, "--nproc_per_node=1", "--health_check", check, "/bin/true"],
                                      timeout=BOUND, env=env)
    assert code == 0, err
    daemon = int(pidfile.read_text())
    procs.assert_no_survivors(timeout=5)
    assert not alive(daemon), f"the check's daemon {daemon} outlived the job"
    note(f"health, a daemon started by the check (DDPLAUNCH_CGROUP={cgroup}): gone at the end, "
         f"the job took {seconds:.2f} s")


@pytest.mark.parametrize("cgroup", ["1", "0"])
def test_a_launcher_killed_during_its_check_leaves_nothing_of_it(ddplaunch, procs, tmp_path, cgroup):
    started = str(tmp_path / "started")
    env = dict(os.environ, DDPLAUNCH_CGROUP=cgroup)
    p = procs.start([ddplaunch, "--nproc_per_node=1", "--health_check", f"touch {started}; sleep 1000; true",
                     "/bin/true"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_file(started, p)
    p.kill()  # the launcher alone, not its process group: only the reaper is left to end the check
    p.wait(timeout=BOUND)
    procs.assert_no_survivors(timeout=5)
    note(f"health, launcher killed during its check (DDPLAUNCH_CGROUP={cgroup}): nothing of the check is left")
