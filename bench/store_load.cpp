// Load generator for a TCPStore server (ours or PyTorch's): CONNS connections, each on its own
// thread with our TcpStoreClient, for SECONDS.
//   store_load HOST PORT CONNS SECONDS mix       set / get (WAIT+GET) / add / check, in turn
//   store_load HOST PORT CONNS SECONDS pingpong  pairs of connections: one sets a key, the other
//                                                waits for it and answers; a round trip is 1 op
// Prints one JSON line: {"ops": N, "ops_per_s": X, "p50_us": Y, "p99_us": Z}.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "rendezvous/tcp_store_client.hpp"

namespace rdzv = ddp::rendezvous;
using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: store_load HOST PORT CONNS SECONDS mix|pingpong\n");
    return 2;
  }
  rdzv::TcpStoreClientOptions o;
  o.host = argv[1];
  o.port = static_cast<std::uint16_t>(std::atoi(argv[2]));
  o.connect_timeout = std::chrono::seconds(30);
  o.timeout = std::chrono::seconds(30);
  int conns = std::max(1, std::atoi(argv[3]));
  const auto duration = std::chrono::milliseconds(static_cast<long>(std::atof(argv[4]) * 1000));
  const std::string mode = argv[5];
  const bool pingpong = mode == "pingpong";
  if (pingpong && conns % 2 == 1) ++conns;  // ping-pong needs pairs

  std::vector<std::unique_ptr<rdzv::TcpStoreClient>> clients;
  for (int i = 0; i < conns; ++i) clients.push_back(std::make_unique<rdzv::TcpStoreClient>(o));
  std::vector<std::vector<float>> latencies(static_cast<std::size_t>(conns));
  std::atomic<bool> stop{false};
  std::atomic<int> ready{0};
  const auto timeout = std::chrono::milliseconds(10000);
  std::vector<std::thread> threads;
  for (int t = 0; t < conns; ++t) {
    threads.emplace_back([&, t] {
      auto& c = *clients[static_cast<std::size_t>(t)];
      auto& lat = latencies[static_cast<std::size_t>(t)];
      lat.reserve(1 << 16);
      ++ready;
      while (ready.load() < conns) std::this_thread::yield();  // start together
      const std::string me = "t" + std::to_string(t) + "/";
      const int peer = t ^ 1;
      try {
        for (long i = 0; !stop.load(std::memory_order_relaxed); ++i) {
          const auto start = Clock::now();
          if (!pingpong) {
            switch (i % 4) {
              case 0:
                c.set(me + std::to_string(i % 64), "value-" + std::to_string(i));
                break;
              case 1:
                c.get(me + std::to_string((i - 1) % 64), timeout);
                break;
              case 2:
                c.add("counter", 1);
                break;
              default:
                c.check({me + std::to_string(i % 64)});
                break;
            }
          } else if (peer < conns) {
            // Even threads ping, odd threads pong; the round trip is timed on the even side.
            const std::string ping = "pp/" + std::to_string(t & ~1) + "/" + std::to_string(i);
            if (t % 2 == 0) {
              c.set(ping, "x");
              c.get(ping + "/ack", timeout);
            } else {
              c.get(ping, timeout);
              c.set(ping + "/ack", "y");
              continue;
            }
          }
          lat.push_back(std::chrono::duration<float, std::micro>(Clock::now() - start).count());
        }
      } catch (const rdzv::ConnectionError&) {
        // Interrupted at the end of the run (a pong side waiting for a ping that never comes).
      }
    });
  }
  while (ready.load() < conns) std::this_thread::yield();
  const auto t0 = Clock::now();
  std::this_thread::sleep_for(duration);  // the measurement window itself
  stop = true;
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  // Let rounds in flight finish, then break the connections of threads still parked in a wait
  // for a ping that will never come.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  for (auto& c : clients) c->interrupt();
  for (auto& th : threads) th.join();
  std::vector<float> all;
  for (auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  std::sort(all.begin(), all.end());
  const auto pct = [&](double p) { return all.empty() ? 0.0 : all[static_cast<std::size_t>(p * (all.size() - 1))]; };
  std::printf("{\"ops\": %zu, \"ops_per_s\": %.1f, \"p50_us\": %.1f, \"p99_us\": %.1f}\n", all.size(),
              static_cast<double>(all.size()) / secs, pct(0.50), pct(0.99));
  return 0;
}
