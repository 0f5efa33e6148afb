# Sourced by scripts/demo.sh and scripts/test.sh: configures the main build, build/ (gcc, LibTorch
# parts included), with the flags both use, so the demo's objects are the test suite's too.
#   main_build_configure [CMAKE_ARGS...]   (ROOT: the checkout; output is the caller's to keep)
# Flags: -O2 -g1, line tables and function names without the variable and type descriptions --
# what a stack dump of a worker reads -- at about 30% less compile time in the LibTorch files than
# -O2 -g. Through ccache (scripts/setup.sh installs it), in the checkout's .ccache/ unless
# CCACHE_DIR says otherwise: the package test builds the wheel from the same files with the same
# flags, and a re-run after the demo's build compiles nothing twice. Depend mode: a miss (every
# compile of a fresh clone) is not preprocessed first to be hashed -- the compiler's own -MD list
# names the headers. Unity build (DDP_UNITY_BUILD): each library's files compiled a batch at a time,
# the shared headers (Asio, fmt, CLI11, LibTorch's) parsed once per batch instead of once per file;
# the sanitizer build (scripts/test.sh) stays one object per file and so still checks each file's
# includes.
main_build_configure() {
  local root=$PWD flags="-O2 -g1 -DNDEBUG"
  export CCACHE_DIR="${CCACHE_DIR:-$root/.ccache}" CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=1 CCACHE_DEPEND=1
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDDP_BENCH=OFF -DDDP_UNITY_BUILD=ON \
    -DDDP_PYTHON="$root/.venv/bin/python" \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="$flags" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$flags" \
    -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache "$@"
}
