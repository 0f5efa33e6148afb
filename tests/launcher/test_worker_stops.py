"""How the launcher stops workers that have helpers, or that the kernel will not let go.

  * a preemption (SIGTERM to the launcher) with --preemption_grace: a PyTorch script whose
    DataLoader has num_workers=2 saves its checkpoint on SIGTERM while still reading batches; the
    SIGTERM reaches the script's main process only, so its DataLoader workers live until the save
    is done (signalled to the whole group, they died first and the loader's SIGCHLD handler raised
    "DataLoader worker ... exited unexpectedly" in the middle of the save).
  * a worker stuck in the kernel (state D, on a FUSE mount that never answers: stuck_fuse.py)
    after SIGKILL: named with its pid, rank and wchan --unkillable_timeout later, no new round on
    this host though restarts are left, exit 71, the launcher's teardown bounded; the test then
    aborts the FUSE connection, so the worker dies and nothing is left (root only, else skipped).
  * the timeouts in force and their nesting warnings at start (--log_level info, --failure_budget).
    pytest test_worker_stops.py --ddplaunch=/path/to/ddplaunch
"""
import glob
import os
import signal
import subprocess
import sys
import time

import pytest

from pyfixtures import note

pytestmark = pytest.mark.timeout(180)


# Saves on SIGTERM, reading 6 more batches (~1.5 s) as a step in flight would, then writes
# "saved". Every process (the script and its loader's workers) writes PIDDIR/pid.*.
DATALOADER_SCRIPT = r"""
import os, signal, sys, time
import torch
from torch.utils.data import DataLoader, Dataset

piddir = os.environ["PIDDIR"]
def note_pid(name):
    with open(os.path.join(piddir, name), "w") as f:
        f.write(str(os.getpid()))

stop = False
def on_term(signo, frame):
    global stop
    stop = True
signal.signal(signal.SIGTERM, on_term)

class Slow(Dataset):
    def __len__(self):
        return 1 << 20
    def __getitem__(self, i):
        time.sleep(0.05)
        return torch.tensor([i], dtype=torch.float32)

loader = DataLoader(Slow(), batch_size=1, num_workers=2,
                    worker_init_fn=lambda wid: note_pid(f"pid.loader{wid}"))
note_pid("pid.main")
model = torch.nn.Linear(1, 1)
batches = iter(loader)
for step in range(1 << 20):
    model(next(batches)).sum().backward()
    if step == 4:
        open(os.path.join(piddir, "training"), "w").close()
    if stop:
        for _ in range(6):
            next(batches)
        torch.save(model.state_dict(), os.path.join(piddir, "model.pt"))
        with open(os.path.join(piddir, "checkpoint"), "w") as f:
            f.write(f"saved at step {step}\n")
        sys.exit(0)
"""


def test_preemption_save_with_dataloader_workers(launches, tmp_path):
    pytest.importorskip("torch")
    script = launches.script("loader.py", DATALOADER_SCRIPT)
    p = launches.start(["--shutdown_timeout=1", "--preemption_grace=60", "--no_python", sys.executable, script])
    end = time.monotonic() + 90
    while not (tmp_path / "training").exists():  # no event for "the script reached step 4"
        if p.poll() is not None or time.monotonic() > end:
            out, err = launches.communicate(p)
            pytest.fail(f"the script did not start training (exit {p.returncode}):\n{err}")
        time.sleep(0.1)
    loaders = [int((tmp_path / f"pid.loader{i}").read_text()) for i in range(2)]
    p.send_signal(signal.SIGTERM)
    _, err = launches.communicate(p, timeout=90)
    note(f"preemption with DataLoader workers: exit {p.returncode}; stderr:\n{err}")
    assert "exited unexpectedly" not in err, err
    assert (tmp_path / "checkpoint").exists(), f"the preemption checkpoint was lost:\n{err}"
    assert (tmp_path / "checkpoint").read_text().startswith("saved"), err
    assert p.returncode == 128 + signal.SIGTERM, err
    assert "sending SIGKILL" not in err, err
    assert len(loaders) == 2
    launches.assert_no_survivors()


# Rank 0 stats the file the FUSE server never answers; rank 1 fails once rank 0 waits on it.
STUCK_WORKER = r"""
import os, sys, time
piddir = os.environ["PIDDIR"]
rank, restart = os.environ["RANK"], os.environ["TORCHELASTIC_RESTART_COUNT"]
with open(os.path.join(piddir, f"pid.{rank}.{restart}"), "w") as f:
    f.write(str(os.getpid()))
if rank == "0":
    os.stat(os.path.join(os.environ["STUCK_MOUNT"], "stuck"))
    sys.exit(0)
while not os.path.exists(os.environ["STUCK_MARKER"]):  # no event for another process's file
    time.sleep(0.02)
sys.exit(3)
"""


