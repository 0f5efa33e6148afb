// [gpu] tests of both GPU backends (nccl: ours; nccl-c10d: LibTorch's ProcessGroupNCCL) with
// ranks as threads sharing one MemoryStore: allreduce (every op, float32 and bfloat16), broadcast
// from every root, allgather, barrier, argument checks and close(), close() from another thread
// ending a blocked collective, and DistributedDataParallel on CUDA tensors against one process on
// the union of the batches (allreduce, bf16 and fp16 hooks, no_sync, find_unused_parameters).
// One rank per CUDA device, as NCCL requires of threads: two ranks on a host with two GPUs or
// more, a single rank with one GPU (tests that need two ranks then say so and pass). Ranks as
// processes (init(), a peer killed mid-collective) are in test_gpu_processes.py. Without a CUDA
// device the binary exits 77 (skipped).
#include "ddplaunch/c10d_nccl_communicator.hpp"
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
#include "runtime/c10d_store.hpp"
#include "tests/runtime/rank_threads.hpp"

namespace rdzv = ddp::rendezvous;
using ddp::runtime::Backend;
using ddp::runtime::C10dNcclCommunicator;
using ddp::runtime::C10dNcclCommunicatorOptions;
using ddp::runtime::Communicator;
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

// Rank r's communicator of `backend` on device r, meeting in `store` under `prefix`.
std::shared_ptr<Communicator> make_comm(Backend backend, const std::shared_ptr<rdzv::Store>& store, int r, int world,
                                        const std::string& prefix, std::chrono::milliseconds timeout = 60s) {
  if (backend == Backend::NcclC10d)
    return std::make_shared<C10dNcclCommunicator>(
        c10::make_intrusive<ddp::runtime::C10dStore>(store), r, world,
        C10dNcclCommunicatorOptions().prefix(prefix).timeout(timeout).device(r));
  return std::make_shared<NcclCommunicator>(store, r, world,
                                            NcclCommunicatorOptions().prefix(prefix).timeout(timeout).device(r));
}

// Both GPU backends, one per run of a test case (Catch's GENERATE).
Backend any_backend() {
  const Backend b = GENERATE(Backend::Nccl, Backend::NcclC10d);
  return b;
}

