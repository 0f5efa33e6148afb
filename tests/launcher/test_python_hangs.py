"""Exact hang and desync reports for unmodified PyTorch (gloo) scripts, from PyTorch's own Flight
Recorder read through each worker's worker server (launcher/watch/fr/watch.hpp):
  * 1 node x 4 and 2 nodes x 2: a rank sleeping before all_reduce #4 is named as the one that
    never entered it, with its Python line; exit 124 on every node, the dumps in torch's format;
    the same as fields of --summary_json's root cause (its `collective`), alike on both nodes;
  * a desync (rank 1 calls all_gather where the others call all_reduce), both call sites, also
    as the record's `calls`;
  * a hang inside a new_group, a rank stuck waiting for its data-loader worker, an Accelerate
    script whose rank 1 hangs;
  * no flag: ranks that fail of gloo's own collective timeout get the same report in the summary
    (and its record in --summary_json);
  * a script that never imports torch: no server, no socket; multiprocessing spawn children of a
    worker start none; a SIGSTOPped rank (its server stopped too) is named from its last answer;
  * --dump_stacks on a job whose workers cannot be ptraced (non-dumpable, launcher unprivileged).
Each test ends its launchers by pid and checks that no worker is left.
"""

from __future__ import annotations

import glob
import json
import os
import pickle
import re
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

from launches import Launches
from pyfixtures import free_port

pytestmark = pytest.mark.timeout(300)

# A rank sleeping before all_reduce #4: it never enters it; the others wait in it.
# BACKEND=nccl (the [gpu] tests): each rank on its GPU, waiting on the CPU for each collective.
PROLOGUE = '''\
import os, time
import torch, torch.distributed as dist
backend = os.environ.get("BACKEND", "gloo")
device = torch.device("cuda", int(os.environ["LOCAL_RANK"])) if backend == "nccl" else torch.device("cpu")
if backend == "nccl":
    torch.cuda.set_device(device)
# COLLECTIVE_TIMEOUT=S: torch's own collective timeout (default: torch's, 30 min).
seconds = os.environ.get("COLLECTIVE_TIMEOUT")
import datetime
dist.init_process_group(backend, **({"timeout": datetime.timedelta(seconds=int(seconds))} if seconds else {}))
rank, world = dist.get_rank(), dist.get_world_size()
with open(os.path.join(os.environ["PIDDIR"], "pid.%d" % rank), "w") as f:
    f.write(str(os.getpid()))
def wait(t):
    if backend == "nccl":
        torch.cuda.synchronize()  # NCCL returns at once: wait here as gloo does in the call
    return t
'''

SLEEPER = PROLOGUE + '''\
t = torch.ones(1000, device=device)
for i in range(1, 8):
    if rank == int(os.environ["LATE_RANK"]) and i == 4:
        time.sleep(600)  # LATE LINE
    if rank == 0 and i == 4:
        with open(os.path.join(os.environ["PIDDIR"], "entered"), "w") as f:
            f.write(repr(time.time()))
    wait(dist.all_reduce(t))
'''


def line_of(text, marker):
    return next(i + 1 for i, line in enumerate(text.splitlines()) if marker in line)


def py_env(**extra):
    env = {"PYTHON_EXEC": sys.executable, "OMP_NUM_THREADS": "1"}
    env.update(extra)
    return env


