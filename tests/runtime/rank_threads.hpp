// Ranks as threads for runtime tests: a thread per rank whose exceptions are collected after all
// have joined (Catch assertions are not thread-safe, so bodies compute and throw), optionally with
// its own ProcessGroup (CPU communicator) over one shared in-memory store; per-rank inputs.
#pragma once

#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <torch/torch.h>

#include "ddplaunch/process_group.hpp"
#include "ddplaunch/rendezvous/memory_store.hpp"

namespace ddp::test {

// Runs body(rank) on `world` threads and returns each rank's exception (null where none),
// after joining them all.
inline std::vector<std::exception_ptr> run_threads(int world, const std::function<void(int rank)>& body) {
  std::vector<std::exception_ptr> errors(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

// Rethrows the first of `errors` that is set.
inline void rethrow_first(const std::vector<std::exception_ptr>& errors) {
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
}

// Rank r's input to a reduction: small integers, so sums are exact even in bfloat16.
inline torch::Tensor rank_input(std::int64_t n, int rank, torch::ScalarType dtype) {
  return (torch::arange(n, torch::kInt64).remainder(7) * (rank % 2 == 0 ? 1 : -1) + rank).to(dtype);
}

// The ranks' inputs reduced exactly, in float64 (Average: the sum, which callers divide with the
// rounding their collective promises).
inline torch::Tensor reduced_inputs(std::int64_t n, int world, runtime::ReduceOp op) {
  torch::Tensor acc = rank_input(n, 0, torch::kFloat64);
  for (int r = 1; r < world; ++r) {
    const torch::Tensor x = rank_input(n, r, torch::kFloat64);
    if (op == runtime::ReduceOp::Min)
      acc = torch::minimum(acc, x);
    else if (op == runtime::ReduceOp::Max)
      acc = torch::maximum(acc, x);
    else
      acc = acc + x;
  }
  return acc;
}

// Every rank a ProcessGroup (CPU communicator) over one in-memory store; `env` is where the
// group reads variables such as DDPLAUNCH_SHM (empty: this process's environment).
inline std::vector<std::exception_ptr> run_rank_threads(int world,
                                                        const std::function<void(runtime::ProcessGroup&)>& body,
                                                        std::chrono::milliseconds timeout = std::chrono::seconds(60),
                                                        runtime::EnvLookup env_lookup = {}) {
  static std::atomic<int> run{0};
  auto store = std::make_shared<rendezvous::MemoryStore>();
  const std::string prefix = "threads" + std::to_string(run++);
  return run_threads(world, [&](int r) {
    runtime::DistEnv env;
    env.rank = r;
    env.world_size = world;
    env.local_rank = r;
    env.local_world_size = world;
    env.master_addr = "127.0.0.1";
    runtime::ProcessGroup group(runtime::InitOptions()
                                    .dist_env(env)
                                    .store(store)
                                    .prefix(prefix)
                                    .timeout(timeout)
                                    .env(env_lookup)
                                    .backend(runtime::Backend::Cpu));
    body(group);
  });
}

// run_rank_threads, rethrowing the first rank's exception.
inline void run_ranks(int world, const std::function<void(runtime::ProcessGroup&)>& body,
                      std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  rethrow_first(run_rank_threads(world, body, timeout));
}

}  // namespace ddp::test
