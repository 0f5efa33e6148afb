// See collective_progress.hpp.
#include "common/collective_progress.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <thread>
#include <utility>

#include <fmt/format.h>

namespace ddp {
namespace {

constexpr char kMagic[] = "ddplaunch-progress v1";
constexpr std::size_t kLine = 64;

struct Header {
  char magic[32];
  std::atomic<std::uint32_t> slots;
};

struct alignas(kLine) Slot {
  std::atomic<std::uint64_t> version;  // odd while the writer is changing the fields
  std::atomic<std::uint64_t> entered;
  std::atomic<std::uint64_t> completed;
  std::atomic<std::uint64_t> bytes;
  std::atomic<std::int64_t> entered_ns;
  std::atomic<std::int64_t> completed_ns;
  std::atomic<std::uint32_t> kind;
  std::atomic<std::int32_t> pid;
};
static_assert(sizeof(Header) <= kLine && sizeof(Slot) == kLine);

// One collective entered, in a slot's ring of the last kEntryRing (after every slot). `seq` is
// stored last (release) and zeroed first: a reader that finds it the same before and after
// reading the rest read a whole entry.
struct RingEntry {
  std::atomic<std::uint64_t> seq;
  std::atomic<std::int64_t> entered_ns;
  std::atomic<std::uint64_t> bytes;
  std::atomic<std::uint64_t> kind;
};
static_assert(sizeof(RingEntry) == 32);
static_assert(std::atomic<std::uint64_t>::is_always_lock_free, "shared-memory atomics must be lock-free");

// The header and slots, as the first layout had them (a writer of that time checks only these).
std::size_t slots_bytes(int slots) {
  return kLine * (1 + static_cast<std::size_t>(slots));
}

// With the rings after them.
std::size_t table_bytes(int slots) {
  return slots_bytes(slots) + static_cast<std::size_t>(slots) * kEntryRing * sizeof(RingEntry);
}

RingEntry* ring_at(void* base, int slots, int slot) {
  char* rings = static_cast<char*>(base) + kLine * (1 + static_cast<std::size_t>(slots));
  return reinterpret_cast<RingEntry*>(rings) + static_cast<std::size_t>(slot) * kEntryRing;
}

Slot* slot_at(void* base, int slot) {
  return reinterpret_cast<Slot*>(static_cast<char*>(base) + kLine * (1 + static_cast<std::size_t>(slot)));
}

std::string errno_text(const char* call) {
  return fmt::format("{}: {}", call, std::strerror(errno));
}

// The writer's side of the seqlock: `change` stores fields (relaxed) between the two bumps.
template <class Change>
void write_slot(Slot& s, Change change) {
  const std::uint64_t v = s.version.load(std::memory_order_relaxed);
  s.version.store(v + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  change(s);
  s.version.store(v + 2, std::memory_order_release);
}

}  // namespace

const char* to_string(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::Allreduce:
      return "allreduce";
    case CollectiveKind::Broadcast:
      return "broadcast";
    case CollectiveKind::Allgather:
      return "allgather";
    case CollectiveKind::Barrier:
      return "barrier";
    case CollectiveKind::None:
      break;
  }
  return "collective";
}

std::int64_t realtime_ns() {
  timespec t{};
  ::clock_gettime(CLOCK_REALTIME, &t);
  return static_cast<std::int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
}

ProgressTable ProgressTable::create(int slots) {
  if (slots < 1) throw Error(fmt::format("a progress table needs at least one slot, not {}", slots));
  // Not close-on-exec: the workers inherit it (ChildOptions::keep_fds); every other child closes it.
  const int fd = ::memfd_create("ddplaunch-progress", 0);
  if (fd < 0) throw Error(errno_text("memfd_create (collective progress table)"));
  const std::size_t length = table_bytes(slots);
  // Allocated now: a page that could not be had later would be a SIGBUS in a worker.
  if (const int rc = ::posix_fallocate(fd, 0, static_cast<off_t>(length)); rc != 0) {
    ::close(fd);
    throw Error(fmt::format("posix_fallocate (collective progress table): {}", std::strerror(rc)));
  }
  void* base = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    const std::string message = errno_text("mmap (collective progress table)");
    ::close(fd);
    throw Error(message);
  }
  auto* header = static_cast<Header*>(base);
  std::memcpy(header->magic, kMagic, sizeof kMagic);
  header->slots.store(static_cast<std::uint32_t>(slots), std::memory_order_release);
  return ProgressTable(fd, base, slots);
}

