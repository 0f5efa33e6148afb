"""Straggler detection, on by default (docs/stragglers.md), through the real ddplaunch binary and
unmodified workers. The window is 6 s (scored every 2 s) so that each test stays short:
  * a plain PyTorch (gloo) job, 1 node x 3: rank 2 sleeps 60 ms more than the others before each
    step's all_reduce: one console line names it, `--status` shows it flagged in its `stragglers`
    object while the job runs, the event log has a `straggler` line and the summary names it the
    slowest rank;
  * the same job, healthy (every rank alike), and with rank 2 slow once (2 s, a checkpoint):
    no line, no flag; --stragglers=off asks nothing and says so in --status;
  * runtime workers (tests/launcher/straggler_worker: the progress table, written as the runtime
    writes it): a slow rank named from the table;
  * two nodes x 2 ranks in network namespaces, node 1's two ranks slow together (sleeping): node 1
    is named in one line, on node 0 and on node 1, and in node 0's --status;
  * --stragglers=replace on an elastic job with a spare (3 launchers on loopback, --nnodes=2:3
    --active_nodes=2): the slow active node stops its round after --straggler_replace_after,
    excludes itself from the next, and the spare takes its place; the job succeeds;
  * an Accelerate script with a slow rank;
  * [gpu] the gloo test with NCCL (two GPUs), skipped here.
Each test ends its launchers by pid and checks that no worker is left.
"""

from __future__ import annotations

import json
import re
import sys
import time

import pytest

from launches import PRIVATE_REGISTRY, Launches
from pyfixtures import free_port, netns_hosts_or_skip

pytestmark = pytest.mark.timeout(300)

WINDOW = ["--straggler_window=6"]

# A training loop: STEP_MS of work per step, one all_reduce, and a second that ends the loop on
# every rank together after SECONDS. The ranks of LATE_RANK ("2" or "2,3") sleep LATE_MS more per
# step (or once, at step ONCE_AT).
GLOO = '''\
import os, time
import torch, torch.distributed as dist
backend = os.environ.get("BACKEND", "gloo")
device = torch.device("cuda", int(os.environ["LOCAL_RANK"])) if backend == "nccl" else torch.device("cpu")
if backend == "nccl":
    torch.cuda.set_device(device)
dist.init_process_group(backend)
rank = dist.get_rank()
with open(os.path.join(os.environ["PIDDIR"], "pid.%d" % rank), "w") as f:
    f.write(str(os.getpid()))
late_ranks = {int(r) for r in os.environ.get("LATE_RANK", "-1").split(",")}
if os.environ.get("SLOW_HERE"):  # every rank of this launcher (its node, whatever its ranks)
    late_ranks = {rank}
late_ms = float(os.environ.get("LATE_MS", "0"))
once_at = int(os.environ.get("ONCE_AT", "-1"))
t = torch.ones(1000, device=device)
end = time.time() + float(os.environ.get("SECONDS", "20"))
i = 0
while True:
    i += 1
    time.sleep(float(os.environ.get("STEP_MS", "40")) / 1000)
    if rank in late_ranks and (once_at < 0 or i == once_at):
        time.sleep(late_ms / 1000)
    dist.all_reduce(t)
    stop = torch.tensor([1.0 if time.time() > end else 0.0], device=device)
    dist.all_reduce(stop)
    if backend == "nccl":
        torch.cuda.synchronize()
    if stop.item() > 0:
        break
dist.destroy_process_group()
'''

FOUND = re.compile(r"ddplaunch: straggler: (rank \d+ on node \d+ \([^)]*\)|node \d+ \([^)]*\)) enters collectives "
                   r"(\d+) ms late")


def py_env(**extra):
    env = {"PYTHON_EXEC": sys.executable, "OMP_NUM_THREADS": "1"}
    env.update({k: str(v) for k, v in extra.items()})
    return env


