// DistributedDataParallel with ranks as threads (CPU communicator over an in-memory store):
// equivalence with one process training on the union of the ranks' batches, for 2 and 3 ranks
// and for several bucket layouts; identical parameters on every rank after every step;
// find_unused_parameters; no_sync accumulation; comm hooks; buffer and parameter broadcast;
// mismatched models; a rank that goes away during backward.
#include "ddplaunch/distributed_data_parallel.hpp"

#include <array>
#include <condition_variable>
#include <mutex>
#include <optional>

#include "ddplaunch/cpu_communicator.hpp"
#include "ddplaunch/process_group.hpp"

#include <torch/torch.h>
#include <catch2/catch.hpp>

#include "rank_threads.hpp"
#include "runtime/bucket_plan.hpp"

namespace rt = ddp::runtime;
using Catch::Matchers::Contains;
using ddp::test::run_rank_threads;
using ddp::test::run_ranks;

namespace {

constexpr int kSteps = 20;
constexpr int kBatch = 6;  // per rank

torch::nn::Sequential make_model() {
  torch::nn::Sequential model(torch::nn::Linear(8, 32), torch::nn::Tanh(), torch::nn::Linear(32, 32), torch::nn::Tanh(),
                              torch::nn::Linear(32, 4));
  // Deterministic weights without the global generator (ranks are threads).
  torch::NoGradGuard no_grad;
  int j = 0;
  for (auto& p : model->parameters()) {
    const auto i = torch::arange(p.numel(), torch::kFloat32);
    p.copy_((0.3 * torch::sin(0.37 * i + 1.3 * ++j)).view(p.sizes()));
  }
  return model;
}

// Batch `step` of `rank`: inputs [kBatch, 8] and targets [kBatch, 4] from a private generator.
std::pair<torch::Tensor, torch::Tensor> batch(int rank, int step) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(1000 * step + rank);
  torch::Tensor x = torch::randn({kBatch, 8}, gen);
  torch::Tensor y = torch::randn({kBatch, 4}, gen);
  return {x, y};
}

torch::Tensor flat_params(const torch::nn::Module& m) {
  std::vector<torch::Tensor> v;
  for (const auto& p : m.parameters()) v.push_back(p.detach().reshape({-1}));
  return torch::cat(v);
}

double rel_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).abs().max().item<double>() / b.abs().max().item<double>();
}

// One process, SGD on the mean loss over every rank's batch of each step.
torch::Tensor reference(int world, int steps) {
  auto model = make_model();
  torch::optim::SGD opt(model->parameters(), 0.1);
  for (int s = 0; s < steps; ++s) {
    opt.zero_grad();
    torch::Tensor loss = torch::zeros({});
    for (int r = 0; r < world; ++r) {
      auto [x, y] = batch(r, s);
      loss = loss + torch::mse_loss(model->forward(x), y) / world;
    }
    loss.backward();
    opt.step();
  }
  return flat_params(*model);
}

// Trains on `world` thread ranks; checks identical parameters on every rank after every step and
// returns each rank's final parameters.
std::vector<torch::Tensor> train_ddp(int world, rt::DistributedDataParallelOptions options, int steps = kSteps) {
  std::vector<torch::Tensor> out(world);
  run_ranks(world, [&](rt::ProcessGroup& group) {
    auto model = make_model();
    rt::DistributedDataParallel ddp(model, options, group.communicator());
    torch::optim::SGD opt(model->parameters(), 0.1);
    for (int s = 0; s < steps; ++s) {
      opt.zero_grad();
      auto [x, y] = batch(group.rank(), s);
      torch::mse_loss(ddp.forward(x), y).backward();
      opt.step();
      const torch::Tensor all = group.communicator()->allgather(flat_params(*model));
      for (int r = 1; r < world; ++r)
        if (!torch::equal(all[r], all[0]))
          throw std::runtime_error("rank " + std::to_string(r) + " differs from rank 0 after step " +
                                   std::to_string(s));
    }
    out[group.rank()] = flat_params(*model);
  });
  return out;
}

}  // namespace

