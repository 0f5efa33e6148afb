#!/usr/bin/env bash
# Makes a venv with PyPI's deepspeed (DS_BUILD_OPS=0: no compiled ops) for the side-by-side of
# `ddplaunch --hostfile` and DeepSpeed's launcher (tests/netns/test_hostfile_vs_deepspeed.py).
# torch comes from the project's .venv (a .pth file points at its site-packages), so only
# deepspeed and its small dependencies are downloaded. pdsh comes from Debian (scripts/setup.sh).
#   Usage: bench/deepspeed_venv.sh DIR   (idempotent: returns at once when DIR/bin/deepspeed exists)
set -euo pipefail
dir=${1:?usage: bench/deepspeed_venv.sh DIR}
base=$(cd "$(dirname "$0")/.." && pwd)/.venv
[[ -x "$base/bin/python" ]] || base=/work/main/.venv
[[ -x "$dir/bin/deepspeed" ]] && exit 0
"$base/bin/python" -m venv "$dir"
site=$("$base/bin/python" -c 'import site; print(site.getsitepackages()[0])')
echo "$site" > "$(ls -d "$dir"/lib/python3*/site-packages)/project_venv.pth"
DS_BUILD_OPS=0 "$dir/bin/pip" install -q --disable-pip-version-check --no-build-isolation "deepspeed==${DEEPSPEED_VERSION:-0.19.8}"
