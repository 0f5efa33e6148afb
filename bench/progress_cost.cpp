// The cost of recording one collective in a progress slot (common/collective_progress.hpp): enter
// + leave, timed over many iterations on this core; bench_ddp.py sets it against a DDP step.
#include <chrono>
#include <cstdio>

#include "common/collective_progress.hpp"

int main() {
  ddp::ProgressTable table = ddp::ProgressTable::create(1);
  auto writer = ddp::ProgressWriter::from_env(
      ddp::map_env({{ddp::kProgressVariable, ddp::progress_variable_value(table.fd(), 0)}}));
  constexpr int kIterations = 5000000;
  double best = 1e30;
  for (int round = 0; round < 5; ++round) {  // the best of five: the least disturbed by the machine
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kIterations; ++i) {
      writer->enter(ddp::CollectiveKind::Allreduce, 4096);
      writer->leave();
    }
    const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
    if (ns / kIterations < best) best = ns / kIterations;
  }
  if (table.read(0).completed != 5ull * kIterations) return 1;
  std::printf("progress_cost ns_per_collective=%.1f\n", best);
  return 0;
}