ProgressTable::ProgressTable(int fd, void* base, int slots) : fd_(fd), base_(base), slots_(slots) {}

ProgressTable::ProgressTable(ProgressTable&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), base_(std::exchange(other.base_, nullptr)), slots_(other.slots_) {}

ProgressTable& ProgressTable::operator=(ProgressTable&& other) noexcept {
  if (this != &other) {
    this->~ProgressTable();
    fd_ = std::exchange(other.fd_, -1);
    base_ = std::exchange(other.base_, nullptr);
    slots_ = other.slots_;
  }
  return *this;
}

ProgressTable::~ProgressTable() {
  if (base_) ::munmap(base_, table_bytes(slots_));
  if (fd_ >= 0) ::close(fd_);
}

void ProgressTable::reset() {
  for (int i = 0; i < slots_; ++i) {
    write_slot(*slot_at(base_, i), [](Slot& s) {
      s.entered.store(0, std::memory_order_relaxed);
      s.completed.store(0, std::memory_order_relaxed);
      s.bytes.store(0, std::memory_order_relaxed);
      s.entered_ns.store(0, std::memory_order_relaxed);
      s.completed_ns.store(0, std::memory_order_relaxed);
      s.kind.store(0, std::memory_order_relaxed);
      s.pid.store(0, std::memory_order_relaxed);
    });
    RingEntry* ring = ring_at(base_, slots_, i);
    for (std::size_t e = 0; e < kEntryRing; ++e) ring[e].seq.store(0, std::memory_order_release);
  }
}

std::vector<CollectiveEntry> ProgressTable::entries(int slot, std::uint64_t after) const {
  std::vector<CollectiveEntry> out;
  const RingEntry* ring = ring_at(base_, slots_, slot);
  for (std::size_t i = 0; i < kEntryRing; ++i) {
    const RingEntry& e = ring[i];
    const std::uint64_t seq = e.seq.load(std::memory_order_acquire);
    if (seq == 0 || seq <= after) continue;
    CollectiveEntry c{seq, e.entered_ns.load(std::memory_order_relaxed),
                      static_cast<CollectiveKind>(e.kind.load(std::memory_order_relaxed)),
                      e.bytes.load(std::memory_order_relaxed)};
    std::atomic_thread_fence(std::memory_order_acquire);
    // Overwritten meanwhile (the writer went round the ring): skipped, it was the oldest.
    if (e.seq.load(std::memory_order_relaxed) == seq) out.push_back(c);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.seq < b.seq; });
  return out;
}

