"""What the Python suites share (tests/interop, tests/launcher, tests/runtime); conftest.py next to
this file turns it into pytest fixtures.

  * Processes: starts child processes, each in its own session and carrying a marker variable
    (DDP_PYTEST_TAG=<uuid>) that launchers pass on to their workers and spawned ranks. kill_all()
    (run by the fixtures' teardown, so also after a failure or a pytest-timeout) SIGKILLs every
    process group it started and every live process that carries its marker;
    assert_no_survivors() fails while any marked process is alive.
  * StoreServer: a running ddplaunch-store. Checks the server's command-line contract: started as
    ``BINARY --host H --port P`` it prints exactly one stdout line
    ``ddplaunch-store: listening on HOST:PORT`` (IPv6 host in brackets) within 20 s, and on
    SIGTERM it exits 0 within 10 s. It runs with ``--log_level debug``, so it logs
    ``waiters: N (parked on K key(s))`` whenever a WAIT or BARRIER parks and whenever waiters are
    woken or dropped; wait_for_waiters(n) blocks on those lines, so tests need not sleep "until
    the waiter has parked".
  * free_port(), port_is_free(), alive(pid), cmdline(pid), note(text).

Stdlib only.
"""

from __future__ import annotations

import fcntl
import os
import queue
import re
import select
import signal
import socket
import struct
import subprocess
import termios
import threading
import time
import uuid
from typing import List, Optional

TAG_VAR = "DDP_PYTEST_TAG"
LISTEN_RE = re.compile(r"^ddplaunch-store: listening on (\[[^\]]+\]|[^\s:\[\]]+):(\d+)$")
WAITERS_RE = re.compile(r"waiters: (\d+) \(parked on (\d+) key\(s\)\)")
STORE_STARTUP_TIMEOUT_S = 20.0
STORE_SHUTDOWN_TIMEOUT_S = 10.0

# Measured values (accuracies, timings, differences) that conftest.py prints after the run.
NOTES: List[str] = []


def note(text: str) -> None:
    """Records a measured value; it is printed in the "notes" section at the end of the run."""
    NOTES.append(text)


# --------------------------------------------------------------------------- small helpers
def free_port(host: str = "127.0.0.1") -> int:
    """A port that was free on `host` (an IPv4 or IPv6 address) a moment ago (the kernel's pick)."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def port_is_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def alive(pid: int) -> bool:
    """True while `pid` runs; a zombie (exited, not yet reaped) counts as dead."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline") as f:
            return f.read().replace("\0", " ").strip()
    except OSError:
        return "exited"


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass  # the group is gone already (every member exited)


