// The GPU communicator's watchdog (issue 14, defects 2 and 3), without a GPU: collectives as
// flags, the communicator's asynchronous error as a string, abort as a counter, and a real store
// (server and two client connections per rank) for the failed key that peers wait on.
#include "runtime/collective_watchdog.hpp"

#include <atomic>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "ddplaunch/rendezvous/tcp_store_client.hpp"
#include "ddplaunch/rendezvous/tcp_store_server.hpp"

#include <catch2/catch.hpp>

using ddp::runtime::CollectiveWatchdog;
using ddp::runtime::CollectiveWatchdogHooks;
using ddp::runtime::CollectiveWatchdogOptions;
using namespace std::chrono_literals;

namespace {

struct Server {
  std::shared_ptr<ddp::rendezvous::TcpStoreServer> server;
  Server() {
    ddp::rendezvous::TcpStoreServerOptions o;
    o.host = "127.0.0.1";
    o.port = 0;
    o.log = [](std::string_view) {};
    server = std::make_shared<ddp::rendezvous::TcpStoreServer>(o);
    server->start();
  }
  std::shared_ptr<ddp::rendezvous::Store> connect() const {
    ddp::rendezvous::TcpStoreClientOptions o;
    o.host = "127.0.0.1";
    o.port = server->port();
    return std::make_shared<ddp::rendezvous::TcpStoreClient>(o);
  }
};

// One rank's side: what the watchdog did to it.
struct Rank {
  std::atomic<int> aborts{0};
  std::promise<std::string> failed;
  std::atomic<int> failures{0};
  std::vector<std::uint64_t> long_waits;  // written by the watch thread, read after stop()
  std::atomic<bool> async_error{false};

  CollectiveWatchdogHooks hooks() {
    CollectiveWatchdogHooks h;
    h.async_error = [this] { return async_error ? std::string("unhandled system error (remote process exited)") : ""; };
    h.abort = [this] { ++aborts; };
    h.on_failure = [this](const std::string& m) {
      if (failures++ == 0) failed.set_value(m);
    };
    h.long_wait = [this](std::uint64_t n) { long_waits.push_back(n); };
    return h;
  }
};

CollectiveWatchdogOptions options(const Server& s, int rank, std::chrono::milliseconds timeout) {
  CollectiveWatchdogOptions o;
  o.rank = rank;
  o.timeout = timeout;
  o.poll = 5ms;
  o.store = s.connect();
  o.listener_store = s.connect();
  o.failed_key = "nccl/failed";
  return o;
}

}  // namespace

TEST_CASE("collectives that complete leave the communicator alone", "[watchdog]") {
  Server s;
  Rank r;
  auto store = s.connect();
  {
    CollectiveWatchdog w(options(s, 0, 200ms), r.hooks());
    std::atomic<int> polls{0};
    for (std::uint64_t n = 1; n <= 5; ++n) w.enqueued(n, "allreduce", [&] { return ++polls > 2; });
    std::this_thread::sleep_for(400ms);  // past the timeout: nothing may fire
    CHECK(w.failure().empty());
  }
  CHECK(r.aborts == 0);
  CHECK(r.failures == 0);
  CHECK(r.long_waits.empty());
  CHECK_FALSE(store->check({"nccl/failed"}));
}

TEST_CASE("a collective past its deadline aborts, tells the peers, and says which one", "[watchdog]") {
  Server s;
  Rank r;
  auto store = s.connect();
  CollectiveWatchdog w(options(s, 1, 300ms), r.hooks());
  w.enqueued(7, "allreduce", [] { return true; });
  w.enqueued(8, "broadcast from root 0", [] { return false; });
  auto failed = r.failed.get_future();
  REQUIRE(failed.wait_for(10s) == std::future_status::ready);
  const std::string message = failed.get();
  CHECK(message ==
        "rank 1: broadcast from root 0 (collective #8) did not complete within 300 ms; a rank has not "
        "called the same collective, or its device is stuck");
  CHECK(r.aborts == 1);
  CHECK(w.failure() == message);
  CHECK(store->get("nccl/failed", 1s) == message);
  w.stop();
  CHECK(r.long_waits == std::vector<std::uint64_t>{8});  // half-way, before the deadline
  CHECK(r.failures == 1);
}

TEST_CASE("the timeout's message is the communicator's when it gives one", "[watchdog]") {
  Server s;
  Rank r;
  CollectiveWatchdogHooks h = r.hooks();
  h.timeout_message = [](std::uint64_t n, const std::string& what) {
    return what + " timed out (collective #" + std::to_string(n) + "); rank 3 never arrived";
  };
  CollectiveWatchdog w(options(s, 0, 100ms), h);
  w.enqueued(2, "allreduce", [] { return false; });
  auto failed = r.failed.get_future();
  REQUIRE(failed.wait_for(10s) == std::future_status::ready);
  CHECK(failed.get() == "rank 0: allreduce timed out (collective #2); rank 3 never arrived");
}

