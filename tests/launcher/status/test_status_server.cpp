// The status server on a temporary unix socket and a free TCP port: GET /status, 404 and 405,
// /healthz against a running and a stuck agent loop, a client that sends half a request or
// garbage (it neither blocks the others nor outlives its deadline), too many connections at
// once, nothing left listening after the server goes, and a server whose thread starts at the
// first connection (start_on_dial).
#include "launcher/status/status_server.hpp"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include "ddplaunch/common/error.hpp"
#include "launcher/watch/probe/worker_server.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;
using namespace ddp::launcher;
using namespace std::chrono_literals;
using tcp = asio::ip::tcp;
using Local = asio::local::stream_protocol;

using ddp::testing::TempDir;

// An agent loop on a thread of its own, as the real agent's.
struct AgentLoop {
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work = asio::make_work_guard(io);
  std::thread thread{[this] { io.run(); }};
  ~AgentLoop() {
    work.reset();
    io.stop();
    thread.join();
  }
};

// Sends `request` over TCP to 127.0.0.1:`port` and reads until the server closes.
std::string tcp_exchange(int port, const std::string& request) {
  asio::io_context io;
  tcp::socket s(io);
  s.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), static_cast<std::uint16_t>(port)));
  std::string answer;
  boost::system::error_code ec;
  asio::write(s, asio::buffer(request), ec);                 // a refused connection may be closed already
  if (!ec) asio::read(s, asio::dynamic_buffer(answer), ec);  // to end of file
  return answer;
}

StatusServerOptions options_in(const TempDir& dir) {
  StatusServerOptions o;
  o.socket_path = (dir.path / "status.sock").string();
  o.tcp_port = 0;
  o.tcp_host = "127.0.0.1";
  return o;
}

}  // namespace

TEST_CASE("GET /status answers the JSON on the socket and on TCP, other targets are 404, other methods 405") {
  TempDir dir;
  StatusServer server(options_in(dir), [] { return std::string("{\"ok\":true}\n"); });
  REQUIRE(server.tcp_port() > 0);
  const WorkerServerReply r = ask_unix_http((dir.path / "status.sock").string(), false, "/status", "status", 2s);
  REQUIRE(r.ok);
  CHECK(r.body == "{\"ok\":true}\n");
  const std::string answer = tcp_exchange(server.tcp_port(), "GET /status HTTP/1.1\r\nHost: x\r\n\r\n");
  CHECK(answer.rfind("HTTP/1.1 200", 0) == 0);
  CHECK(answer.find("application/json") != std::string::npos);
  CHECK(answer.find("{\"ok\":true}") != std::string::npos);
  CHECK(tcp_exchange(server.tcp_port(), "GET /nope HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 404", 0) == 0);
  CHECK(
      tcp_exchange(server.tcp_port(), "POST /status HTTP/1.1\r\nContent-Length: 0\r\n\r\n").rfind("HTTP/1.1 405", 0) ==
      0);
  CHECK(tcp_exchange(server.tcp_port(), "garbage\r\n\r\n").rfind("HTTP/1.1 400", 0) == 0);
  CHECK(tcp_exchange(server.tcp_port(), "GET /status HTTP/1.1\r\nX: " + std::string(20000, 'a') + "\r\n\r\n")
            .rfind("HTTP/1.1 400", 0) == 0);
}

TEST_CASE("/healthz: 200 while the agent's loop runs, 503 when it does not answer in time") {
  TempDir dir;
  SECTION("running") {
    AgentLoop agent;
    StatusServerOptions o = options_in(dir);
    o.post_to_agent = [&agent](std::function<void()> f) { asio::post(agent.io, std::move(f)); };
    StatusServer server(o, [] { return std::string("{}"); });
    CHECK(tcp_exchange(server.tcp_port(), "GET /healthz HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 200", 0) == 0);
  }
  SECTION("stuck") {
    asio::io_context never_run;  // a loop that never runs: the probe stays queued
    StatusServerOptions o = options_in(dir);
    o.health_timeout = 200ms;
    o.post_to_agent = [&never_run](std::function<void()> f) { asio::post(never_run, std::move(f)); };
    StatusServer server(o, [] { return std::string("{}"); });
    const auto start = std::chrono::steady_clock::now();
    const std::string answer = tcp_exchange(server.tcp_port(), "GET /healthz HTTP/1.1\r\n\r\n");
    CHECK(answer.rfind("HTTP/1.1 503", 0) == 0);
    CHECK(answer.find("did not answer within 200 ms") != std::string::npos);
    CHECK(std::chrono::steady_clock::now() - start < 2s);
  }
}