CollectiveProgress ProgressTable::read(int slot) const {
  const Slot& s = *slot_at(base_, slot);
  CollectiveProgress p;
  // A writer holds the slot for a few stores. A reader that keeps losing spins a while, then naps:
  // the writer was descheduled mid-write (a loaded machine: milliseconds) or stopped there
  // (SIGSTOP, a debugger); after ~20 ms of naps it gives the last copy, torn, rather than wait on.
  constexpr int kSpins = 1000;
  constexpr int kNaps = 200;
  for (int attempt = 0;; ++attempt) {
    const std::uint64_t v1 = s.version.load(std::memory_order_acquire);
    p.pid = s.pid.load(std::memory_order_relaxed);
    p.entered = s.entered.load(std::memory_order_relaxed);
    p.completed = s.completed.load(std::memory_order_relaxed);
    p.kind = static_cast<CollectiveKind>(s.kind.load(std::memory_order_relaxed));
    p.bytes = s.bytes.load(std::memory_order_relaxed);
    p.entered_ns = s.entered_ns.load(std::memory_order_relaxed);
    p.completed_ns = s.completed_ns.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (v1 % 2 == 0 && s.version.load(std::memory_order_relaxed) == v1) break;
    if (attempt >= kSpins + kNaps) break;
    if (attempt >= kSpins) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return p;
}

std::string progress_variable_value(int fd, int slot) {
  return fmt::format("{}:{}", fd, slot);
}

std::optional<ProgressWriter> ProgressWriter::from_env(const EnvLookup& env) {
  const std::optional<std::string> value = env(kProgressVariable);
  if (!value || *value == "0") return std::nullopt;
  const auto bad = [&](const std::string& why) {
    return Error(fmt::format("{}='{}' {}; it is set by ddplaunch for its own workers: unset it", kProgressVariable,
                             *value, why));
  };
  int fd = -1;
  int slot = -1;
  char tail = 0;
  if (std::sscanf(value->c_str(), "%d:%d%c", &fd, &slot, &tail) != 2 || fd < 3 || slot < 0)
    throw bad("is not <descriptor>:<slot>");
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw bad("names no open descriptor");
  const std::size_t length = static_cast<std::size_t>(st.st_size);
  if (!S_ISREG(st.st_mode) || length < slots_bytes(1)) throw bad("is not a progress table");
  void* map = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) throw bad("cannot be mapped (" + errno_text("mmap") + ")");
  const auto* header = static_cast<const Header*>(map);
  const std::uint32_t slots = header->slots.load(std::memory_order_acquire);
  if (std::memcmp(header->magic, kMagic, sizeof kMagic) != 0 || slots_bytes(static_cast<int>(slots)) > length ||
      slot < 0 || static_cast<std::uint32_t>(slot) >= slots) {
    ::munmap(map, length);
    throw bad(fmt::format("is not a progress table with a slot {}", slot));
  }
  // A table made by a launcher without rings (an older one) gets no ring entries.
  void* ring = table_bytes(static_cast<int>(slots)) <= length ? ring_at(map, static_cast<int>(slots), slot) : nullptr;
  ProgressWriter writer(map, length, slot_at(map, slot), ring);
  // Kept open for a later init() in this process, but a child of the worker inherits nothing.
  ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  // A second group in this process (destroy(); init()) goes on counting where the first stopped.
  writer.sequence_ = static_cast<Slot*>(writer.slot_)->entered.load(std::memory_order_relaxed);
  write_slot(*static_cast<Slot*>(writer.slot_),
             [](Slot& s) { s.pid.store(static_cast<std::int32_t>(::getpid()), std::memory_order_relaxed); });
  return writer;
}

ProgressWriter::ProgressWriter(void* map, std::size_t length, void* slot, void* ring)
    : map_(map), length_(length), slot_(slot), ring_(ring) {}

ProgressWriter::ProgressWriter(ProgressWriter&& other) noexcept
    : map_(std::exchange(other.map_, nullptr)),
      length_(other.length_),
      slot_(std::exchange(other.slot_, nullptr)),
      ring_(std::exchange(other.ring_, nullptr)),
      sequence_(other.sequence_) {}

ProgressWriter& ProgressWriter::operator=(ProgressWriter&& other) noexcept {
  if (this != &other) {
    this->~ProgressWriter();
    map_ = std::exchange(other.map_, nullptr);
    length_ = other.length_;
    slot_ = std::exchange(other.slot_, nullptr);
    ring_ = std::exchange(other.ring_, nullptr);
    sequence_ = other.sequence_;
  }
  return *this;
}

ProgressWriter::~ProgressWriter() {
  if (map_) ::munmap(map_, length_);
}

void ProgressWriter::enter(CollectiveKind kind, std::uint64_t bytes) {
  const std::uint64_t n = ++sequence_;
  const std::int64_t now = realtime_ns();
  write_slot(*static_cast<Slot*>(slot_), [&](Slot& s) {
    s.entered.store(n, std::memory_order_relaxed);
    s.kind.store(static_cast<std::uint32_t>(kind), std::memory_order_relaxed);
    s.bytes.store(bytes, std::memory_order_relaxed);
    s.entered_ns.store(now, std::memory_order_relaxed);
  });
  if (!ring_) return;
  RingEntry& e = static_cast<RingEntry*>(ring_)[n % kEntryRing];
  e.seq.store(0, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  e.entered_ns.store(now, std::memory_order_relaxed);
  e.bytes.store(bytes, std::memory_order_relaxed);
  e.kind.store(static_cast<std::uint64_t>(kind), std::memory_order_relaxed);
  e.seq.store(n, std::memory_order_release);
}

void ProgressWriter::leave() {
  const std::int64_t now = realtime_ns();
  write_slot(*static_cast<Slot*>(slot_), [&](Slot& s) {
    s.completed.store(sequence_, std::memory_order_relaxed);
    s.completed_ns.store(now, std::memory_order_relaxed);
  });
}

}  // namespace ddp
