"""Interop test: real PyTorch ``torch.distributed.TCPStore`` clients against ddplaunch-store.

Usage:  python test_python_client.py /path/to/ddplaunch-store

Starts the server (``--host 127.0.0.1 --port 0``) and drives it with pure clients
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
  * the server exits 0 on SIGTERM (checked by store_server.running_store).

Bounded by a 300 s watchdog; every process started is killed on exit or failure.
Exit 0 if all checks pass, 1 if any failed (each failure is printed), 124 on watchdog.
"""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
import threading
import time
import traceback
from datetime import timedelta

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import store_server  # noqa: E402
from store_server import log, raw_add, running_store  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

TOTAL_TIMEOUT_S = 300
CLIENT_TIMEOUT = timedelta(seconds=10)
SHORT = timedelta(milliseconds=500)


class CheckFailed(AssertionError):
    pass


def expect(cond: bool, msg: str) -> None:
    if not cond:
        raise CheckFailed(msg)


def eq(got, want, what: str) -> None:
    if got != want:
        raise CheckFailed(f"{what}: got {got!r}, expected {want!r}")


def client(host: str, port: int, **kw) -> dist.TCPStore:
    kw.setdefault("timeout", CLIENT_TIMEOUT)
    return dist.TCPStore(host, port, is_master=False, use_libuv=True, **kw)


def expect_timeout(fn, what: str, kind: str = "wait", lo: float = 0.3, hi: float = 8.0) -> None:
    """fn() must raise torch's store timeout error (DistStoreError) after roughly SHORT."""
    t0 = time.monotonic()
    try:
        fn()
    except dist.DistStoreError as e:
        dt = time.monotonic() - t0
        expect("timeout" in str(e), f"{what}: DistStoreError without 'timeout': {e}")
        expect(lo <= dt <= hi, f"{what}: timed out after {dt:.2f} s, expected ~{SHORT}")
        return
    except Exception as e:  # e.g. DistNetworkError: the server dropped the connection
        raise CheckFailed(f"{what}: expected a {kind} timeout (DistStoreError), got "
                          f"{type(e).__name__}: {e}") from e
    raise CheckFailed(f"{what}: returned instead of timing out")


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
        if not self.done.wait(timeout):
            raise CheckFailed(f"background operation did not finish within {timeout} s")
        if self.exc is not None:
            raise self.exc
        return self.result


# ----------------------------------------------------------------------------- checks
def check_set_get(h, p):
    s = client(h, p)
    s.set("sg/text", "hello")
    eq(s.get("sg/text"), b"hello", "get text")
    blob = bytes(range(256)) * 4
    s.set("sg/bin", blob)
    eq(s.get("sg/bin"), blob, "get binary (all byte values incl. NUL)")
    s.set("sg/bin", b"\x00")
    eq(s.get("sg/bin"), b"\x00", "overwrite with a single NUL")
    s.set("sg/empty", b"")
    eq(s.get("sg/empty"), b"", "empty value")
    expect(s.check(["sg/empty"]), "key with empty value must exist for check()")
    s.set("", b"empty-key")
    eq(s.get(""), b"empty-key", "empty user key (wire key '/')")
    long_key = "sg/long/" + "k" * 4000
    s.set(long_key, "v")
    eq(s.get(long_key), b"v", "4 KiB key")
    s.set("sg/\u00fcnic\u00f8de", "\u2713")
    eq(s.get("sg/\u00fcnic\u00f8de"), "\u2713".encode(), "unicode key/value (UTF-8)")
    big = os.urandom(1 << 20)
    s.set("sg/big", big)
    eq(s.get("sg/big"), big, "1 MiB value")
    # second connection sees the same data
    eq(client(h, p).get("sg/bin"), b"\x00", "value via a second client")


def check_add(h, p):
    s = client(h, p)
    eq(s.add("add/c", 5), 5, "add to missing key starts from 0")
    eq(s.add("add/c", 2), 7, "add +2")
    eq(s.get("add/c"), b"7", "counter read back as decimal text")
    eq(s.add("add/c", -10), -3, "add negative")
    eq(s.get("add/c"), b"-3", "negative counter text")
    eq(s.add("add/c", 0), -3, "add 0 reads the counter")
    eq(s.add("add/neg", -4), -4, "first add negative")
    eq(s.add("add/big", 2**62), 2**62, "large delta")
    eq(s.add("add/big", 2**62 - 1), 2**63 - 1, "add up to INT64_MAX")
    s.set("add/txt", "40")
    eq(s.add("add/txt", 2), 42, "add on a set() decimal string")


