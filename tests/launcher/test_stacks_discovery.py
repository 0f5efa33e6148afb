"""`ddplaunch --dump_stacks` without flags finds a running job through this user's job registry
(launcher/status/job_registry.hpp), through the real ddplaunch binary:

  * a default single-node job (a free port) says at start where its store is, and --dump_stacks
    with no flags answers with both ranks' stacks; the record goes when the launcher exits;
  * with two jobs running it asks the one started last and names the other with the flags that
    choose it (which work);
  * a launcher killed with SIGKILL leaves its record, which is ignored and removed;
  * no job: one line, exit 1; a job with a secret: the secret is still needed, and said so;
  * a registry directory others may write: one warning naming the flags that reach the job, which
    runs unregistered;
  * the dry run says the port is chosen at start.

Each test has its own registry (XDG_RUNTIME_DIR in its temporary directory), so jobs of other
tests or users on the machine are never seen.

    pytest test_stacks_discovery.py --ddplaunch=/path/to/ddplaunch
"""
import json
import os
import re
import signal
import time

import pytest

from launches import Launches

pytestmark = pytest.mark.timeout(180)

SLEEPER = '#!/bin/bash\necho $$ > "$PIDDIR/pid.$RANK.$TORCHELASTIC_RUN_ID"\nexec sleep 60\n'
STORE_LINE = re.compile(r"ddplaunch: job store on 127\.0\.0\.1:(\d+) \(ddplaunch --dump_stacks finds this job\)")
SECRET = "0123456789abcdef0123456789abcdef"


@pytest.fixture
def lx(ddplaunch, procs, tmp_path):
    launches = Launches(ddplaunch, procs, tmp_path)
    yield launches
    launches.kill_workers()  # procs' teardown kills the launchers and everything they started


@pytest.fixture
def xdg(tmp_path):
    d = tmp_path / "xdg"
    d.mkdir(mode=0o700)
    return d


def jobs_dir(xdg):
    return xdg / "ddplaunch" / "jobs"


def start_job(lx, xdg, extra_env=None):
    """Starts a default single-node job of two sleeping workers; returns (process, store port,
    its registry record) once it has said where its store is."""
    prog = lx.script("sleeper.sh", SLEEPER)
    env = {"XDG_RUNTIME_DIR": str(xdg), **(extra_env or {})}
    env.pop("MASTER_PORT", None)
    p = lx.start(["--nproc_per_node", "2", prog], env=env)
    seen = []
    for line in p.stderr:  # the line comes right after the workers start; the test's timeout bounds it
        seen.append(line)
        m = STORE_LINE.match(line)
        if m:
            port = int(m.group(1))
            return p, port, wait_record(xdg, p, port)
    pytest.fail(f"no store line; the launcher ended ({p.wait()}):\n{''.join(seen)}")


def wait_record(xdg, p, port):
    """The job's record, written a second after its workers started."""
    path = jobs_dir(xdg) / f"{p.pid}.json"
    deadline = time.monotonic() + 20
    while not path.exists():
        assert time.monotonic() < deadline and p.poll() is None, f"no record at {path}"
        time.sleep(0.05)  # no event for "a file appeared" short of inotify
    record = json.loads(path.read_text())
    assert record["port"] == port and record["pid"] == p.pid, record
    return record


def dump(lx, xdg, args=(), env=None):
    return lx.run(["--dump_stacks", *args], env={"XDG_RUNTIME_DIR": str(xdg), **(env or {})}, timeout=60)


def stop(lx, p):
    p.send_signal(signal.SIGTERM)
    lx.communicate(p)


def test_a_default_job_says_its_port_and_dump_stacks_finds_it(lx, xdg):
    p, port, record = start_job(lx, xdg)
    assert port not in (0, 29500)
    assert record["hosts_store"] and not record["secret"] and record["nnodes"] == 1, record
    assert record["command"].endswith("sleeper.sh") and record["cwd"] == lx.dir, record
    assert oct(os.stat(jobs_dir(xdg)).st_mode & 0o777) == "0o700"
    rc, out, err = dump(lx, xdg)
    assert rc == 0, err
    assert "=== node 0 (" in out and "rank 0 (pid " in out and "rank 1 (pid " in out, out
    assert f"ddplaunch: asking job '{record['run_id']}' at 127.0.0.1:{port} (pid {p.pid}, started " in err, err
    assert p.poll() is None, "asking for stacks stopped the job"
    stop(lx, p)
    assert p.returncode == 143
    assert os.listdir(jobs_dir(xdg)) == [], "the record outlived its launcher"
    lx.assert_no_survivors()


