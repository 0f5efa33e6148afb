#!/bin/bash
# The liveness experiment of issue 24 item 8: RUNS plain 2-node jobs on loopback (run_pair.sh),
# one after another, each under stress-ng (CPU and I/O load) unless STRESS=0, and a tally of how
# each ended: the two exit codes and any "lost node" / "not counted" line.
#
#   stress_runs.sh LAUNCHER OUTDIR RUNS [ddplaunch flags...]
#
# stress-ng and the launchers run in one cgroup (v1, cpu and blkio) capped at CPU_QUOTA cores
# (default 1.5 of the 2), so that the 30 CPU hogs press on the job (~1/20 of a core per thread)
# without starving the rest of a shared machine. STRESS_ARGS overrides the stress-ng load.
# Environment: LIVENESS_SECONDS (worker run time, default 90), LIVENESS_CHATTY (extra lines per
# worker step). Every process it starts is ended by pid before it returns.
set -u
launcher=$1 out=$2 runs=$3; shift 3
here=$(cd "$(dirname "$0")" && pwd)
quota=${CPU_QUOTA:-1.5}
stress_args=${STRESS_ARGS:---cpu 30 --io 4 --hdd 2 --hdd-bytes 256M}
cg=/sys/fs/cgroup/cpu/ddp-liveness-$$
mkdir -p "$out" "$cg"
echo "$(awk -v q="$quota" 'BEGIN{printf "%d", q*100000}')" >"$cg/cpu.cfs_quota_us"
echo $$ >"$cg/cgroup.procs"  # this shell, stress-ng and the launchers
cleanup() {
  [ -n "${stress:-}" ] && kill -- "$stress" 2>/dev/null && wait "$stress" 2>/dev/null
  echo $$ >/sys/fs/cgroup/cpu/cgroup.procs
  rmdir "$cg" 2>/dev/null
}
trap cleanup EXIT
for i in $(seq 1 "$runs"); do
  d="$out/run$i"
  mkdir -p "$d"
  stress=
  if [ "${STRESS:-1}" = 1 ]; then
    (cd "$d" && exec stress-ng $stress_args --timeout 400 >"$d/stress.log" 2>&1) &
    stress=$!
    sleep 5
  fi
  start=$(date +%s)
  codes=$("$here/run_pair.sh" "$launcher" "$d" "$@")
  took=$(($(date +%s) - start))
  load=$(cut -d' ' -f1 /proc/loadavg)
  if [ -n "$stress" ]; then
    kill -- "$stress" 2>/dev/null
    wait "$stress" 2>/dev/null
    stress=
  fi
  lost=$(grep -h "lost node\|not counted\|lost the store" "$d"/node*.log | head -3 | tr '\n' '|')
  echo "run $i: exit $codes in ${took}s (load $load) $lost"
  rm -f "$d"/stress-ng-* 2>/dev/null
done
