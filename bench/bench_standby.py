"""A node lost with a spare at hand: ddplaunch's standby nodes against torchrun's elastic restart
and, where installed (bench/peers.py), NVIDIA's ft_launcher's, with torchrun's flags.

Three launchers on this machine (loopback "nodes", a free TCP port, --nnodes=2:3
--nproc_per_node=2 --max_restarts=1, last_call_timeout=1 s for both). The workers are Python
with torch: each notes when its process started, joins a gloo process group and all_reduces a small
tensor every 50 ms until a `finish` file appears. After every rank of the first attempt is in the
process group, the benchmark kills one node outright: its launcher and every worker under it, with
SIGKILL at the same instant (a machine gone). The survivors' collectives fail, their launchers
restart the job, and the benchmark waits for every rank of the new attempt.
   running again = max(process start of each new rank) - kill
   in the group  = max(init_process_group returned in each new rank) - kill  (adds torch's import)
ddplaunch: --active_nodes=2, so the third node is a standby (world size 4 before and after: the
standby takes the lost node's place); node 0 hosts the store and the active non-host node is
killed. torchrun (python -m torch.distributed.run): --rdzv_backend=c10d on 127.0.0.1:PORT; it has
no standby, so all three nodes run workers (world size 6) and the restart continues with two
(world size 4); a node that does not host the c10d store is killed. Everything else at defaults.
The runs alternate (ddplaunch, torchrun, ...). Reports only; nothing is asserted.
Writes a Markdown section to stdout.   python bench_standby.py BUILD_BIN_DIR [--quick]
"""
import glob
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from bench_recovery import DDPLAUNCH, PY, QUICK, free_port, interleaved, kill_leftovers, tail
from peers import FT_LAUNCHER, bar_plot, ft_available, ft_missing_note, ft_version, launchers

