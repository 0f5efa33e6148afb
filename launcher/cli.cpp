// Command-line parsing. CLI11 handles spellings, PET_* defaults and --help; this file turns the
// strings into a LaunchConfig (nnodes ranges, nproc keywords, signals, stream selections).
#include "launcher/cli.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <set>
#include <sstream>
#include <string_view>

#include <CLI/CLI.hpp>

#include "common/log.hpp"
#include "common/signals.hpp"
#include "launcher/slurm.hpp"
#include "launcher/version.hpp"

namespace ddp::launcher {
namespace {

// Hand-written matchers instead of std::regex: compiling a std::regex costs tens of
// microseconds, and parsing the command line sits on every launch's critical path.

// Whether `s` is min_digits..max_digits decimal digits and nothing else.
bool is_digits(std::string_view s, std::size_t min_digits, std::size_t max_digits) {
  return s.size() >= min_digits && s.size() <= max_digits &&
         std::all_of(s.begin(), s.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
}

// "0".."3", the stream bits of --redirects/--tee.
bool is_stream_bits(std::string_view s) {
  return s.size() == 1 && s[0] >= '0' && s[0] <= '3';
}

const char* kExamples = R"(
Examples:
  Single node, 8 workers:
    ddplaunch --nproc_per_node=8 ./train --lr 0.1
  A PyTorch script, unchanged (runs as python3 -u train.py):
    ddplaunch --nproc_per_node=4 train.py --epochs 3
  Two nodes, the same command on both (node 0 hosts the store at --master_addr):
    node0$ ddplaunch --nnodes=2 --node_rank=0 --master_addr=10.0.0.1 --master_port=29500 --nproc_per_node=8 ./train
    node1$ ddplaunch --nnodes=2 --node_rank=1 --master_addr=10.0.0.1 --master_port=29500 --nproc_per_node=8 ./train
  Picking GPUs: CUDA_VISIBLE_DEVICES=0,3 ddplaunch --nproc_per_node=gpu ./train
  One device per worker: CUDA_VISIBLE_DEVICES=2,3 ddplaunch --nproc_per_node=2 --virtual_local_rank ./train
  Slurm, one launcher per node:
    srun --nodes=2 --ntasks-per-node=1 ddplaunch --nproc_per_node=4 ./train
  See what would run: ddplaunch --dry-run --nproc_per_node=2 ./train
Exit codes: 0 success; the failing worker's code; 128+N if it died of signal N;
  2 bad usage; 130 interrupted; 1 launcher error (see README).)";

int count_gpus(const EnvLookup& env) {
  if (auto cvd = env("CUDA_VISIBLE_DEVICES")) {
    if (cvd->empty() || *cvd == "-1") return 0;
    return static_cast<int>(std::count(cvd->begin(), cvd->end(), ',')) + 1;
  }
  int n = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/dev", ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("nvidia", 0) == 0 && is_digits(std::string_view(name).substr(6), 1, name.size())) ++n;
  }
  return n;
}

int parse_nproc(const std::string& v, const EnvLookup& env) {
  const int cpus = static_cast<int>(std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN)));
  if (v == "cpu") return cpus;
  if (v == "gpu") {
    const int gpus = count_gpus(env);
    if (gpus == 0) {
      throw UsageError(
          "--nproc_per_node=gpu but no GPU is visible (CUDA_VISIBLE_DEVICES, /dev/nvidia*); "
          "give a number or use cpu/auto");
    }
    return gpus;
  }
  if (v == "auto") {
    const int gpus = count_gpus(env);
    return gpus > 0 ? gpus : cpus;
  }
  if (is_digits(v, 1, 6)) return std::stoi(v);
  throw UsageError("--nproc_per_node=" + v + " is not a number, gpu, cpu or auto");
}

