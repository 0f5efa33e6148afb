// spawn(): options and the copy's side in this process, then spawn_probe run as a real parent
// with real copies: ranks and the private store, a failing or throwing rank, SIGINT/SIGTERM to the
// parent, a rank that ignores SIGTERM, SIGKILL of the parent, bad options. Every run is bounded
// and checks that no copy is left (the probe says whether spawn() reaped them all; the pids
// the copies printed must be gone).
#include "ddplaunch/spawn.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "tests/support/child_process.hpp"

using Catch::Matchers::Contains;
using ddp::runtime::SpawnError;
using ddp::runtime::SpawnOptions;
using ddp::testing::ChildProcess;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

struct RankLine {
  int rank = -1, local_rank = -1, world = -1, port = -1, pid = -1;
};

std::optional<RankLine> parse_rank_line(const std::string& line) {
  RankLine r;
  if (std::sscanf(line.c_str(), "rank=%d local_rank=%d world=%d port=%d pid=%d", &r.rank, &r.local_rank, &r.world,
                  &r.port, &r.pid) != 5)
    return std::nullopt;
  return r;
}

std::vector<RankLine> rank_lines(const std::string& text) {
  std::vector<RankLine> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (auto r = parse_rank_line(line)) out.push_back(*r);
  return out;
}

// Reads the probe's stdout until `n` rank lines came; fewer when it ended first.
std::vector<RankLine> read_rank_lines(ChildProcess& p, int n) {
  std::vector<RankLine> out;
  while (static_cast<int>(out.size()) < n) {
    const auto line = p.read_stdout_line(60s);
    if (!line) break;
    if (auto r = parse_rank_line(*line)) out.push_back(*r);
  }
  return out;
}

// Whether `pid` has ended (or is gone), waiting for it up to `timeout` on a pidfd.
bool ended(int pid, std::chrono::milliseconds timeout) {
  const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) return errno == ESRCH;
  pollfd p{fd, POLLIN, 0};
  const int r = ::poll(&p, 1, static_cast<int>(timeout.count()));
  ::close(fd);
  return r > 0;
}

std::unique_ptr<ChildProcess> probe(std::vector<std::string> args) {
  args.insert(args.begin(), DDP_SPAWN_PROBE);
  return std::make_unique<ChildProcess>(std::move(args));
}

std::string output(const ChildProcess& p) {
  return "stdout: " + p.stdout_text() + "\nstderr: " + p.stderr_text();
}

// Sets (or unsets) one environment variable of this test process for a scope.
class EnvGuard {
 public:
  EnvGuard(std::string name, const char* value) : name_(std::move(name)) {
    if (const char* old = std::getenv(name_.c_str())) old_ = old;
    if (value)
      ::setenv(name_.c_str(), value, 1);
    else
      ::unsetenv(name_.c_str());
  }
  ~EnvGuard() {
    if (old_)
      ::setenv(name_.c_str(), old_->c_str(), 1);
    else
      ::unsetenv(name_.c_str());
  }

 private:
  std::string name_;
  std::optional<std::string> old_;
};

}  // namespace

TEST_CASE("spawn: options have torch-style setters and sane defaults") {
  const SpawnOptions d;
  CHECK(d.nprocs() == 1);
  CHECK(d.master_addr() == "127.0.0.1");
  CHECK(d.shutdown_grace() == 5s);
  CHECK(d.argv().empty());
  const char* argv[] = {"./train", "--nprocs", "4"};
  const SpawnOptions o = SpawnOptions(4).argv(3, argv).shutdown_grace(100ms);
  CHECK(o.nprocs() == 4);
  CHECK(o.argv() == std::vector<std::string>{"./train", "--nprocs", "4"});
  CHECK(o.shutdown_grace() == 100ms);
}

TEST_CASE("spawn: bad options throw before anything starts") {
  EnvGuard marker("DDPLAUNCH_SPAWNED", nullptr);
  bool called = false;
  const auto fn = [&](int) { called = true; };
  CHECK_THROWS_WITH(ddp::runtime::spawn(fn, SpawnOptions(0)), Contains("nprocs must be at least 1, got 0"));
  CHECK_THROWS_AS(ddp::runtime::spawn(fn, SpawnOptions(-3)), SpawnError);
  CHECK_THROWS_WITH(ddp::runtime::spawn(fn, SpawnOptions(2).shutdown_grace(-1ms)), Contains("got -1 ms"));
  CHECK_THROWS_WITH(ddp::runtime::spawn(fn, SpawnOptions(2).master_addr("")), Contains("master_addr is empty"));
  CHECK_FALSE(called);
}

