// A communicator's failure, latched once for both communicators (cpu_communicator.cpp,
// nccl_communicator.cpp): the first failure of any rank is recorded in the store under
// "<prefix>/failed" (compare-and-set: the first writer wins), so that every rank's message names
// it; from then on the communicator refuses every collective with that cause. A failure caused by
// our own close() is not a peer's and goes nowhere.
// Not thread-safe: the communicator calls it under its collective mutex.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "ddplaunch/communicator.hpp"
#include "ddplaunch/rendezvous/store.hpp"

namespace ddp::runtime {

class FailureLatch {
 public:
  // `key`: the store key every rank of the communicator records its failure under.
  FailureLatch(std::shared_ptr<ddp::rendezvous::Store> store, std::string key, int rank);

  // Throws CommunicatorError "<what> on a closed communicator" when `closed`, "<what> on a failed
  // communicator: <why>" after a failure; else returns.
  void check(const char* what, bool closed) const;

  // True once a failure (or a close during a collective) is latched.
  bool broken() const { return !why_.empty(); }

  // Our own close() interrupted `what`: not a peer's failure, so nothing goes to the store.
  // Latched as "the communicator was closed"; throws CommunicatorError "<what> failed: the
  // communicator was closed during the collective".
  [[noreturn]] void fail_closed(const std::string& what);

  // `what` failed with `e`. The cause is `known_first` when the caller knows an earlier one (the
  // NCCL watchdog's), else the store's first record, ours if none was there (a store that fails
  // leaves ours). Then `release` runs (ending our side of the links, so peers blocked with us fail
  // instead of hanging; it may ask broken(), already true) and "<what> failed on rank R: <e>
  // [(first failure, on ...)]" is thrown as the same kind as `e`: PeerError,
  // rendezvous::TimeoutError, else CommunicatorError.
  [[noreturn]] void fail(const std::string& what, const ddp::Error& e, std::string known_first,
                         const std::function<void()>& release);

 private:
  std::shared_ptr<ddp::rendezvous::Store> store_;
  std::string key_;
  int rank_;
  std::string why_;  // why the communicator is unusable; empty while healthy
};

}  // namespace ddp::runtime
