"""Recovery after a failure: ddplaunch against the venv's torchrun and, where installed
(bench/peers.py), NVIDIA's ft_launcher with torchrun's flags, on one node and on two nodes on this
machine.

One launcher with 4 workers, or two launchers as node_rank 0 and 1 (--nnodes=2 --nproc_per_node=2,
loopback), a free TCP port found by binding port 0, --max_restarts=1. The worker is a bash script (WORKER below). In
the first attempt rank 0 sleeps 1 s, writes `date +%s.%N` to `fail` and exits 1, while the other
three ranks sleep (a SIGTERM trap notes when the launcher stops them). The launchers tear the job
down and start it again; in the second attempt every rank writes its start time to `start_<rank>`
and exits 0, so both launchers must exit 0.
   recovery  = max(start_*) - fail                  (failure -> all four workers running again)
   teardown  = max(stopped_*) - fail                (failure -> the last sibling told to stop)
ddplaunch: --master_addr 127.0.0.1 --master_port PORT --node_rank g --rdzv_id ID (its own store).
torchrun: --rdzv_backend=c10d --rdzv_endpoint=127.0.0.1:PORT --rdzv_id=ID on both nodes, all
rendezvous and monitor settings at their defaults. The runs alternate (ddplaunch, torchrun,
ddplaunch, ...) so drift in the machine's load hits both alike. Reports only; nothing is asserted.
Writes a Markdown section to stdout.   python bench_recovery.py BUILD_BIN_DIR [--quick]
"""
import contextlib
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from peers import FT_GPU_NOTE, FT_LAUNCHER, bar_plot, ft_available, ft_missing_note, ft_version, launchers

BIN = sys.argv[1]
QUICK = "--quick" in sys.argv
REPS = 2 if QUICK else 5
TIMEOUT = 120  # seconds for one job (both launchers); nothing may hang the benchmark
PY = sys.executable
DDPLAUNCH = os.path.join(BIN, "ddplaunch")
ENV = dict(os.environ, OMP_NUM_THREADS="1")
WORLD = 4

