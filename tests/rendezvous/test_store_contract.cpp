// The Store contract, one suite run against every implementation: MemoryStore, PrefixStore over
// a MemoryStore, TcpStoreClient against a TcpStoreServer on 127.0.0.1 (port 0), PrefixStore
// over a TcpStoreClient, and TcpStoreClient in process (alone, and beside a TCP client). Covers set/get (binary bytes, empty and large values, overwrite), get and
// wait blocking until another handle writes, timeouts (TimeoutError, store usable afterwards),
// add, compare_set's four cases, check, delete_key, num_keys, and prefix isolation.
//
// Waits for "has not happened yet" use future::wait_for with a short bound: correct behaviour
// never completes there, so those checks cannot flake in the passing direction.
#include "ddplaunch/rendezvous/store.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "ddplaunch/rendezvous/error.hpp"
#include "ddplaunch/rendezvous/memory_store.hpp"
#include "ddplaunch/rendezvous/prefix_store.hpp"
#include "ddplaunch/rendezvous/tcp_store_client.hpp"
#include "ddplaunch/rendezvous/tcp_store_server.hpp"
#include "tests/rendezvous/blocking_checks.hpp"

namespace {

namespace rdzv = ddp::rendezvous;
using namespace ddp::testing;  // kLong, still_blocked(), finishes()
using namespace std::chrono_literals;
using namespace std::string_literals;
using Clock = std::chrono::steady_clock;
using rdzv::Store;

// Short timeouts for calls that must time out; long bounds (kLong) for things that must happen.
constexpr std::chrono::milliseconds kShort = 150ms;

// Each fixture owns one backing store and exposes:
//   store  — the Store under test;
//   base   — the unprefixed store beneath it (== store for the unprefixed fixtures);
//   second_handle() — another handle on the same data, usable from another thread while `store`
//                     is blocked (a second TCP client; the very same object in memory).

struct Memory {
  std::shared_ptr<Store> base = std::make_shared<rdzv::MemoryStore>();
  std::shared_ptr<Store> store = base;
  std::shared_ptr<Store> second_handle() { return store; }
};

struct PrefixOverMemory {
  std::shared_ptr<Store> base = std::make_shared<rdzv::MemoryStore>();
  std::shared_ptr<Store> store = std::make_shared<rdzv::PrefixStore>("contract", base);
  std::shared_ptr<Store> second_handle() { return std::make_shared<rdzv::PrefixStore>("contract", base); }
};

rdzv::TcpStoreServerOptions loopback_server_options() {
  rdzv::TcpStoreServerOptions o;
  o.host = "127.0.0.1";
  o.port = 0;
  return o;
}

// A running server on a free port of 127.0.0.1; declared first in the TCP fixtures so that it
// outlives their clients.
struct RunningServer {
  rdzv::TcpStoreServer server{loopback_server_options()};
  RunningServer() { server.start(); }

  std::shared_ptr<rdzv::TcpStoreClient> client() {
    rdzv::TcpStoreClientOptions o;
    o.host = "127.0.0.1";
    o.port = server.port();
    o.connect_timeout = kLong;
    o.timeout = kLong;
    return std::make_shared<rdzv::TcpStoreClient>(o);
  }
};

struct Tcp {
  RunningServer running;
  std::shared_ptr<Store> base = running.client();
  std::shared_ptr<Store> store = base;
  std::shared_ptr<Store> second_handle() { return running.client(); }
};

struct PrefixOverTcp {
  RunningServer running;
  std::shared_ptr<Store> base = running.client();
  std::shared_ptr<Store> store = std::make_shared<rdzv::PrefixStore>("contract", base);
  std::shared_ptr<Store> second_handle() { return std::make_shared<rdzv::PrefixStore>("contract", running.client()); }
};

// TcpStoreClient in process (TcpStoreClientOptions::in_process) with a server whose loop does not
// run until a wait needs it; the second handle is another in-process connection.
struct InProcess {
  rdzv::TcpStoreServer server{loopback_server_options()};
  std::shared_ptr<rdzv::TcpStoreClient> client() {
    rdzv::TcpStoreClientOptions o;
    o.port = server.port();
    o.timeout = kLong;
    o.in_process = &server;
    return std::make_shared<rdzv::TcpStoreClient>(o);
  }
  std::shared_ptr<Store> base = client();
  std::shared_ptr<Store> store = base;
  std::shared_ptr<Store> second_handle() { return client(); }
};

// In process beside a TCP client: every wake-up crosses between the two kinds of connection.
struct InProcessBesideTcp {
  RunningServer running;
  std::shared_ptr<Store> base = [this] {
    rdzv::TcpStoreClientOptions o;
    o.port = running.server.port();
    o.timeout = kLong;
    o.in_process = &running.server;
    return std::make_shared<rdzv::TcpStoreClient>(o);
  }();
  std::shared_ptr<Store> store = base;
  std::shared_ptr<Store> second_handle() { return running.client(); }
};

#define STORE_FIXTURES Memory, PrefixOverMemory, Tcp, PrefixOverTcp, InProcess, InProcessBesideTcp

}  // namespace

