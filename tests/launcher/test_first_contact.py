"""First contact as a torchrun user has it (issue 12), through the real ddplaunch binary:

  * two single-node jobs without --master_port run at the same time on one machine (each takes a
    free port and a random run id, as torchrun 2.15), and both succeed;
  * --local_rank_arg=dash hands a torch 2.x style script `--local-rank=i`; underscore (and the
    bare flag) `--local_rank=i`;
  * SIGUSR1 sent to ddplaunch reaches every worker and the launcher keeps running (exit 0);
  * the dry run names the interpreter and why it was chosen.

    pytest test_first_contact.py --ddplaunch=/path/to/ddplaunch
"""
import os
import signal
import subprocess
import sys
import textwrap

import pytest

TIMEOUT = 60
pytestmark = pytest.mark.timeout(120)


def script(tmp_path, name, body):
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    path.chmod(0o755)
    return str(path)


def test_two_single_node_jobs_at_once(ddplaunch, tmp_path):
    # Each worker of both jobs waits until all four have started, so the jobs truly overlap.
    prog = script(tmp_path, "w.sh", """\
        #!/bin/bash
        echo "$MASTER_PORT $TORCHELASTIC_RUN_ID" > "$DIR/$TORCHELASTIC_RUN_ID.$RANK"
        for _ in $(seq 200); do [ "$(ls "$DIR" | wc -l)" -ge 4 ] && exit 0; sleep 0.05; done
        exit 3
        """)
    out = tmp_path / "out"
    out.mkdir()
    env = dict(os.environ, DIR=str(out))
    env.pop("MASTER_PORT", None)
    jobs = [subprocess.Popen([ddplaunch, "--nproc_per_node=2", prog], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [j.communicate(timeout=TIMEOUT) for j in jobs]
    for j, (o, e) in zip(jobs, results):
        assert j.returncode == 0, e
    seen = {p.read_text().split()[0] + " " + p.read_text().split()[1] for p in out.iterdir()}
    assert len(seen) == 2, f"the two jobs shared a port or run id: {seen}"
    ports = {s.split()[0] for s in seen}
    assert len(ports) == 2 and "29500" not in ports and "0" not in ports


@pytest.mark.parametrize("flag,expected", [
    ("--local_rank_arg=dash", "--local-rank=1"),
    ("--local-rank-arg=underscore", "--local_rank=1"),
    ("--local_rank_arg", "--local_rank=1"),
])
def test_local_rank_argument(ddplaunch, tmp_path, flag, expected):
    # A script that defines only the spelling it expects, as torch 2.x examples do.
    dest = "local_rank"
    spelling = expected.split("=")[0]
    prog = script(tmp_path, "train.py", f"""\
        import argparse, os
        p = argparse.ArgumentParser()
        p.add_argument("{spelling}", dest="{dest}", type=int, required=True)
        a = p.parse_args()
        assert a.local_rank == int(os.environ["LOCAL_RANK"])
        print("ok", a.local_rank)
        """)
    r = subprocess.run([ddplaunch, "--nproc_per_node=2", flag, prog], env=dict(os.environ, PYTHON_EXEC=sys.executable),
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    assert "[1]:ok 1" in r.stdout and "[0]:ok 0" in r.stdout


def _comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def _ppid(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return -1


def test_usr1_reaches_the_workers_and_the_job_goes_on(ddplaunch, tmp_path):
    prog = script(tmp_path, "w.sh", """\
        #!/bin/bash
        trap 'echo "usr1 $RANK"; exit 0' USR1
        echo "ready $RANK"
        for _ in $(seq 600); do sleep 0.05; done
        exit 4
        """)
    p = subprocess.Popen([ddplaunch, "--nproc_per_node=2", prog], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    ready = set()
    while len(ready) < 2:  # both workers have installed their trap
        line = p.stdout.readline()
        assert line, "ddplaunch ended before its workers were ready"
        if "ready" in line:
            ready.add(line.split()[-1])
    # As `pkill -USR1 -f ddplaunch` or a batch system's signal to every process of the job would:
    # the launcher and its reaper (a fork of it, named ddplaunch-reap) both get it.
    reapers = [int(pid) for pid in os.listdir("/proc") if pid.isdigit() and _comm(pid) == "ddplaunch-reap"
               and _ppid(pid) == p.pid]
    for pid in reapers:
        os.kill(pid, signal.SIGUSR1)
    p.send_signal(signal.SIGUSR1)
    out, err = p.communicate(timeout=TIMEOUT)
    assert p.returncode == 0, err
    assert "usr1 0" in out and "usr1 1" in out
    assert "received SIGUSR1, forwarding it to the workers" in err
    assert "reaper process" not in err, err


@pytest.mark.parametrize("program", ["dir", "dir.py"])
def test_a_directory_as_the_program_says_so(ddplaunch, tmp_path, program):
    (tmp_path / program).mkdir()
    r = subprocess.run([ddplaunch, str(tmp_path / program)], env=dict(os.environ, PYTHON_EXEC=sys.executable),
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 2
    assert "is a directory" in r.stderr and str(tmp_path / program) in r.stderr


def test_nproc_per_node_above_the_cap_is_a_usage_error(ddplaunch):
    r = subprocess.run([ddplaunch, "--nproc_per_node=100000", "/bin/true"], capture_output=True, text=True,
                       timeout=TIMEOUT)
    assert r.returncode == 2
    assert "--nproc_per_node=100000 is not 1..4096" in r.stderr


def test_dry_run_names_the_interpreter(ddplaunch, tmp_path):
    prog = script(tmp_path, "t.py", "print('x')\n")
    env = dict(os.environ, PYTHON_EXEC="/opt/none/python")
    r = subprocess.run([ddplaunch, "--dry-run", prog], env=env, capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    assert "python: /opt/none/python ($PYTHON_EXEC)" in r.stdout
    assert "command: /opt/none/python -u " in r.stdout
