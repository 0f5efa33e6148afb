"""No log line lost unseen (issue 11), through the real binary:

  * --log_dir on a full disk (a 64 KiB tmpfs) with -r 3: the failure is reported once, naming the
    file and the error; every line that missed its file reaches the console; the run ends with
    "log files incomplete: N line(s) not written to DIR (error)" and the workers' exit code (0);
  * the same with -t 3 (the console has every line anyway);
  * a read-only --log_dir is refused at start (exit 2) naming the directory;
  * a second run with the same --log_dir gets its own <run_id>_<random> directory, printed at
    start, and the first run's logs stay.

Needs root for the tmpfs mounts (skipped otherwise).

    pytest test_logs.py --ddplaunch=/path/to/ddplaunch
"""
import os
import re
import subprocess

import pytest

TIMEOUT = 60
LINES = 3000

pytestmark = [pytest.mark.timeout(120), pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")]


@pytest.fixture
def spam(tmp_path):
    path = tmp_path / "spam.sh"
    path.write_text(f"#!/bin/bash\nfor i in $(seq {LINES}); do echo \"line $i of rank $RANK: filling the disk\"; done\n")
    path.chmod(0o755)
    return str(path)


@pytest.fixture
def tmpfs(tmp_path):
    """A directory on a fresh tmpfs of 64 KiB; `remount_ro()` makes it read-only."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], check=True)
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def run(ddplaunch, *args):
    return subprocess.run([ddplaunch, *args], capture_output=True, text=True, timeout=TIMEOUT)


def launcher_lines(err):
    return [line for line in err.splitlines() if line.startswith("ddplaunch:")]


@pytest.mark.parametrize("mode", ["-r", "-t"])
def test_a_full_disk_loses_no_line_unseen(ddplaunch, tmpfs, spam, mode):
    # The disk fills while the job runs: no floor for the health check before the round (issue 26).
    r = run(ddplaunch, "--nproc_per_node=2", f"--log_dir={tmpfs}", "--health_min_free_mb=0", mode, "3", spam)
    assert r.returncode == 0, r.stderr  # the workers' truth
    ours = launcher_lines(r.stderr)
    errors = [line for line in ours if "cannot write the log file" in line]
    assert len(errors) == 1, ours  # once, not per file or per line
    assert "No space left on device" in errors[0] and str(tmpfs) in errors[0]
    done = [line for line in ours if "log files incomplete" in line]
    assert len(done) == 1, ours
    lost = int(re.search(r"incomplete: (\d+) line", done[0]).group(1))
    assert lost > 0
    # Every line of both ranks is on the console or in its file.
    for rank in (0, 1):
        on_console = {line.split(":", 1)[1] for line in r.stdout.splitlines() if line.startswith(f"[{rank}]:")}
        in_file = set()
        for root, _, files in os.walk(tmpfs):
            if os.path.basename(root) == str(rank) and "stdout.log" in files:
                with open(os.path.join(root, "stdout.log")) as f:
                    in_file = {line.rstrip("\n") for line in f if line.endswith("\n")}
        expected = {f"line {i} of rank {rank}: filling the disk" for i in range(1, LINES + 1)}
        assert expected <= on_console | in_file, f"rank {rank}: {len(expected - on_console - in_file)} lines lost"


def test_a_read_only_log_dir_is_refused_at_start(ddplaunch, tmpfs, spam):
    subprocess.run(["mount", "-o", "remount,ro", str(tmpfs)], check=True)
    r = run(ddplaunch, f"--log_dir={tmpfs}", "-r", "3", spam)
    assert r.returncode == 2
    assert f"cannot create a log directory under {tmpfs}" in r.stderr and "Read-only" in r.stderr


def test_a_rerun_keeps_the_first_runs_logs(ddplaunch, tmp_path, spam):
    logs = tmp_path / "logs"
    dirs = []
    for _ in range(2):
        r = run(ddplaunch, "--rdzv_id=exp", f"--log_dir={logs}", "-r", "1", spam)
        assert r.returncode == 0, r.stderr
        dirs.append(re.search(r"ddplaunch: logs: (\S+)", r.stderr).group(1))
    assert dirs[0] != dirs[1]
    for d in dirs:
        assert os.path.basename(d).startswith("exp_")
        with open(os.path.join(d, "attempt_0", "0", "stdout.log")) as f:
            assert sum(1 for _ in f) == LINES