TEMPLATE_TEST_CASE("set and get round-trip binary, empty and large values, and overwrite", "[contract]",
                   STORE_FIXTURES) {
  TestType fx;
  Store& s = *fx.store;

  const std::string binary("a\0b\xff\x00\x01z"s);
  REQUIRE(binary.size() == 7);
  s.set("binary", binary);
  CHECK(s.get("binary", kLong) == binary);

  s.set("empty", "");
  CHECK(s.get("empty", kLong).empty());
  CHECK(s.check({"empty"}));

  std::string large(1 << 20, '\0');
  for (std::size_t i = 0; i < large.size(); ++i) large[i] = static_cast<char>(i * 131 % 251);
  s.set("large", large);
  CHECK(s.get("large", kLong) == large);

  s.set("k", "first");
  s.set("k", "second");
  CHECK(s.get("k", kLong) == "second");
  s.set("k", "");
  CHECK(s.get("k", kLong).empty());

  // Keys are distinct byte strings: a key that is a prefix of another is its own key.
  s.set("ab", "1");
  s.set("a", "2");
  CHECK(s.get("ab", kLong) == "1");
  CHECK(s.get("a", kLong) == "2");
}

TEMPLATE_TEST_CASE("get blocks until another handle sets the key", "[contract]", STORE_FIXTURES) {
  TestType fx;
  auto other = fx.second_handle();

  auto got = std::async(std::launch::async, [&] { return fx.store->get("later", kLong); });
  REQUIRE(still_blocked(got));
  other->set("later", "value\0x"s);
  REQUIRE(finishes(got));
  CHECK(got.get() == "value\0x"s);
}

TEMPLATE_TEST_CASE("get and wait time out with TimeoutError and the store stays usable", "[contract]", STORE_FIXTURES) {
  TestType fx;
  Store& s = *fx.store;

  auto start = Clock::now();
  CHECK_THROWS_AS(s.get("missing", kShort), rdzv::TimeoutError);
  auto elapsed = since(start);
  CHECK(elapsed >= kShort - 10ms);
  CHECK(elapsed < 5s);

  start = Clock::now();
  CHECK_THROWS_AS(s.wait({"missing", "also-missing"}, kShort), rdzv::TimeoutError);
  elapsed = since(start);
  CHECK(elapsed >= kShort - 10ms);
  CHECK(elapsed < 5s);

  // Partially present keys still time out.
  s.set("present", "1");
  CHECK_THROWS_AS(s.wait({"present", "missing"}, kShort), rdzv::TimeoutError);

  // Usable afterwards, and a key written after the timeout is seen.
  s.set("missing", "now here");
  CHECK(s.get("missing", kLong) == "now here");
  s.set("after", "x");
  CHECK(s.get("after", kLong) == "x");
  CHECK(s.add("counter", 2) == 2);
  s.wait({"missing", "present"}, kLong);
}

TEMPLATE_TEST_CASE("add counts in decimal text starting from 0", "[contract]", STORE_FIXTURES) {
  TestType fx;
  Store& s = *fx.store;

  CHECK(s.add("c", 7) == 7);
  CHECK(s.get("c", kLong) == "7");
  CHECK(s.add("c", -10) == -3);
  CHECK(s.get("c", kLong) == "-3");
  CHECK(s.add("c", 0) == -3);
  CHECK(s.add("negative-start", -5) == -5);
  CHECK(s.get("negative-start", kLong) == "-5");
  CHECK(s.add("zero", 0) == 0);
  CHECK(s.check({"zero"}));  // add(key, 0) creates the counter

  // A counter set as text is continued.
  s.set("from-text", "41");
  CHECK(s.add("from-text", 1) == 42);
  CHECK(s.get("from-text", kLong) == "42");

  // Large values survive the decimal round trip.
  CHECK(s.add("big", std::int64_t{1} << 40) == std::int64_t{1} << 40);
  CHECK(s.get("big", kLong) == "1099511627776");
}

