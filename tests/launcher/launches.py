"""Running ddplaunch in a test's own directory (tests/launcher's suites share it)."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from pyfixtures import alive

TIMEOUT = 60

# A prefix for Launches.start/run: the launcher with an empty /tmp/ddplaunch-<uid> of its own, the
# job registry every launcher of this user also writes (launcher/status/job_registry.hpp), so that
# a caller of --dump_stacks or --status sees no other test's job there. A mount namespace; unshare
# and sh exec, so the pid stays the launcher's.
PRIVATE_REGISTRY = ("unshare", "--mount", "sh", "-c",
                    f'mkdir -p -m 700 /tmp/ddplaunch-{os.geteuid()} && '
                    f'mount -t tmpfs -o mode=700 tmpfs /tmp/ddplaunch-{os.geteuid()} && exec "$@"', "sh")

# A worker that dumps its environment to $PIDDIR/env.$RANK (read back with Launches.read_env).
ENV_DUMP = """#!/bin/bash
env -0 > "$PIDDIR/env.$RANK"
"""


class Launches:
    """Runs ddplaunch for one test in the test's own directory (also its PIDDIR); workers write
    their pid to PIDDIR/pid.* so the test can check that none survives the launcher."""

    def __init__(self, launcher, procs, directory):
        self.launcher = launcher
        self.procs = procs
        self.dir = str(directory)

    def script(self, name, body, mode=0o755):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(body)
        os.chmod(path, mode)
        return path

    def start(self, args, env=None, prefix=(), **kwargs):
        """`env` adds to the test's environment (a value None removes the variable); `prefix` runs
        the launcher through a command that execs it (its pid stays the launcher's)."""
        e = dict(os.environ)
        e.pop("OMP_NUM_THREADS", None)
        e.pop("CUDA_VISIBLE_DEVICES", None)
        e["PIDDIR"] = self.dir
        for name, value in (env or {}).items():
            if value is None:
                e.pop(name, None)
            else:
                e[name] = value
        return self.procs.start([*prefix, self.launcher] + args, env=e, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, cwd=self.dir, **kwargs)

    def communicate(self, p, timeout=TIMEOUT):
        try:
            return p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.procs.kill(p)
            out, err = p.communicate()
            pytest.fail(f"{p.args} did not finish within {timeout} s\nstdout:\n{out}\nstderr:\n{err}")

    def run(self, args, env=None, timeout=TIMEOUT, prefix=()):
        p = self.start(args, env, prefix)
        out, err = self.communicate(p, timeout)
        return p.returncode, out, err

    def pids(self):
        res = []
        for n in os.listdir(self.dir):
            if n.startswith("pid."):
                with open(os.path.join(self.dir, n)) as f:
                    t = f.read().strip()
                if t:
                    res.append(int(t))
        return res

    def wait_pids(self, n, timeout=20):
        end = time.time() + timeout
        while time.time() < end:
            if len(self.pids()) >= n:
                return
            time.sleep(0.05)  # no event for "a worker wrote its pid file" short of inotify
        pytest.fail(f"only {len(self.pids())} of {n} workers wrote their pid")

    def assert_no_survivors(self, timeout=5):
        end = time.time() + timeout
        while time.time() < end and any(alive(p) for p in self.pids()):
            time.sleep(0.05)  # no event tells us when a process we did not start exits
        left = [p for p in self.pids() if alive(p)]
        assert left == [], "worker processes survived the launcher"

    def kill_workers(self):
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass  # exited already, as it should have

    def read_env(self, name):
        env = {}
        with open(os.path.join(self.dir, name)) as f:
            for line in f.read().split("\0"):
                if "=" in line:
                    k, v = line.split("=", 1)
                    env[k] = v
        return env
