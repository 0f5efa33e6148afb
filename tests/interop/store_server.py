"""Helpers for the PyTorch interop tests: start/stop a ddplaunch-store server binary.

Checks the server's CLI contract while doing so:
  * started as ``BINARY --host H --port 0`` it prints exactly one stdout line
    ``ddplaunch-store: listening on HOST:PORT`` (IPv6 host in brackets) within 20 s;
  * on SIGTERM it exits with code 0 within 10 s.

Also provides process bookkeeping shared by the test scripts: every child process
started through :func:`spawn` is killed by :func:`kill_all` (called on normal exit,
by the watchdog and from ``running_store``'s cleanup), so no test leaves processes
behind even when it fails or hangs.  Stdlib only (plus nothing else).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import queue
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from typing import Iterator, List, Optional, Tuple

LISTEN_RE = re.compile(r"^ddplaunch-store: listening on (\[[^\]]+\]|[^\s:\[\]]+):(\d+)$")
STARTUP_TIMEOUT_S = 20.0
SHUTDOWN_TIMEOUT_S = 10.0

_children: List[subprocess.Popen] = []
_children_lock = threading.Lock()


class StoreServerError(AssertionError):
    """The server binary violated its CLI contract (startup line, exit code...)."""


def log(msg: str) -> None:
    print(f"[interop] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- processes
def spawn(args, **kwargs) -> subprocess.Popen:
    """Popen that is registered for cleanup (own process group, killed by kill_all)."""
    kwargs.setdefault("start_new_session", True)
    p = subprocess.Popen(args, **kwargs)
    with _children_lock:
        _children.append(p)
    return p


def _kill(p: subprocess.Popen) -> None:
    if p.poll() is not None:
        return
    try:
        # Each child runs in its own session/process group (start_new_session=True);
        # kill that group so grandchildren (e.g. a wrapper script's exec target) die too.
        os.killpg(p.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        try:
            p.kill()
        except OSError:
            pass
    try:
        p.wait(5)
    except subprocess.TimeoutExpired:
        pass


def _kill_group_leftovers(p: subprocess.Popen) -> None:
    """After the leader exited, SIGKILL anything left in its process group (orphans)."""
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        pass


def kill_all() -> None:
    """SIGKILL every still-running child started through spawn()."""
    with _children_lock:
        kids = list(_children)
    for p in kids:
        _kill(p)
        _kill_group_leftovers(p)


atexit.register(kill_all)


def install_watchdog(seconds: float, what: str) -> threading.Timer:
    """Hard time bound for a whole test script: on expiry kill all children, exit 124."""

    def fire() -> None:
        log(f"FAIL: {what} did not finish within {seconds:.0f} s (watchdog); killing children")
        kill_all()
        sys.stderr.flush()
        os._exit(124)

    t = threading.Timer(seconds, fire)
    t.daemon = True
    t.start()
    return t


# --------------------------------------------------------------------------- server
def _format_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _reader(stream, q: "queue.Queue[Optional[str]]") -> None:
    """Forward the server's stdout lines to a queue; keep draining until EOF."""
    try:
        for line in stream:
            q.put(line)
    except (OSError, ValueError):
        pass
    finally:
        q.put(None)


def _drain(q: "queue.Queue[Optional[str]]") -> None:
    while True:
        line = q.get()
        if line is None:
            return
        log(f"server stdout (after listening line): {line.rstrip()}")


@contextlib.contextmanager
def running_store(binary: str, host: str = "127.0.0.1") -> Iterator[Tuple[str, int]]:
    """Start ``binary --host HOST --port 0``; yield (host, port); SIGTERM it on exit.

    Raises StoreServerError if the listening line does not appear within 20 s, if it is
    malformed, if the server does not exit within 10 s of SIGTERM, or exits non-zero.
    The yielded host is the one printed by the server (brackets removed).
    """
    args = [binary, "--host", host, "--port", "0"]
    log(f"starting server: {' '.join(args)}")
    p = spawn(args, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, bufsize=1)
    q: "queue.Queue[Optional[str]]" = queue.Queue()
    threading.Thread(target=_reader, args=(p.stdout, q), daemon=True).start()

    failing = False  # an exception (startup or body) is already propagating
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        try:
            line = q.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise StoreServerError(
                f"server printed no listening line within {STARTUP_TIMEOUT_S:.0f} s "
                f"(still running: {p.poll() is None})"
            )
        if line is None:
            rc = p.wait(5)
            raise StoreServerError(f"server closed stdout without a listening line (exit code {rc})")
        m = LISTEN_RE.match(line.rstrip("\n"))
        if not m:
            raise StoreServerError(
                "first stdout line is not 'ddplaunch-store: listening on HOST:PORT': " + repr(line)
            )
        printed_host, port = m.group(1), int(m.group(2))
        if printed_host.startswith("["):
            printed_host = printed_host[1:-1]
        if not (0 < port < 65536):
            raise StoreServerError(f"bad port in listening line: {line!r}")
        log(f"server pid {p.pid} listening on {_format_host(printed_host)}:{port}")
        threading.Thread(target=_drain, args=(q,), daemon=True).start()
        yield printed_host, port
    except BaseException:
        failing = True
        raise
    finally:
        try:
            _finish(p, failing)
        finally:
            _kill_group_leftovers(p)


def _finish(p: subprocess.Popen, failing: bool) -> None:
    """SIGTERM the server, wait up to 10 s (then SIGKILL), check its exit code is 0.

    If an exception is already propagating (``failing``), problems found here are only
    logged so that they do not mask the original error.
    """

    def problem(msg: str) -> None:
        if failing:
            log("also: " + msg)
        else:
            raise StoreServerError(msg)

    rc = p.poll()
    if rc is not None:  # died on its own
        if rc == 0:
            problem("server exited (code 0) before being asked to stop")
        else:
            problem(f"server exited with code {rc} before being asked to stop")
        return
    try:
        p.send_signal(signal.SIGTERM)
    except OSError:
        pass
    try:
        rc = p.wait(SHUTDOWN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        _kill(p)
        problem(f"server did not exit within {SHUTDOWN_TIMEOUT_S:.0f} s of SIGTERM (killed)")
        return
    if rc != 0:
        problem(f"server exited with code {rc} after SIGTERM (expected 0)")
        return
    log(f"server pid {p.pid} stopped, exit code 0")


# --------------------------------------------------------------------------- raw wire
VALIDATE, ADD = 0, 4
MAGIC = 0x3C85F7CE


def _recv_exact(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("server closed the connection")
        buf += chunk
    return buf


def raw_add(host: str, port: int, key: bytes, delta: int, timeout: float = 10.0) -> int:
    """ADD on a verbatim wire key (no '/' prefix), e.g. raw_add(h, p, b"init/", 0) reads
    the worker counter that Python clients cannot address through the TCPStore API."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(struct.pack("<BI", VALIDATE, MAGIC))
        s.sendall(struct.pack("<BQ", ADD, len(key)) + key + struct.pack("<q", delta))
        return struct.unpack("<q", _recv_exact(s, 8))[0]


def ipv6_loopback_available() -> bool:
    if not socket.has_ipv6:
        return False
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False
