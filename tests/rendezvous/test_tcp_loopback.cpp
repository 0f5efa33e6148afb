// Loopback integration of TcpStoreServer and TcpStoreClient: a server on a free port of
// 127.0.0.1 (or ::1), real sockets, many client threads, short timeouts, a server stopped in the
// middle of requests, connection retries, hostile raw-socket peers (each gets its connection
// closed, with a logged reason, while well-behaved clients keep working), interrupt() of a
// blocked client, a request trickled in one byte at a time, IPv6 and dual-stack binding, and
// BindError on a taken port.
//
// Checks that something has NOT happened yet use future::wait_for with a short bound: correct
// behaviour never completes there, so they cannot flake in the passing direction. Everything that
// must happen is bounded by kLong.
#include "ddplaunch/rendezvous/tcp_store_server.hpp"

#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "ddplaunch/rendezvous/error.hpp"
#include "ddplaunch/rendezvous/tcp_store_client.hpp"
#include "rendezvous/protocol.hpp"
#include "rendezvous/request.hpp"
#include "tests/rendezvous/blocking_checks.hpp"
#include "tests/rendezvous/log_capture.hpp"
#include "tests/rendezvous/raw_connection.hpp"

namespace {

namespace rdzv = ddp::rendezvous;
using namespace ddp::testing;  // kLong, still_blocked(), finishes()
using namespace std::chrono_literals;
using namespace std::string_literals;
using Clock = std::chrono::steady_clock;
using rdzv::TcpStoreClient;
using rdzv::TcpStoreClientOptions;
using rdzv::TcpStoreServer;
using rdzv::TcpStoreServerOptions;

constexpr std::chrono::milliseconds kShort = 150ms;

TcpStoreServerOptions server_options(std::string host = "127.0.0.1", std::uint16_t port = 0) {
  TcpStoreServerOptions o;
  o.host = std::move(host);
  o.port = port;
  return o;
}

TcpStoreClientOptions client_options(std::uint16_t port, std::string host = "127.0.0.1") {
  TcpStoreClientOptions o;
  o.host = std::move(host);
  o.port = port;
  o.connect_timeout = kLong;
  o.timeout = kLong;
  return o;
}

std::unique_ptr<TcpStoreClient> connect(std::uint16_t port, std::string host = "127.0.0.1") {
  return std::make_unique<TcpStoreClient>(client_options(port, std::move(host)));
}

// A started server on a free port of 127.0.0.1 with its log captured.
struct Loopback {
  LogCapture log;
  TcpStoreServer server{[this] {
    auto o = server_options();
    o.log = log.sink();
    o.report_interval = std::chrono::milliseconds(0);  // a line per closed connection
    return o;
  }()};
  Loopback() { server.start(); }
  std::uint16_t port() const { return server.port(); }
};

// A port that was free a moment ago: bound by a server on port 0, which is then destroyed.
std::uint16_t released_port() {
  TcpStoreServer s(server_options());
  return s.port();
}

// Checks that a client works, with a fresh key per call.
void check_usable(TcpStoreClient& c, const std::string& tag) {
  const std::string key = "usable/" + tag;
  c.set(key, "yes\0"s + tag);
  CHECK(c.get(key, kLong) == "yes\0"s + tag);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Many clients at once.

TEST_CASE("64 client threads x 1000 mixed operations lose nothing", "[loopback][stress]") {
  Loopback lb;
  constexpr int kThreads = 64;
  constexpr int kOps = 1000;
  constexpr int kOwnKeys = 10;
  constexpr int kKinds = 8;                        // operation kinds, cycled through by i % kKinds
  constexpr std::int64_t kSharedPerCycle = 1 + 2;  // kinds 2 and 7 add 1 and 2 to "shared"
  const std::string kAppendPiece = "xyz";

  struct Result {
    std::vector<std::string> errors;
    std::vector<std::string> last_value = std::vector<std::string>(kOwnKeys);
    std::int64_t own_counter = 0;
    std::string cas_value;
    std::size_t appended = 0;
  };
  std::vector<Result> results(kThreads);

  const auto body = [&](int t) {
    Result& res = results[t];
    const auto fail = [&](const std::string& what) {
      if (res.errors.size() < 5) res.errors.push_back("thread " + std::to_string(t) + ": " + what);
    };
    try {
      TcpStoreClient c(client_options(lb.port()));
      const std::string me = "t" + std::to_string(t) + "/";
      for (int i = 0; i < kOps; ++i) {
        // Kinds 0 and 1 of one cycle share a slot; the slots go round over the cycles.
        const int slot = (i / kKinds) % kOwnKeys;
        switch (i % kKinds) {
          case 0: {
            res.last_value[slot] = "v" + std::to_string(i) + std::string(1, '\0') + me;
            c.set(me + "k" + std::to_string(slot), res.last_value[slot]);
            break;
          }
          case 1: {
            // The key written by the previous operation (kind 0 of this cycle).
            const std::string got = c.get(me + "k" + std::to_string(slot), kLong);
            if (got != res.last_value[slot]) fail("get k" + std::to_string(slot) + " returned '" + got + "'");
            break;
          }
          case 2:
            c.add("shared", 1);
            break;
          case 3: {
            res.own_counter += 3;
            const std::int64_t got = c.add(me + "counter", 3);
            if (got != res.own_counter) fail("own counter is " + std::to_string(got));
            break;
          }
          case 4: {
            const std::string next = "cas" + std::to_string(i);
            const std::string got = c.compare_set(me + "cas", res.cas_value, next);
            if (got != next) fail("compare_set returned '" + got + "' expecting '" + next + "'");
            res.cas_value = next;
            break;
          }
          case 5: {
            if (!c.check({me + "k0", me + "counter", me + "cas", "shared"})) fail("check returned false");
            if (c.check({me + "never-written"})) fail("check of a missing key returned true");
            break;
          }
          case 6:
            c.append(me + "log", kAppendPiece);
            res.appended += kAppendPiece.size();
            break;
          case 7:
            c.add("shared", 2);
            break;
        }
      }
    } catch (const std::exception& e) {
      fail(std::string("exception: ") + e.what());
    }
  };

  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(body, t);
  for (auto& th : threads) th.join();
  const auto elapsed = since(start);
  INFO("64 x 1000 operations took " << elapsed.count() << " ms");
  CHECK(elapsed < 60s);

  for (const auto& r : results) {
    for (const auto& e : r.errors) FAIL_CHECK(e);
  }

  auto c = connect(lb.port());
  CHECK(c->add("shared", 0) == std::int64_t{kThreads} * (kOps / kKinds) * kSharedPerCycle);
  for (int t = 0; t < kThreads; ++t) {
    const std::string me = "t" + std::to_string(t) + "/";
    const Result& r = results[t];
    std::vector<std::string> keys;
    for (int k = 0; k < kOwnKeys; ++k) keys.push_back(me + "k" + std::to_string(k));
    CHECK(c->multi_get(keys, kLong) == r.last_value);
    CHECK(c->add(me + "counter", 0) == std::int64_t{3} * (kOps / kKinds));
    CHECK(c->get(me + "cas", kLong) == r.cas_value);
    CHECK(c->get(me + "log", kLong).size() == r.appended);
    CHECK(r.appended == kAppendPiece.size() * (kOps / kKinds));
  }
  // "shared" plus, per thread, kOwnKeys keys, a counter, a compare_set key and a log.
  CHECK(c->num_keys() == 1 + kThreads * (kOwnKeys + 3));
}

// ---------------------------------------------------------------------------------------------
// The protocol beyond the Store interface.

TEST_CASE("append concatenates bytes and creates missing keys", "[loopback]") {
  Loopback lb;
  auto c = connect(lb.port());
  c->append("log", "ab");
  c->append("log", "\0c"s);
  c->append("log", "");
  CHECK(c->get("log", kLong) == "ab\0c"s);
  c->set("log", "reset");
  c->append("log", "!");
  CHECK(c->get("log", kLong) == "reset!");
}

TEST_CASE("append wakes a waiter on another client", "[loopback]") {
  Loopback lb;
  auto waiter = connect(lb.port());
  auto writer = connect(lb.port());
  auto got = std::async(std::launch::async, [&] { return waiter->get("appended", kLong); });
  REQUIRE(still_blocked(got));
  writer->append("appended", "first");
  REQUIRE(finishes(got));
  CHECK(got.get() == "first");
}

TEST_CASE("multi_set and multi_get keep the order of the keys", "[loopback]") {
  Loopback lb;
  auto c = connect(lb.port());
  c->multi_set({"m1", "m2", "m3"}, {"one", "", "three\0"s});
  CHECK(c->multi_get({"m3", "m1", "m2"}, kLong) == std::vector<std::string>{"three\0"s, "one", ""});
  CHECK(c->multi_get({"m2"}, kLong) == std::vector<std::string>{""});
  CHECK(c->multi_get({}, kLong).empty());
  c->multi_set({}, {});
  CHECK_THROWS_AS(c->multi_set({"a", "b"}, {"only one"}), ddp::Error);
  // The mismatch was caught before anything was sent.
  CHECK(c->get("m1", kLong) == "one");
}

TEST_CASE("multi_get waits for every key", "[loopback]") {
  Loopback lb;
  auto reader = connect(lb.port());
  auto writer = connect(lb.port());
  writer->set("a", "A");
  auto got = std::async(std::launch::async, [&] { return reader->multi_get({"a", "b", "c"}, kLong); });
  REQUIRE(still_blocked(got));
  writer->set("b", "B");
  REQUIRE(still_blocked(got));
  writer->multi_set({"c"}, {"C"});
  REQUIRE(finishes(got));
  CHECK(got.get() == std::vector<std::string>{"A", "B", "C"});

  CHECK_THROWS_AS(reader->multi_get({"a", "missing"}, kShort), rdzv::TimeoutError);
  check_usable(*reader, "after multi_get timeout");
}

TEST_CASE("queues are FIFO with non-blocking and blocking pops", "[loopback]") {
  Loopback lb;
  auto c = connect(lb.port());

  CHECK(c->queue_len("q") == 0);
  CHECK_FALSE(c->try_queue_pop("q").has_value());
  c->queue_push("q", "first");
  c->queue_push("q", "");
  c->queue_push("q", "third\0"s);
  CHECK(c->queue_len("q") == 3);
  CHECK(c->check({"q"}));  // a non-empty queue counts as present
  CHECK(c->try_queue_pop("q") == std::optional<std::string>("first"));
  CHECK(c->queue_pop("q", kLong) == "");
  CHECK(c->queue_len("q") == 1);
  CHECK(c->try_queue_pop("q") == std::optional<std::string>("third\0"s));
  CHECK(c->queue_len("q") == 0);
  CHECK_FALSE(c->try_queue_pop("q").has_value());
  CHECK_FALSE(c->check({"q"}));

  // Queues are separate from each other.
  c->queue_push("q1", "a");
  CHECK(c->queue_len("q2") == 0);
  CHECK(c->queue_len("q1") == 1);
}

TEST_CASE("a blocking queue_pop is woken by a push from another client", "[loopback]") {
  Loopback lb;
  auto popper = connect(lb.port());
  auto pusher = connect(lb.port());

  auto popped = std::async(std::launch::async, [&] { return popper->queue_pop("jobs", kLong); });
  REQUIRE(still_blocked(popped));
  pusher->queue_push("jobs", "job-1");
  REQUIRE(finishes(popped));
  CHECK(popped.get() == "job-1");
  CHECK(pusher->queue_len("jobs") == 0);

  SECTION("two poppers, two pushes: each gets one element") {
    auto other = connect(lb.port());
    auto p1 = std::async(std::launch::async, [&] { return popper->queue_pop("jobs", kLong); });
    auto p2 = std::async(std::launch::async, [&] { return other->queue_pop("jobs", kLong); });
    REQUIRE(still_blocked(p1));
    REQUIRE(still_blocked(p2));
    pusher->queue_push("jobs", "a");
    pusher->queue_push("jobs", "b");
    REQUIRE(finishes(p1));
    REQUIRE(finishes(p2));
    std::vector<std::string> got{p1.get(), p2.get()};
    std::sort(got.begin(), got.end());
    CHECK(got == std::vector<std::string>{"a", "b"});
    CHECK(pusher->queue_len("jobs") == 0);
  }
}

TEST_CASE("list_keys returns the keys under the client's prefix, prefix stripped", "[loopback]") {
  Loopback lb;
  auto c = connect(lb.port());
  CHECK(c->list_keys().empty());
  c->set("alpha", "1");
  c->add("beta", 1);
  c->set("nested/gamma", "");
  c->queue_push("a-queue", "not a key");

  auto other_opts = client_options(lb.port());
  other_opts.key_prefix = "/ns/";
  TcpStoreClient ns(other_opts);
  ns.set("x", "in ns");

  auto keys = c->list_keys();
  std::sort(keys.begin(), keys.end());
  CHECK(keys == std::vector<std::string>{"alpha", "beta", "nested/gamma", "ns/x"});

  auto ns_keys = ns.list_keys();
  CHECK(ns_keys == std::vector<std::string>{"x"});
  // The ns client's key is "/ns/x" on the wire, i.e. "ns/x" for the default "/" prefix.
  CHECK(c->get("ns/x", kLong) == "in ns");
  CHECK(ns.get("x", kLong) == "in ns");
}

TEST_CASE("barrier releases all callers together", "[loopback]") {
  Loopback lb;
  auto c1 = connect(lb.port());
  auto c2 = connect(lb.port());
  auto c3 = connect(lb.port());

  auto b1 = std::async(std::launch::async, [&] { c1->barrier("b", 3, kLong); });
  auto b2 = std::async(std::launch::async, [&] { c2->barrier("b", 3, kLong); });
  REQUIRE(still_blocked(b1));
  REQUIRE(still_blocked(b2));
  auto b3 = std::async(std::launch::async, [&] { c3->barrier("b", 3, kLong); });
  REQUIRE(finishes(b1));
  REQUIRE(finishes(b2));
  REQUIRE(finishes(b3));
  b1.get();
  b2.get();
  b3.get();
  for (auto* c : {c1.get(), c2.get(), c3.get()}) check_usable(*c, "after barrier");

  // A barrier of one returns at once.
  c1->barrier("solo", 1, kShort);
}

TEST_CASE("barrier times out when a member is missing", "[loopback]") {
  Loopback lb;
  auto c1 = connect(lb.port());
  auto c2 = connect(lb.port());
  auto b1 = std::async(std::launch::async, [&] { c1->barrier("short", 3, kShort); });
  auto b2 = std::async(std::launch::async, [&] { c2->barrier("short", 3, kShort); });
  REQUIRE(finishes(b1));
  REQUIRE(finishes(b2));
  CHECK_THROWS_AS(b1.get(), rdzv::TimeoutError);
  CHECK_THROWS_AS(b2.get(), rdzv::TimeoutError);
  check_usable(*c1, "c1");
  check_usable(*c2, "c2");
  // Arrivals stay counted, as in PyTorch: the counter under the barrier key is 2.
  CHECK(c1->add("short", 0) == 2);
}

TEST_CASE("ping round-trips", "[loopback]") {
  Loopback lb;
  auto c = connect(lb.port());
  for (int i = 0; i < 3; ++i) {
    const auto rtt = c->ping();
    CHECK(rtt >= 0us);
    CHECK(rtt < 5s);
  }
  check_usable(*c, "after ping");
}

// ---------------------------------------------------------------------------------------------
// Timeouts.

TEST_CASE("short timeouts throw TimeoutError and the connection stays usable", "[loopback][timeout]") {
  Loopback lb;
  auto c = connect(lb.port());
  const auto times_out = [&](auto&& call) {
    const auto start = Clock::now();
    CHECK_THROWS_AS(call(), rdzv::TimeoutError);
    const auto elapsed = since(start);
    CHECK(elapsed >= kShort - 10ms);
    CHECK(elapsed < 5s);
  };

  times_out([&] { c->wait({"never"}, kShort); });
  check_usable(*c, "wait");
  times_out([&] { c->get("never", kShort); });
  check_usable(*c, "get");
  times_out([&] { c->barrier("never-full", 2, kShort); });
  check_usable(*c, "barrier");
  times_out([&] { c->queue_pop("empty-queue", kShort); });
  check_usable(*c, "queue_pop");
  times_out([&] { c->multi_get({"never", "usable/get"}, kShort); });
  check_usable(*c, "multi_get");
  c->ping();

  // The message names the keys and the endpoint.
  try {
    c->wait({"named-key"}, kShort);
    FAIL("wait did not time out");
  } catch (const rdzv::TimeoutError& e) {
    const std::string what = e.what();
    CHECK_THAT(what, Catch::Contains("named-key"));
    CHECK_THAT(what, Catch::Contains("127.0.0.1:" + std::to_string(lb.port())));
  }
}

TEST_CASE("a key set after a timed-out wait leaves no stray reply", "[loopback][timeout]") {
  Loopback lb;
  auto c = connect(lb.port());
  auto writer = connect(lb.port());

  CHECK_THROWS_AS(c->wait({"late"}, kShort), rdzv::TimeoutError);
  writer->set("late", "v");
  // Had the cancelled wait still been parked, its STOP_WAITING byte would now precede ADD's reply.
  CHECK(c->add("ctr", 5) == 5);
  CHECK(c->add("ctr", 1) == 6);
  CHECK(c->get("late", kLong) == "v");

  CHECK_THROWS_AS(c->queue_pop("late-queue", kShort), rdzv::TimeoutError);
  writer->queue_push("late-queue", "element");
  CHECK(c->add("ctr", 1) == 7);
  // The element pushed after the timed-out pop is still there for the next pop.
  CHECK(c->queue_len("late-queue") == 1);
  CHECK(c->queue_pop("late-queue", kLong) == "element");
}

TEST_CASE("waits racing with the writes that end them stay in step", "[loopback][timeout]") {
  // A wait whose timeout fires just as another client sets the key sees STOP_WAITING and then
  // WAIT_CANCELED after its CANCEL_WAIT; every outcome must leave the connection aligned.
  Loopback lb;
  auto c = connect(lb.port());
  auto writer = connect(lb.port());
  int woken = 0;
  int timed_out = 0;
  constexpr int kRounds = 200;
  for (int i = 0; i < kRounds; ++i) {
    const std::string key = "race" + std::to_string(i);
    // The delay is not a wait for an event: it sweeps the SET across the 1 ms deadline of the
    // wait (before it, during it, between the timeout and CANCEL_WAIT, after the cancel).
    const auto delay = std::chrono::microseconds((i % 50) * 40);
    auto set = std::async(std::launch::async, [&] {
      std::this_thread::sleep_for(delay);
      writer->set(key, "x");
    });
    try {
      c->wait({key}, 1ms);
      ++woken;
    } catch (const rdzv::TimeoutError&) {
      ++timed_out;
    }
    set.get();
    REQUIRE(c->add("race-counter", 1) == i + 1);
  }
  INFO("woken " << woken << ", timed out " << timed_out);
  CHECK(woken + timed_out == kRounds);
  check_usable(*c, "after races");
}

// ---------------------------------------------------------------------------------------------
// Server going away.

TEST_CASE("stopping the server fails blocked clients promptly with ConnectionError", "[loopback]") {
  auto server = std::make_unique<TcpStoreServer>(server_options());
  server->start();
  const auto port = server->port();
  auto waiter = connect(port);
  auto getter = connect(port);
  auto idle = connect(port);
  auto popper = connect(port);

  auto waited = std::async(std::launch::async, [&] { waiter->wait({"never"}, 30s); });
  auto got = std::async(std::launch::async, [&] { return getter->get("never", 30s); });
  auto popped = std::async(std::launch::async, [&] { return popper->queue_pop("never", 30s); });
  REQUIRE(still_blocked(waited));
  REQUIRE(still_blocked(got));
  REQUIRE(still_blocked(popped));

  const auto start = Clock::now();
  server->stop();
  REQUIRE(finishes(waited, 3s));
  REQUIRE(finishes(got, 3s));
  REQUIRE(finishes(popped, 3s));
  CHECK(since(start) < 3s);
  CHECK_THROWS_AS(waited.get(), rdzv::ConnectionError);
  CHECK_THROWS_AS(got.get(), rdzv::ConnectionError);
  CHECK_THROWS_AS(popped.get(), rdzv::ConnectionError);

  // Later calls keep failing with ConnectionError, at once.
  CHECK_THROWS_AS(waiter->set("k", "v"), rdzv::ConnectionError);
  CHECK_THROWS_AS(getter->add("k", 1), rdzv::ConnectionError);
  CHECK_THROWS_AS(waiter->get("k", kShort), rdzv::ConnectionError);
  CHECK_THROWS_AS(popper->ping(), rdzv::ConnectionError);
  // An idle client finds out on its next call that expects a reply.
  CHECK_THROWS_AS(idle->add("k", 1), rdzv::ConnectionError);
  CHECK_THROWS_AS(idle->add("k", 1), rdzv::ConnectionError);

  server->stop();  // idempotent
  server.reset();
}

TEST_CASE("destroying a running server closes its connections", "[loopback]") {
  auto server = std::make_unique<TcpStoreServer>(server_options());
  server->start();
  auto c = connect(server->port());
  auto waited = std::async(std::launch::async, [&] { c->wait({"never"}, 30s); });
  REQUIRE(still_blocked(waited));
  server.reset();
  REQUIRE(finishes(waited, 3s));
  CHECK_THROWS_AS(waited.get(), rdzv::ConnectionError);
}

TEST_CASE("interrupt() fails a blocked call promptly and only that client", "[loopback]") {
  Loopback lb;
  auto blocked = connect(lb.port());
  auto bystander = connect(lb.port());
  auto waited = std::async(std::launch::async, [&] { blocked->wait({"never"}, 30s); });
  REQUIRE(still_blocked(waited));

  const auto start = Clock::now();
  blocked->interrupt();
  REQUIRE(finishes(waited, 3s));
  CHECK(since(start) < 3s);
  CHECK_THROWS_AS(waited.get(), rdzv::ConnectionError);
  CHECK_THROWS_AS(blocked->add("n", 1), rdzv::ConnectionError);
  blocked->interrupt();  // harmless when already broken

  check_usable(*bystander, "bystander");
  bystander->set("never", "set after the interrupted wait");
  CHECK(bystander->add("n", 1) == 1);

  // An idle client that is interrupted fails on its next call.
  auto idle = connect(lb.port());
  idle->interrupt();
  CHECK_THROWS_AS(idle->add("n", 1), rdzv::ConnectionError);
}

// ---------------------------------------------------------------------------------------------
// Connecting.

TEST_CASE("connecting where nothing listens fails after connect_timeout naming the endpoint", "[loopback][connect]") {
  const std::uint16_t port = released_port();
  auto opts = client_options(port);
  opts.connect_timeout = 300ms;
  const auto start = Clock::now();
  try {
    TcpStoreClient c(opts);
    FAIL("connected to a port where nothing listens");
  } catch (const rdzv::ConnectionError& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("127.0.0.1:" + std::to_string(port)));
  }
  const auto elapsed = since(start);
  INFO("gave up after " << elapsed.count() << " ms");
  CHECK(elapsed >= 250ms);
  CHECK(elapsed < 1500ms);
}

TEST_CASE("a client retries until a late server starts", "[loopback][connect]") {
  const std::uint16_t port = released_port();
  auto connecting = std::async(std::launch::async, [port] { return connect(port); });
  // The client is retrying against a closed port meanwhile.
  REQUIRE(still_blocked(connecting));
  REQUIRE(connecting.wait_for(100ms) == std::future_status::timeout);

  TcpStoreServer late(server_options("127.0.0.1", port));
  late.start();
  REQUIRE(finishes(connecting));
  auto c = connecting.get();
  check_usable(*c, "late server");
}

TEST_CASE("an unresolvable host fails with ConnectionError", "[loopback][connect]") {
  auto opts = client_options(1);
  opts.host = "no-such-host.invalid";
  opts.connect_timeout = 300ms;
  CHECK_THROWS_AS(TcpStoreClient(opts), rdzv::ConnectionError);
}

// ---------------------------------------------------------------------------------------------
// Hostile peers.

TEST_CASE("hostile peers are disconnected with a logged reason, others keep working", "[loopback][hostile]") {
  Loopback lb;
  auto before = connect(lb.port());
  check_usable(*before, "before");

  struct Case {
    const char* name;
    std::string bytes;
    std::string reason;  // expected in the log line
  };
  std::string huge_key = validate_bytes();
  rdzv::put_u8(huge_key, static_cast<std::uint8_t>(rdzv::QueryType::Set));
  rdzv::put_i64(huge_key, std::int64_t{1} << 40);  // a 1 TiB key
  huge_key += "some bytes";

  std::string long_key =
      validate_bytes() + keyed_bytes(rdzv::QueryType::Get, std::string(rdzv::kMaxKeyLength + 1, 'k'));

  std::string huge_count = validate_bytes();
  rdzv::put_u8(huge_count, static_cast<std::uint8_t>(rdzv::QueryType::MultiGet));
  rdzv::put_i64(huge_count, std::int64_t{1} << 40);

  std::string huge_value = validate_bytes() + keyed_bytes(rdzv::QueryType::Set, "/k");
  rdzv::put_i64(huge_value, std::int64_t{rdzv::kMaxValueLength} + 1);

  std::string double_wait = validate_bytes() + wait_bytes("/never1") + wait_bytes("/never2");

  const std::vector<Case> cases{
      {"garbage first", "GET / HTTP/1.1\r\nHost: x\r\n\r\n", "unknown query type 71"},
      {"wrong VALIDATE magic", validate_bytes(0xDEADBEEF), "VALIDATE with wrong magic"},
      {"no VALIDATE", ping_bytes(7), "expected the VALIDATE handshake"},
      {"1 TiB key length", huge_key, "announces a key of 1099511627776 bytes"},
      {"unknown query type after VALIDATE", validate_bytes() + std::string(1, '\xC8'), "unknown query type 200"},
      {"key over 8 KiB", long_key, "announces a key of 8193 bytes"},
      {"2^40 keys", huge_count, "announces 1099511627776 keys"},
      {"value over 8 MiB", huge_value, "announces a value of 8388609 bytes"},
      {"second WAIT while one is pending", double_wait, "while an earlier WAIT"},
  };
  for (const auto& hostile : cases) {
    DYNAMIC_SECTION(hostile.name) {
      RawConnection raw(lb.port());
      const std::string peer = "127.0.0.1:" + std::to_string(raw.local_port());
      raw.send_bytes(hostile.bytes);  // may fail part-way once the server has hung up
      CHECK(raw.closed_by_peer_within(3s));
      INFO("server log:\n" << lb.log.all());
      CHECK(lb.log.wait_for_line({"closed connection from " + peer, hostile.reason}, 3s));

      check_usable(*before, hostile.name);
      auto after = connect(lb.port());
      check_usable(*after, std::string("new client after ") + hostile.name);
    }
  }
}

TEST_CASE("a request sent one byte at a time gets the right replies", "[loopback]") {
  Loopback lb;
  RawConnection raw(lb.port());
  const std::string value("trickled\0value"s);
  const std::uint32_t nonce = 0xA1B2C3D4;

  const auto trickle = [&](const std::string& bytes) {
    for (char b : bytes) REQUIRE(raw.send_bytes(std::string_view(&b, 1)));
  };
  trickle(validate_bytes());
  trickle(ping_bytes(nonce));
  CHECK(rdzv::get_u32(raw.read_exact(4, kLong).data()) == nonce);

  trickle(set_bytes("/slow", value));
  trickle(keyed_bytes(rdzv::QueryType::Get, "/slow"));
  const std::string len = raw.read_exact(8, kLong);
  REQUIRE(rdzv::get_i64(len.data()) == static_cast<std::int64_t>(value.size()));
  CHECK(raw.read_exact(value.size(), kLong) == value);

  std::string add;
  rdzv::put_u8(add, static_cast<std::uint8_t>(rdzv::QueryType::Add));
  rdzv::put_str(add, "/slow-counter");
  rdzv::put_i64(add, -3);
  trickle(add);
  CHECK(rdzv::get_i64(raw.read_exact(8, kLong).data()) == -3);

  // The same key through the client (its "/" prefix makes "slow" the wire key "/slow").
  auto c = connect(lb.port());
  CHECK(c->get("slow", kLong) == value);
  CHECK(c->add("slow-counter", 0) == -3);
}

TEST_CASE("several requests in one write are answered in order", "[loopback]") {
  Loopback lb;
  RawConnection raw(lb.port());
  std::string burst = validate_bytes() + ping_bytes(1) + set_bytes("/a", "A") + ping_bytes(2) +
                      keyed_bytes(rdzv::QueryType::Get, "/a") + ping_bytes(3);
  REQUIRE(raw.send_bytes(burst));
  CHECK(rdzv::get_u32(raw.read_exact(4, kLong).data()) == 1);
  CHECK(rdzv::get_u32(raw.read_exact(4, kLong).data()) == 2);
  CHECK(rdzv::get_i64(raw.read_exact(8, kLong).data()) == 1);
  CHECK(raw.read_exact(1, kLong) == "A");
  CHECK(rdzv::get_u32(raw.read_exact(4, kLong).data()) == 3);
}

// ---------------------------------------------------------------------------------------------
// Binding.

TEST_CASE("IPv6 loopback server and client", "[loopback][ipv6]") {
  std::unique_ptr<TcpStoreServer> server;
  try {
    server = std::make_unique<TcpStoreServer>(server_options("::1"));
  } catch (const rdzv::BindError& e) {
    WARN("skipped: cannot bind ::1 on this machine: " << e.what());
    return;
  }
  server->start();
  CHECK(server->address() == "[::1]:" + std::to_string(server->port()));
  auto c = connect(server->port(), "[::1]");
  check_usable(*c, "ipv6");
  auto bare = connect(server->port(), "::1");  // brackets are optional for the client
  CHECK(bare->get("usable/ipv6", kLong) == "yes\0ipv6"s);
}

TEST_CASE("a dual-stack server (host \"\") is reachable over IPv4", "[loopback]") {
  TcpStoreServer server(server_options(""));
  server.start();
  REQUIRE(server.port() != 0);
  auto c = connect(server.port(), "127.0.0.1");
  check_usable(*c, "dual-stack v4");
  auto by_name = connect(server.port(), "localhost");
  CHECK(by_name->get("usable/dual-stack v4", kLong) == "yes\0dual-stack v4"s);
}

TEST_CASE("port 0 picks a free port and address() names it", "[loopback]") {
  TcpStoreServer server(server_options());
  CHECK(server.port() != 0);
  CHECK(server.address() == "127.0.0.1:" + std::to_string(server.port()));
  // Not started: clients queue in the backlog until it starts.
  auto connecting = std::async(std::launch::async, [&] { return connect(server.port()); });
  REQUIRE(still_blocked(connecting));
  server.start();
  REQUIRE(finishes(connecting));
  check_usable(*connecting.get(), "started late");
}

TEST_CASE("a port already in use throws BindError", "[loopback]") {
  TcpStoreServer first(server_options());
  try {
    TcpStoreServer second(server_options("127.0.0.1", first.port()));
    FAIL("bound a port that is already in use");
  } catch (const rdzv::BindError& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("already in use"));
    CHECK_THAT(std::string(e.what()), Catch::Contains(std::to_string(first.port())));
  }
  // Dual stack collides with the IPv4 listener as well.
  CHECK_THROWS_AS(TcpStoreServer(server_options("", first.port())), rdzv::BindError);
  // An address that is not local is a BindError too.
  CHECK_THROWS_AS(TcpStoreServer(server_options("192.0.2.1")), rdzv::BindError);
}

