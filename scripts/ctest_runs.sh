# shellcheck shell=bash
# Sourced by scripts/test.sh (and its test, tests/scripts/test_rerun_report.py): ctest runs whose
# reruns are reported at the end.
#   ctest_runs_begin            a temporary folder for the runs' records, removed at exit
#   run_ctest LABEL DIR ARGS..  ctest --test-dir DIR --output-on-failure ARGS..., its standard
#                               output shown and kept, its LastTest.log (every attempt's output)
#                               kept; returns ctest's status
#   ctest_runs_end              the closing lines (scripts/rerun_report.py): every test that needed
#                               a rerun with its first failure's last lines, then each run's
#                               summary line, the last run's last and unchanged
# Needs bash with `set -o pipefail` (ctest's status through tee) and python3.

ctest_runs_begin() {
  ctest_runs_dir=$(mktemp -d "${TMPDIR:-/tmp}/ctest-runs.XXXXXX")
  ctest_runs=0
  trap 'rm -rf "$ctest_runs_dir"' EXIT
}

run_ctest() {
  local label=$1 dir=$2
  shift 2
  ctest_runs=$((ctest_runs + 1))
  local record="$ctest_runs_dir/$ctest_runs"
  printf '%s\n' "$label" > "$record.label"
  # A run that stops before any test leaves no LastTest.log: none from an earlier run is read instead.
  rm -f "$dir/Testing/Temporary/LastTest.log"
  local status=0
  ctest --test-dir "$dir" --output-on-failure "$@" | tee "$record.console" || status=$?
  cp "$dir/Testing/Temporary/LastTest.log" "$record.attempts" 2>/dev/null || true
  return $status
}

ctest_runs_end() {
  python3 "$(dirname "${BASH_SOURCE[0]}")/rerun_report.py" "$ctest_runs_dir" ||
    echo "test: scripts/rerun_report.py failed; the runs' summaries are above" >&2
}
