// See stragglers.hpp.
#include "launcher/rdzv/stragglers.hpp"

#include <cmath>
#include <sstream>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace ddp::launcher {
namespace {

using json = nlohmann::ordered_json;

constexpr std::string_view kEntriesHeader = "ddplaunch-entries 1 ";
constexpr std::string_view kScoresHeader = "ddplaunch-stragglers 1\n";

json optional_number(const std::optional<double>& v) {
  return v ? json(*v) : json(nullptr);
}

std::optional<double> number_or_null(const json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  return it->get<double>();
}

// A lateness as people read it: "48 ms", "1.2 s".
std::string late_text(double ms) {
  return ms < 1000 ? fmt::format("{:.0f} ms", ms) : fmt::format("{:.1f} s", ms / 1000);
}

// How long: "40 s", "2 min", "3 h".
std::string span_text(double s) {
  if (s < 120) return fmt::format("{:.0f} s", s);
  if (s < 7200) return fmt::format("{:.0f} min", s / 60);
  return fmt::format("{:.0f} h", s / 3600);
}

}  // namespace

std::string encode_entries(const NodeEntries& e) {
  std::string out = fmt::format("{}{} {}\n", kEntriesHeader, e.node, e.host);
  for (const EntryTime& t : e.entries) {
    out += fmt::format("{} {} {} {} {}\n", t.rank, t.group, t.seq, t.entered_ns, t.signature);
  }
  return out;
}

std::optional<NodeEntries> decode_entries(const std::string& value) {
  if (value.compare(0, kEntriesHeader.size(), kEntriesHeader) != 0) return std::nullopt;
  std::istringstream in(value.substr(kEntriesHeader.size()));
  NodeEntries out;
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  std::istringstream head(line);
  if (!(head >> out.node)) return std::nullopt;
  std::getline(head >> std::ws, out.host);
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    EntryTime t;
    if (!(fields >> t.rank >> t.group >> t.seq >> t.entered_ns)) return std::nullopt;
    std::getline(fields >> std::ws, t.signature);
    out.entries.push_back(std::move(t));
  }
  return out;
}

namespace {

json scores_object(const StragglerScores& s) {
  json ranks = json::array();
  for (const RankLateness& r : s.ranks) {
    json history = json::array();
    for (const auto& [at, ms] : r.history) history.push_back({at, ms});
    ranks.push_back({{"rank", r.rank},
                     {"node", r.node},
                     {"host", r.host},
                     {"lateness_ms", r.lateness_ms},
                     {"step_fraction", optional_number(r.step_fraction)},
                     {"straggler", r.straggler},
                     {"since", optional_number(r.since)},
                     {"history", history}});
  }
  json nodes = json::array();
  for (const NodeLateness& n : s.nodes) {
    nodes.push_back({{"node", n.node},
                     {"host", n.host},
                     {"lateness_ms", n.lateness_ms},
                     {"straggler", n.straggler},
                     {"since", optional_number(n.since)}});
  }
  return {{"mode", to_string(s.mode)}, {"window_s", s.window_s}, {"ranks", ranks}, {"nodes", nodes}};
}

}  // namespace

std::string straggler_json(const StragglerScores& s) {
  return scores_object(s).dump();
}

std::string encode_scores(const StragglerScores& s) {
  json j = scores_object(s);
  j["scored_at"] = s.scored_at;
  return std::string(kScoresHeader) + j.dump();
}

std::optional<StragglerScores> decode_scores(const std::string& value) {
  if (value.compare(0, kScoresHeader.size(), kScoresHeader) != 0) return std::nullopt;
  try {
    const json j = json::parse(value.substr(kScoresHeader.size()));
    StragglerScores s;
    const auto mode = straggler_mode_from(j.at("mode").get<std::string>());
    if (!mode) return std::nullopt;
    s.mode = *mode;
    s.window_s = j.at("window_s").get<double>();
    s.scored_at = j.value("scored_at", 0.0);
    for (const json& r : j.at("ranks")) {
      RankLateness x;
      x.rank = r.at("rank").get<int>();
      x.node = r.at("node").get<int>();
      x.host = r.at("host").get<std::string>();
      x.lateness_ms = r.at("lateness_ms").get<double>();
      x.step_fraction = number_or_null(r, "step_fraction");
      x.straggler = r.at("straggler").get<bool>();
      x.since = number_or_null(r, "since");
      for (const json& h : r.at("history")) x.history.emplace_back(h.at(0).get<double>(), h.at(1).get<double>());
      s.ranks.push_back(std::move(x));
    }
    for (const json& n : j.at("nodes")) {
      s.nodes.push_back({n.at("node").get<int>(), n.at("host").get<std::string>(), n.at("lateness_ms").get<double>(),
                         n.at("straggler").get<bool>(), number_or_null(n, "since")});
    }
    return s;
  } catch (const json::exception&) {
    return std::nullopt;  // not what encode_scores wrote
  }
}

StragglerScores node_view(const StragglerScores& scores, int node) {
  StragglerScores out = scores;
  out.ranks.clear();
  for (const RankLateness& r : scores.ranks) {
    if (r.node == node) out.ranks.push_back(r);
  }
  return out;
}

std::string describe(const StragglerChange& c) {
  const std::string who = c.is_node ? fmt::format("node {} ({})", c.node, c.host)
                                    : fmt::format("rank {} on node {} ({})", c.rank, c.node, c.host);
  const std::string step =
      c.step_fraction ? fmt::format(", {:.0f}% of a step", std::round(*c.step_fraction * 100)) : std::string();
  if (!c.found) {
    return fmt::format("{} is no longer late ({} now), after {}", who, late_text(c.lateness_ms), span_text(c.for_s));
  }
  return fmt::format("{} enters collectives {} late{}{}, for {}", who, late_text(c.lateness_ms), step,
                     c.is_node ? " with most of its ranks" : "", span_text(c.for_s));
}

}  // namespace ddp::launcher
