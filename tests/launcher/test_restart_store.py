"""A restarted round's PyTorch workers meet in a store without the last round's keys
(launcher/rdzv/workers_keys.hpp; docs/resilience.md "Restarts and the workers' store").

torch assumes a fresh store per attempt, but every round's workers meet in node 0's store: before
ddplaunch deleted the workers' keys between rounds, gloo's workers in the restarted round read the
dead rank's address of the round before and failed (`connectFullMesh ... Connection refused`) or
hung. One job, plain PyTorch gloo workers (`init_process_group("gloo")`, env://): rank 1 fails after
the init in round 0, `--max_restarts=1`; round 1 must succeed and the job exit 0.
    pytest test_restart_store.py --ddplaunch=/path/to/ddplaunch
"""
import os
import sys

import pytest

pytestmark = pytest.mark.timeout(300)

WORKER = """\
import os, sys
import torch, torch.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()
with open(os.path.join(os.environ["PIDDIR"], "pid.%d" % rank), "w") as f:
    f.write(str(os.getpid()))
if rank == 1 and os.environ["TORCHELASTIC_RESTART_COUNT"] == "0":
    sys.exit(1)
t = torch.ones(4)
dist.all_reduce(t)
assert t[0].item() == 2, t
print("all_reduce ok in round", os.environ["TORCHELASTIC_RESTART_COUNT"], flush=True)
"""


def test_a_restarted_gloo_job_does_not_read_the_last_rounds_keys(lx):
    prog = lx.script("restarted.py", WORKER)
    env = {"PYTHON_EXEC": sys.executable, "OMP_NUM_THREADS": "1"}
    # The grace is short: round 0's rank 0 waits in all_reduce for the rank that exited.
    rc, out, err = lx.run(["--nproc_per_node=2", "--max_restarts=1", "--shutdown_timeout=2", prog], env=env,
                          timeout=240)
    assert rc == 0, err
    assert "round 0 failed: rank 1" in err, err
    assert "connectFullMesh" not in err and "Connection refused" not in err, err
    assert out.count("all_reduce ok in round 1") == 2, out
    assert "key(s) the workers of the last round left" in err, err
    lx.assert_no_survivors()
