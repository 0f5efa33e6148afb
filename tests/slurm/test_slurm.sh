#!/usr/bin/env bash
# End-to-end under a real Slurm cluster on this machine (scripts/slurm-local-up.sh: munge,
# slurmctld, two slurmd "nodes" n1 and n2 on loopback). Runs
#   srun -N2 --ntasks-per-node=1 ddplaunch --nproc_per_node=2 worker
# with no nnodes/node_rank/master flags, so ddplaunch must take them from SLURM_*: the test checks
# every worker's RANK/WORLD_SIZE/GROUP_RANK/MASTER_ADDR, then a failing job's exit code. Given the
# example trainer and ddplaunch-store, it then runs
#   srun -N2 --ntasks-per-node=1 train --epochs 1
# with no launcher at all: each task's runtime reads SLURM_* and connects to the first host of the
# node list, where nobody hosts a store unless we do, so the script runs ddplaunch-store there.
# Usage: test_slurm.sh DDPLAUNCH [TRAIN DDPLAUNCH_STORE]
# Needs root (skipped otherwise, exit 77 = ctest SKIP). Bounded: every srun has a timeout; the
# cluster is brought down on exit.
set -euo pipefail
ddplaunch=$1
train=${2:-}
store=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
up="$here/../../scripts/slurm-local-up.sh"
if [[ $(id -u) -ne 0 ]]; then echo "SKIP: needs root to start slurmd"; exit 77; fi

