#!/usr/bin/env bash
# The installed package, as a user sees it: `cmake --install` of the build tree into a temporary
# prefix, then an outside project (consumer/) configured with only CMAKE_PREFIX_PATH=<prefix> --
# nothing about torch, so the Torch location recorded in ddplaunchConfig.cmake must do -- built,
# and run: a one-rank process group, DistributedDataParallel over a Linear layer, one backward.
# Usage: test_package.sh <cmake> <build dir> <consumer source dir> <generator> <c++ compiler>
# Needs ddp_runtime, ddplaunch and ddplaunch-store built. Writes only under a mktemp directory,
# removed on exit. Compiling the LibTorch translation unit takes minutes on a small machine.
set -euo pipefail
cmake=$1
build=$2
consumer=$3
generator=$4
cxx=$5

work=$(mktemp -d "${TMPDIR:-/tmp}/ddplaunch-package.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

fail() {
  echo "FAIL: $*"
  exit 1
}
# Runs a step with its output in a log, shown only when the step fails.
step() {
  local name=$1
  shift
  echo "== $name"
  "$@" > "$work/$name.log" 2>&1 || {
    cat "$work/$name.log"
    return 1
  }
}

step install "$cmake" --install "$build" --prefix "$prefix" \
  || fail "cmake --install $build failed; build ddp_runtime, ddplaunch and ddplaunch-store first"
for f in bin/ddplaunch bin/ddplaunch-store bin/ddplaunch-etcd-tls include/ddplaunch/process_group.hpp \
         include/ddplaunch/distributed_data_parallel.hpp include/ddplaunch/rendezvous/store.hpp \
         include/ddplaunch/rendezvous/memory_store.hpp include/ddplaunch/common/error.hpp; do
  [[ -f $prefix/$f ]] || fail "the install has no $f"
done
# Only public headers are installed, all under include/ddplaunch/: the store's parser, state,
# connection and socket, and the common layer's private helpers stay in the source tree.
[[ ! -e $prefix/include/rendezvous ]] || fail "the install has an include/rendezvous/ outside include/ddplaunch/"
for f in request_parser.hpp store_state.hpp server_connection.hpp blocking_socket.hpp request.hpp \
         child_process.hpp process_set.hpp hostlist.hpp; do
  found=$(find "$prefix/include" -name "$f" | head -n 1)
  [[ -z $found ]] || fail "the install has the private header ${found#"$prefix"/}"
done
config=$(find "$prefix" -path '*/cmake/ddplaunch/ddplaunchConfig.cmake' | head -n 1)
[[ -n $config ]] || fail "the install has no lib*/cmake/ddplaunch/ddplaunchConfig.cmake"
libdir=$(dirname "$(dirname "$(dirname "$config")")")
for f in libddp_runtime.a libddp_rendezvous.a libddp_common.a; do
  [[ -f $libdir/$f ]] || fail "the install has no $f next to ${config#"$prefix"/}"
done
"$prefix/bin/ddplaunch" --help > /dev/null || fail "the installed ddplaunch --help exited $?"
echo "ok: executables, headers, libraries and package config in ${libdir#"$prefix"/}"

# Whatever the caller's environment says about torch must not help: the recorded hint has to.
unset CMAKE_PREFIX_PATH Torch_DIR Torch_ROOT
# CMAKE_CXX_STANDARD=20, as a user of our C++20 headers would set, is what breaks Caffe2's GPU
# detection unless ddplaunchConfig.cmake supplies an arch list.
step configure "$cmake" -S "$consumer" -B "$work/build" -G "$generator" -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_CXX_STANDARD=20 -DCMAKE_PREFIX_PATH="$prefix" \
  || fail "configuring the consumer with CMAKE_PREFIX_PATH=$prefix failed (find_package(ddplaunch))"
echo "ok: find_package(ddplaunch) with only CMAKE_PREFIX_PATH=<prefix>"
step build "$cmake" --build "$work/build" || fail "building the consumer against the installed package failed"
echo "ok: consumer built"

# The venv's nvidia/*/lib rpath is a public link option of ddp_runtime; it must survive the export
# (with its absolute path) and reach the consumer, or libtorch_cuda finds the wrong NCCL.
targets=$(dirname "$config")/ddplaunchTargets.cmake
if grep -q -- '-Wl,-rpath' "$targets"; then
  grep -q 'INTERFACE_LINK_OPTIONS.*-Wl,-rpath,/.*nvidia/' "$targets" \
    || fail "ddplaunch::runtime's INTERFACE_LINK_OPTIONS lost the nvidia rpath: $(grep -- -rpath "$targets")"
  readelf -d "$work/build/consumer" | grep -E 'R(UN)?PATH' | grep -q 'nvidia/' \
    || fail "the consumer has no rpath to the venv's nvidia/*/lib: $(readelf -d "$work/build/consumer" | grep PATH)"
  echo "ok: the nvidia rpath reached the consumer"
fi

out=$(timeout 120 "$work/build/consumer" 2>&1) || fail "the consumer exited $?: $out"
echo "$out"
grep -q '^consumer: ok' <<< "$out" || fail "the consumer did not print 'consumer: ok'"
echo "1 passed, 0 failed"
