// Our C++ TcpStoreClient against PyTorch's own TCPStore server (the libuv backend), hosted by
// tests/interop/torch_master_store.py in the project's venv: every query of the protocol, the
// key "from_python" written by PyTorch's own client, timeouts that leave the connection usable.
// The venv is part of the build, so a missing python or torch is a failure, not a skip.
#include "ddplaunch/rendezvous/tcp_store_client.hpp"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ddplaunch/rendezvous/error.hpp"
#include "tests/rendezvous/blocking_checks.hpp"
#include "tests/support/child_process.hpp"

namespace {

namespace rdzv = ddp::rendezvous;
using namespace ddp::testing;  // ChildProcess, kLong, still_blocked(), finishes()
using namespace std::chrono_literals;
using namespace std::string_literals;
using Clock = std::chrono::steady_clock;

const std::string kPython = DDP_PYTHON;
const std::string kScript = std::string(DDP_SOURCE_DIR) + "/tests/interop/torch_master_store.py";
// Importing torch takes a few seconds, more on a loaded machine.
constexpr std::chrono::milliseconds kStartup = 120s;
constexpr std::chrono::milliseconds kShort = 200ms;

// PyTorch's TCPStore server in a python child; stopped by closing its stdin.
class TorchServer {
 public:
  TorchServer() : child_({kPython, kScript, "--max-seconds", "280"}) {
    const auto line = child_.read_stdout_line(kStartup);
    if (!line || line->rfind("port=", 0) != 0) {
      child_.close_stdin();
      child_.wait_for(5s);
      FAIL("torch_master_store.py did not announce a port (line: '" << line.value_or("<none>") << "'); stderr:\n"
                                                                    << child_.stderr_text());
    }
    port_ = static_cast<std::uint16_t>(std::stoi(line->substr(5)));
  }

  std::uint16_t port() const { return port_; }

  std::unique_ptr<rdzv::TcpStoreClient> client(std::string key_prefix = "/") const {
    rdzv::TcpStoreClientOptions o;
    o.host = "127.0.0.1";
    o.port = port_;
    o.connect_timeout = kLong;
    o.timeout = kLong;
    o.key_prefix = std::move(key_prefix);
    return std::make_unique<rdzv::TcpStoreClient>(o);
  }

  // Closes the script's stdin and waits for it to exit (0).
  void stop() {
    child_.close_stdin();
    const auto exit = child_.wait_for(15s);
    INFO("stderr:\n" << child_.stderr_text());
    REQUIRE(exit.has_value());
    INFO(describe(*exit));
    CHECK(exit->exited);
    CHECK(exit->code == 0);
  }

 private:
  ChildProcess child_;
  std::uint16_t port_ = 0;
};

}  // namespace

TEST_CASE("the venv's python can import torch", "[interop]") {
  INFO("DDP_PYTHON = " << kPython);
  REQUIRE(::access(kPython.c_str(), X_OK) == 0);
  ChildProcess py({kPython, "-c", "import torch.distributed as d; print(d.is_available())"});
  const auto exit = py.wait_for(kStartup);
  INFO("stdout: " << py.stdout_text() << "\nstderr: " << py.stderr_text());
  REQUIRE(exit.has_value());
  CHECK(exit->exited);
  CHECK(exit->code == 0);
  CHECK_THAT(py.stdout_text(), Catch::StartsWith("True"));
}

