// The gradient reducer (see reducer.hpp for the step-by-step description).
#include "ddplaunch/reducer.hpp"

#include <chrono>
#include <cstdint>
#include <map>

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/torch.h>

#include "runtime/bucket_plan.hpp"

namespace ddp::runtime {

struct Reducer::Hook : torch::autograd::PostAccumulateGradHook {
  Hook(Reducer* reducer, std::size_t index) : reducer(reducer), index(index) {}
  void operator()(const torch::autograd::Variable& /*param*/) override { reducer->on_grad_ready(index); }
  Reducer* reducer;
  std::size_t index;
};

Reducer::Reducer(std::vector<std::string> names, std::vector<torch::Tensor> parameters,
                 std::vector<torch::Tensor> buffers, std::shared_ptr<Communicator> comm,
                 DistributedDataParallelOptions options)
    : buffers_(std::move(buffers)), comm_(std::move(comm)), options_(std::move(options)) {
  if (!comm_) throw CommunicatorError("DistributedDataParallel needs a communicator; call ddp::runtime::init() first");
  if (names.size() != parameters.size()) names.resize(parameters.size());
  if (options_.bucket_cap_mb() <= 0 || options_.first_bucket_cap_mb() <= 0)
    throw CommunicatorError("bucket_cap_mb " + std::to_string(options_.bucket_cap_mb()) + " / first_bucket_cap_mb " +
                            std::to_string(options_.first_bucket_cap_mb()) + " must be positive");
  hook_ = options_.comm_hook() ? options_.comm_hook() : allreduce_hook();
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    if (!parameters[i].requires_grad()) continue;
    names_.push_back(names[i]);
    params_.push_back(parameters[i]);
  }
  verify_shapes();
  broadcast_coalesced(parameters);
  broadcast_coalesced(buffers_);

  constexpr double kMiB = 1024.0 * 1024.0;
  plan_ = plan_buckets(params_, static_cast<std::size_t>(options_.first_bucket_cap_mb() * kMiB),
                       static_cast<std::size_t>(options_.bucket_cap_mb() * kMiB));
  bucket_of_.resize(params_.size());
  slot_of_.resize(params_.size());
  for (std::size_t b = 0; b < plan_.size(); ++b) {
    Bucket bucket;
    bucket.params = plan_[b];
    std::int64_t total = 0;
    for (std::size_t s = 0; s < bucket.params.size(); ++s) {
      const std::size_t i = bucket.params[s];
      bucket_of_[i] = b;
      slot_of_[i] = s;
      bucket.offsets.push_back(total);
      total += params_[i].numel();
    }
    const torch::Tensor& first = params_[bucket.params.front()];
    bucket.buffer = torch::zeros({total}, first.options().requires_grad(false));
    buckets_.push_back(std::move(bucket));
  }
  reset_step();
  for (std::size_t i = 0; i < params_.size(); ++i)
    torch::autograd::impl::set_post_acc_grad_hooks(params_[i], std::make_unique<Hook>(this, i));
  if (comm_->backend() == Backend::Cpu) comm_thread_ = std::thread([this] { comm_loop(); });
}

Reducer::~Reducer() {
  for (const torch::Tensor& p : params_) torch::autograd::impl::set_post_acc_grad_hooks(p, nullptr);
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  // A bucket's collective in flight finishes (or fails at the communicator's timeout) first.
  if (comm_thread_.joinable()) comm_thread_.join();
}

