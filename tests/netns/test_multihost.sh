#!/usr/bin/env bash
# Two hosts in network namespaces with their own addresses (10.231.0.1 and 10.231.0.2 on a veth
# pair), a ddplaunch on each: a 2-node job across them, then a cut link detected by heartbeats
# (both launchers exit non-zero naming the lost node, and no worker is left).
# Needs root and `ip netns` (skipped otherwise: exit 77). Traffic stays inside the namespaces.
set -euo pipefail
ddplaunch=$1
if [[ $(id -u) -ne 0 ]] || ! command -v ip >/dev/null; then echo "SKIP: needs root and iproute2"; exit 77; fi
A=ddp_test_a$$; B=ddp_test_b$$
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  ip netns del "$A" 2>/dev/null || true
  ip netns del "$B" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
if ! ip netns add "$A" 2>/dev/null; then echo "SKIP: cannot create network namespaces here"; exit 77; fi
ip netns add "$B"
ip link add "va$$" netns "$A" type veth peer name "vb$$" netns "$B"
ip -n "$A" addr add 10.231.0.1/24 dev "va$$"; ip -n "$A" link set "va$$" up; ip -n "$A" link set lo up
ip -n "$B" addr add 10.231.0.2/24 dev "vb$$"; ip -n "$B" link set "vb$$" up; ip -n "$B" link set lo up

cat > "$work/worker.sh" <<'W'
#!/usr/bin/env bash
echo "$$" > "$OUT_DIR/pid_$RANK"
env | grep -E '^(RANK|WORLD_SIZE|MASTER_ADDR)=' | sort > "$OUT_DIR/rank_$RANK.env"
sleep "${SLEEP:-0}"
W
chmod +x "$work/worker.sh"
fail() { echo "FAIL: $*"; for f in "$work"/*.log; do echo "== $f"; cat "$f"; done; exit 1; }

launch() {  # ns node_rank extra-args...
  local ns=$1 rank=$2; shift 2
  OUT_DIR=$work ip netns exec "$ns" timeout 60 "$ddplaunch" --nnodes 2 --node_rank "$rank" \
    --master_addr 10.231.0.1 --master_port 29555 --nproc_per_node 2 "$@" "$work/worker.sh" \
    > "$work/node$rank.log" 2>&1
}

echo "== a 2-node job across two hosts"
launch "$A" 0 & a=$!; pids+=($a)
launch "$B" 1 & b=$!; pids+=($b)
wait "$a" || fail "node 0 exited $?"
wait "$b" || fail "node 1 exited $?"
for r in 0 1 2 3; do
  grep -qx "WORLD_SIZE=4" "$work/rank_$r.env" || fail "rank $r missing or wrong world size"
  grep -qx "MASTER_ADDR=10.231.0.1" "$work/rank_$r.env" || fail "rank $r: wrong MASTER_ADDR"
done
echo "ok: ranks 0-3 across 10.231.0.1 and 10.231.0.2"

echo "== cutting the link mid-job"
rm -f "$work"/pid_* "$work"/*.env
export SLEEP=120
launch "$A" 0 --heartbeat_timeout 2 --shutdown_timeout 2 & a=$!; pids+=($a)
launch "$B" 1 --heartbeat_timeout 2 --shutdown_timeout 2 & b=$!; pids+=($b)
for _ in $(seq 1 100); do [[ $(ls "$work"/pid_* 2>/dev/null | wc -l) -eq 4 ]] && break; sleep 0.1; done
[[ $(ls "$work"/pid_* 2>/dev/null | wc -l) -eq 4 ]] || fail "workers did not start"
start=$(date +%s)
ip -n "$B" link set "vb$$" down
set +e
wait "$a"; ca=$?
wait "$b"; cb=$?
set -e
took=$(( $(date +%s) - start ))
[[ $ca -ne 0 && $ca -ne 124 ]] || fail "node 0 exited $ca (124 = not detected within 60 s)"
[[ $cb -ne 0 && $cb -ne 124 ]] || fail "node 1 exited $cb"
grep -q "lost node 1" "$work/node0.log" || fail "node 0 does not name the lost node 1"
grep -q "lost node 0" "$work/node1.log" || fail "node 1 does not name the lost node 0"
for f in "$work"/pid_*; do
  if kill -0 "$(cat "$f")" 2>/dev/null; then fail "worker $(cat "$f") still running"; fi
done
echo "ok: both launchers stopped in ${took}s (exit $ca and $cb), naming the lost node; no worker left"
echo "1 passed, 0 failed"
