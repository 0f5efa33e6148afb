// See codec.hpp.
#include "launcher/watch/fr/codec.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace ddp::launcher {
namespace {

using nlohmann::json;

constexpr std::size_t kMaxGroups = 64;
constexpr std::size_t kMaxText = 512;

std::string bounded(const std::string& s) {
  return s.size() <= kMaxText ? s : s.substr(0, kMaxText) + "...";
}

// The entries the analysis looks at, oldest first (codec.hpp).
std::vector<const FrEntry*> kept_entries(const FrSnapshot& fr, const std::string& group_id) {
  std::vector<const FrEntry*> open[2], done[2];  // [p2p]
  for (const FrEntry& e : fr.entries) {
    if (e.group_id != group_id) continue;
    if (e.completed) {
      done[e.p2p].push_back(&e);
    } else if (open[e.p2p].size() < (e.p2p ? 2u : 4u)) {
      open[e.p2p].push_back(&e);
    }
  }
  std::vector<const FrEntry*> out;
  for (int p2p = 0; p2p < 2; ++p2p) {
    const std::size_t keep = p2p ? 1 : 2;
    const std::size_t from = done[p2p].size() > keep ? done[p2p].size() - keep : 0;
    out.insert(out.end(), done[p2p].begin() + static_cast<std::ptrdiff_t>(from), done[p2p].end());
    out.insert(out.end(), open[p2p].begin(), open[p2p].end());
  }
  std::stable_sort(out.begin(), out.end(), [](const FrEntry* a, const FrEntry* b) { return a < b; });  // buffer order
  return out;
}

json encode_entry(const FrEntry& e) {
  return {{"g", e.group_id},   {"n", e.group_name},     {"s", e.seq},
          {"p", e.p2p},        {"ps", e.p2p_seq},       {"op", e.op},
          {"sz", e.sizes},     {"dt", e.dtypes},        {"c", e.completed},
          {"t", e.created_ns}, {"f", bounded(e.frames)}};
}

FrEntry decode_entry(const json& j) {
  FrEntry e;
  e.group_id = j.at("g").get<std::string>();
  e.group_name = j.at("n").get<std::string>();
  e.seq = j.at("s").get<long long>();
  e.p2p = j.at("p").get<bool>();
  e.p2p_seq = j.at("ps").get<long long>();
  e.op = j.at("op").get<std::string>();
  e.sizes = j.at("sz").get<std::string>();
  e.dtypes = j.at("dt").get<std::string>();
  e.completed = j.at("c").get<bool>();
  e.created_ns = j.at("t").get<std::int64_t>();
  e.frames = j.value("f", "");
  return e;
}

json encode_rank(const RankFr& r) {
  json groups = json::array(), entries = json::array();
  for (const auto& [id, g] : r.fr.groups) {
    if (groups.size() == kMaxGroups) break;
    groups.push_back({{"id", g.id},
                      {"name", g.name},
                      {"desc", bounded(g.desc)},
                      {"ranks", g.ranks},
                      {"le", g.last_enqueued},
                      {"ls", g.last_started},
                      {"lc", g.last_completed}});
    for (const FrEntry* e : kept_entries(r.fr, id)) entries.push_back(encode_entry(*e));
  }
  const std::string frames = user_frames(r.traceback, 3);
  std::string traceback;
  if (!frames.empty()) {
    traceback = "Thread 0x0 (most recent call first):\n";
    for (std::size_t start = 0; start < frames.size();) {
      const std::size_t end = frames.find('\n', start);
      traceback += "  " + bounded(frames.substr(start, end - start)) + "\n";
      start = end == std::string::npos ? frames.size() : end + 1;
    }
  }
  return {{"rank", r.rank},           {"node", r.node},
          {"host", r.host},           {"pid", r.pid},
          {"reachable", r.reachable}, {"why_not", bounded(r.why_not)},
          {"valid", r.fr.valid},      {"error", bounded(r.fr.error)},
          {"groups", groups},         {"entries", entries},
          {"traceback", traceback},   {"taken_ns", r.taken_ns}};
}

RankFr decode_rank(const json& j) {
  RankFr r;
  r.rank = j.at("rank").get<int>();
  r.node = j.at("node").get<int>();
  r.host = j.at("host").get<std::string>();
  r.pid = j.at("pid").get<int>();
  r.reachable = j.at("reachable").get<bool>();
  r.why_not = j.at("why_not").get<std::string>();
  r.fr.valid = j.at("valid").get<bool>();
  r.fr.error = j.at("error").get<std::string>();
  for (const json& g : j.at("groups")) {
    FrGroup group;
    group.id = g.at("id").get<std::string>();
    group.name = g.at("name").get<std::string>();
    group.desc = g.at("desc").get<std::string>();
    group.ranks = g.at("ranks").get<std::vector<int>>();
    group.last_enqueued = g.at("le").get<long long>();
    group.last_started = g.at("ls").get<long long>();
    group.last_completed = g.at("lc").get<long long>();
    r.fr.groups[group.id] = std::move(group);
  }
  for (const json& e : j.at("entries")) r.fr.entries.push_back(decode_entry(e));
  r.traceback = j.at("traceback").get<std::string>();
  r.taken_ns = j.at("taken_ns").get<std::int64_t>();
  return r;
}

}  // namespace

std::string encode_rank_fr(const std::vector<RankFr>& ranks) {
  json out = json::array();
  for (const RankFr& r : ranks) out.push_back(encode_rank(r));
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::vector<RankFr> decode_rank_fr(const std::string& value) {
  std::vector<RankFr> ranks;
  const json doc = json::parse(value, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_array()) return ranks;
  for (const json& j : doc) {
    try {
      ranks.push_back(decode_rank(j));
    } catch (const json::exception&) {
      // Not one of ours: skipped.
    }
  }
  return ranks;
}

}  // namespace ddp::launcher