void Reducer::verify_shapes() {
  // One row per rank: parameter count, element count and a hash of every shape and dtype.
  std::uint64_t hash = 1469598103934665603ull;
  std::int64_t elements = 0;
  for (const torch::Tensor& p : params_) {
    for (std::int64_t d : p.sizes()) hash = (hash ^ static_cast<std::uint64_t>(d)) * 1099511628211ull;
    hash = (hash ^ static_cast<std::uint64_t>(p.scalar_type())) * 1099511628211ull;
    elements += p.numel();
  }
  const torch::Tensor mine = torch::tensor(
      {static_cast<std::int64_t>(params_.size()), elements, static_cast<std::int64_t>(hash >> 1)}, torch::kInt64);
  const torch::Tensor all =
      comm_->allgather(mine.to(params_.empty() ? torch::Device(torch::kCPU) : params_[0].device())).cpu();
  const auto rows = all.accessor<std::int64_t, 2>();
  for (int r = 1; r < comm_->world_size(); ++r) {
    if (rows[r][0] == rows[0][0] && rows[r][1] == rows[0][1] && rows[r][2] == rows[0][2]) continue;
    throw CommunicatorError("rank " + std::to_string(r) + " has " + std::to_string(rows[r][0]) + " parameters with " +
                            std::to_string(rows[r][1]) + " elements, rank 0 has " + std::to_string(rows[0][0]) +
                            " with " + std::to_string(rows[0][1]) +
                            (rows[r][0] == rows[0][0] && rows[r][1] == rows[0][1] ? " (shapes or dtypes differ)" : "") +
                            "; every rank must build the same model before DistributedDataParallel");
  }
}

void Reducer::broadcast_coalesced(const std::vector<torch::Tensor>& tensors) {
  if (comm_->world_size() == 1 || tensors.empty()) return;
  torch::NoGradGuard no_grad;
  // One flat tensor per dtype and device: a few large broadcasts instead of one per tensor.
  std::map<std::pair<int, std::string>, std::vector<torch::Tensor>> groups;
  for (const torch::Tensor& t : tensors) groups[{static_cast<int>(t.scalar_type()), t.device().str()}].push_back(t);
  for (auto& [key, group] : groups) {
    std::vector<torch::Tensor> flat_views;
    for (const torch::Tensor& t : group) flat_views.push_back(t.reshape({-1}));
    torch::Tensor flat = torch::cat(flat_views);
    comm_->broadcast(flat, 0);
    std::int64_t offset = 0;
    for (const torch::Tensor& t : group) {
      t.copy_(flat.narrow(0, offset, t.numel()).view(t.sizes()));
      offset += t.numel();
    }
  }
}

void Reducer::prepare_for_forward() {
  {
    std::unique_lock lock(mutex_);
    // A backward that threw before its final callback left a step half done.
    if (in_backward_) {
      wait_launched(lock);
      reset_step();
    }
  }
  if (options_.broadcast_buffers()) broadcast_coalesced(buffers_);
}

void Reducer::set_sync(bool enabled) {
  std::lock_guard lock(mutex_);
  sync_ = enabled;
}

bool Reducer::sync() const {
  std::lock_guard lock(mutex_);
  return sync_;
}

torch::Tensor Reducer::slot(std::size_t index) const {
  const Bucket& b = buckets_[bucket_of_[index]];
  return b.buffer.narrow(0, b.offsets[slot_of_[index]], params_[index].numel()).view(params_[index].sizes());
}

void Reducer::on_grad_ready(std::size_t index) {
  std::lock_guard lock(mutex_);
  if (!sync_ || ready_[index]) return;
  if (!in_backward_) {
    in_backward_ = true;
    torch::autograd::Engine::get_default_engine().queue_callback([this] { finalize(); });
  }
  const torch::Tensor& grad = params_[index].grad();
  if (grad.is_sparse())
    throw CommunicatorError("parameter '" + names_[index] + "' has a sparse gradient; DistributedDataParallel " +
                            "reduces dense gradients only");
  {
    torch::NoGradGuard no_grad;
    slot(index).copy_(grad);
  }
  ready_[index] = true;
  if (--buckets_[bucket_of_[index]].pending == 0) launch_ready(false);
}

void Reducer::launch_ready(bool all) {
  if (!options_.overlap() && !all) return;
  while (next_launch_ < buckets_.size() && buckets_[next_launch_].pending == 0) {
    const std::size_t b = next_launch_++;
    ++launched_;
    if (comm_thread_.joinable()) {
      jobs_.push_back(b);
      cv_.notify_all();
      continue;
    }
    try {
      run_bucket(b);
    } catch (const std::exception&) {
      if (!error_) error_ = std::current_exception();
    }
    ++done_;
  }
}

