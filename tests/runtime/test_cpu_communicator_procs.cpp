// The CPU communicator across real processes: comm_worker ranks spawned against a store server in
// this process, with shared memory and over the TCP ring only; every rank agrees on the results,
// a rank killed with SIGKILL mid-allreduce makes the others exit with a PeerError naming it,
// well within the collective timeout, leaving no shared memory segment behind; and a rank
// stopped with SIGSTOP makes them time out naming it.
#include "ddplaunch/cpu_communicator.hpp"

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "ddplaunch/rendezvous/tcp_store_server.hpp"
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

std::vector<std::unique_ptr<ChildProcess>> spawn(int port, int world, const std::string& mode, int victim = -1) {
  std::vector<std::unique_ptr<ChildProcess>> children;
  for (int r = 0; r < world; ++r) {
    std::vector<std::string> args{DDP_COMM_WORKER, std::to_string(port), std::to_string(r), std::to_string(world),
                                  mode};
    if (victim >= 0) args.push_back(std::to_string(victim));
    children.push_back(std::make_unique<ChildProcess>(args));
  }
  return children;
}

// Entries of /dev/shm named like a segment created by process `pid`.
int segments_of(pid_t pid) {
  const std::string prefix = "ddplaunch-" + std::to_string(pid) + "-";
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm"))
    count += entry.path().filename().string().rfind(prefix, 0) == 0;
  return count;
}

}  // namespace

TEST_CASE("processes: collectives agree") {
  const int world = GENERATE(2, 4);
  const std::string mode = GENERATE("check", "check-tcp");
  auto server = start_server();
  auto children = spawn(server->port(), world, mode);
  for (int r = 0; r < world; ++r) {
    auto exit = children[r]->wait_for(90s);
    REQUIRE(exit);
    INFO("rank " << r << " stdout: " << children[r]->stdout_text() << " stderr: " << children[r]->stderr_text());
    CHECK(exit->exited);
    CHECK(exit->code == 0);
    CHECK_THAT(children[r]->stdout_text(),
               Contains("ok rank " + std::to_string(r) + (mode == "check" ? " shm=1" : " shm=0")));
  }
  CHECK(segments_of(children[0]->pid()) == 0);
}

TEST_CASE("processes: a rank killed mid-allreduce is named by every other rank") {
  const int world = 3;
  // Rank 2 on both paths; rank 0, which created the shared memory segment, on the shared path.
  const auto [mode, victim] = GENERATE(std::pair<std::string, int>{"crash", 2}, std::pair<std::string, int>{"crash", 0},
                                       std::pair<std::string, int>{"crash-tcp", 2});
  INFO(mode << ", victim rank " << victim);
  auto server = start_server();
  const auto start = std::chrono::steady_clock::now();
  auto children = spawn(server->port(), world, mode, victim);
  for (int r = 0; r < world; ++r) {
    auto exit = children[r]->wait_for(90s);
    REQUIRE(exit);
    INFO("rank " << r << " stdout: " << children[r]->stdout_text() << " stderr: " << children[r]->stderr_text());
    if (r == victim) {
      CHECK(exit->signal == SIGKILL);
      continue;
    }
    CHECK(exit->code == 1);
    CHECK_THAT(children[r]->stdout_text(), Contains("PeerError") && Contains("rank " + std::to_string(victim)));
  }
  // The collective timeout is 60 s; detection must come from the closed connection, not it.
  CHECK(std::chrono::steady_clock::now() - start < 30s);
  CHECK(segments_of(children[0]->pid()) == 0);
}

TEST_CASE("processes: a rank frozen mid-allreduce times out the others, naming it") {
  const int world = 3;
  const std::string mode = GENERATE("stall", "stall-tcp");
  auto server = start_server();
  const auto start = std::chrono::steady_clock::now();
  auto children = spawn(server->port(), world, mode, 2);
  for (int r = 0; r < world - 1; ++r) {
    auto exit = children[r]->wait_for(60s);
    REQUIRE(exit);
    INFO(mode << " rank " << r << " stdout: " << children[r]->stdout_text()
              << " stderr: " << children[r]->stderr_text());
    CHECK(exit->code == 1);
    // Rank 0 waits for rank 2 itself; rank 1 may time out first waiting for rank 0, which waits
    // for rank 2, so its message names whichever failure reached the store first.
    CHECK_THAT(children[r]->stdout_text(), Contains("timed out"));
    if (r == 0) CHECK_THAT(children[r]->stdout_text(), Contains("rank 2"));
  }
  // The collective timeout is 2 s.
  CHECK(std::chrono::steady_clock::now() - start < 20s);
  // Rank 2 is still stopped; its ChildProcess kills and reaps it.
}
