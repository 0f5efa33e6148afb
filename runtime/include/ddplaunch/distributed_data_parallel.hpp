// DistributedDataParallel for LibTorch modules: wrap a model, train it as usual, and every rank
// takes the same optimizer step on gradients averaged over all ranks, with the averaging of early
// buckets overlapping the rest of backward.
//
//   ddp::runtime::init(argc, argv);
//   auto model = std::make_shared<Net>();
//   ddp::runtime::DistributedDataParallel ddp(model);           // broadcasts rank 0's weights
//   torch::optim::SGD opt(model->parameters(), 0.1);
//   for (auto& batch : *loader) {
//     opt.zero_grad();
//     auto loss = torch::nll_loss(ddp(batch.data), batch.target);
//     loss.backward();                                          // gradients are averaged here
//     opt.step();
//   }
#pragma once

#include <memory>
#include <utility>

#include "ddplaunch/process_group.hpp"
#include "ddplaunch/reducer.hpp"

namespace ddp::runtime {

// Re-enables gradient synchronisation when it goes out of scope (see no_sync()).
class NoSyncGuard {
 public:
  explicit NoSyncGuard(Reducer& reducer) : reducer_(&reducer), previous_(reducer.sync()) { reducer.set_sync(false); }
  ~NoSyncGuard() {
    if (reducer_ != nullptr) reducer_->set_sync(previous_);
  }
  NoSyncGuard(NoSyncGuard&& other) noexcept
      : reducer_(std::exchange(other.reducer_, nullptr)), previous_(other.previous_) {}
  NoSyncGuard(const NoSyncGuard&) = delete;
  NoSyncGuard& operator=(const NoSyncGuard&) = delete;
  NoSyncGuard& operator=(NoSyncGuard&&) = delete;

 private:
  Reducer* reducer_;
  bool previous_;
};

// `Module` is what holds the model: a ModuleHolder (torch::nn::Sequential, torch::nn::Linear, a
// TORCH_MODULE type) or a std::shared_ptr to a torch::nn::Module subclass; forward() forwards to
// its forward().
//
// Blocking and errors: the constructor runs collectives (see Reducer); forward() broadcasts
// buffers; backward() of a loss computed through forward() returns once gradients are averaged
// and throws the communicator's errors (TimeoutError, PeerError naming the rank) or
// CommunicatorError for parameters without a gradient. Not thread-safe: one training thread.
template <typename Module>
class DistributedDataParallel {
 public:
  // `comm` defaults to the default group's communicator (init() must have run).
  explicit DistributedDataParallel(Module module, DistributedDataParallelOptions options = {},
                                   std::shared_ptr<Communicator> comm = nullptr)
      : module_(std::move(module)) {
    std::vector<std::string> names;
    std::vector<torch::Tensor> params;
    for (const auto& item : module_->named_parameters()) {
      names.push_back(item.key());
      params.push_back(item.value());
    }
    reducer_ = std::make_unique<Reducer>(std::move(names), std::move(params), module_->buffers(),
                                         comm ? std::move(comm) : default_group().communicator(), std::move(options));
  }

  template <typename... Args>
  decltype(auto) forward(Args&&... args) {
    reducer_->prepare_for_forward();
    return module_->forward(std::forward<Args>(args)...);
  }
  template <typename... Args>
  decltype(auto) operator()(Args&&... args) {
    return forward(std::forward<Args>(args)...);
  }

  // Backward passes inside the guard's scope accumulate gradients locally; the first backward
  // after it averages the accumulated gradients (gradient accumulation without extra traffic).
  [[nodiscard]] NoSyncGuard no_sync() { return NoSyncGuard(*reducer_); }

  Module& module() { return module_; }
  const Module& module() const { return module_; }
  Reducer& reducer() { return *reducer_; }

 private:
  Module module_;
  std::unique_ptr<Reducer> reducer_;
};

}  // namespace ddp::runtime
