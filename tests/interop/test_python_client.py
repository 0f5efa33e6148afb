"""Interop test: real PyTorch ``torch.distributed.TCPStore`` clients against ddplaunch-store.

Run by ctest:  python -m pytest test_python_client.py --store /path/to/ddplaunch-store

Starts the server (``--host 127.0.0.1 --port 0``, the ``store`` fixture, shared by the tests
of this file) and drives it with pure clients
``TCPStore(host, port, is_master=False, timeout=10 s, use_libuv=True)``.  Checks:

  * set/get of text, all-256-byte binary, empty values, empty/long keys, a 1 MiB value;
  * add (positive, negative, new key) and that a counter reads back as decimal text b"7";
  * compare_set: missing key + empty expected (sets), missing key + non-empty expected
    (returns expected, sets nothing), match (swaps), mismatch (returns current value);
  * check, num_keys, delete_key, append (incl. waking a waiter), multi_get, multi_set;
  * wait on existing keys; wait on a missing key with a short timeout raises DistStoreError
    and the SAME store object keeps working afterwards (also after the key is set later,
    i.e. no stray STOP_WAITING byte desynchronises the connection); get() timing out;
  * a wait / multi-key wait satisfied by a second client from another thread; two
    waiters on one key both woken; a waiting raw connection that disconnects;
  * queue_push / queue_pop / queue_len incl. a blocking pop woken by another client's
    push, FIFO order, non-blocking pop on empty (QueueEmptyError), pop timeout;
  * list_keys and barrier when this torch has them (skipped otherwise, reported);
  * many concurrent clients incrementing one counter;
  * two clients with world_size=2 (each ADDs "init/" +1 on connect; read back raw);
  * a second server on the same port exits with code 2;
  * IPv6: if [::1] is usable, a server with --host ::1 and set/get/add over it;
  * the server exits 0 on SIGTERM (checked by the store fixtures when they stop it).

Where a test must act only once a waiter has parked (or must see that it stays parked), it waits
on the server's debug log of its waiter count (``store.wait_for_waiters(n)``), not on a sleep.
Each test is bounded by pytest-timeout; every process started is killed on exit or failure.
"""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import threading
import time
from datetime import timedelta

import pytest
import torch.distributed as dist

from pyfixtures import ipv6_loopback_available, note

pytestmark = pytest.mark.timeout(60)

CLIENT_TIMEOUT = timedelta(seconds=10)
SHORT = timedelta(milliseconds=500)
VALIDATE, ADD, WAIT = 0, 4, 6
MAGIC = 0x3C85F7CE

has_queues = all(hasattr(dist.TCPStore, m) for m in ("queue_push", "queue_pop", "queue_len"))
has_list_keys = hasattr(dist.TCPStore, "list_keys")
has_barrier = hasattr(dist.TCPStore, "barrier")


def client(server, **kw) -> dist.TCPStore:
    kw.setdefault("timeout", CLIENT_TIMEOUT)
    return dist.TCPStore(server.host, server.port, is_master=False, use_libuv=True, **kw)


