// ddplaunch's flags as CLI11 options; see cli_options.hpp. torchrun's spelling comes first in
// each name (it names the PET_* variable), then the dashed one.
#include "launcher/cli/cli_options.hpp"

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "common/exit_codes.hpp"
#include "launcher/cli/flag_app.hpp"
#include "launcher/cli/pet_defaults.hpp"
#include "launcher/config/flag_parsers.hpp"
#include "launcher/config/numa_mode.hpp"
#include "launcher/config/rdzv_conf.hpp"
#include "launcher/config/version.hpp"

namespace ddp::launcher {
namespace {

const char* const kExamples = R"(
Examples:
  Single node, 8 workers:
    ddplaunch --nproc_per_node=8 ./train --lr 0.1
  A PyTorch script, unchanged (runs as PYTHON -u train.py; PYTHON is $PYTHON_EXEC, else the python
  beside ddplaunch, else $VIRTUAL_ENV's, else $CONDA_PREFIX's, else python3 on PATH):
    ddplaunch --nproc_per_node=4 train.py --epochs 3
  Two nodes, the same command on both (node 0 hosts the store at --master_addr):
    node0$ ddplaunch --nnodes=2 --node_rank=0 --master_addr=10.0.0.1 --master_port=29500 --nproc_per_node=8 ./train
    node1$ ddplaunch --nnodes=2 --node_rank=1 --master_addr=10.0.0.1 --master_port=29500 --nproc_per_node=8 ./train
  Picking GPUs: CUDA_VISIBLE_DEVICES=0,3 ddplaunch --nproc_per_node=gpu ./train
  One device per worker: CUDA_VISIBLE_DEVICES=2,3 ddplaunch --nproc_per_node=2 --virtual_local_rank ./train
  Slurm, one launcher per node:
    srun --nodes=2 --ntasks-per-node=1 ddplaunch --nproc_per_node=4 ./train
  MPI, one launcher per node:
    mpirun -np 2 --map-by ppr:1:node ddplaunch --nproc_per_node=4 ./train
  Meeting in etcd (v3 API), the same command on every node, in any order:
    ddplaunch --nnodes=2 --nproc_per_node=8 --rdzv_backend=etcd-v3 --rdzv_endpoint=10.0.0.5:2379 --rdzv_id=job42 ./train
  See what would run: ddplaunch --dry-run --nproc_per_node=2 ./train)";

// The examples, then the exit codes from their one table (common/exit_codes.hpp).
std::string help_footer() {
  std::string out = std::string(kExamples) +
                    "\nExit codes: the failing worker's own code (128+N if signal N killed it), and ddplaunch's own:";
  for (const ExitCodeMeaning& e : kExitCodeMeanings) {
    out += fmt::format("\n  {:<4} {}", static_cast<int>(e.code), e.meaning);
  }
  return out + "\n  (see README)";
}

// A duration flag: its text must be a number of seconds (CLI11 reports "--flag: <message>").
CLI::Option* add_seconds(FlagApp& app, const std::string& names, std::string& value, const std::string& help) {
  const CLI::Validator seconds(
      [](std::string& text) {
        return parse_seconds(text) ? std::string() : fmt::format("{} is not {}", text, kSecondsExpected);
      },
      "", "seconds");
  return app.add_option(names, value, help)->check(seconds)->type_name("SECONDS");
}

// A TCP port flag: its text must be a whole number in 0..65535 (CLI11 reports "--flag: <message>").
CLI::Option* add_port(FlagApp& app, const std::string& names, int& value, const std::string& help) {
  const CLI::Validator port(
      [](std::string& text) {
        const bool ok = !text.empty() && text.size() <= 5 &&
                        text.find_first_not_of("0123456789") == std::string::npos && std::stoi(text) <= 65535;
        return ok ? std::string() : fmt::format("{} is not a port; use 1..65535, or 0 for a free one", text);
      },
      "", "port");
  return app.add_option(names, value, help)->check(port)->type_name("PORT");
}

// --numa_binding's value must be one of torch's modes (the topology area applies it).
CLI::Validator numa_mode_check() {
  return CLI::Validator(
      [](std::string& text) {
        return is_numa_mode(text) ? std::string()
                                  : fmt::format("{} is not a binding mode; use {}", text, kNumaModesText);
      },
      "", "numa mode");
}

// Which nodes take part and where node 0's store is.
void declare_node_options(FlagApp& app, CommandLineValues& v, PetDefaults& pet) {
  LaunchConfig& c = v.config;
  pet.add(app.add_option("--nnodes", v.nnodes, "N or MIN:MAX (elastic)")->type_name("N|MIN:MAX"));
  pet.add(
      app.add_option("--nproc_per_node,--nproc-per-node", v.nproc_per_node,
                     "workers on this node: N, gpu, xpu (Intel), cpu (the CPUs this process may use: affinity, cgroup "
                     "limit) or auto")
          ->type_name("N|gpu|xpu|cpu|auto"));
  pet.add(app.add_option("--node_rank,--node-rank", v.node_rank, "rank of this node, 0..nnodes-1")->type_name("INT"));
  pet.add(app.add_option("--master_addr,--master-addr", v.master_addr,
                         "address of node 0, which hosts the store (default 127.0.0.1; IPv6 in brackets)")
              ->type_name("HOST"));
  pet.add(app.add_option("--master_port,--master-port", v.master_port,
                         "store port on node 0 (default: a free port for a single node, 29500 for several; with "
                         "etcd-v3 a free port)")
              ->type_name("INT"));
  pet.add(app.add_option("--local_addr,--local-addr", c.local_addr, "address this node advertises")->type_name("HOST"));
  pet.add(app.add_flag("--standalone", c.standalone, "single node on a free port with a random run id"));
}

// The rendezvous, failure detection and restarts.
void declare_rendezvous_options(FlagApp& app, CommandLineValues& v, PetDefaults& pet) {
  LaunchConfig& c = v.config;
  pet.add(app.add_option("--rdzv_id,--rdzv-id", c.run_id, "job id shared by all nodes")->type_name("ID"));
  pet.add(app.add_option("--rdzv_endpoint,--rdzv-endpoint", c.rdzv_endpoint,
                         "host[:port] of the store (overrides --master_addr/--master_port); with etcd-v3: "
                         "HOST:2379[,HOST:2379...], the etcd members")
              ->type_name("HOST[:PORT]"));
  pet.add(app.add_option("--rdzv_backend,--rdzv-backend", c.rdzv_backend,
                         "static and c10d: ddplaunch's own store on node 0; etcd-v3: meet in etcd (v3 API)")
              ->type_name("static|c10d|etcd-v3"));
  // One value per --rdzv_conf (a vector option would take the program as a second one).
  pet.add(app.add_option("--rdzv_conf,--rdzv-conf", v.rdzv_conf, app.lists_all() ? rdzv_conf_help() : "")
              ->type_name("KEY=VALUE,...")
              ->allow_extra_args(false));
  pet.add(add_seconds(app, "--rdzv_timeout,--rdzv-timeout", v.rdzv_timeout, "wait for all nodes (default 900)"));
  pet.add(app.add_option("--max_restarts,--max-restarts", v.max_restarts, "restarts of the whole job after a failure")
              ->type_name("INT"));
  pet.add(app.add_option("--max_no_progress_restarts,--max-no-progress-restarts", v.max_no_progress_restarts,
                         "stop (exit 123: do not requeue) after this many restarts in a row without progress "
                         "(default 0: off; docs/resilience.md)")
              ->type_name("INT"));
  pet.add(app.add_option("--progress_file,--progress-file", c.progress_file,
                         "a file the training updates with its iteration (an integer), e.g. Megatron's "
                         "latest_checkpointed_iteration.txt: the breaker's measure of progress")
              ->type_name("PATH"));
  pet.add(app.add_option("--active_nodes,--active-nodes", v.active_nodes,
                         "with --nnodes=MIN:MAX: N nodes run workers, the others stand by to replace a lost one "
                         "(MIN <= N <= MAX)")
              ->type_name("N"));
  pet.add(add_seconds(app, "--monitor_interval,--monitor-interval", v.monitor_interval,
                      "accepted for torchrun; ddplaunch waits on events (default 0.1)"));
  pet.add(add_seconds(app, "--heartbeat_timeout,--heartbeat-timeout", v.heartbeat_timeout,
                      "without a heartbeat, a node counts as lost (default 10)"));
  pet.add(app.add_option("--health_check,--health-check", c.health_check,
                         "a command (run with /bin/sh -c, at most 120 s) that must exit 0 on this node before "
                         "every round, besides the built-in checks; a node that fails them does not join and exits 69")
              ->type_name("CMD"));
  pet.add(app.add_option("--health_min_free_mb,--health-min-free-mb", c.health_min_free_mb,
                         "free MiB the log directory needs before every round (default 16; 0: only that it is "
                         "writable)")
              ->check(CLI::Validator(
                  [](std::string& text) {
                    // A plain number in 0..1e7, as a number of seconds is.
                    return parse_seconds(text)
                               ? std::string()
                               : fmt::format(
                                     "{} is not a number of MiB >= 0; use e.g. 16, or 0 to check only that the "
                                     "log directory is writable",
                                     text);
                  },
                  "", "MiB"))
              ->type_name("MIB"));
}

// How each worker is started and stopped.
void declare_worker_options(FlagApp& app, CommandLineValues& v, PetDefaults& pet) {
  LaunchConfig& c = v.config;
  pet.add(app.add_option("--role", c.role, "role name (ROLE_NAME)")->type_name("NAME"));
  pet.add(app.add_flag("--no_python,--no-python", c.no_python, "execute the program directly"));
  pet.add(app.add_flag("-m,--module", c.module, "run the program as python -m MODULE"));
  pet.add(app.add_flag("--run_path,--run-path", c.run_path,
                       "run the .py program as torchrun does, runpy.run_path(PROGRAM, run_name='__main__') with "
                       "sys.argv=[PROGRAM, ARGS...], in its own python -u process per worker (torchrun: a "
                       "multiprocessing child of its agent); beats --no_python and -m"));
  pet.add(app.add_option("--start_method,--start-method", v.start_method,
                         "accepted for torchrun, where it starts function workers (--run_path); here every worker "
                         "is its own process, fork+exec'd, whatever the value")
              ->check(CLI::IsMember({"spawn", "fork", "forkserver"}).description(""))
              ->type_name("spawn|fork|forkserver"));
  pet.add(app.add_flag("--virtual_local_rank,--virtual-local-rank", c.virtual_local_rank,
                       "each worker sees exactly its own GPU as device 0"));
  pet.add(app.add_option("--numa_binding,--numa-binding", c.numa_binding,
                         "bind each worker to CPUs near its GPU (local rank i: GPU i) through hwloc: node, socket, "
                         "exclusive or core-complex (torchrun's modes); without GPUs, workers spread over the NUMA "
                         "nodes or sockets (docs/numa.md)")
              ->check(numa_mode_check())
              ->type_name("MODE"));
  pet.add(add_seconds(app, "--shutdown_timeout,--shutdown-timeout", v.shutdown_timeout,
                      "between SIGTERM and SIGKILL after a failure or to restart (default "
                      "TORCH_ELASTIC_SHUTDOWN_TIMEOUT, else 30)"));
  pet.add(add_seconds(app, "--exit_barrier_timeout,--exit-barrier-timeout", v.exit_barrier_timeout,
                      "how long a node whose workers all succeeded waits for the other nodes' to finish; then "
                      "it leaves with exit 0, unless it hosts their store (default "
                      "TORCH_ELASTIC_EXIT_BARRIER_TIMEOUT, else 300)"));
  pet.add(add_seconds(app, "--preemption_grace,--preemption-grace", v.preemption_grace,
                      "between forwarding a SIGTERM the launcher received (a preemption: Kubernetes, Slurm) and "
                      "SIGKILL, for the workers to checkpoint (default: 30, or --shutdown_timeout when longer)"));
  add_seconds(app, "--unkillable_timeout,--unkillable-timeout", v.unkillable_timeout,
              "a worker still there this long after SIGKILL (stuck in the kernel, state D) is named with its "
              "wchan and the launcher exits 71 without starting another round on this host (default 30)");
  add_seconds(app, "--failure_budget,--failure-budget", v.failure_budget,
              "the longest a failure (crash, hang, lost or sick node) may take to be detected and its round stopped: "
              "sets --hang_timeout, --heartbeat_timeout, --shutdown_timeout, --unkillable_timeout and the workers' "
              "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC from it; each given alone wins (docs/failure-budget.md)");
  add_seconds(app, "--hang_timeout,--hang-timeout", v.hang_timeout,
              "fail the job (exit 124) when a rank waits this long in a collective, saying which rank never "
              "entered it (PyTorch's Flight Recorder, or the ddplaunch runtime) with stacks; for workers with "
              "neither, report a suspected hang when they use almost no CPU this long (default 0: off; 300 "
              "suits most training)");
  app.add_option("--stragglers", v.stragglers,
                 "straggler detection: each rank's entry into collectives against the others' (Flight Recorder, or the "
                 "ddplaunch runtime), a line when one is late for long; warn (default), off, exclude (leave a slow "
                 "node out at the next restart) or replace (restart with a spare in its place after "
                 "--straggler_replace_after) (docs/stragglers.md)")
      ->check(CLI::IsMember({"off", "warn", "exclude", "replace"}).description(""))
      ->type_name("off|warn|exclude|replace");
  add_seconds(app, "--straggler_window,--straggler-window", v.straggler_window,
              "the sliding window a rank's lateness is the median over; scored every third of it (default 30)");
  app.add_option("--straggler_min_ms,--straggler-min-ms", c.straggler_min_ms,
                 "the absolute threshold: a rank this many ms late or less is never a straggler (default 20)")
      ->check(CLI::NonNegativeNumber.description(""))
      ->type_name("MS");
  app.add_option("--straggler_fraction,--straggler-fraction", c.straggler_fraction,
                 "the relative threshold: a rank late by less than this fraction of a step is never a straggler "
                 "(default 0.1)")
      ->check(CLI::NonNegativeNumber.description(""))
      ->type_name("FRACTION");
  add_seconds(app, "--straggler_replace_after,--straggler-replace-after", v.straggler_replace_after,
              "with --stragglers=replace: how long a node is a straggler before its round restarts with a spare in "
              "its place (default 300)");
  app.add_flag_callback(
      "--no_worker_server,--no-worker-server", [&c] { c.worker_server = false; },
      "start no PyTorch worker server in Python workers (no PYTHONPATH hook, no control socket): hangs and "
      "stacks then come from CPU time and py-spy");
  pet.add(app.add_option("--signals_to_handle,--signals-to-handle", v.signals_to_handle,
                         "signals forwarded to workers, told to them as TORCHELASTIC_SIGNALS_TO_HANDLE (default "
                         "TORCHELASTIC_SIGNALS_TO_HANDLE, else SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1,SIGUSR2)")
              ->type_name("SIGNAL,..."));
  app.add_flag("--use_env,--use-env", v.use_env,
               "legacy launcher flag (the default); --use_env=false appends --local_rank=i to worker args");
  app.add_flag("--local_rank_arg{underscore},--local-rank-arg{underscore}", v.local_rank_arg,
               "append the local rank to each worker's arguments: underscore (the default) gives "
               "--local_rank=i (torch 1.x torch.distributed.launch), dash gives --local-rank=i (torch 2.x)")
      ->check(CLI::IsMember({"underscore", "dash"}))
      ->option_text("[=underscore|dash]");
}

// Where output goes, and what ddplaunch itself prints.
void declare_output_options(FlagApp& app, CommandLineValues& v, PetDefaults& pet) {
  LaunchConfig& c = v.config;
  pet.add(app.add_option("--log_dir,--log-dir", c.log_dir,
                         "write <dir>/<run_id>_<random>/attempt_<n>/<local_rank>/{stdout,stderr}.log")
              ->type_name("DIR"));
  pet.add(app.add_option("-r,--redirects", v.redirects,
                         "streams to files only: 0 none, 1 stdout, 2 stderr, 3 both, or 0:1,1:3")
              ->type_name("0-3|RANK:0-3,..."));
  pet.add(app.add_option("-t,--tee", v.tee, "streams to files and the console (same syntax)")
              ->type_name("0-3|RANK:0-3,..."));
  pet.add(app.add_option("--local_ranks_filter,--local-ranks-filter", v.local_ranks_filter,
                         "local ranks shown on the console, e.g. 0,3")
              ->type_name("RANK,..."));
  pet.add(app.add_option("--log_line_prefix_template,--log-line-prefix-template", v.line_prefix_template,
                         "console prefix, with ${rank}, ${local_rank}, ${role_name}, ${hostname}; \"\" for none "
                         "(default TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE, else [${rank}]:)")
              ->type_name("TEMPLATE"));
  const auto duplicate_help = [&app](const char* stream, const char* tee) {
    if (!app.lists_all()) return std::string();
    return fmt::format(
        "copy the lines of tee'd {0} (--tee {1} or 3) containing any of these strings (',,' is a comma) also "
        "to <attempt dir>/filtered_{0}.log, every rank's in one file, as torchrun does",
        stream, tee);
  };
  pet.add(app.add_option("--duplicate_stdout_filters,--duplicate-stdout-filters", v.duplicate_stdout_filters,
                         duplicate_help("stdout", "1"))
              ->type_name("TEXT,..."));
  pet.add(app.add_option("--duplicate_stderr_filters,--duplicate-stderr-filters", v.duplicate_stderr_filters,
                         duplicate_help("stderr", "2"))
              ->type_name("TEXT,..."));
  app.add_option("--logs_specs,--logs-specs", v.logs_specs,
                 "torchrun's LogsSpecs plugin (a Python entry point): refused; use --log_dir, --redirects, --tee, "
                 "--local_ranks_filter and --log_line_prefix_template")
      ->type_name("NAME");
  app.add_option("--summary_json,--summary-json", c.summary_json,
                 "write every local rank's outcome and the root cause as JSON when the job ends")
      ->type_name("FILE");
  app.add_option("--event_log,--event-log", c.event_log,
                 "append JSON lines as the job goes: rounds, worker starts and exits, teardown, restarts")
      ->type_name("FILE");
  pet.add(app.add_option("--event_log_handler,--event-log-handler", v.event_log_handler,
                         "torchrun's event handlers: null and dynamic_rendezvous (the default: none), console (the "
                         "--event_log JSON lines on stderr, unless --event_log names a file)")
              ->check(CLI::IsMember({"null", "console", "dynamic_rendezvous"}).description(""))
              ->type_name("null|console|dynamic_rendezvous"));
  app.add_flag("--dump_stacks,--dump-stacks", c.dump_stacks,
               "print every rank's stack on every node of the running job at --master_addr:--master_port "
               "(--rdzv_id), without stopping it; no program; without those flags, your job on this machine "
               "(several: the one started in this directory)");
  app.add_flag("--status", c.status,
               "print a running launcher's live status as JSON (round, nodes, ranks with pids and state, restarts, "
               "progress, hangs) and exit: your job on this machine (several: the one started in this "
               "directory), or the one of --rdzv_id, or "
               "`--status PID` / `--status SOCKET`; no program");
  pet.add(add_port(app, "--status_port,--status-port", c.status_port,
                   "also serve the live status over HTTP on this TCP port (GET /status, GET /healthz) and the "
                   "job's page at / (docs/job-page.md; with a job secret, its token is printed with its URL), at the "
                   "store's address on the node hosting it, else --local_addr or every interface; 0: a free port "
                   "(printed); always: a unix socket in the run's directory"));
  app.add_flag("--dry-run,--dry_run", c.dry_run, "print the rank map, each worker's command and environment, and exit");
  app.add_option("--print_completion,--print-completion", v.print_completion,
                 "print a completion script for ddplaunch's flags and exit, e.g. eval \"$(ddplaunch "
                 "--print_completion bash)\"")
      ->check(CLI::IsMember({"bash", "zsh", "tcsh"}).description(""))
      ->type_name("bash|zsh|tcsh");
  app.add_option("--log_level,--log-level", c.log_level,
                 "launcher messages shown: debug, info, warning or error (default DDPLAUNCH_LOG_LEVEL, else "
                 "torchrun's LOGLEVEL: DEBUG, INFO, WARNING, ERROR or CRITICAL, else info)")
      ->type_name("LEVEL");
}

}  // namespace

void declare_options(FlagApp& app, CommandLineValues& values, PetDefaults& pet) {
  if (app.lists_all()) app.footer(help_footer());
  app.set_version_flag("--version", std::string("ddplaunch ") + kVersion);
  declare_node_options(app, values, pet);
  declare_rendezvous_options(app, values, pet);
  declare_worker_options(app, values, pet);
  declare_output_options(app, values, pet);
  declare_replica_options(app, values.replicas, values.config);
}

}  // namespace ddp::launcher
