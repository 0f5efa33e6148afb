// [gpu] tests of the NCCL communicator with ranks as threads sharing one MemoryStore: allreduce
// (every op, float32 and bfloat16), broadcast from every root, allgather, barrier, argument
// checks and close(), and DistributedDataParallel on CUDA tensors. One rank per CUDA device, as NCCL requires: two
// ranks on a host with two GPUs or more, a single rank with one GPU. Without a CUDA device the binary exits 77
// (skipped).
#include "ddplaunch/nccl_communicator.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <exception>
#include <functional>
#include <thread>
#include <vector>

#define CATCH_CONFIG_RUNNER
#include <torch/cuda.h>
#include <catch2/catch.hpp>

#include <c10/cuda/CUDAGuard.h>
#include <torch/torch.h>

#include "ddplaunch/distributed_data_parallel.hpp"
#include "ddplaunch/rendezvous/memory_store.hpp"
#include "tests/runtime/rank_threads.hpp"

namespace rdzv = ddp::rendezvous;
using ddp::runtime::CommunicatorError;
using ddp::runtime::NcclCommunicator;
using ddp::runtime::NcclCommunicatorOptions;
using ddp::runtime::ReduceOp;
using namespace std::chrono_literals;

namespace {

std::atomic<int> prefix_counter{0};

// NCCL refuses two ranks of one communicator on the same device, so the world is one rank per
// device, at most two.
int world_size() {
  return static_cast<int>(std::min<std::size_t>(2, torch::cuda::device_count()));
}

torch::Device device_of(int rank) {
  return {torch::kCUDA, static_cast<c10::DeviceIndex>(rank)};
}

// Runs body(comm) on `world` threads, one communicator each on device `rank`; rethrows the first
// exception after joining them all (Catch assertions are not thread-safe, so bodies only compute
// and throw).
void run_ranks(int world, const std::function<void(NcclCommunicator&)>& body) {
  auto store = std::make_shared<rdzv::MemoryStore>();
  const std::string prefix = "t" + std::to_string(prefix_counter++);
  ddp::test::rethrow_first(ddp::test::run_threads(world, [&](int r) {
    NcclCommunicator comm(store, r, world, NcclCommunicatorOptions().prefix(prefix).timeout(60s).device(r));
    body(comm);
  }));
}

// Rank r's input on the CPU.
torch::Tensor input(std::int64_t n, int rank, torch::ScalarType dtype) {
  return ddp::test::rank_input(n, rank, dtype);
}

torch::Tensor expected(std::int64_t n, int world, torch::ScalarType dtype, ReduceOp op) {
  torch::Tensor acc = ddp::test::reduced_inputs(n, world, op);
  if (op == ReduceOp::Average) acc = acc / world;
  return acc.to(dtype);
}

}  // namespace

TEST_CASE("allreduce: every op, float32 and bfloat16", "[gpu]") {
  const int world = world_size();
  const std::vector<torch::ScalarType> dtypes{torch::kFloat32, torch::kBFloat16};
  const std::vector<ReduceOp> ops{ReduceOp::Sum, ReduceOp::Average, ReduceOp::Min, ReduceOp::Max};
  const std::vector<std::int64_t> sizes{0, 1, 5, 1000003};
  std::vector<std::vector<torch::Tensor>> results(world);
  run_ranks(world, [&](NcclCommunicator& comm) {
    for (auto dtype : dtypes)
      for (auto op : ops)
        for (auto n : sizes) {
          torch::Tensor t = input(n, comm.rank(), dtype).to(device_of(comm.rank()));
          comm.allreduce(t, op);
          results[comm.rank()].push_back(t.cpu());  // the copy waits for the collective
        }
  });
  for (int r = 0; r < world; ++r) {
    std::size_t i = 0;
    for (auto dtype : dtypes)
      for (auto op : ops)
        for (auto n : sizes) {
          INFO("world " << world << " rank " << r << " dtype " << c10::toString(dtype) << " op "
                        << ddp::runtime::to_string(op) << " n " << n);
          const torch::Tensor& got = results[r][i++];
          REQUIRE(got.numel() == n);
          // Average of two small integers is exact in binary floating point (a half at most).
          CHECK(torch::equal(got, expected(n, world, dtype, op)));
        }
  }
}

TEST_CASE("broadcast from every root", "[gpu]") {
  const int world = world_size();
  std::vector<std::vector<torch::Tensor>> results(world);
  run_ranks(world, [&](NcclCommunicator& comm) {
    for (int root = 0; root < world; ++root)
      for (std::int64_t n : {0, 1, 7, 1000003}) {
        torch::Tensor t = input(n, comm.rank(), torch::kFloat32).to(device_of(comm.rank()));
        comm.broadcast(t, root);
        results[comm.rank()].push_back(t.cpu());
      }
  });
  for (int r = 0; r < world; ++r) {
    std::size_t i = 0;
    for (int root = 0; root < world; ++root)
      for (std::int64_t n : {0, 1, 7, 1000003}) {
        INFO("world " << world << " rank " << r << " root " << root << " n " << n);
        CHECK(torch::equal(results[r][i++], input(n, root, torch::kFloat32)));
      }
  }
}