work=$(mktemp -d)
store_pid=
cleanup() {
  if [[ -n $store_pid ]]; then kill "$store_pid" 2>/dev/null || true; fi  # may have exited already
  bash "$up" down >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
SLURM_LOCAL_NODES=2 SLURM_LOCAL_CPUS=2 bash "$up" up

cat > "$work/worker.sh" <<'W'
#!/usr/bin/env bash
env | grep -E '^(RANK|LOCAL_RANK|WORLD_SIZE|GROUP_RANK|MASTER_ADDR|MASTER_PORT|TORCHELASTIC_RUN_ID)=' | sort > "$OUT_DIR/rank_$RANK.env"
[[ -n "${FAIL_RANK:-}" && "$RANK" == "$FAIL_RANK" ]] && exit 5
exit 0
W
chmod +x "$work/worker.sh"

fail() { echo "FAIL: $*"; for f in "$work"/*.env; do echo "== $f"; cat "$f"; done; exit 1; }

echo "== srun -N2 --ntasks-per-node=1 ddplaunch --nproc_per_node=2"
OUT_DIR=$work timeout 120 srun -N2 --ntasks-per-node=1 --export=ALL "$ddplaunch" --nproc_per_node=2 "$work/worker.sh" \
  || fail "srun exited $?"
for r in 0 1 2 3; do
  f="$work/rank_$r.env"
  [[ -f $f ]] || fail "no worker with RANK=$r"
  grep -qx "WORLD_SIZE=4" "$f" || fail "rank $r: WORLD_SIZE is not 4"
  grep -qx "GROUP_RANK=$((r / 2))" "$f" || fail "rank $r: GROUP_RANK is not $((r / 2))"
  grep -qx "LOCAL_RANK=$((r % 2))" "$f" || fail "rank $r: LOCAL_RANK is not $((r % 2))"
  grep -qx "MASTER_ADDR=n1" "$f" || fail "rank $r: MASTER_ADDR is not n1 (the first host of n[1-2])"
  grep -q "^TORCHELASTIC_RUN_ID=slurm-" "$f" || fail "rank $r: run id not derived from the job id"
done
echo "ok: 2 nodes x 2 workers, ranks 0-3, master n1"

echo "== a worker failing with 5 fails the step with 5"
rm -f "$work"/*.env
set +e
OUT_DIR=$work FAIL_RANK=3 timeout 120 srun -N2 --ntasks-per-node=1 --export=ALL "$ddplaunch" --nproc_per_node=2 "$work/worker.sh" 2> "$work/stderr.txt"
code=$?
set -e
[[ $code -eq 5 ]] || { cat "$work/stderr.txt"; fail "srun exited $code, expected 5"; }
grep -q "FAILED" "$work/stderr.txt" || fail "no failure summary on stderr"
echo "ok: exit code 5 and a failure summary"

# Slurm's preemption warning: `srun --signal=USR1@110 -t 2` asks slurmctld to send SIGUSR1 when
# 110 s remain, i.e. 10 s in; it checks time limits every 30-60 s, so it comes 30-60 s in. The
# launcher forwards it (the default --signals_to_handle includes SIGUSR1) and keeps running; the
# workers "checkpoint" (write a file) and exit 0. Without forwarding, ddplaunch would die of it.
echo "== srun --signal=USR1@110: the warning reaches every worker and the job ends 0"
cat > "$work/usr1.sh" <<'W'
#!/usr/bin/env bash
trap 'echo checkpoint > "$OUT_DIR/usr1_$RANK"; exit 0' USR1
for _ in $(seq 1000); do sleep 0.1; done  # 100 s at most, then fail: no signal came
exit 9
W
chmod +x "$work/usr1.sh"
set +e
OUT_DIR=$work timeout 150 srun -N2 --ntasks-per-node=1 -t 2 --signal=USR1@110 --export=ALL "$ddplaunch" \
  --nproc_per_node=2 "$work/usr1.sh" 2> "$work/usr1.err"
code=$?
set -e
[[ $code -eq 0 ]] || { cat "$work/usr1.err"; fail "srun --signal=USR1 exited $code, expected 0"; }
for r in 0 1 2 3; do [[ -f $work/usr1_$r ]] || { cat "$work/usr1.err"; fail "rank $r never got SIGUSR1"; }; done
grep -q "received SIGUSR1, forwarding it to the workers" "$work/usr1.err" || fail "no forwarding message"
echo "ok: SIGUSR1 from Slurm reached ranks 0-3; exit 0"

if [[ -z $train || -z $store ]]; then
  echo "(no train/ddplaunch-store given: srun-without-launcher cases not run)"
  echo "1 passed, 0 failed"
  exit 0
fi

# Processes whose environment holds this marker were started by the cases below (srun passes it
# on). Not exported: the tools survivors() runs must not carry it.
tag="slurm-e2e-$$-$RANDOM"
survivors() {
  local f pid
  for f in /proc/[0-9]*/environ; do
    pid=${f#/proc/}; pid=${pid%/environ}
    if grep -qzx "DDP_SLURM_E2E_TAG=$tag" "$f" 2>/dev/null; then
      [[ $(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) == Z ]] || echo "$pid"
    fi
  done
}

# Runs inside an allocation (salloc), so the node list and job id are known before the store starts:
# ddplaunch-store on the first node's address, port $1 (0: a free one, exported as MASTER_PORT),
# then the trainer on every node with no launcher. MASTER_ADDR stays unset: the runtime must take
# the first host of SLURM_JOB_NODELIST.
cat > "$work/in_alloc.sh" <<'A'
#!/usr/bin/env bash
set -euo pipefail
port=$1; work=$2; train=$3; store=$4
first=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -1)
addr=$(getent ahostsv4 "$first" | awk 'NR == 1 {print $1}')
[[ -n $addr ]] || { echo "cannot resolve the first node $first" >&2; exit 3; }
[[ $port == job ]] && port=$((15000 + SLURM_JOB_ID % 20000))
"$store" --host "$addr" --port "$port" -q > "$work/store.out" 2> "$work/store.err" &
echo $! > "$work/store.pid"
# No event tells a shell script that another process printed a line: poll its output file.
for _ in $(seq 100); do grep -q "listening on" "$work/store.out" && break; sleep 0.1; done
bound=$(sed -n 's/.*listening on .*:\([0-9]*\)$/\1/p' "$work/store.out")
if [[ -z $bound ]]; then
  echo "ddplaunch-store did not start on $addr:$port:" >&2; cat "$work/store.err" >&2
  [[ $1 == job ]] && exit 75  # the job id's port is taken: the caller retries with a new job
  exit 3
fi
[[ $1 == job ]] || export MASTER_PORT=$bound
echo "store on $first ($addr:$bound), job $SLURM_JOB_ID, MASTER_PORT=${MASTER_PORT:-<unset>}"
set +e
env -u MASTER_ADDR OMP_NUM_THREADS=1 timeout 240 srun -N2 --ntasks-per-node=1 --export=ALL "$train" --backend cpu --epochs 1
code=$?
set -e
kill -TERM "$(cat "$work/store.pid")"
wait "$(cat "$work/store.pid")" || { echo "ddplaunch-store did not stop cleanly" >&2; exit 3; }
exit $code
A
chmod +x "$work/in_alloc.sh"

srun_train() { # port (0 or "job"): runs the trainer under srun without a launcher, checks its output
  local attempt
  for attempt in 1 2 3; do
    rm -f "$work"/store.*
    set +e
    DDP_SLURM_E2E_TAG=$tag timeout 300 salloc -N2 --ntasks-per-node=1 "$work/in_alloc.sh" "$1" "$work" "$train" \
      "$store" > "$work/train.out" 2> "$work/train.err"
    code=$?
    set -e
    [[ $code -eq 75 ]] || break
  done
  [[ $code -eq 0 ]] || { cat "$work/train.out" "$work/train.err"; fail "salloc/srun train exited $code"; }
  grep -q "^train: 2 rank(s), backend cpu" "$work/train.out" || { cat "$work/train.out"; fail "not 2 ranks on cpu"; }
  last=$(grep -v '^$' "$work/train.out" | tail -1)
  [[ $last =~ ^final:\ loss=[0-9.]+\ accuracy=[0-9.]+$ ]] || { cat "$work/train.out" "$work/train.err"; fail "last line is '$last'"; }
  [[ $(grep -c '^final:' "$work/train.out") -eq 1 ]] || fail "more than one rank printed the final line"
  for _ in $(seq 50); do [[ -z $(survivors) ]] && break; sleep 0.1; done  # tasks end as srun returns; allow reaping
  left=$(survivors)
  [[ -z $left ]] || fail "processes left behind: $left"
  echo "ok: $last"
}

echo "== srun -N2 --ntasks-per-node=1 train --epochs 1 (no launcher; ddplaunch-store on the first node; MASTER_PORT)"
srun_train 0
echo "== the same without MASTER_PORT: the store on 15000 + SLURM_JOB_ID % 20000"
srun_train job
echo "1 passed, 0 failed"
