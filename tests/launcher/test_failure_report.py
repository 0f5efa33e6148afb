"""Saying exactly what went wrong (issue 13), through the real binary:

  * 8 ranks failing the same way give one root cause (the earliest by the error file's own
    timestamp, not the first exit seen) with one traceback, the others merged into one line, and
    the rank ddplaunch stopped listed apart; --summary_json and --event_log say the same as JSON,
    and either one into a missing directory is refused before any worker starts (exit 2);
  * a root rank whose last stderr lines came long before its exit (a warning at start) says how
    long before (the summary and --summary_json's stderr_quiet);
  * a Python worker whose @record-decorated main raises gets an error file without --log_dir; the
    summary prints the exception and the formatted traceback from it (not the raw JSON); the
    run's directory of error files is removed after a success;
  * with TORCHELASTIC_ENABLE_FILE_TIMER=1, an unmodified worker's expired
    torch.distributed.elastic.timer.expires() scope is reported with the stack py-spy takes, and
    only that worker is killed; the summary names the scope;
  * --hang_timeout: a SIGSTOPped rank of a gloo job is reported once as a suspected hang, with
    each rank's state and stacks (rank 0 waits in all_reduce); SIGTERM then ends the job at once;
  * --hang_timeout with the C++ example (the ddplaunch runtime publishes each collective in a
    shared-memory slot): a SIGSTOPped rank fails the job with exit 124 and a report naming the
    collective the others wait in and the rank that never entered it (the test harness stops a rank
    between collectives), on one node and across two;
  * `ddplaunch --dump_stacks` against a running 2-node job prints every rank's stack on both
    nodes and stops nothing;
  * a worker killed by the kernel's out-of-memory killer (a memory cgroup with a small limit,
    cgroup v2 memory.max or v1 memory.limit_in_bytes, whichever this machine has) is reported as
    such, with its memory at death, not as a bare SIGKILL.

    pytest test_failure_report.py --ddplaunch=/path/to/ddplaunch
"""
import glob
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import uuid

import pytest

from pyfixtures import free_port

TIMEOUT = 60
pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def cpp_train(pytestconfig):
    """The example trainer, or a skip in a build without LibTorch (the sanitizer build)."""
    return cpp_binary(pytestconfig, "train")


@pytest.fixture
def cpp_step_worker(pytestconfig):
    return cpp_binary(pytestconfig, "ddp_step_worker")


def cpp_binary(config, option):
    path = config.getoption(option)
    if not path:
        pytest.skip(f"no --{option.replace('_', '-')}: this build has no LibTorch runtime (DDP_WITH_TORCH off)")
    return os.path.abspath(path)


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


def test_last_stderr_lines_written_long_before_the_exit_say_how_long(ddplaunch, tmp_path):
    # A warning at start, then nothing until the failure: the lines are shown, but not as its words.
    prog = tmp_path / "quiet.sh"
    prog.write_text('#!/bin/bash\necho "UserWarning: at start" >&2\nsleep 6\nexit 3\n')
    prog.chmod(0o755)
    summary = tmp_path / "summary.json"
    r = run(ddplaunch, ["--nproc_per_node=1", f"--summary_json={summary}", str(prog)])
    assert r.returncode == 3, r.stderr
    assert re.search(r"  last stderr lines \(the last one \d+\.\d s before it exited\):\n    UserWarning: at start\n",
                     r.stderr), r.stderr
    root = json.loads(summary.read_text())["root_cause"]
    assert 5.5 <= root["stderr_quiet"] < 30 and root["stderr_tail"] == ["UserWarning: at start"], root


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


SAME_ERROR = r'''#!/bin/bash
# Every rank records "ValueError: same" (as @record would) and fails, except rank 5, which trains on
# until ddplaunch stops it. Rank 3 recorded its error 100 s before the others but is seen last: it
# ignores SIGTERM and exits 1 a moment later.
ts=$(date +%s)
[ "$RANK" = 5 ] && exec sleep 60
[ "$RANK" = 3 ] && ts=$((ts - 100))
printf '{"message": {"message": "ValueError: same", "extraInfo": {"py_callstack": "Traceback (most recent call last):\\n  File \\"t.py\\", line 1\\nValueError: same\\n", "timestamp": "%s"}}}' "$ts" > "$TORCHELASTIC_ERROR_FILE"
if [ "$RANK" = 3 ]; then trap '' TERM; sleep 0.5; fi
exit 1
'''


