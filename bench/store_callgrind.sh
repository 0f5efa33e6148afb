#!/usr/bin/env bash
# User-space instructions per op of a store server, counted by callgrind: load-independent, so
# before/after comparisons hold on a busy machine where CPU-time ratios do not (RESULTS.md §3).
#   bench/store_callgrind.sh BIN_DIR [CONNS] [SECONDS] [MODE]      (defaults: 16 5 pingpong)
# Runs BIN_DIR/ddplaunch-store under valgrind --tool=callgrind, drives it with BIN_DIR/store_load
# (MODE: pingpong or mix; floor-pingpong or floor-mix to measure `store_load serve-floor` instead)
# and prints the event loop's and the request path's inclusive instructions per op, each op
# counted by store_load's ops_total (warm-up included). Needs valgrind (apt-get install valgrind; scripts/setup.sh leaves it out: no test uses it).
set -euo pipefail
BIN=$1
CONNS=${2:-16}
SECONDS_=${3:-5}
MODE=${4:-pingpong}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

case "$MODE" in
  floor-pingpong) SERVER=("$BIN/store_load" serve-floor pingpong 30) LOAD=floor-pingpong:30 LOOP='^main$' ;;
  floor-mix) SERVER=("$BIN/store_load" serve-floor echo 24 8) LOAD=floor-echo:24:8 LOOP='^main$' ;;
  *) SERVER=("$BIN/ddplaunch-store" --host 127.0.0.1 --port 0 -q) LOAD=$MODE LOOP='TcpStoreServer::run\(\)' ;;
esac
# The floor serves until its stdin closes; the store until SIGTERM.
mkfifo "$OUT/stdin"
sleep infinity >"$OUT/stdin" &
HOLD=$!
valgrind --tool=callgrind --callgrind-out-file="$OUT/cg.out" "${SERVER[@]}" <"$OUT/stdin" >"$OUT/server.log" 2>/dev/null &
SERVER_PID=$!
# valgrind takes a second or two to start; the port line is the event that says it listens.
for _ in $(seq 300); do grep -qE 'port=|listening' "$OUT/server.log" && break; sleep 0.1; done
PORT=$(grep -oE '[0-9]+$' "$OUT/server.log" | head -1)
"$BIN/store_load" run 127.0.0.1 "$PORT" "$CONNS" "$SECONDS_" "$LOAD" >"$OUT/load.json"
kill "$HOLD"
[[ $MODE == floor-* ]] || kill -TERM "$SERVER_PID"
wait "$SERVER_PID" || true
callgrind_annotate --inclusive=yes "$OUT/cg.out" >"$OUT/annotated.txt"
python3 - "$OUT/load.json" "$OUT/annotated.txt" "$LOOP" <<'EOF'
import json, re, sys
ops = json.load(open(sys.argv[1]))["ops_total"]
text = open(sys.argv[2]).read().splitlines()
def ir(pattern):
    for line in text:
        name = line.split(":", 1)[-1].split(" [")[0] if ":" in line else ""
        if re.search(pattern, name):
            return int(line.split()[0].replace(",", ""))
    return 0
loop, path = ir(sys.argv[3]), ir(r"ServerConnection::handle_input\(")
print(f"ops {ops}: event loop {loop / ops:.0f} instructions per op" +
      (f", request path {path / ops:.0f}" if path else ""))
EOF