def test_a_rank_sleeping_before_all_reduce_is_named_with_its_line(launches, tmp_path):
    prog = launches.script("sleeper.py", SLEEPER)
    start = time.time()
    rc, _, err = launches.run(["--nproc_per_node=4", "--hang_timeout=5", f"--log_dir={tmp_path}/logs",
                               f"--summary_json={tmp_path}/summary.json", prog],
                              env=py_env(LATE_RANK="1"), timeout=180)
    ended = time.time()
    assert rc == 124, err
    # The same as fields of the summary's record, not words.
    summary = json.loads((tmp_path / "summary.json").read_text())
    root = summary["root_cause"]
    assert root["kind"] == "hang", root
    c = root["collective"]
    assert (c["finding"], c["group"], c["group_desc"], c["group_ranks"]) == ("hang", "0", "default_pg", [0, 1, 2, 3]), c
    assert (c["seq"], c["p2p"], c["op"], c["name"]) == (4, False, "gloo:all_reduce", "gloo:all_reduce #4"), c
    assert (c["waiting"], c["missing"]) == ([0, 2, 3], [1]), c
    assert c["calls"] == [{"op": "gloo:all_reduce", "input": "[1000] Float", "ranks": [0, 2, 3],
                           "line": c["lines"].get("0", "")}], c
    assert c["lines"]["1"].endswith(f"sleeper.py:{line_of(SLEEPER, 'LATE LINE')} <module>"), c
    [failed] = summary["rounds"]
    assert failed["root_cause"]["collective"] == c, failed
    assert start <= failed["started"] <= failed["ended"] <= ended, failed
    assert abs(failed["duration"] - (failed["ended"] - failed["started"])) < 0.01, failed
    assert "ddplaunch: hang: " in err and "PyTorch's Flight Recorder, --hang_timeout 5 s" in err, err
    assert re.search(r"Collective #4 of process group 0 \(the default group, ranks 0-3\)", err), err
    assert "gloo:all_reduce" in err and "[1000]" in err, err
    assert re.search(r"rank 1 \(node 0[^)]*\): never entered it", err), err
    for r in (0, 2, 3):
        assert re.search(rf"rank {r} \(node 0[^)]*\): waiting in it for", err), err
    # rank 1's Python line, from its own worker server (no ptrace)
    assert f'sleeper.py", line {line_of(SLEEPER, "LATE LINE")}' in err, err
    # the report after rank 0 entered all_reduce #4, not at the test's timeout: how soon is a
    # benchmark's figure (bench_launcher.py's hang row), not a timed assertion here (under a loaded
    # CI the 5 s timeout's report came 15 s after the entry)
    entered = float(open(tmp_path / "entered").read())
    assert ended - entered < 5 + 45, (ended - entered, err)
    assert ended - start < 120
    # torch's own dump format, read by torch's own analyser
    dumps = sorted(glob.glob(str(tmp_path / "logs" / "*" / "fr_gloo_rank_*")))
    assert [os.path.basename(d) for d in dumps] == [f"fr_gloo_rank_{r}" for r in range(4)], dumps
    rundir = os.path.dirname(dumps[0])
    with open(dumps[1], "rb") as f:
        assert pickle.load(f)["pg_status"]["0"]["last_enqueued_collective"] == 3
    fr = subprocess.run([sys.executable, "-m", "torch.distributed.flight_recorder.fr_trace", rundir, "--prefix",
                         "fr_gloo_rank_"], capture_output=True, text=True, timeout=120)
    assert "missing ranks: {1}" in fr.stdout + fr.stderr, fr.stdout + fr.stderr
    launches.assert_no_survivors()


def test_two_nodes_both_name_the_rank_on_the_other_node(launches, tmp_path):
    prog = launches.script("sleeper.py", SLEEPER)
    port = free_port()
    common = ["--nnodes=2", "--nproc_per_node=2", "--master_addr=127.0.0.1", f"--master_port={port}",
              "--hang_timeout=5"]
    nodes = [launches.start(common + [f"--node_rank={n}", f"--summary_json={tmp_path}/summary{n}.json", prog],
                            env=py_env(LATE_RANK="3")) for n in (0, 1)]
    errs = [launches.communicate(p, timeout=180)[1] for p in nodes]
    for p, err in zip(nodes, errs):
        assert p.returncode == 124, err
        assert "rank 3 (node 1" in err and "never entered" in err, err
    # Both nodes' summaries hold the same record: the node that found it told the other.
    records = [json.loads((tmp_path / f"summary{n}.json").read_text())["root_cause"] for n in (0, 1)]
    assert records[0]["collective"] == records[1]["collective"], records
    c = records[0]["collective"]
    assert (c["name"], c["waiting"], c["missing"]) == ("gloo:all_reduce #4", [0, 1, 2], [3]), c
    assert c["lines"]["3"].endswith(f"sleeper.py:{line_of(SLEEPER, 'LATE LINE')} <module>"), c
    # The node that found it lists every rank of both nodes, with rank 3's line.
    finder = next(err for err in errs if "): never entered it" in err)
    for r in (0, 1, 2):
        assert re.search(rf"rank {r} \(node \d[^)]*\): waiting in it for", finder), finder
    assert f'sleeper.py", line {line_of(SLEEPER, "LATE LINE")}' in finder, finder
    launches.assert_no_survivors()


DESYNC = PROLOGUE + '''\
t = torch.ones(1000, device=device)
for i in range(1, 8):
    if rank == 1 and i == 4:
        wait(dist.all_gather([torch.empty(1000, device=device) for _ in range(world)], t))  # GATHER LINE
    else:
        wait(dist.all_reduce(t))  # REDUCE LINE
'''


