"""`ddplaunch --hostfile` over real OpenSSH (issue 44).

Eight network-namespace hosts on one bridge: 10.233.0.1-3 run an sshd each (keys made here) and
are the job's hosts; 10.233.0.4 runs an sshd that takes passwords only; 10.233.0.5 runs no sshd;
10.233.0.6 runs an sshd in a mount namespace where the build directory (and so ddplaunch) is
hidden; 10.233.0.7 runs an sshd in a mount namespace where ddplaunch is a script of another
version and a directory (site.elsewhere) is empty; 10.233.0.9 is the controller, where the one
`ddplaunch --hostfile` command runs. Every host has its interface named `fleet0`, so one
forwarded GLOO_SOCKET_IFNAME fits all.

The hosts share this machine's process table and file system, so a process scan here sees every
host's processes (each test's worker path is its own), and the workers' marker files land in the
test's directory.

Covered: a 3-node gloo job trains and exits 0 (the environment forwarded and nothing else, the
secret on no command line); a rank failing on host 3 gives its exit code and root cause on the
controller; Ctrl-C at the controller leaves nothing on any host; a SIGKILL of the controller ends
the remote jobs within the heartbeat timeout; a host's ssh session killed mid-job stops a static
job (exit 1, its lines kept); an elastic job (--nnodes=2:3) goes on without a host whose ssh
session is killed, with --active_nodes=2 the standby taking its place (exit 0), but not without
node 0's (exit 1); a --health_check
failing on one host (a static job exits 69 at once, an elastic one runs on the others); slots per
host and a restart (--max_restarts reaches every host); preflight lines for a password-only host,
a host without sshd, one without ddplaunch, one whose ddplaunch is another version and one
without the working directory, for a --master_addr the other hosts cannot reach and a
--master_port taken on node 0's host (exit 2, nothing started, within seconds); two jobs on the
same hosts, one interrupted, the other untouched; --include/--exclude; --dry-run masks the secret.

Needs root, `ip netns`, OpenSSH's sshd and the venv's torch (skipped otherwise).
    pytest test_hostfile_ssh.py --ddplaunch=/path/to/ddplaunch
"""
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from ssh_hosts import (HEARTBEAT_TIMEOUT, HOSTS, NO_DDPLAUNCH_HOST, NO_SSHD_HOST, OTHER_HOST, OTHER_VERSION,
                       PASSWORD_HOST, Controller, all_running, hostfile, kill_ssh_session, left_running, node_of, sh,
                       wait_for, worker)

pytestmark = pytest.mark.timeout(300)

def test_three_hosts_train_and_exit_0(site, ddplaunch, tmp_path):
    w = worker(tmp_path, "ok", steps=40, pause=0.05)
    c = Controller(site, ddplaunch, tmp_path, ["--hostfile", hostfile(tmp_path), w, str(tmp_path)])
    wait_for(lambda: all_running(tmp_path, 3) or c.proc.poll() is not None, 120, "every rank running")
    # The job secret of this launch (64 hex digits) is on no command line of any host, and the
    # launchers use one (none warns that it has no secret).
    cmdlines = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdlines.append(open(f"/proc/{pid}/cmdline", "rb").read())
        except OSError:
            pass
    assert any(b"--fleet_stdin" in line for line in cmdlines)
    assert not [line for line in cmdlines if re.search(rb"[0-9a-f]{64}", line)]
    assert c.wait() == 0, c.text()
    out = c.text()
    assert "no job secret" not in out, out
    for rank in range(3):
        assert f"[{rank}]:rank {rank} of 3 NCCL_FLEET_TEST=forwarded LEAK=None TOKEN=None" in out, out
        assert f"[{rank}]:rank {rank} done" in out, out
    assert not left_running(w)


def test_a_rank_failing_on_host_3_gives_its_code_and_cause(site, ddplaunch, tmp_path):
    w = worker(tmp_path, "fails", steps=30, pause=0.05,
               fail="if rank == 2 and step == 5: print('rank 2 fails on purpose', flush=True); sys.exit(7)")
    start = time.monotonic()
    c = Controller(site, ddplaunch, tmp_path, ["--hostfile", hostfile(tmp_path), w, str(tmp_path)])
    code = c.wait()
    out = c.text()
    assert code == 7, out
    assert "[2]:rank 2 fails on purpose" in out, out
    assert re.search(r"Root cause \(the earliest failure\):\n.*\n.*\n  node rank : 2\n  rank      : 2 .*\n  exitcode  : 7", out), out
    assert time.monotonic() - start < 90
    wait_for(lambda: not left_running(w), 10, "nothing left")


