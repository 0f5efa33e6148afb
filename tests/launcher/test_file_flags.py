"""Flags that name a file (issue 41, items 4 and 5), through the real binary: for each of
--progress_file, --event_log, --summary_json, --log_dir, --rdzv_conf token_file and the etcd TLS
files, a FIFO, a directory (or, for --log_dir, a regular file) and /dev/zero exit 2 within
seconds, in one line naming the flag and the value, before any worker starts, and nothing is left
running. Before, a FIFO hung the launcher for ever (--progress_file, --event_log) or failed only
at the end (--summary_json). /dev/null and the launcher's own stderr stay usable outputs. Also
refused now: a rank given twice in --redirects, --active_nodes=0 with an elastic --nnodes. And a
worker that puts a FIFO where its error file goes (TORCHELASTIC_ERROR_FILE) no longer hangs the
launcher at the failure.

    pytest test_file_flags.py --ddplaunch=/path/to/ddplaunch
"""
import os

import pytest

pytestmark = pytest.mark.timeout(120)

# Each refusal comes at the start: no rendezvous, no worker, so a few seconds is plenty.
QUICK = 10

ETCD = ["--rdzv_backend=etcd-v3", "--rdzv_endpoint=127.0.0.1:1"]

# flag -> (the arguments that name PATH, what it should have been)
FLAGS = {
    "--progress_file": (["--max_no_progress_restarts=1", "--progress_file={}"], "a regular file"),
    "--event_log": (["--event_log={}"], "a regular file"),
    "--summary_json": (["--summary_json={}"], "a regular file"),
    "--log_dir": (["--log_dir={}"], "a directory"),
    "--rdzv_conf token_file": (["--rdzv_conf", "token_file={}"], "a regular file"),
    "--rdzv_conf cacert": (ETCD + ["--rdzv_conf", "cacert={}"], "a regular file"),
    "--rdzv_conf cert": (ETCD + ["--rdzv_conf", "cert={},key=/dev/null"], "a regular file"),
}


def refused_run(lx, procs, args):
    """Runs ddplaunch with `args` and a worker that marks that it ran; returns (code, stderr)."""
    ran = os.path.join(lx.dir, "ran")
    code, _, err = lx.run(args + ["--no_python", "touch", ran], timeout=QUICK)
    assert not os.path.exists(ran), "a worker started before the flag was refused:\n" + err
    procs.assert_no_survivors()
    return code, err


@pytest.mark.parametrize("kind", ["fifo", "wrong kind", "/dev/zero"])
@pytest.mark.parametrize("flag", sorted(FLAGS))
def test_a_file_flag_naming_a_fifo_a_directory_or_a_device_exits_2(lx, procs, flag, kind):
    template, expected = FLAGS[flag]
    if kind == "fifo":
        path = os.path.join(lx.dir, "fifo")
        os.mkfifo(path)
        what = "a FIFO"
    elif kind == "wrong kind" and expected == "a directory":
        path = lx.script("plain", "x\n", mode=0o644)
        what = "a regular file"
    elif kind == "wrong kind":
        path = os.path.join(lx.dir, "dir")
        os.mkdir(path)
        what = "a directory"
    else:
        path, what = "/dev/zero", "a character device"
    code, err = refused_run(lx, procs, [a.format(path) for a in template])
    assert code == 2, err
    lines = err.strip().splitlines()
    assert lines[-1].startswith(f"ddplaunch: {flag}={path} is {what}, not {expected}; give "), err
    assert len([line for line in lines if flag in line]) == 1, err


def test_an_event_log_fifo_with_a_reader_is_refused_too(lx, procs):
    # A reader makes the non-blocking open succeed: the opened descriptor is what is refused.
    fifo = os.path.join(lx.dir, "fifo")
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        code, err = refused_run(lx, procs, [f"--event_log={fifo}", f"--summary_json={fifo}"])
    finally:
        os.close(reader)
    assert code == 2, err
    assert f"--event_log={fifo} is a FIFO, not a regular file; give a regular file path" in err


def test_dev_null_and_the_launchers_own_stderr_are_outputs(lx, procs):
    code, _, err = lx.run(["--event_log=/dev/null", "--summary_json=/dev/null", "--no_python", "true"], timeout=60)
    assert code == 0, err
    # stderr is a pipe here (a FIFO): as the launcher's own stream it is allowed.
    code, _, err = lx.run(["--event_log=/dev/stderr", "--no_python", "true"], timeout=60)
    assert code == 0, err
    assert '"event":"job_ended"' in err
    procs.assert_no_survivors()


@pytest.mark.parametrize("args,message", [
    (["--redirects=0:1,0:2", "--nproc_per_node=1"],
     "--redirects=0:1,0:2 names local rank 0 twice; give each rank once (1 stdout, 2 stderr, 3 both)"),
    (["--nnodes=2:3", "--active_nodes=0"], "--active_nodes=0 is outside --nnodes=2:3; pick N with 2 <= N <= 3"),
])
def test_values_accepted_before_now_exit_2(lx, procs, args, message):
    code, err = refused_run(lx, procs, args)
    assert code == 2, err
    assert err.strip().splitlines()[-1] == "ddplaunch: " + message, err


def test_a_fifo_as_a_workers_error_file_does_not_hang_the_launcher(lx, procs):
    prog = lx.script("w.sh", '#!/bin/bash\nmkfifo "$TORCHELASTIC_ERROR_FILE"\nexit 3\n')
    code, _, err = lx.run(["--no_python", prog], timeout=30)
    assert code == 3, err
    assert "TORCHELASTIC_ERROR_FILE=" in err and "is a FIFO, not a regular file" in err, err
    procs.assert_no_survivors()


def test_a_fifo_where_a_later_attempts_log_file_goes_does_not_hang_the_launcher(lx, procs):
    # A worker can write the run directory: at attempt 0 it puts a FIFO where attempt 1's stderr
    # log goes, then fails. Opening that file used to block the launcher for ever at the restart.
    prog = lx.script("w.sh", """#!/bin/bash
if [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then
  next=$(echo "$LOGS"/*/)attempt_1/0/stderr.log  # the run's directory: the only one there
  mkdir -p "$(dirname "$next")" && mkfifo "$next"
  exit 1
fi
echo "second attempt" >&2
""")
    logs = os.path.join(lx.dir, "logs")
    code, _, err = lx.run(["--no_python", "--max_restarts=1", f"--log_dir={logs}", "--redirects=3", prog],
                          timeout=30, env=dict(os.environ, LOGS=logs))
    assert "stderr.log: a FIFO, not a file" in err, err
    assert "second attempt" in err, err  # its lines went to the console instead
    assert code == 0, err
    procs.assert_no_survivors()
