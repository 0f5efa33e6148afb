"""The real ddplaunch-store under the memory exhaustion attacks of issue 24, with a small
--memory_budget (64 MiB): its resident set (VmRSS of /proc/<pid>/status) must stay under the
budget plus a fixed overhead, and a real client must still get SET and GET answered within 2 s.

  * APPEND past the value limit: 1 MiB appends to one key from several connections (an attacker
    grew one value to 512 MiB before); each connection is closed at the 9th MiB;
  * 50 clients GET an 8 MiB value ten times each and never read (3.2 GiB before);
  * 50 connections each send an unfinished MULTI_SET of 28 MiB (990 MiB before).

Each attack runs against a fresh server, which the start_store fixture stops (exit 0 checked) and
whose process group it kills; the test checks that no process it started is left.

    pytest test_store_exhaustion.py --store=/path/to/ddplaunch-store
"""
import socket
import struct
import threading
import time

import pytest

pytestmark = pytest.mark.timeout(120)

MIB = 1 << 20
BUDGET = 64 * MIB
# Beyond the budget: the process itself (a few MiB), ~5 KiB per open connection, one request or
# reply being copied, kernel-side nothing (socket buffers are not in VmRSS), and the allocator's
# rounding and retained free pages.
OVERHEAD = 48 * MIB
MAGIC = 0x3C85F7CE


def s(b: bytes) -> bytes:
    return struct.pack("<q", len(b)) + b


VALIDATE = b"\x00" + struct.pack("<I", MAGIC)


def set_req(key: bytes, value: bytes) -> bytes:
    return b"\x01" + s(key) + s(value)


def get_req(key: bytes) -> bytes:
    return b"\x03" + s(key)


def append_req(key: bytes, value: bytes) -> bytes:
    return b"\x09" + s(key) + s(value)


def ping_req(nonce: int) -> bytes:
    return b"\x0d" + struct.pack("<I", nonce)


def connect(port: int, timeout: float = 5) -> socket.socket:
    c = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return c


def send_quietly(c: socket.socket, data: bytes) -> bool:
    """Sends all of `data`; False once the server has closed the connection."""
    try:
        c.sendall(data)
        return True
    except OSError:
        return False


def read_exact(c: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = c.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed by the server")
        out += chunk
    return out


def rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


class PeakRss:
    """Samples VmRSS every 20 ms while the attack runs (no event reports a change of RSS)."""

    def __init__(self, pid: int):
        self.pid, self.peak, self._stop = pid, rss(pid), threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, rss(self.pid))

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(5)
        self.peak = max(self.peak, rss(self.pid))


def served_within(port: int, bound: float = 2.0) -> float:
    """A fresh client's SET, then GET of its key; returns the seconds it took (at most `bound`)."""
    t0 = time.monotonic()
    with connect(port, timeout=bound) as c:
        c.sendall(VALIDATE + ping_req(7) + set_req(b"/real", b"served") + get_req(b"/real"))
        assert struct.unpack("<I", read_exact(c, 4))[0] == 7
        (n,) = struct.unpack("<q", read_exact(c, 8))
        assert read_exact(c, n) == b"served"
    took = time.monotonic() - t0
    assert took < bound, f"a real client took {took:.2f} s"
    return took


def attack_append(port: int, conns: list) -> None:
    chunk = b"a" * MIB
    for _ in range(4):
        c = connect(port)
        conns.append(c)
        send_quietly(c, VALIDATE)
        for _ in range(64):
            if not send_quietly(c, append_req(b"/grow", chunk)):
                break


def attack_silent_readers(port: int, conns: list) -> None:
    with connect(port) as w:
        w.sendall(VALIDATE + set_req(b"/big", b"v" * (8 * MIB)) + ping_req(1))
        read_exact(w, 4)
    for _ in range(50):
        c = connect(port)
        c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        conns.append(c)
        send_quietly(c, VALIDATE + get_req(b"/big") * 10)


def attack_multi_set(port: int, conns: list) -> None:
    value = b"m" * (8 * MIB)
    head = b"\x0b" + struct.pack("<q", 8)
    for i in range(50):
        c = connect(port)
        conns.append(c)
        # Three whole 8 MiB values and half of a fourth, then nothing: 28 MiB each.
        body = b"".join(s(b"/ms%d" % k) + s(value) for k in range(3)) + s(b"/ms3") + struct.pack("<q", len(value))
        if send_quietly(c, VALIDATE + head + body):
            send_quietly(c, value[: len(value) // 2])


ATTACKS = {"append": attack_append, "silent_readers": attack_silent_readers, "multi_set": attack_multi_set}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_rss_stays_within_the_budget(start_store, procs, attack):
    server = start_store(args=["--memory_budget", f"{BUDGET // MIB}MiB", "--quiet"])
    pid = server.proc.pid
    before = rss(pid)
    conns = []
    try:
        with PeakRss(pid) as peak:
            runner = threading.Thread(target=ATTACKS[attack], args=(server.port, conns), daemon=True)
            runner.start()
            runner.join(60)
            assert not runner.is_alive(), f"the {attack} attack did not finish within 60 s"
            took = served_within(server.port)
        print(f"{attack}: VmRSS {before / MIB:.1f} MiB before, peak {peak.peak / MIB:.1f} MiB, "
              f"budget {BUDGET / MIB:.0f} MiB; a real client served in {took * 1000:.0f} ms")
        assert peak.peak <= BUDGET + OVERHEAD, (
            f"{attack}: VmRSS peaked at {peak.peak / MIB:.1f} MiB, over the budget of {BUDGET / MIB:.0f} MiB "
            f"plus {OVERHEAD / MIB:.0f} MiB")
    finally:
        for c in conns:
            c.close()
    server.stop()
    procs.assert_no_survivors()


def test_bad_budget_is_refused_with_exit_2(store_binary, procs):
    rc, out, err, _ = procs.run([store_binary, "--port", "0", "--memory_budget", "1000"], timeout=10)
    assert rc == 2
    assert out == ""
    assert err.strip().splitlines() == [
        "ddplaunch-store: --memory_budget: the store's memory budget must be at least 1MiB, got 1000 bytes; see --help"]
    rc, _, err, _ = procs.run([store_binary, "--port", "0", "--memory_budget", "lots"], timeout=10)
    assert rc == 2 and len(err.strip().splitlines()) == 1
