"""--replica_groups (TorchFT's layout) end to end with stand-ins: a shell script for the lighthouse
(it records its arguments and waits) and shell workers, so that the layout's contract is checked
in seconds without torchft (test_torchft.py runs torchft itself):

  * each group's launcher is told REPLICA_GROUP_ID, NUM_REPLICA_GROUPS, TORCHFT_LIGHTHOUSE, its
    store on --master_port + i, and not the launchers' own DDPLAUNCH_REPLICA_GROUP; the lighthouse
    gets --bind 127.0.0.1:<--lighthouse_port>, and is ended with the job;
  * a group's failure restarts that group only (the other's worker keeps its pid);
  * a group that runs out of restarts ends alone, the others keep running, and the job's exit
    code is that group's;
  * a lighthouse that dies while groups run is started again;
  * SIGTERM, or SIGKILL, to the layout's launcher leaves nothing running;
  * a lighthouse program that is not there is a usage error before anything starts.
Every test ends with nothing left running (procs.assert_no_survivors)."""
import os
import re
import signal
import time

import pytest

from pyfixtures import alive, free_port

pytestmark = pytest.mark.timeout(120)

# Records its pid and arguments, exits 1 the first time when $PIDDIR/lighthouse.fail.once exists
# (removing it), then waits to be ended.
LIGHTHOUSE = r"""#!/bin/bash
echo $$ >> "$PIDDIR/lighthouse.pids"
echo "$*" > "$PIDDIR/lighthouse.args"
if [ -e "$PIDDIR/lighthouse.fail.once" ]; then rm -f "$PIDDIR/lighthouse.fail.once"; exit 1; fi
exec sleep 600
"""

# One line per start, "<group> <pid> <its launcher's pid>", in $PIDDIR/starts; its pid in $PIDDIR/pid.g<G>.<n> (so
# that Launches finds every worker); its environment in $PIDDIR/env.g<G>. Then the behaviour
# of its group, named by $PIDDIR/behave.g<G>: "ok" exits 0, "fail-once" exits 1 on its first
# start, "fail" exits 3, "wait FILE" waits for FILE then exits 0, "sleep" waits to be ended.
WORKER = r"""#!/bin/bash
g=$REPLICA_GROUP_ID
n=$(cat "$PIDDIR/starts" 2>/dev/null | grep -c "^$g ")  # 0 before the first start too
echo "$g $$ $PPID" >> "$PIDDIR/starts"
echo $$ > "$PIDDIR/pid.g$g.$n"
env -0 > "$PIDDIR/env.g$g"
read -r what file < "$PIDDIR/behave.g$g"
case "$what" in
  ok) exit 0 ;;
  fail-once) [ "$n" = 0 ] && exit 1; exit 0 ;;
  fail) exit 3 ;;
  wait) while [ ! -e "$PIDDIR/$file" ]; do sleep 0.05; done; exit 0 ;;
  sleep) exec sleep 600 ;;
esac
"""


def layout_args(lx, groups=2, extra=()):
    lighthouse = lx.script("lighthouse", LIGHTHOUSE)
    worker = lx.script("worker", WORKER)
    return ["--replica_groups", str(groups), "--lighthouse", f"{lighthouse} --min_replicas 1",
            "--lighthouse_port", str(free_port()), *extra, "--no_python", worker]


def behave(lx, **groups):
    for name, what in groups.items():
        with open(os.path.join(lx.dir, f"behave.{name}"), "w") as f:
            f.write(what + "\n")


def starts(lx):
    try:
        with open(os.path.join(lx.dir, "starts")) as f:
            return [tuple(int(x) for x in line.split()) for line in f if line.strip()]
    except FileNotFoundError:
        return []


def lighthouse_pids(lx):
    with open(os.path.join(lx.dir, "lighthouse.pids")) as f:
        return [int(x) for x in f.read().split()]


def wait_for(what, predicate, timeout=30):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.05)  # the stand-ins write files; no event tells us
    pytest.fail(f"timed out after {timeout} s waiting for {what}")


def test_each_group_is_told_its_group_port_and_the_lighthouse(lx, procs):
    base = free_port()
    behave(lx, g0="ok", g1="ok")
    args = layout_args(lx, extra=["--master_port", str(base)])
    port = args[args.index("--lighthouse_port") + 1]
    code, out, err = lx.run(args)
    assert code == 0, err
    for g in (0, 1):
        env = lx.read_env(f"env.g{g}")
        assert env["REPLICA_GROUP_ID"] == str(g)
        assert env["NUM_REPLICA_GROUPS"] == "2"
        assert env["TORCHFT_LIGHTHOUSE"] == f"http://127.0.0.1:{port}"
        assert env["MASTER_PORT"] == str(base + g)  # torchft's torchx: --master_port=29600+i
        assert "DDPLAUNCH_REPLICA_GROUP" not in env  # the launchers' own
    with open(os.path.join(lx.dir, "lighthouse.args")) as f:
        assert f.read().split() == ["--min_replicas", "1", "--bind", f"127.0.0.1:{port}"]
    assert "replica groups: 2 launchers (restarts: 10 each)" in err
    assert not alive(lighthouse_pids(lx)[0]), "the lighthouse outlived the job"
    procs.assert_no_survivors()