def check_compare_set(h, p):
    s = client(h, p)
    eq(s.compare_set("cas/a", "", "v1"), b"v1", "missing key + empty expected returns desired")
    eq(s.get("cas/a"), b"v1", "missing key + empty expected stores desired")
    eq(s.compare_set("cas/b", "exp", "v2"), b"exp",
       "missing key + non-empty expected returns expected")
    expect(not s.check(["cas/b"]), "missing key + non-empty expected must not create the key")
    eq(s.compare_set("cas/a", "v1", "v1b"), b"v1b", "match returns desired")
    eq(s.get("cas/a"), b"v1b", "match stores desired")
    eq(s.compare_set("cas/a", "wrong", "zzz"), b"v1b", "mismatch returns current value")
    eq(s.get("cas/a"), b"v1b", "mismatch leaves value unchanged")
    eq(s.compare_set("cas/bin", "", b"\x00\x01"), b"\x00\x01", "binary desired")
    eq(s.compare_set("cas/bin", b"\x00\x01", b"\xff"), b"\xff", "binary expected match")


def check_check(h, p):
    s = client(h, p)
    s.set("chk/a", "1")
    s.set("chk/b", "2")
    expect(s.check(["chk/a"]), "check existing key")
    expect(s.check(["chk/a", "chk/b"]), "check two existing keys")
    expect(not s.check(["chk/a", "chk/missing"]), "check with one missing key must be False")
    expect(not s.check(["chk/missing"]), "check missing key")
    expect(s.check([]), "check of no keys is True")


def check_wait_existing(h, p):
    s = client(h, p)
    s.set("we/a", "1")
    s.add("we/b", 1)
    t0 = time.monotonic()
    s.wait(["we/a"])
    s.wait(["we/a", "we/b"])
    s.wait(["we/a", "we/b"], timedelta(seconds=5))
    s.wait([])
    expect(time.monotonic() - t0 < 2.0, "wait on existing keys must return immediately")


def check_wait_timeout_then_reuse(h, p):
    s = client(h, p)
    other = client(h, p)
    s.set("wt/x", "before")
    expect_timeout(lambda: s.wait(["wt/missing"], SHORT), "wait(missing, 500ms)")
    # the SAME store object must still be usable
    eq(s.get("wt/x"), b"before", "get after wait timeout")
    s.set("wt/y", "after")
    eq(s.get("wt/y"), b"after", "set/get after wait timeout")
    eq(s.add("wt/c", 1), 1, "add after wait timeout")
    s.wait(["wt/x"], timedelta(seconds=5))
    # Now the key that was waited for appears: a server that did not cancel the wait
    # would send a stray STOP_WAITING byte, desynchronising the next replies.
    other.set("wt/missing", "now")
    time.sleep(0.3)
    eq(s.add("wt/c", 1), 2, "add after the timed-out key was set by another client")
    eq(s.get("wt/missing"), b"now", "get of the formerly missing key")
    # several timeouts in a row, incl. multi-key waits with one key present
    expect_timeout(lambda: s.wait(["wt/m2"], SHORT), "second wait timeout")
    expect_timeout(lambda: s.wait(["wt/x", "wt/m3"], SHORT), "multi-key wait timeout")
    other.set("wt/m2", "1")
    other.set("wt/m3", "1")
    time.sleep(0.3)
    eq(s.add("wt/c", 5), 7, "add after several timeouts")
    # get() = WAIT + GET on the store timeout
    s.set_timeout(SHORT)
    expect_timeout(lambda: s.get("wt/never"), "get(missing) with 500 ms store timeout")
    s.set_timeout(CLIENT_TIMEOUT)
    eq(s.get("wt/y"), b"after", "get after get() timeout")
    eq(s.compare_set("wt/y", "after", "x"), b"x", "compare_set after timeouts")
    expect(s.check(["wt/y"]), "check after timeouts")