TEST_CASE("DDP on 2 and 3 ranks equals one process on the union of the batches") {
  for (int world : {2, 3}) {
    const torch::Tensor expected = reference(world, kSteps);
    for (double cap : {25.0, 0.002}) {
      INFO("world " << world << ", bucket_cap_mb " << cap);
      const auto got =
          train_ddp(world, rt::DistributedDataParallelOptions().bucket_cap_mb(cap).first_bucket_cap_mb(cap / 2));
      for (const auto& p : got) CHECK(rel_diff(p, expected) <= 1e-5);
    }
  }
}

TEST_CASE("bucket boundaries and overlap do not change the result") {
  const auto base = train_ddp(2, rt::DistributedDataParallelOptions());
  const auto tiny =
      train_ddp(2, rt::DistributedDataParallelOptions().bucket_cap_mb(0.0001).first_bucket_cap_mb(0.0001));
  const auto late = train_ddp(2, rt::DistributedDataParallelOptions().overlap(false));
  CHECK(torch::equal(base[0], tiny[0]));
  CHECK(torch::equal(base[0], late[0]));
}

TEST_CASE("buckets follow reverse registration order, the first one smaller") {
  std::vector<torch::Tensor> params;
  for (int i = 0; i < 6; ++i) params.push_back(torch::zeros({256}));  // 1 KiB each
  params.push_back(torch::zeros({256}, torch::kFloat64));
  const auto plan = rt::plan_buckets(params, 1024, 3 * 1024);
  REQUIRE(plan.size() == 4);
  CHECK(plan[0] == std::vector<std::size_t>{6});  // float64 group: alone, first cap reached
  CHECK(plan[1] == std::vector<std::size_t>{5});  // float32 first bucket: 1 KiB cap
  CHECK(plan[2] == std::vector<std::size_t>{4, 3, 2});
  CHECK(plan[3] == std::vector<std::size_t>{1, 0});
}

TEST_CASE("the reducer launches a bucket per cap and hooks see every bucket once per step") {
  std::vector<std::size_t> buckets_seen(2, 0), calls(2, 0);
  run_ranks(2, [&](rt::ProcessGroup& group) {
    auto model = make_model();
    std::size_t count = 0;
    auto hook = [&count](rt::Communicator& comm, rt::GradBucket& bucket) {
      ++count;
      comm.allreduce(bucket.buffer(), rt::ReduceOp::Average);
    };
    rt::DistributedDataParallel ddp(
        model, rt::DistributedDataParallelOptions().bucket_cap_mb(0.001).first_bucket_cap_mb(0.0005).comm_hook(hook),
        group.communicator());
    for (int s = 0; s < 3; ++s) {
      auto [x, y] = batch(group.rank(), s);
      torch::mse_loss(ddp(x), y).backward();
    }
    buckets_seen[group.rank()] = ddp.reducer().buckets().size();
    calls[group.rank()] = count;
  });
  CHECK(buckets_seen[0] > 2);
  CHECK(calls[0] == 3 * buckets_seen[0]);
  CHECK(calls[1] == calls[0]);
}

namespace {

// Forwards to a real communicator and records how the reducer uses overlapped() and
// join_overlapped(), as a GPU communicator would see it.
class OverlapRecorder : public rt::Communicator {
 public:
  explicit OverlapRecorder(std::shared_ptr<rt::Communicator> inner) : inner_(std::move(inner)) {}
  rt::Backend backend() const override { return inner_->backend(); }
  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  void allreduce(const torch::Tensor& t, rt::ReduceOp op) override { inner_->allreduce(t, op); }
  void broadcast(const torch::Tensor& t, int root) override { inner_->broadcast(t, root); }
  torch::Tensor allgather(const torch::Tensor& t) override { return inner_->allgather(t); }
  void barrier() override { inner_->barrier(); }
  void close() override { inner_->close(); }
  void overlapped(const std::function<void()>& body) override {
    ++overlapped_calls;
    pending = true;
    inside = true;
    body();
    inside = false;
  }
  void join_overlapped() override {
    if (pending) ++joins;
    pending = false;
  }
  bool inside = false;   // body is running
  bool pending = false;  // overlapped work not joined yet
  int overlapped_calls = 0;
  int joins = 0;

