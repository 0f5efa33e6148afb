// See failure_latch.hpp.
#include "runtime/failure_latch.hpp"

#include <utility>

namespace ddp::runtime {

FailureLatch::FailureLatch(std::shared_ptr<rendezvous::Store> store, std::string key, int rank)
    : store_(std::move(store)), key_(std::move(key)), rank_(rank) {}

void FailureLatch::check(const char* what, bool closed) const {
  if (closed) throw CommunicatorError(std::string(what) + " on a closed communicator");
  if (!why_.empty()) throw CommunicatorError(std::string(what) + " on a failed communicator: " + why_);
}

void FailureLatch::fail_closed(const std::string& what) {
  why_ = "the communicator was closed";
  throw CommunicatorError(what + " failed: the communicator was closed during the collective");
}

void FailureLatch::fail(const std::string& what, const Error& e, std::string known_first,
                        const std::function<void()>& release) {
  const std::string mine = "rank " + std::to_string(rank_) + ": " + e.what();
  std::string first = std::move(known_first);
  if (first.empty()) {
    first = mine;
    try {
      first = store_->compare_set(key_, "", mine);
    } catch (const Error&) {
      // The store may be gone too; our own error is still the best message we have.
    }
  }
  // Latched before `release`, which asks (the NCCL communicator flushes only a healthy one).
  why_ = first == mine ? mine : mine + " (first failure, on " + first + ")";
  release();
  const std::string msg = what + " failed on " + why_;
  if (const auto* peer = dynamic_cast<const PeerError*>(&e)) throw PeerError(peer->rank(), msg);
  if (dynamic_cast<const rendezvous::TimeoutError*>(&e)) throw rendezvous::TimeoutError(msg);
  throw CommunicatorError(msg);
}

}  // namespace ddp::runtime
