"""`ddplaunch --dump_stacks` without flags finds a running job through this user's job registry
(launcher/status/job_registry.hpp), through the real ddplaunch binary:

  * a default single-node job (a free port) says at start where its store is, and --dump_stacks
    with no flags answers with both ranks' stacks; the record goes when the launcher exits;
  * with two jobs started in the caller's directory it asks neither: it lists both with the flags
    that choose each (which work) and exits 2;
  * jobs registered under other XDG_RUNTIME_DIR values than the caller's (sudo, docker exec, cron)
    are found; the one started in the caller's directory is asked, and with none there the
    caller lists them and exits 2;
  * a launcher killed with SIGKILL leaves its record, which is ignored and removed;
  * no job: one line, exit 1; a job with a secret: the secret is still needed, and said so;
  * a registry directory others may write: one warning naming the flags that reach the job, which
    runs unregistered;
  * the dry run says the port is chosen at start.

Each test has its own registry (XDG_RUNTIME_DIR in its temporary directory) and its own working
directory. A launcher also registers in /tmp/ddplaunch-<uid>/jobs, where the jobs of other tests
of this user are too: a test that needs to see none runs the caller with a private one
(PRIVATE_REGISTRY, a mount namespace).

    pytest test_stacks_discovery.py --ddplaunch=/path/to/ddplaunch
"""
import json
import os
import re
import signal
import time

import pytest

from launches import PRIVATE_REGISTRY, Launches

pytestmark = pytest.mark.timeout(180)

SLEEPER = '#!/bin/bash\necho $$ > "$PIDDIR/pid.$RANK.$TORCHELASTIC_RUN_ID"\nexec sleep 60\n'
STORE_LINE = re.compile(r"ddplaunch: job store on 127\.0\.0\.1:(\d+) \(ddplaunch --dump_stacks finds this job\)")
SECRET = "0123456789abcdef0123456789abcdef"
FALLBACK_JOBS = f"/tmp/ddplaunch-{os.geteuid()}/jobs"


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


def dump(lx, xdg, args=(), env=None, prefix=PRIVATE_REGISTRY):
    """`ddplaunch --dump_stacks ARGS` in lx's directory; xdg None: without XDG_RUNTIME_DIR. By
    default the caller sees no other test's job: /tmp/ddplaunch-<uid> (which every launcher also
    writes) is an empty one of its own; prefix=() for the tests of that shared place."""
    return lx.run(["--dump_stacks", *args], env={"XDG_RUNTIME_DIR": xdg and str(xdg), **(env or {})}, timeout=60,
                  prefix=prefix)


def worker_pids(lx, run_id):
    return [int(open(os.path.join(lx.dir, f"pid.{r}.{run_id}")).read()) for r in (0, 1)]


def stop(lx, p):
    p.send_signal(signal.SIGTERM)
    lx.communicate(p)


def test_a_default_job_says_its_port_and_dump_stacks_finds_it(lx, xdg):
    p, port, record = start_job(lx, xdg)
    assert port not in (0, 29500)
    assert record["hosts_store"] and not record["secret"] and record["nnodes"] == 1, record
    assert record["command"].endswith("sleeper.sh") and record["cwd"] == lx.dir, record
    assert oct(os.stat(jobs_dir(xdg)).st_mode & 0o777) == "0o700"
    rc, out, err = dump(lx, xdg)  # no other test's job beside it
    assert rc == 0, err
    assert "=== node 0 (" in out and "rank 0 (pid " in out and "rank 1 (pid " in out, out
    assert f"ddplaunch: asking job '{record['run_id']}' at 127.0.0.1:{port} (pid {p.pid}, started " in err, err
    assert p.poll() is None, "asking for stacks stopped the job"
    stop(lx, p)
    assert p.returncode == 143
    assert os.listdir(jobs_dir(xdg)) == [], "the record outlived its launcher"
    lx.assert_no_survivors()


