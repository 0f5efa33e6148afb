// A small program using spawn(), run by test_spawn. Usage:
//   spawn_probe --nprocs N [--fail-rank R --fail-code C] [--hang-rank R [--ignore-sigterm]]
//               [--throw-rank R] [--grace-ms M]
// Each copy reads its environment as init() would (dist_env_from_process) and prints
// "rank=<RANK> local_rank=<LOCAL_RANK> world=<WORLD_SIZE> port=<MASTER_PORT> pid=<pid>" and
// "rank=<RANK> env NAME=value..." with a few other variables spawn() sets or passes on. Then the
// fail rank exits with C, the hang rank sleeps forever (ignoring SIGTERM with --ignore-sigterm),
// the throw rank throws; every other rank adds 1 to "count" in the private store, the one that
// brings it to WORLD_SIZE sets "done", and all wait for "done" and print "rank=<RANK> done".
// The parent prints "parent: code=<c> unreaped=<none|running|pid> env=<unchanged|changed>" once
// spawn() returned (proof that spawn() reaped every copy itself and left the parent's environment
// alone) and exits with c. Bad options: a message, exit 2.
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/exit_codes.hpp"
#include "ddplaunch/dist_env.hpp"
#include "ddplaunch/rendezvous/tcp_store_client.hpp"
#include "ddplaunch/spawn.hpp"

extern char** environ;

using namespace std::chrono_literals;

namespace {

struct Flags {
  int nprocs = 1;
  int fail_rank = -1;
  int fail_code = 1;
  int hang_rank = -1;
  bool ignore_sigterm = false;
  int throw_rank = -1;
  int grace_ms = 5000;
};

Flags parse(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--ignore-sigterm") {
      f.ignore_sigterm = true;
      continue;
    }
    if (i + 1 >= argc) throw std::invalid_argument("missing value after " + a);
    const int v = std::stoi(argv[++i]);
    if (a == "--nprocs")
      f.nprocs = v;
    else if (a == "--fail-rank")
      f.fail_rank = v;
    else if (a == "--fail-code")
      f.fail_code = v;
    else if (a == "--hang-rank")
      f.hang_rank = v;
    else if (a == "--throw-rank")
      f.throw_rank = v;
    else if (a == "--grace-ms")
      f.grace_ms = v;
    else
      throw std::invalid_argument("unknown flag " + a);
  }
  return f;
}

std::vector<std::string> environment() {
  std::vector<std::string> out;
  for (char** e = environ; *e != nullptr; ++e) out.emplace_back(*e);
  return out;
}

void say(const std::string& line) {
  // One write per line, so that lines of different copies do not interleave on the shared pipe.
  std::cout << line + "\n" << std::flush;
}

void run_rank(const Flags& f, int argc, char** argv) {
  const ddp::runtime::DistEnv env = ddp::runtime::dist_env_from_process(argc, argv);
  const std::string rank = std::to_string(env.rank);
  // Before the line below, so that a test that saw the line may count on it.
  if (env.rank == f.hang_rank && f.ignore_sigterm) std::signal(SIGTERM, SIG_IGN);
  say("rank=" + rank + " local_rank=" + std::to_string(env.local_rank) + " world=" + std::to_string(env.world_size) +
      " port=" + std::to_string(env.master_port) + " pid=" + std::to_string(::getpid()));
  std::string vars = "rank=" + rank + " env";
  for (const char* name : {"GROUP_RANK", "ROLE_RANK", "ROLE_WORLD_SIZE", "GROUP_WORLD_SIZE", "OMP_NUM_THREADS",
                           "DDPLAUNCH_SPAWNED", "SPAWN_TEST_INHERITED"}) {
    const char* value = std::getenv(name);
    vars += std::string(" ") + name + "=" + (value ? value : "<unset>");
  }
  say(vars);
  if (env.rank == f.fail_rank) std::exit(f.fail_code);
  if (env.rank == f.throw_rank) throw std::runtime_error("probe failure on purpose");
  if (env.rank == f.hang_rank)
    for (;;) ::pause();
  ddp::rendezvous::TcpStoreClientOptions o;
  o.host = env.master_addr;
  o.port = env.master_port;
  o.connect_timeout = 30s;
  ddp::rendezvous::TcpStoreClient store(o);
  if (store.add("count", 1) == env.world_size) store.set("done", "1");
  store.wait({"done"}, 60s);
  say("rank=" + rank + " done");
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  try {
    flags = parse(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "spawn_probe: " << e.what() << "\n";
    return ddp::kExitUsage;
  }
  const auto options = ddp::runtime::SpawnOptions(flags.nprocs)
                           .argv(argc, argv)
                           .shutdown_grace(std::chrono::milliseconds(flags.grace_ms));
  const std::vector<std::string> env_before = environment();
  int code = 0;
  try {
    code = ddp::runtime::spawn([&](int) { run_rank(flags, argc, argv); }, options);
  } catch (const ddp::Error& e) {
    std::cerr << "spawn_probe: " << e.what() << "\n";
    return ddp::kExitUsage;
  }
  if (ddp::runtime::is_spawned_child()) return code;
  const pid_t left = ::waitpid(-1, nullptr, WNOHANG);
  const std::string unreaped = left < 0 && errno == ECHILD ? "none" : left == 0 ? "running" : std::to_string(left);
  const std::string env = environment() == env_before ? "unchanged" : "changed";
  say("parent: code=" + std::to_string(code) + " unreaped=" + unreaped + " env=" + env);
  return code;
}
