// The launcher's whole configuration as plain data, built by the command line (cli.hpp) and
// checked by validate() (validate.hpp). Everything downstream (rendezvous, worker specs, the agent) reads only
// this struct, never argv or the environment.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ddplaunch/common/error.hpp"
#include "launcher/config/backend_rules.hpp"
#include "launcher/config/fleet_options.hpp"
#include "launcher/config/replica_groups.hpp"
#include "launcher/config/straggler_mode.hpp"

namespace ddp::launcher {

// Bad command line or configuration (ddp::UsageError): exit code 2 with its one-line message.
using ddp::UsageError;

// Which streams of which local ranks go to files (--redirects / --tee): bit 1 stdout, bit 2 stderr.
struct StreamSelection {
  int all = 0;                  // applies to every local rank not in per_rank
  std::map<int, int> per_rank;  // local rank → mask
  int for_rank(int local_rank) const;
};

// The most nodes a job may have (--nnodes MAX, checked by validate()), and so the bound on a
// group rank wherever one is read back (the outcome key's origin node, rdzv/outcome.hpp).
// 65536 because that is the limit validate() states in its message and documents in
// validate.hpp, and its tests hold it; the other bound, 1 << 20 in rdzv/, only checked what
// decoding accepts, and every group rank a valid job writes is below 65536 anyway. Here, in the
// lowest area both cli/ and rdzv/ see, so that one constant serves both.
inline constexpr int kMaxNodes = 65536;

// Forwarded to the workers unless --signals_to_handle (or TORCHELASTIC_SIGNALS_TO_HANDLE) says
// otherwise: torchrun's four stopping signals, plus SIGUSR1 and SIGUSR2, which stop nothing and
// reach the workers as they are (Slurm's `--signal=USR1@90` preemption warning, checkpoint hooks).
inline constexpr const char* kDefaultSignalsToHandle = "SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1,SIGUSR2";

struct LaunchConfig {
  int min_nodes = 1;
  int max_nodes = 1;
  // --active_nodes: members of an elastic round beyond this many stand by (no workers) and take a
  // lost node's place in the next round (rdzv/standby_members.hpp); unset = every member is
  // active. Set, it is MIN..MAX of --nnodes (validate()): a given 0 is refused, not "unset".
  std::optional<int> active_nodes;
  int nproc_per_node = 1;
  int node_rank = 0;
  // --rdzv_backend c10d without a node rank (Kubeflow's elastic PyTorchJob): nodes rank in order
  // of arrival, the store's host first; node_rank is then 0 on the store's host, 1 elsewhere
  // (cli/c10d_ranks.hpp).
  bool rank_by_arrival = false;
  // node_rank 0 above is a guess (the endpoint names this machine): when the store's port is
  // already taken here, another launcher of the job on this machine hosts it (TorchX's local
  // scheduler starts every replica on one host) and this node joins it instead, as torchrun's
  // c10d falls back to a client (rdzv/hosted_store.hpp, StoreHostTaken).
  bool store_host_guessed = false;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string run_id = "none";
  std::string rdzv_backend = "static";
  std::string rdzv_endpoint;
  std::map<std::string, std::string> rdzv_conf;
  // --rdzv_backend etcd-v3 (etcd_config.hpp): the members from --rdzv_endpoint ("host:port", in
  // order), and the user and password from --rdzv_conf user=, password_file= (or
  // DDPLAUNCH_ETCD_PASSWORD); never printed, never passed to workers.
  std::vector<std::string> etcd_endpoints;
  std::string etcd_user;
  std::string etcd_password;
  // TLS to etcd (--rdzv_conf cacert=, cert=, key=, protocol=https): through ddplaunch-etcd-tls.
  bool etcd_tls = false;
  std::string etcd_ca_file;  // "": the system's trusted certificates
  std::string etcd_cert_file;
  std::string etcd_key_file;
  // The chosen backend's rules (backend_rules.hpp), set with rdzv_backend by the command line.
  BackendRules rdzv_rules;
  // The job secret (job_secret.hpp): from DDPLAUNCH_RDZV_TOKEN or --rdzv_conf token_file; "" = none.
  // Never printed, never passed to workers.
  std::string rdzv_secret;
  bool standalone = false;
  int max_restarts = 0;
  std::chrono::milliseconds monitor_interval{100};
  std::string role = "default";
  std::string log_dir;  // "" = no log files
  // Where a run without --log_dir makes its directory (agent/node_setup.hpp): $TMPDIR when set,
  // else /tmp, as torchrun's tempfile.mkdtemp chooses.
  std::string temp_dir = "/tmp";
  std::string summary_json;  // --summary_json FILE ("" = none; run_recorder.hpp)
  std::string event_log;     // --event_log FILE ("" = none)
  StreamSelection redirects;
  StreamSelection tee;
  std::vector<int> local_ranks_filter;  // empty = all
  // --duplicate_stdout_filters / --duplicate_stderr_filters: lines of tee'd streams that contain
  // any of these go also to <attempt dir>/filtered_{stdout,stderr}.log (workers/filtered_log.hpp).
  // Empty = off; an empty item matches every line, as in torchrun.
  std::vector<std::string> duplicate_stdout_filters;
  std::vector<std::string> duplicate_stderr_filters;
  bool no_python = false;
  bool module = false;
  // --run_path: the program is a Python script run as torchrun's run_script_path does
  // (runpy.run_path with run_name "__main__", sys.argv = [script, args...]); beats --no_python
  // and -m, as in torchrun (workers/run_path.hpp).
  bool run_path = false;
  std::string local_addr;  // address this node advertises ("" = hostname)
  std::chrono::milliseconds shutdown_timeout{std::chrono::seconds(30)};
  // --exit_barrier_timeout (torchrun's --exit-barrier-timeout, TORCH_ELASTIC_EXIT_BARRIER_TIMEOUT):
  // how long a node whose workers all succeeded waits for the other nodes' to finish. Past it, a
  // node other than the store's host leaves with exit 0 (the others go on); the store's host
  // stays, since their store is in it (agent.hpp, step 4).
  std::chrono::milliseconds exit_barrier_timeout{std::chrono::seconds(300)};
  std::chrono::milliseconds hang_timeout{0};  // --hang_timeout: 0 = off (hang_watch.hpp)
  // Straggler detection (docs/stragglers.md).
  StragglerMode stragglers = StragglerMode::Warn;                              // --stragglers
  std::chrono::milliseconds straggler_window{std::chrono::seconds(30)};        // --straggler_window
  double straggler_min_ms = 20;                                                // --straggler_min_ms
  double straggler_fraction = 0.1;                                             // --straggler_fraction
  std::chrono::milliseconds straggler_replace_after{std::chrono::minutes(5)};  // --straggler_replace_after
  // --preemption_grace: between forwarding a SIGTERM the launcher received (from Kubernetes or
  // Slurm) and SIGKILL; --shutdown_timeout is for failures, restarts and SIGINT/SIGHUP/SIGQUIT.
  // Unset on the command line: the longer of 30 s and --shutdown_timeout.
  std::chrono::milliseconds preemption_grace{std::chrono::seconds(30)};
  // --unkillable_timeout: how long a worker may outlive SIGKILL before the launcher names it, gives
  // up on it and keeps this host out of the job (exit 71; watch/held_workers.hpp).
  std::chrono::milliseconds unkillable_timeout{std::chrono::seconds(30)};
  // --failure_budget: set the timeouts not given alone from one duration (failure_budget.hpp); 0: none.
  std::chrono::milliseconds failure_budget{0};
  // The no-progress breaker (agent/progress_rule.hpp): stop after this many consecutive restarts
  // without progress (0 = off), progress read from --progress_file ("" = none) or collectives.
  int max_no_progress_restarts = 0;
  std::string progress_file;
  // Whether the breaker may measure a round by its collectives when --progress_file gives no
  // reading. False in a TorchFT replica group (replicas/replica_layout.hpp): torchft makes new
  // process groups at every quorum, so their sequence numbers restart and say nothing of progress.
  bool progress_from_collectives = true;
  // --replica_groups and the lighthouse (replica_groups.hpp): TorchFT's layout from one command.
  ReplicaGroups replicas;
  std::string health_check;        // --health_check: a site command run before every round ("" = none; health/)
  double health_min_free_mb = 16;  // --health_min_free_mb: the log directory's floor (0: only writable)
  // Python workers get PyTorch's worker server on a private socket (workers/python_hook.hpp);
  // --no_worker_server turns it off.
  bool worker_server = true;
  std::vector<int> signals_to_handle;  // forwarded to the workers' process groups
  bool virtual_local_rank = false;
  std::string numa_binding;  // --numa_binding: node, socket, exclusive, core-complex; "": off (topology/)
  // Appended to each worker's arguments: nothing, --local_rank=i (torch.distributed.launch up to
  // torch 1.x, and --use_env=false) or --local-rank=i (torch.distributed.launch in torch 2.x).
  enum class LocalRankArg { None, Underscore, Dash };
  LocalRankArg local_rank_arg = LocalRankArg::None;
  bool dry_run = false;
  bool dump_stacks = false;  // --dump_stacks: ask a running job for its stacks (stacks_request.hpp)
  // --dump_stacks with none of --master_addr, --master_port, --rdzv_id, --rdzv_endpoint (nor their
  // PET_* variables): the job comes from this machine's registry (status/job_registry.hpp).
  bool find_job = false;
  bool status = false;    // --status: print a running launcher's live status (status/status_query.hpp)
  int status_port = -1;   // --status_port: the status endpoint on TCP too (0: a free port; -1: none)
  std::string log_level;  // --log_level: debug, info, warning, error ("" = DDPLAUNCH_LOG_LEVEL or info)
  std::chrono::milliseconds rdzv_timeout{std::chrono::seconds(900)};
  std::chrono::milliseconds heartbeat_interval{std::chrono::seconds(1)};
  std::chrono::milliseconds heartbeat_timeout{std::chrono::seconds(10)};
  // --rdzv_conf last_call_timeout: an elastic round's host waits this long for MAX nodes once MIN
  // nodes have joined (rdzv/job_round.hpp).
  std::chrono::milliseconds last_call_timeout{std::chrono::seconds(3)};
  std::string line_prefix_template = "[${rank}]:";  // "" = no prefix
  std::string program;
  std::vector<std::string> program_args;
  FleetOptions fleet;  // --hostfile / --hosts: launch over ssh (fleet/); --fleet_stdin on the hosts
};

}  // namespace ddp::launcher
