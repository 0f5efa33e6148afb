"""--nproc_per_node=cpu and auto (no GPU here) count the CPUs this process may use (issue 26):

  * under taskset -c 0, one worker;
  * in a cgroup limited to one CPU's bandwidth (v2 cpu.max where the cpu controller is on the
    unified hierarchy, else v1 cpu.cfs_quota_us, as on hybrid hosts), one worker; the log line
    names the file that set the limit;
  * without either, one worker per CPU of the affinity mask;
  * CUDA_VISIBLE_DEVICES=0,3 on a machine without an NVIDIA driver (issue 42, a container started
    without --gpus): --nproc_per_node=gpu exits 2 in one line naming the variable's value, the
    missing driver and the fix, and starts nothing; auto counts the CPUs and says why.
Each run is real: the workers print RANK/WORLD_SIZE.

    pytest test_cpu_budget.py --ddplaunch=/path/to/ddplaunch
"""
import os
import subprocess
import uuid

import pytest

TIMEOUT = 60
pytestmark = pytest.mark.timeout(120)
WORKER = ["sh", "-c", 'echo "worker $RANK/$WORLD_SIZE"']


def workers(out):
    """The workers' lines, without the rank prefix ("[0]:") a multi-worker run adds."""
    return sorted(line.partition("]:")[2] or line for line in out.splitlines() if "worker " in line)


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)
    assert p.returncode == 0, p.stderr
    return p


def test_taskset_limits_cpu_and_auto(ddplaunch):
    mask = len(os.sched_getaffinity(0))
    p = run([ddplaunch, "--nproc_per_node=cpu", *WORKER])
    assert workers(p.stdout) == [f"worker {r}/{mask}" for r in range(mask)]
    for flag in ("cpu", "auto"):
        p = run(["taskset", "-c", "0", ddplaunch, f"--nproc_per_node={flag}", *WORKER])
        assert workers(p.stdout) == ["worker 0/1"], p.stderr
        assert f"--nproc_per_node={flag}: 1 worker(s)" in p.stderr and "(affinity: 1)" in p.stderr


@pytest.mark.skipif(os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/dxg"), reason="an NVIDIA driver is here")
def test_gpus_named_without_a_driver(ddplaunch, tmp_path):
    marker = tmp_path / "started"
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="0,3")
    p = subprocess.run([ddplaunch, "--nproc_per_node=gpu", "sh", "-c", f"touch {marker}"], capture_output=True,
                       text=True, timeout=TIMEOUT, env=env)
    assert p.returncode == 2 and p.stdout == "", p
    assert p.stderr.splitlines() == [
        "ddplaunch: --nproc_per_node=gpu but CUDA_VISIBLE_DEVICES=0,3 names 2 GPU(s) and no NVIDIA driver: no "
        "/dev/nvidiactl; give the job the GPUs (docker run --gpus all, or install the NVIDIA driver), or give "
        "--nproc_per_node=N or cpu"], p.stderr
    assert not marker.exists(), "a worker started"
    p = subprocess.run(["taskset", "-c", "0", ddplaunch, "--nproc_per_node=auto", *WORKER], capture_output=True,
                       text=True, timeout=TIMEOUT, env=env)
    assert p.returncode == 0, p.stderr
    assert workers(p.stdout) == ["worker 0/1"], p.stdout
    line = next(line for line in p.stderr.splitlines() if "--nproc_per_node=auto" in line)
    assert line.startswith("ddplaunch: --nproc_per_node=auto: 1 worker(s), one per CPU this process may use: "), line
    assert line.endswith("; no usable GPU (CUDA_VISIBLE_DEVICES=0,3 but no NVIDIA driver: no /dev/nvidiactl) and no "
                         "Intel XPU"), line


def cpu_cgroup_parent():
    """A directory where a child cgroup can get a CPU limit: (parent, v2) or None."""
    with open("/proc/self/mountinfo") as f:
        mounts = [line.split(" - ") for line in f if " - cgroup" in line]
    for head, tail in mounts:
        fstype, _, options = tail.split()[:3]
        point = head.split()[4]
        if fstype == "cgroup2" and "cpu" in open(os.path.join(point, "cgroup.subtree_control")).read().split():
            return point, True
        if fstype == "cgroup" and "cpu" in options.split(","):
            return point, False
    return None


@pytest.fixture
def one_cpu_cgroup():
    if os.geteuid() != 0:
        pytest.skip("needs root to make a cgroup")
    found = cpu_cgroup_parent()
    if not found:
        pytest.skip("no cgroup hierarchy with the cpu controller")
    parent, v2 = found
    path = os.path.join(parent, f"ddp_cpu_budget_{uuid.uuid4().hex[:8]}")
    try:
        os.mkdir(path)
    except OSError as e:
        pytest.skip(f"cannot make a cgroup in {parent}: {e}")
    try:
        if v2:
            limit = os.path.join(path, "cpu.max")
            open(limit, "w").write("100000 100000")
        else:
            limit = os.path.join(path, "cpu.cfs_quota_us")
            open(os.path.join(path, "cpu.cfs_period_us"), "w").write("100000")
            open(limit, "w").write("100000")
        yield path, limit
    finally:
        # Everything started in it has exited (run() waits); an empty cgroup goes with rmdir.
        os.rmdir(path)


def test_a_cgroup_cpu_limit_caps_cpu(ddplaunch, one_cpu_cgroup):
    path, limit = one_cpu_cgroup
    enter = f'echo $$ > {path}/cgroup.procs && exec "$@"'
    p = run(["sh", "-c", enter, "sh", ddplaunch, "--nproc_per_node=cpu", *WORKER])
    assert workers(p.stdout) == ["worker 0/1"], p.stderr
    assert f"cgroup limit 1 CPUs in {limit}" in p.stderr, p.stderr