def check_wait_other_client(h, p):
    a, b = client(h, p), client(h, p)
    t0 = time.monotonic()
    w = Bg(a.wait, ["wo/late"])
    time.sleep(0.5)
    expect(not w.done.is_set(), "wait returned before the key was set")
    b.set("wo/late", "1")
    w.join()
    dt = time.monotonic() - t0
    expect(dt < 5.0, f"wait woken too late ({dt:.2f} s)")
    eq(a.get("wo/late"), b"1", "get after woken wait")

    # multi-key wait: only returns once both keys exist
    w = Bg(a.wait, ["wo/k1", "wo/k2"])
    time.sleep(0.3)
    b.set("wo/k1", "1")
    time.sleep(0.5)
    expect(not w.done.is_set(), "multi-key wait returned with only one key set")
    b.add("wo/k2", 3)
    w.join()

    # two waiters (two connections) on the same key are both woken by one set
    c = client(h, p)
    w1 = Bg(a.wait, ["wo/both"])
    w2 = Bg(c.wait, ["wo/both"])
    time.sleep(0.5)
    b.set("wo/both", "x")
    w1.join()
    w2.join()

    # get() blocked on a missing key is woken by another client's set
    g = Bg(a.get, "wo/get")
    time.sleep(0.3)
    b.set("wo/get", b"\x01\x02")
    eq(g.join(), b"\x01\x02", "blocking get woken by another client")

    # a waiter woken by append / multi_set / compare_set-create
    w = Bg(a.wait, ["wo/app"])
    time.sleep(0.3)
    b.append("wo/app", "z")
    w.join()
    w = Bg(a.wait, ["wo/ms1", "wo/ms2"])
    time.sleep(0.3)
    b.multi_set(["wo/ms1", "wo/ms2"], ["1", "2"])
    w.join()
    w = Bg(a.wait, ["wo/cas"])
    time.sleep(0.3)
    b.compare_set("wo/cas", "", "created")
    w.join()
    # and the waiting connection is still in sync afterwards
    eq(a.add("wo/ctr", 1), 1, "add on the woken connection")


def check_disconnected_waiter(h, p):
    # A raw connection registers a WAIT and disappears (like a killed worker).
    with socket.create_connection((h, p), timeout=10) as raw:
        raw.sendall(struct.pack("<BI", 0, 0x3C85F7CE))
        key = b"/dw/gone"
        raw.sendall(struct.pack("<BQQ", 6, 1, len(key)) + key)
        time.sleep(0.3)
    time.sleep(0.3)
    s = client(h, p)
    s.set("dw/gone", "x")  # server must not trip over the dead waiter
    time.sleep(0.3)
    eq(client(h, p).get("dw/gone"), b"x", "server alive after a waiter disconnected")
    eq(s.add("dw/c", 2), 2, "setter connection still in sync")


def check_delete_num_keys(h, p):
    s = client(h, p)
    n0 = s.num_keys()
    expect(isinstance(n0, int) and n0 >= 0, f"num_keys returned {n0!r}")
    s.set("dn/a", "1")
    s.set("dn/b", "2")
    s.add("dn/c", 1)
    eq(s.num_keys(), n0 + 3, "num_keys after 3 new keys")
    s.set("dn/a", "overwrite")
    eq(s.num_keys(), n0 + 3, "num_keys after overwrite")
    eq(s.delete_key("dn/a"), True, "delete existing key")
    eq(s.delete_key("dn/a"), False, "delete already deleted key")
    eq(s.delete_key("dn/never"), False, "delete missing key")
    expect(not s.check(["dn/a"]), "deleted key must be gone for check()")
    eq(s.num_keys(), n0 + 2, "num_keys after delete")
    s.set("dn/a", "again")
    eq(s.get("dn/a"), b"again", "re-set after delete")
    # a wait on a deleted key blocks again
    s.delete_key("dn/b")
    expect_timeout(lambda: s.wait(["dn/b"], SHORT), "wait on deleted key")
    eq(s.num_keys(), n0 + 2, "num_keys after delete + re-set")


def check_append(h, p):
    s = client(h, p)
    s.append("ap/k", "ab")
    eq(s.get("ap/k"), b"ab", "append to missing key creates it")
    s.append("ap/k", b"\x00\xff")
    s.append("ap/k", "")
    s.append("ap/k", "cd")
    eq(s.get("ap/k"), b"ab\x00\xffcd", "appended value")
    s.set("ap/n", "1")
    s.append("ap/n", "2")
    eq(s.add("ap/n", 1), 13, "add on appended decimal text")


