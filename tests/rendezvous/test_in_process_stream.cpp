// TcpStoreClient in process (TcpStoreClientOptions::in_process, rendezvous/in_process_stream.hpp)
// beyond the Store contract (test_store_contract.cpp runs that suite on it too): requests served
// on the caller's thread until the loop runs, the loop started by a wait that needs it or by the
// first TCP connection (start_when_dialled), the job
// secret checked as for TCP, a client that outlives its server, interrupt(), and the local
// address a TCP connection would have had.
//
// Checks that something has NOT happened yet use future::wait_for with a short bound: correct
// behaviour never completes there, so they cannot flake in the passing direction.
#include <catch2/catch.hpp>

#include <boost/asio/io_context.hpp>

#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ddplaunch/rendezvous/error.hpp"
#include "ddplaunch/rendezvous/tcp_store_client.hpp"
#include "ddplaunch/rendezvous/tcp_store_server.hpp"
#include "tests/rendezvous/blocking_checks.hpp"

namespace {

namespace rdzv = ddp::rendezvous;
using namespace ddp::testing;  // kLong, still_blocked(), finishes()
using namespace std::chrono_literals;

rdzv::TcpStoreServerOptions server_options() {
  rdzv::TcpStoreServerOptions o;
  o.host = "127.0.0.1";
  return o;
}

rdzv::StoreAuth secret_auth(const std::string& secret) {
  rdzv::StoreAuth auth;
  auth.protected_prefix = "/ddplaunch/";
  auth.prove = [secret](std::string_view challenge) { return secret + ":" + std::string(challenge); };
  return auth;
}

rdzv::TcpStoreClientOptions in_process(rdzv::TcpStoreServer& server, const std::string& secret = "") {
  rdzv::TcpStoreClientOptions o;
  o.port = server.port();
  o.timeout = kLong;
  o.in_process = &server;
  if (!secret.empty()) o.auth.prove = secret_auth(secret).prove;
  return o;
}

rdzv::TcpStoreClientOptions over_tcp(rdzv::TcpStoreServer& server) {
  rdzv::TcpStoreClientOptions o;
  o.port = server.port();
  o.timeout = kLong;
  o.connect_timeout = kLong;
  return o;
}

}  // namespace

TEST_CASE("in process: requests that wait for no one are served on the caller's thread, without the loop",
          "[in_process]") {
  rdzv::TcpStoreServer server(server_options());
  rdzv::TcpStoreClient client(in_process(server));
  client.set("k", "v");
  CHECK(client.get("k", kLong) == "v");
  CHECK(client.add("n", 3) == 3);
  CHECK(client.compare_set("c", "", "first") == "first");
  CHECK(client.check({"k", "n", "c"}));
  client.wait({"k"}, kLong);  // present: answered at once
  CHECK(client.delete_key("c"));
  CHECK(client.num_keys() == 2);
  CHECK_FALSE(server.serving());
  // The loop starts when asked; what was stored before is there for TCP clients.
  server.ensure_started();
  CHECK(server.serving());
  rdzv::TcpStoreClient tcp(over_tcp(server));
  CHECK(tcp.get("k", kLong) == "v");
}

TEST_CASE("in process: a wait that needs the loop starts it, and a TCP client's set wakes it", "[in_process]") {
  rdzv::TcpStoreServer server(server_options());
  rdzv::TcpStoreClient client(in_process(server));
  auto waiting = std::async(std::launch::async, [&] { return client.get("later", kLong); });
  REQUIRE(still_blocked(waiting));
  CHECK(server.serving());
  rdzv::TcpStoreClient tcp(over_tcp(server));
  tcp.set("later", "from tcp");
  REQUIRE(finishes(waiting));
  CHECK(waiting.get() == "from tcp");
  // And the other way round, now that the loop runs: the in-process set wakes the TCP waiter.
  auto tcp_waiting = std::async(std::launch::async, [&] { tcp.wait({"back"}, kLong); });
  REQUIRE(still_blocked(tcp_waiting));
  client.set("back", "x");
  CHECK(finishes(tcp_waiting));
}

TEST_CASE("in process: a wait that times out withdraws and the client stays usable", "[in_process]") {
  rdzv::TcpStoreServer server(server_options());
  rdzv::TcpStoreClient client(in_process(server));
  CHECK_THROWS_AS(client.wait({"never"}, 100ms), rdzv::TimeoutError);
  client.set("after", "ok");
  CHECK(client.get("after", kLong) == "ok");
}

