#!/usr/bin/env bash
# Prepares a fresh Debian 12 machine (as root) to build and test ddplaunch:
#   1. Debian packages: compilers, CMake/Ninja, CLI11, Boost (Asio), fmt, Catch2, clang's
#      libFuzzer and sanitizer runtimes, python3-venv, libsodium (the job secret's HMAC),
#      nlohmann-json (workers' error files, the JSON summary and event log), elfutils (eu-stack),
#      etcd-server and etcd-client (the etcd v3 client's tests run real etcd members), libssl-dev
#      (ddplaunch-etcd-tls, the TLS proxy to etcd), openssl (its test makes certificates),
#      libhwloc-dev (--numa_binding's topology), chromium with chromium-driver (the job page's
#      test renders it in headless Chromium), openssh-server/-client and pdsh (--hostfile's tests
#      run an sshd per network-namespace host; pdsh for DeepSpeed's launcher beside it).
#   2. .venv/ with the pinned PyPI torch wheel: it is both the project's LibTorch
#      (torch.utils.cmake_prefix_path) and the real PyTorch used by interop tests and benchmarks.
#   3. pytest and pytest-timeout in .venv/: the Python suites (tests/conftest.py) run under them.
# Idempotent: on a ready machine it checks and returns in seconds.
#   Usage: scripts/setup.sh [--demo]
# --demo (scripts/demo.sh): only what building and running the main job needs -- the build's
# Debian packages and .venv with torch's CPU libraries (the wheel without its CUDA libraries,
# Triton and Python dependencies: Python cannot import that torch), none of the test suite's
# packages (Catch2, clang, etcd, OpenMPI; pytest and the other Python tools). A later run without
# it adds all of them.
set -euo pipefail
cd "$(dirname "$0")/.."
demo=0
case "${1:-}" in
  "") ;;
  --demo) demo=1 ;;
  *) echo "setup: unknown argument '$1'; use no argument (everything the test suite needs) or --demo (only the main job's build)" >&2; exit 2 ;;
esac

TORCH_VERSION="${DDPLAUNCH_TORCH_VERSION:-2.15.0}"
# What configuring and building ddplaunch and the C++ runtime needs (and eu-stack, for the
# launcher's stack dumps of a hung job), then what only the test suite needs.
DEMO_PKGS=(build-essential cmake ninja-build pkg-config git ccache
           libcli11-dev libboost-dev libboost-system-dev libfmt-dev
           python3 python3-venv python3-dev
           libsodium-dev nlohmann-json3-dev libssl-dev libhwloc-dev elfutils)
TEST_PKGS=(catch2 clang-14 libclang-rt-14-dev libfuzzer-14-dev iproute2 procps
           openmpi-bin openssl etcd-server etcd-client chromium chromium-driver
           openssh-server openssh-client pdsh)
PKGS=("${DEMO_PKGS[@]}")
((demo)) || PKGS+=("${TEST_PKGS[@]}")

say() { printf 'setup: %s\n' "$*"; }

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    say "missing Debian packages: ${missing[*]}; run this script as root (or install them)" >&2
    exit 1
  fi
  say "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  say "Debian packages present"
fi

PY=/usr/bin/python3
if [[ ! -x .venv/bin/python ]]; then
  say "creating .venv with $($PY --version)"
  $PY -m venv .venv
