#!/bin/bash
# Targeted experiment: a plain 2-node job on loopback in which only node 1's store replies are
# late (its launcher dials node 0's store through delay_proxy.py, DELAY seconds each way from
# SLOW_AFTER seconds in (default 15, once the job runs) for SLOW_FOR seconds (default: to the
# end; the end of a job through a slow link hangs, old launcher and new); a stand-in for a store loop or a
# launcher answering late under load). Workers just sleep, so only the launchers' liveness is at
# stake. With STOP_AFTER=N, node 1's launcher is stopped
# (kill -STOP) N seconds in, to check that a really silent node is still reported.
#   slow_replies.sh LAUNCHER OUTDIR [DELAY=2] [WORK_SECONDS=60] [ddplaunch flags...]
set -u
launcher=$1 out=$2 delay=${3:-2} work=${4:-60}
shift $(($# < 4 ? $# : 4))  # the rest: extra ddplaunch flags
here=$(cd "$(dirname "$0")" && pwd)
py=${PY:-/work/main/.venv/bin/python}
mkdir -p "$out"
free_port() { $py -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
store=$(free_port) proxy=$(free_port)
$py "$here/delay_proxy.py" "$proxy" "$store" "$delay" &
pp=$!
common=(--nnodes=2 --nproc_per_node=2 --master_addr=127.0.0.1 --no_python "$@")
start=$(date +%s.%N)
timeout -s KILL 300 "$launcher" "${common[@]}" --master_port="$store" --node_rank=0 sleep "$work" >"$out/node0.log" 2>&1 &
p0=$!
timeout -s KILL 300 "$launcher" "${common[@]}" --master_port="$proxy" --node_rank=1 sleep "$work" >"$out/node1.log" 2>&1 &
p1=$!
sleep "${SLOW_AFTER:-15}"
echo "delaying node 1's store traffic by $delay s each way at $(date +%T)"
kill -USR1 "$pp"
if [ -n "${SLOW_FOR:-}" ]; then (sleep "$SLOW_FOR" && kill -USR2 "$pp") & fi
if [ -n "${STOP_AFTER:-}" ]; then
  sleep "$STOP_AFTER"
  l1=$(pgrep -P "$p1")
  echo "stopping node 1's launcher (pid $l1) at $(date +%T.%N)"
  kill -STOP "$l1"
fi
wait $p0; e0=$?
if [ -n "${STOP_AFTER:-}" ]; then kill -CONT "$l1"; kill "$l1" 2>/dev/null; fi
wait $p1; e1=$?
kill "$pp"; wait "$pp" 2>/dev/null
echo "exit $e0 $e1 at $(date +%T), after $(echo "$(date +%s.%N) - $start" | bc) s"
grep -h "lost node\|not counted\|lost the store\|stopping" "$out"/node*.log | head -5
