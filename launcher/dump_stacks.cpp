// See dump_stacks.hpp.
#include "launcher/dump_stacks.hpp"

#include <iostream>

#include "common/exit_codes.hpp"
#include "common/log.hpp"
#include "ddplaunch/common/error.hpp"
#include "launcher/backends.hpp"
#include "launcher/rdzv/job_store.hpp"
#include "launcher/watch/collective_hang.hpp"
#include "launcher/watch/stacks_request.hpp"

namespace ddp::launcher {

int request_stacks(const LaunchConfig& config) {
  EffectiveConfig eff;
  eff.port = config.master_port;
  const std::unique_ptr<RendezvousBackend> backend = make_backend(config, eff, false);
  const StoreConnector connect = backend->connector(std::chrono::seconds(5));
  const auto job = job_stores(connect(), config.run_id, config.rdzv_secret).job;
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
  for (int g = 0; g < nnodes; ++g) {
    try {
      const std::string text = job->get(stacks_key(n, g), std::chrono::seconds(30));
      const std::vector<RankProgress> progress = decode_progress(job->get(progress_key(n, g), std::chrono::seconds(5)));
      std::cout << text;
      if (!progress.empty())
        std::cout << "collective progress:\n" << describe_progress(progress, realtime_ns()) << "\n";
      std::cout << std::flush;
    } catch (const Error& e) {
      log::error("node {} did not answer: {}", g, e.what());
      ++missing;
    }
  }
  return missing == 0 ? kExitOk : kExitFailure;
}

}  // namespace ddp::launcher
