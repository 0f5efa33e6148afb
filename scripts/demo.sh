#!/usr/bin/env bash
# The main job: a real multi-process training run on this (CPU-only) machine.
# Sets up and builds the project, starts ddplaunch-store on a free port, and runs N processes of
# the unmodified PyTorch DDP script examples/train_ddp.py against it (gloo over env://, with
# TORCHELASTIC_USE_AGENT_STORE=True exactly as a launcher's workers get it). Stops everything it
# started, also on failure or Ctrl-C.   Usage: scripts/demo.sh [NPROC] [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
nproc_per_node=${1:-2}
steps=${2:-20}

bash scripts/setup.sh >/dev/null
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDDP_PYTHON="$PWD/.venv/bin/python" >/dev/null
cmake --build build --target ddplaunch-store >/dev/null

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT INT TERM

exec 3< <(build/bin/ddplaunch-store --host 127.0.0.1 --port 0 --quiet)
pids+=($!)
read -r -t 20 line <&3
port=${line##*:}
echo "demo: store listening on 127.0.0.1:$port; starting $nproc_per_node workers"

for ((r = 0; r < nproc_per_node; r++)); do
  RANK=$r LOCAL_RANK=$r WORLD_SIZE=$nproc_per_node LOCAL_WORLD_SIZE=$nproc_per_node \
  MASTER_ADDR=127.0.0.1 MASTER_PORT=$port TORCHELASTIC_USE_AGENT_STORE=True OMP_NUM_THREADS=1 \
    .venv/bin/python -u examples/train_ddp.py --steps "$steps" &
  pids+=($!)
done
status=0
for p in "${pids[@]:1}"; do wait "$p" || status=$?; done
echo "demo: workers finished with status $status"
exit $status
