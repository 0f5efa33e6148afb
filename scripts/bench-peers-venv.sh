#!/usr/bin/env bash
# The peer launchers' own venv for bench/ (never installed into the project's .venv): NVIDIA's
# ft_launcher from nvidia-resiliency-ext. It reuses the project's torch through a .pth file naming
# .venv's site-packages (the same torch as torchrun's, and no second multi-GB download), so pip
# finds torch>=2.3 satisfied and adds only the package and its small dependencies. Idempotent:
# when the venv already has it, it returns at once. Prints the venv's python on stdout.
# Usage: scripts/bench-peers-venv.sh [DIR=<repo>/.bench-venv]
# Needs the project's .venv (scripts/setup.sh) and PyPI. 0.4.1 is the newest release on PyPI for
# any CPython (checked 2026-11-29 with `pip index versions`); the pin keeps bench rows comparable.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/.bench-venv}
nvrx="nvidia-resiliency-ext==0.4.1"

if ! "$dir/bin/python" -c 'import nvidia_resiliency_ext.fault_tolerance' 2>/dev/null || [[ ! -x $dir/bin/ft_launcher ]]; then
  echo "bench-peers-venv: installing $nvrx into $dir" >&2
  # The interpreter .venv was made from (not whichever python3 is first on PATH), so the .pth below
  # names site-packages of the same Python version and ABI.
  base=$("$root/.venv/bin/python" -c 'import sys; print(sys._base_executable)')
  "$base" -m venv "$dir"
  site=$("$root/.venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  mine=$("$dir/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "$site" > "$mine/project-venv.pth"
  "$dir/bin/python" -m pip install -q --disable-pip-version-check "$nvrx" >&2
fi
echo "$dir/bin/python"
