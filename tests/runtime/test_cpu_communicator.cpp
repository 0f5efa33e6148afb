// The CPU communicator with ranks as threads sharing one TcpStoreServer on a free loopback port:
// allreduce over the TCP ring (every op, dtype and awkward size), broadcast from every root,
// allgather, barrier, for world sizes 1 to 4; and failures: a peer closing mid-collective (on the
// default, shared-memory path for its size), a peer that never joins.
#include "ddplaunch/cpu_communicator.hpp"

#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <thread>

#include <catch2/catch.hpp>

#include "tests/runtime/cpu_communicator_fixture.hpp"

using namespace ddp::testing::cpu_comm;
using Catch::Matchers::Contains;
using ddp::runtime::CommunicatorError;
using ddp::runtime::PeerError;

TEST_CASE("allreduce: every op, dtype and size") {
  const int world = GENERATE(1, 2, 3, 4);
  Server server;
  std::vector<std::vector<torch::Tensor>> results(world);
  // The TCP ring (test_cpu_communicator_shm covers shared memory against it).
  run_ranks(server, world, options().shared_memory(false), [&](CpuCommunicator& comm) {
    for (auto dtype : kDtypes)
      for (auto op : kOps)
        for (auto n : kSizes) {
          torch::Tensor t = input(n, comm.rank(), dtype);
          comm.allreduce(t, op);
          results[comm.rank()].push_back(t);
        }
  });
  for (int r = 0; r < world; ++r) {
    std::size_t i = 0;
    for (auto dtype : kDtypes)
      for (auto op : kOps)
        for (auto n : kSizes) {
          INFO("world " << world << " rank " << r << " dtype " << c10::toString(dtype) << " op "
                        << ddp::runtime::to_string(op) << " n " << n);
          const torch::Tensor& got = results[r][i++];
          REQUIRE(got.numel() == n);
          CHECK(torch::equal(got, expected(n, world, dtype, op)));
        }
  }
}

TEST_CASE("allreduce: 10M float32 elements, multi-dimensional") {
  const int world = GENERATE(2, 3, 4);
  Server server;
  const std::int64_t n = 10'000'000;
  std::vector<torch::Tensor> results(world);
  run_ranks(server, world, options(), [&](CpuCommunicator& comm) {
    torch::Tensor t = input(n, comm.rank(), torch::kFloat32).view({10, -1});
    comm.allreduce(t, ReduceOp::Sum);
    results[comm.rank()] = t;
  });
  const torch::Tensor want = expected(n, world, torch::kFloat32, ReduceOp::Sum).view({10, -1});
  for (int r = 0; r < world; ++r) CHECK(torch::equal(results[r], want));
}

TEST_CASE("broadcast from every root") {
  const int world = GENERATE(1, 2, 3, 4);
  Server server;
  std::vector<std::vector<torch::Tensor>> results(world);
  run_ranks(server, world, options(), [&](CpuCommunicator& comm) {
    for (int root = 0; root < world; ++root)
      for (auto dtype : {torch::kFloat32, torch::kBFloat16, torch::kInt64})
        for (std::int64_t n : {0, 1, 7, 1000003}) {
          torch::Tensor t = input(n, comm.rank(), dtype);
          comm.broadcast(t, root);
          results[comm.rank()].push_back(t);
        }
  });
  for (int r = 0; r < world; ++r) {
    std::size_t i = 0;
    for (int root = 0; root < world; ++root)
      for (auto dtype : {torch::kFloat32, torch::kBFloat16, torch::kInt64})
        for (std::int64_t n : {0, 1, 7, 1000003}) {
          INFO("world " << world << " rank " << r << " root " << root << " n " << n);
          CHECK(torch::equal(results[r][i++], input(n, root, dtype)));
        }
  }
}

TEST_CASE("allgather and barrier") {
  const int world = GENERATE(1, 2, 3, 4);
  Server server;
  std::vector<std::vector<torch::Tensor>> results(world);
  run_ranks(server, world, options(), [&](CpuCommunicator& comm) {
    for (std::int64_t n : {0, 1, 5, 300001}) {
      results[comm.rank()].push_back(comm.allgather(input(n, comm.rank(), torch::kFloat64).view({-1, 1})));
      comm.barrier();
    }
  });
  for (int r = 0; r < world; ++r) {
    std::size_t i = 0;
    for (std::int64_t n : {0, 1, 5, 300001}) {
      const torch::Tensor& got = results[r][i++];
      REQUIRE(got.sizes() == torch::IntArrayRef({world, n, 1}));
      for (int src = 0; src < world; ++src) CHECK(torch::equal(got[src], input(n, src, torch::kFloat64).view({-1, 1})));
    }
  }
}

TEST_CASE("barrier holds every rank until the last arrives") {
  const int world = GENERATE(2, 3, 4);
  Server server;
  std::atomic<int> arrived{0};
  std::atomic<bool> early{false};
  run_ranks(server, world, options(), [&](CpuCommunicator& comm) {
    // The last rank arrives late, so that the others are inside barrier() when it comes. No event
    // marks a rank as parked in it; were one not yet there, the check below would still hold.
    if (comm.rank() == world - 1) std::this_thread::sleep_for(200ms);
    arrived++;
    comm.barrier();
    if (arrived.load() != world) early = true;
  });
  CHECK_FALSE(early);
}