def test_slots_and_restarts_work_as_by_hand(site, ddplaunch, tmp_path):
    """Host 1 has two slots (ranks 0-1); rank 3, on host 3, fails once; --max_restarts=1, given to
    the controller, reaches every host's launcher, and the job restarts and exits 0."""
    failed = tmp_path / "failed_once"
    w = worker(tmp_path, "restart", steps=10, fail=(
        f"if rank == 3 and step == 2 and not os.path.exists('{failed}'): open('{failed}', 'w').close(); sys.exit(5)"))
    c = Controller(site, ddplaunch, tmp_path, ["--hostfile", hostfile(tmp_path, slots=[2, 1, 1]), "--max_restarts=1",
                                               w, str(tmp_path)])
    assert c.wait() == 0, c.text()
    out = c.text()
    assert failed.exists()
    assert "[3]:rank 3 of 4 " in out and "[3]:rank 3 done" in out, out
    assert "restart" in out, out
    assert not left_running(w)


def test_ctrl_c_at_the_controller_leaves_nothing_on_any_host(site, ddplaunch, tmp_path):
    w = worker(tmp_path, "long", steps=100000, pause=0.1)
    c = Controller(site, ddplaunch, tmp_path, ["--hostfile", hostfile(tmp_path), w, str(tmp_path)])
    wait_for(lambda: all_running(tmp_path, 3), 120, "every rank running")
    os.kill(c.proc.pid, signal.SIGINT)
    assert c.wait(60) == 130, c.text()
    assert "interrupted: stopping the job on every host" in c.text()
    assert not left_running(w), left_running(w)
    assert not left_running("--fleet_stdin.*" + os.path.basename(w))


def test_a_killed_controller_ends_the_remote_jobs_within_the_heartbeat_timeout(site, ddplaunch, tmp_path):
    w = worker(tmp_path, "orphan", steps=100000, pause=0.1)
    c = Controller(site, ddplaunch, tmp_path, ["--hostfile", hostfile(tmp_path), w, str(tmp_path)])
    wait_for(lambda: all_running(tmp_path, 3), 120, "every rank running")
    os.killpg(c.proc.pid, signal.SIGKILL)  # the controller and its ssh clients, as a lost machine
    c.wait(10)
    killed = time.monotonic()
    wait_for(lambda: not left_running(w), HEARTBEAT_TIMEOUT + 10, "the hosts' jobs to end")
    print(f"remote jobs ended {time.monotonic() - killed:.1f} s after the controller's SIGKILL")


def test_a_host_whose_ssh_connection_dies_stops_a_static_job(site, ddplaunch, tmp_path):
    """Host 2's sshd session is killed mid-job: its launcher sees its channel end and stops; the
    controller tells the others (a static job cannot go on), exits 1, and keeps every line."""
    w = worker(tmp_path, "cut", steps=100000, pause=0.1)
    c = Controller(site, ddplaunch, tmp_path, ["--hostfile", hostfile(tmp_path), w, str(tmp_path)])
    wait_for(lambda: all_running(tmp_path, 3), 120, "every rank running")
    kill_ssh_session(ddplaunch, w, 1)
    assert c.wait(60) == 1, c.text()
    out = c.text()
    assert f"host {HOSTS[1]} (node 1): the ssh connection ended (ssh exit 255); its launcher stops its part of the " \
           "job, and so does every other host" in out, out
    assert "[1]:rank 1 of 3 " in out and "[2]:rank 2 of 3 " in out, out
    wait_for(lambda: not left_running(w), 30, "nothing left")


def pid_in(path):
    """The pid a worker wrote to `path`, or None while it is missing or being written."""
    try:
        return int(path.read_text())
    except (OSError, ValueError):
        return None


