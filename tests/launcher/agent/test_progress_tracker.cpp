// The no-progress breaker's rule (progress_tracker.hpp): a node's measure from --progress_file
// and collectives, the job's verdict and streak, the wire forms; the agreement through an
// in-memory store (progress_exchange.hpp); reading the progress file (progress_file.hpp).
#include "launcher/agent/progress_tracker.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include "ddplaunch/rendezvous/memory_store.hpp"
#include "launcher/agent/progress_exchange.hpp"
#include "launcher/watch/progress_file.hpp"

namespace {

using ddp::launcher::NodeProgress;
using ddp::launcher::ProgressFileReading;
using ddp::launcher::ProgressTracker;
using ddp::launcher::RoundProgress;

ProgressFileReading iteration(long long n) {
  ProgressFileReading r;
  r.state = ProgressFileReading::State::Iteration;
  r.iteration = n;
  return r;
}

ProgressFileReading missing() {
  return ProgressFileReading{};
}

}  // namespace

TEST_CASE("progress: the file's iteration against the best seen before", "[progress]") {
  ProgressTracker t(iteration(100));
  NodeProgress p = t.measure(iteration(100), std::nullopt);
  CHECK(p.progress == RoundProgress::Same);
  CHECK(p.text == "iteration 100 (before: 100)");
  CHECK(t.measure(iteration(150), std::nullopt).progress == RoundProgress::Advanced);
  CHECK(t.measure(iteration(120), std::nullopt).progress == RoundProgress::Same);  // behind the best
  // A file that appears during the job: advanced.
  ProgressTracker fresh(missing());
  CHECK(fresh.measure(iteration(0), std::nullopt).progress == RoundProgress::Advanced);
}

TEST_CASE("progress: collectives when the file says nothing here, nothing at all is unknown", "[progress]") {
  ProgressTracker t(missing());
  CHECK(t.measure(missing(), 40).progress == RoundProgress::Advanced);  // the first round's
  NodeProgress same = t.measure(missing(), 40);
  CHECK(same.progress == RoundProgress::Same);
  CHECK(same.text == "collective #40 completed (before: #40)");
  CHECK(t.measure(std::nullopt, 41).progress == RoundProgress::Advanced);
  NodeProgress unknown = t.measure(missing(), std::nullopt);
  CHECK(unknown.progress == RoundProgress::Unknown);
  CHECK(unknown.text == "nothing measured (no --progress_file here, no collective seen)");
  // The file decides when it speaks, even when collectives got further.
  ProgressTracker file_first(iteration(7));
  file_first.measure(iteration(7), 10);
  CHECK(file_first.measure(iteration(7), 99).progress == RoundProgress::Same);
}

TEST_CASE("progress verdict: any node advanced, none measured is unknown, and the streak", "[progress]") {
  using ddp::launcher::judge_round;
  const NodeProgress same{RoundProgress::Same, "iteration 5 (before: 5)"};
  const NodeProgress advanced{RoundProgress::Advanced, "iteration 6 (before: 5)"};
  const NodeProgress unknown{RoundProgress::Unknown, "nothing measured"};
  // A node whose file is local to another node measures nothing: the one that measured decides.
  auto v = judge_round({same, unknown}, true, 1);
  CHECK(v.progress == RoundProgress::Same);
  CHECK(v.streak == 2);
  CHECK(v.nodes == std::vector<std::string>{"node 0: iteration 5 (before: 5)", "node 1: nothing measured"});
  CHECK(ddp::launcher::breaker_trips(v, 2));
  CHECK_FALSE(ddp::launcher::breaker_trips(v, 3));
  CHECK_FALSE(ddp::launcher::breaker_trips(v, 0));  // off
  CHECK(judge_round({same, advanced}, true, 1).streak == 0);
  CHECK(judge_round({same, std::nullopt}, true, 1).progress == RoundProgress::Unknown);  // it may have advanced
  v = judge_round({unknown, std::nullopt}, true, 4);                                     // nothing seen: never a stop
  CHECK(v.progress == RoundProgress::Unknown);
  CHECK(v.streak == 0);
  CHECK(v.nodes[1] == "node 1: its measure did not arrive");
  CHECK(judge_round({same}, false, 0).streak == 0);  // the first round is no restart
}

