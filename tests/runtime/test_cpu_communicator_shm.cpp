// The CPU communicator's shared-memory allreduce, ranks as threads: bit-identical to the TCP ring
// for every op and dtype at sizes that leave parts empty, split unevenly across ranks, span
// several chunks and end in a one-element chunk; the vote that falls back to TCP when a rank
// opts out; and no segment left in /dev/shm once the communicators are set up.
#include "ddplaunch/cpu_communicator.hpp"

#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

#include <catch2/catch.hpp>

#include "tests/runtime/cpu_communicator_fixture.hpp"

using namespace ddp::testing::cpu_comm;

namespace {

// Sizes in elements: tiny (parts of the one chunk empty), uneven, one element past whole float32
// chunks of 1 or 2 MiB (a last chunk of one element), and up to ten chunks (the three buffers
// rotate).
const std::vector<std::int64_t> kShmSizes{1, 3, 5, 1000, 2 * 524288 + 1, 1300001};

// Names in /dev/shm that a segment created by this process would have.
std::vector<std::string> our_segments() {
  const std::string prefix = "ddplaunch-" + std::to_string(::getpid()) + "-";
  std::vector<std::string> out;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) == 0) out.push_back(name);
  }
  return out;
}

}  // namespace

TEST_CASE("shared memory: allreduce gives the TCP ring's bytes for every op, dtype and size") {
  const int world = GENERATE(2, 3, 4);
  Server server;
  // Both communicators of a rank run on its thread, one after the other; min_bytes 0 sends every
  // size through shared memory.
  const auto shm_opts = options().shared_memory_min_bytes(0);
  const auto tcp_opts = options().shared_memory(false);
  std::vector<std::vector<std::pair<torch::Tensor, torch::Tensor>>> results(world);
  std::vector<int> used(world, -1);
  run_ranks(server, world, shm_opts, [&](CpuCommunicator& shm) {
    CpuCommunicator tcp(server.client(), shm.rank(), world, tcp_opts);
    used[shm.rank()] = shm.uses_shared_memory() && !tcp.uses_shared_memory();
    for (auto dtype : kDtypes)
      for (auto op : kOps)
        for (auto n : kShmSizes) {
          torch::Tensor a = input(n, shm.rank(), dtype), b = a.clone();
          shm.allreduce(a, op);
          tcp.allreduce(b, op);
          results[shm.rank()].emplace_back(a, b);
        }
  });
  for (int r = 0; r < world; ++r) CHECK(used[r] == 1);
  std::size_t i = 0;
  for (auto dtype : kDtypes)
    for (auto op : kOps)
      for (auto n : kShmSizes) {
        const torch::Tensor want = expected(n, world, dtype, op);
        for (int r = 0; r < world; ++r) {
          INFO("world " << world << " rank " << r << " dtype " << c10::toString(dtype) << " op "
                        << ddp::runtime::to_string(op) << " n " << n);
          const auto& [shm, tcp] = results[r][i];
          CHECK(torch::equal(shm, tcp));
          CHECK(torch::equal(shm, want));
        }
        ++i;
      }
}

TEST_CASE("shared memory: floats that round give every rank the same bytes") {
  const int world = GENERATE(2, 3, 4);
  Server server;
  std::vector<torch::Tensor> results(world);
  run_ranks(server, world, options(), [&](CpuCommunicator& comm) {
    torch::Tensor t = torch::randn({3'000'001}, torch::TensorOptions().dtype(torch::kFloat32)) * (comm.rank() + 1);
    comm.allreduce(t);
    results[comm.rank()] = t;
  });
  for (int r = 1; r < world; ++r) CHECK(torch::equal(results[r], results[0]));
}

TEST_CASE("shared memory: back-to-back allreduces of different sizes do not overwrite each other") {
  // A rank may start the next allreduce while a slower one still copies out the last; with other
  // sizes the parts move, so each allreduce must start in the next buffer (as DDP's buckets do).
  const int world = GENERATE(2, 3, 4);
  Server server;
  const std::vector<std::int64_t> sizes{7, 300, 5000, 1, 70000, 262145};
  std::vector<int> wrong(world, 0);
  run_ranks(server, world, options(), [&](CpuCommunicator& comm) {
    for (int i = 0; i < 600; ++i) {
      const std::int64_t n = sizes[i % sizes.size()];
      torch::Tensor t = input(n, comm.rank(), torch::kInt64);
      comm.allreduce(t);
      wrong[comm.rank()] += !torch::equal(t, expected(n, world, torch::kInt64, ReduceOp::Sum));
    }
  });
  for (int r = 0; r < world; ++r) CHECK(wrong[r] == 0);
}

TEST_CASE("shared memory: every rank falls back to TCP when one opts out") {
  const int world = 3;
  Server server;
  const auto opts = options();
  std::vector<int> used(world, -1);
  std::vector<torch::Tensor> results(world);
  run_ranks(server, world, opts, [&](CpuCommunicator& comm) {
    used[comm.rank()] = comm.uses_shared_memory();
    // A second communicator where rank 1 opts out.
    auto o = opts;
    o.prefix(o.prefix() + "-optout").shared_memory(comm.rank() != 1);
    CpuCommunicator mixed(server.client(), comm.rank(), world, o);
    used[comm.rank()] += mixed.uses_shared_memory() ? 10 : 0;
    torch::Tensor t = input(1000003, comm.rank(), torch::kFloat32);
    mixed.allreduce(t, ReduceOp::Max);
    results[comm.rank()] = t;
  });
  for (int r = 0; r < world; ++r) {
    CHECK(used[r] == 1);  // the default communicator used it, the mixed one did not
    CHECK(torch::equal(results[r], expected(1000003, world, torch::kFloat32, ReduceOp::Max)));
  }
}

TEST_CASE("shared memory: no segment is left in /dev/shm") {
  const int world = GENERATE(2, 4);
  Server server;
  std::vector<std::vector<std::string>> seen(world);
  std::vector<int> used(world, -1);
  run_ranks(server, world, options(), [&](CpuCommunicator& comm) {
    // Once every rank is past the constructor, rank 0 has unlinked the name.
    comm.barrier();
    used[comm.rank()] = comm.uses_shared_memory();
    seen[comm.rank()] = our_segments();
    torch::Tensor t = torch::ones({1 << 20});
    comm.allreduce(t);
    comm.barrier();
  });
  for (int r = 0; r < world; ++r) {
    CHECK(used[r] == 1);
    CHECK(seen[r].empty());
  }
  CHECK(our_segments().empty());
}
