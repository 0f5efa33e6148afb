// The communicators' failure latch, without a communicator: ranks as latches over one in-memory
// store. The first failure of any rank is the one every rank names, a cause known first wins, a
// close is no peer's failure, and the thrown error keeps its kind.
#include "runtime/failure_latch.hpp"

#include <memory>
#include <string>

#include "ddplaunch/rendezvous/error.hpp"
#include "ddplaunch/rendezvous/memory_store.hpp"

#include <catch2/catch.hpp>

using ddp::runtime::CommunicatorError;
using ddp::runtime::FailureLatch;
using ddp::runtime::PeerError;

namespace {

// Runs `f`, which must throw E, and returns its message.
template <class E, class F>
std::string thrown(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  FAIL("nothing thrown");
  return "";
}

}  // namespace

TEST_CASE("the first failure is the one every rank names, and the latch refuses what follows", "[failure_latch]") {
  auto store = std::make_shared<ddp::rendezvous::MemoryStore>();
  FailureLatch r0(store, "cpu/failed", 0), r1(store, "cpu/failed", 1);
  int released = 0;
  CHECK_NOTHROW(r0.check("allreduce", false));
  CHECK(thrown<PeerError>([&] { r0.fail("allreduce", PeerError(1, "rank 1 closed"), "", [&] { ++released; }); }) ==
        "allreduce failed on rank 0: rank 1 closed");
  CHECK(released == 1);
  CHECK(r0.broken());
  CHECK(thrown<ddp::rendezvous::TimeoutError>([&] {
          r1.fail("broadcast", ddp::rendezvous::TimeoutError("timed out"), "", [&] { ++released; });
        }) == "broadcast failed on rank 1: timed out (first failure, on rank 0: rank 1 closed)");
  CHECK(thrown<CommunicatorError>([&] { r0.check("barrier", false); }) ==
        "barrier on a failed communicator: rank 0: rank 1 closed");
  CHECK(thrown<CommunicatorError>([&] { r0.check("barrier", true); }) == "barrier on a closed communicator");
}

TEST_CASE("a cause the caller knows first wins over the store", "[failure_latch]") {
  auto store = std::make_shared<ddp::rendezvous::MemoryStore>();
  FailureLatch r2(store, "nccl/failed", 2);
  CHECK(thrown<CommunicatorError>([&] {
          r2.fail("allgather", CommunicatorError("aborted"), "rank 3: watchdog: timed out", [] {});
        }) == "allgather failed on rank 2: aborted (first failure, on rank 3: watchdog: timed out)");
  CHECK_FALSE(store->check({"nccl/failed"}));
}

TEST_CASE("a close during a collective is no peer's failure: nothing goes to the store", "[failure_latch]") {
  auto store = std::make_shared<ddp::rendezvous::MemoryStore>();
  FailureLatch r0(store, "cpu/failed", 0);
  CHECK(thrown<CommunicatorError>([&] { r0.fail_closed("allreduce"); }) ==
        "allreduce failed: the communicator was closed during the collective");
  CHECK_FALSE(store->check({"cpu/failed"}));
  CHECK(thrown<CommunicatorError>([&] { r0.check("allreduce", false); }) ==
        "allreduce on a failed communicator: the communicator was closed");
}