def test_identical_failures_merge_under_the_earliest_and_stopped_ranks_stand_apart(ddplaunch, tmp_path):
    prog = tmp_path / "same.sh"
    prog.write_text(SAME_ERROR)
    prog.chmod(0o755)
    summary, events = tmp_path / "summary.json", tmp_path / "events.jsonl"
    r = run(ddplaunch, ["--nproc_per_node=8", f"--summary_json={summary}", f"--event_log={events}",
                        f"--log_dir={tmp_path}/logs", str(prog)])
    assert r.returncode == 1, r.stderr
    err = r.stderr
    assert "Root cause (the earliest failure):\n" in err, err
    assert "  rank      : 3 (local_rank: 3)\n" in err, err
    assert "  error     : ValueError: same\n" in err, err
    assert ("Other failures (by what they say):\n"
            "  ranks 0-2,4,6-7 (6 ranks): exitcode 1: ValueError: same (as the root cause)\n") in err, err
    assert "Stopped by ddplaunch (not failed):\n  rank 5: ended by SIGTERM\n" in err, err
    assert err.count("Traceback (most recent call last)") == 1, err
    # What the survivors were doing when the job stopped: their stacks, in the run's directory.
    stacks = [line.split(": ", 2)[2] for line in err.splitlines() if "still running when the job stopped: " in line]
    assert len(stacks) == 1, err
    assert "rank 5 (pid " in open(stacks[0]).read()

    doc = json.loads(summary.read_text())
    assert doc["exit_code"] == 1 and doc["version"] == 1
    assert [x["rank"] for x in doc["ranks"]] == list(range(8))
    assert [x["state"] for x in doc["ranks"]] == ["failed"] * 5 + ["stopped"] + ["failed"] * 2
    assert doc["ranks"][5]["signal"] == "SIGTERM"
    assert doc["root_cause"]["rank"] == 3 and doc["root_cause"]["error"] == "ValueError: same"

    lines = [json.loads(line) for line in events.read_text().splitlines()]
    kinds = [e["event"] for e in lines]
    assert kinds[:2] == ["round_joined", "workers_started"], kinds
    assert kinds.count("worker_exited") == 8 and kinds.count("teardown") == 1, kinds
    assert kinds[-1] == "job_ended" and lines[-1]["exit_code"] == 1
    started = {w["rank"]: w["pid"] for w in lines[1]["workers"]}
    exited = {e["rank"]: e["pid"] for e in lines if e["event"] == "worker_exited"}
    assert started == exited
    # Event times are when things happened (an exit's is its failure's own time): the rest ascend.
    times = [e["time"] for e in lines if e["event"] != "worker_exited"]
    assert times == sorted(times)


def test_a_summary_and_events_of_a_success_and_a_bad_event_log(ddplaunch, tmp_path):
    summary, events = tmp_path / "s.json", tmp_path / "e.jsonl"
    r = run(ddplaunch, ["--nproc_per_node=2", f"--summary_json={summary}", f"--event_log={events}", "--no_python",
                        "true"])
    assert r.returncode == 0, r.stderr
    doc = json.loads(summary.read_text())
    assert doc["root_cause"] is None and [x["state"] for x in doc["ranks"]] == ["succeeded"] * 2
    assert [json.loads(line)["event"] for line in events.read_text().splitlines()] == [
        "round_joined", "workers_started", "worker_exited", "worker_exited", "job_ended"]
    # A second run appends.
    assert run(ddplaunch, ["--nproc_per_node=1", f"--event_log={events}", "--no_python", "true"]).returncode == 0
    assert len(events.read_text().splitlines()) == 9

    bad = run(ddplaunch, ["--nproc_per_node=1", f"--event_log={tmp_path}/no/such/dir/e.jsonl", "--no_python", "true"])
    assert bad.returncode == 2, bad.stderr
    assert bad.stderr.strip().splitlines() == [
        f"ddplaunch: --event_log={tmp_path}/no/such/dir/e.jsonl: directory {tmp_path}/no/such/dir does not exist; "
        "create it or give a file in an existing directory"], bad.stderr


def test_a_summary_into_a_missing_directory_is_refused_before_any_worker_starts(ddplaunch, tmp_path):
    # Before: the job ran, and its summary was lost at the end with a warning.
    ran = tmp_path / "ran"
    bad = run(ddplaunch, ["--nproc_per_node=1", f"--summary_json={tmp_path}/no/such/dir/s.json", "--no_python",
                          "touch", str(ran)])
    assert bad.returncode == 2, bad.stderr
    assert bad.stderr.strip().splitlines() == [
        f"ddplaunch: --summary_json={tmp_path}/no/such/dir/s.json: directory {tmp_path}/no/such/dir does not exist; "
        "create it or give a file in an existing directory"], bad.stderr
    assert not ran.exists()


