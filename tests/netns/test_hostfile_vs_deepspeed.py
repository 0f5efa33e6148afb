"""DeepSpeed's launcher beside `ddplaunch --hostfile`, on the same sshd hosts (issue 44).

The same three network-namespace hosts as test_hostfile_ssh.py (ssh_hosts.py); DeepSpeed 0.19.8
from PyPI in its own venv (bench/deepspeed_venv.sh, made here when missing; CPU accelerator,
no compiled ops) launching through Debian's pdsh over the same OpenSSH, with the same gloo
worker. Two cases for each launcher:
  * failure: rank 2 (host 3) exits 7 at step 5: the launcher's exit code, how long it took, and
    the job's processes left on any host 10 s after the launcher exited;
  * Ctrl-C: the time from the command to every rank running, SIGINT to the launcher, its exit
    code, and what is left 10 s later.
ddplaunch's results are asserted (7 and 130, nothing left); DeepSpeed's are recorded as they are
(its behaviour is the subject, not a bug of ours). The table is printed and, with
DDPLAUNCH_SIDE_BY_SIDE=FILE, written there (bench/RESULTS.md carries a run's).
Whatever a launcher leaves is killed afterwards (by the test's worker path).
"""
import os
import signal
import subprocess
import time

import pytest

from ssh_hosts import CONTROLLER, HOSTS, Controller, LoggedRun, all_running, hostfile, left_running, wait_for, worker

pytestmark = pytest.mark.timeout(900)

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = []


@pytest.fixture(scope="module")
def deepspeed(ddplaunch):
    venv = os.path.join(os.path.dirname(os.path.dirname(ddplaunch)), "venv-deepspeed")
    script = os.path.join(HERE, "..", "..", "bench", "deepspeed_venv.sh")
    r = subprocess.run(["bash", script, venv], capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        pytest.skip(f"deepspeed could not be installed: {r.stderr[-300:]}")
    return os.path.join(venv, "bin", "deepspeed")


class DeepSpeedRun(LoggedRun):
    """`deepspeed --hostfile` in the controller's namespace, through pdsh over the same ssh."""

    def __init__(self, site, deepspeed, tmp, worker_path, port):
        (tmp / ".deepspeed_env").write_text("GLOO_SOCKET_IFNAME=fleet0\n")
        # DeepSpeed's own reachability check runs a bare `ssh host hostname`, ignoring
        # PDSH_SSH_ARGS_APPEND: the key must be in the user's ssh config. An `ssh` first in PATH
        # that adds the same options stands for that config (this machine's ~/.ssh stays as it is).
        bin_dir = tmp / "bin"
        bin_dir.mkdir(exist_ok=True)
        (bin_dir / "ssh").write_text(f"#!/bin/sh\nexec /usr/bin/ssh -i {site.tmp / 'id'} -o StrictHostKeyChecking=no "
                                     "-o UserKnownHostsFile=/dev/null -o LogLevel=ERROR \"$@\"\n")
        (bin_dir / "ssh").chmod(0o755)
        env = dict(os.environ, PDSH_RCMD_TYPE="ssh", PATH=f"{bin_dir}:{os.environ['PATH']}")
        super().__init__(["ip", "netns", "exec", site.ns[CONTROLLER], deepspeed, "--hostfile", hostfile(tmp),
                          "--master_addr", HOSTS[0], "--master_port", str(port), "--no_local_rank", worker_path,
                          str(tmp)], env, tmp, "deepspeed")


def start(which, site, ddplaunch, deepspeed, tmp, w, port):
    if which == "ddplaunch":
        return Controller(site, ddplaunch, tmp, ["--hostfile", hostfile(tmp), w, str(tmp)])
    return DeepSpeedRun(site, deepspeed, tmp, w, port)


def left_after(w, seconds=10):
    time.sleep(seconds)  # what a launcher leaves shows only as processes that stay: no event to wait for
    left = left_running(w)
    subprocess.run(["pkill", "-9", "-f", w], capture_output=True)  # clean up whatever it left
    return left


@pytest.mark.parametrize("which", ["ddplaunch", "deepspeed"])
def test_a_failing_rank(site, ddplaunch, deepspeed, tmp_path, which):
    w = worker(tmp_path, f"fail_{which}", steps=100000, pause=0.1,
               fail="if rank == 2 and step == 5: print('rank 2 fails on purpose', flush=True); sys.exit(7)")
    began = time.monotonic()
    run = start(which, site, ddplaunch, deepspeed, tmp_path, w, 29611)
    code = run.wait()
    took = time.monotonic() - began
    left = left_after(w)
    RESULTS.append((which, "rank 2 exits 7", code, "", f"{took:.1f} s", len(left)))
    if which == "ddplaunch":
        assert code == 7 and not left, (run.text(), left)


@pytest.mark.parametrize("which", ["ddplaunch", "deepspeed"])
def test_ctrl_c(site, ddplaunch, deepspeed, tmp_path, which):
    w = worker(tmp_path, f"long_{which}", steps=100000, pause=0.1)
    began = time.monotonic()
    run = start(which, site, ddplaunch, deepspeed, tmp_path, w, 29612)
    wait_for(lambda: all_running(tmp_path, 3) or run.proc.poll() is not None, 150, "every rank running")
    assert all_running(tmp_path, 3), run.text()
    running = time.monotonic() - began
    os.kill(run.proc.pid, signal.SIGINT)
    stopped = time.monotonic()
    code = run.wait(60)
    took = time.monotonic() - stopped
    left = left_after(w)
    RESULTS.append((which, "Ctrl-C", code, f"{running:.1f} s", f"{took:.1f} s", len(left)))
    if which == "ddplaunch":
        assert code == 130 and not left, (run.text(), left)


def test_print_the_table():
    assert len(RESULTS) == 4, RESULTS
    lines = ["| launcher | case | exit code | command to all ranks running | to the launcher's exit | "
             "job processes left on the hosts 10 s later |", "|---|---|---|---|---|---|"]
    lines += [f"| {w} | {case} | {code} | {running or '-'} | {took} | {left} |"
              for w, case, code, running, took, left in RESULTS]
    table = "\n".join(lines)
    print("\n" + table)
    if os.environ.get("DDPLAUNCH_SIDE_BY_SIDE"):
        with open(os.environ["DDPLAUNCH_SIDE_BY_SIDE"], "w") as f:
            f.write(table + "\n")