// ---------------------------------------------------------------------------------------------
// Clients going away.

TEST_CASE("a client disconnecting while waiting does not disturb the others", "[loopback]") {
  Loopback lb;
  auto c = connect(lb.port());
  auto waiter = connect(lb.port());

  // Raw peers park in a WAIT and a BARRIER, then vanish: one orderly, one with a reset.
  {
    RawConnection fin(lb.port());
    REQUIRE(fin.send_bytes(validate_bytes() + wait_bytes("/gone-key")));
    RawConnection rst(lb.port());
    std::string barrier = validate_bytes();
    rdzv::put_u8(barrier, static_cast<std::uint8_t>(rdzv::QueryType::Barrier));
    rdzv::put_str(barrier, "/gone-barrier");
    rdzv::put_i64(barrier, 3);
    REQUIRE(rst.send_bytes(barrier));
    // Each request is processed before the connection's close (same connection, in order); a
    // PING round trip on the orderly one proves the WAIT was parked.
    REQUIRE(fin.send_bytes(ping_bytes(9)));
    CHECK(rdzv::get_u32(fin.read_exact(4, kLong).data()) == 9);
    rst.reset();
  }

  // A proper waiter on the same key is woken; the vanished one is not written to.
  auto waited = std::async(std::launch::async, [&] { return waiter->get("gone-key", kLong); });
  REQUIRE(still_blocked(waited));
  c->set("gone-key", "here");
  REQUIRE(finishes(waited));
  CHECK(waited.get() == "here");

  // The vanished barrier member still counts (1 of 3); two more complete it.
  auto b1 = std::async(std::launch::async, [&] { c->barrier("gone-barrier", 3, kLong); });
  auto b2 = std::async(std::launch::async, [&] { waiter->barrier("gone-barrier", 3, kLong); });
  REQUIRE(finishes(b1));
  REQUIRE(finishes(b2));
  b1.get();
  b2.get();

  check_usable(*c, "after disconnects");
  auto fresh = connect(lb.port());
  check_usable(*fresh, "fresh after disconnects");
}

