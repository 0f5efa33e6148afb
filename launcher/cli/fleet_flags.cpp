// See fleet_flags.hpp.
#include "launcher/cli/fleet_flags.hpp"

#include <string_view>

#include <CLI/CLI.hpp>

#include "launcher/cli/flag_app.hpp"

namespace ddp::launcher {
namespace {

// The fleet flags that take a value, in both spellings: never forwarded to a host.
constexpr std::string_view kValueFlags[] = {
    "--hostfile", "--hosts",       "--include",    "--exclude",     "--ssh_port",         "--ssh-port",
    "--ssh_option", "--ssh-option", "--export",   "--env_file",    "--env-file",         "--remote_ddplaunch",
    "--remote-ddplaunch", "--fleet_probe"};
// Flags without a value that stay on the controller.
constexpr std::string_view kBareFlags[] = {"--dry-run", "--dry_run", "--fleet_stdin"};
// What the controller sets on each host unless the user did (fleet/host_command.hpp).
constexpr std::string_view kPerHostFlags[] = {"--nnodes", "--node_rank", "--master_addr", "--master_port",
                                              "--nproc_per_node", "--rdzv_id"};

bool one_of(std::string_view arg, const auto& names) {
  for (const std::string_view name : names) {
    if (arg == name) return true;
  }
  return false;
}

}  // namespace

void declare_fleet_options(FlagApp& app, FleetOptions& f) {
  app.add_option("--hostfile", f.hostfile,
                 "launch on every host of FILE over ssh (DeepSpeed's format: `host slots=N` lines); slots become "
                 "each host's --nproc_per_node (docs/hostfile.md)")
      ->type_name("FILE");
  app.add_option("--hosts", f.hosts, "as --hostfile, from a Slurm-style host list (node[01-04])")
      ->type_name("HOSTLIST");
  app.add_option("--include", f.include, "with --hostfile/--hosts: only these hosts (and slots): host[:slot,slot]@host")
      ->type_name("SPEC");
  app.add_option("--exclude", f.exclude, "with --hostfile/--hosts: not these hosts (or slots): host[:slot,slot]@host")
      ->type_name("SPEC");
  app.add_option("--ssh_port,--ssh-port", f.ssh_port, "ssh -p PORT for every host (default: your ssh config)")
      ->type_name("PORT");
  app.add_option("--ssh_option,--ssh-option", f.ssh_options,
                 "one more ssh -o OPTION for every host, over your ssh config's value (repeat the flag for more; ddplaunch "
                 "adds only BatchMode=yes, after yours)")
      ->type_name("OPTION")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option("--export", f.exports,
                 "with --hostfile/--hosts: also forward these local variables (NAME[,NAME]; default forwarded: "
                 "NCCL_* PYTHON* CUDA_* TORCH_* PET_* OMP_* LD_LIBRARY_PATH PATH VIRTUAL_ENV)")
      ->type_name("NAME,...")
      ->delimiter(',')
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option("--env_file,--env-file", f.env_file,
                 "NAME=VALUE lines set on every host (default ./.ddplaunch_env when present; DeepSpeed's "
                 ".deepspeed_env has the same form)")
      ->type_name("FILE");
  app.add_option("--remote_ddplaunch,--remote-ddplaunch", f.remote_ddplaunch,
                 "the ddplaunch to run on the hosts (default: this one's path)")
      ->type_name("PATH");
  app.add_flag("--fleet_stdin", f.fleet_stdin, "")->group("");
  app.add_option("--fleet_probe", f.fleet_probe, "")->group("");
}

void fill_forward_args(const FlagApp& app, const std::vector<std::string>& args, std::size_t program_at,
                       FleetOptions& f) {
  f.forward_args.clear();
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (i >= program_at) {
      f.forward_args.push_back(arg);
      continue;
    }
    const std::string_view name = std::string_view(arg).substr(0, arg.find('='));
    if (one_of(name, kBareFlags)) continue;
    if (one_of(name, kValueFlags)) {
      if (name.size() == arg.size()) ++i;  // `--flag VALUE`: the value goes too
      continue;
    }
    f.forward_args.push_back(arg);
  }
  for (const std::string_view name : kPerHostFlags) {
    if (app.given(std::string(name)) > 0) f.given_flags.insert(std::string(name));
  }
}

}  // namespace ddp::launcher