 private:
  std::shared_ptr<rt::Communicator> inner_;
};

}  // namespace

TEST_CASE("every bucket's hook runs as overlapped work, joined once per step before backward returns") {
  std::vector<torch::Tensor> grads(2);
  run_ranks(2, [&](rt::ProcessGroup& group) {
    auto comm = std::make_shared<OverlapRecorder>(group.communicator());
    auto model = make_model();
    int hooks = 0, outside = 0;
    auto hook = [&](rt::Communicator& c, rt::GradBucket& bucket) {
      ++hooks;
      if (!comm->inside) ++outside;
      c.allreduce(bucket.buffer(), rt::ReduceOp::Average);
    };
    rt::DistributedDataParallel ddp(
        model, rt::DistributedDataParallelOptions().bucket_cap_mb(0.001).first_bucket_cap_mb(0.0005).comm_hook(hook),
        comm);
    for (int s = 0; s < 3; ++s) {
      auto [x, y] = batch(group.rank(), s);
      torch::mse_loss(ddp(x), y).backward();
      CHECK_FALSE(comm->pending);  // the gradients were read after the join
      CHECK(comm->joins == s + 1);
    }
    CHECK(hooks == 3 * static_cast<int>(ddp.reducer().buckets().size()));
    CHECK(comm->overlapped_calls == hooks);
    CHECK(outside == 0);
    grads[static_cast<std::size_t>(group.rank())] = flat_params(*model);
  });
  CHECK(torch::equal(grads[0], grads[1]));
}

TEST_CASE("bf16 compression averages within bfloat16 precision") {
  std::vector<torch::Tensor> grads(2), exact(2);
  for (const bool bf16 : {true, false}) {
    const rt::CommHook hook = bf16 ? rt::bf16_compress_hook() : rt::allreduce_hook();
    run_ranks(2, [&](rt::ProcessGroup& group) {
      auto model = make_model();
      rt::DistributedDataParallel ddp(model, rt::DistributedDataParallelOptions().comm_hook(hook),
                                      group.communicator());
      auto [x, y] = batch(group.rank(), 0);
      torch::mse_loss(ddp(x), y).backward();
      std::vector<torch::Tensor> g;
      for (auto& p : model->parameters()) g.push_back(p.grad().reshape({-1}));
      (bf16 ? grads : exact)[group.rank()] = torch::cat(g);
    });
  }
  CHECK(torch::equal(grads[0], grads[1]));
  CHECK(rel_diff(grads[0], exact[0]) < 1e-2);
  CHECK(rel_diff(grads[0], exact[0]) > 0);  // it did go through bfloat16
}

namespace {

// Two branches; `use_b` decides whether branch b takes part in the output.
struct TwoBranchImpl : torch::nn::Module {
  TwoBranchImpl() {
    a = register_module("a", torch::nn::Linear(4, 2));
    b = register_module("b", torch::nn::Linear(4, 2));
    never = register_module("never", torch::nn::Linear(4, 2));
    torch::NoGradGuard no_grad;
    for (auto& p : parameters()) p.fill_(0.5);
  }
  torch::Tensor forward(const torch::Tensor& x, bool use_b) { return use_b ? a(x) + b(x) : a(x); }
  torch::nn::Linear a{nullptr}, b{nullptr}, never{nullptr};
};
TORCH_MODULE(TwoBranch);

}  // namespace

TEST_CASE("a parameter without gradient is an error naming it unless find_unused_parameters") {
  const auto errors = run_rank_threads(2, [&](rt::ProcessGroup& group) {
    TwoBranch model;
    rt::DistributedDataParallel ddp(model, {}, group.communicator());
    ddp(torch::ones({3, 4}), true).sum().backward();
  });
  for (const auto& e : errors) {
    REQUIRE(e);
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      CHECK_THAT(ex.what(), Contains("never.weight") && Contains("find_unused_parameters(true)"));
    }
  }
}

