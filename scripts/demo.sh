#!/usr/bin/env bash
# The main job: a real multi-process training run on this (CPU-only) machine.
# Sets up and builds the project, then runs
#   build/bin/ddplaunch --nproc_per_node=NPROC build/bin/train --epochs EPOCHS
# the C++ example (examples/train.cpp: an MLP on the three-arm spiral, trained with the ddplaunch
# runtime's DistributedDataParallel over its CPU communicator). Rank 0 prints progress, and the
# last line is `final: loss=<x> accuracy=<y>` on the held-out test set.
#   Usage: scripts/demo.sh [NPROC=2] [EPOCHS=3]
set -euo pipefail
cd "$(dirname "$0")/.."
nproc_per_node=${1:-2}
epochs=${2:-3}

# Set-up prints its steps ("setup: ..."); the build shows one progress line ([n/N] and the file),
# its full output kept in build/demo-build.log and shown when it fails.
# Only what the main job needs: no test-suite packages, torch's CPU libraries without its CUDA ones
# (the build then links LibTorch's CPU part only: runtime/CMakeLists.txt, DDP_TORCH_CPU_ONLY), no
# tests configured, and the build's two targets (the launcher and the example, with the libraries
# they link), in the same build/ and with the same flags as scripts/test.sh's main build, which then
# reuses the objects that include no LibTorch.
bash scripts/setup.sh --demo
source scripts/main_build.sh
echo "demo: configuring build/ (cmake)"
# CMake's output (LibTorch's warnings included) is shown only when the configure step fails.
configure_log=$(mktemp)
if ! main_build_configure -DDDP_TESTS=OFF >"$configure_log" 2>&1; then
  echo "demo: configuring failed:" >&2
  tail -n 30 "$configure_log" >&2
  rm -f "$configure_log"
  exit 1
fi
rm -f "$configure_log"
echo "demo: building ddplaunch and the example trainer (a few minutes the first time)"
if ! cmake --build build --target ddplaunch train | bash scripts/build_progress.sh build/demo-build.log; then
  echo "demo: the build failed; the last lines of build/demo-build.log:" >&2
  tail -n 30 build/demo-build.log >&2
  exit 1
fi

echo "demo: build/bin/ddplaunch --nproc_per_node=$nproc_per_node build/bin/train --epochs $epochs"
exec build/bin/ddplaunch --nproc_per_node="$nproc_per_node" build/bin/train --epochs "$epochs"
