// Shared by the CPU communicator suites that run ranks as threads: a store server on a free
// loopback port, communicator options with a fresh prefix, a runner that gives every rank a
// thread, and per-rank inputs with their expected reductions.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ddplaunch/cpu_communicator.hpp"
#include "ddplaunch/rendezvous/tcp_store_client.hpp"
#include "ddplaunch/rendezvous/tcp_store_server.hpp"
#include "tests/runtime/rank_threads.hpp"

namespace ddp::testing::cpu_comm {

namespace rdzv = ddp::rendezvous;
using ddp::runtime::CpuCommunicator;
using ddp::runtime::CpuCommunicatorOptions;
using ddp::runtime::ReduceOp;
using namespace std::chrono_literals;

struct Server {
  rdzv::TcpStoreServer server{[] {
    rdzv::TcpStoreServerOptions o;
    o.host = "127.0.0.1";
    o.log = [](std::string_view) {};
    return o;
  }()};
  Server() { server.start(); }
  std::shared_ptr<rdzv::Store> client() {
    rdzv::TcpStoreClientOptions o;
    o.host = "127.0.0.1";
    o.port = server.port();
    o.connect_timeout = 10s;
    return std::make_shared<rdzv::TcpStoreClient>(o);
  }
};

inline std::atomic<int> prefix_counter{0};

inline CpuCommunicatorOptions options(std::chrono::milliseconds timeout = 60s) {
  return CpuCommunicatorOptions()
      .prefix("t" + std::to_string(prefix_counter++))
      .timeout(timeout)
      .advertise_host("127.0.0.1");
}

// Runs body(comm) on `world` threads, one communicator each; rethrows the first exception after
// joining them all (Catch assertions are not thread-safe, so bodies only compute and throw).
inline void run_ranks(Server& server, int world, const CpuCommunicatorOptions& opts,
                      const std::function<void(CpuCommunicator&)>& body) {
  test::rethrow_first(test::run_threads(world, [&](int r) {
    CpuCommunicator comm(server.client(), r, world, opts);
    body(comm);
  }));
}

inline torch::Tensor input(std::int64_t n, int rank, torch::ScalarType dtype) {
  return test::rank_input(n, rank, dtype);
}

inline torch::Tensor expected(std::int64_t n, int world, torch::ScalarType dtype, ReduceOp op) {
  const torch::Tensor acc = test::reduced_inputs(n, world, op);
  if (op == ReduceOp::Average) {
    if (torch::isFloatingType(dtype)) return (acc.to(dtype) / world).to(dtype);
    return acc.to(dtype).div(world, "trunc");
  }
  return acc.to(dtype);
}

inline const std::vector<torch::ScalarType> kDtypes{torch::kFloat32, torch::kFloat64, torch::kBFloat16,
                                                    torch::kFloat16, torch::kInt32,   torch::kInt64};
inline const std::vector<ReduceOp> kOps{ReduceOp::Sum, ReduceOp::Average, ReduceOp::Min, ReduceOp::Max};
inline const std::vector<std::int64_t> kSizes{0, 1, 3, 5, 1000, 1000003};

}  // namespace ddp::testing::cpu_comm
