// spawn(): the branch between parent and copy, and what a copy is started with (its command line
// and environment). Starting and watching the copies is SpawnSupervisor's job.
#include "ddplaunch/spawn.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <string_view>

#include "common/exit_codes.hpp"
#include "common/log.hpp"
#include "common/worker_env.hpp"
#include "ddplaunch/rendezvous/tcp_store_server.hpp"
#include "runtime/spawn_supervisor.hpp"

namespace ddp::runtime {
namespace {

constexpr const char* kSpawnedMarker = "DDPLAUNCH_SPAWNED";
constexpr const char* kSelfExe = "/proc/self/exe";

void validate(const SpawnOptions& o) {
  if (o.nprocs() < 1)
    throw SpawnError("spawn: nprocs must be at least 1, got " + std::to_string(o.nprocs()) +
                     "; set SpawnOptions::nprocs to the number of processes to start");
  if (o.shutdown_grace().count() < 0)
    throw SpawnError("spawn: shutdown_grace must not be negative, got " + std::to_string(o.shutdown_grace().count()) +
                     " ms; use 0 to send SIGKILL right after SIGTERM");
  if (o.master_addr().empty())
    throw SpawnError(
        "spawn: master_addr is empty; leave it at 127.0.0.1 unless the copies must reach the store "
        "through another local address");
}

// The copy's side: LOCAL_RANK, then fn.
int run_child(const std::function<void(int)>& fn) {
  const char* text = std::getenv(worker_env::kLocalRank);
  const std::string_view value = text ? text : "";
  int local_rank = -1;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), local_rank);
  if (ec != std::errc() || end != value.data() + value.size() || local_rank < 0)
    throw SpawnError("spawn: DDPLAUNCH_SPAWNED=1 says spawn() started this process, but LOCAL_RANK='" +
                     std::string(value) + "' is not a rank; unset DDPLAUNCH_SPAWNED to start the copies from here");
  try {
    fn(local_rank);
  } catch (const std::exception& e) {
    log::error("rank {}: {}", local_rank, e.what());
    return kExitFailure;
  }
  return kExitOk;
}

// This process's command line, as the kernel recorded it: NUL-terminated arguments.
std::vector<std::string> self_argv() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> argv;
  for (std::size_t start = 0; start < all.size();) {
    const std::size_t nul = std::min(all.find('\0', start), all.size());
    argv.push_back(all.substr(start, nul - start));
    start = nul + 1;
  }
  if (argv.empty())
    throw SpawnError(
        "spawn: cannot read this process's command line from /proc/self/cmdline; pass it with "
        "SpawnOptions().argv(argc, argv)");
  return argv;
}

// This process's environment with the torchrun contract of `rank` set over it, as the launcher
// sets it (common/worker_env.hpp): on one node the ranks are the local ranks, the node is group 0.
Environment child_env(int rank, const SpawnOptions& o, std::uint16_t port) {
  Environment env = current_environment();
  worker_env::WorkerEnv w;
  w.rank = w.local_rank = rank;
  w.world_size = w.local_world_size = o.nprocs();
  w.master_addr = o.master_addr();
  w.master_port = port;
  worker_env::apply(env, w);
  env[kSpawnedMarker] = "1";
  return env;
}

}  // namespace

bool is_spawned_child() {
  const char* marker = std::getenv(kSpawnedMarker);
  return marker != nullptr && std::strcmp(marker, "1") == 0;
}

int spawn(const std::function<void(int local_rank)>& fn, SpawnOptions options) {
  validate(options);
  if (is_spawned_child()) return run_child(fn);

  const std::vector<std::string> argv = options.argv().empty() ? self_argv() : options.argv();
  ddp::rendezvous::TcpStoreServerOptions server_options;
  server_options.host = options.master_addr();
  server_options.port = 0;
  // The copies report their own errors; the store would only add "connection reset" lines for
  // the copies stopped after a failure.
  server_options.log = [](std::string_view) {};
  ddp::rendezvous::TcpStoreServer server(server_options);
  server.start();

  // Declared after the server, so destroyed first: no copy outlives the store.
  SpawnSupervisor supervisor(options.shutdown_grace());
  for (int rank = 0; rank < options.nprocs(); ++rank)
    supervisor.start(rank, kSelfExe, argv, child_env(rank, options, server.port()));
  return supervisor.wait();
}

}  // namespace ddp::runtime
