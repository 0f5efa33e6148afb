"""--numa_binding end to end (issue 27): each worker reads its own Cpus_allowed_list.

  * this machine (one NUMA node, no GPU): every mode binds the workers to the node's CPUs the
    launcher may use (exclusive: one share of the cores each);
  * a synthetic topology (DDPLAUNCH_HWLOC_XML, tests/launcher/topology/fixtures/two_cpus.xml: two
    sockets of one CPU each, CPUs 0-1 as here, a fake GPU on socket 1): without GPUs, local rank i
    goes to NUMA node i; with the GPU, the worker goes next to it, on CPU 1;
  * --dry-run shows each worker's CPUs on a larger synthetic machine;
  * a wrong mode, and more workers than GPUs: one line, exit 2.
Workers are `sh -c`, so every run takes milliseconds.

    pytest test_numa.py --ddplaunch=/path/to/ddplaunch
"""
import os
import pathlib

import pytest

pytestmark = pytest.mark.timeout(60)
FIXTURES = pathlib.Path(__file__).resolve().parent / "topology" / "fixtures"
WORKER = ["sh", "-c", 'echo "cpus $LOCAL_RANK $(grep Cpus_allowed_list /proc/self/status | cut -f2)"']


def cpus(out):
    """{local rank: its Cpus_allowed_list} from the workers' lines."""
    found = {}
    for line in out.splitlines():
        _, _, rest = line.partition("cpus ")
        if rest:
            rank, allowed = rest.split()
            found[int(rank)] = allowed
    return found


def ranges(numbers):
    numbers, out = sorted(numbers), []
    for n in numbers:
        if out and out[-1][1] == n - 1:
            out[-1][1] = n
        else:
            out.append([n, n])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in out)


def run_ok(lx, args, env=None):
    code, out, err = lx.run(args, env)
    assert code == 0, err
    return out, err


@pytest.mark.parametrize("mode", ["node", "socket", "core-complex"])
def test_this_machine_whole_node(lx, mode):
    out, _ = run_ok(lx, [f"--numa_binding={mode}", "--nproc_per_node=2", *WORKER])
    mine = ranges(os.sched_getaffinity(0))
    assert cpus(out) == {0: mine, 1: mine}


def test_this_machine_exclusive_splits_the_cores(lx):
    out, _ = run_ok(lx, ["--numa-binding", "exclusive", "--nproc_per_node=2", *WORKER])
    got = cpus(out)
    mine = sorted(os.sched_getaffinity(0))
    if len(mine) < 2:
        pytest.skip("one CPU: exclusive cannot split it")
    assert set(got) == {0, 1} and got[0] != got[1]
    assert got[0] == ranges(mine[: len(mine) // 2 + len(mine) % 2])


def test_pet_variable_and_flag_off(lx):
    out, _ = run_ok(lx, ["--nproc_per_node=1", *WORKER], env={"PET_NUMA_BINDING": "node",
                                                                "DDPLAUNCH_HWLOC_XML": str(FIXTURES / "two_cpus.xml")})
    assert cpus(out) == {0: "1"}
    # Off: the worker keeps the launcher's CPUs.
    out, _ = run_ok(lx, ["--nproc_per_node=1", *WORKER])
    assert cpus(out) == {0: ranges(os.sched_getaffinity(0))}


def test_synthetic_two_sockets(lx):
    env = {"DDPLAUNCH_HWLOC_XML": str(FIXTURES / "two_cpus.xml")}
    out, _ = run_ok(lx, ["--numa_binding=socket", "--nproc_per_node=2", *WORKER], env={**env, "CUDA_VISIBLE_DEVICES": ""})
    assert cpus(out) == {0: "0", 1: "1"}
    out, _ = run_ok(lx, ["--numa_binding=node", "--nproc_per_node=1", *WORKER], env=env)
    assert cpus(out) == {0: "1"}


def test_dry_run_shows_the_bindings(lx):
    env = {"DDPLAUNCH_HWLOC_XML": str(FIXTURES / "two_socket.xml")}
    out, _ = run_ok(lx, ["--dry-run", "--numa_binding=exclusive", "--nproc_per_node=4", *WORKER], env=env)
    lines = [line.strip() for line in out.splitlines() if "--numa_binding" in line]
    assert lines == [
        "cpus (--numa_binding=exclusive): 0-3, NUMA node 0, core slice 1 of 2, next to GPU 0 (0000:18:00.0)",
        "cpus (--numa_binding=exclusive): 4-7, NUMA node 0, core slice 2 of 2, next to GPU 1 (0000:3b:00.0)",
        "cpus (--numa_binding=exclusive): 16-23, NUMA node 2, core slice 1 of 1, next to GPU 2 (0000:86:00.0)",
        "cpus (--numa_binding=exclusive): 24-31, NUMA node 3, core slice 1 of 1, next to GPU 3 (0000:af:00.0)",
    ]


def test_errors_are_one_line_exit_2(lx):
    code, _, err = lx.run(["--numa_binding=rack", "--nproc_per_node=1", *WORKER])
    assert code == 2 and "rack is not a binding mode; use node, socket, exclusive or core-complex" in err
    assert len(err.strip().splitlines()) == 1, err
    env = {"DDPLAUNCH_HWLOC_XML": str(FIXTURES / "two_cpus.xml")}
    code, _, err = lx.run(["--numa_binding=node", "--nproc_per_node=2", *WORKER], env=env)
    assert code == 2 and "1 GPU for 2 workers" in err, err
    assert len(err.strip().splitlines()) == 1, err
