// ddplaunch: parse → run → exit code.
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "common/child_process.hpp"
#include "common/exit_codes.hpp"
#include "common/log.hpp"
#include "ddplaunch/common/env_lookup.hpp"
#include "launcher/agent/agent.hpp"
#include "launcher/backends.hpp"
#include "launcher/cli/cli.hpp"
#include "launcher/config/file_flag.hpp"
#include "launcher/dry_run.hpp"
#include "launcher/dump_stacks.hpp"
#include "launcher/fleet/control_channel.hpp"
#include "launcher/fleet/fleet_launch.hpp"
#include "launcher/fleet/port_probe.hpp"
#include "launcher/kubeflow/progress_reporter.hpp"
#include "launcher/replicas/replica_layout.hpp"
#include "launcher/replicas/replica_supervisor.hpp"
#include "launcher/status/status_query.hpp"
#include "launcher/workers/job_lifetime.hpp"
#include "launcher/workers/process_context.hpp"

int main(int argc, char** argv) {
  using namespace ddp::launcher;
  namespace log = ddp::log;
  try {
    log::set_level_from_env();
    // Started by a controller over ssh (fleet/): the secret and the environment come on stdin,
    // before the command line is read (PET_* variables among them are its defaults).
    int control_fd = -1;
    for (int i = 1; i < argc && control_fd < 0; ++i) {
      if (std::strcmp(argv[i], "--fleet_stdin") == 0) control_fd = adopt_controller_header(read_controller_header(0), 0);
    }
    const ParsedCommandLine parsed = parse_command_line(argc, argv, ddp::process_env(), rendezvous_backends());
    if (parsed.early_exit_text) {
      std::cout << *parsed.early_exit_text;
      return ddp::kExitOk;
    }
    if (!parsed.config.log_level.empty()) log::set_level(log::parse_level(parsed.config.log_level));
    if (parsed.config.fleet.active()) {
      return parsed.config.dry_run ? print_fleet_dry_run(parsed.config) : run_fleet(parsed.config);
    }
    if (!parsed.config.fleet.fleet_probe.empty()) return run_port_probe(parsed.config);
    if (parsed.config.dry_run && parsed.config.replicas.supervises()) {
      // TorchFT's layout, then one group's launcher as --dry-run shows any launcher.
      std::cout << describe_layout(parsed.config, ddp::current_environment()) << "group 0's launcher:\n";
      LaunchConfig group0 = parsed.config;
      group0.replicas.index = 0;
      return print_dry_run(group_config(group0));
    }
    if (parsed.config.dry_run) return print_dry_run(parsed.config);
    if (parsed.config.dump_stacks) return request_stacks(parsed.config);
    if (parsed.config.status) return print_status(parsed.config);
    // A replica group's launcher (--replica_groups): its own ports, files and run id (replica_layout.hpp).
    const LaunchConfig config = parsed.config.replicas.index >= 0 ? group_config(parsed.config) : parsed.config;
    if (config.replicas.index >= 0) log::set_program("ddplaunch[replica " + std::to_string(config.replicas.index) + "]");
    // Before anything starts: a FIFO or a device named by a file flag exits 2 (file_flag.hpp).
    check_file_flags(config);
    // --replica_groups (TorchFT): this launcher starts the lighthouse and one ddplaunch per group
    // with this command line; each of those runs the agent below as its group.
    if (config.replicas.supervises()) {
      ReplicaSupervisor layout(
          {config, "/proc/self/exe", std::vector<std::string>(argv, argv + argc), ddp::current_environment()});
      return layout.run();
    }
    // Before any thread: the reaper starts as a copy of this process or on its memory (job_lifetime.hpp).
    // DDPLAUNCH_CGROUP=0: process groups only (what a machine without a writable cgroup v2 gets).
    const char* cgroup = std::getenv("DDPLAUNCH_CGROUP");
    const bool use_cgroup = cgroup == nullptr || std::string(cgroup) != "0";
    JobLifetime lifetime(JobLifetimeOptions{config.run_id, config.shutdown_timeout, use_cgroup});
    if (control_fd >= 0) watch_controller(control_fd);  // a thread: after the lifetime's reaper
    AgentDeps deps;
    deps.backend = make_backend;
    deps.processes = [&lifetime](boost::asio::io_context& io, OutputPolicy policy) {
      return make_supervised_process_context(io, policy, lifetime);
    };
    deps.workers_done = [&lifetime] { lifetime.end_job(); };
    deps.lifetime = &lifetime;
    // Kubeflow Trainer's Progress plugin gave this pod its status endpoint: report to it
    // (kubeflow/progress_reporter.hpp). After the lifetime's reaper, which must start first.
    std::unique_ptr<ProgressReporter> progress;
    if (auto endpoint = trainer_status_endpoint(ddp::process_env())) {
      ProgressReporterOptions o;
      o.endpoint = std::move(*endpoint);
      o.progress_file = config.progress_file;
      o.max_restarts = config.max_restarts;
      progress = std::make_unique<ProgressReporter>(std::move(o));
      deps.listeners.push_back(progress.get());
    }
    const int code = run_agent(config, std::move(deps));
    lifetime.finish();  // nothing of the job is left when we exit
    return code;
  } catch (const UsageError& e) {
    log::error("{}", e.what());
    return ddp::kExitUsage;
  } catch (const std::system_error& e) {
    // EAGAIN from a thread or process we could not create: name the limit that is usually why.
    const bool limit = e.code() == std::errc::resource_unavailable_try_again;
    log::error("{}{}", e.what(), limit ? "; " + ddp::process_limit_hint() : "");
    return ddp::kExitFailure;
  } catch (const std::exception& e) {
    log::error("{}", e.what());
    return ddp::kExitFailure;
  }
}
