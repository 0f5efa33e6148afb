#!/usr/bin/env bash
# Two hosts in network namespaces with their own addresses (10.231.0.1 and 10.231.0.2 on a veth
# pair, fd00:231::1 and ::2 as well), a ddplaunch on each:
#   1. a 2-node job across them;
#   2. a third host (10.231.1.2, routed to 10.231.0.1 through host A) as a stranger: it can reach
#      the store while the round forms, and is refused once it has formed, while both nodes'
#      workers carry on; the store does not listen on host A's other address;
#   3. the same job over IPv6 (--master_addr '[fd00:231::1]') with PyTorch workers (gloo);
#   4. a cut link detected by heartbeats (both launchers exit non-zero naming the lost node, and
#      no worker is left).
# Needs root and `ip netns` (skipped otherwise: exit 77). Traffic stays inside the namespaces.
#   Usage: test_multihost.sh DDPLAUNCH PYTHON_WITH_TORCH
set -euo pipefail
ddplaunch=$1
python=$2
if [[ $(id -u) -ne 0 ]] || ! command -v ip >/dev/null; then echo "SKIP: needs root and iproute2"; exit 77; fi
A=ddp_test_a$$; B=ddp_test_b$$; C=ddp_test_c$$
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  ip netns del "$A" 2>/dev/null || true
  ip netns del "$B" 2>/dev/null || true
  ip netns del "$C" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
if ! ip netns add "$A" 2>/dev/null; then echo "SKIP: cannot create network namespaces here"; exit 77; fi
ip netns add "$B"
ip link add "va$$" netns "$A" type veth peer name "vb$$" netns "$B"
ip -n "$A" addr add 10.231.0.1/24 dev "va$$"; ip -n "$A" link set "va$$" up; ip -n "$A" link set lo up
ip -n "$B" addr add 10.231.0.2/24 dev "vb$$"; ip -n "$B" link set "vb$$" up; ip -n "$B" link set lo up
ip -n "$A" addr add fd00:231::1/64 dev "va$$" nodad; ip -n "$B" addr add fd00:231::2/64 dev "vb$$" nodad
# The stranger's host C hangs off host A on another link and reaches 10.231.0.1 through it.
ip netns add "$C"
ip link add "vc$$" netns "$A" type veth peer name "vd$$" netns "$C"
ip -n "$A" addr add 10.231.1.1/24 dev "vc$$"; ip -n "$A" link set "vc$$" up
ip -n "$C" addr add 10.231.1.2/24 dev "vd$$"; ip -n "$C" link set "vd$$" up; ip -n "$C" link set lo up
ip -n "$C" route add default via 10.231.1.1

cat > "$work/worker.sh" <<'W'
#!/usr/bin/env bash
echo "$$" > "$OUT_DIR/pid_$RANK"
env | grep -E '^(RANK|WORLD_SIZE|MASTER_ADDR)=' | sort > "$OUT_DIR/rank_$RANK.env"
sleep "${SLEEP:-0}"
W
chmod +x "$work/worker.sh"
fail() { echo "FAIL: $*"; for f in "$work"/*.log; do echo "== $f"; cat "$f"; done; exit 1; }

MASTER=10.231.0.1
launch() {  # ns node_rank extra-args... (then the program: worker.sh unless PROGRAM is set)
  local ns=$1 rank=$2; shift 2
  OUT_DIR=$work ip netns exec "$ns" timeout 60 "$ddplaunch" --nnodes 2 --node_rank "$rank" \
    --master_addr "$MASTER" --master_port 29555 --nproc_per_node 2 "$@" ${PROGRAM:-"$work/worker.sh"} \
    > "$work/node$rank.log" 2>&1
}
# probe NS ADDR: connects to ADDR:29555 from namespace NS and says what the store did:
# "refused" (accepted, then closed at once), "open" (kept open for 2 s) or "unreachable".
probe() {
  ip netns exec "$1" timeout 10 bash -c "exec 3<>/dev/tcp/$2/29555 || { echo unreachable; exit 0; }
    if read -t 2 -u 3 _; then echo data; elif (( \$? > 128 )); then echo open; else echo refused; fi" 2>/dev/null
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

echo "== a stranger on a third host, before and after the round forms"
rm -f "$work"/pid_* "$work"/*.env
export SLEEP=5
launch "$A" 0 & a=$!; pids+=($a)
for _ in $(seq 1 100); do [[ $(probe "$A" 127.0.0.1) == open ]] && break; sleep 0.1; done
[[ $(probe "$C" $MASTER) == open ]] || fail "before the round formed, the stranger could not reach the store"
[[ $(probe "$C" 10.231.1.1) == unreachable ]] || fail "the store listens on host A's other address"
launch "$B" 1 & b=$!; pids+=($b)
for _ in $(seq 1 100); do [[ $(ls "$work"/pid_* 2>/dev/null | wc -l) -eq 4 ]] && break; sleep 0.1; done
[[ $(ls "$work"/pid_* 2>/dev/null | wc -l) -eq 4 ]] || fail "workers did not start"
got=$(probe "$C" $MASTER)
[[ $got == refused ]] || fail "after the round formed, the stranger's connection was $got, not refused"
[[ $(probe "$B" $MASTER) == open ]] || fail "after the round formed, host B was refused"
wait "$a" || fail "node 0 exited $? with a stranger around"
wait "$b" || fail "node 1 exited $? with a stranger around"
grep -q "new connections only from loopback and 10.231.0.1, 10.231.0.2" "$work/node0.log" ||
  fail "node 0 does not say whom it admits"
grep -q "10.231.1.2:[0-9]*: refused: not an address of the job's nodes" "$work/node0.log" ||
  fail "node 0 does not report the refused stranger"
echo "ok: the stranger reached the store only while the round formed; the job finished (exit 0 on both)"

echo "== the job over IPv6 with PyTorch workers"
rm -f "$work"/pid_* "$work"/*.env
cat > "$work/allreduce.py" <<'P'
import os, torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.tensor([float(os.environ["RANK"]) + 1])
dist.all_reduce(t)
print(f"rank {os.environ['RANK']} sum {t.item():g} MASTER_ADDR={os.environ['MASTER_ADDR']}", flush=True)
dist.destroy_process_group()
P
MASTER='[fd00:231::1]' PROGRAM="$python $work/allreduce.py" GLOO_SOCKET_IFNAME="va$$" launch "$A" 0 & a=$!; pids+=($a)
MASTER='[fd00:231::1]' PROGRAM="$python $work/allreduce.py" GLOO_SOCKET_IFNAME="vb$$" launch "$B" 1 & b=$!; pids+=($b)
wait "$a" || fail "node 0 exited $? over IPv6"
wait "$b" || fail "node 1 exited $? over IPv6"
for r in 0 1 2 3; do
  grep -q "rank $r sum 10 MASTER_ADDR=fd00:231::1" "$work"/node*.log || fail "rank $r: no allreduce over IPv6"
done
echo "ok: 4 PyTorch ranks across [fd00:231::1] and [fd00:231::2], allreduce sum 10, MASTER_ADDR unbracketed"

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
echo "4 passed, 0 failed"