def check_multi(h, p):
    s = client(h, p)
    s.multi_set(["mu/a", "mu/b", "mu/c"], ["1", b"\x00\x02", ""])
    eq(s.get("mu/a"), b"1", "multi_set a")
    eq(s.get("mu/b"), b"\x00\x02", "multi_set b")
    eq(s.get("mu/c"), b"", "multi_set c (empty)")
    s.set("mu/d", "dd")
    eq(s.multi_get(["mu/d", "mu/a", "mu/b", "mu/c", "mu/a"]),
       [b"dd", b"1", b"\x00\x02", b"", b"1"], "multi_get order/duplicates")
    eq(s.multi_get([]), [], "multi_get of no keys")
    s.multi_set(["mu/a", "mu/a"], ["x", "y"])
    eq(s.get("mu/a"), b"y", "multi_set duplicate key: last wins")
    s.multi_set([], [])
    # multi_get waits for missing keys
    other = client(h, p)
    g = Bg(s.multi_get, ["mu/a", "mu/late"])
    time.sleep(0.3)
    other.set("mu/late", "L")
    eq(g.join(), [b"y", b"L"], "multi_get woken by another client")
    s.set_timeout(SHORT)
    expect_timeout(lambda: s.multi_get(["mu/a", "mu/nope"]), "multi_get with a missing key")
    s.set_timeout(CLIENT_TIMEOUT)
    eq(s.multi_get(["mu/d"]), [b"dd"], "multi_get after timeout")


def check_queues(h, p):
    s, b = client(h, p), client(h, p)
    eq(s.queue_len("q/unknown"), 0, "queue_len of unknown queue")
    try:
        s.queue_pop("q/unknown", block=False)
        raise CheckFailed("non-blocking pop of an empty queue did not raise")
    except dist.QueueEmptyError:
        pass
    for v in (b"one", b"\x00two", b""):
        s.queue_push("q/a", v)
    eq(s.queue_len("q/a"), 3, "queue_len after 3 pushes")
    eq(s.queue_pop("q/a"), b"one", "FIFO pop 1 (blocking pop, queue non-empty)")
    eq(s.queue_pop("q/a", block=False), b"\x00two", "FIFO pop 2 (non-blocking)")
    eq(s.queue_len("q/a"), 1, "queue_len after 2 pops")
    eq(s.queue_pop("q/a"), b"", "FIFO pop 3 (empty payload)")
    eq(s.queue_len("q/a"), 0, "queue_len after draining")
    try:
        s.queue_pop("q/a", block=False)
        raise CheckFailed("non-blocking pop of a drained queue did not raise")
    except dist.QueueEmptyError:
        pass

    # blocking pop woken by a push from another client
    t0 = time.monotonic()
    pop = Bg(s.queue_pop, "q/block")
    time.sleep(0.5)
    expect(not pop.done.is_set(), "blocking pop returned on an empty queue")
    b.queue_push("q/block", b"wake")
    eq(pop.join(), b"wake", "blocking pop woken by another client's push")
    expect(time.monotonic() - t0 < 5.0, "blocking pop woken too late")
    eq(s.queue_len("q/block"), 0, "queue empty after woken pop")

    # two blocked poppers on two connections: each push delivers to exactly one
    c = client(h, p)
    p1 = Bg(s.queue_pop, "q/two")
    p2 = Bg(c.queue_pop, "q/two")
    time.sleep(0.5)
    b.queue_push("q/two", "first")
    time.sleep(0.5)
    b.queue_push("q/two", "second")
    got = sorted([p1.join(), p2.join()])
    eq(got, [b"first", b"second"], "two blocked poppers each got one value")
    eq(b.queue_len("q/two"), 0, "queue empty after two pops")

    # blocking pop timeout; then the same connection still works
    s.set_timeout(SHORT)
    expect_timeout(lambda: s.queue_pop("q/empty"), "blocking pop on empty queue")
    s.set_timeout(CLIENT_TIMEOUT)
    b.queue_push("q/empty", "late")  # must not produce a stray reply on s
    time.sleep(0.3)
    eq(s.queue_len("q/empty"), 1, "queue_len after pop timeout")
    eq(s.queue_pop("q/empty"), b"late", "pop after pop timeout")
    eq(s.add("q/ctr", 1), 1, "add after queue ops")