TEST_CASE("allgather and barrier", "[gpu]") {
  const int world = world_size();
  std::vector<std::vector<torch::Tensor>> results(world);
  run_ranks(world, [&](NcclCommunicator& comm) {
    for (std::int64_t n : {0, 1, 5, 300001}) {
      const torch::Tensor in = input(n, comm.rank(), torch::kFloat32).view({-1, 1}).to(device_of(comm.rank()));
      results[comm.rank()].push_back(comm.allgather(in).cpu());
      comm.barrier();
    }
  });
  for (int r = 0; r < world; ++r) {
    std::size_t i = 0;
    for (std::int64_t n : {0, 1, 5, 300001}) {
      const torch::Tensor& got = results[r][i++];
      REQUIRE(got.sizes() == torch::IntArrayRef({world, n, 1}));
      for (int src = 0; src < world; ++src) CHECK(torch::equal(got[src], input(n, src, torch::kFloat32).view({-1, 1})));
    }
  }
}

TEST_CASE("barrier holds every rank until the last arrives", "[gpu]") {
  const int world = world_size();
  std::atomic<int> arrived{0};
  std::atomic<bool> early{false};
  run_ranks(world, [&](NcclCommunicator& comm) {
    if (comm.rank() == world - 1) std::this_thread::sleep_for(200ms);
    arrived++;
    comm.barrier();
    if (arrived.load() != world) early = true;
  });
  CHECK_FALSE(early);
}

TEST_CASE("bad tensors and use after close throw CommunicatorError", "[gpu]") {
  auto store = std::make_shared<rdzv::MemoryStore>();
  NcclCommunicator comm(store, 0, 1, NcclCommunicatorOptions().prefix("checks").timeout(60s).device(0));
  CHECK(comm.device() == 0);
  CHECK_THROWS_AS(comm.allreduce(torch::ones({4})), CommunicatorError);  // on the CPU
  CHECK_THROWS_AS(comm.allreduce(torch::ones({4, 4}, device_of(0)).t()), CommunicatorError);
  CHECK_THROWS_AS(comm.allreduce(torch::ones({4}, torch::TensorOptions().dtype(torch::kBool).device(device_of(0)))),
                  CommunicatorError);
  CHECK_THROWS_AS(comm.broadcast(torch::ones({4}, device_of(0)), 1), CommunicatorError);
  comm.barrier();
  comm.close();
  comm.close();
  CHECK_THROWS_AS(comm.barrier(), CommunicatorError);
}

TEST_CASE("a missing rank 0 times out naming the prefix", "[gpu]") {
  auto store = std::make_shared<rdzv::MemoryStore>();
  try {
    NcclCommunicator comm(store, 1, 2, NcclCommunicatorOptions().prefix("lonely").timeout(200ms).device(0));
    FAIL("constructor returned without rank 0");
  } catch (const rdzv::TimeoutError& e) {
    CHECK_THAT(e.what(), Catch::Matchers::Contains("lonely") && Catch::Matchers::Contains("rank 1"));
  }
}

int main(int argc, char* argv[]) {
  if (!torch::cuda::is_available()) {
    std::printf("test_nccl_gpu: skipped: no CUDA device\n");
    return 77;
  }
  return Catch::Session().run(argc, argv);
}

TEST_CASE("DistributedDataParallel on CUDA averages gradients over NCCL", "[gpu]") {
  const int world = world_size();
  auto store = std::make_shared<rdzv::MemoryStore>();
  const std::string prefix = "ddp" + std::to_string(prefix_counter++);
  std::vector<torch::Tensor> grads(world);
  std::vector<std::exception_ptr> errors(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        c10::cuda::CUDAGuard guard(device_of(r));
        auto comm = std::make_shared<NcclCommunicator>(store, r, world,
                                                       NcclCommunicatorOptions().prefix(prefix).timeout(60s).device(r));
        torch::nn::Linear model(4, 3);
        model->to(device_of(r));
        ddp::runtime::DistributedDataParallel ddp(model, ddp::runtime::DistributedDataParallelOptions(), comm);
        const torch::Tensor x = torch::full({2, 4}, static_cast<double>(r + 1), torch::TensorOptions(device_of(r)));
        ddp(x).sum().backward();
        torch::cuda::synchronize(r);
        grads[r] = model->weight.grad().cpu();
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  // d(sum)/dW = column sums of x = 2 (r + 1) per element; the average over ranks.
  double expected = 0;
  for (int r = 0; r < world; ++r) expected += 2.0 * (r + 1) / world;
  for (const auto& g : grads) CHECK(torch::allclose(g, torch::full({3, 4}, expected)));
}
