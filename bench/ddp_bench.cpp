// DDP step time of our C++ runtime (bench_ddp.py runs it under ddplaunch next to
// ddp_bench_ref.py, PyTorch's DDP over gloo, with the same model, batch and steps).
//   ddp_bench --model small|large --steps N --warmup W [--no-overlap] [--bucket-cap-mb MB]
// Models: small = the example's MLP (2-128-128-3, batch 64); large = an MLP 1024-2048-2048-1024
// (8.4 M parameters, 32 MiB of gradients, batch 32). Rank 0 prints one line:
//   ddp_bench model=<m> ranks=<n> overlap=<0|1> step_ms=<median> min_ms=<min> max_ms=<max> wait_ms=<median>
// where wait_ms is how long backward waited for reductions after autograd had finished.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <torch/torch.h>

#include "ddplaunch/distributed_data_parallel.hpp"

namespace rt = ddp::runtime;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_name = "small";
  int steps = 30, warmup = 5;
  bool no_overlap = false;
  double bucket_cap_mb = 25;
  CLI::App app{"DDP step time of the ddplaunch runtime"};
  app.add_option("--model", model_name)->check(CLI::IsMember({"small", "large"}));
  app.add_option("--steps", steps)->check(CLI::PositiveNumber);
  app.add_option("--warmup", warmup)->check(CLI::NonNegativeNumber);
  app.add_flag("--no-overlap", no_overlap);
  app.add_option("--bucket-cap-mb", bucket_cap_mb)->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  // The CPU backend explicitly: on a GPU host init() would pick NCCL (this compares CPU DDP).
  rt::init(argc, argv, rt::InitOptions().backend(rt::Backend::Cpu));
  const bool large = model_name == "large";
  torch::manual_seed(0);
  torch::nn::Sequential model = large ? torch::nn::Sequential(torch::nn::Linear(1024, 2048), torch::nn::ReLU(),
                                                              torch::nn::Linear(2048, 2048), torch::nn::ReLU(),
                                                              torch::nn::Linear(2048, 1024))
                                      : torch::nn::Sequential(torch::nn::Linear(2, 128), torch::nn::ReLU(),
                                                              torch::nn::Linear(128, 128), torch::nn::ReLU(),
                                                              torch::nn::Linear(128, 3));
  rt::DistributedDataParallel ddp(
      model, rt::DistributedDataParallelOptions().overlap(!no_overlap).bucket_cap_mb(bucket_cap_mb));
  torch::optim::SGD opt(model->parameters(), 0.01);
  const std::int64_t batch = large ? 32 : 64;
  const torch::Tensor x = torch::randn({batch, large ? 1024 : 2});
  const torch::Tensor y = large ? torch::randn({batch, 1024}) : torch::randint(0, 3, {batch});

  std::vector<double> step_ms, wait_ms;
  for (int s = 0; s < warmup + steps; ++s) {
    rt::barrier();
    const auto start = std::chrono::steady_clock::now();
    opt.zero_grad();
    const torch::Tensor out = ddp(x);
    const torch::Tensor loss = large ? torch::mse_loss(out, y) : torch::nn::functional::cross_entropy(out, y);
    loss.backward();
    opt.step();
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (s >= warmup) {
      step_ms.push_back(ms);
      wait_ms.push_back(ddp.reducer().last_wait_ms());
    }
  }
  if (rt::get_rank() == 0)
    std::printf(
        "ddp_bench model=%s ranks=%d overlap=%d step_ms=%.3f min_ms=%.3f max_ms=%.3f wait_ms=%.3f "
        "collectives_per_step=%zu\n",
                model_name.c_str(), rt::get_world_size(), no_overlap ? 0 : 1, median(step_ms),
                *std::min_element(step_ms.begin(), step_ms.end()), *std::max_element(step_ms.begin(), step_ms.end()),
                median(wait_ms), ddp.reducer().buckets().size() + 1);  // the buckets' allreduces + the barrier
  rt::destroy();
  return 0;
}
