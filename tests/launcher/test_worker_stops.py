"""How the launcher stops workers that have helpers, or that the kernel will not let go.

  * a preemption (SIGTERM to the launcher) with --preemption_grace: a PyTorch script whose
    DataLoader has num_workers=2 saves its checkpoint on SIGTERM while still reading batches; the
    SIGTERM reaches the script's main process only, so its DataLoader workers live until the save
    is done (signalled to the whole group, they died first and the loader's SIGCHLD handler raised
    "DataLoader worker ... exited unexpectedly" in the middle of the save).
    pytest test_worker_stops.py --ddplaunch=/path/to/ddplaunch
"""
import os
import signal
import sys
import time

import pytest

from launches import Launches
from pyfixtures import note

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def launches(ddplaunch, procs, tmp_path):
    return Launches(ddplaunch, procs, tmp_path)


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
