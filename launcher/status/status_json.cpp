// See status_json.hpp.
#include "launcher/status/status_json.hpp"

#include <nlohmann/json.hpp>

#include "launcher/config/version.hpp"
#include "launcher/rdzv/hung_collective.hpp"

namespace ddp::launcher {
namespace {

// Insertion order kept: the document reads top-down (who, where, the round, the ranks).
using json = nlohmann::ordered_json;

double seconds(std::int64_t ns) {
  return static_cast<double>(ns) / 1e9;
}

// What the node does now: the board's state, refined by its ranks (every local worker exited 0
// while running: it waits for the job's outcome; all gone while stopping: stopped).
std::string node_state(const StatusSnapshot& s) {
  if (s.ranks.empty()) return s.state;
  bool all_exited = true;
  bool all_zero = true;
  for (const RankStatus& r : s.ranks) {
    all_exited = all_exited && r.state == "exited";
    all_zero = all_zero && r.exit_code == 0;
  }
  if (!all_exited) return s.state;
  if (s.state == "running" && all_zero) return "succeeded";
  if (s.state == "stopping") return "stopped";
  return s.state;
}

// A Python rank's Flight Recorder counts as the last poll saw them; null before any answer.
json flight_recorder_progress(const StatusSnapshot& s, const RankStatus& r) {
  const auto it = s.flight_recorders.find(r.rank);
  if (it == s.flight_recorders.end()) return nullptr;
  const FrProgress& p = it->second;
  return {{"source", "flight_recorder"},
          {"collectives_completed", p.completed},
          {"in_collective", p.waiting_in.empty() ? json(nullptr) : json(p.waiting_in)},
          {"op", p.op.empty() || p.waiting_in.empty() ? json(nullptr) : json(p.op)},
          {"time", seconds(p.changed_ns)},
          {"age_s", seconds(s.now_ns - p.changed_ns)}};
}

// The rank's last progress the launcher sees: its collective-progress slot, when a worker of
// this round attached to it (the ddplaunch runtime), else its Flight Recorder (a Python worker
// with a worker server); null otherwise.
json last_progress(const StatusSnapshot& s, const RankStatus& r) {
  if (r.slot < 0 || r.slot >= static_cast<int>(s.progress.size())) return flight_recorder_progress(s, r);
  const CollectiveProgress& p = s.progress[static_cast<std::size_t>(r.slot)];
  if (!p.attached() || p.pid != r.pid) return flight_recorder_progress(s, r);
  const std::int64_t at = p.inside() ? p.entered_ns : p.completed_ns;
  json out = {{"source", "collectives"},
              {"collectives_completed", p.completed},
              {"in_collective", p.inside() ? json(to_string(p.kind)) : json(nullptr)},
              {"op", p.inside() ? json(op_name(to_string(p.kind), static_cast<long long>(p.entered))) : json(nullptr)},
              {"time", at > 0 ? json(seconds(at)) : json(nullptr)},
              {"age_s", at > 0 ? json(seconds(s.now_ns - at)) : json(nullptr)}};
  return out;
}

json rank_json(const StatusSnapshot& s, const RankStatus& r) {
  json out = {{"rank", r.rank}, {"local_rank", r.local_rank}, {"pid", r.pid}, {"state", r.state}};
  if (r.state == "exited") {
    out["exit_code"] = r.exit_code;
    out["signal"] = r.signal != 0 ? json(r.signal) : json(nullptr);
    out["exited_at"] = seconds(r.exited_ns);
  }
  out["last_progress"] = last_progress(s, r);
  return out;
}

}  // namespace

std::string status_json(const StatusSnapshot& s) {
  json nodes = json::array();
  for (const NodeStatus& n : s.nodes) {
    nodes.push_back({{"group_rank", n.group_rank},
                     {"host", n.host},
                     {"first_rank", n.first_rank},
                     {"nproc", n.nproc},
                     {"role", n.standby ? "standby" : "active"}});
  }
  json ranks = json::array();
  for (const RankStatus& r : s.ranks) ranks.push_back(rank_json(s, r));
  bool standby = false;
  for (const NodeStatus& n : s.nodes) standby = standby || (n.group_rank == s.group_rank && n.standby);
  json hang = {{"state", s.hang}};
  if (s.hang != "none") {
    hang["since"] = seconds(s.hang_ns);
    hang["summary"] = s.hang_summary;
  }
  json stop = nullptr;
  if (s.state == "stopping")
    stop = {{"code", s.stop_code}, {"origin_node", s.stop_origin >= 0 ? json(s.stop_origin) : json(nullptr)}};
  json causes = json::array();
  for (const RoundCause& c : s.causes) {
    json cause = {{"round", c.round}, {"code", c.code}, {"kind", c.kind},
                  {"node", c.node >= 0 ? json(c.node) : json(nullptr)},
                  {"host", c.host.empty() ? json(nullptr) : json(c.host)},
                  {"time", c.time_ns > 0 ? json(seconds(c.time_ns)) : json(nullptr)}};
    if (c.rank >= 0) {
      cause["rank"] = c.rank;
      cause["exit_code"] = c.exit_code;
      cause["signal"] = c.signal != 0 ? json(c.signal) : json(nullptr);
      cause["error_type"] = c.error_type.empty() ? json(nullptr) : json(c.error_type);
    }
    causes.push_back(std::move(cause));
  }
  const json doc = {
      {"ddplaunch_version", kVersion},
      {"job_id", s.id.job_id},
      {"time", seconds(s.now_ns)},
      {"uptime_s", seconds(s.now_ns - s.started_ns)},
      {"node",
       {{"host", s.id.host},
        {"launcher_pid", s.pid},
        {"node_rank", s.id.node_rank},
        {"group_rank", s.group_rank >= 0 ? json(s.group_rank) : json(nullptr)},
        {"role", standby ? "standby" : "active"},
        {"state", node_state(s)}}},
      {"round", s.round},
      {"world_size", s.world_size},
      {"nodes", nodes},
      {"restarts", {{"count", s.restarts}, {"max", s.id.max_restarts}, {"causes", causes}}},
      {"ranks", ranks},
      {"hang", hang},
      {"stopping", stop},
      {"ended", s.ended ? json{{"exit_code", *s.ended}} : json(nullptr)},
      {"stragglers", s.stragglers ? json::parse(straggler_json(*s.stragglers)) : json(nullptr)},
  };
  return doc.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace ddp::launcher