TIMER_SCRIPT = '''\
import os, time
import torch.distributed.elastic.timer as timer

def stuck_in_data_loader():
    time.sleep(60)

timer.configure(timer.FileTimerClient(os.environ["TORCHELASTIC_TIMER_FILE"]))
rank = int(os.environ["RANK"])
for step in range(3):
    with timer.expires(after=2, scope="train_step"):
        if rank == 1 and step == 1:
            stuck_in_data_loader()
        time.sleep(0.1)
print(f"rank {rank} done", flush=True)
'''


def test_an_expired_file_timer_shows_the_stack_and_kills_only_that_worker(ddplaunch, tmp_path):
    prog = tmp_path / "timer.py"
    prog.write_text(TIMER_SCRIPT)
    env_extra = {"TORCHELASTIC_ENABLE_FILE_TIMER": "1"}
    r = subprocess.run([ddplaunch, "--nproc_per_node=2", str(prog)], capture_output=True, text=True,
                       timeout=TIMEOUT, env=dict(os.environ, PYTHON_EXEC=sys.executable, **env_extra))
    out = r.stdout + r.stderr
    assert r.returncode == 137, out
    assert "[0]:rank 0 done" in out, out  # the other worker finished its steps: only rank 1 was killed
    assert "rank 1 (pid " in out and "file timer 'train_step' expired" in out, out
    assert "stuck_in_data_loader (timer.py:5)" in out, out  # py-spy's stack of the stuck worker
    assert "exitcode  : 137 (died of SIGKILL: killed by ddplaunch: file timer 'train_step' expired)" in out, out
    pipe = [line for line in r.stderr.splitlines() if "serving TORCHELASTIC_TIMER_FILE=" in line][0].split("=", 1)[1]
    assert not os.path.exists(pipe), "the named pipe outlived the run"


def test_a_native_worker_timer_gets_its_native_stack_and_the_signal_it_asked_for(ddplaunch, tmp_path):
    # A worker that speaks the pipe's protocol itself (as FileTimerClient does), then hangs. Rank 0
    # also sends a line that is not a request (reported, ignored) and a timer without a signal.
    prog = tmp_path / "native.sh"
    prog.write_text(textwrap.dedent('''\
        #!/bin/bash
        now=$(date +%s)
        if [ "$RANK" = 0 ]; then
          echo 'not json' > "$TORCHELASTIC_TIMER_FILE"
          echo "{\\"version\\": 1, \\"pid\\": $$, \\"scope_id\\": \\"warn-only\\", \\"expiration_time\\": $((now + 1)), \\"signal\\": 0}" > "$TORCHELASTIC_TIMER_FILE"
          exec sleep 30
        fi
        echo "{\\"version\\": 1, \\"pid\\": $$, \\"scope_id\\": \\"load\\", \\"expiration_time\\": $((now + 1)), \\"signal\\": 15}" > "$TORCHELASTIC_TIMER_FILE"
        exec sleep 30
        '''))
    prog.chmod(0o755)
    r = subprocess.run([ddplaunch, "--nproc_per_node=2", str(prog)], capture_output=True, text=True,
                       timeout=TIMEOUT, env=dict(os.environ, TORCHELASTIC_ENABLE_FILE_TIMER="1"))
    assert r.returncode == 143, r.stderr
    assert "file timers: ignored a request that is not a FileTimerRequest: 'not json'" in r.stderr, r.stderr
    assert "file timer 'warn-only' expired" in r.stderr and "no signal was set, it keeps running" in r.stderr
    assert "rank 1 (pid " in r.stderr and "file timer 'load' expired" in r.stderr, r.stderr
    assert "TID " in r.stderr or "#0 " in r.stderr, r.stderr  # eu-stack's (or gdb's) frames of sleep
    assert "exitcode  : 143 (died of SIGTERM: killed by ddplaunch: file timer 'load' expired)" in r.stderr, r.stderr
    assert "Stopped by ddplaunch (not failed):\n  rank 0: ended by SIGTERM" in r.stderr, r.stderr


