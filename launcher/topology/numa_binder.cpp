// See numa_binder.hpp. Each mode is a function from (node, the devices on it, this one's place
// among them) to CPUs, as in torch/numa/binding.py, so the two can be read side by side.
#include "launcher/topology/numa_binder.hpp"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "ddplaunch/common/error.hpp"

namespace ddp::launcher {
namespace {

using Cpus = std::vector<const Machine::Cpu*>;

std::vector<int> numbers(const Cpus& cpus) {
  std::vector<int> out;
  for (const auto* c : cpus) out.push_back(c->os_index);
  std::sort(out.begin(), out.end());
  return out;
}

// Groups `cpus` by `key`, each group in CPU order; groups ordered by their lowest CPU.
template <class Key>
std::vector<Cpus> group_by(const Cpus& cpus, Key key) {
  std::map<int, Cpus> groups;
  for (const auto* c : cpus) groups[key(*c)].push_back(c);
  std::vector<Cpus> out;
  for (auto& [k, g] : groups) out.push_back(std::move(g));
  std::sort(out.begin(), out.end(),
            [](const Cpus& a, const Cpus& b) { return a.front()->os_index < b.front()->os_index; });
  return out;
}

// Where one worker goes: its NUMA node, and its place among the devices sharing that node.
struct Slot {
  int node = 0;
  int index = 0;  // among the devices of the node, in device order
  int count = 1;  // devices on the node
  std::string why;
};

class Binder {
 public:
  Binder(const Machine& m, const NumaBindingRequest& r) : request_(r) {
    const std::set<int> allowed(r.allowed_cpus.begin(), r.allowed_cpus.end());
    for (const auto& c : m.cpus)
      if (allowed.empty() || allowed.count(c.os_index) != 0) cpus_.push_back(&c);
    for (const auto* c : cpus_) {
      nodes_.insert(c->numa_node);
      packages_.insert(c->package);
    }
    if (cpus_.empty()) {
      throw UsageError(
          fmt::format("--numa_binding: none of the topology's CPUs is among those this launcher may use "
                      "({}); check the launcher's CPU mask (taskset -p)",
                      fmt::join(r.allowed_cpus, ",")));
    }
    for (int g : r.gpus) gpu_nodes_.push_back(m.gpus.at(g).numa_node);
    machine_ = &m;
  }

  CpuBinding bind(int local_rank) const {
    const Slot slot = request_.gpus.empty() ? cpu_slot(local_rank) : gpu_slot(local_rank);
    Cpus node = on_node(slot.node);
    if (node.empty()) {
      throw UsageError(
          fmt::format("--numa_binding: NUMA node {} ({}) has none of the CPUs this launcher may use ({}); "
                      "run ddplaunch with a CPU mask that includes it",
                      slot.node, slot.why, fmt::join(request_.allowed_cpus, ",")));
    }
    Cpus chosen;
    std::string place = fmt::format("NUMA node {}", slot.node);
    switch (request_.mode) {
      case NumaMode::Node:
        chosen = node;
        break;
      case NumaMode::Socket:
        chosen = on_package(node.front()->package);
        place = fmt::format("socket {}", node.front()->package);
        break;
      case NumaMode::Exclusive:
        chosen = exclusive(node, slot);
        place += fmt::format(", core slice {} of {}", slot.index + 1, slot.count);
        break;
      case NumaMode::CoreComplex: {
        // No cache known (some virtual machines): the node is one domain.
        auto domains = group_by(node, [](const Machine::Cpu& c) { return c.cache < 0 ? -1 : c.cache; });
        std::stable_sort(domains.begin(), domains.end(),
                         [](const Cpus& a, const Cpus& b) { return a.size() > b.size(); });
        const int k = slot.index % static_cast<int>(domains.size());
        chosen = domains[k];
        place += fmt::format(", L3 domain {} of {}", k + 1, domains.size());
        break;
      }
    }
    return CpuBinding{numbers(chosen), place + ", " + slot.why};
  }

 private:
  Slot gpu_slot(int local_rank) const {
    const int n = static_cast<int>(request_.gpus.size());
    if (local_rank >= n) {
      throw UsageError(fmt::format(
          "--numa_binding binds local rank i next to GPU i, but this node has {} GPU{} for {} workers; start at most "
          "{} worker{}, or hide the GPUs (CUDA_VISIBLE_DEVICES=) to spread CPU workers over the NUMA nodes",
          n, n == 1 ? "" : "s", request_.nproc, n, n == 1 ? "" : "s"));
    }
    Slot s;
    s.node = gpu_nodes_[local_rank];
    s.count = static_cast<int>(std::count(gpu_nodes_.begin(), gpu_nodes_.end(), s.node));
    s.index = static_cast<int>(std::count(gpu_nodes_.begin(), gpu_nodes_.begin() + local_rank, s.node));
    s.why = fmt::format("next to GPU {} ({})", local_rank, machine_->gpus[request_.gpus[local_rank]].pci_bus_id);
    return s;
  }

  // No GPU: round-robin over the nodes (for `socket`, over the sockets: its first node stands for it).
  Slot cpu_slot(int local_rank) const {
    std::vector<int> places;
    if (request_.mode == NumaMode::Socket) {
      for (int p : packages_) places.push_back(on_package(p).front()->numa_node);
    } else {
      places.assign(nodes_.begin(), nodes_.end());
    }
    const int n = static_cast<int>(places.size());
    Slot s;
    s.node = places[local_rank % n];
    s.index = local_rank / n;
    s.count = request_.nproc / n + (local_rank % n < request_.nproc % n ? 1 : 0);
    s.why = fmt::format("no GPU: local rank {} round-robin over {} {}", local_rank, n,
                        request_.mode == NumaMode::Socket ? "sockets" : "NUMA nodes");
    return s;
  }

  Cpus exclusive(const Cpus& node, const Slot& slot) const {
    const auto cores = group_by(node, [](const Machine::Cpu& c) { return c.core; });
    const int per = static_cast<int>(cores.size()) / slot.count;
    const int extra = static_cast<int>(cores.size()) % slot.count;
    if (per < 1) {
      throw UsageError(fmt::format(
          "--numa_binding=exclusive: NUMA node {} has {} physical core{} for {} workers; use --numa_binding=node or "
          "start fewer workers",
          slot.node, cores.size(), cores.size() == 1 ? "" : "s", slot.count));
    }
    const int start = slot.index * per + std::min(slot.index, extra);
    const int end = start + per + (slot.index < extra ? 1 : 0);
    Cpus out;
    for (int i = start; i < end; ++i) out.insert(out.end(), cores[i].begin(), cores[i].end());
    return out;
  }

  Cpus on_node(int node) const {
    Cpus out;
    for (const auto* c : cpus_)
      if (c->numa_node == node) out.push_back(c);
    return out;
  }
  Cpus on_package(int package) const {
    Cpus out;
    for (const auto* c : cpus_)
      if (c->package == package) out.push_back(c);
    return out;
  }

  const NumaBindingRequest& request_;
  const Machine* machine_ = nullptr;
  Cpus cpus_;
  std::set<int> nodes_, packages_;
  std::vector<int> gpu_nodes_;  // per local GPU index
};

}  // namespace

std::vector<CpuBinding> numa_bindings(const Machine& machine, const NumaBindingRequest& request) {
  DDP_ASSERT(request.nproc >= 1, "numa_bindings needs at least one worker");
  const Binder binder(machine, request);
  std::vector<CpuBinding> out;
  for (int lr = 0; lr < request.nproc; ++lr) out.push_back(binder.bind(lr));
  return out;
}

}  // namespace ddp::launcher