namespace {

// The resident set of this process (the server runs in it), from /proc/self/status.
std::size_t rss_bytes() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoul(line.substr(6)) * 1024;
  }
  return 0;
}

// A server with small limits and its log (a summary line per 200 ms).
struct LimitedLoopback {
  LogCapture log;
  TcpStoreServer server{[this] {
    auto o = server_options();
    o.log = log.sink();
    o.handshake_timeout = 300ms;
    o.max_unsent_bytes = std::size_t{4} << 20;
    o.max_connections = 8;
    o.report_interval = 200ms;
    return o;
  }()};
  LimitedLoopback() { server.start(); }
  std::uint16_t port() const { return server.port(); }
};

}  // namespace

TEST_CASE("a connection that never completes a request is closed at the handshake deadline", "[loopback][limits]") {
  LimitedLoopback lb;
  RawConnection idle(lb.port());
  auto client = connect(lb.port());  // a real client is served meanwhile
  check_usable(*client, "beside-idle");
  const auto start = Clock::now();
  CHECK_THROWS_WITH(idle.read_exact(1, kLong), Catch::Matchers::Contains("connection closed"));
  CHECK(since(start) < 5s);
  CHECK(lb.log.wait_for_line({"closed 1 connection(s)", "handshake deadline"}, kLong));
  check_usable(*client, "after-idle");  // past the deadline: a handshaken client is not affected
}