TEST_CASE("bad arguments are CommunicatorErrors") {
  Server server;
  CpuCommunicator comm(server.client(), 0, 1, options());
  CHECK_THROWS_AS(comm.allreduce(torch::zeros({4}, torch::kBool)), CommunicatorError);
  CHECK_THROWS_AS(comm.allreduce(torch::zeros({4, 4}).t()), CommunicatorError);
  CHECK_THROWS_AS(comm.broadcast(torch::zeros({4}), 1), CommunicatorError);
  CHECK_THROWS_AS(CpuCommunicator(server.client(), 2, 2, options()), CommunicatorError);
  comm.close();
  CHECK_THROWS_WITH(comm.allreduce(torch::zeros({4})), Contains("closed"));
}

TEST_CASE("a peer closing mid-collective makes every other rank fail naming it") {
  const int world = GENERATE(2, 3, 4);
  const int victim = world - 1 == 1 ? 1 : 2;
  Server server;
  const auto opts = options(20s);
  std::vector<std::string> messages(world);
  std::vector<std::chrono::steady_clock::time_point> failed_at(world);
  std::atomic<std::chrono::steady_clock::rep> closed_at{0};
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        CpuCommunicator comm(server.client(), r, world, opts);
        std::thread closer;
        if (r == victim)
          closer = std::thread([&] {
            // Mid-collective: nothing marks a rank as inside an allreduce, so the close comes 100 ms
            // into a loop of them (a close before the first one fails the peers the same way).
            std::this_thread::sleep_for(100ms);
            closed_at = std::chrono::steady_clock::now().time_since_epoch().count();
            comm.close();
          });
        try {
          torch::Tensor t = torch::ones({1 << 20});
          for (int i = 0; i < 100000; ++i) comm.allreduce(t, ReduceOp::Average);
          messages[r] = "no error";
        } catch (const ddp::Error& e) {
          messages[r] = e.what();
          failed_at[r] = std::chrono::steady_clock::now();
        }
        if (closer.joinable()) closer.join();
      } catch (const std::exception& e) {
        messages[r] = std::string("set-up failed: ") + e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  const std::chrono::steady_clock::time_point closed{std::chrono::steady_clock::duration(closed_at.load())};
  for (int r = 0; r < world; ++r) {
    INFO("rank " << r << ": " << messages[r]);
    if (r == victim) {
      CHECK_THAT(messages[r], Contains("closed"));
      continue;
    }
    CHECK_THAT(messages[r], Contains("rank " + std::to_string(victim)));
    CHECK(failed_at[r] - closed < 5s);
  }
}

TEST_CASE("a peer that never joins the collective times out the others, naming a rank") {
  Server server;
  const auto opts = options(1s);
  std::vector<std::string> messages(3);
  std::vector<double> seconds(3);
  std::atomic<int> finished{0};
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      CpuCommunicator comm(server.client(), r, 3, opts);
      if (r == 2) {
        // Stays connected but never calls the collective, until the others gave up.
        while (finished.load() < 2) std::this_thread::sleep_for(10ms);
        return;
      }
      const auto start = std::chrono::steady_clock::now();
      try {
        comm.allreduce(torch::ones({1 << 20}));
        messages[r] = "no error";
      } catch (const ddp::Error& e) {
        messages[r] = e.what();
      }
      seconds[r] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      finished++;
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r << ": " << messages[r]);
    CHECK_THAT(messages[r], Contains("rank 2") || Contains("rank 0"));
    CHECK(seconds[r] < 6.0);  // timeout 1 s, with slack for a loaded machine
  }
  CHECK_THAT(messages[0], Contains("timed out") && Contains("rank 2"));
}

TEST_CASE("ranks that disagree on a collective fail with both calls named") {
  Server server;
  const auto opts = options(20s);
  struct Case {
    const char* name;
    std::function<void(CpuCommunicator&)> body;
    const char* expected;
  };
  const std::vector<Case> cases = {
      {"size", [](CpuCommunicator& c) { c.allreduce(torch::ones({c.rank() == 0 ? 100 : 120})); }, "elements (sum)"},
      {"dtype",
       [](CpuCommunicator& c) { c.allreduce(torch::ones({8}, c.rank() == 0 ? torch::kFloat : torch::kDouble)); },
       "every rank must call the same collectives"},
      {"kind",
       [](CpuCommunicator& c) {
         if (c.rank() == 0)
           c.allreduce(torch::ones({8}));
         else
           c.broadcast(torch::ones({8}), 0);
       },
       "broadcast #0 of 8 Float elements from root 0"},
  };
  for (const auto& test : cases) {
    INFO(test.name);
    std::vector<std::string> messages(2);
    std::vector<std::thread> threads;
    auto o = opts;
    o.prefix(o.prefix() + test.name);
    for (int r = 0; r < 2; ++r)
      threads.emplace_back([&, r] {
        CpuCommunicator comm(server.client(), r, 2, o);
        try {
          test.body(comm);
        } catch (const ddp::Error& e) {
          messages[r] = e.what();
        }
      });
    for (auto& t : threads) t.join();
    CHECK_THAT(messages[0] + messages[1], Contains(test.expected));
    CHECK_FALSE(messages[0].empty());
    CHECK_FALSE(messages[1].empty());
  }
}
