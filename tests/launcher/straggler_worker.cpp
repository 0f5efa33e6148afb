// A stand-in for a ddplaunch-runtime worker in builds without LibTorch: it writes its collectives
// into the launcher's progress table through the same ProgressWriter the runtime's communicator
// uses (common/collective_progress.hpp), so the launcher's straggler detection reads it as it
// reads the runtime's. Each of STEPS steps (default 300) sleeps STEP_MS (default 40) ms, plus
// LATE_MS on rank LATE_RANK, enters collective #n, waits for every rank to enter it (a barrier of
// files in $PIDDIR: the collective) and leaves it. Writes its pid to $PIDDIR/pid.<rank>.
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "common/collective_progress.hpp"

namespace {

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

}  // namespace

int main() {
  const int rank = env_int("RANK", 0);
  const int world = env_int("WORLD_SIZE", 1);
  const int steps = env_int("STEPS", 300);
  const int step_ms = env_int("STEP_MS", 40);
  const int late_rank = env_int("LATE_RANK", -1);
  const int late_ms = env_int("LATE_MS", 0);
  const std::filesystem::path dir = std::getenv("PIDDIR") ? std::getenv("PIDDIR") : ".";
  std::ofstream(dir / ("pid." + std::to_string(rank))) << ::getpid();
  auto writer = ddp::ProgressWriter::from_env(ddp::process_env());
  if (!writer) return 2;
  for (int n = 1; n <= steps; ++n) {
    std::this_thread::sleep_for(std::chrono::milliseconds(step_ms + (rank == late_rank ? late_ms : 0)));
    writer->enter(ddp::CollectiveKind::Allreduce, 4096);
    std::ofstream(dir / ("b." + std::to_string(n) + "." + std::to_string(rank))) << "";
    for (int r = 0; r < world; ++r) {
      // The collective's wait: no event tells one process that another made a file, short of
      // inotify; a 1 ms nap is the test's stand-in for the network.
      while (!std::filesystem::exists(dir / ("b." + std::to_string(n) + "." + std::to_string(r))))
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    writer->leave();
  }
  return 0;
}