TEST_CASE("spawn: in a copy, fn runs with LOCAL_RANK") {
  EnvGuard marker("DDPLAUNCH_SPAWNED", "1");
  EnvGuard local_rank("LOCAL_RANK", "2");
  CHECK(ddp::runtime::is_spawned_child());
  int seen = -1;
  CHECK(ddp::runtime::spawn([&](int r) { seen = r; }, SpawnOptions(3)) == 0);
  CHECK(seen == 2);
  // The message goes to stderr as "rank 2: boom"; the copy's exit code is 1.
  CHECK(ddp::runtime::spawn([](int) { throw std::runtime_error("boom"); }, SpawnOptions(3)) == 1);
  EnvGuard bad("LOCAL_RANK", "x");
  CHECK_THROWS_WITH(ddp::runtime::spawn([](int) {}, SpawnOptions(3)), Contains("LOCAL_RANK='x'"));
}

TEST_CASE("spawn: not a copy without the marker") {
  EnvGuard marker("DDPLAUNCH_SPAWNED", nullptr);
  CHECK_FALSE(ddp::runtime::is_spawned_child());
}

TEST_CASE("spawn: three copies get distinct ranks and meet in the private store") {
  EnvGuard omp("OMP_NUM_THREADS", nullptr);
  EnvGuard inherited("SPAWN_TEST_INHERITED", "yes");
  auto p = probe({"--nprocs", "3"});
  const auto exit = p->wait_for(120s);
  REQUIRE(exit);
  INFO(output(*p));
  CHECK(exit->exited);
  CHECK(exit->code == 0);
  const auto lines = rank_lines(p->stdout_text());
  REQUIRE(lines.size() == 3);
  std::set<int> ranks, pids, ports;
  for (const RankLine& l : lines) {
    ranks.insert(l.rank);
    pids.insert(l.pid);
    ports.insert(l.port);
    CHECK(l.local_rank == l.rank);
    CHECK(l.world == 3);
    CHECK(l.pid != p->pid());
    CHECK(ended(l.pid, 0ms));
  }
  CHECK(ranks == std::set<int>{0, 1, 2});
  CHECK(pids.size() == 3);
  REQUIRE(ports.size() == 1);
  CHECK(*ports.begin() > 0);
  for (int r = 0; r < 3; ++r) {
    const std::string rank = "rank=" + std::to_string(r);
    CHECK_THAT(p->stdout_text(), Contains(rank + " env GROUP_RANK=0 ROLE_RANK=" + std::to_string(r) +
                                          " ROLE_WORLD_SIZE=3 GROUP_WORLD_SIZE=1 OMP_NUM_THREADS=1 "
                                          "DDPLAUNCH_SPAWNED=1 SPAWN_TEST_INHERITED=yes"));
    CHECK_THAT(p->stdout_text(), Contains(rank + " done"));
  }
  CHECK_THAT(p->stdout_text(), Contains("parent: code=0 unreaped=none env=unchanged"));
}

TEST_CASE("spawn: a failing rank stops the others and its code is returned") {
  const auto start = Clock::now();
  auto p = probe({"--nprocs", "3", "--fail-rank", "1", "--fail-code", "3"});
  const auto exit = p->wait_for(60s);
  REQUIRE(exit);
  INFO(output(*p));
  // The others block in a 60 s store wait that rank 1 never completes: only teardown ends them.
  CHECK(Clock::now() - start < 30s);
  CHECK(exit->exited);
  CHECK(exit->code == 3);
  const auto lines = rank_lines(p->stdout_text());
  // Ranks 0 and 2 may be stopped before they printed their line; rank 1 printed before failing.
  int failed_pid = -1;
  for (const RankLine& l : lines) {
    if (l.rank == 1) failed_pid = l.pid;
    CHECK(ended(l.pid, 5s));
  }
  REQUIRE(failed_pid > 0);
  CHECK_THAT(p->stderr_text(), Contains("spawn: rank 1 (pid " + std::to_string(failed_pid) +
                                        ") exited with code 3; stopping the other 2 ranks"));
  CHECK_THAT(p->stdout_text(), !Contains(" done"));
  CHECK_THAT(p->stdout_text(), Contains("parent: code=3 unreaped=none"));
}

