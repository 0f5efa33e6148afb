// A worker process for test_cpu_communicator_procs: one rank of a CPU communicator over the
// store at 127.0.0.1:<port>. Usage: comm_worker PORT RANK WORLD MODE [VICTIM]
//   MODE=check: allreduce, broadcast, allgather and barrier; prints "ok rank R shm=0|1" (whether
//               allreduce went through shared memory) and exits 0.
//   MODE=crash: loops allreduce; rank VICTIM SIGKILLs itself 200 ms in; the others print
//               "error: <message>" ("PeerError: <message>" for a PeerError) and exit 1 once the
//               collective fails.
//   MODE=stall: as crash, but rank VICTIM stops itself (SIGSTOP) instead, and the collective
//               timeout is 2 s, so the others fail with a TimeoutError naming it.
//   A "-tcp" suffix (check-tcp, crash-tcp) turns shared memory off.
#include <signal.h>

#include <chrono>
#include <iostream>
#include <string>
#include <thread>

#include "ddplaunch/cpu_communicator.hpp"
#include "ddplaunch/rendezvous/tcp_store_client.hpp"

using namespace std::chrono_literals;
namespace rdzv = ddp::rendezvous;
using ddp::runtime::CpuCommunicator;
using ddp::runtime::CpuCommunicatorOptions;
using ddp::runtime::ReduceOp;

int main(int argc, char** argv) {
  if (argc < 5) {
    std::cerr << "usage: comm_worker PORT RANK WORLD check|crash [VICTIM]\n";
    return 2;
  }
  const int port = std::stoi(argv[1]), rank = std::stoi(argv[2]), world = std::stoi(argv[3]);
  const std::string mode = argv[4];
  try {
    rdzv::TcpStoreClientOptions so;
    so.port = static_cast<std::uint16_t>(port);
    so.connect_timeout = 10s;
    auto store = std::make_shared<rdzv::TcpStoreClient>(so);
    const bool tcp = mode.ends_with("-tcp");
    CpuCommunicator comm(store, rank, world,
                         CpuCommunicatorOptions()
                             .prefix(mode)
                             .timeout(mode.starts_with("stall") ? 2s : 60s)
                             .advertise_host("127.0.0.1")
                             .shared_memory(!tcp));
    if (mode.starts_with("check")) {
      torch::Tensor t = torch::full({1000003}, rank + 1, torch::kFloat64);
      comm.allreduce(t, ReduceOp::Sum);
      if (!torch::equal(t, torch::full({1000003}, world * (world + 1) / 2, torch::kFloat64))) {
        std::cout << "bad allreduce\n";
        return 1;
      }
      torch::Tensor b = torch::full({777}, rank, torch::kInt32);
      comm.broadcast(b, world - 1);
      if (!torch::equal(b, torch::full({777}, world - 1, torch::kInt32))) {
        std::cout << "bad broadcast\n";
        return 1;
      }
      const torch::Tensor g = comm.allgather(torch::full({3}, rank, torch::kInt64));
      for (int r = 0; r < world; ++r)
        if (!torch::equal(g[r], torch::full({3}, r, torch::kInt64))) {
          std::cout << "bad allgather\n";
          return 1;
        }
      comm.barrier();
      std::cout << "ok rank " << rank << " shm=" << comm.uses_shared_memory() << std::endl;
      return 0;
    }
    const int victim = argc > 5 ? std::stoi(argv[5]) : world - 1;
    if (rank == victim)
      std::thread([signal = mode.starts_with("stall") ? SIGSTOP : SIGKILL] {
        // Mid-allreduce: nothing marks a rank as inside one, so 200 ms into the loop below.
        std::this_thread::sleep_for(200ms);
        ::raise(signal);
      }).detach();
    torch::Tensor t = torch::ones({1 << 20});
    for (;;) comm.allreduce(t, ReduceOp::Average);
  } catch (const ddp::runtime::PeerError& e) {
    std::cout << "PeerError: " << e.what() << std::endl;
    return 1;
  } catch (const std::exception& e) {
    std::cout << "error: " << e.what() << std::endl;
    return 1;
  }
}
