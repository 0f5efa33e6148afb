#!/usr/bin/env bash
# The pip route, as a torchrun user takes it: `pip wheel .` builds the wheel (no LibTorch in it),
# the wheel goes into the project's venv (which has torch), and then, with a clean environment
# (no activated venv, a PATH without the venv's bin/), `<venv>/bin/ddplaunch` and
# `<venv>/bin/python -m ddplaunch` both run a 2-worker script that imports torch, because the
# interpreter beside the installed ddplaunch is chosen. A worker run with an interpreter that lacks
# torch gets the ModuleNotFoundError hint naming it. The wheel is uninstalled on exit.
# Usage: test_wheel.sh <source dir> <venv python>
set -euo pipefail
src=$1
py=$2
venv_bin=$(dirname "$py")

work=$(mktemp -d "${TMPDIR:-/tmp}/ddplaunch-wheel.XXXXXX")
cleanup() {
  "$py" -m pip uninstall -q -y ddplaunch >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}

echo "== pip wheel (scikit-build-core; the build's output is in $work/wheel.log)"
launcher=()
command -v ccache >/dev/null && launcher=(-C cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache)
"$py" -m pip wheel "$src" --no-build-isolation --no-deps -w "$work/dist" "${launcher[@]}" >"$work/wheel.log" 2>&1 ||
  { tail -40 "$work/wheel.log"; fail "pip wheel"; }
wheel=$(ls "$work"/dist/ddplaunch-*.whl)
echo "$wheel"
"$py" -m zipfile -l "$wheel" | tee "$work/contents"
grep -q "data/scripts/ddplaunch " "$work/contents" || fail "the wheel has no scripts/ddplaunch"
grep -q "data/scripts/ddplaunch-store " "$work/contents" || fail "the wheel has no scripts/ddplaunch-store"
grep -q "data/scripts/ddplaunch-etcd-tls " "$work/contents" || fail "the wheel has no scripts/ddplaunch-etcd-tls"
grep -q "ddplaunch/__main__.py" "$work/contents" || fail "the wheel has no python -m entry"
grep -q "ddplaunch/worker_hook/sitecustomize.py" "$work/contents" || fail "the wheel has no Python worker hook"
if grep -qi "torch\|\.so" "$work/contents"; then fail "the wheel carries a shared library or LibTorch"; fi

echo "== pip install the wheel into $venv_bin/.."
"$py" -m pip install -q --no-deps --force-reinstall "$wheel"
[[ -x $venv_bin/ddplaunch && -x $venv_bin/ddplaunch-store && -x $venv_bin/ddplaunch-etcd-tls ]] ||
  fail "executables not in $venv_bin"
if ldd "$venv_bin/ddplaunch" | grep -qi "torch\|c10"; then fail "ddplaunch links LibTorch"; fi
if ldd "$venv_bin/ddplaunch" | grep -qi "libssl\|libcrypto"; then fail "ddplaunch links OpenSSL (only ddplaunch-etcd-tls may)"; fi

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