def read_until(p, done, seconds):
    """What `p` wrote on stderr (bytes mode off: text) until done(text) or `seconds` passed."""
    import select
    import time
    text, deadline = "", time.monotonic() + seconds
    while not done(text) and time.monotonic() < deadline:
        ready, _, _ = select.select([p.stderr], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        chunk = os.read(p.stderr.fileno(), 65536).decode(errors="replace")
        if not chunk:
            break
        text += chunk
    return text


GLOO_STOP = '''\
import os, signal, time
import torch, torch.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()
t = torch.ones(1000)
for step in range(1000000):
    if rank == 1 and step == 20:
        os.kill(os.getpid(), signal.SIGSTOP)
    dist.all_reduce(t)
    time.sleep(0.01)
'''


def test_a_sigstopped_rank_is_reported_as_a_suspected_hang_with_stacks(ddplaunch, tmp_path):
    prog = tmp_path / "gloo_stop.py"
    prog.write_text(GLOO_STOP)
    events = tmp_path / "events.jsonl"
    # Without the worker server (an older torch, or --no_worker_server): the heuristic.
    p = subprocess.Popen([ddplaunch, "--nproc_per_node=2", "--hang_timeout=3", "--shutdown_timeout=5",
                          "--no_worker_server", f"--event_log={events}", str(prog)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         text=True, env=dict(os.environ, PYTHON_EXEC=sys.executable))
    try:
        # The report, complete once rank 1's stack is in (py-spy's last line for it).
        seen = read_until(p, lambda text: "stacks (also in " in text and text.count("Thread ") >= 2, 90)
        p.send_signal(signal.SIGTERM)
        rest = p.communicate(timeout=30)[1]
    finally:
        p.kill()
    err = seen + rest
    assert p.returncode == 143, err
    assert "suspected hang: ranks 0-1 (2 ranks) on this node used almost no CPU time (under 5% of a core) for 3" in err, err
    assert "rank 1 (pid " in err and "): stopped (SIGSTOP or a job-control signal)" in err, err
    assert "all_reduce (torch/distributed/distributed_c10d.py" in err, err  # rank 0 waits in the collective
    assert err.count("suspected hang:") == 1, err  # once per episode, taking stacks is no progress
    kinds = [json.loads(line)["event"] for line in events.read_text().splitlines()]
    assert "hang_suspected" in kinds, kinds


GLOO_TIMER_STOP = '''\
import os, signal, time
import torch, torch.distributed as dist
from torch.distributed.elastic.timer import FileTimerClient, configure, expires
dist.init_process_group("gloo")
configure(FileTimerClient(os.environ["TORCHELASTIC_TIMER_FILE"]))
rank = dist.get_rank()
t = torch.ones(1000)
for step in range(1000000):
    with expires(after=3 if rank == 1 else 60, scope="train_step"):
        if rank == 1 and step == 20:
            os.kill(os.getpid(), signal.SIGSTOP)
        dist.all_reduce(t)
    time.sleep(0.01)
'''


def test_a_sigstopped_rank_of_a_gloo_script_with_a_timer_is_killed_and_named(ddplaunch, tmp_path):
    prog = tmp_path / "gloo_timer.py"
    prog.write_text(GLOO_TIMER_STOP)
    r = subprocess.run([ddplaunch, "--nproc_per_node=2", "--hang_timeout=5", str(prog)], capture_output=True,
                       text=True, timeout=TIMEOUT,
                       env=dict(os.environ, PYTHON_EXEC=sys.executable, TORCHELASTIC_ENABLE_FILE_TIMER="1"))
    assert r.returncode == 137, r.stderr
    # py-spy's stack of the stopped rank, where it stopped itself (line 11).
    assert re.search(r"rank 1 \(pid \d+\) in file timer 'train_step' when it expired:\n(ddplaunch: .*\n){0,4}"
                     r"ddplaunch: Thread \d+ \(idle\): \"MainThread\"\nddplaunch: +<module> \(gloo_timer.py:11\)",
                     r.stderr), r.stderr
    assert "exitcode  : 137 (died of SIGKILL: killed by ddplaunch: file timer 'train_step' expired)" in r.stderr
    assert "Root cause (the earliest failure):" in r.stderr and "  rank      : 1 (local_rank: 1)" in r.stderr
    assert "Stopped by ddplaunch (not failed):\n  rank 0: ended by SIGTERM" in r.stderr, r.stderr


def wait_for_event(events, name, seconds):
    """The first `name` event appended to the JSON-lines file `events` within `seconds`."""
    import time
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if events.exists():
            for line in events.read_text().splitlines():
                if line.endswith("}") and json.loads(line)["event"] == name:
                    return json.loads(line)
        time.sleep(0.05)
    raise AssertionError(f"no {name} event in {seconds} s")


def test_a_rank_that_stops_in_the_cpp_example_fails_the_job_as_a_hang(ddplaunch, cpp_train, tmp_path):
    train = cpp_train
    import time
    events = tmp_path / "events.jsonl"
    summary = tmp_path / "summary.json"
    p = subprocess.Popen([ddplaunch, "--nproc_per_node=2", "--hang_timeout=2", f"--event_log={events}",
                          f"--summary_json={summary}", f"--log_dir={tmp_path / 'logs'}", train, "--backend", "cpu", "--epochs", "1000000"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        started = wait_for_event(events, "workers_started", 60)
        time.sleep(2)  # training runs: the slots hold collectives
        os.kill(next(w["pid"] for w in started["workers"] if w["rank"] == 1), signal.SIGSTOP)
        code, err = p.wait(timeout=60), p.stderr.read()
    finally:
        p.kill()
    assert code == 124, err
    assert "ddplaunch: hang: a rank has waited in a collective for 2 s and no collective completed on node 0" in err
    # a gradient bucket's allreduce (KiB) or the trainer's 24-byte loss sum, wherever the SIGSTOP lands
    assert re.search(r"Collective #(\d+) \(allreduce, [\d.]+ (B|KiB|MiB)\) never completed:", err), err
    assert re.search(r"rank 0 \(node 0 on [^,]+, pid \d+, sleeping \(waiting for an event\)\): waiting in it for "
                     r"[\d.]+ s \(since \d\d:\d\d:\d\d\.\d{3} UTC\)", err), err
    # Stopped at a random point: between collectives (it never entered #N), inside #N, or still
    # inside #N-1 (it had sent its part, so rank 0 finished #N-1, but had not recorded its exit).
    assert re.search(r"rank 1 \(node 0 on [^,]+, pid \d+, stopped \(SIGSTOP or a job-control signal\)\): "
                     r"(never entered it; its last, allreduce #\d+, completed|waiting in it|"
                     r"never entered it; it has been waiting in allreduce #\d+)", err), err
    assert "ddp::runtime::CpuCommunicator::allreduce" in err, err  # rank 0's native stack, in the collective
    assert "Stopped by ddplaunch (not failed):\n  ranks 0-1 (2 ranks): ended by SIGTERM" in err, err
    report = glob.glob(str(tmp_path / "logs" / "*" / "hang_round0_node0.txt"))
    assert report and "never completed" in open(report[0]).read()
    lines = [json.loads(line) for line in events.read_text().splitlines()]
    assert "hang" in [e["event"] for e in lines], lines
    assert lines[-1]["event"] == "job_ended" and lines[-1]["exit_code"] == 124, lines
    doc = json.loads(summary.read_text())
    assert doc["exit_code"] == 124 and doc["root_cause"]["node_rank"] == 0, doc
    assert "never completed" in doc["root_cause"]["summary"], doc
    assert [r["state"] for r in doc["ranks"]] == ["stopped", "stopped"], doc


def test_a_rank_that_never_enters_the_collective_is_named_across_nodes(ddplaunch, cpp_step_worker, tmp_path):
    ddp_step_worker = cpp_step_worker
    port = free_port()
    # Rank 1 (node 1) stops itself before step 20, between collectives; rank 0 waits in the next.
    nodes = [subprocess.Popen([ddplaunch, "--nnodes=2", f"--node_rank={g}", "--nproc_per_node=1",
                               f"--master_port={port}", "--hang_timeout=2", ddp_step_worker, "--steps", "1000000",
                               "--stop-rank", "1", "--stop-step", "20"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for g in (0, 1)]
    try:
        (code0, err0), (code1, err1) = [(n.wait(timeout=90), n.stderr.read()) for n in nodes]
    finally:
        for n in nodes:
            n.kill()
    assert code0 == 124 and code1 == 124, (err0, err1)
    # Node 0 finds the hang (its rank waits) and asks node 1 for its ranks' progress and stacks.
    for err in (err0, err1):
        n = int(re.search(r"Collective #(\d+) \(allreduce, [\d.]+ (B|KiB)\) never completed:", err).group(1))
        assert re.search(rf"rank 1 \(node 1 on [^,]+, pid \d+, stopped \(SIGSTOP or a job-control signal\)\): "
                         rf"never entered it; its last, allreduce #{n - 1}, completed [\d.]+ s ago", err), err
        assert f"Never entered collective #{n}: rank 1 (node 1 on " in err, err
        assert "=== node 0 (" in err and "=== node 1 (" in err, err
        assert "ddp::runtime::CpuCommunicator::allreduce" in err, err
    assert "ddplaunch: stopping: a failure reported by node 0" in err1, err1


def test_dump_stacks_prints_every_rank_on_every_node_of_a_running_job(ddplaunch, tmp_path):
    port = free_port()
    common = ["--nnodes=2", "--nproc_per_node=1", f"--master_port={port}", "--rdzv_id=stacks", "--no_python"]
    nodes = [subprocess.Popen([ddplaunch, *common, f"--node_rank={g}", "sleep", "30"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL) for g in (0, 1)]
    try:
        import time
        r, deadline = None, time.monotonic() + 60
        while time.monotonic() < deadline:  # the watchers start 1 s into the round, after the rendezvous
            r = subprocess.run([ddplaunch, "--dump_stacks", f"--master_port={port}", "--rdzv_id=stacks"],
                               capture_output=True, text=True, timeout=TIMEOUT)
            if r.returncode == 0:
                break
            subprocess.run(["sleep", "0.2"])
        assert r.returncode == 0, r.stderr
        assert "=== node 0 (" in r.stdout and "=== node 1 (" in r.stdout, r.stdout
        assert "rank 0 (pid " in r.stdout and "rank 1 (pid " in r.stdout, r.stdout
        assert "nanosleep" in r.stdout, r.stdout  # the native stacks of sleep
        assert "collective progress:" not in r.stdout and "publishes no progress" not in r.stdout, r.stdout
        assert all(n.poll() is None for n in nodes), "asking for stacks stopped the job"
        wrong = subprocess.run([ddplaunch, "--dump_stacks", f"--master_port={port}", "--rdzv_id=other"],
                               capture_output=True, text=True, timeout=TIMEOUT)
        assert wrong.returncode == 1 and "no running job with run id 'other' answers" in wrong.stderr, wrong.stderr
    finally:
        for n in nodes:
            n.send_signal(signal.SIGTERM)
        for n in nodes:
            n.wait(timeout=30)


def test_a_timer_file_path_that_holds_a_regular_file_is_refused_and_kept(ddplaunch, tmp_path):
    precious = tmp_path / "precious.txt"
    precious.write_text("data")
    r = subprocess.run([ddplaunch, "--no_python", "true"], capture_output=True, text=True, timeout=TIMEOUT,
                       env=dict(os.environ, TORCHELASTIC_ENABLE_FILE_TIMER="1", TORCHELASTIC_TIMER_FILE=str(precious)))
    assert r.returncode == 2, r.stderr
    assert f"TORCHELASTIC_TIMER_FILE {precious} exists and is not a named pipe" in r.stderr, r.stderr
    assert precious.read_text() == "data"


def test_both_nodes_summaries_name_the_same_root_cause_with_the_same_fields(ddplaunch, tmp_path):
    # Rank 1 (node 1) fails; node 0's summary gets node 1's record through the store, not its words.
    port = free_port()
    worker = tmp_path / "w.sh"
    worker.write_text('if [ "$RANK" = 1 ]; then echo "ValueError: far away" >&2; exit 3; fi; exec sleep 60\n')
    summaries = [tmp_path / f"s{g}.json" for g in (0, 1)]
    nodes = [subprocess.Popen([ddplaunch, "--nnodes=2", f"--node_rank={g}", "--nproc_per_node=1",
                               f"--master_port={port}", f"--summary_json={summaries[g]}", "--no_python", "sh",
                               str(worker)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for g in (0, 1)]
    try:
        (code0, err0), (code1, err1) = [(n.wait(timeout=TIMEOUT), n.stderr.read()) for n in nodes]
    finally:
        for n in nodes:
            n.kill()
            n.wait()
    assert code0 == 3 and code1 == 3, (err0, err1)
    roots = [json.loads(s.read_text())["root_cause"] for s in summaries]
    assert set(roots[0]) == set(roots[1]), roots
    for key in ("kind", "rank", "local_rank", "node_rank", "host", "exit_code", "signal", "pid", "state", "time",
                "stderr_tail", "error"):
        assert roots[0][key] == roots[1][key], (key, roots)
    assert roots[0]["kind"] == "worker" and roots[0]["rank"] == 1 and roots[0]["node_rank"] == 1, roots
    assert roots[0]["exit_code"] == 3 and roots[0]["stderr_tail"][-1] == "ValueError: far away", roots
    assert "a failure reported by node 1" in roots[0]["summary"], roots
