#!/usr/bin/env bash
# The whole test suite, from a fresh clone: set-up, configure, build, then ctest.
#   scripts/test.sh          the full suite (the README's test command; CI runs it);
#   scripts/test.sh --quick  the inner loop: the main build only, its unit tests (label unit) and
#                            the two launcher end-to-end suites that cover most of a launch
#                            (docs/development.md); no sanitizer build.
# The full suite:
#   1. scripts/setup.sh (Debian packages, .venv with torch)
#   2. build-asan/: clang with ASan+UBSan, the non-LibTorch targets and the libFuzzer target;
#      its ctest runs every non-end-to-end test, the end-to-end suites labelled `sanitize` and a
#      bounded fuzz run under the sanitizers.
#   3. build/: the main build (gcc, LibTorch parts included); its ctest runs everything.
# Both tiers end alike (scripts/ctest_runs.sh): every test that needed a rerun, with the last lines
# of its first failure, then each ctest run's summary line; the last run's ("N% tests passed, ...")
# is the last line printed.
# Exit status: non-zero when either suite failed.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
quick=0
case "${1:-}" in
  "") ;;
  --quick) quick=1 ;;
  *) echo "test: unknown argument '$1'; use no argument (the full suite) or --quick (unit tests and two end-to-end suites)" >&2; exit 2 ;;
esac

bash scripts/setup.sh
source scripts/ctest_runs.sh
ctest_runs_begin

jobs=$(nproc)
# The test builds' compile flags (a build type's defaults otherwise: -O2 -g). Neither is a release
# build (that is scripts/release.sh's), and both are most of the suite's time on 2 cores:
#   main: -O2 -g1 (scripts/main_build.sh, shared with scripts/demo.sh);
#   sanitizers: -O0 with line tables, the usual ASan set-up (no access optimised away), at about
#     60% less compile time than -O2 -g under clang's ASan instrumentation;
#   the main build's test programs (tests/, DDP_TEST_COMPILE_OPTIONS): -Og on top, about a third
#     less compile time than -O2 for code that mostly calls the libraries under test, which keep -O2.
asan_flags="-O0 -gline-tables-only -DNDEBUG"
source scripts/main_build.sh
# DDP_TESTS explicitly: scripts/demo.sh configures the same build/ without the tests.
main_build=(main_build_configure -DDDP_TESTS=ON -DDDP_TEST_COMPILE_OPTIONS=-Og)
if ((quick)); then
  echo "test: configuring and building build/ (main)"
  "${main_build[@]}" >/dev/null
  cmake --build build -j "$jobs"
  echo "test: quick tier (unit tests, launcher end-to-end and first contact)"
  status=0
  run_ctest "unit tests (build/)" build -j "$jobs" -L unit || status=1
  run_ctest "launcher: e2e and first contact (build/)" build -j "$jobs" -R "^launcher: (e2e|first contact)$" \
    --repeat until-pass:2 || status=1
  ctest_runs_end
  exit $status
fi

echo "test: configuring and building build-asan/ (clang, ASan+UBSan, fuzz)"
CC=clang-14 CXX=clang++-14 cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DDDP_WITH_TORCH=OFF -DDDP_BENCH=OFF -DDDP_SANITIZE=ON -DDDP_FUZZ=ON -DDDP_PYTHON="$root/.venv/bin/python" \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="$asan_flags" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$asan_flags" >/dev/null
cmake --build build-asan -j "$jobs"

echo "test: configuring and building build/ (main)"
"${main_build[@]}" >/dev/null
cmake --build build -j "$jobs"

# Multi-process end-to-end tests share 2 cores with everything else here; a test that fails is
# run once more before the suite counts it as failed; the closing lines list every test that needed
# it (ctest_runs_end).
retry=(--repeat until-pass:2)
status=0
echo "test: sanitizer suite (build-asan/)"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# Under the sanitizers: every test that is not a multi-process end-to-end suite or packaging (unit,
# loopback, the store's contract and command line, the fuzz run), and of the end-to-end suites those labelled
# `sanitize`: the launch path and the strangers' hostile input. The other end-to-end suites run
# once, in the main suite: under ASan they repeated the same launches at twice the cost.
run_ctest "sanitizers, not end-to-end (build-asan/)" build-asan -j "$jobs" "${retry[@]}" -LE '^(e2e|package)$' || status=1
run_ctest "sanitizers, end-to-end (build-asan/)" build-asan -j "$jobs" "${retry[@]}" -L '^sanitize$' || status=1
unset ASAN_OPTIONS UBSAN_OPTIONS

echo "test: main suite (build/)"
run_ctest "main suite (build/)" build -j "$jobs" "${retry[@]}" || status=1
ctest_runs_end
exit $status