TEST_CASE("an asynchronous error aborts at once, not at the deadline", "[watchdog]") {
  Server s;
  Rank r;
  CollectiveWatchdog w(options(s, 0, std::chrono::minutes(10)), r.hooks());
  w.enqueued(1, "allreduce", [] { return true; });
  w.enqueued(2, "allreduce", [] { return false; });
  r.async_error = true;
  auto failed = r.failed.get_future();
  REQUIRE(failed.wait_for(10s) == std::future_status::ready);
  CHECK(failed.get() ==
        "rank 0: asynchronous communicator error during allreduce (collective #2): unhandled system error (remote "
        "process exited)");
  CHECK(r.aborts == 1);
}

TEST_CASE("a device error while checking a collective is the failure", "[watchdog]") {
  Server s;
  Rank r;
  CollectiveWatchdog w(options(s, 2, std::chrono::minutes(10)), r.hooks());
  w.enqueued(4, "allgather",
             []() -> bool { throw ddp::Error("CUDA error: an illegal memory access was encountered"); });
  auto failed = r.failed.get_future();
  REQUIRE(failed.wait_for(10s) == std::future_status::ready);
  CHECK(failed.get() ==
        "rank 2: CUDA error: an illegal memory access was encountered during allgather (collective #4)");
}

TEST_CASE("one rank's failure aborts every other rank through the store, idle or not", "[watchdog]") {
  Server s;
  std::vector<std::unique_ptr<Rank>> ranks;
  std::vector<std::unique_ptr<CollectiveWatchdog>> dogs;
  for (int i = 0; i < 4; ++i) {
    ranks.push_back(std::make_unique<Rank>());
    dogs.push_back(
        std::make_unique<CollectiveWatchdog>(options(s, i, std::chrono::minutes(10)), ranks.back()->hooks()));
  }
  // Ranks 0 and 1 wait in collective #3 (the GPU would never finish it); 2 is idle; 3 fails.
  dogs[0]->enqueued(3, "allreduce", [] { return false; });
  dogs[1]->enqueued(3, "allreduce", [] { return false; });
  ranks[3]->async_error = true;
  dogs[3]->enqueued(3, "allreduce", [] { return false; });
  for (int i = 0; i < 4; ++i) {
    auto failed = ranks[static_cast<std::size_t>(i)]->failed.get_future();
    REQUIRE(failed.wait_for(10s) == std::future_status::ready);
    const std::string m = failed.get();
    if (i == 3) {
      CHECK(m.rfind("rank 3: asynchronous communicator error", 0) == 0);
    } else {
      CHECK(m.rfind("rank " + std::to_string(i) + ": aborted because a peer failed (rank 3: asynchronous", 0) == 0);
    }
    CHECK(ranks[static_cast<std::size_t>(i)]->aborts == 1);
  }
}

TEST_CASE("stop() ends the listener's blocked wait and the watch at once, and nothing fires after", "[watchdog]") {
  Server s;
  Rank r;
  auto store = s.connect();
  auto w = std::make_unique<CollectiveWatchdog>(options(s, 0, 100ms), r.hooks());
  std::this_thread::sleep_for(50ms);  // the listener is parked in its wait
  const auto start = std::chrono::steady_clock::now();
  w->stop();
  w->stop();  // idempotent
  CHECK(std::chrono::steady_clock::now() - start < 5s);
  w->enqueued(1, "allreduce", [] { return false; });  // ignored
  w->fail("rank 0: too late");                        // ignored
  std::this_thread::sleep_for(200ms);  // a negative check: no event says "nothing fired", so give it a moment
  store->set("nccl/failed", "rank 1: boom");
  w.reset();
  CHECK(r.aborts == 0);
  CHECK(r.failures == 0);
}

TEST_CASE("a store that goes away leaves the deadline in charge", "[watchdog]") {
  auto s = std::make_unique<Server>();
  Rank r;
  CollectiveWatchdog w(options(*s, 0, 300ms), r.hooks());
  s->server->stop();  // the launcher's store ends: the listener's wait fails, quietly
  w.enqueued(1, "allreduce", [] { return false; });
  auto failed = r.failed.get_future();
  REQUIRE(failed.wait_for(10s) == std::future_status::ready);
  CHECK(failed.get().find("(collective #1) did not complete within 300 ms") != std::string::npos);
  CHECK(r.aborts == 1);  // writing the failed key failed; the abort still happened
}
