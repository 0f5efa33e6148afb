// Per-worker collective progress in shared memory, the one mechanism both sides use: the
// launcher creates a table with one slot per local worker (an anonymous memfd, so nothing is left
// on any file system if the launcher is killed) and passes its descriptor to every worker
// (DDPLAUNCH_PROGRESS=<fd>:<slot>, the slot being the worker's index on its node); the runtime writes, in its slot, the
// sequence number, kind and size of each collective as it enters it and as it leaves it; the launcher reads the slots
// (--hang_timeout, --dump_stacks). The hot path touches no store, no lock and no system call: a few atomic stores and
// two reads of the vDSO clock per collective.
//
// Layout (64-byte header "ddplaunch-progress v1" + slot count, then 64-byte slots, one cache line
// each, then each slot's ring of its last kEntryRing collectives entered, 32 bytes each: number,
// entry time, kind, size, for straggler detection, docs/stragglers.md). Each slot is a seqlock:
// one writer (the worker's communicator, which serialises its collectives), any number of
// readers that retry while a write is under way; a ring entry's number is stored last and
// checked again after its fields are read. The rings came later, after the slots, so a writer
// and a table of either age work together (without ring entries).
//
// Thread-safety: a ProgressWriter is used by one thread at a time (the communicator's); reading
// is safe from any thread and process at any time.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ddplaunch/common/env_lookup.hpp"
#include "ddplaunch/common/error.hpp"

namespace ddp {

// What a worker is doing, as its slot says. Times are CLOCK_REALTIME nanoseconds (comparable
// across nodes as far as their clocks agree).
enum class CollectiveKind : std::uint32_t { None = 0, Allreduce, Broadcast, Allgather, Barrier };
const char* to_string(CollectiveKind kind);

struct CollectiveProgress {
  int pid = 0;                                 // 0: no worker has attached to the slot (not our runtime, or not yet)
  std::uint64_t entered = 0;                   // sequence number (1, 2, ...) of the last collective entered; 0: none
  std::uint64_t completed = 0;                 // of the last one completed (== entered when not inside one)
  CollectiveKind kind = CollectiveKind::None;  // of the last entered
  std::uint64_t bytes = 0;                     // its payload on this rank
  std::int64_t entered_ns = 0;
  std::int64_t completed_ns = 0;
  bool attached() const { return pid != 0; }
  bool inside() const { return entered > completed; }
};

// One collective a worker entered, from its slot's ring.
struct CollectiveEntry {
  std::uint64_t seq = 0;
  std::int64_t entered_ns = 0;
  CollectiveKind kind = CollectiveKind::None;
  std::uint64_t bytes = 0;
};
// How many of a worker's last collectives its ring keeps: at 100 collectives a second, 10 s.
inline constexpr std::size_t kEntryRing = 1024;

// The launcher's side. Move-only; unmaps and closes on destruction.
class ProgressTable {
 public:
  // A zeroed table of `slots` slots. Throws ddp::Error naming the call that failed.
  static ProgressTable create(int slots);
  ProgressTable(ProgressTable&& other) noexcept;
  ProgressTable& operator=(ProgressTable&& other) noexcept;
  ~ProgressTable();

  // The descriptor workers inherit (not close-on-exec: pass it in ChildOptions::keep_fds).
  int fd() const { return fd_; }
  int slots() const { return slots_; }
  // Zeroes every slot (a new round, before its workers start). Never throws.
  void reset();
  // A consistent snapshot of slot `slot` (< slots()). Never throws. Blocks only while a writer is
  // mid-write: spins, then naps up to ~20 ms for a descheduled writer; a writer stopped mid-write
  // (SIGSTOP) gets its last copy given, which may be torn.
  CollectiveProgress read(int slot) const;
  // The collectives slot `slot` (< slots()) entered after number `after` that its ring still
  // holds, oldest first. Never throws (but std::bad_alloc); never blocks.
  std::vector<CollectiveEntry> entries(int slot, std::uint64_t after) const;

 private:
  ProgressTable(int fd, void* base, int slots);
  int fd_ = -1;
  void* base_ = nullptr;
  int slots_ = 0;
};

// The worker's side: its own slot. Move-only.
class ProgressWriter {
 public:
  // From the environment: DDPLAUNCH_PROGRESS=<fd>:<slot> (a table's descriptor and the slot).
  // nullopt when the variable is unset or "0" (the user turned the slots off). Throws ddp::Error naming the variable
  // and the fix when it is set but not a table with that slot (a value copied from another process, say).
  static std::optional<ProgressWriter> from_env(const EnvLookup& env);
  ProgressWriter(ProgressWriter&& other) noexcept;
  ProgressWriter& operator=(ProgressWriter&& other) noexcept;
  ~ProgressWriter();

  // Entering collective number entered+1 of `kind` with `bytes` of payload. Never throws.
  void enter(CollectiveKind kind, std::uint64_t bytes);
  // Leaving it, completed. Never throws.
  void leave();

 private:
  ProgressWriter(void* map, std::size_t length, void* slot, void* ring);
  void* map_ = nullptr;
  std::size_t length_ = 0;
  void* slot_ = nullptr;
  void* ring_ = nullptr;
  std::uint64_t sequence_ = 0;
};

// The environment variable that carries the table's descriptor and slot to a worker.
inline constexpr const char* kProgressVariable = "DDPLAUNCH_PROGRESS";
// Its value for descriptor `fd` and slot `slot`.
std::string progress_variable_value(int fd, int slot);

// CLOCK_REALTIME now, in nanoseconds. Never throws.
std::int64_t realtime_ns();

}  // namespace ddp
