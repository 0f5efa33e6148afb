// The rules on a finished LaunchConfig; see validate.hpp.
#include "launcher/cli/validate.hpp"

#include <csignal>

#include <fmt/format.h>

#include "common/format_duration.hpp"
#include "common/log.hpp"
#include "common/signals.hpp"
#include "launcher/cli/replica_options.hpp"

namespace ddp::launcher {
namespace {

// "2" for a fixed size, "1:4" for an elastic range: --nnodes as it was given.
std::string nnodes_text(const LaunchConfig& c) {
  return c.min_nodes == c.max_nodes ? fmt::format("{}", c.max_nodes) : fmt::format("{}:{}", c.min_nodes, c.max_nodes);
}

void check_program(const LaunchConfig& c) {
  if (c.program.empty()) {
    throw UsageError("no program given; usage: ddplaunch [options] PROGRAM [ARGS...] (see --help)");
  }
  if (c.no_python && c.module && !c.run_path) {  // --run_path beats both, as in torchrun
    throw UsageError("--no_python and -m/--module exclude each other; drop one of them");
  }
}

// --active_nodes (standby nodes): only for an elastic range with the built-in store.
// Given, it is a number of nodes: 0 (or less) is refused like any value outside the range, as
// "every node is active" is what leaving the flag out means.
void check_active_nodes(const LaunchConfig& c) {
  if (!c.active_nodes) return;
  const int active = *c.active_nodes;
  if (c.min_nodes == c.max_nodes && active < 1) {
    throw UsageError(
        fmt::format("--active_nodes={} is not a number of nodes; drop --active_nodes (every node runs workers) or give "
                    "N >= 1 with an elastic --nnodes=MIN:MAX",
                    active));
  }
  if (c.min_nodes == c.max_nodes) {
    throw UsageError(
        fmt::format("--active_nodes={} needs an elastic --nnodes=MIN:MAX (not --nnodes={}); give a range "
                    "whose MAX counts the standby nodes, e.g. --nnodes={}:{}",
                    active, nnodes_text(c), active, active + 1));
  }
  if (active < c.min_nodes || active > c.max_nodes) {
    throw UsageError(fmt::format("--active_nodes={} is outside --nnodes={}; pick N with {} <= N <= {}", active,
                                 nnodes_text(c), c.min_nodes, c.max_nodes));
  }
  if (c.rdzv_rules.refuses_active_nodes) {
    throw UsageError(
        fmt::format("--active_nodes does not work with --rdzv_backend {} yet; use the built-in store (static or "
                    "c10d) or drop --active_nodes",
                    c.rdzv_backend));
  }
}

void check_nodes(const LaunchConfig& c) {
  if (c.min_nodes < 1 || c.max_nodes < c.min_nodes || c.max_nodes > kMaxNodes) {
    throw UsageError(fmt::format("--nnodes={} is not a valid range; use N or MIN:MAX with 1 <= MIN <= MAX <= {}",
                                 nnodes_text(c), kMaxNodes));
  }
  if (c.nproc_per_node < 1 || c.nproc_per_node > kMaxProcPerNode) {
    throw UsageError(
        fmt::format("--nproc_per_node={} is not 1..{} workers on one node; give a number in that range "
                    "(or gpu, cpu, auto)",
                    c.nproc_per_node, kMaxProcPerNode));
  }
  if (c.standalone && c.rdzv_rules.refuses_standalone) {
    throw UsageError(
        fmt::format("--standalone runs its own store; drop --rdzv_backend {} or --standalone", c.rdzv_backend));
  }
  if (c.standalone && (c.max_nodes > 1 || c.node_rank != 0)) {
    throw UsageError(
        fmt::format("--standalone runs a single node, not --nnodes={} --node_rank={}; drop "
                    "--nnodes/--node_rank or --standalone",
                    nnodes_text(c), c.node_rank));
  }
  check_active_nodes(c);
  if (c.node_rank < 0 || c.node_rank >= c.max_nodes) {
    throw UsageError(
        fmt::format("--node_rank={} is outside 0..{} for --nnodes={}; give each node a distinct rank "
                    "below nnodes",
                    c.node_rank, c.max_nodes - 1, c.max_nodes));
  }
}

void check_store(const LaunchConfig& c) {
  if (c.master_addr.empty()) throw UsageError("--master_addr is empty; give node 0's address (default 127.0.0.1)");
  // Where node 0 hosts no store (etcd-v3), port 0 is the default for any job: a round's group
  // rank 0 publishes the one its workers' store got.
  if (c.master_port < 0 || c.master_port > 65535 ||
      (c.master_port == 0 && c.max_nodes > 1 && c.rdzv_rules.node0_hosts_store)) {
    throw UsageError(
        fmt::format("--master_port={} is not a usable port; pick one in 1..65535 (0 = any free port, single node only)",
                    c.master_port));
  }
  if (c.run_id.empty()) throw UsageError("--rdzv_id is empty; give a job id shared by all nodes (default none)");
}

void check_restarts_and_durations(const LaunchConfig& c) {
  if (c.max_restarts < 0 || c.max_restarts > kMaxRestarts) {
    throw UsageError(
        fmt::format("--max_restarts={} is outside 0..{}; pick a number in that range (a job that fails "
                    "more often needs fixing, not restarting)",
                    c.max_restarts, kMaxRestarts));
  }
  if (c.shutdown_timeout.count() < 0) {
    throw UsageError(fmt::format("--shutdown_timeout={} is negative; use 0 or more (default 30)",
                                 format_seconds(c.shutdown_timeout)));
  }
  if (c.exit_barrier_timeout.count() < 0) {
    throw UsageError(fmt::format("--exit_barrier_timeout={} is negative; use 0 or more (default 300)",
                                 format_seconds(c.exit_barrier_timeout)));
  }
  if (c.max_no_progress_restarts < 0 || c.max_no_progress_restarts > kMaxRestarts) {
    throw UsageError(
        fmt::format("--max_no_progress_restarts={} is outside 0..{}; use 0 (off) or a small number "
                    "such as 3",
                    c.max_no_progress_restarts, kMaxRestarts));
  }
  if (c.preemption_grace.count() < 0) {
    throw UsageError(fmt::format("--preemption_grace={} is negative; use 0 or more (default 30)",
                                 format_seconds(c.preemption_grace)));
  }
  if (c.straggler_window < std::chrono::seconds(1)) {
    throw UsageError(
        fmt::format("--straggler_window={} is too short to take a median over; use at least 1 s "
                    "(default 30)",
                    format_seconds(c.straggler_window)));
  }
  if ((c.stragglers == StragglerMode::Exclude || c.stragglers == StragglerMode::Replace) &&
      c.min_nodes == c.max_nodes) {
    throw UsageError(
        fmt::format("--stragglers={} leaves a slow node out of the next round, which needs an elastic "
                    "job with a node to spare: give --nnodes=MIN:MAX with MIN < MAX (and --max_restarts "
                    "of at least 1), or use --stragglers=warn",
                    to_string(c.stragglers)));
  }
  if (c.hang_timeout.count() < 0) {
    throw UsageError(fmt::format("--hang_timeout={} is negative; use 0 (off) or a number of seconds such as 300",
                                 format_seconds(c.hang_timeout)));
  }
  if (c.unkillable_timeout.count() <= 0) {
    // Even a killable process takes a moment to die after SIGKILL (its memory is freed first).
    throw UsageError(fmt::format("--unkillable_timeout={} must be more than 0 s: a process needs a moment to end "
                                 "after SIGKILL (default 30)",
                                 format_seconds(c.unkillable_timeout)));
  }
  if (c.monitor_interval.count() <= 0) {
    throw UsageError(
        fmt::format("--monitor_interval={} must be more than 0 s (default 0.1)", format_seconds(c.monitor_interval)));
  }
  if (c.rdzv_timeout.count() <= 0) {
    throw UsageError(
        fmt::format("--rdzv_timeout={} must be more than 0 s (default 900)", format_seconds(c.rdzv_timeout)));
  }
  if (c.heartbeat_timeout.count() < kMinHeartbeatMs) {
    throw UsageError(fmt::format("--heartbeat_timeout={} is too short; use at least {} (default 10)",
                                 format_seconds(c.heartbeat_timeout),
                                 format_seconds(std::chrono::milliseconds(kMinHeartbeatMs))));
  }
  if (c.heartbeat_interval.count() <= 0 || c.heartbeat_interval >= c.heartbeat_timeout) {
    throw UsageError(
        fmt::format("heartbeat interval {} must be more than 0 and less than --heartbeat_timeout={}; the "
                    "command line makes it heartbeat_timeout / 5",
                    format_seconds(c.heartbeat_interval), format_seconds(c.heartbeat_timeout)));
  }
}

void check_workers(const LaunchConfig& c) {
  for (int r : c.local_ranks_filter) {
    if (r < 0 || r >= c.nproc_per_node) {
      throw UsageError(
          fmt::format("--local_ranks_filter names local rank {}, but --nproc_per_node={} has only 0..{}; "
                      "drop it from the list",
                      r, c.nproc_per_node, c.nproc_per_node - 1));
    }
  }
  for (int s : c.signals_to_handle) {
    if (s < 1 || s >= NSIG || s == SIGKILL || s == SIGSTOP) {
      throw UsageError(
          fmt::format("--signals_to_handle names {}, which cannot be caught; list others such as "
                      "SIGTERM,SIGINT,SIGUSR1",
                      signal_name(s)));
    }
  }
}

void check_output(const LaunchConfig& c) {
  std::string rest = c.line_prefix_template;
  for (const std::string_view v : {"${rank}", "${local_rank}", "${role_name}", "${hostname}"}) {
    for (auto p = rest.find(v); p != std::string::npos; p = rest.find(v)) rest.erase(p, v.size());
  }
  if (rest.find("${") != std::string::npos) {
    throw UsageError(
        fmt::format("--log_line_prefix_template='{}' (or TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE) uses an unknown "
                    "variable; use ${{rank}}, ${{local_rank}}, ${{role_name}} and ${{hostname}}",
                    c.line_prefix_template));
  }
  if (!c.log_level.empty()) {
    try {
      log::parse_level(c.log_level);
    } catch (const UsageError& e) {
      throw UsageError(fmt::format("--log_level={}: {}", c.log_level, e.what()));
    }
  }
}

// --hostfile / --hosts: one source of hosts, and no flag the controller sets per host.
void check_fleet(const LaunchConfig& c) {
  const FleetOptions& f = c.fleet;
  if (!f.hostfile.empty() && !f.hosts.empty()) {
    throw UsageError("--hostfile and --hosts both name the hosts; use one of them");
  }
  if (!f.active()) {
    if (!f.include.empty() || !f.exclude.empty() || f.ssh_port != 0 || !f.ssh_options.empty() ||
        !f.remote_ddplaunch.empty() || !f.exports.empty() || !f.env_file.empty()) {
      throw UsageError("--include, --exclude, --ssh_port, --ssh_option, --export, --env_file and --remote_ddplaunch "
                       "go with --hostfile or --hosts; add one of those");
    }
    return;
  }
  if (f.given_flags.count("--node_rank") > 0) {
    throw UsageError("--node_rank is set for each host by --hostfile/--hosts (node 0 on the first host); remove it");
  }
  if (f.ssh_port < 0 || f.ssh_port > 65535) {
    throw UsageError(fmt::format("--ssh_port={} is not a port; use 1..65535", f.ssh_port));
  }
}

}  // namespace

void validate(const LaunchConfig& c) {
  if (c.status) {
    if (!c.program_args.empty() || (!c.program.empty() && c.program.find('/') == std::string::npos &&
                                    c.program.find_first_not_of("0123456789") != std::string::npos)) {
      throw UsageError(
          fmt::format("--status takes a launcher's pid or its status socket path ('{}' given); run it "
                      "alone for your job on this machine (several: the one started in this directory)",
                      c.program + (c.program_args.empty() ? "" : " " + c.program_args.front())));
    }
    return;
  }
  if (c.dump_stacks) {
    if (!c.program.empty())
      throw UsageError("--dump_stacks takes no program ('" + c.program + "' given); it asks the running job");
    if (c.rdzv_rules.refuses_dump_stacks) {
      throw UsageError(
          fmt::format("--dump_stacks does not reach a job that meets in {} yet; use py-spy dump --pid on its nodes",
                      c.rdzv_rules.meeting_place));
    }
    return check_store(c);
  }
  if (!c.fleet.fleet_probe.empty()) {
    if (c.fleet.fleet_probe != "listen" && c.fleet.fleet_probe != "connect") {
      throw UsageError("--fleet_probe is ddplaunch's own preflight over ssh; it takes listen or connect");
    }
    return;
  }
  check_program(c);
  check_fleet(c);
  check_nodes(c);
  check_store(c);
  check_restarts_and_durations(c);
  check_workers(c);
  check_output(c);
  check_replica_groups(c);
}

}  // namespace ddp::launcher