void Reducer::run_bucket(std::size_t b) {
  const Bucket& bucket = buckets_[b];
  std::vector<torch::Tensor> params;
  for (std::size_t i : bucket.params) params.push_back(params_[i]);
  GradBucket grad_bucket(b, b + 1 == buckets_.size(), bucket.buffer, std::move(params));
  torch::NoGradGuard no_grad;
  // On a GPU the hook's work runs on the communicator's stream: backward's later kernels do not
  // wait behind the bucket's allreduce (finalize joins the two streams once).
  comm_->overlapped([&] { hook_(*comm_, grad_bucket); });
}

void Reducer::comm_loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
    if (stopping_) return;
    const std::size_t b = jobs_.front();
    jobs_.pop_front();
    lock.unlock();
    std::exception_ptr failure;
    try {
      run_bucket(b);
    } catch (const std::exception&) {
      failure = std::current_exception();
    }
    lock.lock();
    if (failure && !error_) error_ = failure;
    ++done_;
    cv_.notify_all();
  }
}

void Reducer::wait_launched(std::unique_lock<std::mutex>& lock) {
  cv_.wait(lock, [&] { return done_ == launched_; });
  // The caller's stream reads (or next writes) the buckets only after the overlapped work.
  comm_->join_overlapped();
}

void Reducer::reset_step() {
  ready_.assign(params_.size(), false);
  for (Bucket& b : buckets_) b.pending = b.params.size();
  next_launch_ = launched_ = done_ = 0;
  error_ = nullptr;
  in_backward_ = false;
}

void Reducer::finalize() {
  torch::NoGradGuard no_grad;
  std::unique_lock lock(mutex_);
  const std::vector<bool> used = ready_;
  std::vector<std::size_t> unused;
  for (std::size_t i = 0; i < params_.size(); ++i)
    if (!ready_[i]) unused.push_back(i);
  if (!unused.empty() && !options_.find_unused_parameters()) {
    wait_launched(lock);
    reset_step();
    std::string list;
    for (std::size_t k = 0; k < unused.size() && k < 8; ++k) list += (k ? ", " : "") + names_[unused[k]];
    if (unused.size() > 8) list += ", ... (" + std::to_string(unused.size()) + " in all)";
    throw CommunicatorError("parameters got no gradient in this backward: " + list +
                            "; they did not take part in computing the loss. Construct DistributedDataParallel "
                            "with DistributedDataParallelOptions().find_unused_parameters(true), or use them");
  }
  for (std::size_t i : unused) {
    // Gradients accumulated under no_sync() still count; a parameter never used adds zeros.
    const torch::Tensor& grad = params_[i].grad();
    if (grad.defined())
      slot(i).copy_(grad);
    else
      slot(i).zero_();
    ready_[i] = true;
    --buckets_[bucket_of_[i]].pending;
  }
  launch_ready(true);
  const auto start = std::chrono::steady_clock::now();
  wait_launched(lock);
  last_wait_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (error_) {
    const std::exception_ptr failure = error_;
    reset_step();
    std::rethrow_exception(failure);
  }
  std::vector<bool> global_used(params_.size(), true);
  if (options_.find_unused_parameters()) {
    // Which parameters some rank used: those keep .grad untouched only when no rank did.
    torch::Tensor flags = torch::zeros({static_cast<std::int64_t>(params_.size())}, torch::kInt32);
    for (std::size_t i = 0; i < params_.size(); ++i) flags[static_cast<std::int64_t>(i)] = used[i] ? 1 : 0;
    torch::Tensor reduced = flags.to(params_.front().device());
    comm_->allreduce(reduced, ReduceOp::Max);
    reduced = reduced.cpu();
    const auto acc = reduced.accessor<std::int32_t, 1>();
    for (std::size_t i = 0; i < params_.size(); ++i) global_used[i] = acc[static_cast<std::int64_t>(i)] != 0;
  }
  for (std::size_t i = 0; i < params_.size(); ++i) {
    if (!global_used[i]) continue;
    torch::Tensor& grad = params_[i].mutable_grad();
    if (grad.defined())
      grad.copy_(slot(i));
    else
      grad = slot(i).clone();
  }
  reset_step();
}

}  // namespace ddp::runtime
