#!/usr/bin/env bash
# Runs the benchmarks against the peers from .venv and writes bench/RESULTS.md.
#   bench/run.sh [--quick]
# Present so far: launch overhead and failure teardown (bench_launcher.py), store throughput and
# latency (bench_store.py). Rendezvous at scale, allreduce, DDP, footprint and log forwarding are
# still to come.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh >/dev/null
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDDP_PYTHON="$PWD/.venv/bin/python" >/dev/null
cmake --build build --target ddplaunch ddplaunch-store spawn_floor store_load >/dev/null
{
  echo "# Benchmark results"
  echo
  echo "Machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -sr);"
  echo "date $(date -u +%Y-%m-%dT%H:%MZ); commit $(git rev-parse --short HEAD); torch $(.venv/bin/python -c 'import torch; print(torch.__version__)')."
  echo "Medians of repeated runs, min–max in brackets; ratios from the same run."
  echo
  .venv/bin/python bench/bench_launcher.py build/bin "$@"
  echo
  .venv/bin/python bench/bench_store.py build/bin "$@"
} > bench/RESULTS.md.tmp
mv bench/RESULTS.md.tmp bench/RESULTS.md
cat bench/RESULTS.md
