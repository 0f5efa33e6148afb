#!/usr/bin/env bash
# The pip route, as a user takes it, without touching any shared venv:
#   1. `pip wheel` of the checkout (scikit-build-core: its install rules, cmake/wheel.cmake's link
#      rules), built in <build dir>-wheel/ (kept: a rerun recompiles only what changed) with the
#      developer build's flags -- RelWithDebInfo, in the unity batches pyproject.toml asks for -- and
#      ccache when there is one: that directory sits beside the developer build, so the compiles are
#      ccache hits and the test takes a minute or two, not a full compile. The release configuration
#      (Release, from the sdist) is scripts/release.sh's to build and check;
#   2. `auditwheel repair` to a manylinux wheel, then scripts/check_wheel.sh: `auditwheel show`
#      confirms the tag, no executable became a Python shim, and a fresh venv without a compiler on
#      PATH installs the wheel and runs ddplaunch, `python -m ddplaunch` and `pipx run`;
#   3. a torchrun user's venv: a fresh venv that sees the project venv's torch (a .pth file) gets
#      the wheel; then, with a clean environment (no activated venv, a PATH without the venv's
#      bin/), `<venv>/bin/ddplaunch` and `<venv>/bin/python -m ddplaunch` both run a 2-worker script
#      that imports torch, because the interpreter beside the installed ddplaunch is chosen. A
#      worker run with an interpreter that lacks torch gets the ModuleNotFoundError hint naming it.
# Usage: test_wheel.sh <source dir> <venv python with torch and scikit-build-core> <build dir>
#                      <C compiler> <C++ compiler>
# Needs PyPI the first time (the release tools' venv, <build dir>/release-venv). Writes under a
# mktemp directory (removed on exit), the build dir and <build dir>-wheel/.
set -euo pipefail
src=$1
py=$2
build=$3
c_compiler=$4
cxx_compiler=$5

work=$(mktemp -d "${TMPDIR:-/tmp}/ddplaunch-wheel.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}

echo "== release tools"
tools_py=$("$src/scripts/release-venv.sh" "$build/release-venv")

echo "== pip wheel (scikit-build-core; the build's output is in $work/wheel.log)"
# The developer build's compilers by the same names: ccache keys on the compiler's name too, and the
# pip build would otherwise get Python's (x86_64-linux-gnu-g++).
# Stripped at install as a Release wheel is (scikit-build-core strips only Release builds itself).
settings=(-C "build-dir=$build-wheel" -C cmake.build-type=RelWithDebInfo -C install.strip=true
          -C "cmake.define.CMAKE_C_COMPILER=$c_compiler" -C "cmake.define.CMAKE_CXX_COMPILER=$cxx_compiler")
command -v ccache >/dev/null && settings+=(-C cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache)
# and the developer build's compile flags (scripts/test.sh sets its own), for the same reason.
for var in CMAKE_C_FLAGS_RELWITHDEBINFO CMAKE_CXX_FLAGS_RELWITHDEBINFO; do
  flags=$(sed -n "s/^$var:[A-Z]*=//p" "$build/CMakeCache.txt")
  if [[ -n $flags ]]; then settings+=(-C "cmake.define.$var=$flags"); fi
done
"$py" -m pip wheel "$src" --no-build-isolation --no-deps -w "$work/dist" "${settings[@]}" >"$work/wheel.log" 2>&1 ||
  { tail -40 "$work/wheel.log"; fail "pip wheel"; }
plain=$(ls "$work"/dist/ddplaunch-*.whl)
"$py" -m zipfile -l "$plain" >"$work/contents"
for f in data/scripts/ddplaunch data/scripts/ddplaunch-store data/scripts/ddplaunch-etcd-tls \
         ddplaunch/__main__.py ddplaunch/worker_hook/sitecustomize.py; do
  grep -q "$f " "$work/contents" || fail "the wheel has no $f"
done
if grep -qi "torch\|\.so" "$work/contents"; then fail "the wheel carries a shared library or LibTorch"; fi

echo "== auditwheel repair $(basename "$plain")"
PATH="$(dirname "$tools_py"):$PATH" auditwheel repair -w "$work/repaired" "$plain" >"$work/repair.log" 2>&1 ||
  { cat "$work/repair.log"; fail "auditwheel repair"; }
wheel=$(ls "$work"/repaired/ddplaunch-*.whl)
bash "$src/scripts/check_wheel.sh" "$wheel" "$tools_py"

echo "== a venv that sees torch gets the wheel"
venv=$work/torch-venv
"$py" -m venv "$venv"
torch_site=$("$py" -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))')
own_site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
echo "$torch_site" >"$own_site/project-venv.pth"
"$venv/bin/python" -m pip install -q --disable-pip-version-check --no-index "$wheel"
venv_bin=$venv/bin

cat >"$work/script.py" <<'PY'
import os, sys
import torch
print(f"rank {os.environ['RANK']} of {os.environ['WORLD_SIZE']}: torch {torch.__version__} from {sys.executable}")
PY
clean_env=(env -i HOME="$work" PATH=/usr/local/bin:/usr/bin:/bin)

check_run() {
  local name=$1
  shift
  echo "== $name"
  (cd "$work" && "${clean_env[@]}" "$@" --nproc_per_node 2 script.py) >"$work/$name.out" 2>&1 ||
    { cat "$work/$name.out"; fail "$name exited $?"; }
  cat "$work/$name.out"
  for r in 0 1; do
    grep -q "rank $r of 2: torch" "$work/$name.out" || fail "$name: rank $r did not import torch"
  done
  grep -q "python: $venv_bin/python (beside $venv_bin/ddplaunch)" "$work/$name.out" ||
    fail "$name: the rank-map line does not name the venv's python"
}
check_run installed-ddplaunch "$venv_bin/ddplaunch"
check_run python-m-ddplaunch "$venv_bin/python" -m ddplaunch

echo "== an interpreter without torch gets the hint"
rc=0
(cd "$work" && "${clean_env[@]}" PYTHON_EXEC=/usr/bin/python3 "$venv_bin/ddplaunch" script.py) >"$work/hint.out" 2>&1 || rc=$?
cat "$work/hint.out"
[[ $rc -ne 0 ]] || fail "a worker without torch succeeded"
grep -q "ModuleNotFoundError" "$work/hint.out" || fail "no ModuleNotFoundError shown"
grep -q "hint      : the worker ran /usr/bin/python3 (\$PYTHON_EXEC)" "$work/hint.out" || fail "no interpreter hint"
echo "PASS"
