#!/usr/bin/env bash
# The main job: a real multi-process training run on this (CPU-only) machine.
# Sets up and builds the project, then runs the unmodified PyTorch DDP script
# examples/train_ddp.py under ddplaunch as two nodes on loopback (two launchers, NPROC workers
# each; gloo over env://, the store hosted by the node-0 launcher). Rank 0 prints every step's
# loss; both launchers' exit codes are checked.   Usage: scripts/demo.sh [NPROC=2] [STEPS=20]
set -euo pipefail
cd "$(dirname "$0")/.."
nproc_per_node=${1:-2}
steps=${2:-20}

bash scripts/setup.sh >/dev/null
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDDP_PYTHON="$PWD/.venv/bin/python" >/dev/null
cmake --build build --target ddplaunch >/dev/null

port=$(.venv/bin/python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export PYTHON_EXEC="$PWD/.venv/bin/python"
launch() {
  build/bin/ddplaunch --nnodes 2 --node_rank "$1" --master_addr 127.0.0.1 --master_port "$port" \
    --nproc_per_node "$nproc_per_node" examples/train_ddp.py --steps "$steps"
}
echo "demo: 2 nodes x $nproc_per_node workers on 127.0.0.1:$port"
launch 1 &
node1=$!
trap 'kill $node1 2>/dev/null || true' EXIT
status=0
launch 0 || status=$?
wait "$node1" || status=$?
echo "demo: finished with exit code $status"
exit $status
