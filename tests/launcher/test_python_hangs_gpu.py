"""[gpu] The hang and desync reports of test_python_hangs.py with NCCL: the same scripts with
BACKEND=nccl, each rank on its own GPU (two GPUs, or one shared with NCCL_MULTI_RANK_GPU_ENABLE=1).
ProcessGroupNCCL records into its own Flight Recorder, read through the same worker server.
Without a CUDA device the module is skipped (ctest's command exits 77 first).
"""
from __future__ import annotations

import os
import re

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

from test_python_hangs import DESYNC, SLEEPER, assert_desync, line_of, py_env  # noqa: E402

GPUS = torch.cuda.device_count()


def gpu_env(**extra):
    env = py_env(BACKEND="nccl", **extra)
    if GPUS < 2:
        env["NCCL_MULTI_RANK_GPU_ENABLE"] = "1"
        env["CUDA_VISIBLE_DEVICES"] = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]
    return env


def test_a_rank_sleeping_before_an_nccl_all_reduce_is_named(launches):
    prog = launches.script("sleeper.py", SLEEPER)
    rc, _, err = launches.run(["--nproc_per_node=2", "--hang_timeout=5", prog], env=gpu_env(LATE_RANK="1"),
                              timeout=300)
    assert rc == 124, err
    assert "nccl:all_reduce" in err, err
    assert re.search(r"rank 1 \(node 0[^)]*\): never entered it", err), err
    assert f'sleeper.py", line {line_of(SLEEPER, "LATE LINE")}' in err, err
    launches.assert_no_survivors()


def test_an_nccl_desync_names_both_call_sites(launches):
    prog = launches.script("desync.py", DESYNC)
    rc, _, err = launches.run(["--nproc_per_node=2", "--hang_timeout=5", prog], env=gpu_env(), timeout=300)
    assert rc == 124, err
    assert_desync(err, backend="nccl")
    launches.assert_no_survivors()