TEST_CASE("spawn: a throwing rank is reported with its message") {
  auto p = probe({"--nprocs", "2", "--throw-rank", "0"});
  const auto exit = p->wait_for(60s);
  REQUIRE(exit);
  INFO(output(*p));
  CHECK(exit->code == 1);
  CHECK_THAT(p->stderr_text(), Contains("rank 0: probe failure on purpose"));
  CHECK_THAT(p->stderr_text(), Contains("spawn: rank 0 (pid "));
  CHECK_THAT(p->stderr_text(), Contains(") exited with code 1;"));
  CHECK_THAT(p->stdout_text(), Contains("parent: code=1 unreaped=none"));
}

TEST_CASE("spawn: SIGINT/SIGTERM to the parent reach every copy") {
  const int signo = GENERATE(SIGTERM, SIGINT);
  const std::string name = signo == SIGTERM ? "SIGTERM" : "SIGINT";
  // Rank 1 hangs before joining the store, so ranks 0 and 2 wait on it: all three keep running.
  auto p = probe({"--nprocs", "3", "--hang-rank", "1"});
  const auto lines = read_rank_lines(*p, 3);
  REQUIRE(lines.size() == 3);
  const auto signalled = Clock::now();
  p->send_signal(signo);
  const auto exit = p->wait_for(30s);
  REQUIRE(exit);
  INFO(output(*p));
  CHECK(Clock::now() - signalled < 10s);
  CHECK(exit->exited);
  CHECK(exit->code == 128 + signo);
  for (const RankLine& l : lines) CHECK(ended(l.pid, 5s));
  CHECK_THAT(p->stderr_text(), Contains("spawn: received " + name + "; forwarding it to 3 ranks"));
  CHECK_THAT(p->stdout_text(), Contains("unreaped=none"));
}

TEST_CASE("spawn: a copy that ignores SIGTERM gets SIGKILL after the grace period") {
  auto p = probe({"--nprocs", "2", "--hang-rank", "1", "--ignore-sigterm", "--grace-ms", "500"});
  const auto lines = read_rank_lines(*p, 2);
  REQUIRE(lines.size() == 2);
  const auto signalled = Clock::now();
  p->send_signal(SIGTERM);
  const auto exit = p->wait_for(30s);
  REQUIRE(exit);
  INFO(output(*p));
  const auto elapsed = Clock::now() - signalled;
  CHECK(elapsed >= 500ms);
  CHECK(elapsed < 10s);
  CHECK(exit->code == 143);
  for (const RankLine& l : lines) CHECK(ended(l.pid, 5s));
  CHECK_THAT(p->stderr_text(), Contains("spawn: 1 rank still running 500 ms after the stop signal; sending SIGKILL"));
  CHECK_THAT(p->stdout_text(), Contains("unreaped=none"));
}

TEST_CASE("spawn: SIGKILL of the parent leaves no copy behind") {
  // Rank 0 sleeps forever, so only PR_SET_PDEATHSIG can end it.
  auto p = probe({"--nprocs", "2", "--hang-rank", "0"});
  const auto lines = read_rank_lines(*p, 2);
  REQUIRE(lines.size() == 2);
  p->send_signal(SIGKILL);
  const auto exit = p->wait_for(30s);
  REQUIRE(exit);
  INFO(output(*p));
  CHECK(exit->signal == SIGKILL);
  for (const RankLine& l : lines) CHECK(ended(l.pid, 10s));
}

TEST_CASE("spawn: nprocs 0 is a usage error") {
  auto p = probe({"--nprocs", "0"});
  const auto exit = p->wait_for(60s);
  REQUIRE(exit);
  INFO(output(*p));
  CHECK(exit->exited);
  CHECK(exit->code == 2);
  CHECK_THAT(p->stderr_text(), Contains("nprocs must be at least 1, got 0; set SpawnOptions::nprocs"));
  CHECK(rank_lines(p->stdout_text()).empty());
}