fi
# "VERSION CMAKE_PREFIX" of the venv's torch, empty without one. The test suite's torch must import
# (Python workers use it; importing takes seconds, so one import answers both the version check and
# the closing line); the demo's is LibTorch's CPU libraries only, which Python cannot import, so
# its version comes from the package's metadata and its prefix from where the package is.
torch_info() {
  if ((demo)); then
    .venv/bin/python -c 'import importlib.metadata as m, importlib.util as u, os
print(m.version("torch").split("+")[0], os.path.join(os.path.dirname(u.find_spec("torch").origin), "share", "cmake"))' \
      2>/dev/null || true
  else
    .venv/bin/python -c 'import torch, torch.utils; print(torch.__version__.split("+")[0], torch.utils.cmake_prefix_path)' \
      2>/dev/null || true
  fi
}
# The CUDA runtime and CUPTI, pinned as the torch wheel pins them (its cuda-toolkit requirement):
# all of its CUDA dependencies that libtorch_cpu.so loads. Empty when the wheel names none.
torch_cpu_deps() {
  .venv/bin/python -c 'import importlib.metadata as m, re
for r in m.requires("torch") or []:
    if r.startswith("cuda-toolkit["): print(re.sub(r"\[[^]]*\]", "[cudart,cupti]", r.split(";")[0]).strip())'
}
info=$(torch_info)
have=${info%% *}
if [[ "$have" != "$TORCH_VERSION" ]]; then
  pip=(.venv/bin/python -m pip install --disable-pip-version-check)
  "${pip[@]}" -q --upgrade pip
  # pip shows its download progress on a terminal (torch is large); -q elsewhere. --no-compile: no
  # byte-compiling of torch's thousands of modules at install (a fifth of the install's CPU time);
  # Python compiles the ones a program imports, once, when it first does.
  quiet=(-q)
  [[ -t 1 ]] && quiet=()
  if ((demo)); then
    # The demo links LibTorch's CPU libraries only (DDP_TORCH_CPU_ONLY): torch without its 3 GB of
    # nvidia-* libraries, Triton and the Python packages, which only `import torch` needs.
    say "installing torch==$TORCH_VERSION's CPU libraries into .venv (Python's import torch needs scripts/setup.sh without --demo)"
    "${pip[@]}" "${quiet[@]}" --no-compile --no-deps "torch==$TORCH_VERSION"
    cpu_deps=$(torch_cpu_deps)
    if [[ -n $cpu_deps ]]; then
      # (pip would list every dependency of torch left out as a conflict.)
      "${pip[@]}" "${quiet[@]}" --no-compile --no-warn-conflicts "$cpu_deps"
    else
      "${pip[@]}" "${quiet[@]}" --no-compile "torch==$TORCH_VERSION"
    fi
  else
    # After --demo's torch, this adds the dependencies it left out.
    say "installing torch==$TORCH_VERSION into .venv (large download on first run)"
    "${pip[@]}" "${quiet[@]}" --no-compile "torch==$TORCH_VERSION" numpy
  fi
  info=$(torch_info)
  if [[ ${info%% *} != "$TORCH_VERSION" ]]; then
    say "torch==$TORCH_VERSION is still not usable in .venv after installing it (found '${info%% *}');" \
        "pip's output above says why; remove .venv and run this script again" >&2
    exit 1
  fi
else
  say "torch $have present in .venv"
fi
# Test and packaging tools: pytest for the Python suites, scikit-build-core for `pip wheel .`,
# py-spy for Python workers' stacks where their worker server cannot answer (elfutils' eu-stack
# for native ones), Accelerate for the hang tests of an Accelerate script, pytest-xdist for the
# suites that run their tests two at a time (ddp_add_pytest's PAIRS), selenium to drive headless
# Chromium through the job page's test.
py_tools=(pytest pytest-timeout pytest-xdist scikit-build-core py-spy accelerate selenium)
if ((demo)); then
  : # the main job needs none of them
elif ! .venv/bin/python -c 'import pytest, pytest_timeout, xdist, scikit_build_core, accelerate, selenium' 2>/dev/null || [[ ! -x .venv/bin/py-spy ]]; then
  say "installing ${py_tools[*]} into .venv"
  .venv/bin/python -m pip install -q --disable-pip-version-check "${py_tools[@]}"
fi
# TorchFT's replica-group test: torchft in .venv-torchft, over .venv's torch (scripts/torchft_venv.sh).
((demo)) || scripts/torchft_venv.sh .venv .venv-torchft
say "LibTorch cmake prefix: ${info#* }"
say "ready"
