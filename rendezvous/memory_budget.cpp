// Budget arithmetic; the rule is in memory_budget.hpp.
#include "rendezvous/memory_budget.hpp"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "ddplaunch/rendezvous/error.hpp"

namespace ddp::rendezvous {

MemoryBudget::MemoryBudget(std::size_t limit) : limit_(limit) {
  if (limit < kMinLimit) {
    throw Error("store memory budget of " + format_bytes(limit) + " is below the minimum of " +
                format_bytes(kMinLimit));
  }
}

std::size_t& MemoryBudget::count(Kind kind) {
  return kind == Kind::Stored ? stored_ : kind == Kind::Buffered ? buffered_ : unsent_;
}

void MemoryBudget::charge(Kind kind, std::size_t bytes) {
  count(kind) += bytes;
}

void MemoryBudget::release(Kind kind, std::size_t bytes) {
  std::size_t& c = count(kind);
  DDP_ASSERT(bytes <= c, fmt::format("memory budget: releasing {} bytes of {} charged", bytes, c));
  c -= bytes;
}

void MemoryBudget::change(Kind kind, std::size_t from, std::size_t to) {
  if (to >= from) return charge(kind, to - from);
  release(kind, from - to);
}

std::string MemoryBudget::refusal(std::size_t stored, std::size_t reply, bool stranger) const {
  if (stranger && fits(Kind::Stored, stored) && !fits_stranger(stored)) {
    return "storing " + format_bytes(stored) + " more would pass the 1/16 of the store's memory budget (" +
           format_bytes(limit_ / 16) + ") that connections without the job secret may fill from hosts outside " +
           "the job's round (" + describe() +
           "); a worker of the job refused so connects from an address its launcher did not: give that launcher "
           "--local_addr=<the address its workers connect from>";
  }
  if (!fits(Kind::Stored, stored)) {
    return "storing " + format_bytes(stored) + " more would pass the store's memory budget (" + describe() + ")";
  }
  // Both at once must fit the total too (COMPARE_SET stores a value and may reply with it).
  if (!fits(Kind::Unsent, reply) || reply > limit_ - std::min(limit_, used() + stored)) {
    return "a reply of " + format_bytes(reply) + " would pass the store's memory budget (" + describe() +
           "); does the client read its replies?";
  }
  return "";
}

std::string MemoryBudget::describe() const {
  return "stored " + format_bytes(stored_) + ", requests " + format_bytes(buffered_) + ", replies " +
         format_bytes(unsent_) + " of " + format_bytes(limit_);
}

std::string format_bytes(std::size_t bytes) {
  if (bytes < 1024) return fmt::format("{} B", bytes);
  if (bytes < (std::size_t{1} << 20)) return fmt::format("{:.1f} KiB", bytes / 1024.0);
  if (bytes < (std::size_t{1} << 30)) return fmt::format("{:.1f} MiB", bytes / 1048576.0);
  return fmt::format("{:.1f} GiB", bytes / 1073741824.0);
}

bool ConnectionCharge::buffer(std::size_t bytes, bool exempt) {
  if (bytes == buffered_) return true;  // every complete request: nothing buffered before or after
  if (!exempt && bytes > buffered_ && !budget_.fits(MemoryBudget::Kind::Buffered, bytes - buffered_)) return false;
  budget_.adjust(MemoryBudget::Kind::Buffered, buffered_, bytes);
  buffered_ = bytes;
  return true;
}

void ConnectionCharge::queued(std::size_t bytes) {
  budget_.charge(MemoryBudget::Kind::Unsent, bytes);
  unsent_ += bytes;
}

void ConnectionCharge::sent(std::size_t bytes) {
  DDP_ASSERT(bytes <= unsent_, fmt::format("connection sent {} bytes of {} queued", bytes, unsent_));
  budget_.release(MemoryBudget::Kind::Unsent, bytes);
  unsent_ -= bytes;
}

void ConnectionCharge::release_all() {
  budget_.release(MemoryBudget::Kind::Buffered, std::exchange(buffered_, 0));
  budget_.release(MemoryBudget::Kind::Unsent, std::exchange(unsent_, 0));
}

}  // namespace ddp::rendezvous
