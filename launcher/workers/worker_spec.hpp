// What each worker runs: its argv and its environment, built from the configuration, the rank
// map and the attempt number. Pure: the launcher's own environment is passed in and never
// modified; each child gets a separate map.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ddplaunch/common/env_lookup.hpp"
#include "launcher/config/cpu_binding.hpp"
#include "launcher/config/effective_config.hpp"
#include "launcher/config/launch_config.hpp"
#include "launcher/config/python_interpreter.hpp"
#include "launcher/rdzv/rank_map.hpp"

namespace ddp::launcher {

// Where one worker's output goes, decided with its spec (from --redirects, --tee,
// --local_ranks_filter, --log_line_prefix_template and the log root), so that whatever runs the
// worker needs only this and a console. As in torchrun, a redirected or tee'd stream goes to its
// file; a tee keeps it on the console too. Without a log root a redirected stream has no file
// (the agent always has one then: node_setup.hpp makes a directory).
struct OutputRouting {
  std::string prefix;  // put before every console line, e.g. "[3]:"; "" for none
  bool to_console_out = true;
  bool to_console_err = true;
  std::string stdout_file;  // "" = none
  std::string stderr_file;
  // --duplicate_*_filters of a tee'd stream shown on the console (torchrun copies those only):
  // lines containing any filter also go, prefixed, to this file, which every worker of the
  // attempt shares (<attempt dir>/filtered_stdout.log); "" = none (filtered_log.hpp).
  std::string filtered_stdout_file;
  std::string filtered_stderr_file;
  std::vector<std::string> stdout_filters;
  std::vector<std::string> stderr_filters;
};

struct WorkerSpec {
  int local_rank = 0;
  int rank = 0;
  std::vector<std::string> argv;  // argv[0] is the executable (looked up on PATH when bare)
  Environment env;
  std::string log_dir;              // <log_dir>/<run_id>/attempt_<n>/<local_rank>, "" when no log dir
  std::string error_file;           // its TORCHELASTIC_ERROR_FILE; "" when none (no log root)
  long long open_files_limit = -1;  // the worker's soft RLIMIT_NOFILE; -1: the launcher's
  std::vector<int> keep_fds;        // the launcher's descriptors it inherits (the progress table)
  OutputRouting output;
  std::vector<int> cpus;  // --numa_binding: the CPUs it runs on (set before exec); empty: the launcher's
};

struct WorkerSpecInputs {
  const LaunchConfig& config;
  const RankMap& ranks;
  int node_rank;
  int restart_count;
  std::string master_addr;  // the store's address as workers should dial it
  int master_port;
  Environment base_env;  // the launcher's environment
  std::string log_root;  // as resolved once (EffectiveConfig::log_root); "" = no files
  // The log root holds only error files (EffectiveConfig::temporary_log_root): they lie flat in it,
  // error_<attempt>_<local rank>.json, with no directory per worker (each costs system calls at
  // start and again at removal, bench section 1).
  bool error_files_only = false;
  long long open_files_limit = -1;  // see WorkerSpec: the limit the launcher had before raising it
  std::string python = "python3";   // argv[0] of a Python worker (EffectiveConfig::python.path)
  int progress_fd = -1;             // >= 0: the collective-progress table (DDPLAUNCH_PROGRESS=<fd>:<local index>)
  // Python workers' worker servers (python_hook.hpp): the hook's directory, put first on their
  // PYTHONPATH, and where each one's socket goes (worker_socket_path()); "": none.
  std::string python_hook_dir;
  std::string socket_dir;
  std::vector<CpuBinding> cpu_bindings;  // per local rank (EffectiveConfig::cpu_bindings); empty: none
  std::string host;                      // this node's name, for ${hostname} (EffectiveConfig::host)
};

// What a round hands its workers beyond the configuration: where they dial the store and what the
// watch (watch/worker_watch.hpp) gives them.
struct RoundWorkerContext {
  std::string master_addr;  // the workers' store as the backend named it; "": --master_addr and the launcher's port
  int master_port = 0;
  std::string timer_file;       // TORCHELASTIC_TIMER_FILE for the workers; "": file timers off
  int progress_fd = -1;         // the collective-progress table; -1: none
  std::string python_hook_dir;  // see WorkerSpecInputs
  std::string socket_dir;
};

// The worker server's socket of a Python worker, told to it as DDPLAUNCH_WORKER_SOCKET
// (worker_env::kWorkerSocket; its hook reads and removes it): "<dir>/worker<local rank>.sock". Pure.
std::string worker_socket_path(const std::string& dir, int local_rank);

// The Flight Recorder's settings a worker gets unless its environment has them under either of
// the names torch reads (TORCH_FR_* or the older TORCH_NCCL_*): a 2000-entry buffer (torch's
// recommendation), and the dump-on-timeout files (NCCL's watchdog) in the run's directory,
// `<run dir>/fr_nccl_rank_<rank>`. Pure.
void add_flight_recorder_defaults(Environment& env, const std::string& run_dir);

// The one way to fill WorkerSpecInputs, for a round of the run and for --dry-run alike, so the
// dry run prints what the run sets. `base_env` is the launcher's environment. Pure.
WorkerSpecInputs worker_spec_inputs(const LaunchConfig& config, const EffectiveConfig& effective, const RankMap& ranks,
                                    int group_rank, int restart_count, const RoundWorkerContext& round,
                                    Environment base_env);

// Throws UsageError when --virtual_local_rank needs more devices than CUDA_VISIBLE_DEVICES lists.
std::vector<WorkerSpec> build_worker_specs(const WorkerSpecInputs& in);

// True when the program runs under Python: a .py script or -m module, unless --no_python.
bool runs_with_python(const LaunchConfig& config);

// The executable for a program name: a path must be an executable file; a bare name is looked up
// on PATH. Throws UsageError naming the program and the fix.
std::string resolve_program(const std::string& name);

// Checks, before anything starts, that every worker's command can run: the program (or, for a
// .py script, the interpreter `python` and the script file). Throws UsageError.
void check_program(const LaunchConfig& config, const PythonInterpreter& python);

// Replaces ${local_rank} in `arg`.
std::string substitute_local_rank(std::string arg, int local_rank);

}  // namespace ddp::launcher
