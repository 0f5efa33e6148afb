#!/usr/bin/env bash
# End-to-end under a real Slurm cluster on this machine (scripts/slurm-local-up.sh: munge,
# slurmctld, two slurmd "nodes" n1 and n2 on loopback). Runs
#   srun -N2 --ntasks-per-node=1 ddplaunch --nproc_per_node=2 worker
# with no nnodes/node_rank/master flags, so ddplaunch must take them from SLURM_*: the test checks
# every worker's RANK/WORLD_SIZE/GROUP_RANK/MASTER_ADDR, then a failing job's exit code.
# Needs root (skipped otherwise, exit 77 = ctest SKIP). Bounded: every srun has a timeout; the
# cluster is brought down on exit.
set -euo pipefail
ddplaunch=$1
here=$(cd "$(dirname "$0")" && pwd)
up="$here/../../scripts/slurm-local-up.sh"
if [[ $(id -u) -ne 0 ]]; then echo "SKIP: needs root to start slurmd"; exit 77; fi

work=$(mktemp -d)
cleanup() {
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
echo "1 passed, 0 failed"
