// The CPU communicator across real processes: comm_worker ranks spawned against a store server in
// this process; every rank agrees on the results, and a rank killed with SIGKILL mid-allreduce
// makes the others exit with a message naming it, well within the collective timeout.
#include "ddplaunch/cpu_communicator.hpp"

#include <signal.h>

#include <chrono>
#include <memory>
#include <vector>

#include <catch2/catch.hpp>

#include "rendezvous/tcp_store_server.hpp"
#include "tests/support/child_process.hpp"

using Catch::Matchers::Contains;
using ddp::testing::ChildProcess;
using namespace std::chrono_literals;

namespace {

std::unique_ptr<ddp::rendezvous::TcpStoreServer> start_server() {
  ddp::rendezvous::TcpStoreServerOptions o;
  o.host = "127.0.0.1";
  o.log = [](std::string_view) {};
  auto server = std::make_unique<ddp::rendezvous::TcpStoreServer>(o);
  server->start();
  return server;
}

std::vector<std::unique_ptr<ChildProcess>> spawn(int port, int world, const std::string& mode) {
  std::vector<std::unique_ptr<ChildProcess>> children;
  for (int r = 0; r < world; ++r)
    children.push_back(std::make_unique<ChildProcess>(std::vector<std::string>{
        DDP_COMM_WORKER, std::to_string(port), std::to_string(r), std::to_string(world), mode}));
  return children;
}

}  // namespace

TEST_CASE("processes: collectives agree") {
  const int world = GENERATE(2, 4);
  auto server = start_server();
  auto children = spawn(server->port(), world, "check");
  for (int r = 0; r < world; ++r) {
    auto exit = children[r]->wait_for(90s);
    REQUIRE(exit);
    INFO("rank " << r << " stdout: " << children[r]->stdout_text() << " stderr: " << children[r]->stderr_text());
    CHECK(exit->exited);
    CHECK(exit->code == 0);
    CHECK_THAT(children[r]->stdout_text(), Contains("ok rank " + std::to_string(r)));
  }
}

TEST_CASE("processes: a rank killed mid-allreduce is named by every other rank") {
  const int world = 3;
  auto server = start_server();
  const auto start = std::chrono::steady_clock::now();
  auto children = spawn(server->port(), world, "crash");
  for (int r = 0; r < world; ++r) {
    auto exit = children[r]->wait_for(90s);
    REQUIRE(exit);
    INFO("rank " << r << " stdout: " << children[r]->stdout_text() << " stderr: " << children[r]->stderr_text());
    if (r == world - 1) {
      CHECK(exit->signal == SIGKILL);
      continue;
    }
    CHECK(exit->code == 1);
    CHECK_THAT(children[r]->stdout_text(), Contains("rank 2"));
  }
  // The collective timeout is 60 s; detection must come from the closed connection, not it.
  CHECK(std::chrono::steady_clock::now() - start < 30s);
}
