// JobMonitor's report of a silent peer, over an in-memory store. The timeout is 1 ms, so the
// report comes at once and the test waits on it as an event (a future), never with a sleep; 1 ms
// also pins the message format: "0.001 s", which std::to_string(x).substr(0, 4) printed "0.00".
#include "launcher/rdzv/job_monitor.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <utility>

#include "ddplaunch/rendezvous/memory_store.hpp"

namespace {

using ddp::launcher::JobMonitor;
using ddp::launcher::JobMonitorOptions;
using namespace std::chrono_literals;

TEST_CASE("a silent peer is reported lost with the timeout in plain seconds", "[job_monitor]") {
  auto store = std::make_shared<ddp::rendezvous::MemoryStore>();
  JobMonitorOptions o;
  o.outcome_key = "r0/outcome";
  o.heartbeat_prefix = "r0/hb/";
  o.node = 0;
  o.nnodes = 2;  // node 1 never beats
  o.interval = 1ms;
  o.timeout = 1ms;
  std::promise<std::pair<std::string, bool>> lost;
  auto reported = lost.get_future();
  JobMonitor monitor([store] { return store; }, o, [](const std::string&) {},
                     [&lost](const std::string& message, bool store_lost) {
                       lost.set_value({message, store_lost});
                     });

  REQUIRE(reported.wait_for(10s) == std::future_status::ready);
  const auto [message, store_lost] = reported.get();
  CHECK(message == "lost node 1: no heartbeat for 0.001 s");
  CHECK_FALSE(store_lost);
  // An in-memory store has no connection to break: setting the key ends the outcome watcher.
  store->set(o.outcome_key, "done");
  monitor.stop();
}

}  // namespace
