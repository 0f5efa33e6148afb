#!/usr/bin/env bash
# MPI launches with Debian's OpenMPI on this machine (no MPI library is linked by ddplaunch):
#   1. mpirun -np 2 ddplaunch --nproc_per_node=2 worker  (one launcher per "node"): nnodes,
#      node_rank and run id come from OMPI_*; the four workers get ranks 0-3 of WORLD_SIZE=4;
#   2. a worker failing with 5 fails both launchers and mpirun with 5;
#   3. mpirun -np 2 train --epochs 3 (no launcher): the runtime reads OMPI_*, rank 0 hosts the
#      store, both ranks train together ("train: 2 rank(s)") and converge;
#   4. a PyTorch gloo script under ddplaunch under mpirun: all_reduce over 4 ranks.
# Usage: test_mpi.sh DDPLAUNCH [TRAIN PYTHON]   (3 and 4 need the LibTorch build and the venv)
# Skips (77) without mpirun. Runs as root with --allow-run-as-root. Every mpirun has a timeout.
set -euo pipefail
ddplaunch=$1
train=${2:-}
python=${3:-}
if ! command -v mpirun >/dev/null; then echo "SKIP: no mpirun (Debian package openmpi-bin)"; exit 77; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mpi=(timeout 180 mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2)
fail() { echo "FAIL: $*"; exit 1; }

cat > "$work/worker.sh" <<'W'
#!/usr/bin/env bash
env | grep -E '^(RANK|LOCAL_RANK|WORLD_SIZE|GROUP_RANK|MASTER_ADDR|MASTER_PORT|TORCHELASTIC_RUN_ID)=' | sort > "$OUT_DIR/rank_$RANK.env"
[[ -n "${FAIL_RANK:-}" && "$RANK" == "$FAIL_RANK" ]] && exit 5
exit 0
W
chmod +x "$work/worker.sh"

echo "== mpirun -np 2 ddplaunch --nproc_per_node=2 worker"
"${mpi[@]}" -x OUT_DIR="$work" "$ddplaunch" --nproc_per_node=2 "$work/worker.sh" > "$work/out1" 2>&1 ||
  { cat "$work/out1"; fail "mpirun ddplaunch exited $?"; }
cat "$work/out1"
run_ids=()
for r in 0 1 2 3; do
  f=$work/rank_$r.env
  [[ -f $f ]] || fail "no worker with RANK=$r"
  grep -qx "WORLD_SIZE=4" "$f" || fail "rank $r: WORLD_SIZE is not 4"
  grep -qx "GROUP_RANK=$((r / 2))" "$f" || fail "rank $r: GROUP_RANK is not $((r / 2))"
  run_ids+=("$(grep TORCHELASTIC_RUN_ID "$f")")
done
[[ ${run_ids[0]} == TORCHELASTIC_RUN_ID=mpi-* ]] || fail "run id not from the MPI job: ${run_ids[0]}"
[[ $(printf '%s\n' "${run_ids[@]}" | sort -u | wc -l) -eq 1 ]] || fail "the launchers disagree on the run id"
echo "ok: 2 launchers x 2 workers, ranks 0-3, ${run_ids[0]}"

echo "== a worker failing with 5 fails mpirun with 5"
rm -f "$work"/*.env
set +e
"${mpi[@]}" -x OUT_DIR="$work" -x FAIL_RANK=3 "$ddplaunch" --nproc_per_node=2 "$work/worker.sh" > "$work/out2" 2>&1
code=$?
set -e
[[ $code -eq 5 ]] || { cat "$work/out2"; fail "mpirun exited $code, expected 5"; }
grep -q "FAILED" "$work/out2" || fail "no failure summary"
echo "ok: exit code 5 and a failure summary"

if [[ -z $train ]]; then
  echo "(no train given: the launcher-less and PyTorch cases are not run)"
  echo "PASS"
  exit 0
fi

echo "== mpirun -np 2 train --epochs 3 (no launcher)"
"${mpi[@]}" -x OMP_NUM_THREADS=1 "$train" --backend cpu --epochs 3 > "$work/train.out" 2> "$work/train.err" ||
  { cat "$work/train.out" "$work/train.err"; fail "mpirun train exited $?"; }
cat "$work/train.out"
grep -q "train: 2 rank(s)" "$work/train.out" || fail "the ranks did not train together"
[[ $(grep -c "^final:" "$work/train.out") -eq 1 ]] || fail "expected one final line (rank 0's), got others"
acc=$(sed -n 's/^final: loss=[0-9.]* accuracy=\([0-9.]*\)$/\1/p' "$work/train.out")
awk -v a="$acc" 'BEGIN { exit !(a >= 0.85) }' || fail "accuracy $acc < 0.85: did not converge"
echo "ok: 2 ranks trained together, accuracy $acc"

echo "== a PyTorch gloo script under ddplaunch under mpirun"
cat > "$work/allreduce.py" <<'P'
import os, torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
print(f"rank {dist.get_rank()} of {dist.get_world_size()}: sum {t.item():g}")
dist.barrier()
dist.destroy_process_group()
P
"${mpi[@]}" -x PYTHON_EXEC="$python" -x OMP_NUM_THREADS=1 "$ddplaunch" --nproc_per_node=2 "$work/allreduce.py" \
  > "$work/torch.out" 2>&1 || { cat "$work/torch.out"; fail "mpirun ddplaunch allreduce.py exited $?"; }
cat "$work/torch.out"
for r in 0 1 2 3; do grep -q "rank $r of 4: sum 10" "$work/torch.out" || fail "rank $r: no sum 10"; done
echo "ok: gloo all_reduce over 4 ranks from 2 launchers"
echo "PASS"
