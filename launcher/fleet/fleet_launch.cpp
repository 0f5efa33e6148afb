// See fleet_launch.hpp.
#include "launcher/fleet/fleet_launch.hpp"

#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include <fmt/format.h>

#include "common/exit_codes.hpp"
#include "common/log.hpp"
#include "launcher/fleet/fleet_controller.hpp"
#include "launcher/fleet/forwarded_env.hpp"
#include "launcher/fleet/preflight.hpp"
#include "launcher/rdzv/job_secret.hpp"

namespace ddp::launcher {
namespace {

constexpr std::chrono::seconds kPreflightBudget{20};

std::string random_hex(std::size_t bytes) {
  std::string raw(bytes, '\0');
  std::size_t got = 0;
  while (got < bytes) {
    const ssize_t n = ::getrandom(raw.data() + got, bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error(fmt::format("getrandom: {}", std::strerror(errno)));
    got += static_cast<std::size_t>(n);
  }
  return to_hex(raw);
}

std::string read_text_file(const std::string& flag, const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UsageError(fmt::format("{} {} cannot be read ({}); give a readable file", flag, path, std::strerror(errno)));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string this_executable() {
  char path[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) throw Error(fmt::format("readlink /proc/self/exe: {}", std::strerror(errno)));
  return std::string(path, static_cast<std::size_t>(n));
}

FleetPlan make_plan(const LaunchConfig& c) {
  const FleetOptions& f = c.fleet;
  FleetPlan plan;
  plan.hosts = select_hosts(f.hostfile.empty() ? hosts_from_list(f.hosts)
                                               : parse_hostfile(read_text_file("--hostfile", f.hostfile), f.hostfile),
                            f.include, f.exclude);
  char cwd[PATH_MAX];
  if (::getcwd(cwd, sizeof cwd) == nullptr) throw Error(fmt::format("getcwd: {}", std::strerror(errno)));
  plan.cwd = cwd;
  plan.ddplaunch = f.remote_ddplaunch.empty() ? this_executable() : f.remote_ddplaunch;
  plan.master_addr = f.given_flags.count("--master_addr") > 0 ? c.master_addr : plan.hosts[0].name;
  plan.master_port = f.given_flags.count("--master_port") > 0 ? c.master_port : 29500;
  plan.run_id = f.given_flags.count("--rdzv_id") > 0 ? c.run_id : "fleet-" + random_hex(6);
  return plan;
}

Environment forwarded(const FleetOptions& f) {
  std::string file = f.env_file;
  if (file.empty() && ::access(".ddplaunch_env", R_OK) == 0) file = ".ddplaunch_env";
  return forwarded_environment(current_environment(), f.exports, file.empty() ? "" : read_text_file("--env_file", file),
                               file);
}

}  // namespace

int print_fleet_dry_run(const LaunchConfig& c) {
  const FleetPlan plan = make_plan(c);
  for (std::size_t i = 0; i < plan.hosts.size(); ++i) {
    std::cout << fmt::format("host {} (node {}): {}\n", plan.hosts[i].name, i,
                             printable_command(host_ssh_argv(c.fleet, plan, i)));
  }
  std::string names;
  for (const auto& [name, value] : forwarded(c.fleet)) names += " " + name + "=" + shell_quote(value);
  std::cout << "stdin of every host: the job secret (********, new at each launch) and the variables" << names << "\n";
  if (c.fleet.given_flags.count("--master_port") == 0) {
    std::cout << "(--master_port: node 0's host picks a free port at launch; 29500 shown)\n";
  }
  return kExitOk;
}

int run_fleet(const LaunchConfig& c) {
  const FleetOptions& f = c.fleet;
  FleetPlan plan = make_plan(c);
  const Environment env = forwarded(f);
  const Environment ssh_env = current_environment();
  const int asked_port = f.given_flags.count("--master_port") > 0 ? c.master_port : 0;
  const PreflightResult checked = run_preflight(f, plan, asked_port, ssh_env, kPreflightBudget);
  if (!checked.failures.empty()) {
    for (const std::string& line : checked.failures) log::error("{}", line);
    log::error("preflight failed on {} of {} hosts; nothing was started", checked.failures.size(), plan.hosts.size());
    return kExitUsage;
  }
  plan.master_port = checked.master_port;
  log::info("launching on {} hosts over ssh: node 0 on {} at {}:{}, run id {}", plan.hosts.size(), plan.hosts[0].name,
            plan.master_addr, plan.master_port, plan.run_id);
  return FleetController(c, FleetControllerOptions{std::move(plan), random_hex(32), env, ssh_env}).run();
}

}  // namespace ddp::launcher
