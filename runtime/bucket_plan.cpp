// See bucket_plan.hpp.
#include "runtime/bucket_plan.hpp"

#include <map>
#include <utility>

namespace ddp::runtime {

std::vector<std::vector<std::size_t>> plan_buckets(const std::vector<torch::Tensor>& params,
                                                   std::size_t first_cap_bytes, std::size_t cap_bytes) {
  struct Open {
    std::vector<std::size_t> params;
    std::size_t bytes = 0;
    bool first = true;
  };
  std::vector<std::vector<std::size_t>> out;
  // Keyed by (dtype, device); the vector keeps the order in which groups first appeared.
  std::map<std::pair<int, std::string>, std::size_t> group_of;
  std::vector<Open> groups;
  for (std::size_t k = params.size(); k-- > 0;) {
    const torch::Tensor& p = params[k];
    const auto key = std::make_pair(static_cast<int>(p.scalar_type()), p.device().str());
    auto [it, fresh] = group_of.emplace(key, groups.size());
    if (fresh) groups.emplace_back();
    Open& g = groups[it->second];
    g.params.push_back(k);
    g.bytes += static_cast<std::size_t>(p.numel()) * p.element_size();
    if (g.bytes >= (g.first ? first_cap_bytes : cap_bytes)) {
      out.push_back(std::move(g.params));
      g = Open{{}, 0, false};
    }
  }
  for (Open& g : groups)
    if (!g.params.empty()) out.push_back(std::move(g.params));
  return out;
}

}  // namespace ddp::runtime