REPS = 2 if QUICK else 3
TIMEOUT = 180  # seconds for one job; nothing may hang the benchmark
ENV = dict(os.environ, OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo", PYTHON_EXEC=PY)

# Attempt 1 is recognised by the `killed` file the benchmark writes before the kill (torchrun does
# not count a restart caused by a node re-joining, so TORCHELASTIC_RESTART_COUNT cannot tell).
WORKER = r"""
import os, time
started = time.time()
d = os.environ["STANDBY_DIR"]
attempt = 1 if os.path.exists(os.path.join(d, "killed")) else 0
rank = os.environ["RANK"]
from datetime import timedelta
import torch, torch.distributed as dist
# The launcher's store at MASTER_ADDR:MASTER_PORT, with keys of this attempt's own: torchrun's
# workers meet in one store for every attempt, where the first attempt's gloo addresses stay
# (ddplaunch deletes them between rounds; the same worker runs under every launcher). Where the
# launcher says it hosts no store there (TORCHELASTIC_USE_AGENT_STORE other than True: ft_launcher
# 0.4.1's c10d rendezvous), rank 0 hosts it, as init_process_group("env://") would.
own_store = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True"
hosts = own_store and rank == "0"
# With a world size every client counts itself in, which the host waits for.
store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=hosts,
                      world_size=int(os.environ["WORLD_SIZE"]) if own_store else None, timeout=timedelta(seconds=60))
dist.init_process_group("gloo", store=dist.PrefixStore(f"bench/attempt_{attempt}", store), rank=int(rank),
                        world_size=int(os.environ["WORLD_SIZE"]))
joined = time.time()
with open(os.path.join(d, f"a{attempt}_{rank}.tmp"), "w") as f:
    f.write(f"{started} {joined} {os.environ['WORLD_SIZE']} {os.getppid()}\n")
os.rename(os.path.join(d, f"a{attempt}_{rank}.tmp"), os.path.join(d, f"a{attempt}_{rank}"))
# The ranks stop together: each all_reduce also carries whether a rank has seen the finish file, so
# none leaves while another is inside the next collective (it would fail on the closed connection).
t = torch.zeros(1)
while True:
    t.fill_(1.0 if os.path.exists(os.path.join(d, "finish")) else 0.0)
    dist.all_reduce(t)
    if t.item() > 0:
        break
    time.sleep(0.05)
dist.destroy_process_group()
# Where rank 0 hosts the store, it must outlive the others' last use of it.
store.add("bench/done", 1)
while hosts and int(store.add("bench/done", 0)) < int(os.environ["WORLD_SIZE"]):
    time.sleep(0.02)
"""


def command(name, g, port, run_id, prog):
    if name == "ddplaunch":
        return [DDPLAUNCH, "--nnodes=2:3", "--active_nodes=2", "--nproc_per_node=2", f"--node_rank={g}",
                "--master_addr=127.0.0.1", f"--master_port={port}", f"--rdzv_id={run_id}", "--max_restarts=1",
                "--rdzv_conf", "last_call_timeout=1", prog]
    front = [FT_LAUNCHER] if name == "ft_launcher" else [PY, "-m", "torch.distributed.run"]
    return front + ["--nnodes=2:3", "--nproc-per-node=2", "--rdzv_backend=c10d",
                    f"--rdzv_endpoint=127.0.0.1:{port}", f"--rdzv_id={run_id}", "--max-restarts=1",
                    "--rdzv_conf=last_call_timeout=1", prog]


def children():
    """pid -> parent pid, for every process."""
    out = {}
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/stat") as f:
                    out[int(pid)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass  # exited while we looked
    return out


def tree(root):
    parents, found = children(), {root}
    grew = True
    while grew:
        grew = False
        for pid, ppid in parents.items():
            if ppid in found and pid not in found:
                found.add(pid)
                grew = True
    return found


def records(d, attempt):
    out = {}
    for path in glob.glob(os.path.join(d, f"a{attempt}_*")):
        if path.endswith(".tmp"):
            continue
        started, joined, world, ppid = open(path).read().split()
        out[int(path.rsplit("_", 1)[1])] = (float(started), float(joined), int(world), int(ppid))
    return out


def wait_all(d, attempt, deadline, procs):
    """Blocks until every rank of `attempt` wrote its record (polling: files give no event)."""
    while time.time() < deadline:
        got = records(d, attempt)
        if got and len(got) == next(iter(got.values()))[2]:
            return got
        if all(p.poll() is not None for p in procs):
            break
        time.sleep(0.02)
    raise RuntimeError(f"attempt {attempt}: not every rank started; have {sorted(records(d, attempt))}")


def one_run(name, rep):
    """(running again s, in the group s, world before, world after), or raises RuntimeError."""
    with tempfile.TemporaryDirectory(prefix="bench_standby_") as d:
        prog = os.path.join(d, "worker.py")
        with open(prog, "w") as f:
            f.write(WORKER)
        port, run_id = free_port(), f"standby-{os.getpid()}-{name}-{rep}"
        procs, logs = [], []
        env = dict(ENV, STANDBY_DIR=d)
        try:
            for g in range(3):
                err = os.path.join(d, f"node{g}.err")
                logs.append(err)
                with open(os.path.join(d, f"node{g}.out"), "wb") as fo, open(err, "wb") as fe:
                    procs.append(subprocess.Popen(command(name, g, port, run_id, prog), stdout=fo, stderr=fe,
                                                  start_new_session=True, env=env))
                if g == 0:  # node 0 hosts the store: the others start once it listens
                    wait_listening(port, time.time() + 60)
            deadline = time.time() + TIMEOUT
            first = wait_all(d, 0, deadline, procs)
            victim = victim_of(name, procs, first)
            doomed = tree(victim.pid)
            open(os.path.join(d, "killed"), "w").close()
            killed = time.time()
            for pid in doomed:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass  # exited on its own just now
            second = wait_all(d, 1, deadline, procs)
            open(os.path.join(d, "finish"), "w").close()
            codes = []
            for p in procs:
                if p is victim:
                    p.wait(timeout=10)
                    continue
                try:
                    codes.append(p.wait(timeout=max(1.0, deadline - time.time())))
                except subprocess.TimeoutExpired:
                    codes.append("timeout")
            if codes != [0, 0]:
                raise RuntimeError(f"{name} run {rep + 1}: surviving launchers exited {codes}\n" +
                                   "\n".join(f"--- node {g} ---\n{tail(e)}" for g, e in enumerate(logs)))
            return (max(s for s, _, _, _ in second.values()) - killed,
                    max(j for _, j, _, _ in second.values()) - killed,
                    next(iter(first.values()))[2], next(iter(second.values()))[2])
        except (RuntimeError, OSError, ValueError) as e:
            raise RuntimeError(f"{name} run {rep + 1}: {e}\n" +
                               "\n".join(f"--- node {g} ---\n{tail(e)}" for g, e in enumerate(logs))) from e
        finally:
            kill_leftovers(procs, f"STANDBY_DIR={d}".encode())


def wait_listening(port, deadline):
    while time.time() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)  # nothing to wait on for another process's listen()
    raise RuntimeError(f"nothing listens on port {port}")


def victim_of(name, procs, first):
    """The launcher to kill: one that runs workers and does not host the store (not node 0)."""
    parents = children()
    launchers = {}
    for _, _, _, ppid in first.values():
        # ddplaunch's workers are its children; torchrun's are its agent's (the python -m process).
        for g, p in enumerate(procs):
            if ppid == p.pid or parents.get(ppid) == p.pid:
                launchers[g] = p
    candidates = [p for g, p in sorted(launchers.items()) if g != 0]
    if not candidates:
        raise RuntimeError(f"no non-host launcher runs workers ({sorted(launchers)})")
    return candidates[0]


def fmt(samples):
    med, lo, hi = statistics.median(samples), min(samples), max(samples)
    return f"{med:.2f} s ({lo:.2f}–{hi:.2f})"


def main():
    names = launchers()
    res, errors = interleaved(one_run, REPS, names)
    if "ddplaunch" in errors:
        sys.stderr.write(errors["ddplaunch"] + "\n")
        sys.exit(1)
    out = ["## 2c. A node lost with a spare at hand (3 nodes on loopback, --nnodes=2:3, --max_restarts 1)", ""]
    worlds = lambda rows: " → ".join(sorted({f"{a} → {b}" for _, _, a, b in rows}))
    heads = {"ddplaunch": "ddplaunch (--active_nodes=2)", "torchrun": "torchrun (elastic)",
             "ft_launcher": "ft_launcher (elastic)"}
    cell = lambda name, i: fmt([r[i] for r in res[name]]) if res[name] else "failed (below)"
    ratio = lambda name, i: (f"{statistics.median(r[i] for r in res[name]) / statistics.median(r[i] for r in res['ddplaunch']):.1f}×"
                             if res[name] else "—")
    out += ["| | " + " | ".join(heads[n] for n in names) + " | " + " | ".join(f"{n} / ddplaunch" for n in names[1:]) + " |",
            "|---|" + "---|" * (2 * len(names) - 1)]
    for i, label in ((0, "failure → all ranks running again with a spare"), (1, "failure → all ranks in the new process group")):
        out.append(f"| {label} | " + " | ".join(cell(n, i) for n in names) + " | " +
                   " | ".join(ratio(n, i) for n in names[1:]) + " |")
    out.append("| world size before → after | " + " | ".join(worlds(res[n]) if res[n] else "—" for n in names) +
               " |" + " |" * (len(names) - 1))
    for name, e in errors.items():
        out += ["", f"{name} could not run this job; its error (tail):", "", "```", e[-3000:], "```"]
    png = bar_plot("standby_peers.png", "A node lost: kill → all ranks running again / in the new group (median)",
                   ["running again", "in the new process group"],
                   {n: [statistics.median(r[i] for r in res[n]) if res[n] else None for i in (0, 1)] for n in names},
                   "seconds")
    if png:
        out += ["", f"![node lost with a spare, ddplaunch / torchrun / ft_launcher]({png})"]
    ft = (f" ft_launcher (nvidia-resiliency-ext {ft_version()}): the same flags as torchrun, its defaults otherwise; "
          "this release has no standby node of its own (hot spares came with 0.6, not on PyPI), so it restarts "
          "elastically like torchrun." if ft_available() else " " + ft_missing_note())
    out += ["", f"{REPS} interleaved runs each. Three launchers on this machine, --nnodes=2:3 --nproc_per_node=2 "
            "--max_restarts=1 and --rdzv_conf last_call_timeout=1 for all (torchrun's default last call is "
            "30 s, ddplaunch's 3 s), a fresh free port and run id per run; Python workers with torch (gloo "
            "all_reduce every 50 ms). The kill: SIGKILL to a non-host launcher that runs workers and to every "
            "process under it at once (a machine gone); the survivors' collectives fail and their launchers "
            "restart. Running again = the last new rank's process start − the kill; in the new process group = "
            "the last new rank's init_process_group() return − the kill (adds the import of torch, 4 ranks on "
            f"{os.cpu_count()} cores). ddplaunch --active_nodes=2: the third node stands by (no workers) and takes "
            "the lost node's place, so the world size stays 4. torchrun has no standby: all three nodes run "
            "workers (world size 6) and the restart goes on with the two left (world size 4). "
            "torchrun: python -m torch.distributed.run --rdzv_backend=c10d, otherwise defaults." + ft +
            " The workers prefix their store keys with the attempt: torchrun's workers meet in one store in every "
            "attempt, and gloo's addresses from the first attempt (keys PyTorch never deletes) make a new rank dial "
            "a dead one (torch 2.15 relies on a new TCPStore per attempt); ddplaunch deletes the workers' keys "
            "between rounds, and the same worker runs under all."]
    print("\n".join(out))


if __name__ == "__main__":
    main()
