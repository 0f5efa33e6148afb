// The status server on a temporary unix socket and a free TCP port: GET /status, 404 and 405,
// /healthz against a running and a stuck agent loop, a client that sends half a request or
// garbage (it neither blocks the others nor outlives its deadline, nor does a slowloris), too
// many connections at once (the oldest silent one makes room; only when all are answered is the
// new one closed), nothing left listening after the server goes, and a server whose thread starts at the
// first connection (start_on_dial).
#include "launcher/status/status_server.hpp"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <future>
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

// A connection to 127.0.0.1:`port` from `source` (any loopback address).
tcp::socket connect_to(asio::io_context& io, int port, const char* source = "127.0.0.1") {
  tcp::socket s(io, tcp::endpoint(asio::ip::make_address(source), 0));
  s.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), static_cast<std::uint16_t>(port)));
  return s;
}

// Whether the server still holds `s` open (nothing to read, no end of file).
bool still_open(tcp::socket& s) {
  s.non_blocking(true);
  char byte = 0;
  boost::system::error_code ec;
  s.read_some(asio::buffer(&byte, 1), ec);
  s.non_blocking(false);
  return ec == asio::error::would_block;
}

// Reads until the server closes `s` (an error: reset), returning what came.
std::string read_to_close(tcp::socket& s) {
  std::string rest;
  boost::system::error_code ec;
  asio::read(s, asio::dynamic_buffer(rest), ec);
  return rest;
}

TEST_CASE("a slow client neither blocks the others nor outlives its header deadline, even sending bytes") {
  TempDir dir;
  StatusServerOptions o = options_in(dir);
  o.header_timeout = 500ms;
  StatusServer server(o, [] { return std::string("{}"); });
  asio::io_context io;
  tcp::socket slow = connect_to(io, server.tcp_port());
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

  // A slowloris: a byte every 100 ms does not move the deadline.
  tcp::socket loris = connect_to(io, server.tcp_port());
  const std::string request = "GET /status HTTP/1.1\r\nX-Slow: " + std::string(100, 'a') + "\r\n\r\n";
  const auto began = std::chrono::steady_clock::now();
  std::size_t sent = 0;
  for (; sent < request.size(); ++sent) {
    asio::write(loris, asio::buffer(request.data() + sent, 1), ec);
    if (ec) break;                       // closed by the server
    std::this_thread::sleep_for(100ms);  // the client's pace is what is tested
  }
  const auto held = std::chrono::steady_clock::now() - began;
  CHECK(sent < request.size());
  CHECK(held < 2s);  // 500 ms, and a write or two until the reset shows
  CHECK(read_to_close(loris).empty());
}

TEST_CASE("at the cap a new connection takes the place of the oldest silent one of the largest crowd") {
  TempDir dir;
  StatusServerOptions o = options_in(dir);
  o.max_connections = 4;
  StatusServer server(o, [] { return std::string("{}"); });
  asio::io_context io;
  tcp::socket alone = connect_to(io, server.tcp_port(), "127.0.0.2");  // the oldest, but alone from its address
  std::vector<tcp::socket> silent;
  for (int i = 0; i < 10; ++i) silent.push_back(connect_to(io, server.tcp_port()));
  // Whatever the silent ones do, every request is answered at once.
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 5; ++i) {
    CHECK(tcp_exchange(server.tcp_port(), "GET /status HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 200", 0) == 0);
  }
  CHECK(std::chrono::steady_clock::now() - start < 1s);  // the 2 s header deadline freed none of them
  // The crowd's oldest went first, unanswered; its newest are still open (2, with the lone one, of
  // the cap of 4 after the last answer), and so is the lone one from another address.
  CHECK(read_to_close(silent.front()).empty());
  for (std::size_t i = silent.size() - 2; i < silent.size(); ++i) CHECK(still_open(silent[i]));
  CHECK(still_open(alone));
}

TEST_CASE("at the cap with every connection being answered, a new one is closed at once") {
  TempDir dir;
  asio::io_context never_run;  // /healthz waits for this loop until health_timeout
  StatusServerOptions o = options_in(dir);
  o.max_connections = 1;
  o.health_timeout = 1s;
  std::promise<void> probing;  // the server read the probe's request: it is being answered
  o.post_to_agent = [&](std::function<void()> f) {
    asio::post(never_run, std::move(f));
    probing.set_value();
  };
  StatusServer server(o, [] { return std::string("{}"); });
  asio::io_context io;
  tcp::socket waiting = connect_to(io, server.tcp_port());
  asio::write(waiting, asio::buffer(std::string("GET /healthz HTTP/1.1\r\n\r\n")));
  REQUIRE(probing.get_future().wait_for(5s) == std::future_status::ready);
  CHECK(tcp_exchange(server.tcp_port(), "GET /status HTTP/1.1\r\n\r\n").empty());
  CHECK(read_to_close(waiting).rfind("HTTP/1.1 503", 0) == 0);  // the one being answered was kept
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
