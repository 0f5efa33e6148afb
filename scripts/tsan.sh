#!/usr/bin/env bash
# ThreadSanitizer over the store and the launcher: a clang build with -fsanitize=thread
# (build-tsan/, -DDDP_TSAN=ON, no LibTorch) and the unit and loopback tests of the common layer,
# the store and the launcher (ctest -L unit). Not part of scripts/test.sh: the build and run add
# about a quarter of an hour on this 2-core machine. Exit status: ctest's.
#   Usage: scripts/tsan.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh >/dev/null
CC=clang-14 CXX=clang++-14 cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DDDP_WITH_TORCH=OFF -DDDP_BENCH=OFF -DDDP_TSAN=ON -DDDP_PYTHON="$PWD/.venv/bin/python" >/dev/null
cmake --build build-tsan -j "$(nproc)"
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
exec ctest --test-dir build-tsan -L unit -j "$(nproc)" --output-on-failure
