// End-to-end runs of the real build/bin/ddplaunch-store: the "listening on" line, a client
// talking to it, SIGTERM/SIGINT ending it with exit 0 (and failing a blocked client with
// ConnectionError), a taken port, bad flags (exit 2), and running out of descriptors. Every child is bounded in time
// and killed and reaped by ChildProcess's destructor whatever happens.
#include "common/exit_codes.hpp"

#include <catch2/catch.hpp>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "ddplaunch/rendezvous/error.hpp"
#include "ddplaunch/rendezvous/tcp_store_client.hpp"
#include "tests/support/child_process.hpp"

namespace {

namespace rdzv = ddp::rendezvous;
using ddp::testing::ChildExit;
using ddp::testing::ChildProcess;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

const std::string kStore = std::string(DDP_BIN_DIR) + "/ddplaunch-store";
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
constexpr bool kSanitized = __has_feature(address_sanitizer);
#else
constexpr bool kSanitized = false;
#endif
constexpr std::chrono::milliseconds kStartup = 10s;
constexpr std::chrono::milliseconds kExit = 5s;

std::vector<std::string> store_argv(std::vector<std::string> args) {
  args.insert(args.begin(), kStore);
  return args;
}

// A running ddplaunch-store and the port it announced.
struct RunningStore {
  ChildProcess child;
  std::uint16_t port = 0;
  std::string listening_line;

  explicit RunningStore(std::vector<std::string> args = {"--port", "0"}) : child(store_argv(std::move(args))) {
    const auto line = child.read_stdout_line(kStartup);
    INFO("stderr: " << child.stderr_text());
    REQUIRE(line.has_value());
    listening_line = *line;
    static const std::regex kListening("ddplaunch-store: listening on (.+):([0-9]+)");
    std::smatch m;
    REQUIRE(std::regex_match(listening_line, m, kListening));
    port = static_cast<std::uint16_t>(std::stoi(m[2].str()));
    REQUIRE(port != 0);
  }
};

rdzv::TcpStoreClientOptions client_options(std::uint16_t port) {
  rdzv::TcpStoreClientOptions o;
  o.host = "127.0.0.1";
  o.port = port;
  o.connect_timeout = 10s;
  o.timeout = 10s;
  return o;
}

// Waits (bounded) for a child that must end by itself and returns how it ended.
ChildExit run_to_exit(ChildProcess& child) {
  const auto exit = child.wait_for(kExit);
  INFO("stderr: " << child.stderr_text());
  REQUIRE(exit.has_value());
  return *exit;
}

}  // namespace

TEST_CASE("ddplaunch-store announces its port and serves clients", "[cli]") {
  RunningStore store;
  CHECK_THAT(store.listening_line, Catch::StartsWith("ddplaunch-store: listening on [::]:"));

  rdzv::TcpStoreClient a(client_options(store.port));
  rdzv::TcpStoreClient b(client_options(store.port));
  a.set("hello", std::string("wor\0ld", 6));
  CHECK(b.get("hello", 5s) == std::string("wor\0ld", 6));
  CHECK(a.add("n", 4) == 4);
  CHECK(b.add("n", 1) == 5);
  CHECK(a.num_keys() == 2);
  b.ping();
}

TEST_CASE("ddplaunch-store exits 0 promptly on SIGTERM, failing a blocked client", "[cli]") {
  RunningStore store;
  rdzv::TcpStoreClient waiter(client_options(store.port));
  auto waited = std::async(std::launch::async, [&] { waiter.wait({"never"}, 30s); });
  REQUIRE(waited.wait_for(100ms) == std::future_status::timeout);

  const auto start = Clock::now();
  store.child.send_signal(SIGTERM);
  const ChildExit exit = run_to_exit(store.child);
  CHECK(Clock::now() - start < 3s);
  INFO(describe(exit) << "; stderr: " << store.child.stderr_text());
  CHECK(exit.exited);
  CHECK(exit.code == ddp::kExitOk);
  CHECK_THAT(store.child.stderr_text(), Catch::Contains("SIGTERM"));

  REQUIRE(waited.wait_for(3s) == std::future_status::ready);
  CHECK_THROWS_AS(waited.get(), rdzv::ConnectionError);
  CHECK_THROWS_AS(waiter.add("n", 1), rdzv::ConnectionError);
}

TEST_CASE("ddplaunch-store exits 0 on SIGINT", "[cli]") {
  RunningStore store({"--port", "0", "--host", "127.0.0.1"});
  CHECK(store.listening_line == "ddplaunch-store: listening on 127.0.0.1:" + std::to_string(store.port));
  rdzv::TcpStoreClient c(client_options(store.port));
  c.set("k", "v");

  const auto start = Clock::now();
  store.child.send_signal(SIGINT);
  const ChildExit exit = run_to_exit(store.child);
  CHECK(Clock::now() - start < 3s);
  INFO(describe(exit) << "; stderr: " << store.child.stderr_text());
  CHECK(exit.exited);
  CHECK(exit.code == ddp::kExitOk);
  CHECK_THAT(store.child.stderr_text(), Catch::Contains("SIGINT"));
}