def check_list_keys(h, p):
    s = client(h, p)
    s.set("lk/a", "1")
    s.add("lk/b", 1)
    s.append("lk/c", "x")
    s.set("lk/d", "x")
    s.delete_key("lk/d")
    s.queue_push("lk/q", "x")
    keys = s.list_keys()
    expect(isinstance(keys, list), f"list_keys returned {type(keys).__name__}")
    ks = set(keys)
    expect(len(ks) == len(keys), f"list_keys returned duplicates: {keys}")
    for k in ("lk/a", "lk/b", "lk/c"):
        expect(k in ks, f"list_keys misses {k!r} (got {len(keys)} keys)")
    expect("lk/d" not in ks, "list_keys still lists a deleted key")
    expect(all(isinstance(k, str) for k in keys), "list_keys must return str")
    log(f"list_keys: {len(keys)} keys; queue name listed: {'lk/q' in ks}; "
        f"'init/' hidden: {'init/' not in ks and 'init' not in ks}")


def check_barrier(h, p):
    a, b, c = client(h, p), client(h, p), client(h, p)
    a.barrier("bar/one", 1)
    t0 = time.monotonic()
    w = Bg(a.barrier, "bar/two", 2)
    time.sleep(0.5)
    expect(not w.done.is_set(), "barrier(2) returned with only one participant")
    b.barrier("bar/two", 2)
    w.join()
    expect(time.monotonic() - t0 < 5.0, "barrier took too long")
    c.barrier("bar/two", 2)  # late arrival after completion returns immediately
    # three-way barrier with explicit timeout
    w1 = Bg(a.barrier, "bar/three", 3, timedelta(seconds=10))
    w2 = Bg(b.barrier, "bar/three", 3, timedelta(seconds=10))
    time.sleep(0.3)
    c.barrier("bar/three", 3, timedelta(seconds=10))
    w1.join()
    w2.join()
    # timeout, then the same store still works
    expect_timeout(lambda: a.barrier("bar/lonely", 2, SHORT), "barrier timeout", kind="barrier")
    eq(a.add("bar/ctr", 1), 1, "add after barrier timeout")
    eq(a.get("bar/one"), b"1", "barrier counter stored as decimal text")


def check_concurrent_adds(h, p):
    n_clients, n_adds = 16, 50
    stores = [client(h, p) for _ in range(n_clients)]
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
    expect(not any(t.is_alive() for t in ts), "concurrent adds did not finish in 60 s")
    expect(not errs, f"concurrent add failed: {errs[:1]}")
    eq(stores[0].add("cc/ctr", 0), n_clients * n_adds, "counter after concurrent adds")


def check_world_size(h, p):
    # Fresh server: a client constructed with world_size=N (wait_for_workers=True, the
    # default) ADDs the un-prefixed key "init/" by 1; pure clients do not wait for N.
    t0 = time.monotonic()
    a = client(h, p, world_size=2)
    expect(time.monotonic() - t0 < 5.0, "a non-master client with world_size=2 must not wait")
    eq(raw_add(h, p, b"init/", 0), 1, "'init/' counter after first world_size=2 client")
    b = client(h, p, world_size=2)
    eq(raw_add(h, p, b"init/", 0), 2, "'init/' counter after second world_size=2 client")
    nk = a.num_keys()
    a.set("ws/k", "v")
    eq(b.get("ws/k"), b"v", "set/get across the two world_size clients")
    eq(a.num_keys(), nk + 1, "num_keys (includes 'init/')")
    client(h, p)  # world_size=None adds nothing
    eq(raw_add(h, p, b"init/", 0), 2, "'init/' unchanged by a client without world_size")
    if hasattr(a, "list_keys"):
        expect("init/" not in a.list_keys(), "list_keys must hide the un-prefixed 'init/'")


