// See host_command.hpp.
#include "launcher/fleet/host_command.hpp"

#include <fmt/format.h>

namespace ddp::launcher {
namespace {

bool needs_quotes(const std::string& word) {
  return word.empty() || word.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                                "_-+=/.,:@%") != std::string::npos;
}

}  // namespace

std::string shell_quote(const std::string& word) {
  if (!needs_quotes(word)) return word;
  std::string out = "'";
  for (const char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::vector<std::string> ssh_prefix(const FleetOptions& f, const std::vector<std::string>& extra) {
  std::vector<std::string> argv{"ssh"};
  if (f.ssh_port != 0) argv.insert(argv.end(), {"-p", std::to_string(f.ssh_port)});
  for (const std::string& o : f.ssh_options) argv.insert(argv.end(), {"-o", o});
  for (const std::string& o : extra) argv.insert(argv.end(), {"-o", o});
  argv.insert(argv.end(), {"-o", "BatchMode=yes"});
  return argv;
}

std::string host_command(const FleetOptions& f, const FleetPlan& plan, std::size_t index) {
  const FleetHost& host = plan.hosts[index];
  std::vector<std::string> words{plan.ddplaunch, "--fleet_stdin"};
  const auto unless_given = [&](const char* flag, const std::string& value) {
    if (f.given_flags.count(flag) == 0) words.push_back(fmt::format("{}={}", flag, value));
  };
  unless_given("--nnodes", std::to_string(plan.hosts.size()));
  words.push_back(fmt::format("--node_rank={}", index));
  unless_given("--master_addr", plan.master_addr);
  unless_given("--master_port", std::to_string(plan.master_port));
  unless_given("--rdzv_id", plan.run_id);
  if (host.nproc() > 0) unless_given("--nproc_per_node", std::to_string(host.nproc()));
  words.insert(words.end(), f.forward_args.begin(), f.forward_args.end());
  std::string command = "cd -- " + shell_quote(plan.cwd) + " && ";
  if (host.some_slots()) {
    std::string devices;
    for (const int s : host.slot_ids) devices += (devices.empty() ? "" : ",") + std::to_string(s);
    command += "export CUDA_VISIBLE_DEVICES=" + devices + " && ";
  }
  command += "exec";
  for (const std::string& w : words) command += " " + shell_quote(w);
  return command;
}

std::vector<std::string> host_ssh_argv(const FleetOptions& f, const FleetPlan& plan, std::size_t index) {
  std::vector<std::string> argv = ssh_prefix(f);
  argv.push_back(plan.hosts[index].name);
  argv.push_back(host_command(f, plan, index));
  return argv;
}

std::string printable_command(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& w : argv) out += (out.empty() ? "" : " ") + shell_quote(w);
  return out;
}

}  // namespace ddp::launcher
