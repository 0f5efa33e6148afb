// See dump_stacks.hpp.
#include "launcher/dump_stacks.hpp"

#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>
#include <variant>

#include "common/exit_codes.hpp"
#include "common/log.hpp"
#include "ddplaunch/common/env_lookup.hpp"
#include "ddplaunch/common/error.hpp"
#include "ddplaunch/rendezvous/endpoint.hpp"
#include "ddplaunch/rendezvous/error.hpp"
#include "launcher/backends.hpp"
#include "launcher/rdzv/job_store.hpp"
#include "launcher/status/job_lookup.hpp"
#include "launcher/watch/collective_hang.hpp"
#include "launcher/watch/stacks_request.hpp"

namespace ddp::launcher {
namespace {

// The job --dump_stacks asks when no flag names one (status/job_lookup.hpp), said on stderr with
// the others and the flags that choose them. Otherwise returns the exit code after the error
// lines: kExitUsage when several jobs could be meant, kExitFailure when there is none or it needs
// a job secret not given.
std::variant<LaunchConfig, int> find_job(const LaunchConfig& config) {
  const std::string cwd = caller_cwd();
  const JobLookup lookup = look_up_job(process_env(), cwd, [](const JobRecord&) { return true; });
  const JobChoice& choice = lookup.choice;
  if (!choice.ambiguous.empty()) return report_ambiguous(lookup, cwd, "--dump_stacks", selecting_flags);
  if (!choice.chosen) {
    log::error(
        "no running ddplaunch job of this user on this machine (none in {}); name a job on another machine with "
        "--master_addr, --master_port and --rdzv_id",
        lookup.places);
    return kExitFailure;
  }
  const JobRecord& job = *choice.chosen;
  const long long now = wall_clock_ms();
  if (choice.others.empty()) {
    log::info("asking {}", describe_job(job, now));
  } else {
    log::info("{} jobs run on this machine; asking the one started in this directory: {}", choice.others.size() + 1,
              describe_job(job, now));
    for (const JobRecord& other : choice.others) {
      log::info("not asked: {}; ask it with ddplaunch --dump_stacks {}", describe_job(other, now),
                selecting_flags(other));
    }
  }
  if (job.secret && config.rdzv_secret.empty()) {
    log::error(
        "the job '{}' has a job secret; give --dump_stacks the same one, as its launchers got it "
        "(DDPLAUNCH_RDZV_TOKEN or --rdzv_conf token_file)",
        job.run_id);
    return kExitFailure;
  }
  LaunchConfig found = config;
  found.master_addr = job.master_addr;
  found.master_port = job.port;
  found.run_id = job.run_id;
  return found;
}

}  // namespace

int request_stacks(const LaunchConfig& given) {
  std::optional<LaunchConfig> found;
  if (given.find_job) {
    auto job = find_job(given);
    if (const int* exit_code = std::get_if<int>(&job)) return *exit_code;
    found = std::get<LaunchConfig>(std::move(job));
  }
  const LaunchConfig& config = found ? *found : given;
  EffectiveConfig eff;
  eff.port = config.master_port;
  const std::unique_ptr<RendezvousBackend> backend = make_backend(config, eff, false);
  const StoreConnector connect = backend->connector(std::chrono::seconds(5));
  std::shared_ptr<rendezvous::Store> store;
  try {
    store = connect();
  } catch (const rendezvous::RefusedError& e) {
    // Not a node's launcher, and not about the secret: the store refuses before any proof.
    log::error(
        "the store at {} refuses connections from this host ({}): once a job's round has formed, its store admits "
        "new connections only from the job's nodes and loopback, with a job secret or without; run ddplaunch "
        "--dump_stacks on one of the job's nodes",
        e.store(), e.host());
    return kExitFailure;
  }
  const auto job = job_stores(std::move(store), config.run_id, config.rdzv_secret).job;
  std::string nnodes_text;
  try {
    nnodes_text = job->get("stacks/nnodes", std::chrono::seconds(5));
  } catch (const Error& e) {
    log::error(
        "no running job with run id '{}' answers at {}:{} ({}); give its --master_addr, --master_port and "
        "--rdzv_id, and its job secret if it has one (a job started less than a second ago is not listening yet)",
        config.run_id, config.master_addr, config.master_port, e.what());
    return kExitFailure;
  }
  const int nnodes = std::stoi(nnodes_text);
  const long long n = make_stacks_request(*job);
  int missing = 0;
  int ranks = 0;
  int read = 0;
  for (int g = 0; g < nnodes; ++g) {
    try {
      const std::string text = job->get(stacks_key(n, g), std::chrono::seconds(30));
      // Set before the stacks; a launcher of an older release sets none.
      if (job->check({read_key(n, g)})) {
        int node_read = 0;
        int node_ranks = 0;
        const std::string counts = job->get(read_key(n, g), std::chrono::seconds(5));
        if (std::sscanf(counts.c_str(), "%d %d", &node_read, &node_ranks) == 2) {
          read += node_read;
          ranks += node_ranks;
        }
      }
      const std::vector<RankProgress> progress = decode_progress(job->get(progress_key(n, g), std::chrono::seconds(5)));
      std::cout << text;
      if (const std::string lines = describe_progress(progress, realtime_ns()); !lines.empty())
        std::cout << "collective progress:\n" << lines << "\n";
      std::cout << std::flush;
    } catch (const Error& e) {
      log::error("node {} did not answer: {}", g, e.what());
      ++missing;
    }
  }
  if (ranks > 0 && read == 0) {
    log::error("no stack of any of the {} rank(s) could be read; the note under them says why", ranks);
    return kExitFailure;
  }
  return missing == 0 ? kExitOk : kExitFailure;
}

}  // namespace ddp::launcher
