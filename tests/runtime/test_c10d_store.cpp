// The c10d::Store adapter (runtime/c10d_store) that lets LibTorch's process groups meet in the
// project's stores: the byte-exact values, c10d's compare-set, timeouts and lost connections as
// c10d's error types, clone() on a new connection, and c10d's own PrefixStore on top (as
// ProcessGroupNCCL is given it).
#include "runtime/c10d_store.hpp"

#include <atomic>
#include <thread>

#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include "ddplaunch/rendezvous/memory_store.hpp"
#include "ddplaunch/rendezvous/tcp_store_client.hpp"
#include "ddplaunch/rendezvous/tcp_store_server.hpp"

#include <catch2/catch.hpp>

using ddp::runtime::C10dStore;
using namespace std::chrono_literals;

namespace {

std::vector<uint8_t> bytes(const std::string& s) {
  return {s.begin(), s.end()};
}

}  // namespace

TEST_CASE("c10d calls reach the store with their bytes intact", "[c10d_store]") {
  auto memory = std::make_shared<ddp::rendezvous::MemoryStore>();
  auto store = c10::make_intrusive<C10dStore>(memory);
  const std::string binary("id\0\xff\x01", 5);
  store->set("nccl_id", bytes(binary));
  CHECK(memory->get("nccl_id", 1s) == binary);
  CHECK(store->get("nccl_id") == bytes(binary));
  CHECK(store->add("count", 2) == 2);
  CHECK(store->add("count", 3) == 5);
  CHECK(store->check({"nccl_id", "count"}));
  CHECK_FALSE(store->check({"nccl_id", "absent"}));
  CHECK(store->getNumKeys() == 2);
  // c10d's compare-set: the new value when it was the expected one (or absent and expected
  // empty), else the current value, unchanged.
  CHECK(store->compareSet("cas", {}, bytes("first")) == bytes("first"));
  CHECK(store->compareSet("cas", bytes("other"), bytes("second")) == bytes("first"));
  CHECK(store->compareSet("cas", bytes("first"), bytes("second")) == bytes("second"));
  CHECK(store->deleteKey("cas"));
  CHECK_FALSE(store->deleteKey("cas"));
}

TEST_CASE("waits end when the key arrives, and at the store's timeout as c10d's DistStoreError", "[c10d_store]") {
  auto memory = std::make_shared<ddp::rendezvous::MemoryStore>();
  auto store = c10::make_intrusive<C10dStore>(memory, C10dStore::Connect{}, 200ms);
  std::thread writer([&] {
    // Late: after wait() below has parked (no event marks that; a set before it passes as well).
    std::this_thread::sleep_for(50ms);
    memory->set("late", "1");
  });
  store->wait({"late"});
  CHECK(store->get("late") == bytes("1"));
  writer.join();
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_AS(store->get("never"), c10::DistStoreError);
  CHECK(std::chrono::steady_clock::now() - start >= 200ms);
  CHECK_THROWS_AS(store->wait({"never"}, 50ms), c10::DistStoreError);
  try {
    store->wait({"never"}, 50ms);
  } catch (const c10::DistStoreError& e) {
    CHECK_THAT(e.what(), Catch::Matchers::Contains("never"));
  }
}

TEST_CASE("a lost store is c10d's DistNetworkError, clone() opens a new connection", "[c10d_store]") {
  ddp::rendezvous::TcpStoreServerOptions so;
  so.host = "127.0.0.1";
  so.port = 0;
  so.log = [](std::string_view) {};
  auto server = std::make_shared<ddp::rendezvous::TcpStoreServer>(so);
  server->start();
  std::atomic<int> connections{0};
  const C10dStore::Connect connect = [&] {
    ++connections;
    ddp::rendezvous::TcpStoreClientOptions o;
    o.host = "127.0.0.1";
    o.port = server->port();
    return std::make_shared<ddp::rendezvous::TcpStoreClient>(o);
  };
  auto store = c10::make_intrusive<C10dStore>(connect(), connect, 2s);
  auto copy = store->clone();
  CHECK(connections == 2);
  CHECK(copy->getTimeout() == 2s);
  // The clone has its own connection: a wait parked on it does not hold up the original.
  std::thread waiter([&] { copy->wait({"go"}); });
  std::this_thread::sleep_for(50ms);  // the wait is parked (no event marks that; a set before it passes as well)
  store->set("go", bytes("1"));
  waiter.join();
  server->stop();
  CHECK_THROWS_AS(store->get("go"), c10::DistNetworkError);
}

TEST_CASE("c10d's PrefixStore over the adapter keeps its keys under the prefix", "[c10d_store]") {
  auto memory = std::make_shared<ddp::rendezvous::MemoryStore>();
  auto prefixed = c10::make_intrusive<c10d::PrefixStore>("default_pg/0", c10::make_intrusive<C10dStore>(memory));
  prefixed->set("key", bytes("value"));
  CHECK(memory->get("default_pg/0/key", 1s) == "value");
  CHECK(prefixed->add("n", 1) == 1);
  CHECK(prefixed->check({"key", "n"}));
}
