// The NCCL id exchange's generations (issue 14, defect 8), without a GPU: ranks as threads over an
// in-memory store. A second communicator under the same prefix (destroy(); init() in one round)
// gets a fresh id and never the previous one, even when a rank asks before rank 0 has made it.
#include "runtime/nccl_id.hpp"

#include <chrono>
#include <future>
#include <string>

#include "ddplaunch/communicator.hpp"
#include "ddplaunch/rendezvous/error.hpp"
#include "ddplaunch/rendezvous/memory_store.hpp"

// After LibTorch's headers (via communicator.hpp): c10's logging defines a CHECK of its own.
#include <catch2/catch.hpp>

using ddp::runtime::exchange_nccl_id;
using ddp::runtime::NcclIdExchange;
using namespace std::chrono_literals;

namespace {

NcclIdExchange as(int rank, std::chrono::milliseconds timeout = 10s) {
  return NcclIdExchange{"nccl", rank, timeout, 4};
}

auto id(const std::string& bytes) {
  return [bytes] { return bytes; };
}

}  // namespace

TEST_CASE("each communicator's ranks meet at their own id", "[nccl_id]") {
  ddp::rendezvous::MemoryStore store;
  CHECK(exchange_nccl_id(store, as(0), id("AAAA")) == "AAAA");
  CHECK(exchange_nccl_id(store, as(1), id("----")) == "AAAA");
  long long generation = 0;
  CHECK(exchange_nccl_id(store, as(0), id("BBBB"), &generation) == "BBBB");
  CHECK(generation == 2);
  CHECK(exchange_nccl_id(store, as(1), id("----"), &generation) == "BBBB");
  CHECK(generation == 2);
}

TEST_CASE("a rank that asks for the next id before rank 0 made it waits for it, not for the old one",
          "[nccl_id]") {
  ddp::rendezvous::MemoryStore store;
  REQUIRE(exchange_nccl_id(store, as(0), id("AAAA")) == "AAAA");
  REQUIRE(exchange_nccl_id(store, as(1), id("----")) == "AAAA");
  // Rank 1 destroys and re-inits first: with one key for all generations it would read AAAA now.
  auto second = std::async(std::launch::async, [&] { return exchange_nccl_id(store, as(1), id("----")); });
  CHECK(second.wait_for(200ms) == std::future_status::timeout);
  REQUIRE(exchange_nccl_id(store, as(0), id("BBBB")) == "BBBB");
  CHECK(second.get() == "BBBB");
}

TEST_CASE("a rank that never gets its generation's id times out naming it and the fix", "[nccl_id]") {
  ddp::rendezvous::MemoryStore store;
  REQUIRE(exchange_nccl_id(store, as(0), id("AAAA")) == "AAAA");
  REQUIRE(exchange_nccl_id(store, as(1, 100ms), id("----")) == "AAAA");
  try {
    exchange_nccl_id(store, as(1, 100ms), id("----"));
    FAIL("no timeout");
  } catch (const ddp::rendezvous::TimeoutError& e) {
    const std::string what = e.what();
    CHECK(what.find("rank 1 timed out after 100 ms waiting for rank 0 to publish the NCCL id of communicator #2 at "
                    "'nccl/nccl_id/2'") != std::string::npos);
    CHECK(what.find("every rank creates the same communicators in the same order") != std::string::npos);
  }
}

TEST_CASE("a value that is not an id is refused naming the key", "[nccl_id]") {
  ddp::rendezvous::MemoryStore store;
  store.set("nccl/nccl_id/1", "too long for an id");
  try {
    exchange_nccl_id(store, as(1), id("----"));
    FAIL("accepted");
  } catch (const ddp::runtime::CommunicatorError& e) {
    CHECK(std::string(e.what()).find("'nccl/nccl_id/1' holds 18 bytes, expected an NCCL id of 4") !=
          std::string::npos);
  }
}
