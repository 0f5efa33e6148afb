// The one place for rules about a finished LaunchConfig, whoever filled it in: the command line,
// PET_* variables, Slurm or a test. The form of each flag's text is checked earlier, while it is
// parsed (flag_parsers.hpp, cli_options.cpp); here only the values and how they fit together.
#pragma once

#include "launcher/config/launch_config.hpp"

namespace ddp::launcher {

inline constexpr int kMaxProcPerNode = 4096;  // --nproc_per_node
inline constexpr int kMaxRestarts = 1000;     // --max_restarts; more is a crash loop, not recovery
inline constexpr int kMinHeartbeatMs = 100;   // --heartbeat_timeout

// Checks `config` and throws UsageError for the first rule it breaks, with one line naming the
// flag, the value and the fix. Pure: reads nothing else, changes nothing. The rules:
//   - a program is given, and not both --no_python and --module;
//   - --nnodes: 1 <= MIN <= MAX <= kMaxNodes (launch_config.hpp); --nproc_per_node: 1..kMaxProcPerNode;
//   - --standalone: a single node (MAX 1, node_rank 0);
//   - --node_rank: 0..MAX-1;
//   - --active_nodes, when given: MIN..MAX of an elastic --nnodes (0 too is refused), and a
//     backend that has standby nodes;
//   - --master_addr and --rdzv_id are not empty (an empty --role is torchrun's ROLE_NAME="");
//   - --master_port: 0..65535, and 0 (any free port) only for a single node;
//   - --max_restarts and --max_no_progress_restarts: 0..kMaxRestarts;
//   - --shutdown_timeout >= 0; --exit_barrier_timeout >= 0; --preemption_grace >= 0; --unkillable_timeout > 0;
//     --monitor_interval > 0; --rdzv_timeout > 0;
//     --heartbeat_timeout >= kMinHeartbeatMs; 0 < heartbeat_interval < heartbeat_timeout;
//   - --local_ranks_filter names only local ranks 0..nproc_per_node-1;
//   - --signals_to_handle names only signals that can be caught (not SIGKILL or SIGSTOP);
//   - --log_line_prefix_template uses only ${rank}, ${local_rank}, ${role_name} and ${hostname};
//   - --log_level is empty or debug, info, warning (warn) or error.
void validate(const LaunchConfig& config);

}  // namespace ddp::launcher