def events(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def test_a_slow_gloo_rank_is_named_on_the_console_in_status_events_and_summary(launches, tmp_path):
    prog = launches.script("train.py", GLOO)
    xdg = tmp_path / "xdg"
    xdg.mkdir(mode=0o700)
    p = launches.start(["--nproc_per_node=3", *WINDOW, f"--event_log={tmp_path}/events.jsonl",
                        f"--summary_json={tmp_path}/summary.json", prog],
                       env={**py_env(LATE_RANK=2, LATE_MS=60, SECONDS=30), "XDG_RUNTIME_DIR": str(xdg)})
    launches.wait_pids(3)
    # While it runs: --status shows rank 2 flagged (detection within the window and two scorings).
    deadline = time.monotonic() + 25
    flagged = None
    while time.monotonic() < deadline and not flagged:
        code, out, _ = launches.run(["--status", str(p.pid)], env={"XDG_RUNTIME_DIR": str(xdg)}, timeout=15,
                                    prefix=PRIVATE_REGISTRY)
        if code == 0:
            s = json.loads(out)["stragglers"]
            flagged = [r for r in s["ranks"] if r["straggler"]] or None
        time.sleep(0.5)  # the scores change every 2 s; nothing to wait on from outside
    assert flagged, out
    assert [r["rank"] for r in flagged] == [2], s
    assert s["mode"] == "warn" and s["window_s"] == 6, s
    r = flagged[0]
    assert r["node"] == 0 and r["lateness_ms"] > 20 and r["since"] is not None and r["history"], r
    assert 0.2 < r["step_fraction"] < 1.5, r
    assert {n["node"] for n in s["nodes"]} == {0} and not s["nodes"][0]["straggler"], s
    _, err = launches.communicate(p, timeout=90)
    assert p.returncode == 0, err
    found = FOUND.findall(err)
    assert len(found) == 1 and found[0][0].startswith("rank 2 on node 0 ("), err
    assert "% of a step, for " in err, err
    lines = [e for e in events(tmp_path / "events.jsonl") if e["event"].startswith("straggler")]
    assert [(e["event"], e["rank"]) for e in lines][:1] == [("straggler", 2)], lines
    assert lines[0]["message"].startswith("rank 2 on node 0"), lines
    slowest = json.loads((tmp_path / "summary.json").read_text())["stragglers"]
    assert slowest["slowest_ranks"][0]["rank"] == 2 and slowest["slowest_ranks"][0]["straggler"], slowest
    launches.assert_no_survivors()


@pytest.mark.parametrize("case", ["healthy", "slow_once"])
def test_healthy_runs_and_a_rank_slow_once_name_none(launches, tmp_path, case):
    prog = launches.script("train.py", GLOO)
    env = py_env(SECONDS=20) if case == "healthy" else py_env(SECONDS=20, LATE_RANK=2, LATE_MS=2000, ONCE_AT=150)
    rc, _, err = launches.run(["--nproc_per_node=3", *WINDOW, f"--summary_json={tmp_path}/summary.json", prog],
                              env=env, timeout=120)
    assert rc == 0, err
    assert "straggler" not in err, err
    slowest = json.loads((tmp_path / "summary.json").read_text())["stragglers"]
    assert slowest["mode"] == "warn" and slowest["slowest_ranks"], slowest  # scored, and none flagged
    assert not any(r["straggler"] for r in slowest["slowest_ranks"]), slowest
    launches.assert_no_survivors()


def test_stragglers_off_asks_nothing(launches, tmp_path):
    prog = launches.script("train.py", GLOO)
    rc, _, err = launches.run(["--nproc_per_node=2", "--stragglers=off", *WINDOW,
                               f"--summary_json={tmp_path}/summary.json", prog],
                              env=py_env(SECONDS=8, LATE_RANK=1, LATE_MS=80), timeout=90)
    assert rc == 0, err
    assert "straggler" not in err, err
    assert json.loads((tmp_path / "summary.json").read_text())["stragglers"] is None
    launches.assert_no_survivors()


def test_a_slow_runtime_rank_is_named_from_the_progress_table(launches, tmp_path, straggler_worker):
    rc, _, err = launches.run(["--nproc_per_node=3", *WINDOW, f"--summary_json={tmp_path}/summary.json",
                               straggler_worker],
                              env={"STEPS": "400", "STEP_MS": "40", "LATE_RANK": "1", "LATE_MS": "40"}, timeout=120)
    assert rc == 0, err
    found = FOUND.findall(err)
    assert len(found) == 1 and found[0][0].startswith("rank 1 on node 0 ("), err
    assert 25 <= int(found[0][1]) <= 60, err
    slowest = json.loads((tmp_path / "summary.json").read_text())["stragglers"]["slowest_ranks"]
    assert slowest[0]["rank"] == 1 and slowest[0]["straggler"], slowest
    launches.assert_no_survivors()


ACCELERATE = '''\
import os, time
import torch
from accelerate import Accelerator
acc = Accelerator(cpu=True)
rank = acc.process_index
with open(os.path.join(os.environ["PIDDIR"], "pid.%d" % rank), "w") as f:
    f.write(str(os.getpid()))
model = acc.prepare(torch.nn.Linear(64, 64))
opt = acc.prepare(torch.optim.SGD(model.parameters(), lr=0.01))
end = time.time() + 20
while True:
    time.sleep(0.04 + (0.06 if rank == 1 else 0))
    loss = model(torch.randn(8, 64)).sum()
    acc.backward(loss)
    opt.step()
    opt.zero_grad()
    stop = torch.tensor([1.0 if time.time() > end else 0.0])
    if acc.reduce(stop, reduction="sum").item() > 0:
        break
'''


def test_an_accelerate_script_with_a_slow_rank(launches, tmp_path):
    pytest.importorskip("accelerate")
    prog = launches.script("acc.py", ACCELERATE)
    rc, _, err = launches.run(["--nproc_per_node=2", *WINDOW, prog], env=py_env(), timeout=150)
    assert rc == 0, err
    found = FOUND.findall(err)
    assert len(found) == 1 and found[0][0].startswith("rank 1 on node 0 ("), err
    launches.assert_no_survivors()


NODES = ["10.246.0.1", "10.246.0.2"]


@pytest.fixture(scope="module")
def hosts():
    for made in netns_hosts_or_skip(NODES):
        yield [(h.ns, h.ifname) for h in made]


def test_a_slow_node_of_two_is_named_on_both(hosts, ddplaunch, procs, tmp_path):
    launches = Launches(ddplaunch, procs, tmp_path)
    prog = launches.script("train.py", GLOO)
    port = free_port()
    nodes = []
    for rank, (ns, ifname) in enumerate(hosts):
        # Node 1's ranks (2 and 3) sleep 80 ms more per step: 40 ms past the median of the four.
        nodes.append(launches.start(["--nnodes=2", f"--node_rank={rank}", "--nproc_per_node=2",
                                     f"--master_addr={NODES[0]}", f"--master_port={port}", *WINDOW,
                                     f"--summary_json={tmp_path}/summary{rank}.json", prog],
                                    # the host name resolves to loopback in every namespace
                                    env=py_env(SECONDS=30, LATE_MS=80, LATE_RANK="2,3", GLOO_SOCKET_IFNAME=ifname),
                                    prefix=("ip", "netns", "exec", ns)))
    try:
        errs = [launches.communicate(p, timeout=150)[1] for p in nodes]
    finally:
        launches.kill_workers()
    for p, err in zip(nodes, errs):
        assert p.returncode == 0, err
        found = FOUND.findall(err)
        assert found and found[0][0].startswith("node 1 ("), err
        assert "with most of its ranks" in err, err
        assert 25 <= int(found[0][1]) <= 70, err
    # Node 0's summary covers every rank; node 1's its own.
    s0 = json.loads((tmp_path / "summary0.json").read_text())["stragglers"]
    assert {r["rank"] for r in s0["slowest_ranks"][:2]} == {2, 3}, s0
    assert s0["slowest_nodes"][0]["node"] == 1, s0
    s1 = json.loads((tmp_path / "summary1.json").read_text())["stragglers"]
    assert {r["rank"] for r in s1["slowest_ranks"]} == {2, 3}, s1
    launches.assert_no_survivors()


def test_replace_restarts_the_round_with_the_spare_in_the_slow_nodes_place(launches, tmp_path):
    prog = launches.script("train.py", GLOO)
    port = free_port()
    common = ["--nnodes=2:3", "--active_nodes=2", "--max_restarts=1", "--nproc_per_node=1",
              "--master_addr=127.0.0.1", f"--master_port={port}", "--rdzv_conf", "last_call_timeout=2",
              "--stragglers=replace", "--straggler_replace_after=4", *WINDOW]
    nodes = {}
    # Node 0 and node 1 (the first other to arrive) run workers; node 2 stands by. Node 1 is slow.
    nodes[0] = launches.start(common + ["--node_rank=0", prog], env=py_env(SECONDS=20))
    nodes[1] = launches.start(common + ["--node_rank=1", prog], env=py_env(SECONDS=20, SLOW_HERE=1, LATE_MS=80))
    time.sleep(0.5)  # node 1 arrives first: the rendezvous orders the active nodes by arrival
    nodes[2] = launches.start(common + ["--node_rank=2", prog], env=py_env(SECONDS=20))
    errs = {n: launches.communicate(p, timeout=180)[1] for n, p in nodes.items()}
    assert nodes[0].returncode == 0, errs[0]
    assert nodes[2].returncode == 0, errs[2]
    assert nodes[1].returncode == 69, errs[1]  # excluded itself, as a node failing its health check
    assert "restarting the round with a spare in its place (--stragglers=replace)" in errs[1], errs[1]
    assert "excluded itself: a straggler for" in errs[0] + errs[1], errs
    launches.assert_no_survivors()


def test_nccl_names_a_slow_rank(launches):
    torch = pytest.importorskip("torch")
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two CUDA devices")
    prog = launches.script("train.py", GLOO)
    rc, _, err = launches.run(["--nproc_per_node=2", *WINDOW, prog],
                              env=py_env(BACKEND="nccl", LATE_RANK=1, LATE_MS=60, SECONDS=20), timeout=150)
    assert rc == 0, err
    found = FOUND.findall(err)
    assert len(found) == 1 and found[0][0].startswith("rank 1 on node 0 ("), err
    launches.assert_no_survivors()