def test_a_failed_group_restarts_alone(lx, procs):
    # Group 0 runs until group 1 has been restarted: its one worker keeps its pid throughout.
    behave(lx, g0="wait g1.restarted", g1="fail-once")
    p = lx.start(layout_args(lx))
    wait_for("group 1's second start", lambda: [start[0] for start in starts(lx)].count(1) == 2)
    open(os.path.join(lx.dir, "g1.restarted"), "w").close()
    out, err = lx.communicate(p)
    assert p.returncode == 0, err
    assert [start[0] for start in starts(lx)].count(1) == 2, err
    assert [start[0] for start in starts(lx)].count(0) == 1, f"group 0 was restarted: {starts(lx)}"
    assert re.search(r"ddplaunch\[replica 1\]: restarting the job \(restart 1 of 10\)", err), err
    assert "ddplaunch[replica 0]: restarting" not in err
    procs.assert_no_survivors()


def test_a_group_out_of_restarts_ends_alone_and_sets_the_exit_code(lx, procs):
    behave(lx, g0="wait g1.ended", g1="fail")
    p = lx.start(layout_args(lx, extra=["--max_restarts", "1"]))
    wait_for("group 1's second start", lambda: [start[0] for start in starts(lx)].count(1) == 2)
    launcher = [ppid for g, _, ppid in starts(lx) if g == 1][-1]
    wait_for("group 1's launcher to end", lambda: not alive(launcher))
    assert p.poll() is None, "the layout ended with group 0 still running"
    open(os.path.join(lx.dir, "g1.ended"), "w").close()
    out, err = lx.communicate(p)
    m = re.search(r"replica group 1 \(launcher pid \d+\) ended with code (\d+); the other groups keep running", err)
    assert m, err
    assert p.returncode == int(m.group(1)) != 0
    assert [start[0] for start in starts(lx)].count(0) == 1
    procs.assert_no_survivors()


def test_the_lighthouse_is_started_again_when_it_dies(lx, procs):
    open(os.path.join(lx.dir, "lighthouse.fail.once"), "w").close()
    behave(lx, g0="wait done", g1="wait done")
    p = lx.start(layout_args(lx))
    wait_for("the lighthouse's second start", lambda: os.path.exists(os.path.join(lx.dir, "lighthouse.pids"))
             and len(lighthouse_pids(lx)) == 2)
    open(os.path.join(lx.dir, "done"), "w").close()
    out, err = lx.communicate(p)
    assert p.returncode == 0, err
    assert "the lighthouse exited with code 1; starting it again (1 of --max_restarts=10)" in err
    assert not any(alive(pid) for pid in lighthouse_pids(lx))
    procs.assert_no_survivors()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_signal_to_the_layout_leaves_nothing_running(lx, procs, sig):
    behave(lx, g0="sleep", g1="sleep")
    p = lx.start(layout_args(lx, extra=["--shutdown_timeout", "2", "--preemption_grace", "2"]))
    wait_for("both groups' workers", lambda: len(starts(lx)) == 2)
    p.send_signal(sig)
    out, err = lx.communicate(p)
    assert p.returncode == (-signal.SIGKILL if sig == signal.SIGKILL else 128 + signal.SIGTERM), err
    if sig == signal.SIGTERM:
        assert "SIGTERM received: stopping 2 replica groups" in err
    lx.assert_no_survivors()
    assert not any(alive(pid) for pid in lighthouse_pids(lx))
    procs.assert_no_survivors()


def test_dry_run_shows_the_layout_and_starts_nothing(lx, procs):
    code, out, err = lx.run(["--dry-run", *layout_args(lx, extra=["--master_port", "29600"])])
    assert code == 0, err
    assert "replica groups: 2, each its own launcher and restart domain (10 restarts each)\n" in out
    assert "group 1: store port 29601, run id " in out
    assert "group 0's launcher:\n" in out
    assert not os.path.exists(os.path.join(lx.dir, "lighthouse.pids"))
    assert starts(lx) == []
    procs.assert_no_survivors()


def test_a_missing_lighthouse_is_a_usage_error(lx, procs):
    behave(lx, g0="ok", g1="ok")
    code, out, err = lx.run(["--replica_groups", "2", "--lighthouse", "no-such-lighthouse --min_replicas 1",
                             "--no_python", lx.script("worker", WORKER)])
    assert code == 2
    assert ("--lighthouse: 'no-such-lighthouse' is not on PATH; install torchft here (pip install torchft), give the "
            "lighthouse's path, or --lighthouse none with TORCHFT_LIGHTHOUSE naming one that runs elsewhere") in err
    assert starts(lx) == []
    procs.assert_no_survivors()
