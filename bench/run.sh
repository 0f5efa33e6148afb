#!/usr/bin/env bash
# Runs the benchmarks against the peers from .venv (and NVIDIA's ft_launcher from .bench-venv) and
# writes bench/RESULTS.md, then prints the guard verdicts (bench/guards.py), one line per guarded row.
#   bench/run.sh                  all sections, full length: rewrites bench/RESULTS.md whole (its hand-written notes too)
#   bench/run.sh --quick          all sections, short: writes bench/RESULTS.quick.md (RESULTS.md stays)
#   (BENCH_BUILD_DIR=dir to build in another tree than build/)
#   BENCH_SECTIONS="storm hang_peers" bench/run.sh --quick   runs only those sections and writes
#   bench/RESULTS.sections.md instead (RESULTS.md keeps every section)
# Sections: launch overhead and failure teardown (bench_launcher.py), the Python worker hook's
# start-up cost (bench_python_hook.py), recovery after a failure
# on one node and two (loopback, and network namespaces where root), with ft_launcher too (bench_recovery.py), a node lost with a spare at hand against torchrun's
# elastic restart (bench_standby.py), a hung rank to the job's end against torchrun and ft_launcher
# with and without its heartbeat API (bench_hang_peers.py), the restart cost over many rounds (bench_restart_cost.py:
# the last rounds' time over the first's), store throughput and
# latency (bench_store.py, plot store_throughput.png), the store's storms up to the descriptor
# limit, every rank on one key (bench_storm.py, plot store_storms.png), CPU allreduce against Gloo
# (bench_allreduce.py, plot allreduce.png), launcher footprint (bench_footprint.py), log
# forwarding (bench_logs.py), NUMA binding (bench_numa.py), rendezvous at scale (bench_rendezvous.py, plot
# rendezvous_scaling.png), meeting in etcd against torchrun's etcd backend (bench_etcd.py), DDP step time (bench_ddp.py), workers under contention against torchrun's
# (bench_contention.py: skipped with a note where scheduler autogroups do not apply), straggler
# detection's step-time cost and time to name a slow rank (bench_stragglers.py) and the GPU
# section (bench_gpu.py: skipped with a note without a CUDA device).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh >/dev/null
BUILD="${BENCH_BUILD_DIR:-build}"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDDP_BENCH=ON -DDDP_PYTHON="$PWD/.venv/bin/python" >/dev/null
cmake --build "$BUILD" --target ddplaunch ddplaunch-store spawn_floor store_load rendezvous_scale log_spam allreduce_bench ddp_bench ddp_step_worker progress_cost gpu_bench >/dev/null
# The scaling plots need matplotlib in the venv.
.venv/bin/python -c "import matplotlib" 2>/dev/null || .venv/bin/pip install -q matplotlib >/dev/null
# torchrun's etcd rendezvous backend, the peer of bench_etcd.py, needs python-etcd.
.venv/bin/python -c "import etcd" 2>/dev/null || .venv/bin/pip install -q python-etcd >/dev/null
# NVIDIA's ft_launcher (nvidia-resiliency-ext), a peer in the launcher, recovery, standby, hang and
# footprint sections, in the bench's own venv; without PyPI the sections say it was not run.
BENCH_FT_LAUNCHER="$(dirname "$(scripts/bench-peers-venv.sh || echo /nonexistent/python)")/ft_launcher"
export BENCH_FT_LAUNCHER
sections="launcher python_hook recovery standby hang_peers restart_cost store rendezvous storm etcd allreduce ddp footprint logs numa contention stragglers gpu"
out=bench/RESULTS.md
[[ " $* " == *" --quick "* ]] && out=bench/RESULTS.quick.md
if [[ -n ${BENCH_SECTIONS:-} ]]; then
  sections=$BENCH_SECTIONS
  out=bench/RESULTS.sections.md
fi
# A failed section leaves the last complete RESULTS.md in place, and no partial file behind.
trap 'rm -f "$out.tmp"' EXIT
{
  echo "# Benchmark results"
  echo
  echo "Machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -sr);"
  echo "date $(date -u +%Y-%m-%dT%H:%MZ); commit $(git rev-parse --short HEAD); torch $(.venv/bin/python -c 'import torch; print(torch.__version__)')."
  echo "Medians of repeated runs, min–max in brackets; ratios from the same run."
  echo
  for section in $sections; do
    .venv/bin/python "bench/bench_$section.py" "$BUILD/bin" "$@"
    echo
  done
} > "$out.tmp"
mv "$out.tmp" "$out"
cat "$out"
# The guard verdicts again, together, so a drift shows in the run that causes it.
echo
echo "Guards (bench/guards.py):"
grep -e '^- guard ' "$out" | sed 's/^- //' || echo "no guarded section ran"
