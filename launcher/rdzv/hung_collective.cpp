// See hung_collective.hpp.
#include "launcher/rdzv/hung_collective.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "launcher/rdzv/json_member.hpp"

namespace ddp::launcher {

using nlohmann::json;

std::string op_name(const std::string& op, long long seq, bool p2p) {
  return fmt::format("{} {}#{}", op, p2p ? "p2p " : "", seq);
}

json encode_hung_collective(const HungCollective& c) {
  json calls = json::array();
  for (const CollectiveCall& call : c.calls)
    calls.push_back({{"op", call.op}, {"input", call.input}, {"ranks", call.ranks}, {"line", call.line}});
  json lines = json::object();
  for (const auto& [rank, line] : c.lines) lines[std::to_string(rank)] = line;
  return json{{"finding", c.finding},
              {"group", c.group},
              {"group_desc", c.group_desc},
              {"group_ranks", c.group_ranks},
              {"seq", c.seq},
              {"p2p", c.p2p},
              {"op", c.op},
              {"calls", calls},
              {"waiting", c.waiting},
              {"missing", c.missing},
              {"lines", lines}};
}

std::optional<HungCollective> decode_hung_collective(const json& j) {
  if (!j.is_object()) return std::nullopt;
  HungCollective c;
  if (!(take_member(j, "finding", c.finding) && take_member(j, "group", c.group) && take_member(j, "group_desc", c.group_desc) &&
        take_member(j, "group_ranks", c.group_ranks) && take_member(j, "seq", c.seq) && take_member(j, "p2p", c.p2p) &&
        take_member(j, "op", c.op) && take_member(j, "waiting", c.waiting) && take_member(j, "missing", c.missing)))
    return std::nullopt;
  if (const auto calls = j.find("calls"); calls != j.end()) {
    if (!calls->is_array()) return std::nullopt;
    for (const json& item : *calls) {
      CollectiveCall call;
      if (!item.is_object() || !take_member(item, "op", call.op) || !take_member(item, "input", call.input) ||
          !take_member(item, "ranks", call.ranks) || !take_member(item, "line", call.line))
        return std::nullopt;
      c.calls.push_back(std::move(call));
    }
  }
  if (const auto lines = j.find("lines"); lines != j.end()) {
    if (!lines->is_object()) return std::nullopt;
    for (const auto& [key, line] : lines->items()) {
      if (!line.is_string() || key.empty() || key.size() > 9 ||
          key.find_first_not_of("0123456789") != std::string::npos)
        return std::nullopt;
      c.lines[std::stoi(key)] = line.get<std::string>();
    }
  }
  return c;
}

}  // namespace ddp::launcher
