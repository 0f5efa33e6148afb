"""The servers the store benchmarks run against, as context managers: ddplaunch-store, PyTorch's
TCPStore server (libuv backend, tests/interop/torch_master_store.py from the venv's python) and
the loopback floor (store_load serve-floor). Each raises its soft descriptor limit to the hard one,
so both stores can hold as many connections as the machine allows.

PyTorch's libuv server reverse-resolves every accepted peer (getnameinfo in
LibUVStoreDaemon::onConnect) on its one loop thread. Where DNS is slow or unreachable (this
sandbox: some lookups hit the resolver's 5 s timeout, so 100 ranks took 5-10 s and 1000 took 96 s)
that alone decides the benchmark. So, where we may (root), PyTorch's server runs in a private
mount namespace whose nsswitch.conf answers host lookups from /etc/hosts only: a failed lookup
then costs microseconds, as with a healthy DNS cache. Ours does no lookups.
"""
import os
import resource
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_NSSWITCH = os.path.join(tempfile.gettempdir(), "ddplaunch-bench-nsswitch.conf")


def _raise_fd_limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def fd_limit():
    return resource.getrlimit(resource.RLIMIT_NOFILE)[1]


def _files_only_hosts_available():
    if os.geteuid() != 0 or not shutil.which("unshare"):
        return False
    with open(_NSSWITCH, "w") as f:
        f.write("hosts: files\n")
    probe = subprocess.run(["unshare", "-m", "sh", "-c", f"mount --bind {_NSSWITCH} /etc/nsswitch.conf"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return probe.returncode == 0


FILES_ONLY_HOSTS = _files_only_hosts_available()


def dns_note():
    if FILES_ONLY_HOSTS:
        return ("PyTorch's server reverse-resolves each accepted peer on its loop thread (getnameinfo); this "
                "sandbox's DNS sometimes takes 5 s per lookup, so it runs with host lookups answered from "
                "/etc/hosts only (private mount namespace), as with a healthy DNS cache.")
    return ("Note: PyTorch's server reverse-resolves each accepted peer on its loop thread (getnameinfo) and ran "
            "with this machine's DNS as configured (not root: could not limit lookups to /etc/hosts).")


def _schedstat_seconds(pid):
    """CPU time of every thread of a process from /proc/PID/task/*/schedstat (nanoseconds, brought up
    to date at each context switch), or None where the kernel has no schedstat."""
    total = 0
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return total / 1e9


# The resolution of cpu_seconds(): nanoseconds with schedstat, else the clock tick of /proc/PID/stat.
CPU_RESOLUTION_S = 1e-9 if _schedstat_seconds(os.getpid()) is not None else 1 / os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """CPU time of a process (all threads), in seconds: from schedstat where the kernel has it (its
    threads still alive; the servers' threads live as long as they do), else user + system time in
    clock ticks from /proc/PID/stat."""
    if CPU_RESOLUTION_S < 1e-6:
        seconds = _schedstat_seconds(pid)
        if seconds is not None:
            return seconds
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_split(pid):
    """(user, system) CPU seconds of a process."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tck = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tck, int(fields[12]) / tck


class Ours:
    name = "ddplaunch-store"

    def __init__(self, bin_dir):
        self.cmd = [os.path.join(bin_dir, "ddplaunch-store"), "--host", "127.0.0.1", "--port", "0", "-q"]

    def __enter__(self):
        self.p = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, text=True, preexec_fn=_raise_fd_limit)
        self.port = int(self.p.stdout.readline().rsplit(":", 1)[1])
        self.pid = self.p.pid
        return self

    def __exit__(self, *exc):
        self.p.terminate()
        self.p.wait(timeout=30)


class Torch:
    name = "PyTorch TCPStore (libuv)"

    def __enter__(self):
        cmd = [sys.executable, os.path.join(REPO, "tests", "interop", "torch_master_store.py"), "--max-seconds", "3600"]
        if FILES_ONLY_HOSTS:
            # unshare execs sh, which execs python: the pid stays the server's.
            cmd = ["unshare", "-m", "sh", "-c", f'mount --bind {_NSSWITCH} /etc/nsswitch.conf && exec "$@"', "sh"] + cmd
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  text=True, preexec_fn=_raise_fd_limit)
        line = self.p.stdout.readline()
        self.port = int(line.strip().split("=")[1])
        self.pid = self.p.pid
        return self

    def __exit__(self, *exc):
        self.p.stdin.close()
        try:
            self.p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()


class Floor:
    name = "loopback floor"

    def __init__(self, bin_dir, kind, request_bytes=24, reply_bytes=8, message_bytes=30):
        self.cmd = [os.path.join(bin_dir, "store_load"), "serve-floor", kind]
        if kind == "echo":
            self.cmd += [str(request_bytes), str(reply_bytes)]
        elif kind == "pingpong":
            self.cmd += [str(message_bytes)]

    def __enter__(self):
        self.p = subprocess.Popen(self.cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.port = int(self.p.stdout.readline().strip().split("=")[1])
        self.pid = self.p.pid
        return self

    def __exit__(self, *exc):
        self.p.stdin.close()
        self.p.wait(timeout=30)