TEMPLATE_TEST_CASE("add wakes a waiter", "[contract]", STORE_FIXTURES) {
  TestType fx;
  auto other = fx.second_handle();
  auto waited = std::async(std::launch::async, [&] { fx.store->wait({"counter"}, kLong); });
  REQUIRE(still_blocked(waited));
  CHECK(other->add("counter", 1) == 1);
  REQUIRE(finishes(waited));
  waited.get();
}

TEMPLATE_TEST_CASE("add on a non-numeric value throws an Error", "[contract]", STORE_FIXTURES) {
  // MemoryStore reports a ProtocolError; the TCP server closes the connection, which the client
  // reports as a ConnectionError. Either way it is an Error, and the last call of this case.
  TestType fx;
  fx.store->set("text", "not a number");
  CHECK_THROWS_AS(fx.store->add("text", 1), ddp::Error);
  // The value was left alone.
  CHECK(fx.second_handle()->get("text", kLong) == "not a number");
}

TEMPLATE_TEST_CASE("compare_set has PyTorch's four cases", "[contract]", STORE_FIXTURES) {
  TestType fx;
  Store& s = *fx.store;

  SECTION("missing key, empty expected: stores desired and returns it") {
    CHECK(s.compare_set("k", "", "desired") == "desired");
    CHECK(s.get("k", kLong) == "desired");
  }
  SECTION("missing key, non-empty expected: returns expected and creates nothing") {
    CHECK(s.compare_set("k", "expected", "desired") == "expected");
    CHECK_FALSE(s.check({"k"}));
    CHECK_THROWS_AS(s.get("k", kShort), rdzv::TimeoutError);
  }
  SECTION("present and matching: stores desired and returns it") {
    s.set("k", "old\0"s);
    CHECK(s.compare_set("k", "old\0"s, "new") == "new");
    CHECK(s.get("k", kLong) == "new");
  }
  SECTION("present and not matching: no change, returns the current value") {
    s.set("k", "current");
    CHECK(s.compare_set("k", "other", "desired") == "current");
    CHECK(s.get("k", kLong) == "current");
    // An empty expected does not match a present key either.
    CHECK(s.compare_set("k", "", "desired") == "current");
    CHECK(s.get("k", kLong) == "current");
  }
}

TEMPLATE_TEST_CASE("compare_set that writes wakes a waiter", "[contract]", STORE_FIXTURES) {
  TestType fx;
  auto other = fx.second_handle();
  auto got = std::async(std::launch::async, [&] { return fx.store->get("cas", kLong); });
  REQUIRE(still_blocked(got));
  CHECK(other->compare_set("cas", "", "won") == "won");
  REQUIRE(finishes(got));
  CHECK(got.get() == "won");
}

TEMPLATE_TEST_CASE("check tells whether every key exists", "[contract]", STORE_FIXTURES) {
  TestType fx;
  Store& s = *fx.store;

  CHECK(s.check({}));
  CHECK_FALSE(s.check({"a"}));
  s.set("a", "1");
  s.set("b", "");
  CHECK(s.check({"a"}));
  CHECK(s.check({"a", "b"}));
  CHECK_FALSE(s.check({"a", "b", "c"}));
  CHECK_FALSE(s.check({"c", "a"}));
  s.add("c", 1);
  CHECK(s.check({"c", "a", "b"}));
}

TEMPLATE_TEST_CASE("wait on several keys returns only after all are set", "[contract]", STORE_FIXTURES) {
  TestType fx;
  auto other = fx.second_handle();
  fx.store->set("k0", "already");

  auto waited = std::async(std::launch::async, [&] { fx.store->wait({"k0", "k1", "k2", "k3"}, kLong); });
  REQUIRE(still_blocked(waited));
  other->set("k1", "1");
  other->set("k2", "2");
  REQUIRE(still_blocked(waited));
  other->set("k3", "3");
  REQUIRE(finishes(waited));
  waited.get();

  // Every key present: returns at once; the empty list too.
  fx.store->wait({"k3", "k2", "k1", "k0"}, kShort);
  fx.store->wait({}, kShort);
}