# --------------------------------------------------------------------------- processes
class Processes:
    """The processes one test (or one fixture) started. Not thread-safe: use from one thread."""

    def __init__(self) -> None:
        self.tag = uuid.uuid4().hex
        self.procs: List[subprocess.Popen] = []
        self._after_exit: List = []

    def start(self, cmd, env: Optional[dict] = None, **kwargs) -> subprocess.Popen:
        """Popen(cmd) in a new session (so its process group can be killed as a whole) with this
        tracker's marker added to `env` (default: our environment) and stdin from /dev/null."""
        env = dict(os.environ if env is None else env)
        env[TAG_VAR] = self.tag
        kwargs.setdefault("stdin", subprocess.DEVNULL)
        p = subprocess.Popen(cmd, env=env, start_new_session=True, **kwargs)
        self.procs.append(p)
        return p

    def after_exit(self, fn) -> None:
        """kill_all() calls fn() once every process it started has exited, before it closes their
        pipes (e.g. to join threads that read them)."""
        self._after_exit.append(fn)

    def run(self, cmd, timeout: float, env: Optional[dict] = None, **kwargs):
        """Runs cmd to completion with text pipes; returns (returncode, stdout, stderr, seconds).
        Fails the test (after killing its process group) if it runs longer than `timeout`."""
        p = self.start(cmd, env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)
        t0 = time.monotonic()
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _signal_group(p.pid, signal.SIGKILL)
            out, err = p.communicate()
            raise AssertionError(f"{cmd} did not finish within {timeout} s\nstdout:\n{out}\nstderr:\n{err}")
        return p.returncode, out, err, time.monotonic() - t0

    def stop(self, p: subprocess.Popen, grace: float) -> None:
        """SIGTERM `p` (a launcher forwards it to its workers), wait `grace` seconds, then SIGKILL
        its process group."""
        if p.poll() is not None:
            return
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            _signal_group(p.pid, signal.SIGKILL)
            p.wait()

    def kill(self, p: subprocess.Popen) -> None:
        """SIGKILLs `p`'s process group and reaps `p`."""
        _signal_group(p.pid, signal.SIGKILL)
        p.wait()

    def tagged_pids(self) -> List[int]:
        """Live processes carrying this tracker's marker in their environment."""
        needle = f"{TAG_VAR}={self.tag}".encode()
        found = []
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/environ", "rb") as f:
                    if needle in f.read().split(b"\0") and alive(int(name)):
                        found.append(int(name))
            except OSError:
                continue  # exited while we looked, or not ours to read
        return found

    def assert_no_survivors(self, timeout: float = 10) -> None:
        """Fails unless every process carrying the marker has exited within `timeout` s."""
        end = time.monotonic() + timeout
        while time.monotonic() < end and self.tagged_pids():
            time.sleep(0.1)  # no event tells us when a process we did not start exits
        left = self.tagged_pids()
        assert left == [], "processes started by this test are still alive: " + ", ".join(
            f"{p} ({cmdline(p)})" for p in left)

    def kill_all(self) -> None:
        """SIGKILLs every process group started here (also after its leader exited: orphans stay
        in the group) and every live process carrying the marker (workers in groups of their
        own); reaps, runs the after_exit functions, closes the pipes."""
        for p in self.procs:
            _signal_group(p.pid, signal.SIGKILL)
        for pid in self.tagged_pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass  # exited meanwhile
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass  # unkillable (D state); nothing more we can do, and teardown must go on
        for fn in self._after_exit:
            fn()
        for p in self.procs:
            for stream in (p.stdin, p.stdout, p.stderr):
                if stream:
                    stream.close()


# --------------------------------------------------------------------------- ddplaunch-store
def _format_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