TEST_CASE("find_unused_parameters: a branch one rank skips gets the average, one nobody uses stays empty") {
  std::vector<torch::Tensor> a_grad(2), b_grad(2), never_grad(2);
  run_ranks(2, [&](rt::ProcessGroup& group) {
    TwoBranch model;
    rt::DistributedDataParallel ddp(model, rt::DistributedDataParallelOptions().find_unused_parameters(true),
                                    group.communicator());
    for (int s = 0; s < 2; ++s) {  // the second step checks that the state resets cleanly
      model->zero_grad();
      ddp(torch::ones({3, 4}), group.rank() == 0).sum().backward();
    }
    a_grad[group.rank()] = model->a->weight.grad().clone();
    b_grad[group.rank()] = model->b->weight.grad().clone();
    never_grad[group.rank()] = model->never->weight.grad();
  });
  // d(sum)/dW = 3 (rows of ones) for every weight element of a used branch.
  CHECK(torch::allclose(a_grad[0], torch::full({2, 4}, 3.0)));
  CHECK(torch::allclose(b_grad[0], torch::full({2, 4}, 1.5)));  // (3 + 0) / 2
  CHECK(torch::equal(b_grad[0], b_grad[1]));
  CHECK_FALSE(never_grad[0].defined());
  CHECK_FALSE(never_grad[1].defined());
}

TEST_CASE("no_sync accumulation equals the large batch") {
  const int world = 2, micro = 3;
  std::vector<torch::Tensor> got(world);
  run_ranks(world, [&](rt::ProcessGroup& group) {
    auto model = make_model();
    rt::DistributedDataParallel ddp(model, {}, group.communicator());
    torch::optim::SGD opt(model->parameters(), 0.1);
    {
      auto guard = ddp.no_sync();
      for (int m = 0; m < micro - 1; ++m) {
        auto [x, y] = batch(group.rank(), m);
        torch::mse_loss(ddp(x), y).backward();
      }
    }
    auto [x, y] = batch(group.rank(), micro - 1);
    torch::mse_loss(ddp(x), y).backward();
    opt.step();
    got[group.rank()] = flat_params(*model);
  });
  auto model = make_model();
  torch::optim::SGD opt(model->parameters(), 0.1);
  torch::Tensor loss = torch::zeros({});
  for (int r = 0; r < world; ++r)
    for (int m = 0; m < micro; ++m) {
      auto [x, y] = batch(r, m);
      loss = loss + torch::mse_loss(model->forward(x), y) / world;
    }
  loss.backward();
  opt.step();
  CHECK(torch::equal(got[0], got[1]));
  CHECK(rel_diff(got[0], flat_params(*model)) <= 1e-5);
}

TEST_CASE("construction broadcasts rank 0's parameters and forward its buffers") {
  std::vector<torch::Tensor> params(2), means(2);
  run_ranks(2, [&](rt::ProcessGroup& group) {
    torch::nn::Sequential model(torch::nn::Linear(4, 4), torch::nn::BatchNorm1d(4));
    {
      torch::NoGradGuard no_grad;
      for (auto& p : model->parameters()) p.fill_(group.rank() + 1.0);
    }
    rt::DistributedDataParallel ddp(model, {}, group.communicator());
    model->named_buffers()["1.running_mean"].fill_(group.rank() * 10.0);
    model->eval();  // no statistics update: what we read is what was broadcast
    ddp(torch::ones({2, 4}));
    params[group.rank()] = flat_params(*model);
    means[group.rank()] = model->named_buffers()["1.running_mean"].clone();
  });
  CHECK(torch::equal(params[1], params[0]));
  CHECK(torch::allclose(params[0], torch::ones_like(params[0])));
  CHECK(torch::equal(means[1], torch::zeros({4})));
}

TEST_CASE("ranks with different models fail naming the rank that differs") {
  const auto errors = run_rank_threads(2, [&](rt::ProcessGroup& group) {
    torch::nn::Linear model(4, group.rank() == 0 ? 4 : 5);
    rt::DistributedDataParallel ddp(model, {}, group.communicator());
  });
  for (const auto& e : errors) {
    REQUIRE(e);
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      CHECK_THAT(ex.what(), Contains("rank 1 has 2 parameters with 25 elements, rank 0 has 2 with 20"));
    }
  }
}