TEST_CASE("progress: wire forms round-trip, anything else is refused", "[progress]") {
  using namespace ddp::launcher;
  const NodeProgress p{RoundProgress::Same, "iteration 5 (before: 5)"};
  const auto back = decode_node_progress(encode_node_progress(p));
  REQUIRE(back);
  CHECK(back->progress == p.progress);
  CHECK(back->text == p.text);
  CHECK_FALSE(decode_node_progress("ddplaunch-progress 1 maybe\nx"));
  CHECK_FALSE(decode_node_progress("hello"));
  const ProgressVerdict v = judge_round({p, p}, true, 2);
  const auto vb = decode_verdict(encode_verdict(v));
  REQUIRE(vb);
  CHECK(vb->streak == 3);
  CHECK(vb->progress == RoundProgress::Same);
  CHECK(vb->nodes == v.nodes);
  CHECK_FALSE(decode_verdict("ddplaunch-verdict 1 none -1\n"));
  CHECK_FALSE(decode_verdict("ddplaunch-verdict 1 none 2x\n"));
}

TEST_CASE("progress exchange: two nodes agree on one verdict, the streak carries across rounds", "[progress]") {
  using namespace ddp::launcher;
  ddp::rendezvous::MemoryStore store;
  const NodeProgress same{RoundProgress::Same, "iteration 5 (before: 5)"};
  const NodeProgress unknown{RoundProgress::Unknown, "nothing measured"};
  for (int round = 0; round < 3; ++round) {
    ProgressExchange x;
    x.round_prefix = "r" + std::to_string(round) + "/";
    x.previous_round_prefix = round ? "r" + std::to_string(round - 1) + "/" : "";
    x.nnodes = 2;
    x.is_restart = round > 0;
    x.wait = std::chrono::seconds(5);
    ProgressVerdict other;
    std::thread node1([&] {
      ProgressExchange y = x;
      y.node = 1;
      other = exchange_progress(store, y, unknown);
    });
    const ProgressVerdict mine = exchange_progress(store, x, same);
    node1.join();
    CHECK(mine.streak == round);
    CHECK(other.streak == round);
    CHECK(mine.nodes == other.nodes);
  }
  // A node that never measures: judged without it once the wait is over.
  ProgressExchange x;
  x.round_prefix = "r9/";
  x.nnodes = 2;
  x.is_restart = true;
  x.wait = std::chrono::milliseconds(100);
  const ProgressVerdict alone = exchange_progress(store, x, same);
  CHECK(alone.progress == RoundProgress::Unknown);  // node 1 may have advanced
  CHECK(alone.streak == 0);
  CHECK(alone.nodes[1] == "node 1: its measure did not arrive");
  // A node that saw another lost judges at once; the verdict is there for the others.
  x.round_prefix = "r10/";
  x.node_lost = true;
  x.wait = std::chrono::seconds(30);
  const auto started = std::chrono::steady_clock::now();
  CHECK(exchange_progress(store, x, same).progress == RoundProgress::Unknown);
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(5));
}

TEST_CASE("progress file: an integer, a missing file, anything else", "[progress]") {
  using ddp::launcher::read_progress_file;
  char dir[] = "/tmp/ddp_progress_XXXXXX";
  REQUIRE(::mkdtemp(dir));
  const std::string path = std::string(dir) + "/latest_checkpointed_iteration.txt";
  CHECK(read_progress_file(path).state == ProgressFileReading::State::Missing);
  std::ofstream(path) << "  1200\n";
  const ProgressFileReading r = read_progress_file(path);
  CHECK(r.state == ProgressFileReading::State::Iteration);
  CHECK(r.iteration == 1200);
  std::ofstream(path) << "release";
  const ProgressFileReading bad = read_progress_file(path);
  CHECK(bad.state == ProgressFileReading::State::Unusable);
  CHECK(bad.problem.find("holds 'release', not an iteration") != std::string::npos);
  std::ofstream(path) << "";
  CHECK(read_progress_file(path).state == ProgressFileReading::State::Unusable);
  std::remove(path.c_str());
  // A FIFO put there while the job runs: unusable at once (before, the read blocked for ever).
  REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
  const ProgressFileReading fifo = read_progress_file(path);
  CHECK(fifo.state == ProgressFileReading::State::Unusable);
  CHECK(fifo.problem.find("--progress_file=" + path + " is a FIFO") != std::string::npos);
  std::remove(path.c_str());
  ::rmdir(dir);
}
