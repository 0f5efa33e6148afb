"""[gpu] The GPU backends with ranks as processes: init() from ddplaunch's environment, the
example trainer converging on both backends (nccl-c10d, the default, and nccl), and a peer killed
mid-collective that the other rank notices and names within the collective timeout.

Two ranks on two GPUs. On a host with one GPU the runs under ddplaunch use one rank (ddplaunch
gives LOCAL_RANK i the i-th visible GPU), and the hand-started ranks of the peer-death test share
the GPU with NCCL_MULTI_RANK_GPU_ENABLE=1 (a NCCL that refuses shared GPUs fails that test with
its own message). Without a CUDA device the module is skipped (ctest's command exits 77 first).
"""
import os
import re
import subprocess
import time

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

from pyfixtures import free_port  # noqa: E402

GPUS = torch.cuda.device_count()
NPROC = 2 if GPUS >= 2 else 1  # ddplaunch gives LOCAL_RANK i the i-th visible GPU


def gpu_env(**extra):
    env = dict(os.environ, **extra)
    if GPUS < 2:
        env["NCCL_MULTI_RANK_GPU_ENABLE"] = "1"
        env["CUDA_VISIBLE_DEVICES"] = env.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]
    return env


@pytest.mark.parametrize("backend", ["nccl-c10d", "nccl"])
def test_the_trainer_converges_on_the_gpu_backend(ddplaunch, train, backend):
    r = subprocess.run([ddplaunch, f"--nproc_per_node={NPROC}", f"--master_port={free_port()}", train, "--backend", backend,
                        "--epochs", "3"], capture_output=True, text=True, timeout=600,
                       env=gpu_env(DDPLAUNCH_BACKEND=backend))
    assert r.returncode == 0, r.stderr
    assert f"train: {NPROC} rank(s), backend {backend}" in r.stdout, r.stdout
    accuracy = float(re.search(r"final: loss=[\d.]+ accuracy=([\d.]+)", r.stdout).group(1))
    assert accuracy > 0.9, r.stdout


def test_the_default_gpu_backend_is_nccl_c10d(ddplaunch, train):
    r = subprocess.run([ddplaunch, f"--nproc_per_node={NPROC}", f"--master_port={free_port()}", train, "--epochs", "1"],
                       capture_output=True, text=True, timeout=600, env=gpu_env())
    assert r.returncode == 0, r.stderr
    assert "backend nccl-c10d" in r.stdout, r.stdout


@pytest.mark.parametrize("backend", ["nccl", "nccl-c10d"])
def test_a_peer_killed_mid_training_is_noticed_and_named_within_the_timeout(start_store, train, backend):
    # Ranks started by hand against a bare store: no launcher tears the job down, so the
    # surviving rank's communicator alone must notice (its watchdog, within --timeout 20).
    server = start_store()
    common = dict(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(server.port), WORLD_SIZE="2", LOCAL_WORLD_SIZE="2",
                  GROUP_RANK="0", TORCHELASTIC_RESTART_COUNT="0")
    ranks = []
    for r in (0, 1):
        env = gpu_env(RANK=str(r), LOCAL_RANK=str(r if GPUS > 1 else 0), **common)
        ranks.append(subprocess.Popen([train, "--backend", backend, "--epochs", "1000", "--timeout", "20",
                                       "--crash-at-step", "30", "--crash-rank", "1"],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env))
    try:
        code1 = ranks[1].wait(timeout=300)
        died = time.monotonic()
        code0 = ranks[0].wait(timeout=120)
        noticed = time.monotonic() - died
        err0 = ranks[0].stderr.read()
    finally:
        for p in ranks:
            p.kill()
    assert code1 != 0
    assert code0 != 0, err0
    assert noticed < 20 + 30, (noticed, err0)  # the timeout, and the teardown's slack
    # nccl names the ranks that never arrived; ProcessGroupNCCL names the collective and its timeout.
    assert re.search(r"rank 1|Watchdog caught collective operation timeout|NCCL", err0), err0
