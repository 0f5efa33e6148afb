// CommandLineValues → LaunchConfig; see command_line_config.hpp.
#include "launcher/cli/command_line_config.hpp"

#include <sys/random.h>

#include <algorithm>
#include <cstdint>
#include <random>

#include <fmt/format.h>

#include "common/hostlist.hpp"
#include "common/mpi_env.hpp"
#include "common/signals.hpp"
#include "common/worker_env.hpp"
#include "launcher/cli/c10d_ranks.hpp"
#include "launcher/cli/mpi.hpp"
#include "launcher/cli/replica_options.hpp"
#include "launcher/cli/rdzv_backend_choice.hpp"
#include "launcher/cli/slurm.hpp"
#include "launcher/cli/torchrun_env.hpp"
#include "launcher/config/failure_budget.hpp"
#include "launcher/cli/volcano.hpp"
#include "launcher/config/flag_parsers.hpp"
#include "launcher/config/rdzv_conf.hpp"
#include "launcher/rdzv/job_secret.hpp"

namespace ddp::launcher {
namespace {

// The duration flags' validator (cli_options.cpp) has already refused any other text.
std::chrono::milliseconds checked_seconds(const std::string& text) {
  const auto ms = parse_seconds(text);
  DDP_ASSERT(ms, "a duration flag's text was not validated: '" + text + "'");
  return *ms;
}

std::string random_run_id() {
  // getrandom, not std::random_device: libstdc++'s probes the CPU (cpuid, rdrand) on first use,
  // which costs tens of microseconds in a virtual machine, on every single-node launch.
  std::uint32_t words[2];
  if (::getrandom(words, sizeof words, 0) != static_cast<ssize_t>(sizeof words)) {
    std::random_device rd;  // a kernel without getrandom (before 3.17)
    words[0] = rd();
    words[1] = rd();
  }
  return fmt::format("{:x}{:x}", words[0], words[1]);
}

// Nodes, workers per node, and where node 0's store is.
void apply_nodes(const CommandLineValues& v, const EnvLookup& env, const NvidiaDriverProbe& nvidia_driver,
                 const std::vector<BackendKind>& backends, LaunchConfig& c) {
  const NodeRange nodes = parse_nnodes(v.nnodes.value_or("1"));
  c.min_nodes = nodes.min;
  c.max_nodes = nodes.max;
  c.nproc_per_node = parse_nproc(v.nproc_per_node, env, nvidia_driver);
  if (v.node_rank) c.node_rank = parse_whole_number("--node_rank", *v.node_rank);
  if (v.master_addr) c.master_addr = *v.master_addr;
  if (v.master_port) c.master_port = parse_whole_number("--master_port", *v.master_port);
  // --rdzv_endpoint names node 0's store, unless the backend meets elsewhere (etcd's members).
  const BackendKind* backend = find_backend(backends, c.rdzv_backend);
  if (!c.rdzv_endpoint.empty() && (!backend || backend->rules.node0_hosts_store)) {
    const Endpoint endpoint = parse_endpoint(c.rdzv_endpoint);
    c.master_addr = endpoint.host;
    if (endpoint.port) c.master_port = *endpoint.port;
  }
}

// A duration flag's value: as given, else --failure_budget's setting when there is a budget, else
// the default.
std::chrono::milliseconds given_or(const std::string& text, bool budget, std::chrono::milliseconds from_budget,
                                   std::chrono::milliseconds otherwise) {
  if (!text.empty()) return checked_seconds(text);
  return budget ? from_budget : otherwise;
}

// The timeouts: flags first (each given alone wins over --failure_budget), then --rdzv_conf keys,
// which override them.
void apply_durations(const CommandLineValues& v, const EnvLookup& env, LaunchConfig& c) {
  using std::chrono::seconds;
  c.monitor_interval = checked_seconds(v.monitor_interval);
  c.failure_budget = v.failure_budget.empty() ? std::chrono::milliseconds(0) : checked_seconds(v.failure_budget);
  const bool budget = c.failure_budget.count() > 0;
  const BudgetSettings b = settings_for_budget(c.failure_budget);
  c.shutdown_timeout = budget && v.shutdown_timeout.empty() && !env("TORCH_ELASTIC_SHUTDOWN_TIMEOUT")
                           ? b.shutdown_timeout
                           : shutdown_timeout_from(v.shutdown_timeout, env);
  c.hang_timeout = given_or(v.hang_timeout, budget, b.hang_timeout, seconds(0));
  c.exit_barrier_timeout = exit_barrier_timeout_from(v.exit_barrier_timeout, env);
  c.stragglers = straggler_mode_from(v.stragglers).value_or(StragglerMode::Warn);
  c.straggler_window = checked_seconds(v.straggler_window);
  c.straggler_replace_after = checked_seconds(v.straggler_replace_after);
  // Unset: torchrun's one grace (30 s) or a longer --shutdown_timeout, as a torchrun user expects.
  c.preemption_grace = v.preemption_grace.empty()
                           ? std::max<std::chrono::milliseconds>(std::chrono::seconds(30), c.shutdown_timeout)
                           : checked_seconds(v.preemption_grace);
  c.unkillable_timeout = given_or(v.unkillable_timeout, budget, b.unkillable_timeout, seconds(30));
  c.rdzv_timeout = checked_seconds(v.rdzv_timeout);
  c.heartbeat_timeout = given_or(v.heartbeat_timeout, budget, b.heartbeat_timeout, seconds(10));
  apply_rdzv_conf(v.rdzv_conf, c);
  // Five beats per timeout, so one late beat never counts as a lost node.
  c.heartbeat_interval = std::max(std::chrono::milliseconds(50), c.heartbeat_timeout / 5);
}

void apply_output(const CommandLineValues& v, LaunchConfig& c) {
  c.redirects = parse_streams("--redirects", v.redirects);
  c.tee = parse_streams("--tee", v.tee);
  for (const std::string& rank : split_list(v.local_ranks_filter)) {
    c.local_ranks_filter.push_back(parse_whole_number("--local_ranks_filter", rank));
  }
}

std::vector<int> parse_signals(const std::optional<std::string>& flag, const EnvLookup& env) {
  if (flag && flag->empty()) {
    throw UsageError("--signals_to_handle is empty; list signals such as SIGTERM,SIGINT,SIGUSR1");
  }
  const std::string names = flag ? *flag : env(worker_env::kSignalsToHandle).value_or(kDefaultSignalsToHandle);
  std::vector<int> signals;
  for (const std::string& name : split_list(names)) signals.push_back(parse_signal(name));
  return signals;
}

// torchrun 2.15's rule for a single node (not elastic) with no port given anywhere: a free port
// and, unless --rdzv_id named one, a random run id, so two single-node jobs on one machine never
// collide on 29500. MASTER_PORT, when set, is the port instead.
void apply_single_node_port(const EnvLookup& env, LaunchConfig& c) {
  if (const auto port = master_port_override(env)) {
    c.master_port = *port;
    return;
  }
  c.master_port = 0;
  if (c.run_id == "none") c.run_id = random_run_id();
}

}  // namespace

LaunchConfig to_launch_config(CommandLineValues v, const EnvLookup& env, const std::vector<BackendKind>& backends,
                              const NvidiaDriverProbe& nvidia_driver) {
  LaunchConfig c = std::move(v.config);
  apply_nodes(v, env, nvidia_driver, backends, c);
  apply_durations(v, env, c);
  apply_output(v, c);
  if (const auto tmp = env("TMPDIR"); tmp && !tmp->empty()) c.temp_dir = *tmp;
  apply_torchrun_knobs(v, env, c);
  c.max_restarts = parse_whole_number("--max_restarts", v.max_restarts.value_or("0"));
  apply_replica_groups(v.replicas, env, v.max_restarts.has_value(), c);
  c.max_no_progress_restarts = parse_whole_number("--max_no_progress_restarts", v.max_no_progress_restarts);
  if (v.active_nodes) c.active_nodes = parse_whole_number("--active_nodes", *v.active_nodes);
  c.signals_to_handle = parse_signals(v.signals_to_handle, env);
  c.rdzv_secret = load_job_secret(c.rdzv_conf, env);
  apply_rdzv_backend(c, env, v.master_port.has_value(), backends);
  if (!v.use_env) c.local_rank_arg = LaunchConfig::LocalRankArg::Underscore;
  if (!v.local_rank_arg.empty()) {
    c.local_rank_arg =
        v.local_rank_arg == "dash" ? LaunchConfig::LocalRankArg::Dash : LaunchConfig::LocalRankArg::Underscore;
  }
  if (c.standalone) {
    // A single node is for validate() to insist on: here only what standalone chooses itself.
    c.master_addr = "127.0.0.1";
    c.master_port = 0;
    c.run_id = random_run_id();
  } else if (!v.nnodes && !v.node_rank && !v.master_addr && env("SLURM_JOB_ID")) {
    // Slurm fills in what the command line left open (see slurm.hpp).
    apply_slurm_environment(env, v.master_port.has_value() || !c.rdzv_endpoint.empty(), c);
  } else if (!v.nnodes && !v.node_rank && under_mpi(env)) {
    // One launcher per node under mpirun/mpiexec (see mpi.hpp).
    apply_mpi_environment(env, v.master_addr.has_value(), v.master_port.has_value() || !c.rdzv_endpoint.empty(), c);
  } else if (!v.nnodes && !v.node_rank && under_volcano(env)) {
    // One launcher per pod of a Volcano job with the pytorch plugin (see volcano.hpp).
    apply_volcano_environment(env, v.master_addr.has_value(), v.master_port.has_value() || !c.rdzv_endpoint.empty(),
                              c);
  } else if (!v.node_rank && c.rdzv_backend == "c10d" && c.max_nodes > 1) {
    apply_c10d_ranks(c);  // Kubeflow's elastic PyTorchJob: no node rank (see c10d_ranks.hpp)
  } else if (c.max_nodes == 1 && !v.master_port && c.rdzv_endpoint.empty()) {
    apply_single_node_port(env, c);
  }
  return c;
}

}  // namespace ddp::launcher
