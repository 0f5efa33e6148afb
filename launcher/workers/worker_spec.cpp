// Worker argv and environment (torchrun's contract); see worker_spec.hpp.
#include "launcher/workers/worker_spec.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include <fmt/format.h>

#include "common/collective_progress.hpp"
#include "common/find_executable.hpp"
#include "common/signals.hpp"
#include "common/worker_env.hpp"
#include "ddplaunch/rendezvous/endpoint.hpp"
#include "launcher/config/flag_parsers.hpp"
#include "launcher/config/private_env.hpp"
#include "launcher/workers/run_path.hpp"

namespace ddp::launcher {

bool runs_with_python(const LaunchConfig& c) {
  const std::string& p = c.program;
  return c.run_path || (!c.no_python && (c.module || (p.size() > 3 && p.compare(p.size() - 3, 3, ".py") == 0)));
}

std::string resolve_program(const std::string& name) {
  if (name.find('/') != std::string::npos) {
    if (::access(name.c_str(), F_OK) != 0) {
      throw UsageError("program '" + name + "' does not exist; check the path");
    }
    struct stat st {};
    if (::stat(name.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      throw UsageError("program '" + name + "' is a directory; give the program (or .py script) inside it");
    }
    if (::access(name.c_str(), X_OK) != 0) {
      throw UsageError("program '" + name +
                       "' is not executable; chmod +x it, or run a .py script (it runs with python3)");
    }
    return name;
  }
  if (std::string found = find_on_path(name); !found.empty()) return found;
  throw UsageError("program '" + name + "' was not found on PATH; give a path such as ./" + name);
}

void check_program(const LaunchConfig& c, const PythonInterpreter& python) {
  if (!runs_with_python(c)) {
    resolve_program(c.program);
    return;
  }
  try {
    resolve_program(python.path);
  } catch (const UsageError& e) {
    throw UsageError(std::string(e.what()) + " (the Python interpreter, chosen by " + python.reason + ")");
  }
  const bool module = c.module && !c.run_path;
  if (!module && ::access(c.program.c_str(), R_OK) != 0) {
    throw UsageError("script '" + c.program + "' does not exist or is not readable; check the path");
  }
  struct stat st {};
  if (!module && ::stat(c.program.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    throw UsageError("script '" + c.program + "' is a directory; give the .py file inside it");
  }
}

std::string substitute_local_rank(std::string arg, int local_rank) {
  const std::string macro = "${local_rank}";
  for (auto pos = arg.find(macro); pos != std::string::npos; pos = arg.find(macro, pos)) {
    arg.replace(pos, macro.size(), std::to_string(local_rank));
  }
  return arg;
}

namespace {

// `host` is the node's name as torchrun's ${hostname} gives it: socket.gethostname(), not the FQDN.
std::string expand_prefix(std::string tpl, int rank, int local_rank, const std::string& role, const std::string& host) {
  const std::pair<const char*, std::string> vars[] = {{"${rank}", std::to_string(rank)},
                                                      {"${local_rank}", std::to_string(local_rank)},
                                                      {"${role_name}", role},
                                                      {"${hostname}", host}};
  for (const auto& [k, v] : vars) {
    const std::string key = k;
    for (auto p = tpl.find(key); p != std::string::npos; p = tpl.find(key, p + v.size())) tpl.replace(p, key.size(), v);
  }
  return tpl;
}

// --local_ranks_filter hides the other ranks' console lines; the rest is in worker_spec.hpp.
OutputRouting route_output(const LaunchConfig& c, const WorkerSpec& w, bool prefix_lines, const std::string& host) {
  OutputRouting out;
  if (prefix_lines) out.prefix = expand_prefix(c.line_prefix_template, w.rank, w.local_rank, c.role, host);
  const int redirect = c.redirects.for_rank(w.local_rank);
  const int tee = c.tee.for_rank(w.local_rank);
  const auto& filter = c.local_ranks_filter;
  const bool shown = filter.empty() || std::find(filter.begin(), filter.end(), w.local_rank) != filter.end();
  out.to_console_out = shown && !(redirect & 1);
  out.to_console_err = shown && !(redirect & 2);
  if (!w.log_dir.empty() && ((redirect | tee) & 1)) out.stdout_file = w.log_dir + "/stdout.log";
  if (!w.log_dir.empty() && ((redirect | tee) & 2)) out.stderr_file = w.log_dir + "/stderr.log";
  const std::string attempt_dir = std::filesystem::path(w.log_dir).parent_path().string();
  if (!w.log_dir.empty() && shown && (tee & 1) && !c.duplicate_stdout_filters.empty()) {
    out.filtered_stdout_file = attempt_dir + "/filtered_stdout.log";
    out.stdout_filters = c.duplicate_stdout_filters;
  }
  if (!w.log_dir.empty() && shown && (tee & 2) && !c.duplicate_stderr_filters.empty()) {
    out.filtered_stderr_file = attempt_dir + "/filtered_stderr.log";
    out.stderr_filters = c.duplicate_stderr_filters;
  }
  return out;
}

}  // namespace

WorkerSpecInputs worker_spec_inputs(const LaunchConfig& c, const EffectiveConfig& eff, const RankMap& ranks,
                                    int group_rank, int restart_count, const RoundWorkerContext& round,
                                    Environment base_env) {
  const bool published = !round.master_addr.empty();
  WorkerSpecInputs in{c,
                      ranks,
                      group_rank,
                      restart_count,
                      published ? round.master_addr : c.master_addr,
                      published ? round.master_port : eff.port,
                      std::move(base_env),
                      eff.log_root};
  in.error_files_only = eff.temporary_log_root;
  in.host = eff.host;
  in.open_files_limit = eff.open_files_limit;
  in.python = eff.python.path;
  if (!round.timer_file.empty()) in.base_env[worker_env::kTimerFile] = round.timer_file;
  in.progress_fd = round.progress_fd;
  in.python_hook_dir = round.python_hook_dir;
  in.socket_dir = round.socket_dir;
  in.cpu_bindings = eff.cpu_bindings;
  if (!in.python_hook_dir.empty()) add_flight_recorder_defaults(in.base_env, eff.log_root);
  return in;
}

std::string worker_socket_path(const std::string& dir, int local_rank) {
  return fmt::format("{}/worker{}.sock", dir, local_rank);
}

void add_flight_recorder_defaults(Environment& env, const std::string& run_dir) {
  // torch reads either name; the older NCCL one makes each worker warn that it is deprecated, so
  // only the current one is set (a user's setting under either name stays as it is).
  using namespace worker_env;
  if (!env.count(kFrBufferSize) && !env.count(kNcclTraceBufferSize)) env[kFrBufferSize] = "2000";
  if (!env.count(kFrDumpTempFile) && !env.count(kNcclDebugInfoTempFile) && !run_dir.empty()) {
    env[kFrDumpTempFile] = run_dir + "/fr_nccl_rank_";
  }
}

namespace {

// --virtual_local_rank: the device of each local rank (CUDA_VISIBLE_DEVICES, else 0..n-1); without
// it, none. Throws UsageError when there are fewer devices than workers.
std::vector<std::string> visible_devices(const LaunchConfig& c, const Environment& base_env) {
  std::vector<std::string> visible;
  if (!c.virtual_local_rank) return visible;
  const auto it = base_env.find(worker_env::kCudaVisibleDevices);
  if (it != base_env.end()) {
    visible = split_list(it->second);
  } else {
    for (int i = 0; i < c.nproc_per_node; ++i) visible.push_back(std::to_string(i));
  }
  if (static_cast<int>(visible.size()) < c.nproc_per_node) {
    throw UsageError("--virtual_local_rank needs one device per worker but CUDA_VISIBLE_DEVICES lists " +
                     std::to_string(visible.size()) + " for --nproc_per_node=" + std::to_string(c.nproc_per_node) +
                     "; list more devices or start fewer workers");
  }
  return visible;
}

std::string signal_names(const std::vector<int>& signals) {
  std::string names;
  for (const int signo : signals) names += (names.empty() ? "" : ",") + signal_name(signo);
  return names;
}

std::vector<std::string> worker_argv(const WorkerSpecInputs& in, int local_rank) {
  const LaunchConfig& c = in.config;
  std::vector<std::string> argv;
  if (c.run_path) {
    argv = {in.python, "-u", "-c", kRunPathCode};
  } else if (runs_with_python(c)) {
    argv = {in.python, "-u"};
    if (c.module) argv.push_back("-m");
  }
  argv.push_back(c.program);
  if (c.local_rank_arg == LaunchConfig::LocalRankArg::Underscore)
    argv.push_back("--local_rank=" + std::to_string(local_rank));
  if (c.local_rank_arg == LaunchConfig::LocalRankArg::Dash)
    argv.push_back("--local-rank=" + std::to_string(local_rank));
  for (const auto& a : c.program_args) argv.push_back(substitute_local_rank(a, local_rank));
  return argv;
}

// The worker's log directory and error file (WorkerSpec::log_dir, WorkerSpec::error_file).
void place_files(const WorkerSpecInputs& in, WorkerSpec& w) {
  if (in.error_files_only) {
    w.error_file = fmt::format("{}/error_{}_{}.json", in.log_root, in.restart_count, w.local_rank);
  } else if (!in.log_root.empty()) {
    w.log_dir = in.log_root + "/attempt_" + std::to_string(in.restart_count) + "/" + std::to_string(w.local_rank);
    w.error_file = w.log_dir + "/error.json";
  }
}

// torchrun's contract for one worker (common/worker_env.hpp).
worker_env::WorkerEnv contract(const WorkerSpecInputs& in, const WorkerSpec& w) {
  const LaunchConfig& c = in.config;
  worker_env::WorkerEnv we;
  we.rank = w.rank;
  we.local_rank = c.virtual_local_rank ? 0 : w.local_rank;
  we.world_size = in.ranks.world_size();
  we.local_world_size = c.nproc_per_node;
  we.group_rank = in.node_rank;
  we.group_world_size = in.ranks.num_active();  // standby nodes run no workers
  we.role_name = c.role;
  // Without brackets, as torchrun passes it: PyTorch's TCPStore resolves "::1", not "[::1]".
  we.master_addr = rendezvous::unbracket_host(in.master_addr);
  we.master_port = in.master_port;
  we.restart_count = in.restart_count;
  we.max_restarts = c.max_restarts;
  we.run_id = c.run_id;
  we.error_file = w.error_file;
  return we;
}

// DDPLAUNCH_PROGRESS=0 turns the slots off (the runtime then records nothing); any other value is
// an outer ddplaunch's, whose descriptor this worker lacks.
void add_progress_table(const WorkerSpecInputs& in, WorkerSpec& w) {
  const bool off = w.env.count(kProgressVariable) && w.env[kProgressVariable] == "0";
  if (!off) w.env.erase(kProgressVariable);
  if (in.progress_fd >= 0 && !off) {
    w.env[kProgressVariable] = progress_variable_value(in.progress_fd, w.local_rank);
    w.keep_fds.push_back(in.progress_fd);
  }
}

// A Python worker's worker server (python_hook.hpp): the hook first on its PYTHONPATH, its socket.
void add_python_hook(const WorkerSpecInputs& in, WorkerSpec& w) {
  w.env.erase(worker_env::kWorkerSocket);  // an outer ddplaunch's worker's
  if (in.python_hook_dir.empty() || !runs_with_python(in.config)) return;
  const auto path = w.env.find(worker_env::kPythonPath);
  w.env[worker_env::kPythonPath] =
      path == w.env.end() || path->second.empty() ? in.python_hook_dir : in.python_hook_dir + ":" + path->second;
  w.env[worker_env::kWorkerSocket] = worker_socket_path(in.socket_dir, w.local_rank);
}

// The launcher's environment without its private variables, and what ddplaunch tells the worker.
void fill_environment(const WorkerSpecInputs& in, WorkerSpec& w, const std::string& signals,
                      const std::vector<std::string>& visible) {
  w.env = in.base_env;
  for (const char* name : kPrivateEnv) w.env.erase(name);  // the launchers' alone (private_env.hpp)
  worker_env::apply(w.env, contract(in, w));
  w.env[worker_env::kSignalsToHandle] = signals;
  if (in.config.virtual_local_rank) {
    w.env[worker_env::kCudaVisibleDevices] = visible[static_cast<std::size_t>(w.local_rank)];
  }
  add_progress_table(in, w);
  add_python_hook(in, w);
}

}  // namespace

std::vector<WorkerSpec> build_worker_specs(const WorkerSpecInputs& in) {
  const LaunchConfig& c = in.config;
  const int base = in.ranks.base_rank(in.node_rank);
  const std::vector<std::string> visible = visible_devices(c, in.base_env);
  const std::string signals = signal_names(c.signals_to_handle);
  std::vector<WorkerSpec> specs;
  for (int lr = 0; lr < c.nproc_per_node; ++lr) {
    WorkerSpec w;
    w.local_rank = lr;
    w.rank = base + lr;
    if (!in.cpu_bindings.empty()) w.cpus = in.cpu_bindings.at(lr).cpus;
    w.argv = worker_argv(in, lr);
    place_files(in, w);
    fill_environment(in, w, signals, visible);
    w.open_files_limit = in.open_files_limit;
    w.output = route_output(c, w, in.ranks.world_size() > 1, in.host);
    specs.push_back(std::move(w));
  }
  return specs;
}

}  // namespace ddp::launcher
