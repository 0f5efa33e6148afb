// See job_record.hpp.
#include "launcher/status/job_record.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <iterator>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/format_duration.hpp"
#include "ddplaunch/rendezvous/endpoint.hpp"

namespace ddp::launcher {
namespace {

// A value as a shell reads it back: as is when it holds only safe characters, else in single quotes.
std::string shell_word(const std::string& value) {
  const bool safe = !value.empty() && std::all_of(value.begin(), value.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) ||
           std::string_view("-_.:/@%+=,").find(ch) != std::string_view::npos;
  });
  if (safe) return value;
  std::string quoted = "'";
  for (char ch : value) quoted += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return quoted + "'";
}

}  // namespace

std::string JobRecord::to_json() const {
  const nlohmann::json doc = {{"pid", pid},
                              {"proc_start", proc_start},
                              {"started_ms", started_ms},
                              {"run_id", run_id},
                              {"master_addr", master_addr},
                              {"port", port},
                              {"nnodes", nnodes},
                              {"node_rank", node_rank},
                              {"hosts_store", hosts_store},
                              {"secret", secret},
                              {"cwd", cwd},
                              {"command", command},
                              {"status_socket", status_socket}};
  // Replacing invalid UTF-8 (a path or argument in another encoding) rather than throwing.
  return doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::optional<JobRecord> JobRecord::from_json(const std::string& text) {
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
  if (!doc.is_object()) return std::nullopt;
  try {
    JobRecord r;
    r.pid = doc.at("pid").get<int>();
    r.proc_start = doc.at("proc_start").get<unsigned long long>();
    r.started_ms = doc.at("started_ms").get<long long>();
    r.run_id = doc.at("run_id").get<std::string>();
    r.master_addr = doc.at("master_addr").get<std::string>();
    r.port = doc.at("port").get<int>();
    r.nnodes = doc.at("nnodes").get<int>();
    r.node_rank = doc.at("node_rank").get<int>();
    r.hosts_store = doc.at("hosts_store").get<bool>();
    r.secret = doc.at("secret").get<bool>();
    r.cwd = doc.at("cwd").get<std::string>();
    r.command = doc.at("command").get<std::string>();
    r.status_socket = doc.value("status_socket", "");  // absent in an older launcher's record
    if (r.pid <= 0 || r.port <= 0 || r.port > 65535) return std::nullopt;
    return r;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;  // a field missing or of another type: not one of our records
  }
}

bool JobRecord::same_job(const JobRecord& o) const {
  return master_addr == o.master_addr && port == o.port && run_id == o.run_id;
}

std::string short_command(const std::string& program, const std::vector<std::string>& args) {
  std::string text = program;
  for (const std::string& a : args) text += " " + a;
  if (text.size() > kMaxCommandChars) text = text.substr(0, kMaxCommandChars - 3) + "...";
  return text;
}

JobChoice choose_job(std::vector<JobRecord> live, const std::string& caller_cwd) {
  // Newest first; the store's host before the other launchers of its job.
  std::sort(live.begin(), live.end(), [](const JobRecord& a, const JobRecord& b) {
    if (a.started_ms != b.started_ms) return a.started_ms > b.started_ms;
    return a.pid > b.pid;
  });
  std::vector<JobRecord> jobs;
  for (const JobRecord& r : live) {
    const auto same = std::find_if(jobs.begin(), jobs.end(), [&r](const JobRecord& j) { return j.same_job(r); });
    if (same == jobs.end()) {
      jobs.push_back(r);
    } else if (r.hosts_store && !same->hosts_store) {
      *same = r;  // keeps the job's place in the order (its newest launcher's)
    }
  }
  JobChoice choice;
  std::vector<JobRecord> here;
  std::copy_if(jobs.begin(), jobs.end(), std::back_inserter(here),
               [&caller_cwd](const JobRecord& j) { return j.cwd == caller_cwd; });
  if (jobs.size() > 1 && here.size() != 1) {
    choice.ambiguous = here.empty() ? jobs : here;
    return choice;
  }
  if (jobs.empty()) return choice;
  choice.chosen = jobs.size() == 1 ? jobs.front() : here.front();
  std::copy_if(jobs.begin(), jobs.end(), std::back_inserter(choice.others),
               [&choice](const JobRecord& j) { return !j.same_job(*choice.chosen); });
  return choice;
}

std::string describe_job(const JobRecord& job, long long now_ms) {
  const auto age = std::chrono::duration_cast<std::chrono::seconds>(
      std::chrono::milliseconds(std::max(0LL, now_ms - job.started_ms)));
  return fmt::format("job '{}' at {} (pid {}, started {} ago: {}, in {})", job.run_id,
                     rendezvous::format_endpoint(job.master_addr, static_cast<std::uint16_t>(job.port)), job.pid,
                     format_whole_seconds(age), job.command, job.cwd);
}

std::string selecting_flags(const JobRecord& job) {
  std::string flags;
  if (job.master_addr != "127.0.0.1") flags += "--master_addr " + shell_word(job.master_addr) + " ";
  return flags + fmt::format("--master_port {} --rdzv_id {}", job.port, shell_word(job.run_id));
}

}  // namespace ddp::launcher