@pytest.mark.parametrize("spare", [False, True], ids=["elastic", "spare"])
def test_an_elastic_job_goes_on_without_a_lost_host(site, ddplaunch, tmp_path, spare):
    """--nnodes=2:3 from a hostfile; with --active_nodes=2 one host stands by (spare). The ssh
    session of the host running the last rank (node 1 or 2, whichever joined later) is killed
    mid-job: the controller says the job goes on; the next round runs with world size 2, rank 1 on
    the remaining host (the promoted standby, with a spare); the job ends when told, the
    controller exits 0, and nothing is left on any host."""
    stop = tmp_path / "stop"
    w = worker(tmp_path, "elastic", steps=100000, pause=0.1, fail=f"if os.path.exists('{stop}'): break")
    ranks = 2 if spare else 3
    c = Controller(site, ddplaunch, tmp_path, ["--hostfile", hostfile(tmp_path), "--nnodes=2:3", "--max_restarts=3",
                                               *(["--active_nodes=2"] if spare else []), w, str(tmp_path)])
    wait_for(lambda: (all_running(tmp_path, ranks) and (not spare or "standby (group rank 2)" in c.text()))
             or c.proc.poll() is not None, 120, "every rank (and the standby) running")
    rank1 = pid_in(tmp_path / "running_1")
    lost = node_of(ddplaunch, pid_in(tmp_path / f"running_{ranks - 1}"))
    kill_ssh_session(ddplaunch, w, lost)
    wait_for(lambda: pid_in(tmp_path / "running_1") not in (None, rank1) or c.proc.poll() is not None, 90,
             "rank 1 running again")
    assert node_of(ddplaunch, pid_in(tmp_path / "running_1")) == 3 - lost, c.text()
    stop.touch()
    assert c.wait(60) == 0, c.text()
    out = c.text()
    assert f"host {HOSTS[lost]} (node {lost}): the ssh connection ended (ssh exit 255); its launcher stops its " \
           "part of the job; the job goes on without it (elastic)" in out, out
    assert "[1]:rank 1 of 2 " in out and "[1]:rank 1 done" in out and "[2]:rank 2 done" not in out, out
    wait_for(lambda: not left_running(w), 30, "nothing left")


def test_an_elastic_job_stops_when_node_0s_host_is_lost(site, ddplaunch, tmp_path):
    """Node 0's launcher holds the job's store: an elastic job cannot go on without its host, so
    the controller stops the others at once and exits 1."""
    w = worker(tmp_path, "node0", steps=100000, pause=0.1)
    c = Controller(site, ddplaunch, tmp_path, ["--hostfile", hostfile(tmp_path), "--nnodes=2:3", "--max_restarts=3", w,
                                               str(tmp_path)])
    wait_for(lambda: all_running(tmp_path, 3) or c.proc.poll() is not None, 120, "every rank running")
    start = time.monotonic()
    kill_ssh_session(ddplaunch, w, 0)
    assert c.wait(60) == 1, c.text()
    assert f"host {HOSTS[0]} (node 0): the ssh connection ended (ssh exit 255); its launcher stops its part of the " \
           "job, and so does every other host" in c.text(), c.text()
    assert time.monotonic() - start < 30, c.text()
    wait_for(lambda: not left_running(w), 30, "nothing left")