def assert_desync(err, backend="gloo"):
    assert "ddplaunch: desync: " in err, err
    assert f"{backend}:all_gather" in err and f"{backend}:all_reduce" in err, err
    for marker in ("GATHER LINE", "REDUCE LINE"):
        n = line_of(DESYNC, marker)
        assert f'desync.py", line {n}' in err or f"desync.py:{n}" in err, (marker, err)


def test_a_desync_names_both_call_sites_before_any_timeout(launches, tmp_path):
    prog = launches.script("desync.py", DESYNC)
    # gloo would wait its 30 minutes; the desync check comes after 10 s of waiting, no flag needed
    start = time.time()
    rc, _, err = launches.run(["--nproc_per_node=4", f"--summary_json={tmp_path}/summary.json", prog], env=py_env(),
                              timeout=180)
    assert rc == 124, err
    assert_desync(err)
    # Each call site as a record: its op, its ranks, its line.
    c = json.loads((tmp_path / "summary.json").read_text())["root_cause"]["collective"]
    assert (c["finding"], c["seq"], c["waiting"], c["missing"]) == ("desync", 4, [0, 1, 2, 3], []), c
    calls = {call["op"]: call for call in c["calls"]}
    assert calls["gloo:all_gather"]["ranks"] == [1] and calls["gloo:all_reduce"]["ranks"] == [0, 2, 3], c
    assert f"desync.py:{line_of(DESYNC, 'GATHER LINE')} " in calls["gloo:all_gather"]["line"], c
    assert f"desync.py:{line_of(DESYNC, 'REDUCE LINE')} " in calls["gloo:all_reduce"]["line"], c
    assert time.time() - start < 120
    launches.assert_no_survivors()


def test_a_desync_across_two_nodes(launches):
    prog = launches.script("desync.py", DESYNC)
    port = free_port()
    common = ["--nnodes=2", "--nproc_per_node=2", "--master_addr=127.0.0.1", f"--master_port={port}",
              "--hang_timeout=4"]
    nodes = [launches.start(common + [f"--node_rank={n}", prog], env=py_env()) for n in (0, 1)]
    errs = [launches.communicate(p, timeout=180)[1] for p in nodes]
    assert [p.returncode for p in nodes] == [124, 124], errs
    assert_desync(next(err for err in errs if "ddplaunch: desync: " in err))
    launches.assert_no_survivors()


HEALTHY = '''\
import time
import torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.ones(10)
for i in range(60):
    dist.all_reduce(t)
    time.sleep(0.1)
'''


def test_a_healthy_job_with_pauses_is_no_hang(launches):
    # The CPU-time heuristic called this a suspected hang at --hang_timeout 5.
    prog = launches.script("healthy.py", HEALTHY)
    rc, _, err = launches.run(["--nproc_per_node=2", "--hang_timeout=2", prog], env=py_env(), timeout=120)
    assert rc == 0, err
    # No hang finding (the timeouts-do-not-nest warning names --hang_timeout, which is fine).
    assert "ddplaunch: hang: " not in err and "suspected hang" not in err, err


NEW_GROUP = '''\
import os, time
import torch, torch.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()
with open(os.path.join(os.environ["PIDDIR"], "pid.%d" % rank), "w") as f:
    f.write(str(os.getpid()))
pair = dist.new_group([0, 1])
dist.new_group([2, 3])
t = torch.ones(10)
dist.all_reduce(t)
if rank < 2:
    for i in range(1, 5):
        if rank == 1 and i == 3:
            time.sleep(600)  # LATE LINE
        dist.all_reduce(t, group=pair)
else:
    time.sleep(600)  # ranks 2 and 3 have nothing to do with it
'''


def test_a_hang_inside_a_new_group_names_the_group(launches):
    prog = launches.script("new_group.py", NEW_GROUP)
    rc, _, err = launches.run(["--nproc_per_node=4", "--hang_timeout=5", prog], env=py_env(), timeout=180)
    assert rc == 124, err
    assert re.search(r"Collective #3 of process group 1 \([^)]*ranks 0-1\)", err), err
    assert re.search(r"rank 1 \(node 0[^)]*\): never entered it", err), err
    assert f'new_group.py", line {line_of(NEW_GROUP, "LATE LINE")}' in err, err
    launches.assert_no_survivors()


DATA_LOADER = '''\
import os, time
import torch, torch.distributed as dist
from torch.utils.data import DataLoader, Dataset

class Slow(Dataset):
    def __len__(self):
        return 100
    def __getitem__(self, i):
        if int(os.environ["RANK"]) == 1 and i >= 8:
            time.sleep(600)  # the data-loader worker is stuck
        return torch.ones(10)

if __name__ == "__main__":
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    with open(os.path.join(os.environ["PIDDIR"], "pid.%d" % rank), "w") as f:
        f.write(str(os.getpid()))
    for batch in DataLoader(Slow(), batch_size=4, num_workers=1):  # LOADER LINE
        dist.all_reduce(batch)
'''


