// One rank of the GPU benchmark (bench_gpu.py runs it under ddplaunch, one rank per GPU, once per
// backend: nccl-c10d, LibTorch's ProcessGroupNCCL, and nccl, ours).
//   gpu_bench --backend nccl-c10d|nccl [--iters N] [--warmup W] [--ddp-steps S]
// Rank 0 prints one line per measurement:
//   gpu_bench allreduce backend=<b> ranks=<n> bytes=<B> time_us=<median> algbw=<GB/s> busbw=<GB/s>
//   gpu_bench ddp backend=<b> ranks=<n> step_ms=<median> min_ms=<min> max_ms=<max>
// busbw is nccl-tests' bus bandwidth for allreduce: algbw * 2 (n - 1) / n, with algbw = bytes / time
// (https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md), so the numbers compare
// with nccl-tests' all_reduce_perf on the same GPUs.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <torch/cuda.h>
#include <torch/torch.h>
#include <CLI/CLI.hpp>

#include "ddplaunch/distributed_data_parallel.hpp"

namespace rt = ddp::runtime;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

int main(int argc, char** argv) {
  std::string backend = "nccl-c10d";
  int iters = 20, warmup = 5, ddp_steps = 30;
  CLI::App app{"GPU allreduce bandwidth and DDP step time of the ddplaunch runtime"};
  app.add_option("--backend", backend)->check(CLI::IsMember({"nccl-c10d", "nccl"}));
  app.add_option("--iters", iters)->check(CLI::PositiveNumber);
  app.add_option("--warmup", warmup)->check(CLI::NonNegativeNumber);
  app.add_option("--ddp-steps", ddp_steps)->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  if (!torch::cuda::is_available()) {
    std::fprintf(stderr, "gpu_bench: no CUDA device; run it on a GPU host\n");
    return 2;
  }
  rt::init(argc, argv, rt::InitOptions().backend(backend == "nccl" ? rt::Backend::Nccl : rt::Backend::NcclC10d));
  rt::ProcessGroup& group = rt::default_group();
  const torch::Device device = group.device();
  const int n = group.world_size();
  const auto sync = [&] { torch::cuda::synchronize(device.index()); };

  // Allreduce of float32 buffers, 8 B .. 256 MiB in steps of 4x (nccl-tests' -b 8 -e 256M -f 4).
  for (std::int64_t bytes = 8; bytes <= (256LL << 20); bytes *= 4) {
    torch::Tensor t = torch::ones({bytes / 4}, torch::TensorOptions().device(device));
    for (int i = 0; i < warmup; ++i) group.communicator()->allreduce(t);
    std::vector<double> times;
    for (int i = 0; i < iters; ++i) {
      group.communicator()->barrier();
      sync();
      const auto start = std::chrono::steady_clock::now();
      group.communicator()->allreduce(t);
      sync();
      times.push_back(seconds_since(start));
    }
    const double s = median(times);
    const double algbw = static_cast<double>(bytes) / s / 1e9;
    if (group.rank() == 0)
      std::printf("gpu_bench allreduce backend=%s ranks=%d bytes=%lld time_us=%.1f algbw=%.3f busbw=%.3f\n",
                  backend.c_str(), n, static_cast<long long>(bytes), s * 1e6, algbw, algbw * 2.0 * (n - 1) / n);
  }

  // DDP step of an MLP 4096-4096-4096-4096 (50 M parameters, 200 MiB of gradients), batch 64.
  torch::manual_seed(0);
  torch::nn::Sequential model(torch::nn::Linear(4096, 4096), torch::nn::ReLU(), torch::nn::Linear(4096, 4096),
                              torch::nn::ReLU(), torch::nn::Linear(4096, 4096));
  model->to(device);
  rt::DistributedDataParallel ddp(model);
  torch::optim::SGD opt(model->parameters(), 0.01);
  const torch::Tensor x = torch::randn({64, 4096}, torch::TensorOptions().device(device));
  std::vector<double> step_ms;
  for (int s = 0; s < warmup + ddp_steps; ++s) {
    sync();
    const auto start = std::chrono::steady_clock::now();
    opt.zero_grad();
    ddp(x).pow(2).mean().backward();
    opt.step();
    sync();
    if (s >= warmup) step_ms.push_back(seconds_since(start) * 1e3);
  }
  if (group.rank() == 0)
    std::printf("gpu_bench ddp backend=%s ranks=%d step_ms=%.3f min_ms=%.3f max_ms=%.3f\n", backend.c_str(), n,
                median(step_ms), *std::min_element(step_ms.begin(), step_ms.end()),
                *std::max_element(step_ms.begin(), step_ms.end()));
  rt::destroy();
  return 0;
}