@pytest.mark.parametrize("elastic", [False, True], ids=["static", "elastic"])
def test_a_health_check_failing_on_one_host(site, ddplaunch, tmp_path, elastic):
    """--health_check reaches every host's launcher; it fails on host 3 (node 2) only. A static job
    cannot run without that node: node 0 exits 69 with the check's line, the controller stops the
    host still waiting for node 0's store at once (not after --rdzv_timeout) and exits 69. An
    elastic one (--nnodes=2:3) runs on the two healthy hosts and exits 0."""
    w = worker(tmp_path, "sick")
    check = 'if [ "$DDPLAUNCH_NODE_RANK" = 2 ]; then echo "ib0: link down"; exit 1; fi'
    start = time.monotonic()
    c = Controller(site, ddplaunch, tmp_path, ["--hostfile", hostfile(tmp_path), "--health_check", check,
                                               *(["--nnodes=2:3"] if elastic else []), w, str(tmp_path)])
    code = c.wait(90)
    out = c.text()
    excluded = f"node 2 (vm) excluded itself: health check command '{check}' failed: exited with 1: ib0: link down"
    assert f"ddplaunch@{HOSTS[2]}:   command '{check}': FAILED: exited with 1: ib0: link down" in out, out
    assert f"ddplaunch@{HOSTS[2]}: this node does not join the round (exit 69)" in out, out
    if elastic:
        assert code == 0, out
        assert "[1]:rank 1 of 2 " in out and "[1]:rank 1 done" in out, out
    else:
        assert code == 69, out
        assert f"ddplaunch@{HOSTS[0]}: {excluded}; the job cannot run without it (--nnodes=3 is static)" in out, out
        # Node 0's end stops the hosts still running; when each host saw the exclusion and ended on
        # its own first, nothing is left to stop.
        stopped = f"ddplaunch: host {HOSTS[0]} (node 0) ended with exit 69, and the job's store with it: stopping"
        assert stopped in out or all(f"ddplaunch@{h}: {excluded}" in out for h in HOSTS[:3]), out
        assert "ssh connection ended" not in out and not (tmp_path / "running_0").exists(), out
    assert time.monotonic() - start < 45, out  # before: 60 s, the host waiting out --rdzv_timeout
    wait_for(lambda: not left_running(w), 10, "nothing left")


def test_preflight_names_each_broken_host_and_its_fix(site, ddplaunch, tmp_path):
    w = worker(tmp_path, "never")
    hosts = [HOSTS[0], PASSWORD_HOST, NO_SSHD_HOST, NO_DDPLAUNCH_HOST]
    start = time.monotonic()
    c = Controller(site, ddplaunch, tmp_path, ["--hostfile", hostfile(tmp_path, hosts), w, str(tmp_path)])
    code = c.wait(60)
    took = time.monotonic() - start
    out = c.text()
    assert code == 2, out
    assert f"host {PASSWORD_HOST}: ssh asks for a password or refuses the key" in out, out
    assert f"set up a key (ssh-copy-id {PASSWORD_HOST}) or an agent" in out, out
    assert f"host {NO_SSHD_HOST}: nothing answers ssh on port 22" in out, out
    assert f"host {NO_DDPLAUNCH_HOST}: {ddplaunch} is not there (or not executable)" in out, out
    assert "preflight failed on 3 of 4 hosts; nothing was started" in out, out
    assert f"host {HOSTS[0]}:" not in out, out
    assert not (tmp_path / "running_0").exists()
    assert took < 10, took  # within seconds: every host at once


def test_preflight_names_a_host_with_another_version_or_without_the_working_directory(site, ddplaunch, tmp_path):
    """OTHER_HOST's ddplaunch is a script that knows only --version (as an older release may not
    know the preflight's probe): its version is named. A working directory made under
    site.elsewhere is missing there: that is named. One line each, exit 2, nothing started."""
    here = sh(ddplaunch, "--version").stdout.split()[-1]
    w = worker(tmp_path, "never")
    c = Controller(site, ddplaunch, tmp_path, ["--hostfile", hostfile(tmp_path, [HOSTS[0], OTHER_HOST]), w,
                                               str(tmp_path)])
    assert c.wait(60) == 2, c.text()
    assert f"host {OTHER_HOST}: ddplaunch there is version {OTHER_VERSION}, here {here}; install " \
           "the same version on every host" in c.text(), c.text()
    assert "preflight failed on 1 of 2 hosts; nothing was started" in c.text(), c.text()
    away = site.elsewhere / tmp_path.name
    away.mkdir()
    c = Controller(site, ddplaunch, away, ["--hostfile", hostfile(tmp_path, [HOSTS[0], OTHER_HOST]), w,
                                           str(tmp_path)], "away")
    assert c.wait(60) == 2, c.text()
    assert f"host {OTHER_HOST}: the working directory {away} is not there; create it or share it (NFS), or start " \
           "from a directory every host has" in c.text(), c.text()
    assert f"host {HOSTS[0]}:" not in c.text() and "nothing was started" in c.text(), c.text()
    assert not (tmp_path / "running_0").exists()