def test_two_jobs_the_one_started_last_is_asked_and_the_other_named(lx, xdg):
    first, port1, rec1 = start_job(lx, xdg)
    second, port2, rec2 = start_job(lx, xdg)
    rc, out, err = dump(lx, xdg)
    assert rc == 0, err
    assert (f"ddplaunch: 2 jobs run on this machine; asking the one started last: job '{rec2['run_id']}' at "
            f"127.0.0.1:{port2} (pid {second.pid}, ") in err, err
    flags = f"--master_port {port1} --rdzv_id {rec1['run_id']}"
    assert f"ddplaunch: not asked: job '{rec1['run_id']}' at 127.0.0.1:{port1} (pid {first.pid}, " in err, err
    assert f"; ask it with ddplaunch --dump_stacks {flags}\n" in err, err
    # The stacks are the second job's workers', and the flags named choose the first.
    pids = {run: [int(open(os.path.join(lx.dir, f"pid.{r}.{run}")).read()) for r in (0, 1)]
            for run in (rec1["run_id"], rec2["run_id"])}
    assert all(f"(pid {pid})" in out for pid in pids[rec2["run_id"]]), out
    rc, out, err = dump(lx, xdg, flags.split())
    assert rc == 0, err
    assert all(f"(pid {pid})" in out for pid in pids[rec1["run_id"]]), out
    for p in (first, second):
        stop(lx, p)
    lx.assert_no_survivors()


def test_a_killed_launchers_record_is_ignored_and_removed(lx, xdg):
    p, port, record = start_job(lx, xdg)
    os.kill(p.pid, signal.SIGKILL)  # the launcher alone; the job's reaper ends its workers
    p.wait()
    assert os.listdir(jobs_dir(xdg)) == [f"{p.pid}.json"], "SIGKILL runs no clean-up: the record stays"
    rc, out, err = dump(lx, xdg)
    assert rc == 1, err
    assert "no running ddplaunch job of this user on this machine" in err, err
    assert os.listdir(jobs_dir(xdg)) == []
    lx.assert_no_survivors()


def test_no_job_is_one_line_and_exit_1(lx, xdg):
    rc, out, err = dump(lx, xdg)
    assert rc == 1
    assert out == ""
    assert err.splitlines() == [
        f"ddplaunch: no running ddplaunch job of this user on this machine (none in {jobs_dir(xdg)}); name a job on "
        "another machine with --master_addr, --master_port and --rdzv_id"]


def test_a_job_with_a_secret_still_needs_it(lx, xdg):
    p, port, record = start_job(lx, xdg, {"DDPLAUNCH_RDZV_TOKEN": SECRET})
    assert record["secret"] is True and SECRET not in (jobs_dir(xdg) / f"{p.pid}.json").read_text()
    rc, out, err = dump(lx, xdg)
    assert rc == 1
    assert (f"ddplaunch: the job '{record['run_id']}' has a job secret; give --dump_stacks the same one, as its "
            "launchers got it (DDPLAUNCH_RDZV_TOKEN or --rdzv_conf token_file)") in err, err
    rc, out, err = dump(lx, xdg, env={"DDPLAUNCH_RDZV_TOKEN": SECRET})
    assert rc == 0, err
    assert "rank 0 (pid " in out and "rank 1 (pid " in out, out
    stop(lx, p)
    lx.assert_no_survivors()


def test_a_registry_others_may_write_is_refused_and_the_job_runs(lx, xdg):
    jobs_dir(xdg).mkdir(parents=True, mode=0o700)
    os.chmod(jobs_dir(xdg), 0o777)
    prog = lx.script("short.sh", "#!/bin/bash\nsleep 2\n")  # outlives the registration's second
    rc, out, err = lx.run(["--nproc_per_node", "2", prog], env={"XDG_RUNTIME_DIR": str(xdg)})
    assert rc == 0, err
    port = int(re.search(r"ddplaunch: job store on 127\.0\.0\.1:(\d+) \(ddplaunch --dump_stacks finds this job\)",
                         err).group(1))
    warnings = [line for line in err.splitlines() if "job registry" in line]
    assert len(warnings) == 1, err
    assert re.fullmatch(rf"ddplaunch: job registry: {jobs_dir(xdg)} may be written by other users \(mode 777\); make it "
                        rf"0700; this job is not registered, ddplaunch --dump_stacks --master_port {port} --rdzv_id "
                        r"\w+ reaches it", warnings[0]), warnings
    assert os.listdir(jobs_dir(xdg)) == []


def test_the_dry_run_says_the_port_is_chosen_at_start(lx, xdg):
    rc, out, err = lx.run(["--dry-run", "--nproc_per_node", "2", "--no_python", "true"],
                          env={"XDG_RUNTIME_DIR": str(xdg)})
    assert rc == 0, err
    assert ("store: on 127.0.0.1, at a free port chosen at start (MASTER_PORT=0 below stands for it); the launcher "
            "prints it then ('job store on 127.0.0.1:PORT'), and ddplaunch --dump_stacks without flags finds the job "
            f"in {jobs_dir(xdg)}\n") in out, out
    rc, out, err = lx.run(["--dry-run", "--master_port", "29511", "--no_python", "true"],
                          env={"XDG_RUNTIME_DIR": str(xdg)})
    assert "store: on 127.0.0.1:29511, hosted by this launcher;" in out, out