// Runs body(comm) on `world` threads, one communicator each on device `rank`; rethrows the first
// exception after joining them all (Catch assertions are not thread-safe, so bodies only compute
// and throw).
void run_ranks(Backend backend, int world, const std::function<void(Communicator&)>& body) {
  auto store = std::make_shared<rdzv::MemoryStore>();
  const std::string prefix = "t" + std::to_string(prefix_counter++);
  ddp::test::rethrow_first(ddp::test::run_threads(world, [&](int r) {
    c10::cuda::CUDAGuard guard(device_of(r));
    auto comm = make_comm(backend, store, r, world, prefix);
    body(*comm);
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
  const Backend backend = any_backend();
  INFO("backend " << ddp::runtime::to_string(backend));
  const int world = world_size();
  const std::vector<torch::ScalarType> dtypes{torch::kFloat32, torch::kBFloat16};
  const std::vector<ReduceOp> ops{ReduceOp::Sum, ReduceOp::Average, ReduceOp::Min, ReduceOp::Max};
  const std::vector<std::int64_t> sizes{0, 1, 5, 1000003};
  std::vector<std::vector<torch::Tensor>> results(world);
  run_ranks(backend, world, [&](Communicator& comm) {
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
  const Backend backend = any_backend();
  INFO("backend " << ddp::runtime::to_string(backend));
  const int world = world_size();
  std::vector<std::vector<torch::Tensor>> results(world);
  run_ranks(backend, world, [&](Communicator& comm) {
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
  const Backend backend = any_backend();
  INFO("backend " << ddp::runtime::to_string(backend));
  const int world = world_size();
  std::vector<std::vector<torch::Tensor>> results(world);
  run_ranks(backend, world, [&](Communicator& comm) {
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
  const Backend backend = any_backend();
  INFO("backend " << ddp::runtime::to_string(backend));
  const int world = world_size();
  std::atomic<int> arrived{0};
  std::atomic<bool> early{false};
  run_ranks(backend, world, [&](Communicator& comm) {
    // The last rank arrives late, so that the others are inside barrier() when it comes. No event
    // marks a rank as parked in it; were one not yet there, the check below would still hold.
    if (comm.rank() == world - 1) std::this_thread::sleep_for(200ms);
    arrived++;
    comm.barrier();
    if (arrived.load() != world) early = true;
  });
  CHECK_FALSE(early);
}

TEST_CASE("bad tensors and use after close throw CommunicatorError", "[gpu]") {
  const Backend backend = any_backend();
  auto store = std::make_shared<rdzv::MemoryStore>();
  auto owned = make_comm(backend, store, 0, 1, "checks");
  Communicator& comm = *owned;
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

TEST_CASE("a missing rank 0 times out naming the prefix (nccl)", "[gpu]") {
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

namespace {

// A model with a branch that only some ranks use (find_unused_parameters).
struct Branchy : torch::nn::Module {
  Branchy() {
    trunk = register_module("trunk", torch::nn::Linear(4, 8));
    head = register_module("head", torch::nn::Linear(8, 3));
    side = register_module("side", torch::nn::Linear(8, 3));
  }
  torch::Tensor forward(const torch::Tensor& x, bool use_side) {
    const torch::Tensor h = torch::tanh(trunk(x));
    return use_side ? head(h) + side(h) : head(h);
  }
  torch::nn::Linear trunk{nullptr}, head{nullptr}, side{nullptr};
};

void same_weights(torch::nn::Module& m) {
  torch::NoGradGuard no_grad;
  int j = 0;
  for (auto& p : m.parameters()) {
    const auto i = torch::arange(p.numel(), p.options());
    p.copy_((0.3 * torch::sin(0.37 * i + 1.3 * ++j)).view(p.sizes()));
  }
}

torch::Tensor batch_of(int rank, int step, torch::Device device) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(1000 * step + rank);
  return torch::randn({6, 4}, gen).to(device);
}

struct DdpCase {
  std::string hook;  // allreduce, bf16, fp16
  bool no_sync;      // two micro-batches per step, the first under no_sync
  bool unused;       // rank 1 never uses the side branch (find_unused_parameters)
};

// Parameters after 5 SGD steps of DDP on `world` ranks, and of one process on the union of the
// ranks' batches (the loss is a mean over the rank's batch: DDP's average of the ranks' gradients
// is the gradient of the mean over the union).
std::pair<std::vector<torch::Tensor>, torch::Tensor> train_both(Backend backend, int world, const DdpCase& c) {
  namespace rt = ddp::runtime;
  auto store = std::make_shared<rdzv::MemoryStore>();
  const std::string prefix = "ddp" + std::to_string(prefix_counter++);
  const int micro = c.no_sync ? 2 : 1;
  std::vector<torch::Tensor> finals(static_cast<std::size_t>(world));
  ddp::test::rethrow_first(ddp::test::run_threads(world, [&](int r) {
    c10::cuda::CUDAGuard guard(device_of(r));
    auto comm = make_comm(backend, store, r, world, prefix);
    auto model = std::make_shared<Branchy>();
    model->to(device_of(r));
    same_weights(*model);
    rt::DistributedDataParallelOptions o;
    o.find_unused_parameters(c.unused).bucket_cap_mb(0.0002).first_bucket_cap_mb(0.0001);
    if (c.hook == "bf16") o.comm_hook(rt::bf16_compress_hook());
    if (c.hook == "fp16") o.comm_hook(rt::fp16_compress_hook());
    rt::DistributedDataParallel<std::shared_ptr<Branchy>> ddp(model, o, comm);
    torch::optim::SGD opt(model->parameters(), 0.1);
    for (int step = 0; step < 5; ++step) {
      opt.zero_grad();
      for (int m = 0; m < micro; ++m) {
        const bool use_side = !(c.unused && r == 1);
        const torch::Tensor x = batch_of(r, step * micro + m, device_of(r));
        auto loss = [&] { return ddp(x, use_side).pow(2).mean() / micro; };
        if (m + 1 < micro) {
          auto local_only = ddp.no_sync();
          loss().backward();
        } else {
          loss().backward();
        }
      }
      opt.step();
    }
    torch::cuda::synchronize(r);
    std::vector<torch::Tensor> flat;
    for (const auto& p : model->parameters()) flat.push_back(p.detach().reshape({-1}).cpu());
    finals[static_cast<std::size_t>(r)] = torch::cat(flat);
  }));
  // One process: the sum over ranks of each rank's mean loss, divided by world.
  auto single = std::make_shared<Branchy>();
  same_weights(*single);
  torch::optim::SGD opt(single->parameters(), 0.1);
  for (int step = 0; step < 5; ++step) {
    opt.zero_grad();
    for (int m = 0; m < micro; ++m)
      for (int r = 0; r < world; ++r) {
        const bool use_side = !(c.unused && r == 1);
        (single->forward(batch_of(r, step * micro + m, torch::kCPU), use_side).pow(2).mean() / micro / world)
            .backward();
      }
    opt.step();
  }
  std::vector<torch::Tensor> flat;
  for (const auto& p : single->parameters()) flat.push_back(p.detach().reshape({-1}));
  return {finals, torch::cat(flat)};
}

}  // namespace

TEST_CASE("DDP on CUDA equals one process on the union of the batches: hooks, no_sync, unused parameters", "[gpu]") {
  const Backend backend = any_backend();
  const int world = world_size();
  const DdpCase c =
      GENERATE(DdpCase{"allreduce", false, false}, DdpCase{"bf16", false, false}, DdpCase{"fp16", false, false},
               DdpCase{"allreduce", true, false}, DdpCase{"allreduce", false, true});
  INFO("backend " << ddp::runtime::to_string(backend) << ", hook " << c.hook << ", no_sync " << c.no_sync << ", unused "
                  << c.unused << ", world " << world);
  const auto [ranks, single] = train_both(backend, world, c);
  const double tolerance = c.hook == "allreduce" ? 1e-5 : 2e-2;  // bf16/fp16 round the gradients
  for (const auto& r : ranks) {
    CHECK(torch::equal(r, ranks[0]));  // identical on every rank
    CHECK((r - single).abs().max().item<double>() <= tolerance * single.abs().max().item<double>());
  }
}

TEST_CASE("close() from another thread ends a collective that waits for a rank that never comes", "[gpu]") {
  const Backend backend = any_backend();
  const int world = world_size();
  if (world < 2) {
    WARN("one CUDA device: this case needs two ranks on two devices");
    return;
  }
  auto store = std::make_shared<rdzv::MemoryStore>();
  const std::string prefix = "close" + std::to_string(prefix_counter++);
  std::atomic<bool> rank1_done{false};
  std::string error;
  double seconds = -1;
  ddp::test::rethrow_first(ddp::test::run_threads(2, [&](int r) {
    c10::cuda::CUDAGuard guard(device_of(r));
    auto comm = make_comm(backend, store, r, 2, prefix, 120s);
    if (r == 1) {  // joins, then never calls the barrier; leaves when rank 0 is done
      while (!rank1_done) std::this_thread::sleep_for(10ms);
      comm->close();
      return;
    }
    std::thread closer([&] {
      std::this_thread::sleep_for(500ms);  // barrier() below is blocked by then (no event marks it)
      comm->close();
    });
    const auto start = std::chrono::steady_clock::now();
    try {
      comm->barrier();
    } catch (const std::exception& e) {
      error = e.what();
    }
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    closer.join();
    rank1_done = true;
  }));
  INFO("backend " << ddp::runtime::to_string(backend) << ": " << error);
  CHECK_FALSE(error.empty());
  CHECK(seconds < 10);  // not the 120 s timeout
}
