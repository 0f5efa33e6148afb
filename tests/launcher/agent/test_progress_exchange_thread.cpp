// The no-progress exchange off the agent's loop (progress_exchange_thread.hpp): while it waits
// for a node that never measures, the loop runs other handlers (a timer stands for a signal or a
// /healthz probe); the verdict then comes back on the loop; a store that cannot be reached comes
// back as an error, not an exception on the loop.
#include "launcher/agent/progress_exchange_thread.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "ddplaunch/rendezvous/error.hpp"
#include "ddplaunch/rendezvous/memory_store.hpp"

namespace {

namespace asio = boost::asio;
using namespace ddp::launcher;
using namespace std::chrono_literals;

NodeProgress measured(const std::string& text) {
  NodeProgress p;
  p.progress = RoundProgress::Same;
  p.text = text;
  return p;
}

}  // namespace

TEST_CASE("the loop serves other events while the exchange waits, then gets the verdict", "[progress]") {
  asio::io_context io;
  auto store = std::make_shared<ddp::rendezvous::MemoryStore>();
  ProgressExchangeThread exchange(io);
  ProgressExchange x;
  x.round_prefix = "r1/";
  x.nnodes = 2;  // node 1 never measures: the exchange waits all of x.wait
  x.is_restart = true;
  x.wait = 1500ms;
  const auto loop_thread = std::this_thread::get_id();
  std::optional<ProgressVerdict> verdict;
  std::string error = "<not called>";
  bool served_while_busy = false;
  bool on_loop = false;
  const auto started = std::chrono::steady_clock::now();
  exchange.start([store] { return store; }, x, measured("iteration 100 (before: 100)"),
                 [&](std::optional<ProgressVerdict> v, const std::string& e) {
                   on_loop = std::this_thread::get_id() == loop_thread;
                   verdict = v;
                   error = e;
                 });
  asio::steady_timer timer(io, 100ms);
  timer.async_wait([&](const boost::system::error_code&) { served_while_busy = exchange.busy(); });
  io.run();
  CHECK(served_while_busy);
  CHECK(on_loop);
  CHECK_FALSE(exchange.busy());
  CHECK(error.empty());
  REQUIRE(verdict);
  CHECK(verdict->nodes.at(1) == "node 1: its measure did not arrive");
  CHECK(std::chrono::steady_clock::now() - started >= x.wait);
  CHECK(store->check({"r1/progress_verdict"}));
}

TEST_CASE("a store that cannot be reached comes back as an error on the loop", "[progress]") {
  asio::io_context io;
  ProgressExchangeThread exchange(io);
  std::optional<ProgressVerdict> verdict;
  std::string error;
  exchange.start(
      []() -> std::shared_ptr<ddp::rendezvous::Store> {
        throw ddp::rendezvous::ConnectionError("cannot connect to 10.0.0.1:29500");
      },
      ProgressExchange{}, measured("iteration 1"),
      [&](std::optional<ProgressVerdict> v, const std::string& e) {
        verdict = v;
        error = e;
      });
  io.run();
  CHECK_FALSE(verdict);
  CHECK_THAT(error, Catch::Contains("cannot connect to 10.0.0.1:29500"));
}
