// The training loop (see trainer.hpp).
#include "ddplaunch/trainer.hpp"

#include <ATen/autocast_mode.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include <torch/data.h>
#include <torch/nn/functional/loss.h>
#include <torch/serialize.h>

#include "ddplaunch/tensor_dataset.hpp"

namespace ddp::runtime {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Autocast to bfloat16 on the device's type for the guard's lifetime, as Python's
// `with torch.autocast(device_type, dtype=torch.bfloat16)` does.
class AutocastScope {
 public:
  AutocastScope(bool enabled, torch::Device device) : enabled_(enabled), type_(device.type()) {
    if (!enabled_) return;
    previous_enabled_ = at::autocast::is_autocast_enabled(type_);
    previous_dtype_ = at::autocast::get_autocast_dtype(type_);
    at::autocast::set_autocast_enabled(type_, true);
    at::autocast::set_autocast_dtype(type_, torch::kBFloat16);
    at::autocast::increment_nesting();
  }
  ~AutocastScope() {
    if (!enabled_) return;
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    at::autocast::set_autocast_enabled(type_, previous_enabled_);
    at::autocast::set_autocast_dtype(type_, previous_dtype_);
  }
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool enabled_;
  torch::DeviceType type_;
  bool previous_enabled_ = false;
  torch::ScalarType previous_dtype_ = torch::kBFloat16;
};

// Module::save nests submodules as archives: parameter "0.weight" is tensor "weight" of
// archive "0". Throws c10::Error when a level is missing.
torch::Tensor read_nested(torch::serialize::InputArchive& root, const std::string& dotted) {
  torch::serialize::InputArchive level;
  torch::serialize::InputArchive* current = &root;
  std::size_t begin = 0;
  for (std::size_t dot; (dot = dotted.find('.', begin)) != std::string::npos; begin = dot + 1) {
    torch::serialize::InputArchive next;
    current->read(dotted.substr(begin, dot - begin), next);
    level = std::move(next);
    current = &level;
  }
  torch::Tensor out;
  current->read(dotted.substr(begin), out);
  return out;
}

std::string fixed(double v, int digits) {
  std::ostringstream s;
  s.setf(std::ios::fixed);
  s.precision(digits);
  s << v;
  return s.str();
}

}  // namespace

Trainer::Trainer(torch::nn::Module& module, Forward forward, torch::optim::Optimizer& optimizer, ProcessGroup& group,
                 TrainerOptions options, Loss loss)
    : module_(module),
      forward_(std::move(forward)),
      optimizer_(optimizer),
      group_(group),
      options_(std::move(options)),
      loss_(loss ? std::move(loss) : Loss([](const torch::Tensor& out, const torch::Tensor& target) {
        return torch::nn::functional::cross_entropy(out, target);
      })) {
  if (options_.batch_size() < 1 || options_.epochs() < 0)
    throw ddp::Error("trainer: batch_size " + std::to_string(options_.batch_size()) + " and epochs " +
                     std::to_string(options_.epochs()) + " must be at least 1 and 0");
}

void Trainer::log(const std::string& line) const {
  if (group_.rank() != 0) return;
  if (options_.log()) {
    options_.log()(line);
  } else {
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  }
}

torch::Tensor Trainer::all_sum(const torch::Tensor& values) {
  torch::Tensor t = values.to(group_.device(), torch::kFloat64).contiguous();
  group_.communicator()->allreduce(t, ReduceOp::Sum);
  return t.cpu();
}

int Trainer::resume() {
  if (options_.checkpoint_dir().empty()) return 0;
  const fs::path path = fs::path(options_.checkpoint_dir()) / "checkpoint.pt";
  if (!fs::exists(path)) return 0;
  torch::serialize::InputArchive archive, model, optimizer;
  torch::Tensor done, step;
  try {
    archive.load_from(path.string(), group_.device());
    archive.read("model", model);
    archive.read("optimizer", optimizer);
    archive.read("epochs_done", done);
    archive.read("step", step);
    // Shapes first: Module::load would fail deep inside a copy with sizes of flattened storage.
    for (const auto& item : module_.named_parameters()) {
      const torch::Tensor saved = read_nested(model, item.key());
      if (!saved.sizes().equals(item.value().sizes()))
        throw ddp::Error("parameter " + item.key() + " is " + c10::str(saved.sizes()) + " in the checkpoint but " +
                         c10::str(item.value().sizes()) + " in this model");
    }
    module_.load(model);
    optimizer_.load(optimizer);
  } catch (const std::exception& e) {
    const auto* torch_error = dynamic_cast<const c10::Error*>(&e);
    throw ddp::Error("checkpoint " + path.string() + " does not fit this model and optimizer: " +
                     (torch_error ? torch_error->what_without_backtrace() : e.what()) +
                     "; resume with the settings that wrote it, or use another --checkpoint-dir");
  }
  epochs_done_ = static_cast<int>(done.item<std::int64_t>());
  step_ = step.item<std::int64_t>();
  log("resumed from " + path.string() + " after epoch " + std::to_string(epochs_done_));
  return epochs_done_;
}

