// See recorder.hpp. The fast path leans on torch's layout (nlohmann's dump: sorted keys,
// no spaces): "pg_config", "pg_status" and "version" follow "entries", so the document's tail from
// the last "pg_config" key is a small object of its own; and in each entry "pg_id" is followed by
// "process_group". Anything else falls back to the full parse, never to a wrong answer.
#include "launcher/watch/fr/recorder.hpp"

#include <cctype>
#include <cstdlib>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace ddp::launcher {
namespace {

using nlohmann::json;
using Names = std::map<std::string, std::pair<std::string, std::string>>;  // pg_id → (name, desc)

// torch writes pg_status's counters as strings ("-1"); a number is read as well.
long long number(const json& object, const char* key, long long fallback) {
  const auto it = object.find(key);
  if (it == object.end()) return fallback;
  if (it->is_number_integer()) return it->get<long long>();
  if (it->is_string()) {
    const std::string& s = it->get_ref<const std::string&>();
    char* end = nullptr;
    const long long v = std::strtoll(s.c_str(), &end, 10);
    return end != s.c_str() && *end == 0 ? v : fallback;
  }
  return fallback;
}

std::string text(const json& object, const char* key) {
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::string id_of(const json& pg_id) {
  if (pg_id.is_number_integer()) return std::to_string(pg_id.get<long long>());
  return pg_id.is_string() ? pg_id.get<std::string>() : std::string();
}

// pg_config's ranks: "[0, 1]" (torch 2.15) or an array.
std::vector<int> ranks_of(const json& config) {
  std::vector<int> ranks;
  const auto it = config.find("ranks");
  if (it == config.end()) return ranks;
  const json list = it->is_string() ? json::parse(it->get<std::string>(), nullptr, false) : *it;
  if (!list.is_array()) return ranks;
  for (const json& r : list) {
    if (r.is_number_integer()) ranks.push_back(r.get<int>());
  }
  return ranks;
}

// The groups from pg_status, named by `names`, their ranks from pg_config (recorder.hpp).
std::map<std::string, FrGroup> join_groups(const json& config, const json& status, const Names& names) {
  std::map<std::string, FrGroup> groups;
  for (const auto& [id, s] : status.items()) {
    FrGroup& g = groups[id];
    g.id = id;
    g.last_enqueued = number(s, "last_enqueued_collective", -1);
    g.last_started = number(s, "last_started_collective", -1);
    g.last_completed = number(s, "last_completed_collective", -1);
  }
  for (const auto& [id, name] : names) {
    FrGroup& g = groups[id];  // an entry's group missing from pg_status: kept, counters unknown
    g.id = id;
    g.name = name.first;
    g.desc = name.second;
  }
  if (!config.is_object()) return groups;
  // ddplaunch's worker hook (python_hook.hpp) says each group's pg_id in its pg_config: the name
  // of a group whose entries this record lacks (a status without entries).
  for (const auto& [name, c] : config.items()) {
    if (!c.is_object() || !c.contains("pg_id")) continue;
    const auto it = groups.find(id_of(c["pg_id"]));
    if (it == groups.end() || !it->second.name.empty()) continue;
    it->second.name = name;
    it->second.desc = text(c, "desc");
  }
  for (auto& [id, g] : groups) {
    if (g.name.empty()) continue;
    const auto it = config.find(g.name);
    if (it != config.end()) g.ranks = ranks_of(*it);
  }
  if (groups.size() == 1 && config.size() == 1 && groups.begin()->second.ranks.empty())
    groups.begin()->second.ranks = ranks_of(config.begin().value());
  return groups;
}

// "[1000]", "[1000], [2, 3]".
std::string shapes(const json& sizes) {
  std::string out;
  if (!sizes.is_array()) return out;
  for (const json& s : sizes) out += (out.empty() ? "" : ", ") + s.dump(-1, ' ', false);
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (out[i] == ',' && i + 1 < out.size() && out[i + 1] != ' ') out.insert(i + 1, " ");
  }
  return out;
}

// "Float" when all are, else "Float, Half".
std::string types(const json& dtypes) {
  std::set<std::string> seen;
  std::string out;
  if (!dtypes.is_array()) return out;
  for (const json& d : dtypes) {
    if (d.is_string() && seen.insert(d.get<std::string>()).second)
      out += (out.empty() ? "" : ", ") + d.get<std::string>();
  }
  return out;
}

std::string in_out(const std::string& in, const std::string& out) {
  return out.empty() || out == in ? in : in + " -> " + out;
}

std::string frames_of(const json& e) {
  std::string out;
  const auto it = e.find("frames");
  if (it == e.end() || !it->is_array()) return out;
  for (const json& f : *it) {
    if (!f.is_object()) continue;
    out += fmt::format("{}:{} in {}\n", text(f, "filename"), number(f, "line", 0), text(f, "name"));
  }
  return out;
}

FrEntry entry_of(const json& e) {
  FrEntry out;
  if (const auto it = e.find("pg_id"); it != e.end()) out.group_id = id_of(*it);
  if (const auto it = e.find("process_group"); it != e.end() && it->is_array() && !it->empty() && (*it)[0].is_string())
    out.group_name = (*it)[0].get<std::string>();
  out.seq = number(e, "collective_seq_id", 0);
  out.p2p = e.value("is_p2p", false);
  out.p2p_seq = number(e, "p2p_seq_id", 0);
  out.op = text(e, "profiling_name");
  out.sizes = in_out(shapes(e.value("input_sizes", json())), shapes(e.value("output_sizes", json())));
  out.dtypes = in_out(types(e.value("input_dtypes", json())), types(e.value("output_dtypes", json())));
  out.completed = e.value("retired", false) || text(e, "state") == "completed";
  out.created_ns = number(e, "time_created_ns", 0);
  out.frames = frames_of(e);
  return out;
}

FrSnapshot invalid(std::string why) {
  FrSnapshot s;
  s.error = std::move(why);
  return s;
}

// The end (one past) of the JSON array starting at `open` ('['), strings and escapes skipped; npos
// if it does not close.
std::size_t array_end(const std::string& s, std::size_t open) {
  int depth = 0;
  for (std::size_t i = open; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '"') {
      for (++i; i < s.size() && s[i] != '"'; ++i) {
        if (s[i] == '\\') ++i;
      }
    } else if (c == '[') {
      ++depth;
    } else if (c == ']' && --depth == 0) {
      return i + 1;
    }
  }
  return std::string::npos;
}

