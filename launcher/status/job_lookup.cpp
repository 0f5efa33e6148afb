// See job_lookup.hpp.
#include "launcher/status/job_lookup.hpp"

#include <chrono>
#include <filesystem>

#include "common/exit_codes.hpp"
#include "common/log.hpp"
#include "launcher/status/job_registry.hpp"

namespace ddp::launcher {

JobLookup look_up_job(const EnvLookup& env, const std::string& cwd, const std::function<bool(const JobRecord&)>& keep) {
  const std::vector<JobRegistry> registries = JobRegistry::every_for_user(env);
  std::vector<std::string> refused;
  std::vector<JobRecord> live = running_jobs(registries, refused);
  for (const std::string& why : refused) log::warning("job registry: {}; its jobs are not looked at", why);
  std::erase_if(live, [&keep](const JobRecord& r) { return !keep(r); });
  return {choose_job(std::move(live), cwd), describe_dirs(registries)};
}

int report_ambiguous(const JobLookup& lookup, const std::string& cwd, std::string_view client,
                     const std::function<std::string(const JobRecord&)>& pick) {
  const std::vector<JobRecord>& jobs = lookup.choice.ambiguous;
  const bool here = !jobs.empty() && jobs.front().cwd == cwd;
  log::error(
      "{} ddplaunch jobs of this user run on this machine and {} started in {}, so ddplaunch {} asks none; "
      "choose one with the arguments below, or run it in the job's directory",
      jobs.size(), here ? "several were" : "none was", cwd.empty() ? "this directory" : cwd, client);
  const long long now = wall_clock_ms();
  for (const JobRecord& job : jobs)
    log::error("{}; choose it with ddplaunch {} {}", describe_job(job, now), client, pick(job));
  return kExitUsage;
}

std::string caller_cwd() {
  std::error_code ignored;  // a removed working directory: ""
  return std::filesystem::current_path(ignored).string();
}

long long wall_clock_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace ddp::launcher
