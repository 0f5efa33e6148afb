// See run_recorder.hpp.
#include "launcher/events/run_recorder.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <type_traits>
#include <variant>

#include <nlohmann/json.hpp>

#include "common/log.hpp"
#include "common/signals.hpp"
#include "launcher/config/file_flag.hpp"
#include "launcher/report/failure_summary.hpp"

namespace ddp::launcher {
namespace {

using nlohmann::json;

double epoch_seconds(std::chrono::system_clock::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

json event_line(const char* name) {
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

// A hang's collective: its wire form, with the op named as --dump_stacks and --status name it.
json collective_json(const HungCollective& c) {
  json j = encode_hung_collective(c);
  j["name"] = op_name(c.op, c.seq, c.p2p);
  return j;
}

json failed_round_json(const FailedRound& r, const RoundTimes& times) {
  json root = root_cause_json(r.root, "");
  root.erase("summary");  // the round's words: the short cause above
  const bool started = times.joined.time_since_epoch().count() > 0;
  return json{
      {"round", r.round},
      {"started", started ? json(epoch_seconds(times.joined)) : json(nullptr)},
      {"ended", epoch_seconds(times.failed)},
      {"duration", started ? json(std::chrono::duration<double>(times.failed - times.joined).count()) : json(nullptr)},
      {"exit_code", r.code},
      {"origin_node", r.origin_node < 0 ? json(nullptr) : json(r.origin_node)},
      {"cause", r.cause()},
      {"progress", optional_text(r.progress)},
      {"progress_nodes", r.progress_nodes},
      {"root_cause", root}};
}

// A summary file: --summary_json's, or summary.json in the log directory (named by the same flag).
FileFlag summary_flag(const std::string& path) {
  return FileFlag{"--summary_json", path, FileUse::Write};
}

// Writes all of `text` to `fd`; false (errno set) when a write fails.
bool write_all(int fd, const std::string& text) {
  for (std::size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

// One straggler found or recovered, as the event log says it.
json straggler_line(const StragglerChange& c, int round) {
  json j = event_line(c.found ? "straggler" : "straggler_recovered");
  j.update({{"round", round},
            {"kind", c.is_node ? "node" : "rank"},
            {"rank", c.is_node ? json(nullptr) : json(c.rank)},
            {"node", c.node},
            {"host", c.host},
            {"lateness_ms", c.lateness_ms},
            {"step_fraction", c.step_fraction ? json(*c.step_fraction) : json(nullptr)},
            {"for_s", c.for_s},
            {"message", describe(c)}});
  return j;
}

json node_or_null(int node) {
  return node < 0 ? json(nullptr) : json(node);
}

}  // namespace

json root_cause_json(const RootCause& c, const std::string& summary) {
  const bool worker = c.kind == RootCause::Kind::Worker;
  const auto field = [worker](json value) { return worker ? std::move(value) : json(nullptr); };
  json j{{"kind", kind_name(c.kind)},
         {"node_rank", node_or_null(c.node)},
         {"host", optional_text(c.host)},
         {"time", epoch_seconds(c.time)},
         {"reason", worker ? json(nullptr) : optional_text(c.reason)},
         {"summary", summary},
         {"rank", field(c.rank)},
         {"local_rank", field(c.local_rank)},
         {"pid", field(c.pid)},
         {"state", field("failed")},
         {"exit_code", field(c.exit_code)},
         {"signal", c.signal ? json(signal_name(c.signal)) : json(nullptr)},
         {"note", optional_text(c.note)},
         {"error_file", optional_text(c.error_file)},
         {"error_type", optional_text(c.error_type)},
         {"error", optional_text(c.error)},
         {"traceback", optional_text(c.traceback)}};
  // As for a rank below: its last stderr lines when its error file does not explain it.
  if (worker && c.error.empty()) j["stderr_tail"] = c.stderr_tail;
  // From its last stderr line to its exit, in seconds (null: no line, or not a rank's failure).
  j["stderr_quiet"] = worker && c.stderr_quiet.count() > 0 ? json(std::chrono::duration<double>(c.stderr_quiet).count())
                                                           : json(nullptr);
  // A lost node: the node that stopped answering, since when and for how long when it was found.
  const bool lost = c.kind == RootCause::Kind::NodeLost;
  const bool silence_known = lost && c.silent_since.time_since_epoch().count() > 0;
  j["lost_node"] = lost ? node_or_null(c.lost_node) : json(nullptr);
  j["lost_host"] = lost ? optional_text(c.lost_host) : json(nullptr);
  j["silent_since"] = silence_known ? json(epoch_seconds(c.silent_since)) : json(nullptr);
  j["silent_for"] =
      silence_known ? json(std::chrono::duration<double>(c.time - c.silent_since).count()) : json(nullptr);
  j["collective"] = c.collective ? collective_json(*c.collective) : json(nullptr);
  return j;
}

RunRecorder::RunRecorder(RunRecorderOptions options) : o_(std::move(options)) {
  for (const std::string& path : o_.summary_json) check_file_flag(summary_flag(path));
  if (o_.event_log.empty()) return;
  const FileFlag log{"--event_log", o_.event_log, FileUse::Write};
  check_file_flag(log);
  fd_ = open_file_flag(log, O_WRONLY | O_APPEND | O_CREAT);
}

RunRecorder::~RunRecorder() {
  if (fd_ >= 0) ::close(fd_);
}

void RunRecorder::append(const json& line) {
  if (fd_ < 0) return;
  const std::string text = line.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  // O_APPEND: each line lands whole at the end, also with other writers of the same file.
  const ssize_t n = ::write(fd_, text.data(), text.size());
  if (n == static_cast<ssize_t>(text.size())) return;
  if (!warned_) {
    log::warning("--event_log {}: {}; later events may be missing from it", o_.event_log,
                 n < 0 ? std::strerror(errno) : "short write");
  }
  warned_ = true;
}

void RunRecorder::on_event(const RoundEvent& event) {
  std::visit(
      [this](const auto& e) {
        using E = std::decay_t<decltype(e)>;
        // Without --event_log no line is made: only what the summary keeps is noted (below).
        if constexpr (std::is_same_v<E, StragglersScored>) note_slowest(e.scores);
        if constexpr (!std::is_same_v<E, RoundJoined> && !std::is_same_v<E, RoundFailed> &&
                      !std::is_same_v<E, JobEnded>) {
          if (fd_ < 0) return;
        }
        if constexpr (std::is_same_v<E, RoundJoined>) {
          standby_ = e.view.standby;
          joined_ = std::chrono::system_clock::now();
          if (fd_ < 0) return;
          json j = event_line("round_joined");
          j.update({{"run_id", o_.run_id},
                    {"round", e.view.round},
                    {"node_rank", e.view.group_rank},
                    {"host", o_.host},
                    {"nnodes", e.view.nnodes()},
                    {"world_size", e.view.ranks.world_size()},
                    {"standby", e.view.standby}});
          append(j);
        } else if constexpr (std::is_same_v<E, WorkersStarted>) {
          json workers = json::array();
          for (std::size_t i = 0; i < e.specs.size() && i < e.pids.size(); ++i)
            workers.push_back({{"rank", e.specs[i].rank}, {"local_rank", e.specs[i].local_rank}, {"pid", e.pids[i]}});
          json j = event_line("workers_started");
          j.update({{"round", e.view.round}, {"workers", workers}});
          append(j);
        } else if constexpr (std::is_same_v<E, WorkerExited>) {
          json j = event_line("worker_exited");
          j["round"] = e.view.round;
          j.update(rank_json(e.outcome));
          j.erase("traceback");  // in the summary; one line per event stays short
          j.erase("stderr_tail");
          append(j);
        } else if constexpr (std::is_same_v<E, RoundStopping>) {
          json j = event_line("teardown");
          j.update({{"round", e.view.round},
                    {"code", e.cause.code},
                    {"origin_node", node_or_null(e.cause.origin_node)},
                    {"reason", summary_first_line(e.cause.summary)},
                    {"signal", signal_name(e.signal_sent)}});
          append(j);
        } else if constexpr (std::is_same_v<E, StragglersScored>) {
          for (const StragglerChange& c : e.changes) append(straggler_line(c, e.view.round));
        } else if constexpr (std::is_same_v<E, HangFound>) {
          json j = event_line(e.collective ? "hang" : "hang_suspected");
          j.update({{"round", e.view.round}, {"stacks_file", optional_text(e.stacks_file)}});
          append(j);
        } else if constexpr (std::is_same_v<E, RoundFailed>) {
          failed_rounds_.push_back({e.failed, {joined_, std::chrono::system_clock::now()}});
          if (fd_ < 0) return;
          json j = event_line("round_failed");
          j.update(failed_round_json(e.failed, failed_rounds_.back().second));
          append(j);
        } else if constexpr (std::is_same_v<E, JobRestarting>) {
          json j = event_line("restart");
          j.update({{"restart", e.restart}, {"max_restarts", e.max_restarts}});
          append(j);
        } else if constexpr (std::is_same_v<E, JobEnded>) {
          json j = event_line("job_ended");
          j.update({{"exit_code", e.exit_code}, {"restarts", e.view.restarts}});
          append(j);
          write_summary(e);
        }
      },
      event);
}

void RunRecorder::note_slowest(const StragglerScores& scores) {
  mode_ = to_string(scores.mode);
  for (const RankLateness& r : scores.ranks) {
    if (r.history.empty() || r.history.back().first != scores.scored_at) continue;  // not scored this time
    const auto [it, fresh] = slowest_ranks_.emplace(r.rank, r);
    if (fresh || r.lateness_ms > it->second.lateness_ms) it->second = r;
    it->second.straggler = it->second.straggler || r.straggler;
  }
  for (const NodeLateness& n : scores.nodes) {
    const auto [it, fresh] = slowest_nodes_.emplace(n.node, n);
    if (fresh || n.lateness_ms > it->second.lateness_ms) it->second = n;
  }
}

json RunRecorder::slowest_json() const {
  if (mode_.empty()) return nullptr;  // never scored (off, or too short a run)
  constexpr std::size_t kSlowest = 5;
  std::vector<const RankLateness*> ranks;
  for (const auto& [rank, r] : slowest_ranks_) ranks.push_back(&r);
  std::sort(ranks.begin(), ranks.end(), [](auto* a, auto* b) { return a->lateness_ms > b->lateness_ms; });
  std::vector<const NodeLateness*> nodes;
  for (const auto& [node, n] : slowest_nodes_) nodes.push_back(&n);
  std::sort(nodes.begin(), nodes.end(), [](auto* a, auto* b) { return a->lateness_ms > b->lateness_ms; });
  json r = json::array();
  for (std::size_t i = 0; i < ranks.size() && i < kSlowest; ++i) {
    r.push_back({{"rank", ranks[i]->rank},
                 {"node", ranks[i]->node},
                 {"host", ranks[i]->host},
                 {"lateness_ms", ranks[i]->lateness_ms},
                 {"step_fraction", ranks[i]->step_fraction ? json(*ranks[i]->step_fraction) : json(nullptr)},
                 {"straggler", ranks[i]->straggler}});
  }
  json n = json::array();
  for (std::size_t i = 0; i < nodes.size() && i < kSlowest; ++i) {
    n.push_back({{"node", nodes[i]->node}, {"host", nodes[i]->host}, {"lateness_ms", nodes[i]->lateness_ms}});
  }
  return {{"mode", mode_}, {"slowest_ranks", r}, {"slowest_nodes", n}};
}

void RunRecorder::write_summary(const JobEnded& end) {
  if (o_.summary_json.empty()) return;
  std::vector<const RankOutcome*> by_rank;
  for (const RankOutcome& o : end.last_round.ranks()) by_rank.push_back(&o);
  std::sort(by_rank.begin(), by_rank.end(), [](auto* a, auto* b) { return a->worker.rank < b->worker.rank; });
  json ranks = json::array();
  for (const RankOutcome* o : by_rank) ranks.push_back(rank_json(*o));
  const json root = end.root && end.exit_code != 0 ? root_cause_json(*end.root, end.root_text) : json(nullptr);
  json rounds = json::array();
  for (const auto& [r, times] : failed_rounds_) rounds.push_back(failed_round_json(r, times));
  const json summary{{"version", 1},
                     {"run_id", o_.run_id},
                     {"node_rank", end.view.group_rank},
                     {"host", o_.host},
                     {"exit_code", end.exit_code},
                     {"restarts", end.view.restarts},
                     {"root_cause", root},
                     {"ranks", ranks},
                     {"rounds", rounds},
                     {"standby", standby_},  // the last round's: a standby node has no ranks
                     {"stragglers", slowest_json()}};
  const std::string text = summary.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
  for (const std::string& path : o_.summary_json) {
    // Checked at the start, but opened as every kept file is (file_flag.hpp): a FIFO put there
    // since is refused at once instead of blocking the launcher's exit.
    const OpenedFile out = open_file(summary_flag(path), O_WRONLY | O_CREAT | O_TRUNC);
    if (out.fd < 0) {
      log::warning("{}", out.refused);
      continue;
    }
    if (!write_all(out.fd, text)) log::warning("--summary_json={}: cannot write it: {}", path, std::strerror(errno));
    ::close(out.fd);
  }
}

}  // namespace ddp::launcher