void parse_nnodes(const std::string& v, LaunchConfig& c) {
  const auto colon = v.find(':');
  const std::string min_text = v.substr(0, colon);
  const std::string max_text = colon == std::string::npos ? min_text : v.substr(colon + 1);
  if (is_digits(min_text, 1, 6) && is_digits(max_text, 1, 6)) {
    c.min_nodes = std::stoi(min_text);
    c.max_nodes = std::stoi(max_text);
  } else {
    throw UsageError("--nnodes=" + v + " is not N or MIN:MAX (e.g. --nnodes=2 or --nnodes=1:4)");
  }
  if (c.min_nodes < 1 || c.max_nodes < c.min_nodes) {
    throw UsageError("--nnodes=" + v + " needs 1 <= MIN <= MAX");
  }
}

StreamSelection parse_streams(const std::string& flag, const std::string& v) {
  StreamSelection s;
  if (is_stream_bits(v)) {
    s.all = std::stoi(v);
    return s;
  }
  // A map "RANK:BITS,RANK:BITS,...".
  std::size_t start = 0;
  for (;;) {
    const auto comma = std::min(v.find(',', start), v.size());
    const std::string_view item = std::string_view(v).substr(start, comma - start);
    const auto colon = item.find(':');
    if (colon == std::string_view::npos || !is_digits(item.substr(0, colon), 1, 9) ||
        !is_stream_bits(item.substr(colon + 1))) {
      throw UsageError(flag + "=" + v + " is not 0-3 or a map like 0:1,1:3 (1 stdout, 2 stderr, 3 both)");
    }
    s.per_rank[std::stoi(std::string(item.substr(0, colon)))] = item[colon + 1] - '0';
    if (comma == v.size()) return s;
    start = comma + 1;
  }
}

std::chrono::milliseconds seconds_to_ms(const std::string& flag, double seconds) {
  if (!(seconds >= 0) || seconds > 1e7) {
    throw UsageError(flag + "=" + std::to_string(seconds) + " is not a number of seconds in 0..1e7");
  }
  return std::chrono::milliseconds(static_cast<long long>(seconds * 1000.0));
}

std::string random_run_id() {
  std::random_device rd;
  std::ostringstream out;
  out << std::hex << rd() << rd();
  return out.str();
}

// Splits "[v6]" or a name/IPv4 of [A-Za-z0-9_.-], then optionally ":PORT" (1-5 digits).
bool split_endpoint(std::string_view v, std::string_view& name, std::string_view& port_text) {
  const auto all_of = [](std::string_view text, auto pred) {
    return !text.empty() && std::all_of(text.begin(), text.end(), [&](char ch) { return pred(ch); });
  };
  std::size_t name_end = 0;
  if (!v.empty() && v.front() == '[') {
    const auto close = v.find(']');
    if (close == std::string_view::npos) return false;
    name = v.substr(1, close - 1);
    name_end = close + 1;
    if (!all_of(name, [](char ch) { return std::isxdigit(static_cast<unsigned char>(ch)) || ch == ':' || ch == '.'; }))
      return false;
  } else {
    name_end = std::min(v.find(':'), v.size());
    name = v.substr(0, name_end);
    if (!all_of(name, [](char ch) {
          return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '.' || ch == '-';
        }))
      return false;
  }
  const std::string_view rest = v.substr(name_end);
  port_text = rest.empty() ? rest : rest.substr(1);
  return rest.empty() || (rest.front() == ':' && is_digits(port_text, 1, 5));
}

// "host[:port]" with optional brackets for IPv6.
void parse_endpoint(const std::string& v, std::string& host, int& port) {
  std::string_view name, port_text;
  if (split_endpoint(v, name, port_text)) {
    host = std::string(name);
    if (!port_text.empty()) port = std::stoi(std::string(port_text));
    return;
  }
  throw UsageError("--rdzv_endpoint=" + v + " is not host[:port] (IPv6 in brackets: [::1]:29500)");
}

}  // namespace

