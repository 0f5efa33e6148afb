// See standby_members.hpp; the rule is written out there.
#include "launcher/rdzv/standby_members.hpp"

#include <algorithm>
#include <sstream>

#include "launcher/config/launch_config.hpp"

namespace ddp::launcher {

std::string node_identity(const NodeInfo& node) {
  return node.host + "|" + node.store_address + "|" + std::to_string(node.pid);
}

std::vector<std::size_t> order_members(const std::vector<NodeInfo>& arrived,
                                       const std::vector<std::string>& previous_active) {
  // A key per member: 0 for the host, 1 + its previous group rank for a node active before,
  // and past all of those for the others (a stable sort keeps their arrival order).
  const auto key = [&](const NodeInfo& n) -> std::size_t {
    if (n.node_rank == 0) return 0;
    const auto it = std::find(previous_active.begin(), previous_active.end(), node_identity(n));
    return it == previous_active.end() ? previous_active.size() + 1
                                       : 1 + static_cast<std::size_t>(it - previous_active.begin());
  };
  std::vector<std::size_t> order(arrived.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return key(arrived[a]) < key(arrived[b]); });
  return order;
}

RankMap standby_rank_map(const std::vector<NodeInfo>& arrived, const std::vector<std::size_t>& order,
                         int active_nodes) {
  std::vector<NodeInfo> ranked;
  for (std::size_t g = 0; g < order.size(); ++g) {
    NodeInfo n = arrived[order[g]];
    n.node_rank = static_cast<int>(g);
    n.standby = active_nodes > 0 && static_cast<int>(g) >= active_nodes;
    ranked.push_back(std::move(n));
  }
  return RankMap(std::move(ranked));
}

std::string format_order(const std::vector<std::size_t>& order) {
  std::string out;
  for (std::size_t i : order) out += (out.empty() ? "" : ",") + std::to_string(i);
  return out;
}

std::vector<std::size_t> parse_order(const std::string& text, std::size_t members) {
  std::vector<std::size_t> order;
  std::istringstream in(text);
  for (std::string field; std::getline(in, field, ',');) {
    // Written by the store's host: small decimal indices, each member once.
    if (field.empty() || field.size() > 6 || field.find_first_not_of("0123456789") != std::string::npos ||
        std::stoul(field) >= members || std::find(order.begin(), order.end(), std::stoul(field)) != order.end()) {
      throw UsageError("malformed member order '" + text +
                       "' in the store; is another job using the same --rdzv_id and port?");
    }
    order.push_back(std::stoul(field));
  }
  if (order.size() != members) {
    throw UsageError("malformed member order '" + text + "' in the store: " + std::to_string(members) +
                     " members expected; is another job using the same --rdzv_id and port?");
  }
  return order;
}

std::string format_active(const RankMap& ranks) {
  std::string out;
  for (const NodeInfo& n : ranks.nodes()) {
    if (!n.standby) out += node_identity(n) + "\n";
  }
  return out;
}

std::vector<std::string> parse_active(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

}  // namespace ddp::launcher