class StuckMount:
    """A mount whose "stuck" never answers (stuck_fuse.py); release() aborts its connection (the
    stuck worker dies) and unmounts it."""

    def __init__(self, server, mount, marker):
        self.server, self.mount, self.marker = server, mount, marker

    def release(self):
        if self.server.poll() is None:
            self.server.send_signal(signal.SIGTERM)
        self.server.wait(timeout=20)
        assert str(self.mount) not in open("/proc/mounts").read(), "the FUSE mount was left behind"


@pytest.fixture
def stuck_mount(tmp_path, procs):
    if os.geteuid() != 0 or not os.path.exists("/dev/fuse"):
        pytest.skip("needs root and /dev/fuse to mount a FUSE file system")
    mount, marker = tmp_path / "mnt", tmp_path / "stuck_read"
    mount.mkdir()
    server = procs.start([sys.executable, os.path.join(os.path.dirname(__file__), "stuck_fuse.py"), str(mount),
                          str(marker)], stdout=subprocess.PIPE, text=True)
    line = server.stdout.readline().strip()
    if line != "ready":
        server.wait(timeout=10)
        pytest.skip(f"cannot mount a FUSE file system here: {line}")
    stuck = StuckMount(server, mount, marker)
    try:
        yield stuck
    finally:
        stuck.release()


def test_a_worker_the_kernel_holds_is_named_and_its_host_not_reused(launches, tmp_path, stuck_mount):
    mount, marker = stuck_mount.mount, stuck_mount.marker
    worker = launches.script("stuck.py", STUCK_WORKER)
    started = time.monotonic()
    p = launches.start(["--nproc_per_node=2", "--max_restarts=2", "--shutdown_timeout=1", "--unkillable_timeout=2",
                        "--no_python", sys.executable, worker],
                       env={"STUCK_MOUNT": str(mount), "STUCK_MARKER": str(marker)})
    _, err = launches.communicate(p, timeout=90)
    seconds = time.monotonic() - started
    note(f"a worker in state D: exit {p.returncode} in {seconds:.2f} s; stderr:\n{err}")
    stuck = int((tmp_path / "pid.0.0").read_text())
    assert p.returncode == 71, err
    assert f"worker rank 0 (local rank 0, pid {stuck}) on " in err, err
    assert "outlived SIGKILL by 2 s: uninterruptible sleep (state D) in the kernel function request_wait_answer" \
        in err, err
    assert "no new round starts on" in err and "the launcher exits 71" in err, err
    assert "restarting the job" not in err, err
    assert sorted(n for n in os.listdir(tmp_path) if n.startswith("pid.")) == ["pid.0.0", "pid.1.0"], err
    with open(f"/proc/{stuck}/stat") as f:  # still held: the launcher did not wait for it
        assert f.read().rsplit(")", 1)[1].split()[0] == "D"
    assert seconds < 40, seconds
    stuck_mount.release()
    launches.assert_no_survivors(timeout=10)
    remove_job_cgroups(p.pid)


def remove_job_cgroups(launcher_pid, timeout=10):
    """The job's cgroup (ddplaunch-<launcher pid>-<run id>) outlives a launcher that gave up on a
    held worker: its reaper could not remove it while the worker was in it. Removed here, once the
    worker is gone (a cgroup empties a moment after its last process exits)."""
    left = glob.glob(f"/sys/fs/cgroup/ddplaunch-{launcher_pid}-*") + \
        glob.glob(f"/sys/fs/cgroup/*/ddplaunch-{launcher_pid}-*")
    end = time.monotonic() + timeout
    while left and time.monotonic() < end:
        for path in list(left):
            try:
                os.rmdir(path)
                left.remove(path)
            except FileNotFoundError:
                left.remove(path)
            except OSError:
                pass  # EBUSY: its last process has not left yet
        time.sleep(0.1)  # no event says when a cgroup becomes empty short of cgroup.events + inotify
    assert left == [], f"the job's cgroup could not be removed: {left}"


def test_the_timeouts_in_force_are_said_at_start(launches):
    # With --log_level info: the table (config/failure_budget.hpp), and the one-line warning.
    code, _, err = launches.run(["--log_level=info", "--hang_timeout=900", "--no_python", "true"])
    note(f"timeouts at start: exit {code}; stderr:\n{err}")
    assert code == 0, err
    assert "ddplaunch: timeouts in force:\n" in err, err
    assert "ddplaunch:   hang                   630 s    the collective timeout" in err, err
    assert "timeouts do not nest: --hang_timeout=900 s is not shorter than the collective timeout" in err, err
    # Without it, only the warning; with --failure_budget, the budget's values and the workers' heartbeat.
    code, _, err = launches.run(["--hang_timeout=900", "--no_python", "true"])
    assert code == 0 and "timeouts in force" not in err and "timeouts do not nest" in err, err
    code, _, err = launches.run(["--failure_budget=120", "--no_python", "true"], env={
        "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC": None})
    assert code == 0, err
    assert "timeouts in force (--failure_budget=120 s):" in err, err
    assert "NCCL heartbeat         120 s    TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC=120" in err, err
    assert "timeouts do not nest" not in err, err
