// Allreduce benchmark, our side: one rank of ddp::runtime::CpuCommunicator per process, float32
// sums at the sizes bench_allreduce.py asks for; plus the plain loopback TCP stream it is
// measured against. bench/gloo_allreduce.py is the same loop over PyTorch's Gloo.
//
//   allreduce_bench ring REPS SIZE:ITERS...
//       One rank; RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT come from the environment (rank 0
//       hosts a TcpStoreServer on MASTER_PORT). Per size: a correctness check (ones sum to
//       WORLD_SIZE), one warm-up iteration, then REPS timed loops of ITERS allreduces over zeros,
//       each loop between barriers and timed as the slowest rank's. Rank 0 prints one line per
//       size: "SIZE ITERS T1 .. Tn C1 .. Cn": per loop, the seconds per allreduce, then the CPU
//       seconds (user + system, all threads, summed over the ranks) per allreduce.
//       BENCH_SHM=0 in the environment turns shared memory off (TCP ring for every size);
//       BENCH_SHM_MIN_BYTES=N sets the size from which allreduce goes through shared memory.
//   allreduce_bench stream BYTES BUFFER REPS
//       One TCP connection over 127.0.0.1 between two threads, default socket options: moves
//       BYTES from a BUFFER-byte source to a BUFFER-byte destination (wrapping around) in send()
//       and recv() calls of at most 1 MiB; prints "BYTES_PER_S CPU_S_PER_BYTE" for each of REPS
//       transfers (CPU: user + system of both threads).
//       BUFFER = 1 MiB stays in cache; BUFFER = the tensor size reads and writes memory the way
//       an allreduce of that size does.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "ddplaunch/cpu_communicator.hpp"
#include "ddplaunch/rendezvous/tcp_store_client.hpp"
#include "ddplaunch/rendezvous/tcp_store_server.hpp"

namespace {

using Clock = std::chrono::steady_clock;
namespace rdzv = ddp::rendezvous;
using ddp::runtime::CpuCommunicator;
using ddp::runtime::CpuCommunicatorOptions;
using ddp::runtime::ReduceOp;

int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) throw std::runtime_error(std::string(name) + " is not set");
  return std::stoi(v);
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// User + system CPU seconds of this process so far, all threads.
double cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  const auto sec = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return sec(u.ru_utime) + sec(u.ru_stime);
}

int run_ring(int reps, const std::vector<std::pair<std::int64_t, int>>& sizes) {
  const int rank = env_int("RANK"), world = env_int("WORLD_SIZE");
  const auto port = static_cast<std::uint16_t>(env_int("MASTER_PORT"));
  const char* addr = std::getenv("MASTER_ADDR");
  std::unique_ptr<rdzv::TcpStoreServer> server;
  if (rank == 0) {
    rdzv::TcpStoreServerOptions so;
    so.port = port;
    server = std::make_unique<rdzv::TcpStoreServer>(so);
    server->start();
  }
  rdzv::TcpStoreClientOptions co;
  co.host = addr ? addr : "127.0.0.1";
  co.port = port;
  co.connect_timeout = std::chrono::seconds(60);
  auto store = std::make_shared<rdzv::TcpStoreClient>(co);
  auto options = CpuCommunicatorOptions().prefix("bench").advertise_host("127.0.0.1");
  if (const char* shm = std::getenv("BENCH_SHM")) options.shared_memory(std::string(shm) != "0");
  if (const char* min = std::getenv("BENCH_SHM_MIN_BYTES")) options.shared_memory_min_bytes(std::stoull(min));
  CpuCommunicator comm(store, rank, world, options);

  for (const auto& [bytes, iters] : sizes) {
    const std::int64_t n = bytes / 4;
    torch::Tensor check = torch::ones({n});
    comm.allreduce(check);
    if (!torch::equal(check, torch::full({n}, static_cast<float>(world)))) {
      std::cerr << "rank " << rank << ": wrong allreduce result at " << bytes << " bytes\n";
      return 1;
    }
    // Zeros for timing: sums stay zero (no overflow, no denormals) however many iterations run.
    torch::Tensor t = torch::zeros({n});
    comm.allreduce(t);
    std::vector<double> per_iter, cpu_per_iter;
    for (int r = 0; r < reps; ++r) {
      comm.barrier();
      const auto t0 = Clock::now();
      const double c0 = cpu_seconds();
      for (int i = 0; i < iters; ++i) comm.allreduce(t);
      torch::Tensor elapsed = torch::full({1}, seconds_since(t0), torch::kFloat64);
      torch::Tensor cpu = torch::full({1}, cpu_seconds() - c0, torch::kFloat64);
      comm.allreduce(elapsed, ReduceOp::Max);
      comm.allreduce(cpu, ReduceOp::Sum);
      per_iter.push_back(elapsed.item<double>() / iters);
      cpu_per_iter.push_back(cpu.item<double>() / iters);
    }
    if (rank == 0) {
      std::printf("%lld %d", static_cast<long long>(bytes), iters);
      for (double s : per_iter) std::printf(" %.9f", s);
      for (double s : cpu_per_iter) std::printf(" %.9f", s);
      std::printf("\n");
      std::fflush(stdout);
    }
  }
  comm.barrier();
  return 0;
}

int run_stream(std::size_t bytes, std::size_t buffer, int reps) {
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(listener, 1) != 0 ||
      ::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    std::perror("listen");
    return 1;
  }
  const int sender = ::socket(AF_INET, SOCK_STREAM, 0);
  if (::connect(sender, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    std::perror("connect");
    return 1;
  }
  const int receiver = ::accept(listener, nullptr, nullptr);
  constexpr std::size_t kCall = 1 << 20;
  std::vector<char> src(buffer, 1), dst(buffer, 0);
  // The next call's size at `done` bytes: up to kCall, not past the end of the buffer.
  const auto call = [&](std::size_t done) { return std::min({kCall, bytes - done, buffer - done % buffer}); };
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    const double c0 = cpu_seconds();
    std::thread tx([&] {
      for (std::size_t sent = 0; sent < bytes;) {
        const ssize_t k = ::send(sender, src.data() + sent % buffer, call(sent), 0);
        if (k <= 0) std::abort();
        sent += static_cast<std::size_t>(k);
      }
    });
    for (std::size_t got = 0; got < bytes;) {
      const ssize_t k = ::recv(receiver, dst.data() + got % buffer, call(got), 0);
      if (k <= 0) std::abort();
      got += static_cast<std::size_t>(k);
    }
    tx.join();
    const double elapsed = seconds_since(t0);
    std::printf("%.1f %.6e\n", static_cast<double>(bytes) / elapsed, (cpu_seconds() - c0) / static_cast<double>(bytes));
  }
  ::close(receiver);
  ::close(sender);
  ::close(listener);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "stream" && argc == 5)
      return run_stream(std::stoull(argv[2]), std::stoull(argv[3]), std::stoi(argv[4]));
    if (mode == "ring" && argc >= 4) {
      std::vector<std::pair<std::int64_t, int>> sizes;
      for (int i = 3; i < argc; ++i) {
        const std::string spec = argv[i];
        const auto colon = spec.find(':');
        sizes.emplace_back(std::stoll(spec.substr(0, colon)), std::stoi(spec.substr(colon + 1)));
      }
      return run_ring(std::stoi(argv[2]), sizes);
    }
    std::cerr << "usage: allreduce_bench ring REPS SIZE:ITERS... | allreduce_bench stream BYTES BUFFER REPS\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "allreduce_bench: " << e.what() << "\n";
    return 1;
  }
}
