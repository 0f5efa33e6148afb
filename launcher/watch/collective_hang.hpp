// What a collective-level hang report says, from every rank's progress slot
// (common/collective_progress.hpp), this node's and, in a multi-node job, the other nodes'
// (gathered through the store only once a hang is suspected, stacks_request.hpp). Pure functions
// over snapshots; the watching is in hang_watch.hpp.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/collective_progress.hpp"
#include "launcher/rdzv/hung_collective.hpp"

namespace ddp::launcher {

// One rank's snapshot as a report needs it.
struct RankProgress {
  int rank = 0;
  int node = 0;
  std::string host;
  int pid = 0;
  char state = 0;  // watch/probe/proc_stat.hpp's letter when it was read
  CollectiveProgress progress;
  std::int64_t taken_ns = 0;  // when the snapshot was read (CLOCK_REALTIME ns); 0: unknown
};

// A local worker of the round.
struct WatchedWorker {
  int rank = 0;
  int slot = 0;  // its slot in the progress table (its index on this node)
};

// Every local worker's snapshot (by pid), its process state read now. Never throws.
std::vector<RankProgress> read_progress(const ProgressTable& table, const std::map<int, WatchedWorker>& workers,
                                        int node, const std::string& host);

// One JSON array per node, for its answer in the store. Pure.
std::string encode_progress(const std::vector<RankProgress>& ranks);
// The inverse; a value that is not one (a stranger's write, an older launcher) gives the ranks it
// could read, possibly none. Never throws.
std::vector<RankProgress> decode_progress(const std::string& value);

// The report's body, ranks in order, times relative to each snapshot's taken_ns (else `now_ns`,
// CLOCK_REALTIME ns):
//   Collective #57 (allreduce, 4.0 MiB) never completed:
//     rank 0 (node 0 on vm, pid 100, sleeping (waiting for an event)): waiting in it for 5.2 s (since 09:41:02.123 UTC)
//     rank 1 (node 1 on gpu2, pid 101, stopped (...)): never entered it; its last, allreduce #56, completed 5.3 s ago
//   Never entered collective #57: rank 1 (node 1 on gpu2)
// Ranks that publish no progress (a program not built on the ddplaunch runtime) are listed as
// such. Pure.
std::string describe_hang(const std::vector<RankProgress>& ranks, std::int64_t now_ns);

// The collective describe_hang() reports, as a record (group "0": the runtime's collectives are
// the whole job's; no Python lines); nullopt when no rank publishes progress. Pure.
std::optional<HungCollective> hung_collective(const std::vector<RankProgress>& ranks);

// One line per rank of what it is doing when its snapshot was taken (else at `now_ns`), for
// --dump_stacks: "  rank 0: in allreduce #57 (4.0 MiB)
// for 3.2 s", "  rank 1: last allreduce #56 completed 0.1 s ago", "  rank 2: no collective yet".
// Ranks that publish no progress (Python workers, programs not built on the ddplaunch runtime)
// are left out: "" when none publishes any. Pure.
std::string describe_progress(const std::vector<RankProgress>& ranks, std::int64_t now_ns);

// "4.0 MiB", "512 B". Pure.
std::string byte_size(std::uint64_t bytes);

}  // namespace ddp::launcher