TEST_CASE("a second ddplaunch-store on the same port exits 2 saying it is in use", "[cli]") {
  RunningStore first;
  ChildProcess second(store_argv({"--port", std::to_string(first.port)}));
  const ChildExit exit = run_to_exit(second);
  INFO(describe(exit) << "; stderr: " << second.stderr_text());
  CHECK(exit.exited);
  CHECK(exit.code == ddp::kExitUsage);
  CHECK_THAT(second.stderr_text(), Catch::Contains("already in use"));
  CHECK_THAT(second.stderr_text(), Catch::Contains(std::to_string(first.port)));
  CHECK(second.stdout_text().empty());

  // The first one is unaffected.
  rdzv::TcpStoreClient c(client_options(first.port));
  c.set("still", "serving");
  CHECK(c.get("still", 5s) == "serving");
}

TEST_CASE("ddplaunch-store rejects bad command lines with exit 2", "[cli]") {
  auto args = GENERATE(as<std::vector<std::string>>{}, std::vector<std::string>{"--port", "70000"},
                       std::vector<std::string>{"--port", "-1"}, std::vector<std::string>{"--port", "http"},
                       std::vector<std::string>{"--no-such-flag"}, std::vector<std::string>{"--backlog", "-5"},
                       std::vector<std::string>{"extra-positional"});
  std::string joined;
  for (const auto& a : args) joined += a + " ";
  INFO("args: " << joined);
  ChildProcess child(store_argv(args));
  const ChildExit exit = run_to_exit(child);
  INFO(describe(exit) << "; stderr: " << child.stderr_text());
  CHECK(exit.exited);
  CHECK(exit.code == ddp::kExitUsage);
  CHECK_THAT(child.stderr_text(), Catch::StartsWith("ddplaunch-store: "));
  CHECK(child.stdout_text().find("listening") == std::string::npos);
}

TEST_CASE("ddplaunch-store --help exits 0 and describes the flags", "[cli]") {
  ChildProcess child(store_argv({"--help"}));
  const ChildExit exit = run_to_exit(child);
  INFO(describe(exit) << "; stderr: " << child.stderr_text());
  CHECK(exit.exited);
  CHECK(exit.code == ddp::kExitOk);
  CHECK_THAT(child.stdout_text(), Catch::Contains("--port"));
}

TEST_CASE("ddplaunch-store out of descriptors pauses accepting, logs it once, then serves again", "[cli]") {
  // prlimit (util-linux) starts the store with room for a few dozen connections only.
  const std::string prlimit = "/usr/bin/prlimit";
  if (access(prlimit.c_str(), X_OK) != 0) {
    WARN("skipped: needs " + prlimit);
    return;
  }
  if (kSanitized) {
    // UBSan's vptr check probes memory through a pipe(); with no descriptor left it reports
    // "invalid vptr" for a valid object (seen on Asio's timer queue), so this cannot run there.
    WARN("skipped under sanitizers: their runtime needs free descriptors of its own");
    return;
  }
  ChildProcess child({prlimit, "--nofile=32", kStore, "--port", "0", "--host", "127.0.0.1"});
  const auto line = child.read_stdout_line(kStartup);
  INFO("stderr: " << child.stderr_text());
  REQUIRE(line.has_value());
  const auto port = static_cast<std::uint16_t>(std::stoi(line->substr(line->rfind(':') + 1)));

  // More connections than descriptors: the kernel completes them all, the store cannot accept
  // them all. Before the fix accept() failed in a tight loop, one log line per failure.
  boost::asio::io_context io;
  const boost::asio::ip::tcp::endpoint endpoint(boost::asio::ip::make_address("127.0.0.1"), port);
  std::vector<boost::asio::ip::tcp::socket> crowd;
  for (int i = 0; i < 48; ++i) crowd.emplace_back(io).connect(endpoint);
  std::this_thread::sleep_for(300ms);  // let the store run into the limit (no event to wait for)
  crowd.clear();

  rdzv::TcpStoreClient c(client_options(port));
  c.set("k", "v");
  CHECK(c.get("k", 5s) == "v");

  child.send_signal(SIGTERM);
  const ChildExit exit = run_to_exit(child);
  CHECK(exit.exited);
  const std::string err = child.stderr_text();
  std::size_t failures = 0;
  for (auto at = err.find("accept failed"); at != std::string::npos; at = err.find("accept failed", at + 1)) {
    ++failures;
  }
  INFO("stderr: " << err.substr(0, 2000));
  CHECK(failures >= 1);
  CHECK(failures <= 5);
  CHECK_THAT(err, Catch::Contains("Too many open files"));
  CHECK_THAT(err, Catch::Contains("accepting connections again"));
}
