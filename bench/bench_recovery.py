"""Recovery after a failure: ddplaunch against the venv's torchrun, two nodes on this machine.

Two launchers run here as node_rank 0 and 1 (--nnodes=2 --nproc_per_node=2, loopback, a free TCP
port found by binding port 0, --max_restarts=1). The worker is a bash script (WORKER below). In
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
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

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


def commands(name, port, run_id, prog):
    if name == "ddplaunch":
        return [[DDPLAUNCH, "--nnodes", "2", "--nproc_per_node", "2", "--node_rank", str(g),
                 "--master_addr", "127.0.0.1", "--master_port", str(port), "--rdzv_id", run_id,
                 "--max_restarts", "1", "--no_python", prog] for g in (0, 1)]
    return [[PY, "-m", "torch.distributed.run", "--nnodes=2", "--nproc-per-node=2", "--rdzv_backend=c10d",
             f"--rdzv_endpoint=127.0.0.1:{port}", f"--rdzv_id={run_id}", "--max-restarts=1", "--no-python", prog]
            for _ in (0, 1)]


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


def one_run(name, rep):
    """Returns (recovery s, teardown s, restart counts seen in the second attempt) or raises RuntimeError."""
    with tempfile.TemporaryDirectory(prefix="bench_recovery_") as d:
        prog = write_script(d, WORKER)
        run_id = f"recovery-{os.getpid()}-{name}-{rep}"
        procs, logs = [], []
        try:
            for g, cmd in enumerate(commands(name, free_port(), run_id, prog)):
                out, err = os.path.join(d, f"node{g}.out"), os.path.join(d, f"node{g}.err")
                logs.append(err)
                with open(out, "wb") as fo, open(err, "wb") as fe:
                    procs.append(subprocess.Popen(cmd, stdout=fo, stderr=fe, start_new_session=True,
                                                  env=dict(ENV, RECOVERY_DIR=d, NODE_TAG=str(g))))
            codes = wait_codes(procs, TIMEOUT)
            if codes != [0, 0]:
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


def interleaved(run, reps):
    """run(name, rep) for each rep, ddplaunch and torchrun in turn, so drift in the machine's load hits
    both alike; a launcher whose run raised RuntimeError is not run again. Returns ({name: [results]},
    {name: error})."""
    results, errors = {"ddplaunch": [], "torchrun": []}, {}
    for rep in range(reps):
        for name in ("ddplaunch", "torchrun"):
            if name in errors:
                continue
            try:
                results[name].append(run(name, rep))
            except RuntimeError as e:
                errors[name] = str(e)
    return results, errors


def main():
    rec = {"ddplaunch": [], "torchrun": []}
    down = {"ddplaunch": [], "torchrun": []}
    counts = {"ddplaunch": set(), "torchrun": set()}
    results, errors = interleaved(one_run, REPS)
    for name, rows in results.items():
        for r, t, c in rows:
            rec[name].append(r)
            if t is not None:
                down[name].append(t)
            counts[name].add(",".join(c))

    if "ddplaunch" in errors:
        # ddplaunch is the subject: if it cannot recover, the benchmark itself has failed.
        sys.stderr.write(errors["ddplaunch"] + "\n")
        sys.exit(1)
    out = ["## 2b. Recovery after a failure (2 nodes on loopback, --max_restarts 1)", ""]
    ours = rec["ddplaunch"]
    if "torchrun" in errors:
        out += ["| | ddplaunch |", "|---|---|",
                f"| failure → all 4 workers running again | {fmt(ours)} |",
                f"| of which: failure → last sibling stopped | {fmt(down['ddplaunch'])} |", "",
                "torchrun could not run this job, so there is no ratio; its error:", "", "```",
                errors["torchrun"], "```"]
    else:
        peer = rec["torchrun"]
        out += ["| | ddplaunch | torchrun | torchrun / ddplaunch |", "|---|---|---|---|",
                f"| failure → all 4 workers running again | {fmt(ours)} | {fmt(peer)} | "
                f"{statistics.median(peer) / statistics.median(ours):.0f}× |",
                f"| of which: failure → last sibling stopped | {fmt(down['ddplaunch'])} | {fmt(down['torchrun'])} | "
                f"{statistics.median(down['torchrun']) / statistics.median(down['ddplaunch']):.0f}× |"]
    seen = "; ".join(f"{n}: {' / '.join(sorted(c))}" for n, c in counts.items() if c)
    out += ["", f"{REPS} interleaved runs each (ddplaunch, torchrun, ddplaunch, ...). Two launchers on this machine "
            "(node_rank 0 and 1, --nnodes=2 --nproc_per_node=2, --max_restarts=1, a fresh free port and run id per "
            "run), bash workers: in the first attempt rank 0 sleeps 1 s, notes the time and exits 1 while the other "
            "ranks sleep; in the second every rank notes its start and exits 0. Recovery = the last rank's start − "
            "the failure; \"last sibling stopped\" is when the last sleeping rank received SIGTERM (a bash trap). "
            "ddplaunch: --master_addr 127.0.0.1 --master_port PORT --node_rank g --rdzv_id ID, --no_python, "
            "other settings at their defaults. torchrun (python -m torch.distributed.run, torch "
            f"{torch_version()}): --rdzv_backend=c10d --rdzv_endpoint=127.0.0.1:PORT --rdzv_id=ID on both nodes, "
            "--no-python, everything else at its defaults (monitor_interval 0.1 s, c10d rendezvous timeouts, "
            "keep-alive 5 s, SIGTERM then SIGKILL after the grace period, start method spawn); not tuned. "
            f"TORCHELASTIC_RESTART_COUNT seen by ranks 0–3 in the second attempt ({seen}): torchrun's agent that "
            "restarts because the other node re-joined the rendezvous does not count it as a restart, so the "
            "worker recognises the second attempt by a marker its launcher slot left in the first."]
    if "torchrun" not in errors:
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