TEMPLATE_TEST_CASE("delete_key tells whether the key existed", "[contract]", STORE_FIXTURES) {
  TestType fx;
  Store& s = *fx.store;

  CHECK_FALSE(s.delete_key("gone"));
  s.set("gone", "v");
  s.set("stays", "w");
  CHECK(s.delete_key("gone"));
  CHECK_FALSE(s.delete_key("gone"));
  CHECK_FALSE(s.check({"gone"}));
  CHECK(s.check({"stays"}));
  CHECK_THROWS_AS(s.get("gone", kShort), rdzv::TimeoutError);

  // A deleted counter starts again from 0.
  s.add("ctr", 5);
  CHECK(s.delete_key("ctr"));
  CHECK(s.add("ctr", 1) == 1);
}

TEMPLATE_TEST_CASE("num_keys counts the keys of the whole store", "[contract]", STORE_FIXTURES) {
  TestType fx;
  Store& s = *fx.store;

  const std::int64_t n0 = s.num_keys();
  CHECK(n0 >= 0);
  s.set("n1", "a");
  s.set("n2", "b");
  CHECK(s.num_keys() == n0 + 2);
  s.set("n1", "overwritten");
  CHECK(s.num_keys() == n0 + 2);
  s.add("n3", 1);
  CHECK(s.num_keys() == n0 + 3);
  s.delete_key("n1");
  CHECK(s.num_keys() == n0 + 2);
  s.compare_set("n4", "x", "y");  // creates nothing
  CHECK(s.num_keys() == n0 + 2);

  // A key written beside this view (unprefixed, in the underlying store) counts too: a
  // PrefixStore's num_keys is the underlying store's.
  fx.base->set("beside-the-view", "1");
  CHECK(s.num_keys() == n0 + 3);
}

TEMPLATE_TEST_CASE("prefix stores over one store are isolated", "[contract]", STORE_FIXTURES) {
  TestType fx;
  auto inner = fx.store;
  rdzv::PrefixStore a("a", inner);
  rdzv::PrefixStore b("b", inner);

  a.set("k", "from a");
  CHECK_FALSE(b.check({"k"}));
  CHECK_THROWS_AS(b.get("k", kShort), rdzv::TimeoutError);
  b.set("k", "from b");
  CHECK(a.get("k", kLong) == "from a");
  CHECK(b.get("k", kLong) == "from b");

  // "k" of PrefixStore("a") is "a/k" underneath.
  CHECK(inner->get("a/k", kLong) == "from a");
  CHECK(inner->get("b/k", kLong) == "from b");
  CHECK_FALSE(inner->check({"k"}));
  inner->set("a/direct", "written underneath");
  CHECK(a.get("direct", kLong) == "written underneath");

  CHECK(a.add("n", 2) == 2);
  CHECK(b.add("n", 5) == 5);
  CHECK(inner->get("a/n", kLong) == "2");

  CHECK(a.compare_set("k", "from a", "changed") == "changed");
  CHECK(b.get("k", kLong) == "from b");

  CHECK(a.delete_key("k"));
  CHECK(b.check({"k"}));
  CHECK_FALSE(a.delete_key("k"));

  CHECK_FALSE(a.check({"n", "only-b"}));
  b.set("only-b", "1");
  CHECK_FALSE(a.check({"n", "only-b"}));
  CHECK(b.check({"n", "only-b"}));

  // Nesting composes: PrefixStore("x") over PrefixStore("a") writes "a/x/k".
  auto a_shared = std::make_shared<rdzv::PrefixStore>("a", inner);
  rdzv::PrefixStore ax("x", a_shared);
  ax.set("k", "nested");
  CHECK(inner->get("a/x/k", kLong) == "nested");

  // And the whole thing sits under the fixture's own prefix, if any, in the base store.
  if (fx.base != fx.store) CHECK(fx.base->get("contract/a/x/k", kLong) == "nested");
}

TEMPLATE_TEST_CASE("a waiter on a prefixed key is woken through another prefix store", "[contract]", STORE_FIXTURES) {
  TestType fx;
  auto other = fx.second_handle();
  auto mine = std::make_shared<rdzv::PrefixStore>("p", fx.store);
  rdzv::PrefixStore theirs("p", other);

  auto waited = std::async(std::launch::async, [&] { mine->wait({"ready"}, kLong); });
  REQUIRE(still_blocked(waited));
  other->set("ready", "unprefixed, does not count");
  REQUIRE(still_blocked(waited));
  theirs.set("ready", "1");
  REQUIRE(finishes(waited));
  waited.get();
}