# Which attempt this is: TORCHELASTIC_RESTART_COUNT, or a marker left by an earlier worker of the
# same launcher slot (NODE_TAG, LOCAL_RANK). The marker matters for torchrun: an agent that
# restarts because another node re-joined the rendezvous ("membership changes do not count as
# retries") does not raise its restart count, so its workers still see 0 in the second attempt.
WORKER = r"""#!/bin/bash
d="$RECOVERY_DIR"
attempt="${TORCHELASTIC_RESTART_COUNT:-0}"
slot="$d/slot_${NODE_TAG}_${LOCAL_RANK}"
[ -e "$slot" ] && [ "$attempt" = 0 ] && attempt=uncounted
echo "$$" > "$slot"
if [ "$attempt" = 0 ]; then
  if [ "$RANK" = 0 ]; then
    sleep 1
    date +%s.%N > "$d/fail.tmp" && mv "$d/fail.tmp" "$d/fail"
    exit 1
  fi
  trap 'date +%s.%N > "$d/stopped_$RANK"; kill $child 2>/dev/null; exit 143' TERM
  sleep 30 & child=$!
  wait $child
  exit 0
fi
echo "$(date +%s.%N) ${TORCHELASTIC_RESTART_COUNT:-unset}" > "$d/start_$RANK.tmp" && mv "$d/start_$RANK.tmp" "$d/start_$RANK"
exit 0
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class NamespaceNodes:
    """Two network namespaces joined by a veth pair (10.232.0.1 and 10.232.0.2), as hosts with
    addresses of their own; `prefix(g)` runs a command on node g. Needs root and iproute2:
    `available()` says whether this machine allows it. Removed on exit."""
    ADDRS = ("10.232.0.1", "10.232.0.2")

    @staticmethod
    def available():
        return os.geteuid() == 0 and subprocess.run(["ip", "netns", "list"], capture_output=True).returncode == 0

    def __enter__(self):
        tag = os.getpid() % 100000
        self.names = [f"ddp_bench_a{tag}", f"ddp_bench_b{tag}"]
        veth = [f"vba{tag}", f"vbb{tag}"]
        steps = [["ip", "netns", "add", n] for n in self.names]
        steps.append(["ip", "link", "add", veth[0], "netns", self.names[0], "type", "veth", "peer", "name", veth[1],
                      "netns", self.names[1]])
        for n, v, a in zip(self.names, veth, self.ADDRS):
            steps += [["ip", "-n", n, "addr", "add", f"{a}/24", "dev", v], ["ip", "-n", n, "link", "set", v, "up"],
                      ["ip", "-n", n, "link", "set", "lo", "up"]]
        for step in steps:
            subprocess.run(step, check=True, capture_output=True)
        self._name_hosts()
        return self

    def _name_hosts(self):
        """Each namespace's own /etc/hosts and an empty resolv.conf (`ip netns exec` mounts
        /etc/netns/NAME/* over /etc): this machine's hostname is the node's own address there, as
        on a real host, and the peer's address has a name. torchrun's c10d rendezvous needs both:
        a node hosts the store only when its hostname resolves to the endpoint's address
        (torch.distributed.elastic.rendezvous.utils._matches_machine_hostname), and the store
        looks up each client's name (EAI_AGAIN, after the resolver's timeouts, without DNS)."""
        me = socket.gethostname()
        for g, n in enumerate(self.names):
            d = f"/etc/netns/{n}"
            os.makedirs(d, exist_ok=True)
            other = self.ADDRS[1 - g]
            with open(f"{d}/hosts", "w") as f:
                f.write(f"127.0.0.1 localhost\n{self.ADDRS[g]} {me}\n{other} {self.names[1 - g]}\n")
            open(f"{d}/resolv.conf", "w").close()

    def prefix(self, g):
        return ["ip", "netns", "exec", self.names[g]]

    def __exit__(self, *exc):
        for n in self.names:
            subprocess.run(["ip", "netns", "del", n], capture_output=True)
            shutil.rmtree(f"/etc/netns/{n}", ignore_errors=True)


def commands(name, port, run_id, prog, nodes=2, hosts=None):
    """One command per node; on `hosts` (NamespaceNodes) each runs in its node's namespace."""
    per_node = WORLD // nodes
    addr = hosts.ADDRS[0] if hosts else "127.0.0.1"
    prefix = hosts.prefix if hosts else (lambda g: [])
    if name == "ddplaunch":
        return [prefix(g) + [DDPLAUNCH, "--nnodes", str(nodes), "--nproc_per_node", str(per_node), "--node_rank", str(g),
                             "--master_addr", addr, "--master_port", str(port), "--rdzv_id", run_id,
                             "--max_restarts", "1", "--no_python", prog] for g in range(nodes)]
    # ft_launcher takes torchrun's flags (it is torchrun's agent with NVIDIA's rendezvous and monitors).
    front = [FT_LAUNCHER] if name == "ft_launcher" else [PY, "-m", "torch.distributed.run"]
    return [prefix(g) + front + [f"--nnodes={nodes}", f"--nproc-per-node={per_node}", "--rdzv_backend=c10d",
                                 f"--rdzv_endpoint={addr}:{port}", f"--rdzv_id={run_id}", "--max-restarts=1",
                                 "--no-python", prog]
            for g in range(nodes)]


def kill_leftovers(procs, marker):
    """SIGKILL our launchers' process groups, then any process still carrying this run's marker."""
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if marker in f.read().split(b"\0"):
                    os.kill(int(pid), signal.SIGKILL)
        except (OSError, ProcessLookupError):
            pass
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
    remove_job_cgroups([p.pid for p in procs])


def remove_job_cgroups(launcher_pids):
    """The job cgroups of launchers killed together with their reapers (the one case in which a
    cgroup stays, docs/process-lifetime.md): removed once empty, so that a run leaves none behind."""
    names = tuple(f"ddplaunch-{pid}-" for pid in launcher_pids)
    with open("/proc/self/mounts") as f:
        roots = [line.split()[1] for line in f if line.split()[2] == "cgroup2"]
    for root in roots:
        for parent, dirs, _ in os.walk(root):
            for name in [d for d in dirs if d.startswith(names)]:
                dirs.remove(name)
                try:
                    os.rmdir(os.path.join(parent, name))
                except OSError:
                    pass  # not ours to remove, or still populated: left as the doc says


def tail(path, n=2000):
    with open(path, "rb") as f:
        return f.read().decode(errors="replace")[-n:]


def write_script(d, text, name="worker.sh"):
    """An executable script `name` in directory d holding `text`; returns its path."""
    path = os.path.join(d, name)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o755)
    return path


def wait_codes(procs, timeout):
    """Each launcher's exit code, or a "timeout after ..." string for one still running after
    `timeout` seconds from now (counted over all of them)."""
    deadline = time.time() + timeout
    codes = []
    for p in procs:
        try:
            codes.append(p.wait(timeout=max(1.0, deadline - time.time())))
        except subprocess.TimeoutExpired:
            codes.append(f"timeout after {timeout} s")
    return codes


def one_run(name, rep, nodes=2, hosts=None):
    """Returns (recovery s, teardown s, restart counts seen in the second attempt) or raises RuntimeError."""
    with tempfile.TemporaryDirectory(prefix="bench_recovery_") as d:
        prog = write_script(d, WORKER)
        run_id = f"recovery-{os.getpid()}-{name}-{rep}"
        procs, logs = [], []
        try:
            for g, cmd in enumerate(commands(name, free_port(), run_id, prog, nodes, hosts)):
                out, err = os.path.join(d, f"node{g}.out"), os.path.join(d, f"node{g}.err")
                logs.append(err)
                with open(out, "wb") as fo, open(err, "wb") as fe:
                    procs.append(subprocess.Popen(cmd, stdout=fo, stderr=fe, start_new_session=True,
                                                  env=dict(ENV, RECOVERY_DIR=d, NODE_TAG=str(g))))
            codes = wait_codes(procs, TIMEOUT)
            if codes != [0] * nodes:
                msg = [f"{name} run {rep + 1}: launchers exited {codes}"]
                for g, err in enumerate(logs):
                    msg.append(f"--- node {g} stderr (tail) ---\n{tail(err)}")
                raise RuntimeError("\n".join(msg))
            with open(os.path.join(d, "fail")) as f:
                fail = float(f.read())
            starts, counts = [], []
            for r in range(WORLD):
                with open(os.path.join(d, f"start_{r}")) as f:
                    t, count = f.read().split()
                starts.append(float(t))
                counts.append(count)
            stops = [float(open(os.path.join(d, n)).read()) for n in os.listdir(d) if n.startswith("stopped_")]
            return max(starts) - fail, (max(stops) - fail if stops else None), counts
        except (OSError, ValueError) as e:
            raise RuntimeError(f"{name} run {rep + 1}: missing or bad timestamp file: {e}") from e
        finally:
            kill_leftovers(procs, f"RECOVERY_DIR={d}".encode())


def fmt(samples):
    med, lo, hi = statistics.median(samples), min(samples), max(samples)
    if med < 1:
        return f"{med * 1000:.1f} ms ({lo * 1000:.1f}–{hi * 1000:.1f})"
    return f"{med:.2f} s ({lo:.2f}–{hi:.2f})"


def interleaved(run, reps, names=("ddplaunch", "torchrun")):
    """run(name, rep) for each rep, the launchers `names` in turn, so drift in the machine's load hits
    all alike; a launcher whose run raised RuntimeError is not run again. Returns ({name: [results]},
    {name: error})."""
    results, errors = {name: [] for name in names}, {}
    for rep in range(reps):
        for name in names:
            if name in errors:
                continue
            try:
                results[name].append(run(name, rep))
            except RuntimeError as e:
                errors[name] = str(e)
    return results, errors


def ratio_cell(peer, ours):
    return f"{statistics.median(peer) / statistics.median(ours):.0f}×" if peer and ours else "—"


def main():
    names = launchers()
    out = ["## 2b. Recovery after a failure (1 node and 2 nodes on loopback, 4 workers, --max_restarts 1)", "",
           "| nodes | | " + " | ".join(names) + " | " + " | ".join(f"{n} / ddplaunch" for n in names[1:]) + " |",
           "|---|---|" + "---|" * (2 * len(names) - 1)]
    notes, seen, medians = [], [], {n: [] for n in names}
    variants = [(1, None), (2, None)] + ([(2, "netns")] if NamespaceNodes.available() else [])
    for nodes, kind in variants:
        with (NamespaceNodes() if kind else contextlib.nullcontext()) as hosts:
            results, errors = interleaved(lambda name, rep: one_run(name, rep, nodes, hosts), REPS, names)
        label = f"{nodes} (network namespaces)" if kind else str(nodes)
        if "ddplaunch" in errors:
            # ddplaunch is the subject: if it cannot recover, the benchmark itself has failed.
            sys.stderr.write(errors["ddplaunch"] + "\n")
            sys.exit(1)
        rec = {n: [r for r, _, _ in rows] for n, rows in results.items()}
        down = {n: [t for _, t, _ in rows if t is not None] for n, rows in results.items()}
        cell = lambda xs, n: fmt(xs) if xs else ("failed (below)" if n in errors else "—")
        row_label = label
        for label, data in ((f"failure → all {WORLD} workers running again", rec),
                            ("of which: failure → last sibling stopped", down)):
            out.append(f"| {row_label} | {label} | " + " | ".join(cell(data[n], n) for n in names) + " | " +
                       " | ".join(ratio_cell(data[n], data["ddplaunch"]) for n in names[1:]) + " |")
        for n in names:
            medians[n].append(statistics.median(rec[n]) if rec[n] else None)
        for n, e in errors.items():
            notes += ["", f"{n} could not run the {row_label}-node job; its error (tail):", "", "```", e[-3000:], "```"]
        seen.append(f"{row_label} node(s): " + "; ".join(f"{n}: {' / '.join(sorted({','.join(c) for _, _, c in rows}))}"
                                                    for n, rows in results.items() if rows))
    out += notes
    png = bar_plot("recovery_peers.png", f"A worker fails: failure → all {WORLD} workers running again (median)",
                   ["1 node", "2 nodes (loopback)", "2 nodes (network namespaces)"][:len(variants)], medians,
                   "seconds (log scale)", log=True)
    if png:
        out += ["", f"![recovery after a failure, ddplaunch / torchrun / ft_launcher]({png})"]
    ft = (f" ft_launcher (nvidia-resiliency-ext {ft_version()}, from the bench's venv): torchrun's flags, its own defaults "
          "(monitor interval 0.1 s, workers-stop-timeout 30 s, its rendezvous with torch's 1 s state cache), not tuned; the workers make no call to its heartbeat API." if ft_available() else
          " " + ft_missing_note())
    out += ["", f"{REPS} interleaved runs each ({', '.join(names)}, ...). One launcher with 4 workers, or two launchers "
            "on this machine (node_rank 0 and 1, --nnodes=2 --nproc_per_node=2; on loopback, and where the bench may "
            "(root, iproute2) in two network namespaces joined by a veth pair, 10.232.0.1 and 10.232.0.2, the store "
            "on the first), --max_restarts=1, a fresh free port and "
            "run id per run, bash workers: in the first attempt rank 0 sleeps 1 s, notes the time and exits 1 while the "
            "other ranks sleep; in the second every rank notes its start and exits 0. Recovery = the last rank's start − "
            "the failure; \"last sibling stopped\" is when the last sleeping rank received SIGTERM (a bash trap). "
            "ddplaunch: --master_addr 127.0.0.1 --master_port PORT --node_rank g --rdzv_id ID, --no_python, "
            "other settings at their defaults. torchrun (python -m torch.distributed.run, torch "
            f"{torch_version()}): --rdzv_backend=c10d --rdzv_endpoint=127.0.0.1:PORT --rdzv_id=ID on every node, "
            "--no-python, everything else at its defaults (monitor_interval 0.1 s, c10d rendezvous timeouts, "
            "keep-alive 5 s, SIGTERM then SIGKILL after the grace period, start method spawn); not tuned." + ft +
            f" TORCHELASTIC_RESTART_COUNT seen by ranks 0–3 in the second attempt ({'; '.join(seen)}): torchrun's agent "
            "that restarts because the other node re-joined the rendezvous does not count it as a restart, so the "
            "worker recognises the second attempt by a marker its launcher slot left in the first."]
    if ft_available():
        out += ["", FT_GPU_NOTE]
    out += ["", "Where torchrun's time goes (its c10d rendezvous, read from torch's dynamic_rendezvous.py and an "
            "INFO log): the failing node notices within its 0.1 s monitor interval, stops its sibling and "
            "re-joins the rendezvous at once; the healthy node learns of it only through num_nodes_waiting(), "
            "which serves a rendezvous state cached for up to 1 s (cache_duration=1), so its ranks are stopped "
            "up to a second after the failure (the second row); then the join loop, while it waits for the "
            "other node, re-reads the state after a fixed 1 s sleep, which adds about one more second before "
            "the workers start. Two one-second polls, not process handling, make up nearly all of it."]
    print("\n".join(out))


def torch_version():
    try:
        return subprocess.run([PY, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True,
                              timeout=60).stdout.strip() or "?"
    except subprocess.TimeoutExpired:
        return "?"


if __name__ == "__main__":
    main()
