// Which ranks never arrived at a collective, for a timeout's message (issue 14, defect 9). A rank
// whose wait in collective #n has already been long (half its timeout) writes
// "<prefix>/arrived/<n>/<rank>" once; the rank that times out reads which ranks of the world
// wrote theirs. A healthy job writes nothing (no store traffic unless a wait is long), and every
// rank stuck in the same collective has written its record by the time the first one times out.
// Thread-safe as the store is.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ddplaunch/rendezvous/store.hpp"

namespace ddp::runtime {

class ArrivalRecords {
 public:
  ArrivalRecords(std::shared_ptr<ddp::rendezvous::Store> store, std::string prefix, int rank, int world_size);

  // This rank has waited long in collective #n. Never throws: a store error only loses the hint.
  void waiting_long(std::uint64_t n) noexcept;
  // The ranks that wrote no record for collective #n, this one excluded. Empty when the store
  // cannot say (then nothing is claimed). Never throws.
  std::vector<int> missing(std::uint64_t n) const noexcept;
  // For the timeout message: "; rank 3 never arrived at collective #12 (ranks 0-2 waited in it)"
  // or "" when every rank arrived or the store cannot say. Never throws.
  std::string missing_phrase(std::uint64_t n) const noexcept;

 private:
  std::string key(std::uint64_t n, int rank) const;

  std::shared_ptr<ddp::rendezvous::Store> store_;
  std::string prefix_;
  int rank_;
  int world_size_;
};

}  // namespace ddp::runtime