def test_a_rank_stuck_in_its_data_loader_is_named(launches):
    prog = launches.script("loader.py", DATA_LOADER)
    rc, _, err = launches.run(["--nproc_per_node=2", "--hang_timeout=5", prog], env=py_env(), timeout=180)
    assert rc == 124, err
    assert re.search(r"rank 1 \(node 0[^)]*\): never entered it", err), err
    assert f'loader.py", line {line_of(DATA_LOADER, "LOADER LINE")}' in err, err
    assert "dataloader.py" in err, err  # where in the loader it waits
    launches.assert_no_survivors()


ACCELERATE = '''\
import os, time
import torch
from accelerate import Accelerator
acc = Accelerator(cpu=True)
with open(os.path.join(os.environ["PIDDIR"], "pid.%d" % acc.process_index), "w") as f:
    f.write(str(os.getpid()))
model = torch.nn.Linear(10, 10)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
model, opt = acc.prepare(model, opt)
for step in range(100):
    if acc.process_index == 1 and step == 3:
        time.sleep(600)  # LATE LINE
    loss = model(torch.randn(4, 10)).sum()
    acc.backward(loss)
    opt.step()
    opt.zero_grad()
'''


def test_an_accelerate_script_whose_rank_1_hangs(launches):
    pytest.importorskip("accelerate")
    prog = launches.script("acc.py", ACCELERATE)
    rc, _, err = launches.run(["--nproc_per_node=2", "--hang_timeout=5", prog], env=py_env(), timeout=180)
    assert rc == 124, err
    assert re.search(r"rank 1 \(node 0[^)]*\): never entered it", err), err
    assert f'acc.py", line {line_of(ACCELERATE, "LATE LINE")}' in err, err
    launches.assert_no_survivors()


TIMEOUT_NO_FLAG = PROLOGUE + '''\
t = torch.ones(1000)
for i in range(1, 8):
    if rank == 1 and i == 4:
        time.sleep(600)  # LATE LINE
    dist.all_reduce(t)
'''


def test_without_a_flag_a_collective_timeout_carries_the_report(launches, tmp_path):
    prog = launches.script("timeout.py", TIMEOUT_NO_FLAG)
    rc, _, err = launches.run(["--nproc_per_node=3", f"--log_dir={tmp_path}/logs",
                               f"--summary_json={tmp_path}/summary.json", prog],
                              env=py_env(COLLECTIVE_TIMEOUT="15"), timeout=180)
    assert rc != 0 and rc != 124, err
    assert "Root cause (the earliest failure):" in err, err
    assert "What the ranks' Flight Recorders show (a hang):" in err, err
    assert re.search(r"rank 1 \(node 0[^)]*\): never entered it", err), err
    assert f'timeout.py", line {line_of(TIMEOUT_NO_FLAG, "LATE LINE")}' in err, err
    # The rank's record carries the same as fields.
    root = json.loads((tmp_path / "summary.json").read_text())["root_cause"]
    assert root["kind"] == "worker" and root["collective"]["missing"] == [1], root
    assert root["collective"]["lines"]["1"].endswith(f"timeout.py:{line_of(TIMEOUT_NO_FLAG, 'LATE LINE')} <module>"), root
    launches.assert_no_survivors()


def test_a_script_that_never_imports_torch_gets_no_server(launches, tmp_path):
    prog = launches.script("plain.py", '''\
import os, sys
assert "DDPLAUNCH_WORKER_SOCKET" not in os.environ
assert "torch" not in sys.modules
run_dir = os.path.dirname(os.environ["TORCHELASTIC_ERROR_FILE"])  # flat in the run's directory
# The workers' sockets only (the launcher's own status.sock is there too).
print("plain", os.environ["RANK"], sorted(n for n in os.listdir(run_dir) if n.startswith("worker") and ".sock" in n))
''')
    rc, out, err = launches.run(["--nproc_per_node=2", "--hang_timeout=3", prog], env=py_env())
    assert rc == 0, err
    assert "plain 0 []" in out and "plain 1 []" in out, out + err


