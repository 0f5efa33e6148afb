"""Hosts for `ddplaunch --hostfile` tests over real OpenSSH (test_hostfile_ssh.py and the
DeepSpeed side by side, test_hostfile_vs_deepspeed.py): network-namespace hosts, each with an
sshd whose keys the test makes, the controller's namespace, a gloo worker, process scans."""
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

HOSTS = ["10.233.0.1", "10.233.0.2", "10.233.0.3"]
PASSWORD_HOST, NO_SSHD_HOST, NO_DDPLAUNCH_HOST = "10.233.0.4", "10.233.0.5", "10.233.0.6"
# Its ddplaunch is a script that answers `--version` with OTHER_VERSION (and knows nothing else),
# and its Site.elsewhere is an empty tmpfs: a working directory made there is missing on it.
OTHER_HOST, OTHER_VERSION = "10.233.0.7", "0.0.9"
CONTROLLER = "10.233.0.9"
ALL = HOSTS + [PASSWORD_HOST, NO_SSHD_HOST, NO_DDPLAUNCH_HOST, OTHER_HOST, CONTROLLER]
HEARTBEAT_TIMEOUT = 3
SSHD = "/usr/sbin/sshd"


def sh(*args, check=True, **kw):
    return subprocess.run(args, check=check, capture_output=True, text=True, **kw)


def descendants(pid):
    """Every process under `pid` (children first found through pgrep -P)."""
    out = []
    for child in sh("pgrep", "-P", str(pid), check=False).stdout.split():
        out += [int(child)] + descendants(int(child))
    return out


# Every Controller started, so that end_started() can stop the ones a failed test left running.
STARTED = []


def end_started():
    """Kills (SIGKILL, its process group: the controller and its ssh clients) every Controller
    still running; their hosts' launchers then see their channels end and stop."""
    for c in STARTED:
        if c.proc.poll() is None:
            os.killpg(c.proc.pid, signal.SIGKILL)
            c.proc.wait()
    STARTED.clear()


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
        self.elsewhere = tmp / "elsewhere"
        self.elsewhere.mkdir()
        other = tmp / "other_ddplaunch"
        other.write_text(f"#!/bin/sh\n[ \"$1\" = --version ] && {{ echo 'ddplaunch {OTHER_VERSION}'; exit 0; }}\n"
                         "echo \"ddplaunch: unknown option $1\" >&2; exit 2\n")
        other.chmod(0o755)
        self.sshd(OTHER_HOST, "PubkeyAuthentication yes\nPasswordAuthentication no\n",
                  wrap=["unshare", "-m", "sh", "-c", f"mount --bind {other} {ddplaunch} && "
                        f"mount -t tmpfs none {self.elsewhere} && exec \"$@\"", "sshd"])
        for addr in HOSTS + [PASSWORD_HOST, NO_DDPLAUNCH_HOST, OTHER_HOST]:
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
        """Kills every sshd and the sessions they forked (a session whose client is gone would
        wait on its connection for ever once the namespaces are deleted)."""
        for p in self.sshds:
            for pid in [p.pid] + descendants(p.pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass  # ended by itself meanwhile
            p.wait()


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


class LoggedRun:
    """A command run in its own session, its stdout and stderr in <tmp>/<name>.log; remembered
    in STARTED so that end_started() can stop it when a test failed half-way."""

    def __init__(self, argv, env, tmp, name):
        self.log_path = tmp / f"{name}.log"
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT, env=env, cwd=tmp,
                                     start_new_session=True)
        STARTED.append(self)

    def wait(self, timeout=150):
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()

    def text(self):
        return self.log_path.read_text()


class Controller(LoggedRun):
    """One `ddplaunch --hostfile` in the controller's namespace."""

    def __init__(self, site, ddplaunch, tmp, args, name="controller"):
        env = dict(os.environ)
        env.update(PYTHON_EXEC=sys.executable, NCCL_FLEET_TEST="forwarded", FLEET_NOT_FORWARDED="leaked",
                   GLOO_SOCKET_IFNAME="fleet0")
        env.pop("DDPLAUNCH_RDZV_TOKEN", None)
        super().__init__(["ip", "netns", "exec", site.ns[CONTROLLER], ddplaunch, *site.ssh_options,
                          "--export=GLOO_SOCKET_IFNAME", f"--heartbeat_timeout={HEARTBEAT_TIMEOUT}", "--rdzv_timeout=60",
                          *args], env, tmp, name)


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


def kill_ssh_session(ddplaunch, marker, node):
    """SIGKILLs the sshd session under node `node`'s launcher (the one whose command line names
    `marker`), as a lost connection; returns that launcher's pid."""
    launcher = sh("pgrep", "-f", "--", f"^{ddplaunch} --fleet_stdin .*--node_rank={node} .*{marker}").stdout.split()[0]
    session = parent(launcher)
    assert "sshd" in open(f"/proc/{session}/cmdline").read()
    os.kill(session, signal.SIGKILL)
    return int(launcher)


def parent(pid):
    return int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])


def node_of(ddplaunch, pid):
    """The --node_rank of the host launcher that `pid` (a worker) runs under."""
    while pid > 1:
        pid = parent(pid)
        found = re.search(r"--node_rank=(\d+)", open(f"/proc/{pid}/cmdline").read().replace("\0", " "))
        if found and open(f"/proc/{pid}/cmdline").read().startswith(ddplaunch):
            return int(found.group(1))
    raise AssertionError("no host launcher above the worker")


def all_running(tmp, n):
    return all((tmp / f"running_{r}").exists() for r in range(n))




def site_fixture(ddplaunch, tmp_path_factory):
    """The body of a module-scoped fixture: yields a Site, or skips without root, netns or sshd."""
    if shutil.which("ssh") is None or not os.path.exists(SSHD):
        pytest.skip("needs openssh-server and openssh-client (scripts/setup.sh installs them)")
    for made in netns_hosts_or_skip(ALL):
        s = Site(made, tmp_path_factory.mktemp("ssh"), ddplaunch)
        try:
            yield s
        finally:
            end_started()
            s.stop()
