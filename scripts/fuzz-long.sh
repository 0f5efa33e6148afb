#!/usr/bin/env bash
# A long libFuzzer run over the store's wire codec and state (tests/fuzz/fuzz_store.cpp): at least
# RUNS executions (default 10 million; CI keeps its 60-second run in scripts/test.sh). Builds
# build-asan/ (clang, ASan+UBSan, -DDDP_FUZZ=ON) if needed; the corpus it grows is kept in
# build-asan/fuzz-corpus/ for the next run. Exit status: libFuzzer's (0 = no crash found).
#   Usage: scripts/fuzz-long.sh [RUNS=10000000]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-10000000}
bash scripts/setup.sh >/dev/null
CC=clang-14 CXX=clang++-14 cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DDDP_WITH_TORCH=OFF -DDDP_SANITIZE=ON -DDDP_FUZZ=ON -DDDP_PYTHON="$PWD/.venv/bin/python" >/dev/null
cmake --build build-asan --target fuzz_store
mkdir -p build-asan/fuzz-corpus
echo "fuzz-long: $runs executions of fuzz_store (corpus: build-asan/fuzz-corpus)"
exec build-asan/bin/fuzz_store -runs="$runs" -rss_limit_mb=2048 -max_len=4096 -print_final_stats=1 \
  -dict=tests/fuzz/store.dict build-asan/fuzz-corpus
