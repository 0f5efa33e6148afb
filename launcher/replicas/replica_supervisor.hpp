// The layout's launcher (--replica_groups N, TorchFT): starts the lighthouse and one launcher per
// replica group, each a ddplaunch of its own (the same command line and the group's variables:
// replica_layout.hpp), and waits for them all. Each group's launcher is its own restart domain:
// its agent restarts its workers within its own budget and never touches another group; this
// launcher never restarts a group. The lighthouse is restarted when it exits while groups run
// (at most --max_restarts times), and ended (SIGTERM, then SIGKILL after --shutdown_timeout) once
// the last group has ended. Signals this launcher gets (--signals_to_handle, and SIGTERM, SIGINT,
// SIGHUP, SIGQUIT always) go to every running group's launcher, which stops its workers as alone.
// Every child dies with this process (SIGKILL on its death; each group's reaper then ends its
// workers: workers/job_lifetime.hpp).
// Runs on the calling thread, which must be the process's only one: it blocks those signals and
// waits for them (sigwaitinfo). Not thread-safe.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "ddplaunch/common/env_lookup.hpp"
#include "launcher/config/launch_config.hpp"

namespace ddp::launcher {

struct ReplicaSupervisorOptions {
  LaunchConfig config;            // the layout's (config.replicas.supervises())
  std::string self;               // this program, started once per group ("/proc/self/exe")
  std::vector<std::string> argv;  // the command line as given, argv[0] first: each group's, unchanged
  Environment env;                // this launcher's environment
};

class ReplicaSupervisor {
 public:
  // Throws UsageError when the lighthouse program is not found (before anything starts).
  explicit ReplicaSupervisor(ReplicaSupervisorOptions options);
  // Starts everything and blocks until every group has ended and the lighthouse is gone. Returns
  // the first failed group's exit code (by group index), kExitFailure when the lighthouse failed
  // more often than --max_restarts, else 0. Throws ddp::StartError when a child cannot start
  // (what has started is ended first).
  int run();

 private:
  struct Group {
    pid_t pid = -1;
    std::optional<int> code;  // set once it has ended
  };
  void start_lighthouse();
  void start_group(int index);
  void reap();
  void lighthouse_ended(int status);
  void forward(int signo);
  void stop_lighthouse();
  int running_groups() const;
  int exit_code() const;

  ReplicaSupervisorOptions o_;
  std::string lighthouse_exe_;
  std::vector<std::string> lighthouse_argv_;
  std::string url_;
  std::vector<Group> groups_;
  pid_t lighthouse_ = -1;
  int lighthouse_restarts_ = 0;
  bool lighthouse_failed_ = false;
  bool stopping_ = false;
};

}  // namespace ddp::launcher