TEST_CASE("in process: several threads before the loop runs are served one at a time", "[in_process]") {
  rdzv::TcpStoreServer server(server_options());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      rdzv::TcpStoreClient client(in_process(server));
      for (int i = 0; i < 500; ++i) client.add("count", 1);
    });
  }
  for (auto& t : threads) t.join();
  rdzv::TcpStoreClient client(in_process(server));
  CHECK(client.add("count", 0) == 2000);
  CHECK_FALSE(server.serving());
}

TEST_CASE("in process: the job secret is proven as over TCP", "[in_process]") {
  rdzv::TcpStoreServerOptions o = server_options();
  o.auth = secret_auth("s3cret");
  rdzv::TcpStoreServer server(o);
  rdzv::TcpStoreClient proven(in_process(server, "s3cret"));
  proven.set("ddplaunch/job", "mine");
  CHECK(proven.get("ddplaunch/job", kLong) == "mine");
  CHECK_THROWS_AS(rdzv::TcpStoreClient(in_process(server, "wrong")), rdzv::AuthError);
  // Without a secret the handshake passes (the store answers it as a plain store), but the first
  // protected key closes the connection for good.
  rdzv::TcpStoreClient stranger(in_process(server));
  stranger.set("open", "anyone");
  CHECK_THROWS_AS(stranger.get("ddplaunch/job", kLong), rdzv::ConnectionError);
  CHECK_THROWS_AS(stranger.get("open", kLong), rdzv::ConnectionError);
  CHECK(proven.get("open", kLong) == "anyone");
}

TEST_CASE("in process: a client that outlives its server fails with ConnectionError, a blocked wait at once",
          "[in_process]") {
  auto server = std::make_unique<rdzv::TcpStoreServer>(server_options());
  rdzv::TcpStoreClient idle(in_process(*server));
  rdzv::TcpStoreClient blocked(in_process(*server));
  auto waiting = std::async(std::launch::async, [&] { blocked.wait({"never"}, kLong); });
  REQUIRE(still_blocked(waiting));
  server.reset();
  REQUIRE(finishes(waiting, 5s));
  CHECK_THROWS_AS(waiting.get(), rdzv::ConnectionError);
  CHECK_THROWS_AS(idle.set("k", "v"), rdzv::ConnectionError);
}

TEST_CASE("in process: interrupt() ends a blocked wait with ConnectionError", "[in_process]") {
  rdzv::TcpStoreServer server(server_options());
  rdzv::TcpStoreClient client(in_process(server));
  auto waiting = std::async(std::launch::async, [&] { client.wait({"never"}, kLong); });
  REQUIRE(still_blocked(waiting));
  client.interrupt();
  REQUIRE(finishes(waiting, 5s));
  CHECK_THROWS_AS(waiting.get(), rdzv::ConnectionError);
}

TEST_CASE("in process: the local address is the one a TCP connection to the same address has", "[in_process]") {
  rdzv::TcpStoreServer server(server_options());
  server.start();
  rdzv::TcpStoreClient tcp(over_tcp(server));
  rdzv::TcpStoreClient local(in_process(server));
  CHECK(local.local_address() == tcp.local_address());
  CHECK(local.local_address() == "127.0.0.1");
}

TEST_CASE("in process: start_when_dialled starts the loop at the first TCP connection, not before", "[in_process]") {
  boost::asio::io_context watcher;  // declared first: it outlives the server, as the agent's loop does
  rdzv::TcpStoreServer server(server_options());
  server.start_when_dialled(watcher);
  rdzv::TcpStoreClient local(in_process(server));
  local.set("k", "v");
  watcher.poll();
  CHECK_FALSE(server.serving());
  // A TCP client's handshake is answered once the watcher has seen it dial and started the loop.
  auto tcp = std::async(std::launch::async, [&] { return std::make_unique<rdzv::TcpStoreClient>(over_tcp(server)); });
  const auto deadline = std::chrono::steady_clock::now() + kLong;
  while (!server.serving() && std::chrono::steady_clock::now() < deadline) watcher.run_one_for(100ms);
  CHECK(server.serving());
  REQUIRE(finishes(tcp));
  CHECK(tcp.get()->get("k", kLong) == "v");
}