def _recv_exact(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("server closed the connection")
        buf += chunk
    return buf


def raw_add(server, key: bytes, delta: int, timeout: float = 10.0) -> int:
    """ADD on a verbatim wire key (no '/' prefix), e.g. raw_add(server, b"init/", 0) reads the
    worker counter that Python clients cannot address through the TCPStore API."""
    with socket.create_connection((server.host, server.port), timeout=timeout) as s:
        s.sendall(struct.pack("<BI", VALIDATE, MAGIC))
        s.sendall(struct.pack("<BQ", ADD, len(key)) + key + struct.pack("<q", delta))
        return struct.unpack("<q", _recv_exact(s, 8))[0]


def expect_timeout(fn, what: str, kind: str = "wait", lo: float = 0.3, hi: float = 8.0) -> None:
    """fn() must raise torch's store timeout error (DistStoreError) after roughly SHORT."""
    t0 = time.monotonic()
    try:
        fn()
    except dist.DistStoreError as e:
        dt = time.monotonic() - t0
        assert "timeout" in str(e), f"{what}: DistStoreError without 'timeout': {e}"
        assert lo <= dt <= hi, f"{what}: timed out after {dt:.2f} s, expected ~{SHORT}"
        return
    except Exception as e:  # e.g. DistNetworkError: the server dropped the connection
        pytest.fail(f"{what}: expected a {kind} timeout (DistStoreError), got {type(e).__name__}: {e}")
    pytest.fail(f"{what}: returned instead of timing out")


class Bg:
    """Run fn in a daemon thread; join() re-raises its exception or returns its result."""

    def __init__(self, fn, *args):
        self.result = None
        self.exc = None
        self.done = threading.Event()

        def run():
            try:
                self.result = fn(*args)
            except BaseException as e:  # noqa: BLE001
                self.exc = e
            finally:
                self.done.set()

        self.t = threading.Thread(target=run, daemon=True)
        self.t.start()

    def join(self, timeout: float = 15.0):
        assert self.done.wait(timeout), f"background operation did not finish within {timeout} s"
        if self.exc is not None:
            raise self.exc
        return self.result


@pytest.fixture(autouse=True)
def no_parked_waiters(store):
    """Every test starts on the shared server with no parked connection, so the counts given to
    store.wait_for_waiters are the test's own."""
    store.wait_for_waiters(0)


# ----------------------------------------------------------------------------- key-value
def test_set_get(store):
    s = client(store)
    s.set("sg/text", "hello")
    assert s.get("sg/text") == b"hello", "get text"
    blob = bytes(range(256)) * 4
    s.set("sg/bin", blob)
    assert s.get("sg/bin") == blob, "get binary (all byte values incl. NUL)"
    s.set("sg/bin", b"\x00")
    assert s.get("sg/bin") == b"\x00", "overwrite with a single NUL"
    s.set("sg/empty", b"")
    assert s.get("sg/empty") == b"", "empty value"
    assert s.check(["sg/empty"]), "key with empty value must exist for check()"
    s.set("", b"empty-key")
    assert s.get("") == b"empty-key", "empty user key (wire key '/')"
    long_key = "sg/long/" + "k" * 4000
    s.set(long_key, "v")
    assert s.get(long_key) == b"v", "4 KiB key"
    s.set("sg/\u00fcnic\u00f8de", "\u2713")
    assert s.get("sg/\u00fcnic\u00f8de") == "\u2713".encode(), "unicode key/value (UTF-8)"
    big = os.urandom(1 << 20)
    s.set("sg/big", big)
    assert s.get("sg/big") == big, "1 MiB value"
    # second connection sees the same data
    assert client(store).get("sg/bin") == b"\x00", "value via a second client"


def test_add(store):
    s = client(store)
    assert s.add("add/c", 5) == 5, "add to missing key starts from 0"
    assert s.add("add/c", 2) == 7, "add +2"
    assert s.get("add/c") == b"7", "counter read back as decimal text"
    assert s.add("add/c", -10) == -3, "add negative"
    assert s.get("add/c") == b"-3", "negative counter text"
    assert s.add("add/c", 0) == -3, "add 0 reads the counter"
    assert s.add("add/neg", -4) == -4, "first add negative"
    assert s.add("add/big", 2**62) == 2**62, "large delta"
    assert s.add("add/big", 2**62 - 1) == 2**63 - 1, "add up to INT64_MAX"
    s.set("add/txt", "40")
    assert s.add("add/txt", 2) == 42, "add on a set() decimal string"


def test_compare_set(store):
    s = client(store)
    assert s.compare_set("cas/a", "", "v1") == b"v1", "missing key + empty expected returns desired"
    assert s.get("cas/a") == b"v1", "missing key + empty expected stores desired"
    assert s.compare_set("cas/b", "exp", "v2") == b"exp", "missing key + non-empty expected returns expected"
    assert not s.check(["cas/b"]), "missing key + non-empty expected must not create the key"
    assert s.compare_set("cas/a", "v1", "v1b") == b"v1b", "match returns desired"
    assert s.get("cas/a") == b"v1b", "match stores desired"
    assert s.compare_set("cas/a", "wrong", "zzz") == b"v1b", "mismatch returns current value"
    assert s.get("cas/a") == b"v1b", "mismatch leaves value unchanged"
    assert s.compare_set("cas/bin", "", b"\x00\x01") == b"\x00\x01", "binary desired"
    assert s.compare_set("cas/bin", b"\x00\x01", b"\xff") == b"\xff", "binary expected match"


def test_check(store):
    s = client(store)
    s.set("chk/a", "1")
    s.set("chk/b", "2")
    assert s.check(["chk/a"]), "check existing key"
    assert s.check(["chk/a", "chk/b"]), "check two existing keys"
    assert not s.check(["chk/a", "chk/missing"]), "check with one missing key must be False"
    assert not s.check(["chk/missing"]), "check missing key"
    assert s.check([]), "check of no keys is True"


# ----------------------------------------------------------------------------- waiting
def test_wait_existing(store):
    s = client(store)
    s.set("we/a", "1")
    s.add("we/b", 1)
    t0 = time.monotonic()
    s.wait(["we/a"])
    s.wait(["we/a", "we/b"])
    s.wait(["we/a", "we/b"], timedelta(seconds=5))
    s.wait([])
    assert time.monotonic() - t0 < 2.0, "wait on existing keys must return immediately"


def test_wait_timeout_then_reuse(store):
    s = client(store)
    other = client(store)
    s.set("wt/x", "before")
    expect_timeout(lambda: s.wait(["wt/missing"], SHORT), "wait(missing, 500ms)")
    assert store.waiters() == 0, "the timed-out wait is still parked on the server"
    # the SAME store object must still be usable
    assert s.get("wt/x") == b"before", "get after wait timeout"
    s.set("wt/y", "after")
    assert s.get("wt/y") == b"after", "set/get after wait timeout"
    assert s.add("wt/c", 1) == 1, "add after wait timeout"
    s.wait(["wt/x"], timedelta(seconds=5))
    # Now the key that was waited for appears: a server that did not cancel the wait
    # would send a stray STOP_WAITING byte, desynchronising the next replies. SET has no reply;
    # a CHECK on the same connection returns only after the server handled the SET, and so
    # after it would have sent that byte.
    other.set("wt/missing", "now")
    assert other.check(["wt/missing"])
    assert s.add("wt/c", 1) == 2, "add after the timed-out key was set by another client"
    assert s.get("wt/missing") == b"now", "get of the formerly missing key"
    # several timeouts in a row, incl. multi-key waits with one key present
    expect_timeout(lambda: s.wait(["wt/m2"], SHORT), "second wait timeout")
    expect_timeout(lambda: s.wait(["wt/x", "wt/m3"], SHORT), "multi-key wait timeout")
    other.set("wt/m2", "1")
    other.set("wt/m3", "1")
    assert other.check(["wt/m2", "wt/m3"])
    assert s.add("wt/c", 5) == 7, "add after several timeouts"
    # get() = WAIT + GET on the store timeout
    s.set_timeout(SHORT)
    expect_timeout(lambda: s.get("wt/never"), "get(missing) with 500 ms store timeout")
    s.set_timeout(CLIENT_TIMEOUT)
    assert s.get("wt/y") == b"after", "get after get() timeout"
    assert s.compare_set("wt/y", "after", "x") == b"x", "compare_set after timeouts"
    assert s.check(["wt/y"]), "check after timeouts"


def test_wait_woken_by_other_client(store):
    a, b = client(store), client(store)
    t0 = time.monotonic()
    w = Bg(a.wait, ["wo/late"])
    store.wait_for_waiters(1)
    assert not w.done.is_set(), "wait returned before the key was set"
    b.set("wo/late", "1")
    w.join()
    dt = time.monotonic() - t0
    assert dt < 5.0, f"wait woken too late ({dt:.2f} s)"
    assert a.get("wo/late") == b"1", "get after woken wait"


def test_multi_key_wait_needs_every_key(store):
    # multi-key wait: only returns once both keys exist
    a, b = client(store), client(store)
    w = Bg(a.wait, ["wo/k1", "wo/k2"])
    store.wait_for_waiters(1)
    b.set("wo/k1", "1")
    assert b.check(["wo/k1"])  # the server has handled the SET
    assert store.waiters() == 1, "multi-key wait released with only one key set"
    assert not w.done.is_set(), "multi-key wait returned with only one key set"
    b.add("wo/k2", 3)
    w.join()


def test_two_waiters_on_one_key_both_woken(store):
    # two waiters (two connections) on the same key are both woken by one set
    a, b, c = client(store), client(store), client(store)
    w1 = Bg(a.wait, ["wo/both"])
    w2 = Bg(c.wait, ["wo/both"])
    store.wait_for_waiters(2)
    b.set("wo/both", "x")
    w1.join()
    w2.join()


def test_blocking_get_woken(store):
    # get() blocked on a missing key is woken by another client's set
    a, b = client(store), client(store)
    g = Bg(a.get, "wo/get")
    store.wait_for_waiters(1)
    b.set("wo/get", b"\x01\x02")
    assert g.join() == b"\x01\x02", "blocking get woken by another client"


@pytest.mark.parametrize("write", ["append", "multi_set", "compare_set"])
def test_waiter_woken_by(store, write):
    # a waiter woken by append / multi_set / compare_set-create
    a, b = client(store), client(store)
    keys = {"append": ["wo/app"], "multi_set": ["wo/ms1", "wo/ms2"], "compare_set": ["wo/cas"]}[write]
    w = Bg(a.wait, keys)
    store.wait_for_waiters(1)
    if write == "append":
        b.append("wo/app", "z")
    elif write == "multi_set":
        b.multi_set(["wo/ms1", "wo/ms2"], ["1", "2"])
    else:
        b.compare_set("wo/cas", "", "created")
    w.join()
    # and the waiting connection is still in sync afterwards
    assert a.add(f"wo/ctr/{write}", 1) == 1, "add on the woken connection"


def test_disconnected_waiter(store):
    # A raw connection registers a WAIT and disappears (like a killed worker).
    with socket.create_connection((store.host, store.port), timeout=10) as raw:
        raw.sendall(struct.pack("<BI", VALIDATE, MAGIC))
        key = b"/dw/gone"
        raw.sendall(struct.pack("<BQQ", WAIT, 1, len(key)) + key)
        store.wait_for_waiters(1)
    store.wait_for_waiters(0)  # the server dropped the wait of the closed connection
    s = client(store)
    s.set("dw/gone", "x")  # server must not trip over the dead waiter
    assert client(store).get("dw/gone") == b"x", "server alive after a waiter disconnected"
    assert s.add("dw/c", 2) == 2, "setter connection still in sync"


# ----------------------------------------------------------------------------- more queries
def test_delete_key_num_keys(store):
    s = client(store)
    n0 = s.num_keys()
    assert isinstance(n0, int) and n0 >= 0, f"num_keys returned {n0!r}"
    s.set("dn/a", "1")
    s.set("dn/b", "2")
    s.add("dn/c", 1)
    assert s.num_keys() == n0 + 3, "num_keys after 3 new keys"
    s.set("dn/a", "overwrite")
    assert s.num_keys() == n0 + 3, "num_keys after overwrite"
    assert s.delete_key("dn/a") == True, "delete existing key"  # noqa: E712
    assert s.delete_key("dn/a") == False, "delete already deleted key"  # noqa: E712
    assert s.delete_key("dn/never") == False, "delete missing key"  # noqa: E712
    assert not s.check(["dn/a"]), "deleted key must be gone for check()"
    assert s.num_keys() == n0 + 2, "num_keys after delete"
    s.set("dn/a", "again")
    assert s.get("dn/a") == b"again", "re-set after delete"
    # a wait on a deleted key blocks again
    s.delete_key("dn/b")
    expect_timeout(lambda: s.wait(["dn/b"], SHORT), "wait on deleted key")
    assert s.num_keys() == n0 + 2, "num_keys after delete + re-set"


def test_append(store):
    s = client(store)
    s.append("ap/k", "ab")
    assert s.get("ap/k") == b"ab", "append to missing key creates it"
    s.append("ap/k", b"\x00\xff")
    s.append("ap/k", "")
    s.append("ap/k", "cd")
    assert s.get("ap/k") == b"ab\x00\xffcd", "appended value"
    s.set("ap/n", "1")
    s.append("ap/n", "2")
    assert s.add("ap/n", 1) == 13, "add on appended decimal text"


def test_multi_get_multi_set(store):
    s = client(store)
    s.multi_set(["mu/a", "mu/b", "mu/c"], ["1", b"\x00\x02", ""])
    assert s.get("mu/a") == b"1", "multi_set a"
    assert s.get("mu/b") == b"\x00\x02", "multi_set b"
    assert s.get("mu/c") == b"", "multi_set c (empty)"
    s.set("mu/d", "dd")
    assert s.multi_get(["mu/d", "mu/a", "mu/b", "mu/c", "mu/a"]) == [b"dd", b"1", b"\x00\x02", b"", b"1"], \
        "multi_get order/duplicates"
    assert s.multi_get([]) == [], "multi_get of no keys"
    s.multi_set(["mu/a", "mu/a"], ["x", "y"])
    assert s.get("mu/a") == b"y", "multi_set duplicate key: last wins"
    s.multi_set([], [])
    # multi_get waits for missing keys
    other = client(store)
    g = Bg(s.multi_get, ["mu/a", "mu/late"])
    store.wait_for_waiters(1)
    other.set("mu/late", "L")
    assert g.join() == [b"y", b"L"], "multi_get woken by another client"
    s.set_timeout(SHORT)
    expect_timeout(lambda: s.multi_get(["mu/a", "mu/nope"]), "multi_get with a missing key")
    s.set_timeout(CLIENT_TIMEOUT)
    assert s.multi_get(["mu/d"]) == [b"dd"], "multi_get after timeout"


# ----------------------------------------------------------------------------- queues
needs_queues = pytest.mark.skipif(not has_queues, reason="this torch's TCPStore has no queue_* methods")


@needs_queues
def test_queue_fifo(store):
    s = client(store)
    assert s.queue_len("q/unknown") == 0, "queue_len of unknown queue"
    with pytest.raises(dist.QueueEmptyError):
        s.queue_pop("q/unknown", block=False)  # non-blocking pop of an empty queue must raise
    for v in (b"one", b"\x00two", b""):
        s.queue_push("q/a", v)
    assert s.queue_len("q/a") == 3, "queue_len after 3 pushes"
    assert s.queue_pop("q/a") == b"one", "FIFO pop 1 (blocking pop, queue non-empty)"
    assert s.queue_pop("q/a", block=False) == b"\x00two", "FIFO pop 2 (non-blocking)"
    assert s.queue_len("q/a") == 1, "queue_len after 2 pops"
    assert s.queue_pop("q/a") == b"", "FIFO pop 3 (empty payload)"
    assert s.queue_len("q/a") == 0, "queue_len after draining"
    with pytest.raises(dist.QueueEmptyError):
        s.queue_pop("q/a", block=False)  # non-blocking pop of a drained queue must raise


@needs_queues
def test_blocking_pop_woken_by_push(store):
    # blocking pop woken by a push from another client
    s, b = client(store), client(store)
    t0 = time.monotonic()
    pop = Bg(s.queue_pop, "q/block")
    store.wait_for_waiters(1)
    assert not pop.done.is_set(), "blocking pop returned on an empty queue"
    b.queue_push("q/block", b"wake")
    assert pop.join() == b"wake", "blocking pop woken by another client's push"
    assert time.monotonic() - t0 < 5.0, "blocking pop woken too late"
    assert s.queue_len("q/block") == 0, "queue empty after woken pop"


@needs_queues
def test_two_blocked_poppers_get_one_value_each(store):
    # two blocked poppers on two connections: each push delivers to exactly one
    s, b, c = client(store), client(store), client(store)
    p1 = Bg(s.queue_pop, "q/two")
    p2 = Bg(c.queue_pop, "q/two")
    store.wait_for_waiters(2)
    b.queue_push("q/two", "first")
    store.wait_for_waiters(1)  # the push woke exactly one of them
    b.queue_push("q/two", "second")
    got = sorted([p1.join(), p2.join()])
    assert got == [b"first", b"second"], "two blocked poppers each got one value"
    assert b.queue_len("q/two") == 0, "queue empty after two pops"


@needs_queues
def test_pop_timeout_then_reuse(store):
    # blocking pop timeout; then the same connection still works
    s, b = client(store), client(store)
    s.set_timeout(SHORT)
    expect_timeout(lambda: s.queue_pop("q/empty"), "blocking pop on empty queue")
    s.set_timeout(CLIENT_TIMEOUT)
    b.queue_push("q/empty", "late")  # must not produce a stray reply on s
    # QUEUE_PUSH has no reply; QUEUE_LEN on the same connection returns once it was handled.
    assert b.queue_len("q/empty") == 1
    assert s.queue_len("q/empty") == 1, "queue_len after pop timeout"
    assert s.queue_pop("q/empty") == b"late", "pop after pop timeout"
    assert s.add("q/ctr", 1) == 1, "add after queue ops"


# ----------------------------------------------------------------------------- list_keys, barrier
@pytest.mark.skipif(not has_list_keys, reason="this torch's TCPStore has no list_keys")
def test_list_keys(store):
    s = client(store)
    s.set("lk/a", "1")
    s.add("lk/b", 1)
    s.append("lk/c", "x")
    s.set("lk/d", "x")
    s.delete_key("lk/d")
    s.queue_push("lk/q", "x")
    keys = s.list_keys()
    assert isinstance(keys, list), f"list_keys returned {type(keys).__name__}"
    ks = set(keys)
    assert len(ks) == len(keys), f"list_keys returned duplicates: {keys}"
    for k in ("lk/a", "lk/b", "lk/c"):
        assert k in ks, f"list_keys misses {k!r} (got {len(keys)} keys)"
    assert "lk/d" not in ks, "list_keys still lists a deleted key"
    assert all(isinstance(k, str) for k in keys), "list_keys must return str"
    note(f"list_keys: {len(keys)} keys; queue name listed: {'lk/q' in ks}; "
          f"'init/' hidden: {'init/' not in ks and 'init' not in ks}")


needs_barrier = pytest.mark.skipif(not has_barrier, reason="this torch's TCPStore has no barrier")


@needs_barrier
def test_barrier_of_two(store):
    a, b, c = client(store), client(store), client(store)
    a.barrier("bar/one", 1)
    t0 = time.monotonic()
    w = Bg(a.barrier, "bar/two", 2)
    store.wait_for_waiters(1)
    assert not w.done.is_set(), "barrier(2) returned with only one participant"
    b.barrier("bar/two", 2)
    w.join()
    assert time.monotonic() - t0 < 5.0, "barrier took too long"
    c.barrier("bar/two", 2)  # late arrival after completion returns immediately
    assert a.get("bar/one") == b"1", "barrier counter stored as decimal text"


@needs_barrier
def test_barrier_of_three_with_timeout_argument(store):
    # three-way barrier with explicit timeout
    a, b, c = client(store), client(store), client(store)
    w1 = Bg(a.barrier, "bar/three", 3, timedelta(seconds=10))
    w2 = Bg(b.barrier, "bar/three", 3, timedelta(seconds=10))
    store.wait_for_waiters(2)
    c.barrier("bar/three", 3, timedelta(seconds=10))
    w1.join()
    w2.join()


@needs_barrier
def test_barrier_timeout_then_reuse(store):
    # timeout, then the same store still works
    a = client(store)
    expect_timeout(lambda: a.barrier("bar/lonely", 2, SHORT), "barrier timeout", kind="barrier")
    assert a.add("bar/ctr", 1) == 1, "add after barrier timeout"


# ----------------------------------------------------------------------------- load, lifecycle
def test_concurrent_adds(store):
    n_clients, n_adds = 16, 50
    stores = [client(store) for _ in range(n_clients)]
    errs = []

    def work(s):
        try:
            for _ in range(n_adds):
                s.add("cc/ctr", 1)
                s.set("cc/last", "x")
        except BaseException as e:  # noqa: BLE001
            errs.append(e)

    ts = [threading.Thread(target=work, args=(s,), daemon=True) for s in stores]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    assert not any(t.is_alive() for t in ts), "concurrent adds did not finish in 60 s"
    assert not errs, f"concurrent add failed: {errs[:1]}"
    assert stores[0].add("cc/ctr", 0) == n_clients * n_adds, "counter after concurrent adds"


def test_port_taken_exit_2(store, store_binary, procs):
    proc = procs.start([store_binary, "--host", store.host, "--port", str(store.port)], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    try:
        out, err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail(f"second server on taken port {store.port} still running after 20 s")
    assert proc.returncode == 2, (f"exit code of a second server on taken port {store.port} "
                                  f"(stdout={out[-200:]!r}, stderr={err[-300:]!r})")


def test_still_alive(store):
    # final sanity: the shared server still answers after every test above
    assert client(store).add("final", 1) == 1, "final add"


def test_world_size_2_init_key(start_store):
    # Fresh server: a client constructed with world_size=N (wait_for_workers=True, the
    # default) ADDs the un-prefixed key "init/" by 1; pure clients do not wait for N.
    server = start_store()
    t0 = time.monotonic()
    a = client(server, world_size=2)
    assert time.monotonic() - t0 < 5.0, "a non-master client with world_size=2 must not wait"
    assert raw_add(server, b"init/", 0) == 1, "'init/' counter after first world_size=2 client"
    b = client(server, world_size=2)
    assert raw_add(server, b"init/", 0) == 2, "'init/' counter after second world_size=2 client"
    nk = a.num_keys()
    a.set("ws/k", "v")
    assert b.get("ws/k") == b"v", "set/get across the two world_size clients"
    assert a.num_keys() == nk + 1, "num_keys (includes 'init/')"
    client(server)  # world_size=None adds nothing
    assert raw_add(server, b"init/", 0) == 2, "'init/' unchanged by a client without world_size"
    if hasattr(a, "list_keys"):
        assert "init/" not in a.list_keys(), "list_keys must hide the un-prefixed 'init/'"


@pytest.mark.skipif(not ipv6_loopback_available(), reason="[::1] not usable on this machine")
def test_ipv6(start_store):
    server = start_store(host="::1")
    assert server.host == "::1", "printed IPv6 host"
    s = client(server)
    s.set("v6/k", b"\x00six")
    assert s.get("v6/k") == b"\x00six", "IPv6 set/get"
    assert s.add("v6/c", 7) == 7, "IPv6 add"
    assert client(server).get("v6/c") == b"7", "IPv6 second client"