def test_two_jobs_in_one_directory_are_listed_and_neither_is_asked(lx, xdg):
    first, port1, rec1 = start_job(lx, xdg)
    second, port2, rec2 = start_job(lx, xdg)
    rc, out, err = dump(lx, xdg)
    assert rc == 2 and out == "", err
    lines = err.splitlines()
    assert lines[0] == (f"ddplaunch: 2 ddplaunch jobs of this user run on this machine and several were started in "
                        f"{lx.dir}, so ddplaunch --dump_stacks asks none; choose one with the arguments below, or run "
                        "it in the job's directory"), err
    flags = {rec["run_id"]: f"--master_port {port} --rdzv_id {rec['run_id']}"
             for rec, port in ((rec1, port1), (rec2, port2))}
    for line, (rec, port, p) in zip(lines[1:], ((rec2, port2, second), (rec1, port1, first))):  # newest first
        assert line.startswith(f"ddplaunch: job '{rec['run_id']}' at 127.0.0.1:{port} (pid {p.pid}, started "), err
        assert line.endswith(f", in {lx.dir}); choose it with ddplaunch --dump_stacks {flags[rec['run_id']]}"), err
    assert len(lines) == 3, err
    # The flags listed choose each job.
    for rec in (rec1, rec2):
        rc, out, err = dump(lx, xdg, flags[rec["run_id"]].split())
        assert rc == 0, err
        assert all(f"(pid {pid})" in out for pid in worker_pids(lx, rec["run_id"])), out
    for p in (first, second):
        stop(lx, p)
    lx.assert_no_survivors()


def test_a_caller_with_another_xdg_runtime_dir_finds_the_job_of_its_directory(ddplaunch, procs, lx, tmp_path):
    """Issue 42: sudo, docker exec and cron give the caller another XDG_RUNTIME_DIR (or none)."""
    dirs = {name: tmp_path / name for name in ("b", "c", "xdg_a", "xdg_b", "xdg_c")}
    for d in dirs.values():
        d.mkdir(mode=0o700)
    lx_b, lx_c = (Launches(ddplaunch, procs, dirs[name]) for name in ("b", "c"))
    try:
        job_a, port_a, rec_a = start_job(lx, dirs["xdg_a"])  # in lx.dir
        job_b, port_b, rec_b = start_job(lx_b, dirs["xdg_b"])
        assert rec_a["cwd"] == lx.dir and rec_b["cwd"] == lx_b.dir
        for caller, xdg, job, rec in ((lx, dirs["xdg_c"], job_a, rec_a), (lx_b, None, job_b, rec_b)):
            rc, out, err = dump(caller, xdg, prefix=())
            assert rc == 0, err
            assert f"asking the one started in this directory: job '{rec['run_id']}' at " in err, err
            assert all(f"(pid {pid})" in out for pid in worker_pids(caller, rec["run_id"])), out
        # Started in neither directory: both listed (with whatever other job of this user runs), exit 2.
        rc, out, err = dump(lx_c, dirs["xdg_c"], prefix=())
        assert rc == 2 and out == "", err
        assert f"and none was started in {lx_c.dir}, so ddplaunch --dump_stacks asks none;" in err, err
        for rec, port in ((rec_a, port_a), (rec_b, port_b)):
            assert f"choose it with ddplaunch --dump_stacks --master_port {port} --rdzv_id {rec['run_id']}\n" in err
        for caller, p in ((lx, job_a), (lx_b, job_b)):
            stop(caller, p)
        assert not (dirs["xdg_a"] / "ddplaunch" / "jobs" / f"{job_a.pid}.json").exists()
        assert not os.path.exists(f"{FALLBACK_JOBS}/{job_b.pid}.json"), "the fallback record outlived its launcher"
        lx.assert_no_survivors()
        lx_b.assert_no_survivors()
    finally:
        lx_b.kill_workers()


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
    places = f"{jobs_dir(xdg)} and {FALLBACK_JOBS}"
    if os.path.isdir(f"/run/user/{os.geteuid()}"):
        places = f"{jobs_dir(xdg)}, /run/user/{os.geteuid()}/ddplaunch/jobs and {FALLBACK_JOBS}"
    assert err.splitlines() == [
        f"ddplaunch: no running ddplaunch job of this user on this machine (none in {places}); name a job on "
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
    # Its record went to the fallback alone.
    assert warnings[0] == (f"ddplaunch: job registry: {jobs_dir(xdg)} may be written by other users (mode 777); make "
                           f"it 0700; this job is registered in {FALLBACK_JOBS} only"), warnings
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
