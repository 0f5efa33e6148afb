// See host_list.hpp.
#include "launcher/fleet/host_list.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "common/hostlist.hpp"
#include "ddplaunch/common/error.hpp"
#include "launcher/config/flag_parsers.hpp"

namespace ddp::launcher {
namespace {

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::string item;
  std::istringstream in(text);
  while (std::getline(in, item, sep)) out.push_back(item);
  return out;
}

void refuse_duplicate(const std::vector<FleetHost>& hosts, const std::string& name, const std::string& where) {
  for (const FleetHost& h : hosts) {
    if (h.name == name) throw UsageError(fmt::format("{}: host {} is given twice; give each host once", where, name));
  }
}

// One `host[:slot,slot]` of a spec: the host and its slots (empty: the whole host).
struct SpecEntry {
  std::string host;
  std::set<int> slots;
};

std::vector<SpecEntry> parse_spec(const std::string& flag, const std::string& spec) {
  std::vector<SpecEntry> out;
  for (const std::string& part : split(spec, '@')) {
    SpecEntry e;
    const auto colon = part.find(':');
    e.host = part.substr(0, colon);
    if (e.host.empty()) {
      throw UsageError(fmt::format("{}={}: an empty host name; use host[:slot,slot]@host", flag, spec));
    }
    if (colon != std::string::npos) {
      for (const std::string& slot : split_list(part.substr(colon + 1))) {
        e.slots.insert(parse_whole_number(fmt::format("{}={}: the slot of host {}", flag, spec, e.host), slot));
      }
    }
    out.push_back(std::move(e));
  }
  return out;
}

// The host's slots as a full list (0..slots-1), checking that `wanted` are among them.
std::vector<int> all_slots(const FleetHost& h, const std::set<int>& wanted, const std::string& flag,
                           const std::string& spec) {
  if (h.slots == 0) {
    throw UsageError(fmt::format("{}={}: host {} has no slots= in the hostfile; give slots=N there to pick slots",
                                 flag, spec, h.name));
  }
  for (const int s : wanted) {
    if (s < 0 || s >= h.slots) {
      throw UsageError(fmt::format("{}={}: host {} has slots 0..{}, not {}", flag, spec, h.name, h.slots - 1, s));
    }
  }
  std::vector<int> out;
  const std::vector<int>& from = h.slot_ids;
  if (!from.empty()) return from;
  for (int s = 0; s < h.slots; ++s) out.push_back(s);
  return out;
}

FleetHost& find_host(std::vector<FleetHost>& hosts, const std::string& name, const std::string& flag,
                     const std::string& spec) {
  for (FleetHost& h : hosts) {
    if (h.name == name) return h;
  }
  throw UsageError(fmt::format("{}={}: host {} is not in the host list; use a name from the hostfile or --hosts", flag,
                               spec, name));
}

}  // namespace

std::vector<FleetHost> parse_hostfile(const std::string& text, const std::string& path) {
  std::vector<FleetHost> hosts;
  int number = 0;
  for (std::string line : split(text, '\n')) {
    ++number;
    line = line.substr(0, line.find('#'));
    std::istringstream words(line);
    FleetHost h;
    if (!(words >> h.name)) continue;  // blank or a comment
    const std::string where = fmt::format("--hostfile {} line {}", path, number);
    std::string word;
    while (words >> word) {
      if (word.rfind("slots=", 0) != 0) {
        throw UsageError(fmt::format("{}: '{}' is not understood; write `host slots=N`", where, word));
      }
      h.slots = parse_whole_number(where + ": slots", word.substr(6));
      if (h.slots < 1) throw UsageError(fmt::format("{}: '{}' is not a positive number of slots", where, word));
    }
    refuse_duplicate(hosts, h.name, where);
    hosts.push_back(std::move(h));
  }
  if (hosts.empty()) {
    throw UsageError(fmt::format("--hostfile {} names no host; write one `host slots=N` line per host", path));
  }
  return hosts;
}

std::vector<FleetHost> hosts_from_list(const std::string& list) {
  std::vector<FleetHost> hosts;
  for (const std::string& name : expand_hostlist(list)) {
    refuse_duplicate(hosts, name, "--hosts " + list);
    hosts.push_back(FleetHost{name, 0, {}});
  }
  return hosts;
}

std::vector<FleetHost> select_hosts(std::vector<FleetHost> hosts, const std::string& include,
                                    const std::string& exclude) {
  if (!include.empty()) {
    std::vector<FleetHost> kept;
    for (const SpecEntry& e : parse_spec("--include", include)) {
      FleetHost h = find_host(hosts, e.host, "--include", include);
      if (!e.slots.empty()) {
        all_slots(h, e.slots, "--include", include);
        h.slot_ids.assign(e.slots.begin(), e.slots.end());
      }
      refuse_duplicate(kept, h.name, "--include=" + include);
      kept.push_back(std::move(h));
    }
    // In the hostfile's order: node 0 stays the first host of the file.
    std::vector<FleetHost> ordered;
    for (const FleetHost& h : hosts) {
      for (FleetHost& k : kept) {
        if (k.name == h.name) ordered.push_back(std::move(k));
      }
    }
    hosts = std::move(ordered);
  }
  if (!exclude.empty()) {
    for (const SpecEntry& e : parse_spec("--exclude", exclude)) {
      FleetHost& h = find_host(hosts, e.host, "--exclude", exclude);
      if (e.slots.empty()) {
        h.name.clear();  // removed below
        continue;
      }
      std::vector<int> left;
      for (const int s : all_slots(h, e.slots, "--exclude", exclude)) {
        if (e.slots.count(s) == 0) left.push_back(s);
      }
      if (left.empty()) h.name.clear();
      h.slot_ids = std::move(left);
    }
    hosts.erase(std::remove_if(hosts.begin(), hosts.end(), [](const FleetHost& h) { return h.name.empty(); }),
                hosts.end());
  }
  if (hosts.empty()) {
    throw UsageError(fmt::format("--include={} --exclude={} leave no host; keep at least one", include, exclude));
  }
  return hosts;
}

}  // namespace ddp::launcher
