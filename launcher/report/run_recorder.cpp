// See run_recorder.hpp.
#include "launcher/report/run_recorder.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/log.hpp"
#include "common/signals.hpp"
#include "launcher/report/failure_summary.hpp"
#include "launcher/report/output_file.hpp"

namespace ddp::launcher {
namespace {

using nlohmann::json;

double epoch_seconds(std::chrono::system_clock::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

json event(const char* name) {
  return json{{"time", epoch_seconds(std::chrono::system_clock::now())}, {"event", name}};
}

json optional_text(const std::string& text) {
  return text.empty() ? json(nullptr) : json(text);
}

json rank_json(const RankOutcome& o) {
  const WorkerResult& w = o.worker;
  json j{{"rank", w.rank},
         {"local_rank", w.local_rank},
         {"pid", w.pid},
         {"state", state_name(o.state)},
         {"exit_code", w.exit_code},
         {"signal", w.term_signal ? json(signal_name(w.term_signal)) : json(nullptr)},
         {"time", epoch_seconds(o.state == RankState::Failed ? o.failed_at() : o.exited)},
         {"note", optional_text(o.death_note)},
         {"error_file", optional_text(o.record ? w.error_file : "")}};
  j["error"] = o.record ? optional_text(o.record->message) : json(nullptr);
  j["traceback"] = o.record ? optional_text(o.record->traceback) : json(nullptr);
  if (o.state != RankState::Succeeded && !(o.record && !o.record->message.empty())) j["stderr_tail"] = w.stderr_tail;
  return j;
}

json failed_round_json(const FailedRound& r) {
  return json{{"round", r.round},
              {"exit_code", r.code},
              {"origin_node", r.origin_node < 0 ? json(nullptr) : json(r.origin_node)},
              {"cause", r.cause},
              {"progress", optional_text(r.progress)},
              {"progress_nodes", r.progress_nodes}};
}

}  // namespace

RunRecorder::RunRecorder(RunRecorderOptions options) : o_(std::move(options)) {
  for (const std::string& path : o_.summary_json) check_output_file("--summary_json", path);
  if (o_.event_log.empty()) return;
  check_output_file("--event_log", o_.event_log);
  fd_ = ::open(o_.event_log.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    throw UsageError("--event_log " + o_.event_log + ": cannot open: " + std::strerror(errno) +
                     "; give a writable file (its directory must exist)");
  }
}

RunRecorder::~RunRecorder() {
  if (fd_ >= 0) ::close(fd_);
}

void RunRecorder::append(const std::string& line) {
  if (fd_ < 0) return;
  const std::string text = line + "\n";
  // O_APPEND: each line lands whole at the end, also with other writers of the same file.
  const ssize_t n = ::write(fd_, text.data(), text.size());
  if (n == static_cast<ssize_t>(text.size())) return;
  if (!warned_) {
    log::warning("--event_log {}: {}; later events may be missing from it", o_.event_log,
                 n < 0 ? std::strerror(errno) : "short write");
  }
  warned_ = true;
}

void RunRecorder::round_joined(int round, int group_rank, int nnodes, int world_size, bool standby) {
  standby_ = standby;
  if (fd_ < 0) return;
  json e = event("round_joined");
  e.update({{"run_id", o_.run_id},
            {"round", round},
            {"node_rank", group_rank},
            {"host", o_.host},
            {"nnodes", nnodes},
            {"world_size", world_size},
            {"standby", standby}});
  append(e.dump(-1, ' ', false, json::error_handler_t::replace));
}

void RunRecorder::workers_started(int round, const std::vector<WorkerSpec>& specs, const std::vector<int>& pids) {
  if (fd_ < 0) return;
  json workers = json::array();
  for (std::size_t i = 0; i < specs.size() && i < pids.size(); ++i)
    workers.push_back({{"rank", specs[i].rank}, {"local_rank", specs[i].local_rank}, {"pid", pids[i]}});
  json e = event("workers_started");
  e.update({{"round", round}, {"workers", workers}});
  append(e.dump(-1, ' ', false, json::error_handler_t::replace));
}

void RunRecorder::worker_exited(int round, const RankOutcome& outcome) {
  if (fd_ < 0) return;
  json e = event("worker_exited");
  e["round"] = round;
  e.update(rank_json(outcome));
  e.erase("traceback");  // in the summary; one line per event stays short
  e.erase("stderr_tail");
  append(e.dump(-1, ' ', false, json::error_handler_t::replace));
}

void RunRecorder::teardown(int round, const Outcome& cause, int signal_sent) {
  if (fd_ < 0) return;
  json e = event("teardown");
  e.update({{"round", round},
            {"code", cause.code},
            {"origin_node", cause.origin_node < 0 ? json(nullptr) : json(cause.origin_node)},
            {"reason", summary_first_line(cause.summary)},
            {"signal", signal_name(signal_sent)}});
  append(e.dump(-1, ' ', false, json::error_handler_t::replace));
}

void RunRecorder::hang(int round, const std::string& stacks_file, bool collective) {
  if (fd_ < 0) return;
  json e = event(collective ? "hang" : "hang_suspected");
  e.update({{"round", round}, {"stacks_file", optional_text(stacks_file)}});
  append(e.dump(-1, ' ', false, json::error_handler_t::replace));
}

void RunRecorder::restart(int restart, int max_restarts) {
  if (fd_ < 0) return;
  json e = event("restart");
  e.update({{"restart", restart}, {"max_restarts", max_restarts}});
  append(e.dump(-1, ' ', false, json::error_handler_t::replace));
}

void RunRecorder::round_failed(const FailedRound& round) {
  failed_rounds_.push_back(round);
  if (fd_ < 0) return;
  json e = event("round_failed");
  e.update(failed_round_json(round));
  append(e.dump(-1, ' ', false, json::error_handler_t::replace));
}

void RunRecorder::job_ended(int exit_code, int group_rank, int restarts, const RoundReport& last_round,
                            const std::optional<Outcome>& cause, const std::string& cause_host) {
  json end = event("job_ended");
  end.update({{"exit_code", exit_code}, {"restarts", restarts}});
  append(end.dump(-1, ' ', false, json::error_handler_t::replace));
  if (o_.summary_json.empty()) return;
  std::vector<const RankOutcome*> by_rank;
  for (const RankOutcome& o : last_round.ranks()) by_rank.push_back(&o);
  std::sort(by_rank.begin(), by_rank.end(), [](auto* a, auto* b) { return a->worker.rank < b->worker.rank; });
  json ranks = json::array();
  for (const RankOutcome* o : by_rank) ranks.push_back(rank_json(*o));
  json root(nullptr);
  if (const RankOutcome* local = last_round.root_cause(); local && cause && cause->origin_node == group_rank) {
    root = rank_json(*local);
    root.update({{"node_rank", group_rank}, {"host", o_.host}});
  } else if (cause && exit_code != 0) {
    root = {{"node_rank", cause->origin_node < 0 ? json(nullptr) : json(cause->origin_node)},
            {"host", optional_text(cause_host)},
            {"summary", cause->summary}};
  }
  json rounds = json::array();
  for (const FailedRound& r : failed_rounds_) rounds.push_back(failed_round_json(r));
  const json summary{{"version", 1},           {"run_id", o_.run_id},  {"node_rank", group_rank}, {"host", o_.host},
                     {"exit_code", exit_code}, {"restarts", restarts}, {"root_cause", root},      {"ranks", ranks},
                     {"rounds", rounds},       {"standby", standby_}};  // the last round's: a standby node has no ranks
  const std::string text = summary.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
  for (const std::string& path : o_.summary_json) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) log::warning("--summary_json {}: cannot write it: {}", path, std::strerror(errno));
  }
}

}  // namespace ddp::launcher