def check_port_taken(binary, h, p):
    proc = store_server.spawn([binary, "--host", h, "--port", str(p)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              stdin=subprocess.DEVNULL)
    try:
        out, err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        store_server._kill(proc)
        raise CheckFailed(f"second server on taken port {p} still running after 20 s")
    eq(proc.returncode, 2, f"exit code of a second server on taken port {p} "
                           f"(stdout={out[-200:]!r}, stderr={err[-300:]!r})")


def check_ipv6(binary):
    with running_store(binary, host="::1") as (h6, p6):
        eq(h6, "::1", "printed IPv6 host")
        s = client("::1", p6)
        s.set("v6/k", b"\x00six")
        eq(s.get("v6/k"), b"\x00six", "IPv6 set/get")
        eq(s.add("v6/c", 7), 7, "IPv6 add")
        eq(client("::1", p6).get("v6/c"), b"7", "IPv6 second client")


# ----------------------------------------------------------------------------- driver
def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    binary = os.path.abspath(sys.argv[1])
    if not os.access(binary, os.X_OK):
        print(f"FAIL: {binary} is not an executable file", file=sys.stderr)
        return 2
    store_server.install_watchdog(TOTAL_TIMEOUT_S, "test_python_client")
    log(f"torch {torch.__version__}")

    results = []  # (name, status, detail)

    def run(name, fn, *args):
        t0 = time.monotonic()
        try:
            fn(*args)
        except BaseException as e:  # noqa: BLE001
            if isinstance(e, KeyboardInterrupt):
                raise
            detail = f"{type(e).__name__}: {e}"
            if not isinstance(e, CheckFailed):
                detail += "\n" + traceback.format_exc()
            results.append((name, "FAIL", detail))
            print(f"FAIL {name}: {detail}", flush=True)
            return
        results.append((name, "PASS", ""))
        print(f"PASS {name} ({time.monotonic() - t0:.2f} s)", flush=True)

    def skip(name, why):
        results.append((name, "SKIP", why))
        print(f"SKIP {name}: {why}", flush=True)

    has_queues = all(hasattr(dist.TCPStore, m) for m in ("queue_push", "queue_pop", "queue_len"))
    has_list_keys = hasattr(dist.TCPStore, "list_keys")
    has_barrier = hasattr(dist.TCPStore, "barrier")

    def main_server():
        with running_store(binary) as (h, p):
            run("set_get", check_set_get, h, p)
            run("add", check_add, h, p)
            run("compare_set", check_compare_set, h, p)
            run("check", check_check, h, p)
            run("wait_existing", check_wait_existing, h, p)
            run("wait_timeout_then_reuse", check_wait_timeout_then_reuse, h, p)
            run("wait_woken_by_other_client", check_wait_other_client, h, p)
            run("disconnected_waiter", check_disconnected_waiter, h, p)
            run("delete_key_num_keys", check_delete_num_keys, h, p)
            run("append", check_append, h, p)
            run("multi_get_multi_set", check_multi, h, p)
            if has_queues:
                run("queues", check_queues, h, p)
            else:
                skip("queues", f"torch {torch.__version__} TCPStore has no queue_* methods")
            if has_list_keys:
                run("list_keys", check_list_keys, h, p)
            else:
                skip("list_keys", f"torch {torch.__version__} TCPStore has no list_keys")
            if has_barrier:
                run("barrier", check_barrier, h, p)
            else:
                skip("barrier", f"torch {torch.__version__} TCPStore has no barrier")
            run("concurrent_adds", check_concurrent_adds, h, p)
            run("port_taken_exit_2", check_port_taken, binary, h, p)
            # final sanity: server still answers after everything above
            run("still_alive", lambda: eq(client(h, p).add("final", 1), 1, "final add"))

    def ws_server():
        with running_store(binary) as (h, p):
            run("world_size_2_init_key", check_world_size, h, p)

    run("server_lifecycle_main", main_server)
    run("server_lifecycle_world_size", ws_server)
    if store_server.ipv6_loopback_available():
        run("ipv6", check_ipv6, binary)
    else:
        skip("ipv6", "[::1] not usable on this machine")

    fails = [r for r in results if r[1] == "FAIL"]
    skips = [r for r in results if r[1] == "SKIP"]
    print(f"\n{len(results) - len(fails) - len(skips)} passed, {len(fails)} failed, "
          f"{len(skips)} skipped" + (f" (skipped: {', '.join(r[0] for r in skips)})" if skips else ""))
    if fails:
        print("FAILED: " + ", ".join(r[0] for r in fails))
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    rc = 1
    try:
        rc = main()
    except BaseException:  # noqa: BLE001
        traceback.print_exc()
        print("FAIL: unexpected error in the test driver", flush=True)
    finally:
        store_server.kill_all()
    sys.stdout.flush()
    sys.stderr.flush()
    # os._exit: do not hang in interpreter shutdown on a stuck daemon thread / TCPStore dtor
    os._exit(rc)