TEST_CASE("a client that never reads its replies cannot grow the server", "[loopback][limits]") {
  LimitedLoopback lb;
  auto writer = connect(lb.port());
  const std::string big(std::size_t{8} << 20, 'v');
  writer->set("big", big);
  REQUIRE(writer->get("big", kLong).size() == big.size());  // SET has no reply: be sure it landed
  RawConnection greedy(lb.port());
  REQUIRE(greedy.send_bytes(std::string("\x00\xce\xf7\x85\x3c", 5)));  // VALIDATE
  // 400 GETs of the 8 MiB value (3.2 GB of replies), never read.
  std::string get;
  get += '\x03';  // GET
  const std::string key = "/big";
  const std::uint64_t len = key.size();
  get.append(reinterpret_cast<const char*>(&len), sizeof len);
  get += key;
  const std::size_t before = rss_bytes();
  std::string gets;
  for (int i = 0; i < 400; ++i) gets += get;
  REQUIRE(greedy.send_bytes(gets));
  // A real client is served while the greedy one's replies are stuck, and the server stays small.
  const auto start = Clock::now();
  check_usable(*writer, "beside-greedy");
  CHECK(since(start) < 2s);
  CHECK(rss_bytes() < before + (std::size_t{200} << 20));
  // The greedy connection is paused, not dropped: its first reply (8-byte length, then the
  // value) is there to read.
  const std::string header = greedy.read_exact(8, kLong);
  std::uint64_t value_len = 0;
  std::memcpy(&value_len, header.data(), sizeof value_len);
  CHECK(value_len == big.size());
}

TEST_CASE("beyond the connection cap new connections are refused and counted, not logged one by one",
          "[loopback][limits]") {
  LimitedLoopback lb;
  std::vector<std::unique_ptr<TcpStoreClient>> clients;
  for (int i = 0; i < 8; ++i) clients.push_back(connect(lb.port()));
  std::vector<std::unique_ptr<RawConnection>> extra;
  for (int i = 0; i < 20; ++i) extra.push_back(std::make_unique<RawConnection>(lb.port()));
  for (auto& e : extra) CHECK_THROWS(e->read_exact(1, kLong));  // closed at accept
  CHECK(lb.log.wait_for_line({"closed 20 connection(s)", "refused"}, kLong));
  CHECK(lb.log.all().find("closed 1 connection(s)") == std::string::npos);
  check_usable(*clients.front(), "under-cap");
}
