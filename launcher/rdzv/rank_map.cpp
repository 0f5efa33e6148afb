// Rank assignment; the algorithm is spelled out in rank_map.hpp.
#include "launcher/rdzv/rank_map.hpp"

#include <algorithm>
#include <set>
#include <sstream>

#include <boost/asio/ip/address.hpp>

#include "ddplaunch/rendezvous/endpoint.hpp"

#include "launcher/config/launch_config.hpp"

namespace ddp::launcher {

std::string NodeInfo::serialize() const {
  return std::to_string(node_rank) + "\n" + std::to_string(nproc) + "\n" + address + "\n" + host + "\n" +
         std::to_string(pid) + "\n" + store_address;
}

NodeInfo NodeInfo::parse(const std::string& text) {
  std::istringstream in(text);
  NodeInfo n;
  std::string rank, nproc, pid;
  if (!std::getline(in, rank) || !std::getline(in, nproc) || !std::getline(in, n.address) ||
      !std::getline(in, n.host) || !std::getline(in, pid)) {
    throw UsageError("malformed node record in the store; is another job using the same --rdzv_id and port?");
  }
  const auto number = [&](const std::string& field) {
    // A record written by ddplaunch holds small decimal numbers; anything else is foreign.
    if (field.empty() || field.size() > 9 || field.find_first_not_of("0123456789") != std::string::npos) {
      throw UsageError("malformed node record in the store ('" + field +
                       "'); is another job using the same --rdzv_id and port?");
    }
    return std::stoi(field);
  };
  std::getline(in, n.store_address);  // the last line, empty for an in-process store
  n.node_rank = number(rank);
  n.nproc = number(nproc);
  n.pid = number(pid);
  return n;
}

RankMap::RankMap(std::vector<NodeInfo> nodes) : nodes_(std::move(nodes)) {
  std::sort(nodes_.begin(), nodes_.end(), [](const auto& a, const auto& b) { return a.node_rank < b.node_rank; });
  for (const auto& n : nodes_) {
    base_.push_back(world_size_);
    world_size_ += n.nproc;
  }
}

int RankMap::base_rank(int node_rank) const {
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].node_rank == node_rank) return base_[i];
  }
  return -1;
}

std::string RankMap::describe() const {
  std::ostringstream out;
  out << "rank map: " << nodes_.size() << " node(s), world size " << world_size_ << "\n";
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    const auto& n = nodes_[i];
    // The address only when it says more than the host name (a node without --local_addr
    // advertises its host name: "(vm, vm)" said it twice).
    out << "  node " << n.node_rank << " (" << n.host;
    if (n.address != n.host) out << ", " << n.address;
    // Where it reached the store from: a node that came back may have a new address.
    if (nodes_.size() > 1 && !n.store_address.empty() && n.store_address != n.address)
      out << ", from " << n.store_address;
    out << "): ranks " << base_[i];
    if (n.nproc > 1) out << "-" << base_[i] + n.nproc - 1;
    out << " (" << n.nproc << " worker" << (n.nproc == 1 ? "" : "s") << ")\n";
  }
  return out.str();
}

std::vector<std::string> RankMap::ip_addresses() const {
  std::set<std::string> out;
  for (const NodeInfo& n : nodes_) {
    for (const std::string& text : {n.store_address, rendezvous::unbracket_host(n.address)}) {
      boost::system::error_code ec;
      const auto a = boost::asio::ip::make_address(text, ec);
      if (!ec) out.insert(a.to_string());
    }
  }
  return {out.begin(), out.end()};
}

}  // namespace ddp::launcher