def test_preflight_checks_node_0s_address_and_port_from_every_host(site, ddplaunch, tmp_path):
    """--master_addr=127.0.0.1 is node 0 only for node 0's host: the others are told they cannot
    reach it; a --master_port that a running job holds on node 0's host is named as taken."""
    w = worker(tmp_path, "never")
    c = Controller(site, ddplaunch, tmp_path, ["--hostfile", hostfile(tmp_path), "--master_addr=127.0.0.1", w,
                                               str(tmp_path)])
    assert c.wait(60) == 2, c.text()
    for host in HOSTS[1:]:
        assert re.search(rf"host {host}: cannot reach node 0 at 127.0.0.1 \(127.0.0.1:\d+\): Connection refused; "
                         r"check that 127.0.0.1 resolves there to 10.233.0.1's address", c.text()), c.text()
    holder = subprocess.Popen(["ip", "netns", "exec", site.ns[HOSTS[0]], sys.executable, "-c",
                               "import socket,sys\ns=socket.socket(socket.AF_INET6); s.bind(('::', 29577)); s.listen()\n"
                               "print('up', flush=True); sys.stdin.read()"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "up"
        c = Controller(site, ddplaunch, tmp_path, ["--hostfile", hostfile(tmp_path), "--master_port=29577", w,
                                                   str(tmp_path)], "taken")
        assert c.wait(60) == 2, c.text()
        assert f"host {HOSTS[0]} (node 0): port 29577 is taken there (Address already in use); give another " \
               "--master_port" in c.text(), c.text()
    finally:
        holder.stdin.close()
        holder.wait(10)


def test_two_jobs_on_the_same_hosts_one_interrupted(site, ddplaunch, tmp_path):
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    a_dir.mkdir()
    b_dir.mkdir()
    wa, wb = worker(a_dir, "job_a", steps=100000, pause=0.1), worker(b_dir, "job_b", steps=100000, pause=0.1)
    a = Controller(site, ddplaunch, a_dir, ["--hostfile", hostfile(a_dir), wa, str(a_dir)], "a")
    b = Controller(site, ddplaunch, b_dir, ["--hostfile", hostfile(b_dir), wb, str(b_dir)], "b")
    wait_for(lambda: all_running(a_dir, 3) and all_running(b_dir, 3), 150, "both jobs running")
    os.kill(a.proc.pid, signal.SIGINT)
    assert a.wait(60) == 130, a.text()
    assert not left_running(wa)
    assert len(left_running(wb)) >= 3 and b.proc.poll() is None, b.text()
    os.kill(b.proc.pid, signal.SIGTERM)
    assert b.wait(60) == 143, b.text()
    assert not left_running(wb)


def test_include_and_exclude_pick_the_hosts(site, ddplaunch, tmp_path):
    w = worker(tmp_path, "some", steps=3)
    c = Controller(site, ddplaunch, tmp_path, ["--hostfile", hostfile(tmp_path), "--exclude", HOSTS[1], w,
                                               str(tmp_path)])
    assert c.wait() == 0, c.text()
    assert "[1]:rank 1 of 2 " in c.text()
    c = Controller(site, ddplaunch, tmp_path, ["--hosts", "10.233.0.[1-3]", "--include", f"{HOSTS[2]}@{HOSTS[1]}", w,
                                               str(tmp_path)], "include")
    assert c.wait() == 0, c.text()
    assert "[0]:rank 0 of 2 " in c.text() and "launching on 2 hosts over ssh: node 0 on 10.233.0.2" in c.text()


def test_dry_run_prints_each_host_command_with_the_secret_masked(ddplaunch, tmp_path):
    env = dict(os.environ, NCCL_FLEET_TEST="x", DDPLAUNCH_RDZV_TOKEN="local-secret-0123456789abcdef")
    r = sh(ddplaunch, "--dry-run", "--hosts", "gpu[1-2]", "--ssh_port", "2222", "--ssh_option", "User=me",
           "--nproc_per_node=2", "train.py", "--lr", "0.1", env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("host gpu1 (node 0): ssh -p 2222 -o User=me -o BatchMode=yes gpu1 'cd -- "), lines
    assert "--node_rank=0 --master_addr=gpu1 --master_port=29500" in lines[0]
    assert "--node_rank=1" in lines[1] and "--nproc_per_node=2 train.py --lr 0.1'" in lines[1], lines
    assert "the job secret (********, new at each launch)" in r.stdout and "NCCL_FLEET_TEST=x" in r.stdout
    assert "local-secret" not in r.stdout