TEST_CASE("a rank that goes away during training makes backward fail naming it") {
  const auto errors = run_rank_threads(
      2,
      [&](rt::ProcessGroup& group) {
        auto model = make_model();
        rt::DistributedDataParallel ddp(model, {}, group.communicator());
        auto [x, y] = batch(group.rank(), 0);
        if (group.rank() == 1) {
          group.close();
          return;
        }
        torch::mse_loss(ddp(x), y).backward();
      },
      std::chrono::seconds(20));
  REQUIRE(errors[0]);
  try {
    std::rethrow_exception(errors[0]);
  } catch (const std::exception& e) {
    CHECK_THAT(e.what(), Contains("rank 1"));
  }
}

TEST_CASE("DDPLAUNCH_SHM chooses between shared memory and the TCP ring, a bad value names it") {
  const auto with_shm = [](std::optional<std::string> shm) -> rt::EnvLookup {
    return [shm](const std::string& name) { return name == "DDPLAUNCH_SHM" ? shm : std::nullopt; };
  };
  for (const auto& [value, expected] : {std::pair<std::optional<std::string>, bool>{std::nullopt, true},
                                        {std::string("1"), true},
                                        {std::string("0"), false}}) {
    std::array<bool, 2> used{!expected, !expected};
    ddp::test::rethrow_first(ddp::test::run_rank_threads(
        2,
        [&](rt::ProcessGroup& group) {
          used[group.rank()] = dynamic_cast<rt::CpuCommunicator&>(*group.communicator()).uses_shared_memory();
        },
        std::chrono::seconds(30), with_shm(value)));
    CHECK(used[0] == expected);
    CHECK(used[1] == expected);
  }
  const auto errors = ddp::test::run_rank_threads(
      2, [](rt::ProcessGroup&) {}, std::chrono::seconds(30), with_shm(std::string("yes")));
  try {
    ddp::test::rethrow_first(errors);
    FAIL("DDPLAUNCH_SHM=yes was accepted");
  } catch (const rt::EnvError& e) {
    CHECK_THAT(e.what(), Catch::Contains("DDPLAUNCH_SHM='yes'"));
  }
}

// Overlap is real: with it on, the first bucket (the last layer's gradients) is reduced while
// backward is still computing the first layer's gradient. The first layer's gradient hook waits
// for the comm hook of bucket 0, which can only come from the communication thread during
// backward; with overlap off the wait runs out (the negative control).
TEST_CASE("with overlap, the first bucket is reduced while backward still runs") {
  for (const bool overlap : {true, false}) {
    std::array<int, 2> reduced_during_backward{0, 0};
    run_ranks(2, [&](rt::ProcessGroup& group) {
      auto model = make_model();
      std::mutex m;
      std::condition_variable cv;
      bool bucket0 = false;
      auto hook = [&](rt::Communicator& comm, rt::GradBucket& bucket) {
        comm.allreduce(bucket.buffer(), rt::ReduceOp::Average);
        if (bucket.index() != 0) return;
        std::lock_guard lock(m);
        bucket0 = true;
        cv.notify_all();
      };
      rt::DistributedDataParallel ddp(model,
                                      rt::DistributedDataParallelOptions()
                                          .bucket_cap_mb(0.001)
                                          .first_bucket_cap_mb(0.0005)
                                          .overlap(overlap)
                                          .comm_hook(hook),
                                      group.communicator());
      const auto wait = overlap ? std::chrono::seconds(20) : std::chrono::seconds(1);
      model->parameters().front().register_hook([&](torch::Tensor grad) {
        std::unique_lock lock(m);
        if (cv.wait_for(lock, wait, [&] { return bucket0; })) ++reduced_during_backward[group.rank()];
        return grad;
      });
      for (int s = 0; s < (overlap ? 3 : 1); ++s) {
        {
          std::lock_guard lock(m);
          bucket0 = false;
        }
        auto [x, y] = batch(group.rank(), s);
        torch::mse_loss(ddp(x), y).backward();
      }
    });
    INFO("overlap " << overlap);
    CHECK(reduced_during_backward[0] == (overlap ? 3 : 0));
    CHECK(reduced_during_backward[1] == (overlap ? 3 : 0));
  }
}