// One case with one server (starting python and torch costs seconds); each block uses its own
// keys and leaves both connections usable for the next.
TEST_CASE("our client speaks every query with PyTorch's TCPStore server", "[interop]") {
  INFO("DDP_PYTHON = " << kPython);
  REQUIRE(::access(kPython.c_str(), X_OK) == 0);
  TorchServer torch;
  auto c = torch.client();
  auto other = torch.client();

  {
    INFO("a key set by PyTorch's own client");
    CHECK(c->get("from_python", kLong) == "hello");
    CHECK(c->check({"from_python"}));
  }

  {
    INFO("set, get, overwrite, binary values");
    c->set("k", "v1");
    c->set("k", "v2");
    CHECK(other->get("k", kLong) == "v2");
    c->set("bin", "a\0b\xff"s);
    CHECK(other->get("bin", kLong) == "a\0b\xff"s);
    c->set("empty", "");
    CHECK(other->get("empty", kLong).empty());
  }

  {
    INFO("get blocks until another client sets the key");
    auto got = std::async(std::launch::async, [&] { return c->get("later", kLong); });
    REQUIRE(still_blocked(got));
    other->set("later", "now");
    REQUIRE(finishes(got));
    CHECK(got.get() == "now");
  }

  {
    INFO("add");
    CHECK(c->add("ctr", 7) == 7);
    CHECK(other->get("ctr", kLong) == "7");
    CHECK(other->add("ctr", -10) == -3);
    CHECK(c->add("ctr", 0) == -3);
  }

  {
    INFO("compare_set's four cases");
    CHECK(c->compare_set("cas1", "", "desired") == "desired");
    CHECK(c->get("cas1", kLong) == "desired");
    CHECK(c->compare_set("cas2", "expected", "desired") == "expected");
    CHECK_FALSE(c->check({"cas2"}));
    c->set("cas3", "old");
    CHECK(c->compare_set("cas3", "old", "new") == "new");
    CHECK(c->get("cas3", kLong) == "new");
    CHECK(c->compare_set("cas3", "other", "x") == "new");
    CHECK(c->get("cas3", kLong) == "new");
  }

  {
    INFO("check");
    CHECK(c->check({}));
    CHECK_FALSE(c->check({"from_python", "missing"}));
    c->set("present", "1");
    CHECK(c->check({"from_python", "present"}));
  }

  {
    INFO("wait, with a timeout that leaves the connection usable");
    const auto start = Clock::now();
    CHECK_THROWS_AS(c->wait({"never"}, kShort), rdzv::TimeoutError);
    CHECK(Clock::now() - start >= kShort - 10ms);
    CHECK_THROWS_AS(c->get("never", kShort), rdzv::TimeoutError);
    other->set("never", "late");
    // A stray STOP_WAITING from the cancelled waits would corrupt these replies.
    CHECK(c->add("after-timeout", 2) == 2);
    CHECK(c->get("never", kLong) == "late");
    c->ping();

    auto waited = std::async(std::launch::async, [&] { c->wait({"w1", "w2"}, kLong); });
    REQUIRE(still_blocked(waited));
    other->set("w1", "1");
    REQUIRE(still_blocked(waited));
    other->set("w2", "2");
    REQUIRE(finishes(waited));
    waited.get();
  }

  {
    INFO("delete_key and num_keys");
    const auto n0 = c->num_keys();
    CHECK(n0 >= 1);  // at least "from_python"
    c->set("d1", "x");
    c->set("d2", "y");
    CHECK(c->num_keys() == n0 + 2);
    CHECK(c->delete_key("d1"));
    CHECK_FALSE(c->delete_key("d1"));
    CHECK_FALSE(c->check({"d1"}));
    CHECK(c->num_keys() == n0 + 1);
  }

  {
    INFO("append");
    c->append("log", "ab");
    c->append("log", "\0c"s);
    CHECK(other->get("log", kLong) == "ab\0c"s);
  }

  {
    INFO("multi_set and multi_get");
    c->multi_set({"m1", "m2", "m3"}, {"one", "", "three"});
    CHECK(other->multi_get({"m3", "m1", "m2"}, kLong) == std::vector<std::string>{"three", "one", ""});
    CHECK_THROWS_AS(other->multi_get({"m1", "never-m"}, kShort), rdzv::TimeoutError);
    CHECK(other->multi_get({"from_python", "m1"}, kLong) == std::vector<std::string>{"hello", "one"});
  }

  {
    INFO("queues");
    CHECK(c->queue_len("q") == 0);
    CHECK_FALSE(c->try_queue_pop("q").has_value());
    c->queue_push("q", "first");
    c->queue_push("q", "second");
    CHECK(other->queue_len("q") == 2);
    CHECK(other->try_queue_pop("q") == std::optional<std::string>("first"));
    CHECK(other->queue_pop("q", kLong) == "second");
    CHECK(c->queue_len("q") == 0);

    auto popped = std::async(std::launch::async, [&] { return c->queue_pop("q", kLong); });
    REQUIRE(still_blocked(popped));
    other->queue_push("q", "woken");
    REQUIRE(finishes(popped));
    CHECK(popped.get() == "woken");

    CHECK_THROWS_AS(c->queue_pop("q", kShort), rdzv::TimeoutError);
    CHECK(c->add("after-pop-timeout", 1) == 1);
  }

  {
    INFO("list_keys");
    c->set("listed", "1");
    auto ns = torch.client("/ns/");
    ns->set("inner", "2");
    auto keys = c->list_keys();
    std::sort(keys.begin(), keys.end());
    CHECK(std::binary_search(keys.begin(), keys.end(), "from_python"));
    CHECK(std::binary_search(keys.begin(), keys.end(), "listed"));
    CHECK(std::binary_search(keys.begin(), keys.end(), "ns/inner"));
    CHECK(ns->list_keys() == std::vector<std::string>{"inner"});
  }

  {
    INFO("barrier");
    c->barrier("solo", 1, kLong);
    CHECK_THROWS_AS(c->barrier("pair", 2, kShort), rdzv::TimeoutError);
    CHECK(c->add("after-barrier-timeout", 1) == 1);
    // The timed-out arrival still counts, as documented: one more completes the pair.
    other->barrier("pair", 2, kLong);
  }

  {
    INFO("ping");
    for (int i = 0; i < 3; ++i) CHECK(c->ping() < 5s);
  }

  // Every block leaves both connections usable.
  c->set("last", "ok");
  CHECK(other->get("last", kLong) == "ok");
  c.reset();
  other.reset();
  torch.stop();
}
