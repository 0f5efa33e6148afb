// Straggler detection's input on one node (docs/stragglers.md): each local rank's collectives
// entered since the last read, with their entry times, from the two places a launcher sees them
// without any change to the workers' code:
//   - the ddplaunch runtime's ring in the collective-progress table (collective_progress.hpp):
//     shared memory, read without the worker's knowledge; its group is "runtime";
//   - PyTorch's Flight Recorder, through the worker's worker server ("ddplaunch_fr_entries", the
//     Python hook's handler: the entries created since its last answer, one line each). torch
//     2.15's gloo records only "time_created_ns" (CLOCK_REALTIME when the collective was called,
//     always, no setting needed); its "time_discovered_started_ns"/"_completed_ns" stay 0 and it
//     has no "duration_ms" (TORCH_NCCL_ENABLE_TIMING changes nothing for gloo). NCCL records the
//     same creation time; its discovered times come from its watchdog (with
//     TORCH_NCCL_ENABLE_TIMING=1). The creation time is the one both give: it is used for both.
//     The answer costs the worker a read of its whole ring (torch's pickled dump: ~30 ms of CPU for
//     2000 entries, bench/bench_stragglers.py), hence one read per scoring interval, not per second.
// A worker whose slot is attached by its pid reads from the table; otherwise from its server.
// Not thread-safe: one thread (the straggler watch's) uses it.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/collective_progress.hpp"
#include "launcher/rdzv/stragglers.hpp"

namespace ddp::launcher {

// A local worker of the round.
struct EntrySource {
  int rank = 0;
  int pid = 0;
  int slot = 0;        // its slot in the progress table
  std::string socket;  // its worker server; "" when none
};

class EntryReader {
 public:
  // `table` (nullable) must outlive this object. `timeout`: per worker server answer.
  EntryReader(const ProgressTable* table, std::chrono::milliseconds timeout) : table_(table), timeout_(timeout) {}

  // A new round's workers: what was read before is forgotten.
  void reset(std::vector<EntrySource> workers);
  // Every local worker's collectives entered since the last read (the worker servers asked in
  // parallel). Blocks up to about `timeout`; a worker that does not answer gives nothing this time.
  // Never throws (but std::bad_alloc).
  std::vector<EntryTime> read();

 private:
  const ProgressTable* table_;
  std::chrono::milliseconds timeout_;
  std::vector<EntrySource> workers_;
  std::map<int, std::uint64_t> table_seen_;  // by slot: the last collective read from its ring
};

// The worker server's answer, one line per entry ("<group> <#N> <created ns> <signature>"), as
// entries of `rank`; lines that are not so are skipped. Pure.
std::vector<EntryTime> parse_fr_entries(const std::string& text, int rank);

}  // namespace ddp::launcher
