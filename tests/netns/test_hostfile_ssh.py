"""`ddplaunch --hostfile` over real OpenSSH (issue 44).

Seven network-namespace hosts on one bridge: 10.233.0.1-3 run an sshd each (keys made here) and
are the job's hosts; 10.233.0.4 runs an sshd that takes passwords only; 10.233.0.5 runs no sshd;
10.233.0.6 runs an sshd in a mount namespace where the build directory (and so ddplaunch) is
hidden; 10.233.0.9 is the controller, where the one `ddplaunch --hostfile` command runs. Every
host has its interface named `fleet0`, so one forwarded GLOO_SOCKET_IFNAME fits all.

The hosts share this machine's process table and file system, so a process scan here sees every
host's processes (each test's worker path is its own), and the workers' marker files land in the
test's directory.

Covered: a 3-node gloo job trains and exits 0 (the environment forwarded and nothing else, the
secret on no command line); a rank failing on host 3 gives its exit code and root cause on the
controller; Ctrl-C at the controller leaves nothing on any host; a SIGKILL of the controller ends
the remote jobs within the heartbeat timeout; preflight lines for a password-only host, a host
without sshd and one without ddplaunch (exit 2, nothing started); two jobs on the same hosts,
one interrupted, the other untouched; --include/--exclude; --dry-run masks the secret.

Needs root, `ip netns`, OpenSSH's sshd and the venv's torch (skipped otherwise).
    pytest test_hostfile_ssh.py --ddplaunch=/path/to/ddplaunch
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from pyfixtures import netns_hosts_or_skip

pytestmark = pytest.mark.timeout(300)

HOSTS = ["10.233.0.1", "10.233.0.2", "10.233.0.3"]
PASSWORD_HOST, NO_SSHD_HOST, NO_DDPLAUNCH_HOST = "10.233.0.4", "10.233.0.5", "10.233.0.6"
CONTROLLER = "10.233.0.9"
ALL = HOSTS + [PASSWORD_HOST, NO_SSHD_HOST, NO_DDPLAUNCH_HOST, CONTROLLER]
HEARTBEAT_TIMEOUT = 3
SSHD = "/usr/sbin/sshd"


def sh(*args, check=True, **kw):
    return subprocess.run(args, check=check, capture_output=True, text=True, **kw)


class Site:
    """The namespaces, their sshds and the controller's ssh options."""

    def __init__(self, made, tmp, ddplaunch):
        self.ns = {h.address: h.ns for h in made}
        self.tmp, self.sshds = tmp, []
        for h in made:  # the same interface name everywhere: one GLOO_SOCKET_IFNAME for all
            sh("ip", "-n", h.ns, "link", "set", h.ifname, "down")
            sh("ip", "-n", h.ns, "link", "set", h.ifname, "name", "fleet0")
            sh("ip", "-n", h.ns, "link", "set", "fleet0", "up")
        os.makedirs("/run/sshd", exist_ok=True)  # sshd's privilege-separation directory
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp / "hostkey"))
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp / "id"))
        shutil.copy(tmp / "id.pub", tmp / "authorized_keys")
        for addr in HOSTS:
            self.sshd(addr, "PubkeyAuthentication yes\nPasswordAuthentication no\n")
        self.sshd(PASSWORD_HOST, "PubkeyAuthentication no\nPasswordAuthentication yes\n")
        hidden = os.path.dirname(ddplaunch)  # a host where ddplaunch is not installed
        self.sshd(NO_DDPLAUNCH_HOST, "PubkeyAuthentication yes\nPasswordAuthentication no\n",
                  wrap=["unshare", "-m", "sh", "-c", f"mount -t tmpfs none {hidden} && exec \"$@\"", "sshd"])
        for addr in HOSTS + [PASSWORD_HOST, NO_DDPLAUNCH_HOST]:
            self.wait_sshd(addr)
        self.ssh_options = [f"--ssh_option=IdentityFile={tmp / 'id'}", "--ssh_option=StrictHostKeyChecking=no",
                            "--ssh_option=UserKnownHostsFile=/dev/null", "--ssh_option=LogLevel=ERROR"]

    def sshd(self, addr, auth, wrap=()):
        config = self.tmp / f"sshd_{addr}"
        config.write_text(textwrap.dedent(f"""\
            ListenAddress {addr}
            Port 22
            HostKey {self.tmp / 'hostkey'}
            AuthorizedKeysFile {self.tmp / 'authorized_keys'}
            PermitRootLogin yes
            StrictModes no
            UsePAM no
            KbdInteractiveAuthentication no
            PidFile none
            """) + auth)
        self.sshds.append(subprocess.Popen(["ip", "netns", "exec", self.ns[addr], *wrap, SSHD, "-D", "-e", "-f",
                                            str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

    def wait_sshd(self, addr):
        code = f"import socket,time\nfor _ in range(100):\n  try: socket.create_connection(('{addr}',22),1); break\n" \
               f"  except OSError: time.sleep(0.1)\nelse: raise SystemExit(1)"
        sh("ip", "netns", "exec", self.ns[CONTROLLER], sys.executable, "-c", code)

    def stop(self):
        for p in self.sshds:
            p.kill()
            p.wait()


@pytest.fixture(scope="module")
def site(ddplaunch, tmp_path_factory):
    if shutil.which("ssh") is None or not os.path.exists(SSHD):
        pytest.skip("needs openssh-server and openssh-client (scripts/setup.sh installs them)")
    for made in netns_hosts_or_skip(ALL):
        s = Site(made, tmp_path_factory.mktemp("ssh"), ddplaunch)
        try:
            yield s
        finally:
            s.stop()


WORKER = """\
    import os, sys, time, torch, torch.distributed as dist
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    out = sys.argv[1]
    open(os.path.join(out, f"running_{{rank}}"), "w").write(str(os.getpid()))
    print(f"rank {{rank}} of {{world}} NCCL_FLEET_TEST={{os.environ.get('NCCL_FLEET_TEST')}} "
          f"LEAK={{os.environ.get('FLEET_NOT_FORWARDED')}} TOKEN={{os.environ.get('DDPLAUNCH_RDZV_TOKEN')}}", flush=True)
    for step in range({steps}):
        t = torch.tensor([1.0])
        dist.all_reduce(t)
        assert t.item() == world
        {fail}
        time.sleep({pause})
    print(f"rank {{rank}} done", flush=True)
    dist.destroy_process_group()
    """


def worker(tmp, name, steps=5, pause=0.05, fail=""):
    path = tmp / f"{name}.py"
    path.write_text(textwrap.dedent(WORKER.format(steps=steps, pause=pause, fail=fail or "pass")))
    return str(path)


def hostfile(tmp, hosts=HOSTS, slots=None):
    path = tmp / "hosts"
    slots = slots or [1] * len(hosts)
    path.write_text("# the job's hosts\n\n" + "".join(f"{h} slots={n}\n" for h, n in zip(hosts, slots)))
    return str(path)


class Controller:
    """One `ddplaunch --hostfile` in the controller's namespace."""

    def __init__(self, site, ddplaunch, tmp, args, name="controller"):
        env = dict(os.environ)
        env.update(PYTHON_EXEC=sys.executable, NCCL_FLEET_TEST="forwarded", FLEET_NOT_FORWARDED="leaked",
                   GLOO_SOCKET_IFNAME="fleet0")
        env.pop("DDPLAUNCH_RDZV_TOKEN", None)
        self.log_path = tmp / f"{name}.log"
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", site.ns[CONTROLLER], ddplaunch, *site.ssh_options, "--export=GLOO_SOCKET_IFNAME",
             f"--heartbeat_timeout={HEARTBEAT_TIMEOUT}", "--rdzv_timeout=60", *args],
            stdout=self.log, stderr=subprocess.STDOUT, env=env, cwd=tmp, start_new_session=True)

    def wait(self, timeout=150):
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()

    def text(self):
        return self.log_path.read_text()


def left_running(marker):
    """Processes on any host whose command line names `marker` (the test's worker path)."""
    r = sh("pgrep", "-af", marker, check=False)
    return [line for line in r.stdout.splitlines() if "pgrep" not in line]


def wait_for(predicate, timeout, what):
    end = time.monotonic() + timeout
    while time.monotonic() < end:  # no event tells us about processes on other hosts: poll
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def all_running(tmp, n):
    return all((tmp / f"running_{r}").exists() for r in range(n))


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
    assert took < 20, took


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
