// The flags of ddplaunch's command line as CLI11 options, and the values they fill in. Declaring
// is all this does: command_line_config.hpp turns the values into a LaunchConfig, validate.hpp
// checks it. CLI11 validators here check only the form of a flag's text (a number of seconds, a
// backend name); rules about the values live in validate(), which also sees what PET_* variables
// and Slurm filled in. Each flag that takes a value names its form (type_name), which --help
// shows and an empty value's error asks for.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "launcher/cli/replica_options.hpp"
#include "launcher/config/launch_config.hpp"

namespace ddp::launcher {

class FlagApp;
class PetDefaults;

// What the command line (and PET_* defaults) gave, before conversion. Flags that need no
// conversion are bound straight into `config`; the others are kept as text. An empty optional
// means the flag was given neither on the command line nor through PET_* (Slurm's defaults and
// the TORCHELASTIC_SIGNALS_TO_HANDLE fallback apply only then).
struct CommandLineValues {
  LaunchConfig config;
  // Numbers stay text until parse_whole_number() reads them in decimal (CLI11 would read "010" as
  // octal 8).
  std::optional<std::string> nnodes;
  std::optional<std::string> node_rank;
  std::optional<std::string> master_addr;
  std::optional<std::string> master_port;
  std::optional<std::string> signals_to_handle;
  std::optional<std::string> active_nodes;  // unset: every node runs workers
  std::optional<std::string> max_restarts;  // unset: 0, or 10 per replica group (replica_options.hpp)
  std::string max_no_progress_restarts = "0";
  std::string nproc_per_node = "1";
  std::string redirects = "0";
  std::string tee = "0";
  std::string local_ranks_filter;
  // Each --rdzv_conf given, in order; their keys are read as one list (a key given twice, in one
  // flag or two, is refused: rdzv_conf.hpp).
  std::vector<std::string> rdzv_conf;
  // Numbers of seconds, already checked by the flags' validator (see parse_seconds).
  std::string monitor_interval = "0.1";
  std::string shutdown_timeout;  // "": TORCH_ELASTIC_SHUTDOWN_TIMEOUT, else 30 (torchrun_env.hpp)
  std::string exit_barrier_timeout;  // "": TORCH_ELASTIC_EXIT_BARRIER_TIMEOUT, else 300 (torchrun_env.hpp)
  // "": not given alone (--failure_budget may set it), else the default in the comment.
  std::string hang_timeout;  // 0: off
  std::string stragglers = "warn";  // checked by the flag (off, warn, exclude, replace)
  std::string straggler_window = "30";
  std::string straggler_replace_after = "300";
  std::string preemption_grace;  // "": the longer of 30 s and --shutdown_timeout
  std::string unkillable_timeout;  // 30
  std::string failure_budget;      // "": none
  std::string rdzv_timeout = "900";
  std::string heartbeat_timeout;  // 10
  // torchrun's knobs that ddplaunch maps onto its own (torchrun_env.hpp).
  std::optional<std::string> line_prefix_template;  // unset: TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE
  std::optional<std::string> duplicate_stdout_filters;
  std::optional<std::string> duplicate_stderr_filters;
  std::string start_method = "spawn";
  std::string event_log_handler = "null";
  std::optional<std::string> logs_specs;  // refused: a Python entry point
  std::string print_completion;           // --print_completion SHELL: print the script, run nothing
  ReplicaValues replicas;                 // --replica_groups, --lighthouse_port
  bool use_env = true;                    // --use_env=false asks for --local_rank=i in the workers' arguments
  std::string local_rank_arg;             // --local_rank_arg[=underscore|dash]; "" when not given
};

// The flags whose empty value means something, as their default does: no --rdzv_conf keys, every
// local rank on the console, no line prefix; and an empty role, which TorchX's dist.ddp passes
// (`--role ""`) and torchrun gives its workers as ROLE_NAME="". Any other flag given an empty
// value on the command line is refused by name (empty_values.hpp).
inline constexpr std::string_view kEmptyValueMeans[] = {"--rdzv_conf", "--local_ranks_filter",
                                                        "--log_line_prefix_template", "--role"};

// Adds every flag, the help footer and --version to `app`, binding the flags to `values` (which
// must outlive `app`); flags that torchrun reads from PET_* are registered with `pet`. Does not
// parse; never throws.
void declare_options(FlagApp& app, CommandLineValues& values, PetDefaults& pet);

}  // namespace ddp::launcher
