// The training loop with ranks as threads: the sampler gives every rank a disjoint shard of the
// same size, a checkpoint-and-resume run ends with exactly the parameters of an uninterrupted
// one, bf16 autocast trains, and evaluate() counts every sample once.
#include "ddplaunch/trainer.hpp"

#include <filesystem>
#include <random>

#include <torch/torch.h>
#include <catch2/catch.hpp>

#include "ddplaunch/distributed_data_parallel.hpp"
#include "rank_threads.hpp"

namespace rt = ddp::runtime;
using ddp::test::run_ranks;

namespace {

// A learnable toy problem: the label is which of 3 fixed directions x points most along.
std::pair<torch::Tensor, torch::Tensor> data(std::int64_t n) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(7);
  torch::Tensor x = torch::randn({n, 4}, gen);
  const torch::Tensor w =
      torch::tensor({{1.0f, 0.0f, -1.0f}, {0.5f, 1.0f, 0.0f}, {0.0f, -1.0f, 1.0f}, {1.0f, 1.0f, 1.0f}});
  return {x, x.matmul(w).argmax(1)};
}

torch::nn::Sequential make_model() {
  torch::nn::Sequential model(torch::nn::Linear(4, 16), torch::nn::ReLU(), torch::nn::Linear(16, 3));
  torch::NoGradGuard no_grad;
  int j = 0;
  for (auto& p : model->parameters())
    p.copy_((0.4 * torch::sin(0.7 * torch::arange(p.numel(), torch::kFloat32) + ++j)).view(p.sizes()));
  return model;
}

torch::Tensor flat(const torch::nn::Module& m) {
  std::vector<torch::Tensor> v;
  for (const auto& p : m.parameters()) v.push_back(p.detach().reshape({-1}));
  return torch::cat(v);
}

struct Run {
  std::vector<torch::Tensor> params;
  std::vector<rt::EvalResult> eval;
  std::vector<std::int64_t> steps;
};

// Trains `epochs` epochs on 2 thread ranks (resuming from `dir` when it holds a checkpoint).
Run train(int epochs, const std::string& dir, bool bf16 = false) {
  Run run;
  run.params.resize(2);
  run.eval.resize(2);
  run.steps.resize(2);
  const auto [x, y] = data(300);
  run_ranks(2, [&](rt::ProcessGroup& group) {
    auto model = make_model();
    rt::DistributedDataParallel ddp(model, {}, group.communicator());
    torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
    rt::Trainer trainer(
        *model, [&](const torch::Tensor& in) { return ddp(in); }, opt, group,
        rt::TrainerOptions().epochs(epochs).batch_size(16).checkpoint_dir(dir).bf16_autocast(bf16).log(
            [](const std::string&) {}));
    trainer.resume();
    trainer.fit(x, y);
    run.eval[group.rank()] = trainer.evaluate([&](const torch::Tensor& in) { return model->forward(in); }, x, y);
    run.params[group.rank()] = flat(*model);
    run.steps[group.rank()] = trainer.step();
  });
  return run;
}

std::string fresh_dir(const std::string& name) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("ddp_trainer_" + name + "_" + std::to_string(std::random_device{}()));
  std::filesystem::remove_all(dir);
  return dir.string();
}

}  // namespace

TEST_CASE("checkpoint then resume ends with the parameters of an uninterrupted run") {
  const Run straight = train(4, "");
  const std::string dir = fresh_dir("resume");
  const Run first = train(2, dir);
  CHECK(std::filesystem::exists(std::filesystem::path(dir) / "checkpoint.pt"));
  const Run resumed = train(4, dir);
  CHECK(resumed.steps[0] == straight.steps[0]);
  CHECK(torch::equal(resumed.params[0], straight.params[0]));
  CHECK(torch::equal(resumed.params[1], straight.params[0]));
  CHECK_FALSE(torch::equal(first.params[0], straight.params[0]));
  std::filesystem::remove_all(dir);
}

TEST_CASE("training learns, evaluate counts every sample once, and all ranks agree") {
  const Run run = train(6, "");
  CHECK(run.eval[0].samples == 300);
  CHECK(run.eval[0].accuracy == run.eval[1].accuracy);
  CHECK(run.eval[0].accuracy > 0.9);
  // 300 samples over 2 ranks, 16 per batch: 10 steps per epoch on each rank.
  CHECK(run.steps[0] == 60);
}

TEST_CASE("bf16 autocast trains too") {
  const Run run = train(6, "", true);
  CHECK(torch::equal(run.params[0], run.params[1]));
  CHECK(run.eval[0].accuracy > 0.85);
}
