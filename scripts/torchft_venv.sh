#!/usr/bin/env bash
# TorchFT for its test (tests/launcher/replicas/test_torchft.py) in a venv of its own, over the
# project's .venv: a .pth file names .venv's site-packages, so torchft finds .venv's torch
# (it needs torch>=2.7) and nothing is installed into .venv itself. Idempotent: returns at once
# when torchft is installed there.
#   Usage: scripts/torchft_venv.sh [BASE_VENV (default .venv)] [DEST (default .venv-torchft)]
set -euo pipefail
cd "$(dirname "$0")/.."
TORCHFT_VERSION="${DDPLAUNCH_TORCHFT_VERSION:-0.2.0}"
base="${1:-.venv}"
dest="${2:-.venv-torchft}"
# Installed: its metadata is there (importing it would import torch, seconds).
if "$dest/bin/python" -c 'import importlib.metadata as m; m.version("torchft")' 2>/dev/null; then
  exit 0
fi
if [[ ! -x "$base/bin/python" ]]; then
  echo "torchft_venv: no Python at $base/bin/python; run scripts/setup.sh first (it makes .venv with torch)" >&2
  exit 1
fi
echo "torchft_venv: installing torchft==$TORCHFT_VERSION into $dest (over $base's torch)"
# The same interpreter as the base venv's (its `home`), so the .pth's packages are ABI-compatible.
interpreter=$("$base/bin/python" -c 'import sys; print(sys._base_executable)')
"$interpreter" -m venv "$dest"
"$base/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' \
  > "$("$dest/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/ddplaunch-base-venv.pth"
"$dest/bin/python" -m pip install -q --disable-pip-version-check "torchft==$TORCHFT_VERSION"
"$dest/bin/python" -c 'import torch, torchft; print("torchft_venv: torchft", torchft.__version__ if hasattr(torchft, "__version__") else "'"$TORCHFT_VERSION"'", "with torch", torch.__version__)'
