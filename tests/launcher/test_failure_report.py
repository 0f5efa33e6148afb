"""Saying exactly what went wrong (issue 13), through the real binary:

  * a Python worker whose @record-decorated main raises gets an error file without --log_dir; the
    summary prints the exception and the formatted traceback from it (not the raw JSON); the
    run's directory of error files is removed after a success;
  * a worker killed by the kernel's out-of-memory killer (a memory cgroup with a small limit,
    cgroup v2 memory.max or v1 memory.limit_in_bytes, whichever this machine has) is reported as
    such, with its memory at death, not as a bare SIGKILL.

    pytest test_failure_report.py --ddplaunch=/path/to/ddplaunch
"""
import glob
import os
import subprocess
import sys
import textwrap
import uuid

import pytest

TIMEOUT = 60
pytestmark = pytest.mark.timeout(120)


def run(ddplaunch, args, **kwargs):
    env = dict(os.environ, PYTHON_EXEC=sys.executable)
    return subprocess.run([ddplaunch, *args], capture_output=True, text=True, timeout=TIMEOUT, env=env, **kwargs)


def test_a_python_exception_is_shown_with_its_traceback(ddplaunch, tmp_path):
    prog = tmp_path / "train.py"
    prog.write_text(textwrap.dedent("""\
        import os
        from torch.distributed.elastic.multiprocessing.errors import record

        def load(batch):
            raise ValueError(f"bad batch {batch} on rank {os.environ['RANK']}")

        @record
        def main():
            load(7)

        main()
        """))
    r = run(ddplaunch, ["--nproc_per_node=2", str(prog)])
    assert r.returncode == 1, r.stderr
    assert "  error     : ValueError: bad batch 7 on rank " in r.stderr, r.stderr
    assert "  traceback :\n    Traceback (most recent call last):" in r.stderr, r.stderr
    assert 'in load\n        raise ValueError(f"bad batch {batch} on rank' in r.stderr, r.stderr
    assert '{"message"' not in r.stderr, "the raw JSON is on the screen"
    assert "error_file: /tmp/" in r.stderr


def test_error_files_are_removed_after_a_success(ddplaunch, tmp_path):
    prog = tmp_path / "ok.sh"
    prog.write_text('#!/bin/bash\necho "error file: $TORCHELASTIC_ERROR_FILE"\n')
    prog.chmod(0o755)
    run_id = "ef" + uuid.uuid4().hex[:8]
    r = run(ddplaunch, ["--nproc_per_node=2", f"--rdzv_id={run_id}", str(prog)])
    assert r.returncode == 0, r.stderr
    assert f"error file: /tmp/{run_id}_" in r.stdout, r.stdout
    assert glob.glob(f"/tmp/{run_id}_*") == [], "the error files' directory outlived a successful run"


def memory_cgroup(limit_bytes):
    """A new memory cgroup with `limit_bytes` (cgroup v2 where it has the memory controller, else
    v1); returns (directory, procs file) or skips."""
    name = f"ddp_oom_test_{os.getpid()}"
    v2 = "/sys/fs/cgroup"
    try:
        if "memory" in open(f"{v2}/cgroup.subtree_control").read().split():
            path = f"{v2}/{name}"
            os.mkdir(path)
            open(f"{path}/memory.max", "w").write(str(limit_bytes))
            open(f"{path}/memory.swap.max", "w").write("0")
            return path
    except OSError:
        pass
    own = [line.split(":", 2)[2].strip() for line in open("/proc/self/cgroup") if line.split(":")[1] == "memory"]
    v1 = f"/sys/fs/cgroup/memory{own[0] if own else ''}"
    try:
        path = f"{v1.rstrip('/')}/{name}"
        os.mkdir(path)
        open(f"{path}/memory.limit_in_bytes", "w").write(str(limit_bytes))
        return path
    except OSError as e:
        pytest.skip(f"no writable memory cgroup here ({e})")


def test_an_out_of_memory_kill_is_named(ddplaunch, tmp_path):
    cg = memory_cgroup(256 << 20)
    try:
        prog = tmp_path / "hog.sh"
        prog.write_text('#!/bin/bash\n[ "$RANK" = 1 ] && exec python3 -c "x = bytearray(2 << 30)"\nsleep 20\n')
        prog.chmod(0o755)
        env = dict(os.environ)
        r = subprocess.run(["bash", "-c", f'echo $$ > {cg}/cgroup.procs && exec "$@"', "bash", ddplaunch,
                            "--nproc_per_node=2", "--shutdown_timeout=2", str(prog)],
                           capture_output=True, text=True, timeout=TIMEOUT, env=env)
        assert r.returncode == 137, r.stderr
        assert "rank      : 1" in r.stderr, r.stderr
        assert "(died of SIGKILL: killed by the out-of-memory killer, anon-rss " in r.stderr or \
               "(died of SIGKILL: probably killed by the out-of-memory killer" in r.stderr, r.stderr
    finally:
        for _ in range(50):
            try:
                os.rmdir(cg)
                break
            except OSError:
                subprocess.run(["sleep", "0.1"])