void Trainer::save_checkpoint() {
  if (options_.checkpoint_dir().empty()) return;
  if (group_.rank() == 0) {
    const fs::path dir(options_.checkpoint_dir());
    fs::create_directories(dir);
    torch::serialize::OutputArchive archive, model, optimizer;
    module_.save(model);
    optimizer_.save(optimizer);
    archive.write("model", model);
    archive.write("optimizer", optimizer);
    archive.write("epochs_done", torch::tensor(static_cast<std::int64_t>(epochs_done_)));
    archive.write("step", torch::tensor(step_));
    // Written aside and renamed, so a crash mid-write leaves the previous checkpoint intact.
    const fs::path tmp = dir / "checkpoint.pt.tmp";
    archive.save_to(tmp.string());
    fs::rename(tmp, dir / "checkpoint.pt");
  }
  // Nobody runs ahead (and possibly dies and resumes) before the checkpoint exists.
  group_.barrier();
}

void Trainer::fit(const torch::Tensor& inputs, const torch::Tensor& targets) {
  const TensorPairDataset dataset(inputs, targets);
  const auto n = static_cast<std::size_t>(inputs.size(0));
  const auto world = static_cast<std::size_t>(group_.world_size());
  const auto per_rank = (n + world - 1) / world;
  const auto steps_per_epoch =
      static_cast<std::int64_t>((per_rank + options_.batch_size() - 1) / options_.batch_size());
  const torch::Device device = group_.device();
  module_.train();
  for (int epoch = epochs_done_; epoch < options_.epochs(); ++epoch) {
    torch::data::samplers::DistributedRandomSampler sampler(n, world, static_cast<std::size_t>(group_.rank()));
    sampler.set_epoch(static_cast<std::size_t>(epoch) + options_.seed());
    auto loader = torch::data::make_data_loader(
        dataset, std::move(sampler),
        torch::data::DataLoaderOptions().batch_size(static_cast<std::size_t>(options_.batch_size())));
    // [loss sum, batches, samples] since the last log line, and for the whole epoch.
    torch::Tensor window = torch::zeros({3}, torch::kFloat64), total = torch::zeros({3}, torch::kFloat64);
    auto window_start = Clock::now();
    const auto epoch_start = window_start;
    std::int64_t in_epoch = 0;
    for (auto& batch : *loader) {
      const torch::Tensor x = batch.data.to(device), y = batch.target.to(device);
      optimizer_.zero_grad();
      torch::Tensor loss;
      {
        AutocastScope autocast(options_.bf16_autocast(), device);
        loss = loss_(forward_(x), y);
      }
      loss.backward();
      optimizer_.step();
      ++step_;
      ++in_epoch;
      const torch::Tensor row =
          torch::tensor({loss.item<double>(), 1.0, static_cast<double>(x.size(0))}, torch::kFloat64);
      window += row;
      total += row;
      if (options_.log_every() > 0 && in_epoch % options_.log_every() == 0) {
        const torch::Tensor sum = all_sum(window);
        const double seconds = std::chrono::duration<double>(Clock::now() - window_start).count();
        log("epoch " + std::to_string(epoch + 1) + "/" + std::to_string(options_.epochs()) + " step " +
            std::to_string(in_epoch) + "/" + std::to_string(steps_per_epoch) + " loss " +
            fixed(sum[0].item<double>() / sum[1].item<double>(), 4) + " samples/s " +
            fixed(sum[2].item<double>() / seconds, 0));
        window.zero_();
        window_start = Clock::now();
      }
      if (options_.on_step()) options_.on_step()(step_);
    }
    const torch::Tensor sum = all_sum(total);
    const double seconds = std::chrono::duration<double>(Clock::now() - epoch_start).count();
    epochs_done_ = epoch + 1;
    log("epoch " + std::to_string(epochs_done_) + "/" + std::to_string(options_.epochs()) + " done: loss " +
        fixed(sum[0].item<double>() / sum[1].item<double>(), 4) + ", " + fixed(seconds, 2) + " s, samples/s " +
        fixed(sum[2].item<double>() / seconds, 0));
    save_checkpoint();
  }
}

EvalResult Trainer::evaluate(const Forward& forward, const torch::Tensor& inputs, const torch::Tensor& targets) {
  const auto n = static_cast<std::size_t>(inputs.size(0));
  // No duplicates: every sample counts once, so shards may differ by one sample (hence a
  // forward without collectives).
  torch::data::samplers::DistributedSequentialSampler sampler(n, static_cast<std::size_t>(group_.world_size()),
                                                              static_cast<std::size_t>(group_.rank()), false);
  auto loader = torch::data::make_data_loader(
      TensorPairDataset(inputs, targets), std::move(sampler),
      torch::data::DataLoaderOptions().batch_size(static_cast<std::size_t>(options_.batch_size())));
  torch::NoGradGuard no_grad;
  module_.eval();
  double loss_sum = 0, correct = 0, count = 0;
  for (auto& batch : *loader) {
    const torch::Tensor x = batch.data.to(group_.device()), y = batch.target.to(group_.device());
    AutocastScope autocast(options_.bf16_autocast(), group_.device());
    const torch::Tensor out = forward(x);
    loss_sum += loss_(out, y).item<double>() * static_cast<double>(x.size(0));
    correct += out.argmax(1).eq(y).sum().item<double>();
    count += static_cast<double>(x.size(0));
  }
  module_.train();
  const torch::Tensor sum = all_sum(torch::tensor({loss_sum, correct, count}, torch::kFloat64));
  EvalResult result;
  result.samples = static_cast<std::int64_t>(sum[2].item<double>());
  if (result.samples > 0) {
    result.loss = sum[0].item<double>() / sum[2].item<double>();
    result.accuracy = sum[1].item<double>() / sum[2].item<double>();
  }
  return result;
}

}  // namespace ddp::runtime
