// See round_events.hpp.
#include "launcher/events/round_events.hpp"

#include <algorithm>

namespace ddp::launcher {

const std::string& RoundView::host(int node) const {
  static const std::string kUnknown;
  if (node < 0 || node >= static_cast<int>(hosts.size())) return kUnknown;
  return hosts[static_cast<std::size_t>(node)];
}

void RoundEvents::remove(RoundListener& listener) {
  listeners_.erase(std::remove(listeners_.begin(), listeners_.end(), &listener), listeners_.end());
}

}  // namespace ddp::launcher