TEST_CASE("a slow client neither blocks the others nor outlives its deadline") {
  TempDir dir;
  StatusServerOptions o = options_in(dir);
  o.request_timeout = 500ms;
  StatusServer server(o, [] { return std::string("{}"); });
  asio::io_context io;
  tcp::socket slow(io);
  slow.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), static_cast<std::uint16_t>(server.tcp_port())));
  asio::write(slow, asio::buffer(std::string("GET /status HTTP/1.1\r\nHost: x\r\n")));  // never finished
  const auto start = std::chrono::steady_clock::now();
  CHECK(tcp_exchange(server.tcp_port(), "GET /status HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 200", 0) == 0);
  CHECK(std::chrono::steady_clock::now() - start < 400ms);
  // The slow one is closed at its deadline, with no answer.
  std::string rest;
  boost::system::error_code ec;
  asio::read(slow, asio::dynamic_buffer(rest), ec);
  CHECK(ec == asio::error::eof);
  CHECK(rest.empty());
  CHECK(std::chrono::steady_clock::now() - start < 3s);
}

TEST_CASE("connections beyond the limit are closed at once, the server serves again when they go") {
  TempDir dir;
  StatusServerOptions o = options_in(dir);
  o.max_connections = 2;
  StatusServer server(o, [] { return std::string("{}"); });
  asio::io_context io;
  std::vector<tcp::socket> held;
  for (int i = 0; i < 2; ++i) {
    held.emplace_back(io);
    held.back().connect(
        tcp::endpoint(asio::ip::make_address("127.0.0.1"), static_cast<std::uint16_t>(server.tcp_port())));
  }
  // Each idle connection is accepted before the next; the third is closed unanswered.
  bool refused = false;
  for (int attempt = 0; attempt < 50 && !refused; ++attempt) {
    refused = tcp_exchange(server.tcp_port(), "GET /status HTTP/1.1\r\n\r\n").empty();
    if (!refused) std::this_thread::sleep_for(10ms);  // the held ones are still being accepted
  }
  CHECK(refused);
  for (tcp::socket& s : held) s.close();
  std::string answer;
  for (int attempt = 0; attempt < 50 && answer.empty(); ++attempt) {
    answer = tcp_exchange(server.tcp_port(), "GET /status HTTP/1.1\r\n\r\n");
    if (answer.empty()) std::this_thread::sleep_for(10ms);  // no event says the server saw them close
  }
  CHECK(answer.rfind("HTTP/1.1 200", 0) == 0);
}

TEST_CASE("a path longer than sun_path works, nothing listens once the server is gone") {
  TempDir dir;
  const fs::path deep = dir.path / std::string(60, 'd') / std::string(60, 'e');
  fs::create_directories(deep);
  StatusServerOptions o;
  o.socket_path = (deep / "status.sock").string();
  o.tcp_port = 0;
  o.tcp_host = "127.0.0.1";
  int port = 0;
  {
    StatusServer server(o, [] { return std::string("{}"); });
    port = server.tcp_port();
    CHECK(ask_unix_http(o.socket_path, false, "/status", "status", 2s).ok);
  }
  CHECK_FALSE(fs::exists(o.socket_path));
  asio::io_context io;
  tcp::socket s(io);
  boost::system::error_code ec;
  s.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), static_cast<std::uint16_t>(port)), ec);
  CHECK(ec == asio::error::connection_refused);
}

TEST_CASE("a TCP port in use is a usage error naming it") {
  TempDir dir;
  StatusServer first(options_in(dir), [] { return std::string("{}"); });
  StatusServerOptions o;
  o.tcp_port = first.tcp_port();
  o.tcp_host = "127.0.0.1";
  try {
    StatusServer second(o, [] { return std::string("{}"); });
    FAIL("bound a port in use");
  } catch (const ddp::UsageError& e) {
    CHECK(std::string(e.what()).find(std::to_string(first.tcp_port())) != std::string::npos);
  }
}

TEST_CASE("with start_on_dial, the server's thread starts at the first connection, on the socket or on TCP") {
  TempDir dir;
  for (const bool over_tcp : {false, true}) {
    INFO((over_tcp ? "TCP" : "unix socket"));
    asio::io_context watcher;  // the agent's loop in the launcher
    StatusServerOptions o = options_in(dir);
    o.start_on_dial = &watcher;
    StatusServer server(o, [] { return std::string("{\"lazy\":true}\n"); });
    std::thread loop([&] { watcher.run(); });
    std::string answer;
    if (over_tcp) {
      answer = tcp_exchange(server.tcp_port(), "GET /status HTTP/1.1\r\n\r\n");
    } else {
      const WorkerServerReply r = ask_unix_http((dir.path / "status.sock").string(), false, "/status", "status", 5s);
      CHECK(r.ok);
      answer = r.body;
    }
    watcher.stop();  // the server goes while its watcher does not run, as in the launcher
    loop.join();
    CHECK(answer.find("{\"lazy\":true}") != std::string::npos);
  }
}
