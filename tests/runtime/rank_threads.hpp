// Ranks as threads for runtime tests: each thread gets its own ProcessGroup (CPU communicator)
// over one shared in-memory store, runs the body, and the first exception is rethrown after
// every thread has joined (Catch assertions are not thread-safe, so bodies compute and throw).
#pragma once

#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ddplaunch/process_group.hpp"
#include "rendezvous/memory_store.hpp"

namespace ddp::test {

inline std::vector<std::exception_ptr> run_rank_threads(int world,
                                                        const std::function<void(runtime::ProcessGroup&)>& body,
                                                        std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  static std::atomic<int> run{0};
  auto store = std::make_shared<rendezvous::MemoryStore>();
  const std::string prefix = "threads" + std::to_string(run++);
  std::vector<std::exception_ptr> errors(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        runtime::DistEnv env;
        env.rank = r;
        env.world_size = world;
        env.local_rank = r;
        env.local_world_size = world;
        env.master_addr = "127.0.0.1";
        runtime::ProcessGroup group(
            runtime::InitOptions().dist_env(env).store(store).prefix(prefix).timeout(timeout).backend(
                runtime::Backend::Cpu));
        body(group);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

// run_rank_threads, rethrowing the first rank's exception.
inline void run_ranks(int world, const std::function<void(runtime::ProcessGroup&)>& body,
                      std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  for (const auto& e : run_rank_threads(world, body, timeout))
    if (e) std::rethrow_exception(e);
}

}  // namespace ddp::test