// Each pg_id's (name, desc), read from the newest entries back, until every id in `wanted` has
// one; `found` tells whether any entry was laid out as expected at all.
Names scan_names(const std::string& doc, std::size_t end, std::set<std::string> wanted, bool& found) {
  static const std::string kPgId = "\"pg_id\":";
  static const std::string kGroup = ",\"process_group\":";
  Names names;
  found = false;
  std::size_t at = end;
  while (!wanted.empty() && at > 0) {
    at = doc.rfind(kPgId, at - 1);
    if (at == std::string::npos) break;
    std::size_t i = at + kPgId.size();
    const std::size_t digits = i;
    while (i < end && (std::isdigit(static_cast<unsigned char>(doc[i])) || doc[i] == '-')) ++i;
    if (i == digits || doc.compare(i, kGroup.size(), kGroup) != 0) continue;
    const std::size_t open = i + kGroup.size();
    const std::size_t close = open < end && doc[open] == '[' ? array_end(doc, open) : std::string::npos;
    if (close == std::string::npos || close > end) continue;
    const json group = json::parse(doc.begin() + open, doc.begin() + close, nullptr, false);
    if (!group.is_array() || group.size() < 2 || !group[0].is_string() || !group[1].is_string()) continue;
    found = true;
    const std::string id = doc.substr(digits, i - digits);
    if (wanted.erase(id)) names[id] = {group[0].get<std::string>(), group[1].get<std::string>()};
  }
  return names;
}

}  // namespace

FrSnapshot parse_fr_trace(const std::string& text_in) {
  json doc;
  try {
    doc = json::parse(text_in);
  } catch (const json::parse_error& e) {
    return invalid(fmt::format("the flight record is not JSON: {}", e.what()));
  }
  if (!doc.is_object() || !doc.contains("pg_status") || !doc["pg_status"].is_object())
    return invalid("the flight record has no pg_status object (not torch's fr_trace_json?)");
  FrSnapshot s;
  Names names;
  if (const auto it = doc.find("entries"); it != doc.end() && it->is_array()) {
    for (const json& e : *it) {
      if (!e.is_object()) continue;
      s.entries.push_back(entry_of(e));
      const FrEntry& last = s.entries.back();
      if (!last.group_name.empty()) {
        const auto p = e.find("process_group");
        names[last.group_id] = {last.group_name,
                                p->size() > 1 && (*p)[1].is_string() ? (*p)[1].get<std::string>() : ""};
      }
    }
  }
  s.groups = join_groups(doc.value("pg_config", json::object()), doc["pg_status"], names);
  s.valid = true;
  return s;
}

FrSnapshot parse_fr_status(const std::string& text_in) {
  const std::size_t tail = text_in.rfind("\"pg_config\":");
  if (tail == std::string::npos) return parse_fr_trace(text_in);
  const json rest = json::parse("{" + text_in.substr(tail), nullptr, false);
  if (!rest.is_object() || !rest.contains("pg_status") || !rest["pg_status"].is_object())
    return parse_fr_trace(text_in);
  std::set<std::string> ids;
  for (const auto& [id, unused] : rest["pg_status"].items()) ids.insert(id);
  bool found = false;
  Names names = scan_names(text_in, tail, ids, found);
  const std::size_t entries = text_in.find("\"entries\":[");
  const bool has_entries = entries != std::string::npos && entries < tail && text_in.compare(entries + 11, 1, "]") != 0;
  if (has_entries && !found) return parse_fr_trace(text_in);  // not laid out as torch writes it
  FrSnapshot s;
  s.groups = join_groups(rest.value("pg_config", json::object()), rest["pg_status"], names);
  s.valid = true;
  return s;
}

std::string readable_group_desc(const std::string& desc) {
  if (desc == "default_pg") return "the default group";
  if (desc == "undefined") return "";
  return desc;
}

}  // namespace ddp::launcher
