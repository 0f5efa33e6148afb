"""What `ddplaunch --dump_stacks` says when it cannot give Python lines, or any stack, once per
dump and not per rank (launcher/watch/stack_notes.hpp), through the real ddplaunch binary:

  * Python workers under --no_worker_server with no py-spy (neither beside the workers'
    interpreter nor on PATH): native stacks, and one note naming both causes and both fixes;
  * workers that may not be ptraced (not dumpable, the launcher unprivileged): one line per rank,
    one note naming the cause and the fix, no tool's raw "Operation not permitted", exit 1.

Each test ends its launcher by pid and checks that no worker is left.

    pytest test_stack_hints.py --ddplaunch=/path/to/ddplaunch
"""
import os
import re
import shutil
import subprocess
import tempfile
import time

import pytest

from launches import Launches
from pyfixtures import free_port

pytestmark = pytest.mark.timeout(180)

SYSTEM_PYTHON = "/usr/bin/python3"  # no py-spy beside it
# A Python worker without torch; NOT_DUMPABLE=1 makes it refuse ptrace (prctl(PR_SET_DUMPABLE, 0)).
SLEEPER = '''\
import ctypes, os, time
if os.environ.get("NOT_DUMPABLE") == "1":
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)
with open(os.path.join(os.environ["PIDDIR"], "pid.%s" % os.environ["RANK"]), "w") as f:
    f.write(str(os.getpid()))
time.sleep(120)
'''


@pytest.fixture
def home(procs):
    """A directory an unprivileged user can reach too (pytest's own is root's alone)."""
    d = tempfile.mkdtemp(prefix="stack-hints-", dir="/tmp")
    os.chmod(d, 0o777)
    launches = Launches(None, procs, d)
    yield d
    launches.kill_workers()
    shutil.rmtree(d, ignore_errors=True)


def dump(argv, env):
    """--dump_stacks until the job's watcher answers (it starts 1 s into the round)."""
    deadline = time.monotonic() + 60
    while True:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=90, env=env)
        if "no running job with run id" not in r.stderr or time.monotonic() > deadline:
            return r
        time.sleep(0.2)  # the watcher's key appears without an event the client could wait on


def run_job(ddplaunch, procs, home, prefix, extra_env):
    if not os.path.exists(SYSTEM_PYTHON):
        pytest.skip(f"needs {SYSTEM_PYTHON}")
    launches = Launches(ddplaunch, procs, home)
    prog = launches.script("sleeper.py", SLEEPER, mode=0o755)
    port = free_port()
    env = dict(os.environ, PIDDIR=home, XDG_RUNTIME_DIR=home, PYTHON_EXEC=SYSTEM_PYTHON, PATH="/usr/bin:/bin",
               **extra_env)
    env.pop("OMP_NUM_THREADS", None)
    job = procs.start(prefix + [ddplaunch, "--nproc_per_node=2", f"--master_port={port}", "--no_worker_server", prog],
                      env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=home)
    launches.wait_pids(2, timeout=60)
    return launches, job, env, port


def test_python_workers_without_a_server_or_py_spy_get_one_note(ddplaunch, procs, home):
    launches, job, env, port = run_job(ddplaunch, procs, home, [], {})
    try:
        r = dump([ddplaunch, "--dump_stacks", f"--master_port={port}"], env)
        assert r.returncode == 0, r.stderr
        assert "rank 0 (pid " in r.stdout and "rank 1 (pid " in r.stdout, r.stdout
        note = ("note: no Python lines for ranks 0-1 (2 ranks): the job runs with --no_worker_server and py-spy is "
                f"not installed (not beside {SYSTEM_PYTHON}, nor on PATH); drop --no_worker_server, or pip install "
                "py-spy into the workers' environment\n")
        assert r.stdout.count(note) == 1, r.stdout
        assert r.stdout.count("note: ") == 1, r.stdout
        # Python workers publish no collective progress: nothing said about it.
        assert "publishes no progress" not in r.stdout and "collective progress:" not in r.stdout, r.stdout
    finally:
        procs.stop(job, 30)
    launches.assert_no_survivors()


def test_workers_that_refuse_ptrace_give_one_line_each_and_one_cause(ddplaunch, procs, home):
    if os.geteuid() != 0:
        pytest.skip("needs root to drop to an unprivileged user")
    unprivileged = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"]
    launches, job, env, port = run_job(ddplaunch, procs, home, unprivileged, {"NOT_DUMPABLE": "1"})
    try:
        r = dump(unprivileged + [ddplaunch, "--dump_stacks", f"--master_port={port}"], env)
        assert r.returncode == 1, (r.stdout, r.stderr)
        assert len(re.findall(r"rank \d \(pid \d+\):\nno stack: (eu-stack|gdb|py-spy) may not ptrace it "
                              r"\(see the note below\)\n", r.stdout)) == 2, r.stdout
        assert re.search(r"^note: ranks 0-1 \(2 ranks\) could not be read: (eu-stack|gdb|py-spy) may not ptrace "
                         r"them: the worker is not dumpable \(it called prctl\(PR_SET_DUMPABLE, 0\) or changed its "
                         r"user\); let Python workers answer themselves \(without --no_worker_server\), or run "
                         r"ddplaunch as root$", r.stdout, re.M), r.stdout
        assert r.stdout.count("note: ") == 1, r.stdout
        assert "Operation not permitted" not in r.stdout and "Permission denied" not in r.stdout, r.stdout
        assert "ddplaunch: no stack of any of the 2 rank(s) could be read; the note under them says why" in r.stderr, \
            r.stderr
        assert job.poll() is None, "asking for stacks stopped the job"
    finally:
        procs.stop(job, 30)
    launches.assert_no_survivors()
