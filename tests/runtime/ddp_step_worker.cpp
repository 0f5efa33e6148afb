// One rank of the step-by-step comparison with PyTorch's own DistributedDataParallel
// (tests/interop/test_ddp_vs_pytorch.py). Started by ddplaunch (torchrun environment, our CPU
// communicator); tests/interop/ddp_reference.py is the same program in Python, line for line:
//
//   model   Linear(16,64)-Tanh-Linear(64,64)-Tanh-Linear(64,8); element i (flat, 0-based) of
//           parameter j (registration order, 1-based) is 0.2 sin(0.37 i + 1.3 j)
//   data    rank r at step s takes samples n = (s W + r) B + k, k < B (W ranks, B per batch):
//           x[k][f] = sin(0.1 (16 n + f)), y[k][o] = 0.5 sin(2 x[k][o] + x[k][o + 8])
//   train   MSE loss, SGD lr 0.05 momentum 0.9, --steps steps
//
// Every formula is evaluated with the same LibTorch ops in float64, then cast to float32, so both
// programs start from bit-identical tensors without depending on either side's RNG.
//
// Output, one line each: "buckets <n>" (rank 0), "step <s> rank <r> loss <%.9g>" per step, and
// "checksum rank <r> sum <%.17g> abssum <%.17g>" over the final parameters (float64 sums).
//
// --comm-hook: allreduce (ours: sum, then divide by W), bf16 (bf16_compress_hook) or
// divide-first (multiply by 1/W, then sum: the order PyTorch's default reduction uses).
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>
#include <CLI/CLI.hpp>

#include "ddplaunch/distributed_data_parallel.hpp"

namespace rt = ddp::runtime;

namespace {

struct Args {
  int steps = 30;
  int stop_rank = -1;  // this rank SIGSTOPs itself before step stop_step (between collectives)
  int stop_step = 0;
  std::int64_t batch = 8;
  double lr = 0.05;
  double bucket_cap_mb = 25;
  double first_bucket_cap_mb = 0;  // 0: min(1, bucket_cap_mb)
  std::string comm_hook = "allreduce";
};

// PyTorch's reducer without a hook scales each gradient by 1/W as it copies it into the bucket
// (at::mul_out with a float scalar) and then allreduces with SUM; this hook does the same.
rt::CommHook divide_first_hook() {
  return [](rt::Communicator& comm, rt::GradBucket& bucket) {
    bucket.buffer().mul_(1.0 / comm.world_size());
    comm.allreduce(bucket.buffer(), rt::ReduceOp::Sum);
  };
}

rt::CommHook comm_hook(const std::string& name) {
  if (name == "bf16") return rt::bf16_compress_hook();
  if (name == "divide-first") return divide_first_hook();
  return rt::allreduce_hook();
}

torch::nn::Sequential make_model() {
  torch::nn::Sequential model(torch::nn::Linear(16, 64), torch::nn::Tanh(), torch::nn::Linear(64, 64),
                              torch::nn::Tanh(), torch::nn::Linear(64, 8));
  torch::NoGradGuard no_grad;
  int j = 0;
  for (auto& p : model->parameters()) {
    const torch::Tensor i = torch::arange(p.numel(), torch::kFloat64);
    p.copy_((0.2 * torch::sin(0.37 * i + 1.3 * ++j)).to(torch::kFloat32).view(p.sizes()));
  }
  return model;
}

std::pair<torch::Tensor, torch::Tensor> batch(int rank, int world, int step, std::int64_t size) {
  const std::int64_t first = (static_cast<std::int64_t>(step) * world + rank) * size;
  const torch::Tensor xi = torch::arange(size * 16, torch::kFloat64) + first * 16;
  const torch::Tensor x = torch::sin(0.1 * xi).view({size, 16});
  const torch::Tensor y = 0.5 * torch::sin(2 * x.narrow(1, 0, 8) + x.narrow(1, 8, 8));
  return {x.to(torch::kFloat32), y.to(torch::kFloat32)};
}

void run(const Args& args, int argc, char** argv) {
  torch::set_num_threads(1);
  // The CPU backend explicitly: on a GPU host init() would pick NCCL (issue 14).
  rt::init(argc, argv, rt::InitOptions().backend(rt::Backend::Cpu));
  const int rank = rt::get_rank(), world = rt::get_world_size();
  auto model = make_model();
  const double first_cap = args.first_bucket_cap_mb > 0 ? args.first_bucket_cap_mb : std::min(1.0, args.bucket_cap_mb);
  rt::DistributedDataParallel ddp(model, rt::DistributedDataParallelOptions()
                                             .bucket_cap_mb(args.bucket_cap_mb)
                                             .first_bucket_cap_mb(first_cap)
                                             .comm_hook(comm_hook(args.comm_hook)));
  if (rank == 0) std::printf("buckets %zu\n", ddp.reducer().buckets().size());
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(args.lr).momentum(0.9));
  for (int s = 0; s < args.steps; ++s) {
    if (rank == args.stop_rank && s == args.stop_step) {
      // When it stopped, for the hang-report benchmark (bench/bench_launcher.py).
      std::fprintf(stderr, "stopping at %.6f\n",
                   std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
      std::fflush(stderr);
      ::raise(SIGSTOP);
    }
    const auto [x, y] = batch(rank, world, s, args.batch);
    optimizer.zero_grad();
    const torch::Tensor loss = torch::mse_loss(ddp(x), y);
    loss.backward();
    optimizer.step();
    std::printf("step %d rank %d loss %.9g\n", s, rank, loss.item<double>());
  }
  std::vector<torch::Tensor> flat;
  for (const auto& p : model->parameters()) flat.push_back(p.detach().reshape({-1}));
  const torch::Tensor all = torch::cat(flat).to(torch::kFloat64);
  std::printf("checksum rank %d sum %.17g abssum %.17g\n", rank, all.sum().item<double>(),
              all.abs().sum().item<double>());
  std::fflush(stdout);
  rt::destroy();
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  CLI::App app{"One rank of the comparison with PyTorch DDP (see tests/runtime/ddp_step_worker.cpp)."};
  app.add_option("--steps", args.steps, "training steps (default 30)")->check(CLI::NonNegativeNumber);
  app.add_option("--batch", args.batch, "samples per rank and step (default 8)")->check(CLI::PositiveNumber);
  app.add_option("--lr", args.lr, "SGD learning rate, momentum 0.9 (default 0.05)")->check(CLI::PositiveNumber);
  app.add_option("--bucket-cap-mb", args.bucket_cap_mb, "DDP bucket cap in MiB (default 25)")
      ->check(CLI::PositiveNumber);
  app.add_option("--first-bucket-cap-mb", args.first_bucket_cap_mb, "first bucket's cap (default min(1, cap))")
      ->check(CLI::PositiveNumber);
  app.add_option("--comm-hook", args.comm_hook, "allreduce, bf16 or divide-first")
      ->check(CLI::IsMember({"allreduce", "bf16", "divide-first"}));
  app.add_option("--stop-rank", args.stop_rank, "a rank that stops itself (SIGSTOP) before --stop-step");
  app.add_option("--stop-step", args.stop_step, "the step before which --stop-rank stops");
  // torch.distributed.launch's legacy argument; init() reads it from argv.
  int legacy_local_rank = -1;
  app.add_option("--local_rank,--local-rank", legacy_local_rank, "set by legacy launchers");
  CLI11_PARSE(app, argc, argv);
  try {
    run(args, argc, argv);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddp_step_worker: %s\n", e.what());
    return 1;
  }
}
