#!/bin/bash
# One plain 2-node job on loopback: two ddplaunch processes (node 0 hosts the store), each with
# 2 workers running worker.py. Usage: run_pair.sh LAUNCHER OUTDIR [extra ddplaunch flags...]
# Prints "exit0 exit1" and leaves node0.log / node1.log in OUTDIR. Bounded by a 400 s timeout.
set -u
launcher=$1 out=$2; shift 2
here=$(cd "$(dirname "$0")" && pwd)
py=${PY:-/work/main/.venv/bin/python}
mkdir -p "$out"
port=$($py -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
common=(--nnodes=2 --nproc_per_node=2 --master_addr=127.0.0.1 --master_port="$port" --no_python "$@")
timeout -s KILL 400 "$launcher" "${common[@]}" --node_rank=0 "$py" "$here/worker.py" >"$out/node0.log" 2>&1 &
p0=$!
timeout -s KILL 400 "$launcher" "${common[@]}" --node_rank=1 "$py" "$here/worker.py" >"$out/node1.log" 2>&1 &
p1=$!
trap 'kill $p0 $p1 2>/dev/null' EXIT  # timeout passes the TERM on to its launcher
wait $p0; e0=$?
wait $p1; e1=$?
echo "$e0 $e1"