SPAWNS = '''\
import os, sys
import multiprocessing as mp
import torch.distributed as dist

def child(q):
    import torch.distributed  # a second import in another process: no second server
    q.put((os.environ.get("DDPLAUNCH_WORKER_SOCKET"), sys.argv[0]))

if __name__ == "__main__":
    dist.init_process_group("gloo")
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    ps = [ctx.Process(target=child, args=(q,)) for _ in range(2)]
    for p in ps:
        p.start()
    got = [q.get(timeout=60) for _ in ps]
    for p in ps:
        p.join()
    run_dir = os.path.dirname(os.environ["TORCHELASTIC_ERROR_FILE"])
    socks = sorted(n for n in os.listdir(run_dir) if n.startswith("worker") and n.endswith(".sock"))
    print("rank", dist.get_rank(), "children", got, "sockets", socks, flush=True)
    dist.barrier()
'''


def test_spawned_children_of_a_worker_start_no_second_server(launches, tmp_path):
    prog = launches.script("spawns.py", SPAWNS)
    rc, out, err = launches.run(["--nproc_per_node=2", prog], env=py_env(), timeout=180)
    assert rc == 0, err
    for r in (0, 1):
        assert f"rank {r} children [(None, '{prog}'), (None, '{prog}')]" in out.replace("[0]:", "").replace(
            "[1]:", ""), out + err
    assert "sockets ['worker0.sock', 'worker1.sock']" in out, out


STOPPED = PROLOGUE + '''\
import signal
t = torch.ones(1000)
for i in range(1, 8):
    if rank == 1 and i == 4:
        time.sleep(2)  # answered the launcher's polls in between
        os.kill(os.getpid(), signal.SIGSTOP)  # its worker server stops with it
    dist.all_reduce(t)
'''


def test_a_stopped_rank_that_cannot_answer_is_named_from_its_last_answer(launches):
    prog = launches.script("stopped.py", STOPPED)
    rc, _, err = launches.run(["--nproc_per_node=2", "--hang_timeout=4", "--shutdown_timeout=3", prog],
                              env=py_env(), timeout=180)
    assert rc == 124, err
    assert re.search(r"rank 1 \(node 0[^)]*\): never entered it", err), err
    assert "stopped (SIGSTOP" in err, err
    launches.assert_no_survivors()


NOT_DUMPABLE = '''\
import ctypes, os, time
import torch, torch.distributed as dist
ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: no ptrace by an unprivileged user
dist.init_process_group("gloo")
rank = dist.get_rank()
with open(os.path.join(os.environ["PIDDIR"], "pid.%d" % rank), "w") as f:
    f.write(str(os.getpid()))
t = torch.ones(10)
dist.all_reduce(t)
time.sleep(600)  # WAIT LINE
'''


def test_dump_stacks_without_ptrace_uses_the_worker_servers(ddplaunch, procs):
    if os.geteuid() != 0:
        pytest.skip("needs root to drop to an unprivileged user")
    # A directory the unprivileged user can reach (pytest's own is root's alone).
    home = tempfile.mkdtemp(prefix="nodump-", dir="/tmp")
    try:
        os.chmod(home, 0o777)
        launches = Launches(ddplaunch, procs, home)
        prog = launches.script("nodump.py", NOT_DUMPABLE)
        port = free_port()
        unprivileged = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"]
        env = dict(os.environ, **py_env(PIDDIR=home, XDG_RUNTIME_DIR=home))
        job = procs.start(unprivileged + [ddplaunch, "--nproc_per_node=2", f"--master_port={port}", prog], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=home)
        try:
            launches.wait_pids(2, timeout=120)
            time.sleep(2)  # the workers reach their sleep; an answer is taken whenever asked
            r = subprocess.run(unprivileged + [ddplaunch, "--dump_stacks", f"--master_port={port}"],
                               capture_output=True, text=True, timeout=60, env=env)
            assert r.returncode == 0, r.stderr
            assert r.stdout.count("(Python stack from the worker's own server)") == 2, r.stdout
            assert f'nodump.py", line {line_of(NOT_DUMPABLE, "WAIT LINE")}' in r.stdout, r.stdout
            assert "last collectives (PyTorch's Flight Recorder):" in r.stdout, r.stdout
            assert "gloo:all_reduce #1" in r.stdout, r.stdout
            # what ptrace would have given here: nothing
            spy = subprocess.run(unprivileged + [os.path.join(os.path.dirname(sys.executable), "py-spy"), "dump",
                                                 "--pid", str(launches.pids()[0])], capture_output=True, text=True,
                                 timeout=60)
            assert spy.returncode != 0, spy.stdout
        finally:
            procs.stop(job, 30)
        launches.assert_no_survivors()
    finally:
        shutil.rmtree(home, ignore_errors=True)
