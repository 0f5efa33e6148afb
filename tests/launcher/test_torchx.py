"""TorchX's dist.ddp with ddplaunch in torchrun's place (issue 45; docs/orchestrators/torchx.md).

TorchX (PyPI torchx, pinned below) builds `bash -c "torchrun --rdzv_backend c10d --rdzv_endpoint
<E> --rdzv_id <app id> --nnodes <n or min:max> --nproc_per_node <m> --tee 3 --role '' [--node_rank
<replica> when static] script"` (torchx/components/dist.py), E = localhost:0 on one node, else
${TORCHX_RANK0_HOST:=localhost}:<rdzv_port>. Its local scheduler runs that line as it is, with the
PATH it is given: a directory whose `torchrun` is ddplaunch comes first, so every call below is
TorchX's own, unchanged. Several replicas (-j 2x2) run on this one machine as TorchX's local
scheduler does: both launchers guess they host the store at localhost, and the second joins the
first's, as torchrun's c10d falls back to a client.

TorchX lives in a venv of this suite's own (<build>/peer-venvs/torchx, made on first use with
pip from PyPI: the test set-up path on a fresh machine), not in the project's .venv.

    python -m pytest test_torchx.py --ddplaunch=/path/to/ddplaunch
"""
import fcntl
import json
import os
import subprocess
import sys
import textwrap

import pytest

from pyfixtures import free_port

pytestmark = pytest.mark.timeout(600)

TORCHX = "torchx==0.7.0"

WORKER = textwrap.dedent("""\
    import json, os
    keys = ["RANK", "WORLD_SIZE", "LOCAL_RANK", "GROUP_RANK", "ROLE_NAME", "TORCHELASTIC_RUN_ID",
            "TORCH_DISTRIBUTED_DEBUG", "NCCL_DESYNC_DEBUG", "LOGLEVEL", "TORCHX_TRACKING_EXPERIMENT_NAME"]
    print("ENV " + json.dumps({k: os.environ.get(k) for k in keys}), flush=True)
    """)


@pytest.fixture(scope="session")
def torchx_bin(ddplaunch):
    """The torchx command of a venv made for this suite beside the build (once; a lock for parallel runs)."""
    venv = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(ddplaunch))), "peer-venvs", "torchx")
    os.makedirs(os.path.dirname(venv), exist_ok=True)
    with open(venv + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        marker = os.path.join(venv, "installed-" + TORCHX)
        if not os.path.exists(marker):
            subprocess.run([sys.executable, "-m", "venv", "--clear", venv], check=True, timeout=120)
            pip = subprocess.run([os.path.join(venv, "bin", "python"), "-m", "pip", "install", "-q",
                                  "--disable-pip-version-check", TORCHX], capture_output=True, text=True, timeout=480)
            assert pip.returncode == 0, f"pip install {TORCHX} into {venv} failed (PyPI reachable?):\n{pip.stderr}"
            open(marker, "w").close()
    return os.path.join(venv, "bin", "torchx")


@pytest.fixture
def shim(ddplaunch, tmp_path):
    """A directory whose torchrun is ddplaunch."""
    d = tmp_path / "shim"
    d.mkdir()
    os.symlink(os.path.abspath(ddplaunch), d / "torchrun")
    return str(d)


def run_torchx(procs, torchx_bin, shim, tmp_path, *component_args):
    (tmp_path / "train.py").write_text(WORKER)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PET_", "TORCHELASTIC_", "DDPLAUNCH_", "SLURM_", "TORCHX_"))}
    env.pop("LOGLEVEL", None)
    env["PATH"] = shim + os.pathsep + os.path.dirname(torchx_bin) + os.pathsep + env.get("PATH", "")
    env["PYTHON_EXEC"] = sys.executable  # the workers' interpreter (torchrun's variable)
    rc, out, err, _ = procs.run([torchx_bin, "run", "-s", "local_cwd", "--log", "dist.ddp", *component_args,
                                 "--script", "train.py"], timeout=240, env=env, cwd=str(tmp_path))
    workers = [json.loads(line.split("ENV ", 1)[1]) for line in (out + err).splitlines() if "ENV {" in line]
    return rc, out + err, workers


def test_one_node_two_workers(procs, torchx_bin, shim, tmp_path):
    # localhost:0 (a free port), --tee 3, --role "" and the app id as --rdzv_id.
    rc, text, workers = run_torchx(procs, torchx_bin, shim, tmp_path, "-j", "1x2")
    assert rc == 0, text
    assert sorted(w["RANK"] for w in workers) == ["0", "1"], text
    assert {w["WORLD_SIZE"] for w in workers} == {"2"}
    assert {w["ROLE_NAME"] for w in workers} == {""}  # torchrun gives the empty role as it is
    run_ids = {w["TORCHELASTIC_RUN_ID"] for w in workers}
    assert len(run_ids) == 1 and run_ids.pop().startswith("train-"), workers  # TorchX's app id
    assert {w["LOGLEVEL"] for w in workers} == {"WARNING"}
    assert {w["TORCHX_TRACKING_EXPERIMENT_NAME"] for w in workers} == {"default-experiment"}
    procs.assert_no_survivors()


def test_two_replicas_c10d_with_debug(procs, torchx_bin, shim, tmp_path):
    # ${TORCHX_RANK0_HOST:=localhost}:<port> for both replicas on this machine; --debug's variables.
    rc, text, workers = run_torchx(procs, torchx_bin, shim, tmp_path, "-j", "2x2", "--rdzv_port", str(free_port()),
                                   "--debug", "True")
    assert rc == 0, text
    assert sorted(w["RANK"] for w in workers) == ["0", "1", "2", "3"], text
    assert {w["WORLD_SIZE"] for w in workers} == {"4"}
    assert sorted(w["GROUP_RANK"] for w in workers) == ["0", "0", "1", "1"]
    assert {w["TORCH_DISTRIBUTED_DEBUG"] for w in workers} == {"DETAIL"}
    assert {w["NCCL_DESYNC_DEBUG"] for w in workers} == {"1"}
    # The second launcher found the port taken and joined the first's store (said at info level,
    # which TorchX's LOGLEVEL=WARNING hides); before, it exited 2 "cannot listen on ...".
    assert "cannot listen" not in text, text
    procs.assert_no_survivors()


def test_elastic_range_and_static_backend(procs, torchx_bin, shim, tmp_path):
    # -j 1:2x1 → --nnodes 1:2; --rdzv_backend static adds --node_rank <replica id>.
    rc, text, workers = run_torchx(procs, torchx_bin, shim, tmp_path, "-j", "1:2x1", "--rdzv_port", str(free_port()))
    assert rc == 0, text
    assert sorted(w["RANK"] for w in workers) == ["0", "1"], text
    rc, text, workers = run_torchx(procs, torchx_bin, shim, tmp_path, "-j", "2x1", "--rdzv_backend", "static",
                                   "--rdzv_port", str(free_port()))
    assert rc == 0, text
    assert sorted((w["GROUP_RANK"], w["RANK"]) for w in workers) == [("0", "0"), ("1", "1")], text
    procs.assert_no_survivors()