ParsedCommandLine parse_command_line(int argc, const char* const* argv, const EnvLookup& env) {
  ParsedCommandLine out;
  LaunchConfig& c = out.config;
  CLI::App app{"ddplaunch: start distributed data-parallel workers on this node (a drop-in for torchrun)"};
  app.footer(kExamples);
  app.prefix_command();
  app.set_version_flag("--version", std::string("ddplaunch ") + kVersion);

  // PET_<DEST> defaults, applied after parsing to options the command line did not give. Read
  // through `env` (not CLI11's envname, which reads the real environment) so tests can fake it.
  std::vector<std::pair<CLI::Option*, std::string>> pet_options;
  const auto pet = [&](CLI::Option* opt, const std::string& dest) {
    std::string upper;
    for (char ch : dest) upper.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(ch))));
    pet_options.emplace_back(opt, "PET_" + upper);
    return opt;
  };
  std::string nnodes = "1", nproc = "1", redirects = "0", tee = "0", ranks_filter, rdzv_conf, signals;
  double monitor_interval = 0.1, shutdown_timeout = 30, rdzv_timeout = 900, heartbeat_timeout = 10;
  bool use_env = true;
  std::optional<std::string> master_addr, master_port_text, node_rank_text;
  pet(app.add_option("--nnodes", nnodes, "N or MIN:MAX (elastic)"), "nnodes");
  pet(app.add_option("--nproc_per_node,--nproc-per-node", nproc, "workers on this node: N, gpu, cpu or auto"),
      "nproc_per_node");
  pet(app.add_option("--node_rank,--node-rank", node_rank_text, "rank of this node, 0..nnodes-1"), "node_rank");
  pet(app.add_option("--master_addr,--master-addr", master_addr,
                     "address of node 0, which hosts the store (default 127.0.0.1; IPv6 in brackets)"),
      "master_addr");
  pet(app.add_option("--master_port,--master-port", master_port_text, "store port on node 0 (default 29500)"),
      "master_port");
  pet(app.add_option("--rdzv_id,--rdzv-id", c.run_id, "job id shared by all nodes"), "rdzv_id");
  pet(app.add_option("--rdzv_endpoint,--rdzv-endpoint", c.rdzv_endpoint,
                     "host[:port] of the store (overrides --master_addr/--master_port)"),
      "rdzv_endpoint");
  pet(app.add_option("--rdzv_backend,--rdzv-backend", c.rdzv_backend, "static or c10d (both use ddplaunch's store)"),
      "rdzv_backend");
  pet(app.add_option("--rdzv_conf,--rdzv-conf", rdzv_conf, "k=v,... (timeout, join_timeout, heartbeat_timeout)"),
      "rdzv_conf");
  pet(app.add_option("--rdzv_timeout,--rdzv-timeout", rdzv_timeout, "seconds to wait for all nodes (default 900)"),
      "rdzv_timeout");
  pet(app.add_flag("--standalone", c.standalone, "single node on a free port with a random run id"), "standalone");
  pet(app.add_option("--max_restarts,--max-restarts", c.max_restarts, "restarts of the whole job after a failure"),
      "max_restarts");
  pet(app.add_option("--monitor_interval,--monitor-interval", monitor_interval, "seconds between heartbeat checks"),
      "monitor_interval");
  pet(app.add_option("--heartbeat_timeout,--heartbeat-timeout", heartbeat_timeout,
                     "seconds without a heartbeat before a node counts as lost (default 10)"),
      "heartbeat_timeout");
  pet(app.add_option("--role", c.role, "role name (ROLE_NAME)"), "role");
  pet(app.add_option("--log_dir,--log-dir", c.log_dir,
                     "write <dir>/<run_id>/attempt_<n>/<local_rank>/{stdout,stderr}.log"),
      "log_dir");
  pet(app.add_option("-r,--redirects", redirects,
                     "streams to files only: 0 none, 1 stdout, 2 stderr, 3 both, or 0:1,1:3"),
      "redirects");
  pet(app.add_option("-t,--tee", tee, "streams to files and the console (same syntax)"), "tee");
  pet(app.add_option("--local_ranks_filter,--local-ranks-filter", ranks_filter,
                     "local ranks shown on the console, e.g. 0,3"),
      "local_ranks_filter");
  pet(app.add_flag("--no_python,--no-python", c.no_python, "execute the program directly"), "no_python");
  pet(app.add_flag("-m,--module", c.module, "run the program as python -m MODULE"), "module");
  pet(app.add_option("--local_addr,--local-addr", c.local_addr, "address this node advertises"), "local_addr");
  pet(app.add_option("--shutdown_timeout,--shutdown-timeout", shutdown_timeout,
                     "seconds between SIGTERM and SIGKILL (default 30)"),
      "shutdown_timeout");
  pet(app.add_option("--signals_to_handle,--signals-to-handle", signals,
                     "signals forwarded to workers (default SIGTERM,SIGINT,SIGHUP,SIGQUIT)"),
      "signals_to_handle");
  pet(app.add_flag("--virtual_local_rank,--virtual-local-rank", c.virtual_local_rank,
                   "each worker sees exactly its own GPU as device 0"),
      "virtual_local_rank");
  app.add_flag("--use_env,--use-env", use_env,
               "legacy launcher flag (the default); --use_env=false appends --local_rank=i to worker args");
  app.add_flag("--local_rank_arg,--local-rank-arg", c.legacy_local_rank_arg,
               "append --local_rank=i to each worker's arguments (torch.distributed.launch style)");
  app.add_option("--log_line_prefix_template,--log-line-prefix-template", c.line_prefix_template,
                 "console prefix, with ${rank}, ${local_rank}, ${role_name}; \"\" for none");
  app.add_flag("--dry-run,--dry_run", c.dry_run, "print the rank map, each worker's command and environment, and exit");
  app.add_option("--log_level,--log-level", c.log_level,
                 "launcher messages shown: debug, info, warning or error (default info, or DDPLAUNCH_LOG_LEVEL)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    out.early_exit_text = app.help();
    return out;
  } catch (const CLI::CallForVersion&) {
    out.early_exit_text = std::string("ddplaunch ") + kVersion + "\n";
    return out;
  } catch (const CLI::ParseError& e) {
    throw UsageError(std::string(e.what()) + "; see ddplaunch --help");
  }
  for (auto& [opt, name] : pet_options) {
    const auto value = env(name);
    if (!value || opt->count() > 0) continue;
    try {
      opt->add_result(*value);
      opt->run_callback();
    } catch (const CLI::ParseError& e) {
      throw UsageError(name + "=" + *value + " is not valid for " + opt->get_name() + " (" + e.what() + ")");
    }
  }

  auto rest = app.remaining();
  if (!rest.empty() && rest.front() == "--") rest.erase(rest.begin());
  if (!rest.empty() && rest.front().size() > 1 && rest.front()[0] == '-') {
    throw UsageError("unknown option " + rest.front() + "; see ddplaunch --help (options go before the program)");
  }
  if (!rest.empty()) {
    c.program = rest.front();
    c.program_args.assign(rest.begin() + 1, rest.end());
  }

  parse_nnodes(nnodes, c);
  c.nproc_per_node = parse_nproc(nproc, env);
  const auto parse_int = [](const std::string& flag, const std::string& v) {
    if (!is_digits(std::string_view(v).substr(!v.empty() && v[0] == '-' ? 1 : 0), 1, 9))
      throw UsageError(flag + "=" + v + " is not a whole number");
    return std::stoi(v);
  };
  if (node_rank_text) c.node_rank = parse_int("--node_rank", *node_rank_text);
  if (master_addr) c.master_addr = *master_addr;
  if (master_port_text) c.master_port = parse_int("--master_port", *master_port_text);
  if (!c.rdzv_endpoint.empty()) parse_endpoint(c.rdzv_endpoint, c.master_addr, c.master_port);
  c.redirects = parse_streams("--redirects", redirects);
  c.tee = parse_streams("--tee", tee);
  c.monitor_interval = seconds_to_ms("--monitor_interval", monitor_interval);
  c.shutdown_timeout = seconds_to_ms("--shutdown_timeout", shutdown_timeout);
  c.rdzv_timeout = seconds_to_ms("--rdzv_timeout", rdzv_timeout);
  c.heartbeat_timeout = seconds_to_ms("--heartbeat_timeout", heartbeat_timeout);
  c.heartbeat_interval = std::max(std::chrono::milliseconds(50), c.heartbeat_timeout / 5);
  if (!rdzv_conf.empty()) {
    std::stringstream in(rdzv_conf);
    std::string item;
    while (std::getline(in, item, ',')) {
      const auto eq = item.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == item.size()) {
        throw UsageError("--rdzv_conf item '" + item + "' is not key=value");
      }
      const std::string k = item.substr(0, eq), v = item.substr(eq + 1);
      static const std::set<std::string> known = {"timeout",
                                                  "join_timeout",
                                                  "last_call_timeout",
                                                  "heartbeat_timeout",
                                                  "read_timeout",
                                                  "is_host",
                                                  "store_type",
                                                  "close_timeout",
                                                  "heartbeat",
                                                  "keep_alive_interval",
                                                  "keep_alive_max_attempt",
                                                  "use_libuv"};
      if (!known.count(k)) {
        throw UsageError("--rdzv_conf key '" + k +
                         "' is unknown; use timeout, join_timeout, last_call_timeout or heartbeat_timeout");
      }
      const auto dot = std::min(v.find('.'), v.size());
      const bool seconds = is_digits(std::string_view(v).substr(0, dot), 1, 7) &&
                           (dot == v.size() || is_digits(std::string_view(v).substr(dot + 1), 1, v.size()));
      if (k.find("timeout") != std::string::npos && !seconds) {
        throw UsageError("--rdzv_conf " + k + "=" + v + " is not a number of seconds");
      }
      c.rdzv_conf[k] = v;
    }
    for (const char* key : {"timeout", "join_timeout"}) {
      if (c.rdzv_conf.count(key))
        c.rdzv_timeout = seconds_to_ms(std::string("--rdzv_conf ") + key, std::stod(c.rdzv_conf[key]));
    }
    if (c.rdzv_conf.count("heartbeat_timeout")) {
      c.heartbeat_timeout = seconds_to_ms("--rdzv_conf heartbeat_timeout", std::stod(c.rdzv_conf["heartbeat_timeout"]));
      c.heartbeat_interval = std::max(std::chrono::milliseconds(50), c.heartbeat_timeout / 5);
    }
  }
  if (!ranks_filter.empty()) {
    std::stringstream in(ranks_filter);
    std::string item;
    while (std::getline(in, item, ',')) c.local_ranks_filter.push_back(parse_int("--local_ranks_filter", item));
  }
  if (app.count("--signals_to_handle") && signals.empty()) {
    throw UsageError("--signals_to_handle is empty; list signals such as SIGTERM,SIGINT,SIGUSR1");
  }
  if (signals.empty()) signals = env("TORCHELASTIC_SIGNALS_TO_HANDLE").value_or("SIGTERM,SIGINT,SIGHUP,SIGQUIT");
  {
    std::stringstream in(signals);
    std::string item;
    while (std::getline(in, item, ',')) c.signals_to_handle.push_back(parse_signal(item));
  }
  if (!use_env) c.legacy_local_rank_arg = true;
  if (c.standalone && (c.max_nodes > 1 || node_rank_text)) {
    throw UsageError("--standalone runs a single node; drop --nnodes/--node_rank or --standalone");
  }
  if (c.standalone) {
    c.min_nodes = c.max_nodes = 1;
    c.node_rank = 0;
    c.master_addr = "127.0.0.1";
    c.master_port = 0;
    c.run_id = random_run_id();
  }
  // Slurm fills in what the command line left open (see slurm.hpp).
  if (!c.standalone && !app.count("--nnodes") && !node_rank_text && !master_addr && env("SLURM_JOB_ID")) {
    apply_slurm_environment(env, master_port_text.has_value() || !c.rdzv_endpoint.empty(), c);
  }
  if (!c.log_level.empty()) log::parse_level(c.log_level);  // throws UsageError naming it
  validate(c);
  return out;
}

}  // namespace ddp::launcher