class StoreServer:
    """A ddplaunch-store process, started and checked as the module docstring says.

    Attributes: host (as printed, brackets removed), port, proc. Thread-safe: wait_for_waiters
    and waiters may be called from any thread.
    """

    def __init__(self, binary: str, procs: Processes, host: str = "127.0.0.1", port: int = 0, args=()):
        self.binary = binary
        cmd = [binary, "--host", host, "--port", str(port), "--log_level", "debug", *args]
        self.proc = procs.start(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.stopped = False
        self._cond = threading.Condition()
        self._waiters = 0  # the last count the server logged
        self._consumed = 0  # bytes of stderr read and parsed
        self._eof = False
        self._stderr: List[str] = []
        self.extra_stdout: List[str] = []
        self._stderr_thread = threading.Thread(target=self._read_stderr, daemon=True)
        self._stderr_thread.start()
        lines: "queue.Queue[Optional[str]]" = queue.Queue()
        self._stdout_thread = threading.Thread(target=self._read_stdout, args=(lines,), daemon=True)
        self._stdout_thread.start()
        procs.after_exit(self._join_readers)
        try:
            line = lines.get(timeout=STORE_STARTUP_TIMEOUT_S)
        except queue.Empty:
            raise AssertionError(f"{cmd}: no listening line within {STORE_STARTUP_TIMEOUT_S:.0f} s "
                                 f"(still running: {self.proc.poll() is None}){self.stderr_tail()}")
        if line is None:
            raise AssertionError(f"{cmd}: closed stdout without a listening line (exit code "
                                 f"{self.proc.wait(5)}){self.stderr_tail()}")
        m = LISTEN_RE.match(line.rstrip("\n"))
        assert m, f"first stdout line is not 'ddplaunch-store: listening on HOST:PORT': {line!r}"
        printed, self.port = m.group(1), int(m.group(2))
        self.host = printed[1:-1] if printed.startswith("[") else printed
        assert 0 < self.port < 65536, f"bad port in listening line: {line!r}"
        if port:
            assert self.port == port, f"asked for port {port}, listening on {self.port}"

    @property
    def address(self) -> str:
        return f"{_format_host(self.host)}:{self.port}"

    # --- output --------------------------------------------------------------------------
    def _read_stdout(self, lines: "queue.Queue[Optional[str]]") -> None:
        first = True
        for raw in self.proc.stdout:
            text = raw.decode(errors="replace")
            if first:
                lines.put(text)
                first = False
            else:
                self.extra_stdout.append(text)  # the contract is one line; stop() checks it
        if first:
            lines.put(None)

    def _read_stderr(self) -> None:
        # Reads only while holding the lock, so that _sync() can tell, under the same lock, how
        # many bytes the server has written that are not parsed yet (FIONREAD on the pipe).
        fd = self.proc.stderr.fileno()
        partial = b""
        while True:
            select.select([fd], [], [])
            with self._cond:
                data = os.read(fd, 65536)
                if not data:
                    self._eof = True
                    self._cond.notify_all()
                    return
                self._consumed += len(data)
                *complete, partial = (partial + data).split(b"\n")
                for raw in complete:
                    line = raw.decode(errors="replace")
                    self._stderr.append(line)
                    m = WAITERS_RE.search(line)
                    if m:
                        self._waiters = int(m.group(1))
                self._cond.notify_all()

    def _unread_bytes(self) -> int:
        buf = fcntl.ioctl(self.proc.stderr.fileno(), termios.FIONREAD, b"\0\0\0\0")
        return struct.unpack("i", buf)[0]

    def _sync(self, timeout: float) -> None:
        """Returns once every line the server wrote before this call has been parsed. Caller
        holds self._cond."""
        target = self._consumed + (0 if self._eof else self._unread_bytes())
        if not self._cond.wait_for(lambda: self._consumed >= target or self._eof, timeout):
            raise AssertionError(f"stderr of ddplaunch-store at {self.address} not read within {timeout} s")

    def stderr_tail(self, n: int = 20) -> str:
        with self._cond:
            lines = self._stderr[-n:]
        return "\nlast lines of its stderr:\n" + "\n".join(lines) if lines else ""

    # --- waiters -------------------------------------------------------------------------
    def waiters(self, timeout: float = 10) -> int:
        """The number of parked connections (WAIT or BARRIER pending) as of this call: every
        line the server logged before it has been read."""
        with self._cond:
            self._sync(timeout)
            return self._waiters

    def wait_for_waiters(self, n: int, timeout: float = 10) -> None:
        """Blocks until the server has logged that exactly `n` connections are parked (looking
        only at lines logged from this call on, and at the state they leave); fails the test
        after `timeout` seconds."""
        end = time.monotonic() + timeout
        with self._cond:
            self._sync(timeout)
            ok = self._cond.wait_for(lambda: self._waiters == n or self._eof, max(0.0, end - time.monotonic()))
            if ok and self._waiters == n:
                return
            last = self._waiters
        raise AssertionError(f"ddplaunch-store at {self.address} did not report {n} parked waiter(s) within "
                             f"{timeout} s (last reported: {last}; exited: {self._eof}){self.stderr_tail()}")

    def _join_readers(self) -> None:
        # Both end at EOF, which comes when the server has exited.
        self._stderr_thread.join(5)
        self._stdout_thread.join(5)

    # --- shutdown ------------------------------------------------------------------------
    def stop(self) -> None:
        """SIGTERMs the server; fails unless it was still running, exits 0 within 10 s and
        printed nothing on stdout after the listening line."""
        if self.stopped:
            return
        self.stopped = True
        rc = self.proc.poll()
        if rc is not None:
            raise AssertionError(f"ddplaunch-store at {self.address} exited with code {rc} before being asked "
                                 f"to stop{self.stderr_tail()}")
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(STORE_SHUTDOWN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            _signal_group(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            raise AssertionError(f"ddplaunch-store at {self.address} did not exit within "
                                 f"{STORE_SHUTDOWN_TIMEOUT_S:.0f} s of SIGTERM (killed){self.stderr_tail()}")
        self._join_readers()
        assert rc == 0, f"ddplaunch-store exited with code {rc} after SIGTERM (expected 0){self.stderr_tail()}"
        assert self.extra_stdout == [], f"ddplaunch-store printed more than the listening line: {self.extra_stdout}"


def ipv6_loopback_available() -> bool:
    if not socket.has_ipv6:
        return False
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


# --- Network-namespace hosts -------------------------------------------------------------------


class NetnsHost:
    """One "machine": a network namespace with one interface on the shared bridge."""

    def __init__(self, ns: str, ifname: str, address: str) -> None:
        self.ns, self.ifname, self.address = ns, ifname, address

    def cmd(self, *args: str) -> List[str]:
        """`args` as a command run inside this host's namespace."""
        return ["ip", "netns", "exec", self.ns, *args]

    def set_address(self, address: str) -> None:
        """Gives the host a new address (as a Kubernetes pod gets on a restart); the old one goes."""
        subprocess.run(["ip", "-n", self.ns, "addr", "flush", "dev", self.ifname], check=True)
        subprocess.run(["ip", "-n", self.ns, "addr", "add", f"{address}/24", "dev", self.ifname], check=True)
        self.address = address

    def set_link(self, up: bool) -> None:
        """Cuts (False) or restores (True) the host's link to the others."""
        subprocess.run(["ip", "-n", self.ns, "link", "set", self.ifname, "up" if up else "down"], check=True)


def netns_available() -> bool:
    """Whether this process may create network namespaces (root and iproute2)."""
    return os.geteuid() == 0 and subprocess.run(["sh", "-c", "command -v ip"], capture_output=True).returncode == 0


class NetnsHosts:
    """Hosts on one bridge, each in its own network namespace, with the given /24 addresses.

    Use as a context manager; leaving it deletes every namespace (links go with them). The names
    carry this process's pid, so suites that run at the same time do not collide; give each suite
    its own subnet. Raises RuntimeError when the namespaces cannot be made (callers skip)."""

    def __init__(self, addresses: List[str]) -> None:
        self.addresses = list(addresses)
        self.tag = f"{os.getpid()}_{uuid.uuid4().hex[:4]}"
        self.switch = f"ddp_sw{self.tag}"
        self.hosts: List[NetnsHost] = []
        self._names: List[str] = []

    def _sh(self, *args: str) -> None:
        subprocess.run(args, check=True, capture_output=True, text=True)

    def __enter__(self) -> List[NetnsHost]:
        if subprocess.run(["ip", "netns", "add", self.switch], capture_output=True).returncode != 0:
            raise RuntimeError("cannot create network namespaces here")
        self._names.append(self.switch)
        try:
            self._sh("ip", "-n", self.switch, "link", "add", "br0", "type", "bridge")
            self._sh("ip", "-n", self.switch, "link", "set", "br0", "up")
            for i, addr in enumerate(self.addresses):
                ns, ifname, peer = f"ddp_h{i}_{self.tag}", f"e{i}_{self.tag}"[:15], f"p{i}_{self.tag}"[:15]
                self._sh("ip", "netns", "add", ns)
                self._names.append(ns)
                self._sh("ip", "link", "add", ifname, "netns", ns, "type", "veth", "peer", "name", peer, "netns",
                         self.switch)
                self._sh("ip", "-n", self.switch, "link", "set", peer, "master", "br0", "up")
                self._sh("ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", ifname)
                self._sh("ip", "-n", ns, "link", "set", ifname, "up")
                self._sh("ip", "-n", ns, "link", "set", "lo", "up")
                self.hosts.append(NetnsHost(ns, ifname, addr))
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self.hosts

    def __exit__(self, *exc) -> None:
        for ns in reversed(self._names):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        self._names.clear()


def netns_hosts_or_skip(addresses: List[str]):
    """The body of a pytest fixture: yields NetnsHosts(addresses)'s hosts, or skips the test where
    network namespaces cannot be made (not root, no iproute2, no permission)."""
    import pytest  # only the fixtures' callers have it; the rest of this module is stdlib

    if not netns_available():
        pytest.skip("needs root and iproute2")
    try:
        with NetnsHosts(addresses) as made:
            yield made
    except RuntimeError as e:
        pytest.skip(str(e))


# --------------------------------------------------------------------------- TLS
def make_certs(directory):
    """A CA, a server certificate for 127.0.0.1 signed by it, a client certificate signed by it,
    and a second CA that signed nothing (openssl's command line)."""
    d = str(directory)

    def ssl(*args):
        subprocess.run(["openssl", *args], cwd=d, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=60)

    for ca in ("ca", "other"):
        ssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{ca}.key", "-out", f"{ca}.pem", "-days",
            "2", "-subj", f"/CN={ca}")
    with open(os.path.join(d, "san.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\n")
    for name in ("server", "client"):
        ssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj",
            f"/CN={name}")
        ssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out",
            f"{name}.pem", "-days", "2", *(["-extfile", "san.ext"] if name == "server" else []))
    return {n: os.path.join(d, n) for n in ("ca.pem", "other.pem", "client.pem", "client.key", "server.pem",
                                            "server.key")}
